//! Answers to a waiting run over MCP, in raw JSON-RPC: request keys that hold over the run's timer steps, answers that come after the run moved on refused or asked again (never taken for delivered), one answer per request under a race, parked elicitations counted against the session's limit, events named like platform ones listed.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp_raw::{RawMcp, reported_run};

/// Waits for `answer` (or `again`, which asks anew) while a timer ticks every 100 ms.
const TICKING: &str = "\
id: ticking
states:
  waiting:
    initial: tick
    on:
      answer: done
      again:
        target: waiting
        actions: [{ emit: asked_again }]
    states:
      tick:
        after: [{ delay: 100ms, target: tock }]
      tock:
        after: [{ delay: 100ms, target: tick }]
  done:
    type: final
    output: { answer: \"${event.data}\" }
";

/// A request's own declaration of the tasks extension: its call answers a task.
fn task_meta() -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities":
           {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
}

/// A 2026-07-28 request from a client that answers elicitation forms.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    })
}

fn tasks_capabilities() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// A directory holding `ticking.yaml`.
fn ticking_directory(name: &str) -> crate::support::TemporaryDirectory {
    let directory = crate::support::temporary_directory("mcp-answers", name);
    std::fs::write(directory.join("ticking.yaml"), TICKING).unwrap();
    directory
}

/// An accepted answer whose data is `data`, as JSON text in the form's `data` field.
fn accept(data: &Value) -> Value {
    json!({"action": "accept", "content": {"data": data.to_string()}})
}

/// The keys of a task's or an input_required result's requests, sorted (as rmcp sends them).
fn keys(result: &Value) -> Vec<String> {
    result["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("no inputRequests: {result}"))
        .keys()
        .cloned()
        .collect()
}

/// The step a key names.
fn key_step(key: &str) -> u64 {
    key.rsplit_once('@').unwrap().1.parse().unwrap()
}

/// Starts `ticking` as a task; its id and the task once it asks for input.
fn start_ticking_task(server: &mut RawMcp, id: u64) -> (String, Value) {
    let created = server.request(
        id,
        "tools/call",
        json!({"name": "ticking", "arguments": {}, "_meta": task_meta()}),
    );
    let task = created["result"]["taskId"].as_str().unwrap().to_string();
    let waiting = poll(server, id + 1, &task, |task| {
        task["status"] == "input_required"
    });
    (task, waiting)
}

/// `tasks/get` until `predicate` holds (ids from `id` on, 100 of them).
fn poll(server: &mut RawMcp, id: u64, task: &str, predicate: impl Fn(&Value) -> bool) -> Value {
    for attempt in 0..100 {
        let got =
            server.request(id + attempt, "tasks/get", json!({"taskId": task}))["result"].clone();
        if predicate(&got) {
            return got;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("task `{task}` never got there");
}

fn update(server: &mut RawMcp, id: u64, task: &str, responses: Value) -> Value {
    server.request(
        id,
        "tasks/update",
        json!({"taskId": task, "inputResponses": responses}),
    )
}

/// `response` refuses an answer to `key` as no request task `task` has outstanding;
/// `outstanding` is what the refusal says the task has instead.
fn assert_refused_as_not_outstanding(response: &Value, key: &str, task: &str, outstanding: &str) {
    assert_eq!(response["error"]["code"], json!(-32602), "{response}");
    assert_eq!(
        response["error"]["message"],
        json!(format!(
            "inputResponses `{key}` answers no request task `{task}` has outstanding \
             ({outstanding}); nothing was delivered: read tasks/get and answer its inputRequests"
        ))
    );
}

#[test]
fn a_task_keeps_its_request_keys_over_timer_steps_and_takes_the_late_answer() {
    let directory = ticking_directory("stable");
    let mut server = RawMcp::start(&directory, &["ticking.yaml"], tasks_capabilities());
    let (task, waiting) = start_ticking_task(&mut server, 1);
    let asked = keys(&waiting);
    let since = key_step(&asked[0]);
    assert_eq!(asked, [format!("again@{since}"), format!("answer@{since}")]);

    // Five timer steps later the run asks the same: the same keys.
    std::thread::sleep(Duration::from_millis(500));
    let later = poll(&mut server, 200, &task, |task| {
        task["status"] == "input_required"
    });
    assert_ne!(
        later["lastUpdatedAt"], waiting["lastUpdatedAt"],
        "timer steps were taken"
    );
    assert_eq!(keys(&later), asked);

    let updated = update(
        &mut server,
        300,
        &task,
        json!({(&asked[1]): accept(&json!("yes"))}),
    );
    assert_eq!(
        updated["result"],
        json!({"resultType": "complete"}),
        "{updated}"
    );
    let done = poll(&mut server, 400, &task, |task| {
        task["status"] == "completed"
    });
    assert_eq!(
        done["result"]["structuredContent"]["finished"]["output"],
        json!({"answer": "yes"})
    );

    // Answered: the key is outstanding no more, and the extension requires it to be.
    let again = update(
        &mut server,
        500,
        &task,
        json!({(&asked[1]): accept(&json!("twice"))}),
    );
    assert_refused_as_not_outstanding(
        &again,
        &asked[1],
        &task,
        "it has no request outstanding now",
    );
    server.finish();
}

#[test]
fn an_answer_to_a_request_answered_meanwhile_is_refused_and_a_race_delivers_one() {
    let directory = ticking_directory("moved-on");
    let mut server = RawMcp::start(&directory, &["ticking.yaml"], tasks_capabilities());
    let (task, waiting) = start_ticking_task(&mut server, 1);
    let first = keys(&waiting);
    let sent = server.call(200, "send_event", json!({"run": task, "event": "again"}));
    assert_eq!(sent["isError"], json!(false), "{sent}");

    // `again` was taken: the run asks anew, and an answer to the old request is refused.
    let asking = poll(&mut server, 300, &task, |task| {
        task["status"] == "input_required"
    });
    let now = keys(&asking);
    assert!(key_step(&now[0]) > key_step(&first[0]), "{first:?} {now:?}");
    let stale = update(
        &mut server,
        400,
        &task,
        json!({(&first[1]): accept(&json!("late"))}),
    );
    // The requests now, in the order of the run's `events`.
    assert_refused_as_not_outstanding(
        &stale,
        &first[1],
        &task,
        &format!("its requests now are `{}`, `{}`", now[1], now[0]),
    );

    // Two answers to one request at once: the host takes one, and refuses the other.
    let answer = json!({(&now[0]): {"action": "accept", "content": {"data": ""}}});
    server.send(
        501,
        "tasks/update",
        json!({"taskId": task, "inputResponses": answer}),
    );
    server.send(
        502,
        "tasks/update",
        json!({"taskId": task, "inputResponses": answer}),
    );
    let answers = [server.response(501), server.response(502)];
    let taken: Vec<&Value> = answers
        .iter()
        .filter(|answer| answer.get("result").is_some())
        .collect();
    assert_eq!(taken.len(), 1, "{answers:?}");
    let refused = answers
        .iter()
        .find(|answer| answer.get("error").is_some())
        .unwrap();
    assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("`{}`", now[0])), "{message}");
    let report = server.call(600, "get_run", json!({"run": task}));
    let directives = report["structuredContent"]["directives"]
        .as_array()
        .unwrap();
    assert_eq!(
        directives.len(),
        2,
        "`again` taken twice in all: {directives:?}"
    );
    server.finish();
}

#[test]
fn a_2026_retry_keeps_its_key_over_timer_steps_and_a_stale_one_is_asked_again() {
    let directory = ticking_directory("retry");
    let mut server = RawMcp::start(&directory, &["ticking.yaml"], json!({}));
    let call = |server: &mut RawMcp, id: u64, extra: Value| {
        let mut params = json!({"name": "ticking", "arguments": {}, "_meta": modern_meta()});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        server.request(id, "tools/call", params)["result"].clone()
    };
    let first = call(&mut server, 1, json!({}));
    assert_eq!(first["resultType"], json!("input_required"), "{first}");
    let run = first["requestState"].as_str().unwrap().to_string();
    let asked = keys(&first);

    // Asked anew once `again` is taken: a retry with the old key delivers nothing and asks
    // again, with the fresh keys.
    let sent = server.call(2, "send_event", json!({"run": run, "event": "again"}));
    assert_eq!(sent["isError"], json!(false), "{sent}");
    let stale = call(
        &mut server,
        3,
        json!({"requestState": run, "inputResponses": {(&asked[1]): accept(&json!("late"))}}),
    );
    assert_eq!(stale["resultType"], json!("input_required"), "{stale}");
    assert_eq!(stale["requestState"], json!(run));
    let fresh = keys(&stale);
    assert!(
        key_step(&fresh[1]) > key_step(&asked[1]),
        "{asked:?} {fresh:?}"
    );

    // Timer steps do not make the fresh key stale.
    std::thread::sleep(Duration::from_millis(350));
    let answered = call(
        &mut server,
        4,
        json!({"requestState": run, "inputResponses": {(&fresh[1]): accept(&json!("now"))}}),
    );
    let report = &answered["structuredContent"];
    assert_eq!(report["run"], json!(run), "{answered}");
    assert_eq!(report["finished"]["output"], json!({"answer": "now"}));
    server.finish();
}

#[test]
fn an_elicited_answer_that_comes_after_the_run_finished_returns_its_report() {
    let directory = ticking_directory("elicit-late");
    let mut server = RawMcp::start(&directory, &["ticking.yaml"], json!({"elicitation": {}}));
    server.send(1, "tools/call", json!({"name": "ticking", "arguments": {}}));
    let asked = server.server_request();
    assert_eq!(asked["method"], json!("elicitation/create"));
    let message = asked["params"]["message"].as_str().unwrap();
    let run = message
        .strip_prefix("Run `")
        .and_then(|rest| rest.split_once('`'))
        .unwrap()
        .0
        .to_string();
    assert!(
        message.ends_with("waits for the event `answer`."),
        "{message}"
    );

    let sent = server.call(
        2,
        "send_event",
        json!({"run": run, "event": "answer", "data": "first"}),
    );
    assert_eq!(
        sent["structuredContent"]["status"],
        json!("finished"),
        "{sent}"
    );
    server.answer(&asked, accept(&json!("late")));
    let called = server.response(1)["result"].clone();
    assert_eq!(called["isError"], json!(false), "{called}");
    assert_eq!(
        called["structuredContent"]["finished"]["output"],
        json!({"answer": "first"})
    );
    server.finish();
}

/// Waits for `go`, with no timer.
const WAITER: &str =
    "id: waiter\nstates:\n  waiting:\n    on: { go: done }\n  done: { type: final }\n";

const LIMIT_REFUSAL: &str = "32 requests of this session are in flight, the limit \
                             (MAX_REQUESTS_IN_FLIGHT); wait for their answers";

#[test]
fn calls_parked_on_elicitation_count_against_the_requests_in_flight() {
    let directory = crate::support::temporary_directory("mcp-answers", "parked");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let mut server = RawMcp::start(&directory, &["waiter.yaml"], json!({"elicitation": {}}));
    // 32 calls park, each on its elicitation (one after another: runs started in the same
    // millisecond would be named alike); the other 8 are refused, naming the limit.
    let mut parked = Vec::new();
    for id in 1..=32 {
        server.send(id, "tools/call", json!({"name": "waiter", "arguments": {}}));
        parked.push(server.server_request());
    }
    for id in 33..=40 {
        server.send(id, "tools/call", json!({"name": "waiter", "arguments": {}}));
    }
    let (refused, _) = server.collect(8, 0);
    assert_eq!(refused.len(), 8);
    for response in &refused {
        assert_eq!(response["result"]["isError"], json!(true), "{response}");
        assert_eq!(
            response["result"]["content"][0]["text"],
            json!(LIMIT_REFUSAL)
        );
    }
    let more = server.request(41, "resources/list", json!({}));
    assert_eq!(more["error"]["message"], json!(LIMIT_REFUSAL), "{more}");

    // A declined request ends its call: one place is free again.
    server.answer(&parked[0], json!({"action": "decline"}));
    let ended = server.collect(1, 0).0;
    assert_eq!(
        ended[0]["result"]["structuredContent"]["waiting"],
        json!("input")
    );
    let listed = server.call(42, "list_runs", json!({}));
    assert_eq!(listed["isError"], json!(false), "{listed}");
    server.finish();
}

#[test]
fn task_ids_request_states_and_answer_keys_are_bounded() {
    let directory = ticking_directory("bounds");
    let mut server = RawMcp::start(&directory, &["ticking.yaml"], tasks_capabilities());
    let long = "t".repeat(2_000);
    let refusal = |name: &str| {
        format!(
            "argument `{name}` is 2000 bytes, longer than the limit of 1024 \
             (MAX_NAME_ARGUMENT_BYTES)"
        )
    };
    for (id, method) in [(1, "tasks/get"), (2, "tasks/cancel")] {
        let refused = server.request(id, method, json!({"taskId": long}));
        assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
        assert_eq!(refused["error"]["message"], json!(refusal("taskId")));
    }
    let refused = update(&mut server, 3, &long, json!({}));
    assert_eq!(refused["error"]["message"], json!(refusal("taskId")));
    let (task, _) = start_ticking_task(&mut server, 10);
    let refused = update(&mut server, 200, &task, json!({(&long): accept(&json!(1))}));
    assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
    assert_eq!(
        refused["error"]["message"],
        json!(refusal("inputResponses key"))
    );

    let retry = server.request(
        300,
        "tools/call",
        json!({"name": "ticking", "arguments": {}, "_meta": modern_meta(),
               "requestState": long, "inputResponses": {}}),
    );
    assert_eq!(retry["result"]["isError"], json!(true), "{retry}");
    assert_eq!(
        retry["result"]["content"][0]["text"],
        json!(refusal("requestState"))
    );
    server.finish();
}

/// User events whose names begin like the engine's.
const REVIEWING: &str = "\
id: reviewing
states:
  reviewing:
    on:
      error_report: reviewing
      done_reviewing: reviewed
      approve: reviewed
      error.execution: reviewed
  reviewed: { type: final }
";

#[test]
fn events_named_like_platform_ones_are_listed_and_taken() {
    let directory = crate::support::temporary_directory("mcp-answers", "names");
    std::fs::write(directory.join("reviewing.yaml"), REVIEWING).unwrap();
    let mut server = RawMcp::start(&directory, &["reviewing.yaml"], json!({}));
    let started = server.call(1, "reviewing", json!({}));
    let report = &started["structuredContent"];
    assert_eq!(
        report["events"],
        json!([{"name": "error_report"}, {"name": "done_reviewing"}, {"name": "approve"}]),
        "{started}"
    );
    assert_eq!(report["waiting"], json!("input"));
    let run = report["run"].as_str().unwrap();
    let sent = server.call(
        2,
        "send_event",
        json!({"run": run, "event": "error_report"}),
    );
    assert_eq!(
        sent["structuredContent"]["states"],
        json!(["reviewing"]),
        "{sent}"
    );
    let sent = server.call(
        3,
        "send_event",
        json!({"run": run, "event": "done_reviewing"}),
    );
    assert_eq!(
        sent["structuredContent"]["status"],
        json!("finished"),
        "{sent}"
    );
    server.finish();
}

/// The answer to `tasks/get` of `run` from a new server of `arguments` over `directory`.
fn task_from_new_server(directory: &Path, arguments: &[&str], run: &str) -> Value {
    let mut server = RawMcp::start(directory, arguments, tasks_capabilities());
    let got = server.request(1, "tasks/get", json!({"taskId": run}));
    server.finish();
    got
}

/// The status message `tasks/get` gives the run `run` in a server of `arguments`.
fn not_live_message(directory: &Path, arguments: &[&str], run: &str) -> String {
    let got = task_from_new_server(directory, arguments, run);
    assert_eq!(got["result"]["status"], json!("working"), "{got}");
    got["result"]["statusMessage"].as_str().unwrap().to_string()
}

#[test]
fn a_task_not_live_here_says_why_and_whether_it_can_resume() {
    let directory = crate::support::temporary_directory("mcp-answers", "not-live");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    std::fs::write(directory.join("ticking.yaml"), TICKING).unwrap();
    let mut server = RawMcp::start(&directory, &["waiter.yaml"], json!({}));
    let started = server.call(1, "waiter", json!({}));
    let run = reported_run(&started);
    server.finish();
    let path = directory.join("waiter.yaml").display().to_string();

    let message = not_live_message(&directory, &["--no-resume", "waiter.yaml"], &run);
    assert_eq!(
        message,
        "the run is stopped and not live in this server; resume_run resumes it"
    );
    // A run of a protocol this server does not serve is no task of it at all.
    let got = task_from_new_server(&directory, &["ticking.yaml"], &run);
    assert_eq!(
        got["error"]["message"],
        json!(format!(
            "run `{run}` runs {path}, which this server does not serve; `protocol-run status \
             {run}` reads it"
        )),
        "{got}"
    );
    std::fs::write(
        directory.join("waiter.yaml"),
        format!("{WAITER}# changed\n"),
    )
    .unwrap();
    // Its text kept, it would go on with it; not kept (a run recorded before texts were kept
    // apart), it cannot resume here.
    let message = not_live_message(&directory, &["--no-resume", "waiter.yaml"], &run);
    assert_eq!(
        message,
        "the run is stopped and not live in this server; resume_run resumes it"
    );
    rusqlite::Connection::open(directory.join("state/state.db"))
        .unwrap()
        .execute("DELETE FROM protocol_texts", [])
        .unwrap();
    let message = not_live_message(&directory, &["waiter.yaml"], &run);
    let prefix = format!(
        "the run is stopped and not live in this server: {path} changed since run `{run}` \
         started (recorded "
    );
    assert!(
        message.starts_with(&prefix)
            && message.ends_with(
                "; resuming would mix two protocols. The texts it started with are not all \
                 kept: restore the file to resume it"
            ),
        "{message}"
    );
}

/// Takes `answer` only when it says `yes`: any other answer is admitted and discarded.
const PICKY: &str = "\
id: picky
states:
  waiting:
    on:
      answer: { target: done, guard: \"event.data == 'yes'\" }
  done: { type: final }
";

#[test]
fn an_answer_no_transition_takes_is_told_discarded_by_its_task_and_by_elicitation() {
    let directory = crate::support::temporary_directory("mcp-answers", "picky");
    std::fs::write(directory.join("picky.yaml"), PICKY).unwrap();

    // `tasks/update`'s result carries nothing: the task's next status says it.
    let mut server = RawMcp::start(&directory, &["picky.yaml"], tasks_capabilities());
    let created = server.request(
        1,
        "tools/call",
        json!({"name": "picky", "arguments": {}, "_meta": task_meta()}),
    );
    let task = created["result"]["taskId"].as_str().unwrap().to_string();
    let waiting = poll(&mut server, 2, &task, |task| {
        task["status"] == "input_required"
    });
    let asked = keys(&waiting);
    let updated = update(
        &mut server,
        200,
        &task,
        json!({(&asked[0]): accept(&json!("no"))}),
    );
    assert_eq!(
        updated["result"],
        json!({"resultType": "complete"}),
        "{updated}"
    );
    let told = poll(&mut server, 300, &task, |task| {
        task["statusMessage"]
            .as_str()
            .is_some_and(|message| message.contains("discarded"))
    });
    assert_eq!(told["status"], json!("input_required"), "{told}");
    let message = told["statusMessage"].as_str().unwrap();
    assert_eq!(
        message,
        "the run waits for one of the events in inputRequests; the last event sent, `answer`, \
         was discarded: the active states (waiting) take `answer` only where a guard holds, and \
         none held; none of them defers it (SCXML discards such an event)"
    );
    server.finish();

    // An elicited answer: the call's report says what became of it.
    let mut server = RawMcp::start(&directory, &["picky.yaml"], json!({"elicitation": {}}));
    server.send(1, "tools/call", json!({"name": "picky", "arguments": {}}));
    let asked = server.server_request();
    server.answer(&asked, accept(&json!("no")));
    // Still waiting, the run is asked for again; declined, the call answers the report.
    let again = server.server_request();
    assert_eq!(again["method"], json!("elicitation/create"), "{again}");
    server.answer(&again, json!({"action": "decline"}));
    let called = server.response(1)["result"].clone();
    let report = &called["structuredContent"];
    assert_eq!(report["status"], json!("running"), "{called}");
    assert_eq!(report["last_event"]["event"], json!("answer"), "{called}");
    assert_eq!(
        report["last_event"]["outcome"],
        json!("discarded"),
        "{called}"
    );
    assert!(
        report["last_event"]["reason"]
            .as_str()
            .is_some_and(|reason| !reason.is_empty()),
        "{called}"
    );
    server.finish();
}
