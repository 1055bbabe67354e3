//! Embedding the engine: a protocol that calls a Rust guard function and a Rust action, driven event by event, every transition observed.

use std::sync::{Arc, Mutex};

use protocol_run::base::event::{Event, Origin};
use protocol_run::base::value::Value;
use protocol_run::pipeline::compile::compile_with;
use protocol_run::pipeline::extensions::Extensions;
use protocol_run::pipeline::load::load_text;
use protocol_run::runtime::run::{Interpreter, Record, RecordingHost};

/// A deployment watcher: failures are tolerated until `should_page` (Rust) says a human must
/// look; then `page_oncall` (Rust) pages and raises `page.sent`.
const PROTOCOL: &str = r#"
id: deploy-watch
inputs:
  service: { type: string, default: api }
context: { failures: 0, page_id: "" }
states:
  watching:
    on:
      deploy.failed:
        - guard: "!should_page(service, failures + 1)"
          target: watching
          actions: [{ assign: { failures: "failures + 1" } }]
        - target: paging
          actions:
            - assign: { failures: "failures + 1" }
            - call: page_oncall
              args: { service: "${service}", failures: "${failures}", reason: "${event.data.reason}" }
      deploy.succeeded: healthy
  paging:
    on:
      page.sent:
        target: paged
        actions: [{ assign: { page_id: event.data.id } }]
  paged:
    on:
      acknowledged: healthy
  healthy:
    type: final
    output: { failures: "${failures}", page_id: "${page_id}" }
"#;

/// How many failures each service tolerates before paging: the kind of table that lives in
/// the host program, not in the protocol.
fn tolerated_failures(service: &str) -> i64 {
    match service {
        "payments" => 1,
        _ => 3,
    }
}

/// Runs the protocol for `service` through `events` and returns what happened, in order.
pub fn run(service: &str, events: &[(&str, serde_json::Value)]) -> Result<Vec<String>, String> {
    let pages: Arc<Mutex<Vec<String>>> = Arc::default();
    let sent = pages.clone();
    let extensions = Extensions::new()
        .function("should_page", |arguments| match arguments {
            [Value::String(service), Value::Int(failures)] => {
                Ok(Value::Bool(*failures > tolerated_failures(service)))
            }
            _ => Err("should_page(service: string, failures: int)".into()),
        })
        .and_then(|extensions| {
            extensions.action("page_oncall", move |arguments, context| {
                let summary = arguments.to_json().to_string();
                let mut pages = sent.lock().map_err(|_| "the page log is poisoned")?;
                pages.push(summary);
                let id = format!("page-{}", pages.len());
                context.raise(
                    "page.sent",
                    Value::from_json(&serde_json::json!({ "id": id })),
                );
                Ok(())
            })
        })
        .map_err(|error| error.to_string())?;

    let loaded = load_text("deploy-watch.yaml", PROTOCOL.to_string())
        .map_err(|diagnostics| protocol_run::base::diagnostic::render_all(&diagnostics))?;
    let machine = Arc::new(
        compile_with(&loaded, &Arc::new(extensions))
            .map_err(|diagnostics| protocol_run::base::diagnostic::render_all(&diagnostics))?,
    );
    let inputs = machine
        .bind_inputs(&[("service".to_string(), service.to_string())])
        .map_err(|errors| format!("{errors:?}"))?;
    let mut interpreter = Interpreter::new(machine.clone(), inputs);
    let mut host = RecordingHost::for_machine(machine.clone());
    interpreter
        .start(&mut host)
        .map_err(|error| error.to_string())?;
    for (name, data) in events {
        let event = Event::named(&machine, name, Value::from_json(data), Origin::External);
        interpreter
            .handle(&event, &mut host)
            .map_err(|error| error.to_string())?;
    }

    let mut happened: Vec<String> = host
        .records
        .iter()
        .filter_map(|record| match record {
            Record::Entered(state) => Some(format!("enter {state}")),
            Record::Transition(at) => Some(format!("take {at}")),
            _ => None,
        })
        .collect();
    happened.extend(
        pages
            .lock()
            .map_err(|_| "poisoned")?
            .iter()
            .map(|page| format!("paged {page}")),
    );
    match interpreter.outcome() {
        Some(outcome) => happened.push(format!("finished {}", outcome.output.to_json())),
        None => happened.push(format!("still in {:?}", interpreter.active_leaves())),
    }
    Ok(happened)
}

fn main() {
    let failed = |reason: &str| ("deploy.failed", serde_json::json!({ "reason": reason }));
    let conversation = [
        failed("health check"),
        failed("timeout"),
        ("acknowledged", serde_json::Value::Null),
    ];
    match run("payments", &conversation) {
        Ok(happened) => happened.iter().for_each(|line| println!("{line}")),
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(1);
        }
    }
}
