//! Runs as MCP tasks (SEP-2663) and elicitation for awaited events: the TypeScript SDK with its Tasks extension package (tests/mcp-tasks/client.mjs), and the official Python SDK (tests/mcp/tasks_client.py: raw task requests through its session, its `elicitation_callback` for the plain path).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::mcp::{SLEEPER, drive_client, ittw, served_ittw, step};

fn drive<P: AsRef<std::ffi::OsStr>>(directory: &Path, script: &str, arguments: &[P]) -> Vec<Value> {
    drive_client("tasks_client.py", directory, script, arguments).0
}

/// A run that finishes at once in a final state with exit code 3.
const FAILING: &str = "\
id: failing
states:
  start:
    always: broken
  broken:
    type: final
    exit_code: 3
    output: { why: gave up }
";

fn events_demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/features/events.yaml")
}

/// ITTW case B up to its escalation: the task works, then asks for `captain_guidance`.
fn assert_created_then_input_required(lines: &[Value]) -> String {
    let created = &step(lines, "created")["result"];
    assert_eq!(created["resultType"], json!("task"));
    let run = created["taskId"].as_str().unwrap().to_string();
    assert!(
        run.starts_with("ittw:mcp-"),
        "the task id is the run id: {run}"
    );
    assert_eq!(created["ttlMs"], json!(null), "a run is durable");
    assert_eq!(created["pollIntervalMs"], json!(500));

    let waiting = step(lines, "input_required");
    let seen = waiting["seen"].as_array().unwrap();
    assert_eq!(seen.last(), Some(&json!("input_required")), "{seen:?}");
    assert!(
        seen.iter()
            .all(|status| status == "working" || status == "input_required"),
        "{seen:?}"
    );
    let requests = waiting["task"]["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, request) = requests.iter().next().unwrap();
    assert!(key.starts_with("captain_guidance@"), "{key}");
    assert_eq!(request["method"], json!("elicitation/create"));
    let message = request["params"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "Run `{run}` of protocol `ittw` waits for the event `captain_guidance`. Latest \
             directives:\n{{"
        )),
        "{message}"
    );
    assert!(
        message.contains("\"directive\":\"escalate_to_captain\""),
        "{message}"
    );
    // ITTW declares no `events:`: the data is one JSON string field.
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["data"]["type"],
        json!("string")
    );
    run
}

fn assert_completed_with_guidance(task: &Value) {
    assert_eq!(task["status"], json!("completed"), "{task}");
    let report = &task["result"]["structuredContent"];
    assert_eq!(report["status"], json!("finished"));
    assert_eq!(
        report["finished"],
        json!({"state": "guided", "exit_code": 0,
               "output": {"guidance": {"action": "skip the task"}}, "effects": []})
    );
    assert_eq!(task["result"]["isError"], json!(false));
}

/// A plain call of ITTW that asked its client once for guidance, about the run it returns,
/// and returned that run finished with the guidance.
fn assert_asked_once_then_finished_with_guidance(called: &Value) {
    let asked = called["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let run = called["report"]["run"].as_str().unwrap();
    assert!(
        asked[0]["message"].as_str().unwrap().starts_with(&format!(
            "Run `{run}` of protocol `ittw` waits for the event `captain_guidance`."
        )),
        "{asked:?}"
    );
    assert_eq!(called["report"]["status"], json!("finished"));
    assert_eq!(
        called["report"]["finished"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
}

#[test]
fn ittw_as_a_task_takes_guidance_by_tasks_update() {
    let directory = crate::support::temporary_directory("mcp-tasks", "update");
    let lines = drive(&directory, "task_update", &served_ittw());
    let run = assert_created_then_input_required(&lines);

    // An answer whose data is no JSON is refused, naming why; the run still waits.
    let bad = &step(&lines, "bad_update")["result"]["error"];
    assert_eq!(bad["code"], json!(-32602));
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .starts_with("the answer's `data` for `captain_guidance` is not JSON ("),
        "{bad}"
    );
    // A key not outstanding is refused, naming the outstanding one: nothing was delivered.
    let stale = &step(&lines, "stale_update")["result"]["error"];
    assert_eq!(stale["code"], json!(-32602));
    let message = stale["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "inputResponses `captain_guidance@0` answers no request task `{run}` has \
             outstanding (its requests now are `captain_guidance@"
        )),
        "{message}"
    );
    // A declined answer leaves the run waiting.
    let declined = step(&lines, "declined");
    assert_eq!(declined["result"], json!({"resultType": "complete"}));
    assert_eq!(declined["status"], json!("input_required"));

    assert_eq!(
        step(&lines, "updated")["result"],
        json!({"resultType": "complete"})
    );
    assert_completed_with_guidance(&step(&lines, "ended")["task"]);
}

#[test]
fn a_finished_task_is_answered_from_the_store_by_the_next_server() {
    let directory = crate::support::temporary_directory("mcp-tasks", "stored");
    let lines = drive(&directory, "task_update", &served_ittw());
    let run = step(&lines, "created")["result"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let lines = drive(&directory, &format!("task_stored:{run}"), &served_ittw());
    let task = &step(&lines, "stored")["task"];
    assert_eq!(task["status"], json!("completed"), "{task}");
    assert_eq!(task["taskId"], json!(run));
    let report = &task["result"]["structuredContent"];
    assert_eq!(report["live"], json!(false));
    assert_eq!(
        report["finished"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
}

#[test]
fn ittw_as_a_task_takes_guidance_by_send_event() {
    let directory = crate::support::temporary_directory("mcp-tasks", "send-event");
    let lines = drive(&directory, "task_send_event", &served_ittw());
    let run = assert_created_then_input_required(&lines);
    let sent = &step(&lines, "sent")["report"];
    assert_eq!(sent["run"], json!(run));
    assert_eq!(sent["status"], json!("finished"));
    assert_completed_with_guidance(&step(&lines, "ended")["task"]);
}

#[test]
fn ittw_as_a_task_over_streamable_http_takes_guidance_and_completes() {
    let directory = crate::support::temporary_directory("mcp-tasks", "http");
    let ittw = ittw();
    let mut server = crate::support::mcp_http_server::McpHttpServer::start(
        &directory,
        &["--allow-read", "**", ittw.to_str().unwrap()],
    );
    let url = std::ffi::OsString::from(&server.url);
    let no_arguments: [&str; 0] = [];
    let (lines, _) = crate::mcp::drive_client_of(
        "tasks_client.py",
        &url,
        &directory,
        "task_send_event",
        &no_arguments,
    );
    let run = assert_created_then_input_required(&lines);
    assert_eq!(step(&lines, "sent")["report"]["status"], json!("finished"));
    assert_completed_with_guidance(&step(&lines, "ended")["task"]);
    // The run is the ordinary durable one: the store saw it finish.
    assert_eq!(server.stop(), Some(0));
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["status", "--json", "--state-dir", "state", &run])
        .current_dir(&directory)
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["status"], json!("finished"), "{status}");
}

#[test]
fn tasks_cancel_kills_the_process_group_and_cancels_the_task() {
    let directory = crate::support::temporary_directory("mcp-tasks", "cancel");
    let sleeper = directory.join("sleeper.yaml");
    std::fs::write(&sleeper, SLEEPER).unwrap();
    let lines = drive(&directory, "task_cancel", &[&sleeper]);
    let sleeping = step(&lines, "sleeping");
    assert!(sleeping["group"].is_i64(), "the sleep started: {sleeping}");
    assert_eq!(sleeping["task"]["status"], json!("working"));
    assert_eq!(
        sleeping["task"]["statusMessage"],
        json!("an effect or child protocol of the run is running")
    );
    assert_eq!(
        step(&lines, "cancelled")["result"],
        json!({"resultType": "complete"})
    );
    assert_eq!(step(&lines, "group")["alive"], json!(false));
    assert_eq!(step(&lines, "get")["task"]["status"], json!("cancelled"));
    let again = &step(&lines, "again")["result"]["error"];
    assert_eq!(again["code"], json!(-32602));
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .ends_with("is already cancelled; a task that has ended cannot be cancelled"),
        "{again}"
    );
}

#[test]
fn a_run_that_ends_with_another_exit_code_is_a_failed_task() {
    let directory = crate::support::temporary_directory("mcp-tasks", "failed");
    let failing = directory.join("failing.yaml");
    std::fs::write(&failing, FAILING).unwrap();
    let lines = drive(&directory, "task_failed:failing", &[&failing]);
    let task = &step(&lines, "ended")["task"];
    assert_eq!(task["status"], json!("failed"));
    let error = &task["error"];
    assert_eq!(error["code"], json!(-32603));
    let run = task["taskId"].as_str().unwrap();
    assert_eq!(
        error["message"],
        json!(format!("run `{run}` finished in `broken` with exit code 3"))
    );
    assert_eq!(
        error["data"],
        json!({"state": "broken", "exit_code": 3, "output": {"why": "gave up"}})
    );
}

/// A run whose eventless transitions never settle: `--max-microsteps` ends it with an error.
const LOOPING: &str = "\
id: looping
context: { turns: 0 }
states:
  a:
    always:
      - target: b
        actions: [{ assign: { turns: \"turns + 1\" } }]
  b: { always: a }
";

#[test]
fn a_run_an_error_ended_is_a_failed_task_carrying_the_error() {
    let directory = crate::support::temporary_directory("mcp-tasks", "error");
    let looping = directory.join("looping.yaml");
    std::fs::write(&looping, LOOPING).unwrap();
    let arguments = [Path::new("--max-microsteps"), Path::new("10"), &looping];
    let lines = drive(&directory, "task_failed:looping", &arguments);
    let task = &step(&lines, "ended")["task"];
    assert_eq!(task["status"], json!("failed"));
    let run = task["taskId"].as_str().unwrap();
    let reason = "the protocol looped: 10 microsteps in one macrostep without settling, through \
                  the states a, b; give an eventless transition a guard that becomes false, or \
                  raise the limit with --max-microsteps";
    let error = &task["error"];
    assert_eq!(error["code"], json!(-32603));
    assert_eq!(
        error["message"],
        json!(format!("run `{run}` failed: {reason}"))
    );
    assert_eq!(
        error["data"],
        json!({"state": null, "exit_code": 64, "output": null, "error": reason})
    );
}

#[test]
fn an_unknown_task_is_invalid_params_and_a_bad_input_a_tool_error() {
    let directory = crate::support::temporary_directory("mcp-tasks", "unknown");
    let lines = drive(&directory, "task_unknown", &served_ittw());
    for name in ["get", "cancel"] {
        assert_eq!(
            step(&lines, name)["result"]["error"],
            json!({"code": -32602, "data": null,
                   "message": "no task `ittw:nope`: no run has this id; list_runs lists them"})
        );
    }
    let bad = &step(&lines, "bad_input")["result"];
    assert_eq!(bad["isError"], json!(true), "no task is made: {bad}");
    assert_eq!(
        bad["content"][0]["text"],
        json!(
            "missing required input `path` (The file or directory the call targets); give the \
             tool its `path` argument"
        )
    );
}

#[test]
fn a_client_without_the_extension_gets_a_plain_report() {
    let directory = crate::support::temporary_directory("mcp-tasks", "plain");
    let lines = drive(&directory, "plain", &served_ittw());
    let report = &step(&lines, "started")["report"];
    assert_eq!(report["status"], json!("running"));
    assert!(report["run"].as_str().unwrap().starts_with("ittw:mcp-"));
    // The read of the missing file is what the run waits on as the call returns.
    assert_eq!(report["waiting"], json!("effect"));
    // Without the extension, a 2025-11-25 session's `tasks/get` is of that revision's dialect,
    // which reads only the tasks the session created (tests/mcp_specification_tasks.rs).
    let error = &step(&lines, "get")["result"]["error"];
    assert_eq!(error["code"], json!(-32602), "{error}");
    assert!(
        error["message"].as_str().unwrap().starts_with(&format!(
            "no task `{}` in this session",
            report["run"].as_str().unwrap()
        )),
        "{error}"
    );
}

#[test]
fn an_eliciting_client_is_asked_for_guidance_and_the_call_returns_the_finished_run() {
    let directory = crate::support::temporary_directory("mcp-tasks", "elicit");
    let lines = drive(&directory, "elicit_accept", &served_ittw());
    assert_asked_once_then_finished_with_guidance(step(&lines, "called"));
}

#[test]
fn a_declined_elicitation_returns_the_waiting_report() {
    let directory = crate::support::temporary_directory("mcp-tasks", "decline");
    let lines = drive(&directory, "elicit_decline", &served_ittw());
    let called = step(&lines, "called");
    assert_eq!(called["asked"].as_array().unwrap().len(), 1);
    let report = &called["report"];
    assert_eq!(report["status"], json!("running"));
    assert_eq!(report["states"], json!(["waiting_for_guidance"]));
    assert_eq!(report["waiting"], json!("input"));
    assert_eq!(report["events"], json!([{"name": "captain_guidance"}]));
}

#[test]
fn no_elicitation_leaves_the_plain_call_as_it_was() {
    let directory = crate::support::temporary_directory("mcp-tasks", "no-elicitation");
    let lines = drive(
        &directory,
        "elicit_off",
        &[&["--no-elicitation".into()], &served_ittw()[..]].concat(),
    );
    let called = step(&lines, "called");
    assert_eq!(called["asked"], json!([]));
    assert_eq!(called["report"]["status"], json!("running"));
}

#[test]
fn a_flat_event_schema_is_asked_as_a_form_and_its_answer_is_the_data() {
    let directory = crate::support::temporary_directory("mcp-tasks", "form");
    let lines = drive(&directory, "elicit_form", &[events_demo()]);
    let called = step(&lines, "called");
    let asked = called["asked"].as_array().unwrap();
    // `approve` comes first in the state's transitions, and its answer finishes the run.
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0]["requestedSchema"],
        json!({"type": "object",
               "properties": {"by": {"type": "string", "minLength": 1}, "note": {"type": "string"}},
               "required": ["by"]})
    );
    assert_eq!(
        called["report"]["finished"]["output"],
        json!({"approver": "ann"})
    );
}

/// Runs tests/mcp-tasks/client.mjs (the TypeScript SDK with its Tasks extension package, pinned
/// in tests/mcp-tasks/package.json) against a server of `arguments`; returns its JSON lines.
fn drive_typescript<P: AsRef<std::ffi::OsStr>>(
    directory: &Path,
    script: &str,
    arguments: &[P],
) -> Vec<Value> {
    // Installed (`npm ci`, as .ci/run does) when missing or not the pinned version.
    crate::support::npm_package::installed("mcp-tasks", "@modelcontextprotocol/ext-tasks");
    let client_directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-tasks");
    let output = std::process::Command::new("node")
        .arg(client_directory.join("client.mjs"))
        .arg(env!("CARGO_BIN_EXE_protocol-run"))
        .arg(directory.join("state"))
        .arg(script)
        .args(arguments)
        .current_dir(directory)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "the client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn the_typescript_tasks_extension_walks_ittw_to_completion() {
    let directory = crate::support::temporary_directory("mcp-tasks", "typescript");
    let lines = drive_typescript(&directory, "guidance", &served_ittw());
    let settled = step(&lines, "settled");
    assert_eq!(settled["kind"], json!("task"));
    assert!(
        settled["taskId"].as_str().unwrap().starts_with("ittw:mcp-"),
        "{settled}"
    );
    let statuses = settled["statuses"].as_array().unwrap();
    assert_eq!(statuses.last(), Some(&json!("completed")), "{statuses:?}");
    assert!(statuses.contains(&json!("input_required")), "{statuses:?}");
    let asked = settled["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["kind"], json!("elicitation"));
    assert!(
        asked[0]["params"]["message"]
            .as_str()
            .unwrap()
            .contains("waits for the event `captain_guidance`"),
        "{asked:?}"
    );
    let outcome = &settled["outcome"];
    assert_eq!(outcome["status"], json!("completed"));
    assert_eq!(
        outcome["result"]["structuredContent"]["finished"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
    assert_eq!(outcome["task"]["retentionMs"], json!(null));
}

#[test]
fn the_typescript_tasks_extension_cancels_a_run_and_its_process_group() {
    let directory = crate::support::temporary_directory("mcp-tasks", "typescript-cancel");
    let sleeper = directory.join("sleeper.yaml");
    std::fs::write(&sleeper, SLEEPER).unwrap();
    let lines = drive_typescript(&directory, "cancel", &[&sleeper]);
    assert!(step(&lines, "sleeping")["group"].is_i64(), "{lines:?}");
    let cancelled = step(&lines, "cancelled");
    assert_eq!(cancelled["outcome"], json!("cancelled"));
    assert_eq!(cancelled["alive"], json!(false));
}

#[test]
fn a_2026_client_is_asked_by_an_input_required_result_and_its_retry_finishes_the_run() {
    let directory = crate::support::temporary_directory("mcp-tasks", "input-required");
    let lines = drive_typescript(&directory, "input_required", &served_ittw());
    let called = step(&lines, "called");
    assert_eq!(called["isError"], json!(false));
    // The retry answered the run the first call started: no second run.
    assert_asked_once_then_finished_with_guidance(called);
}

#[test]
fn a_2026_call_answers_input_required_and_its_retries_deliver_refuse_or_decline() {
    let directory = crate::support::temporary_directory("mcp-tasks", "retries");
    let lines = drive(&directory, "input_required", &[events_demo()]);
    let first = &step(&lines, "first")["result"];
    assert_eq!(first["resultType"], json!("input_required"));
    let run = first["requestState"].as_str().unwrap();
    assert!(run.starts_with("events-demo:mcp-"), "{run}");
    let requests = first["inputRequests"].as_object().unwrap();
    let keys: Vec<&str> = requests
        .keys()
        .map(|key| key.split('@').next().unwrap())
        .collect();
    assert_eq!(keys, ["approve", "cancel"]);

    let forged = &step(&lines, "forged")["result"];
    assert_eq!(forged["isError"], json!(true));
    assert_eq!(
        forged["content"][0]["text"],
        json!(
            "requestState `ittw:other` names no run of this `events-demo` call; retry the call \
             with the requestState its input_required result gave"
        )
    );
    // Declined: the report as it is, the run still waiting.
    let declined = &step(&lines, "declined")["result"]["structuredContent"];
    assert_eq!(declined["run"], json!(run));
    assert_eq!(declined["waiting"], json!("input"));
    // Data off the event's schema: refused as send_event refuses it.
    let refused = &step(&lines, "refused")["result"];
    assert_eq!(refused["isError"], json!(true));
    assert_eq!(
        refused["content"][0]["text"],
        json!(
            "event `approve` has data that does not conform: at `/by`: \"\" is shorter than 1 character"
        )
    );
    let accepted = &step(&lines, "accepted")["result"]["structuredContent"];
    assert_eq!(accepted["run"], json!(run), "the retry started no run");
    assert_eq!(accepted["finished"]["output"], json!({"approver": "ann"}));
}

/// A run that an unhandled `error.execution` fails (`errors: strict`, exit 76): the failed
/// task's message says which error, as a looping run's says why, not only the exit code.
const UNHANDLED: &str = "\
id: unhandled
context: { n: 0 }
states:
  start:
    entry: [{ assign: { n: \"1 / n\" } }]
    always: done
  done: { type: final }
";

#[test]
fn a_run_an_unhandled_error_failed_is_a_failed_task_naming_the_error() {
    let directory = crate::support::temporary_directory("mcp-tasks", "unhandled");
    let unhandled = directory.join("unhandled.yaml");
    std::fs::write(&unhandled, UNHANDLED).unwrap();
    let lines = drive(&directory, "task_failed:unhandled", &[&unhandled]);
    let task = &step(&lines, "ended")["task"];
    assert_eq!(task["status"], json!("failed"), "{task}");
    let error = &task["error"];
    assert_eq!(error["data"]["exit_code"], json!(76), "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("error.execution") && message.contains("Division by zero"),
        "the failed task does not say which error failed the run: {error}"
    );
}
