//! `--otlp`: a run exported as a span tree over OTLP/HTTP, received by a collector written in Python that decodes it with the official OpenTelemetry protobuf definitions; the spans match the run's journal, a `TRACEPARENT` makes the run a child of that trace, effects receive their attempt's `TRACEPARENT`, and a resumed run goes on in its trace with the spans a crash left open ended `interrupted`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::support;

/// Retried once: its first attempt fails, its second succeeds; each writes its `TRACEPARENT`.
const RETRIED: &str = r#"
id: retried
states:
  calling:
    entry:
      - log: "calling the operation"
        tags: [calling]
      - exec: [sh, -c, 'echo "$TRACEPARENT" >> parents.txt; [ "$(wc -l < parents.txt)" -ge 2 ]']
        id: op
        timeout: 30s
        timeout_multipliers: [1, 2]
        retry: [{ error_equals: [error.exec], max_attempts: 3, interval: 1s }]
    on:
      done.exec.op: checking
  checking:
    always: done
  done: { type: final }
"#;

/// Its first attempt writes a marker, then waits to be killed with its engine.
const INTERRUPTED: &str = r#"
id: interrupted
states:
  calling:
    entry:
      - exec: [sh, -c, 'if [ ! -e marker ]; then touch marker; sleep 1000; fi']
        id: op
        on_interrupt: retry
    on:
      done.exec.op: ok
  ok: { type: final }
"#;

/// The collector of `tests/otlp/collector.py`, listening on loopback until dropped.
pub(crate) struct Collector {
    child: Child,
    spans: PathBuf,
    pub(crate) endpoint: String,
}

impl Collector {
    pub(crate) fn start(directory: &Path) -> Collector {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/collector.py");
        let spans = directory.join("spans.jsonl");
        let port = directory.join("collector.port");
        let child = Command::new(support::python_venv::otlp_python())
            .arg(script)
            .arg(&spans)
            .arg(&port)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let port = support::eventually("the collector listens", || {
            std::fs::read_to_string(&port).ok()
        });
        Collector {
            child,
            spans,
            endpoint: format!("http://127.0.0.1:{}", port.trim()),
        }
    }

    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.spans)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // Closing its stdin stops it.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// A span attribute's value, as protobuf JSON writes it with proto field names
/// (`string_value`, `int_value`...).
pub(crate) fn attribute(span: &Value, key: &str) -> Value {
    span["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|attribute| attribute["key"] == key)
        .map(|attribute| {
            let value = &attribute["value"];
            value
                .get("string_value")
                .or_else(|| value.get("int_value"))
                .or_else(|| value.get("bool_value"))
                .cloned()
                .unwrap_or_else(|| value.clone())
        })
        .unwrap_or(Value::Null)
}

/// The first event of `span` named `name` (`log`, `directive`).
pub(crate) fn event<'a>(span: &'a Value, name: &str) -> Option<&'a Value> {
    span["events"]
        .as_array()?
        .iter()
        .find(|event| event["name"] == name)
}

pub(crate) fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|span| span["name"] == name).collect()
}

pub(crate) fn status_code(span: &Value) -> &str {
    span["status"]["code"]
        .as_str()
        .unwrap_or("STATUS_CODE_UNSET")
}

#[test]
fn a_run_is_a_span_tree_that_matches_its_journal() {
    let directory = support::temporary_directory("otlp", "tree");
    std::fs::write(directory.join("retried.yaml"), RETRIED).unwrap();
    let collector = Collector::start(&directory);
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        &[("OTEL_EXPORTER_OTLP_HEADERS", "x-test-header=given")],
        &[
            "run",
            "retried.yaml",
            "--run-id",
            "r1",
            "--otlp",
            &collector.endpoint,
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let spans = support::eventually("the root span arrives", || {
        let spans = collector.spans();
        (!named(&spans, "run retried").is_empty()).then_some(spans)
    });
    let root = named(&spans, "run retried")[0];
    let trace = root["trace_id"].as_str().unwrap();
    assert_eq!(
        root["parent_span_id"], "",
        "a run of its own is a trace's root"
    );
    assert_eq!(status_code(root), "STATUS_CODE_OK");
    assert_eq!(attribute(root, "protocol_run.run_id"), "r1");
    assert_eq!(
        root["header"], "given",
        "OTEL_EXPORTER_OTLP_HEADERS is sent"
    );
    assert_eq!(attribute(&root["resource"], "service.name"), "protocol-run");
    assert!(spans.iter().all(|span| span["trace_id"] == trace));

    // The state visits are the states the journal's steps went through, under the root.
    let (code, status, stderr) =
        support::run_binary_in(&directory, &[], &["status", "r1", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let status: Value = serde_json::from_str(&status).unwrap();
    let visits: Vec<&str> = spans
        .iter()
        .filter_map(|span| span["name"].as_str()?.strip_prefix("state "))
        .collect();
    for state in ["calling", "checking", "done"] {
        assert!(visits.contains(&state), "{state} visited: {visits:?}");
    }
    assert_eq!(status["status"], "finished", "{status}");
    for visit in spans
        .iter()
        .filter(|span| span["name"].as_str().unwrap().starts_with("state "))
    {
        assert_eq!(visit["parent_span_id"], root["span_id"]);
    }

    // The effect under the state that started it, each attempt under the effect with its
    // number and timeout; the first retried, the second completed.
    let calling = named(&spans, "state calling")[0];
    let effect = named(&spans, "effect op")[0];
    assert_eq!(effect["parent_span_id"], calling["span_id"]);
    assert_eq!(attribute(effect, "protocol_run.outcome"), "completed");
    let mut attempts: Vec<&Value> = spans
        .iter()
        .filter(|span| span["name"].as_str().unwrap().starts_with("attempt "))
        .collect();
    attempts.sort_by_key(|span| span["name"].as_str().unwrap().to_string());
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    for (index, (attempt, timeout)) in attempts.iter().zip(["30000", "60000"]).enumerate() {
        assert_eq!(attempt["parent_span_id"], effect["span_id"]);
        assert_eq!(
            attribute(attempt, "protocol_run.attempt"),
            (index + 1).to_string()
        );
        assert_eq!(attribute(attempt, "protocol_run.timeout_ms"), timeout);
    }
    assert_eq!(attribute(attempts[0], "protocol_run.outcome"), "retried");
    assert_eq!(status_code(attempts[0]), "STATUS_CODE_ERROR");
    assert_eq!(attribute(attempts[1], "protocol_run.outcome"), "completed");

    // Each attempt's program got the attempt's span as its TRACEPARENT.
    let parents = std::fs::read_to_string(directory.join("parents.txt")).unwrap();
    let expected: Vec<String> = attempts
        .iter()
        .map(|attempt| format!("00-{trace}-{}-01", attempt["span_id"].as_str().unwrap()))
        .collect();
    assert_eq!(parents.lines().collect::<Vec<_>>(), expected);

    // The log is an event of the state it was logged in, with its tags.
    let log = event(calling, "log").expect("the log is an event of `calling`");
    let tags = &log["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|attribute| attribute["key"] == "protocol_run.tags")
        .unwrap()["value"]["array_value"]["values"];
    assert_eq!(tags[0]["string_value"], "calling");
}

#[test]
fn a_run_started_with_a_traceparent_is_a_child_of_that_trace() {
    let directory = support::temporary_directory("otlp", "parent");
    std::fs::write(directory.join("retried.yaml"), RETRIED).unwrap();
    let collector = Collector::start(&directory);
    let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        &[
            ("TRACEPARENT", parent),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint),
        ],
        &["run", "retried.yaml", "--run-id", "r1"],
    );
    assert_eq!(code, 0, "{stderr}");
    let spans = support::eventually("the root span arrives", || {
        let spans = collector.spans();
        (!named(&spans, "run retried").is_empty()).then_some(spans)
    });
    let root = named(&spans, "run retried")[0];
    assert_eq!(root["trace_id"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(root["parent_span_id"], "b7ad6b7169203331");
    assert!(
        spans
            .iter()
            .all(|span| span["trace_id"] == "0af7651916cd43dd8448eb211c80319c")
    );
}

#[test]
fn without_otlp_nothing_is_exported_and_effects_get_no_traceparent() {
    let directory = support::temporary_directory("otlp", "none");
    std::fs::write(directory.join("retried.yaml"), RETRIED).unwrap();
    let (code, _, stderr) =
        support::run_binary_in(&directory, &[], &["run", "retried.yaml", "--run-id", "r1"]);
    assert_eq!(code, 0, "{stderr}");
    let parents = std::fs::read_to_string(directory.join("parents.txt")).unwrap();
    assert_eq!(parents.lines().collect::<Vec<_>>(), ["", ""]);
}

#[test]
fn an_https_endpoint_is_refused_with_what_to_do() {
    let directory = support::temporary_directory("otlp", "https");
    std::fs::write(directory.join("retried.yaml"), RETRIED).unwrap();
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        &[],
        &[
            "run",
            "retried.yaml",
            "--otlp",
            "https://collector.invalid:4318",
        ],
    );
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("https is not supported"), "{stderr}");
    assert!(stderr.contains("http://127.0.0.1:4318"), "{stderr}");
}

/// Killed mid-attempt, then resumed: the resumed run goes on in the same trace, the spans the
/// crash left open end `interrupted`, and the root span, sent when the run finishes, is the one
/// recorded with the run.
fn a_resumed_run_continues_its_trace(test: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("otlp", test);
    std::fs::write(directory.join("interrupted.yaml"), INTERRUPTED).unwrap();
    let collector = Collector::start(&directory);
    let mut run = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["run", "interrupted.yaml", "--run-id", "r2"])
        .args(["--state-dir", "state", "--otlp", &collector.endpoint])
        .envs(environment.iter().copied())
        .current_dir(&directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::eventually("the first attempt starts", || {
        directory.join("marker").exists().then_some(())
    });
    run.kill().unwrap();
    run.wait().unwrap();
    assert!(
        collector.spans().is_empty(),
        "nothing had ended before the crash"
    );
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        environment,
        &["resume", "r2", "--otlp", &collector.endpoint],
    );
    assert_eq!(code, 0, "{stderr}");
    let spans = support::eventually("the root span arrives", || {
        let spans = collector.spans();
        (!named(&spans, "run interrupted").is_empty()).then_some(spans)
    });
    let root = named(&spans, "run interrupted")[0];
    assert!(
        spans
            .iter()
            .all(|span| span["trace_id"] == root["trace_id"])
    );
    let interrupted: Vec<&str> = spans
        .iter()
        .filter(|span| span["status"]["message"] == "interrupted")
        .map(|span| span["name"].as_str().unwrap())
        .collect();
    for name in ["state calling", "effect op", "attempt 1"] {
        assert!(interrupted.contains(&name), "{name}: {interrupted:?}");
    }
    for span in spans.iter().filter(|span| span["name"] == "state calling") {
        assert_eq!(span["parent_span_id"], root["span_id"]);
    }
    let effects = named(&spans, "effect op");
    assert_eq!(
        effects.len(),
        2,
        "interrupted, then started again: {effects:?}"
    );
    assert!(
        effects
            .iter()
            .any(|effect| attribute(effect, "protocol_run.outcome") == "completed")
    );
    // Started before the crash: the root's start is the run's.
    let start: u64 = root["start_time_unix_nano"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let first_visit: u64 = spans
        .iter()
        .filter(|span| span["name"] == "state calling")
        .map(|span| {
            span["start_time_unix_nano"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .min()
        .unwrap();
    assert!(start <= first_visit, "{start} > {first_visit}");
}

#[test]
fn sqlite_a_resumed_run_continues_its_trace() {
    a_resumed_run_continues_its_trace("resumed-sqlite", &[]);
}

#[test]
fn postgres_a_resumed_run_continues_its_trace() {
    let Some(database) =
        support::postgres::database("otlp::postgres_a_resumed_run_continues_its_trace")
    else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    a_resumed_run_continues_its_trace("resumed-postgres", &environment);
}

/// A child protocol the parent invokes, and the same protocol as the body of a map.
const KID: &str = r#"
id: kid
inputs:
  word: { type: string, default: "x" }
states:
  working:
    entry:
      - log: "kid ${word}"
      - exec: [sh, -c, 'echo "$TRACEPARENT" >> kid-parents.txt']
        id: work
    on:
      done.exec.work: finished
  finished: { type: final }
"#;

/// Invokes `kid`, then maps it over two words, then maps an effect over two words.
const NESTING: &str = r#"
id: nesting
context: { word: null }
states:
  invoking:
    invoke: [{ id: child, protocol: kid.yaml }]
    on:
      done.invoke.child: mapping
  mapping:
    entry:
      - map: [a, b]
        id: kids
        item: word
        invoke: { protocol: kid.yaml, inputs: { word: "${word}" } }
    on:
      done.map.kids: running
  running:
    entry:
      - map: [c, d]
        id: checks
        item: word
        exec: [sh, -c, 'true']
    on:
      done.map.checks: done
  done: { type: final }
"#;

#[test]
fn children_and_map_items_are_under_the_spans_that_started_them_with_their_own_inside() {
    let directory = support::temporary_directory("otlp", "nesting");
    std::fs::write(directory.join("kid.yaml"), KID).unwrap();
    std::fs::write(directory.join("nesting.yaml"), NESTING).unwrap();
    let collector = Collector::start(&directory);
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        &[],
        &["run", "nesting.yaml", "--otlp", &collector.endpoint],
    );
    assert_eq!(code, 0, "{stderr}");
    let spans = support::eventually("the root span arrives", || {
        let spans = collector.spans();
        (!named(&spans, "run nesting").is_empty()).then_some(spans)
    });
    let one = |name: &str| -> &Value {
        let found = named(&spans, name);
        assert_eq!(found.len(), 1, "one `{name}` in {spans:?}");
        found[0]
    };
    // The invoke's child under the visit of the state that invoked it.
    let child = one("invoke child");
    assert_eq!(child["parent_span_id"], one("state invoking")["span_id"]);
    assert_eq!(status_code(child), "STATUS_CODE_OK");
    assert_eq!(
        attribute(child, "protocol_run.outcome"),
        "done.invoke.child"
    );
    // The child's log is an event of its span.
    let logs: Vec<String> = child["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event.to_string())
        .collect();
    assert!(logs.iter().any(|log| log.contains("kid x")), "{logs:?}");
    // Each child item under its map, the map under its state's visit.
    let kids = one("map kids");
    assert_eq!(kids["parent_span_id"], one("state mapping")["span_id"]);
    for item in ["item kids[0]", "item kids[1]"] {
        let item = one(item);
        assert_eq!(item["parent_span_id"], kids["span_id"]);
        assert_eq!(attribute(item, "protocol_run.outcome"), "ok");
    }
    // Each effect item under its map too.
    let checks = one("map checks");
    for item in ["effect checks[0]", "effect checks[1]"] {
        assert_eq!(one(item)["parent_span_id"], checks["span_id"]);
    }
    // Inside each child, its state visits under its span and its effect under its visit.
    let children: Vec<&Value> = ["invoke child", "item kids[0]", "item kids[1]"]
        .into_iter()
        .map(one)
        .collect();
    let visits = named(&spans, "state working");
    assert_eq!(visits.len(), 3, "{visits:?}");
    for child in &children {
        let visit = visits
            .iter()
            .find(|visit| visit["parent_span_id"] == child["span_id"])
            .unwrap_or_else(|| panic!("a visit of `working` under {child}"));
        let effects = named(&spans, "effect work");
        assert_eq!(effects.len(), 3, "{effects:?}");
        let effect = effects
            .iter()
            .find(|effect| effect["parent_span_id"] == visit["span_id"])
            .unwrap_or_else(|| panic!("an effect under {visit}"));
        assert_eq!(attribute(effect, "protocol_run.outcome"), "completed");
        // Its effect's process got its attempt's span as its TRACEPARENT.
        let attempt = named(&spans, "attempt 1")
            .into_iter()
            .find(|attempt| attempt["parent_span_id"] == effect["span_id"])
            .unwrap_or_else(|| panic!("an attempt under {effect}"));
        let parents = std::fs::read_to_string(directory.join("kid-parents.txt")).unwrap();
        let expected = format!(
            "00-{}-{}-01",
            attempt["trace_id"].as_str().unwrap(),
            attempt["span_id"].as_str().unwrap()
        );
        assert!(
            parents.lines().any(|line| line == expected),
            "{expected} in {parents}"
        );
        // Its final state's visit ended with it, not with the run.
        let finished = named(&spans, "state finished");
        let finished = finished
            .iter()
            .find(|visit| visit["parent_span_id"] == child["span_id"])
            .unwrap_or_else(|| panic!("a visit of `finished` under {child}"));
        let end = |span: &Value| -> u64 {
            span["end_time_unix_nano"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        };
        assert!(end(finished) <= end(child));
    }
}

/// Invokes `waiter.yaml`, whose effect waits to be killed with its engine the first time.
const INVOKING: &str = r#"
id: invoking
states:
  calling:
    invoke: [{ id: child, protocol: waiter.yaml }]
    on:
      done.invoke.child: ok
  ok: { type: final }
"#;

const WAITER: &str = r#"
id: waiter
states:
  working:
    entry:
      - exec: [sh, -c, 'if [ ! -e marker ]; then touch marker; sleep 1000; fi']
        id: op
        on_interrupt: retry
    on:
      done.exec.op: finished
  finished: { type: final }
"#;

#[test]
fn a_child_resumed_with_its_run_goes_on_in_its_trace() {
    let directory = support::temporary_directory("otlp", "resumed-child");
    std::fs::write(directory.join("invoking.yaml"), INVOKING).unwrap();
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let collector = Collector::start(&directory);
    let mut run = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["run", "invoking.yaml", "--run-id", "r4"])
        .args(["--state-dir", "state", "--otlp", &collector.endpoint])
        .current_dir(&directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::eventually("the child's effect starts", || {
        directory.join("marker").exists().then_some(())
    });
    run.kill().unwrap();
    run.wait().unwrap();
    let (code, _, stderr) = support::run_binary_in(
        &directory,
        &[],
        &["resume", "r4", "--otlp", &collector.endpoint],
    );
    assert_eq!(code, 0, "{stderr}");
    let spans = support::eventually("the root span arrives", || {
        let spans = collector.spans();
        (!named(&spans, "run invoking").is_empty()).then_some(spans)
    });
    let root = named(&spans, "run invoking")[0];
    assert!(
        spans
            .iter()
            .all(|span| span["trace_id"] == root["trace_id"])
    );
    // The child's span and its visit the crash left open end interrupted.
    let interrupted: Vec<&str> = spans
        .iter()
        .filter(|span| span["status"]["message"] == "interrupted")
        .map(|span| span["name"].as_str().unwrap())
        .collect();
    for name in ["invoke child", "state working", "effect op"] {
        assert!(interrupted.contains(&name), "{name}: {interrupted:?}");
    }
    // The resumed child: a new span under the visit of `calling`, its visit of `working` going
    // on under it, its effect started again and completed.
    let children = named(&spans, "invoke child");
    let resumed = children
        .iter()
        .find(|child| status_code(child) == "STATUS_CODE_OK")
        .expect("the resumed child's span ends Ok");
    let working = named(&spans, "state working");
    let visit = working
        .iter()
        .find(|visit| visit["parent_span_id"] == resumed["span_id"])
        .expect("the visit of `working` goes on under the resumed child");
    assert_eq!(attribute(visit, "protocol_run.resumed"), true);
    assert!(named(&spans, "effect op").iter().any(|effect| {
        effect["parent_span_id"] == visit["span_id"]
            && attribute(effect, "protocol_run.outcome") == "completed"
    }));
}
