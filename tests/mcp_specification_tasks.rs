//! Runs as tasks in the dialect of the 2025-11-25 specification (SEP-1686), which VS Code and the official SDKs speak, driven by the official Python SDK's own task API (tests/mcp/specification_tasks_client.py): `task` in `tools/call`, `tasks/get`, `tasks/result` (its elicitation tied to the task), `tasks/list` per session, `tasks/cancel`, `notifications/tasks/status`.

use std::path::Path;

use serde_json::{Value, json};

use crate::mcp::{SLEEPER, drive_client, drive_client_of, served_ittw, step};

fn drive<P: AsRef<std::ffi::OsStr>>(directory: &Path, script: &str, arguments: &[P]) -> Vec<Value> {
    drive_client(
        "specification_tasks_client.py",
        directory,
        script,
        arguments,
    )
    .0
}

/// A protocol whose run finishes as it starts.
const DONE: &str = "\
id: done
states:
  start: { type: final }
";

/// The server declared the 2025-11-25 `tasks` capability.
fn assert_declared_tasks(lines: &[Value]) {
    let initialized = step(lines, "initialized");
    assert_eq!(initialized["protocol"], json!("2025-11-25"));
    assert_eq!(
        initialized["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
}

/// ITTW called as a task: a protocol tool may be, the management tools may not; the task
/// begins `working` and comes to `input_required` as the run waits for the captain. Its id.
fn assert_created_then_input_required(lines: &[Value]) -> String {
    assert_declared_tasks(lines);
    let execution = &step(lines, "tools")["execution"];
    assert_eq!(execution["ittw"], json!({"taskSupport": "optional"}));
    assert_eq!(execution["send_event"], json!(null), "{execution}");
    let created = &step(lines, "created")["result"]["task"];
    let task = created["taskId"].as_str().unwrap().to_string();
    assert!(
        task.starts_with("ittw:mcp-"),
        "the task id is the run id: {task}"
    );
    assert_eq!(created["status"], json!("working"));
    assert_eq!(created["pollInterval"], json!(500));
    assert_eq!(
        step(lines, "created")["ttl"],
        json!(null),
        "a run is durable"
    );
    let waiting = step(lines, "input_required");
    assert_eq!(
        waiting["seen"].as_array().unwrap().last(),
        Some(&json!("input_required"))
    );
    assert_eq!(
        waiting["task"]["statusMessage"],
        json!(
            "the run waits for one of the events `captain_guidance`: tasks/result asks for it \
             by elicitation, or send_event sends it"
        )
    );
    task
}

/// `tasks/result` answered what the plain call would have, the run finished with the
/// guidance, tied to the task.
fn assert_result_finished_with_guidance(lines: &[Value], task: &str) {
    let result = &step(lines, "result")["result"];
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": task})
    );
    assert_eq!(result["isError"], json!(false));
    let report = &result["structuredContent"];
    assert_eq!(report["run"], json!(task));
    assert_eq!(report["status"], json!("finished"));
    assert_eq!(
        report["finished"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
}

#[test]
fn ittw_as_a_task_takes_guidance_through_tasks_result() {
    let directory = crate::support::temporary_directory("mcp-specification-tasks", "elicit");
    let lines = drive(&directory, "elicit", &served_ittw());
    let task = assert_created_then_input_required(&lines);
    assert_result_finished_with_guidance(&lines, &task);

    // The guidance was asked once, by an elicitation request tied to the task.
    let asked = step(&lines, "result")["asked"].as_array().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0]["meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": task})
    );
    assert!(
        asked[0]["message"].as_str().unwrap().starts_with(&format!(
            "Run `{task}` of protocol `ittw` waits for the event `captain_guidance`."
        )),
        "{asked:?}"
    );
    assert_eq!(step(&lines, "get")["task"]["status"], json!("completed"));

    // The session was told of the task's status changes, input_required then completed.
    let statuses: Vec<&Value> = step(&lines, "statuses")["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|status| &status["status"])
        .collect();
    assert!(
        statuses.first() == Some(&&json!("input_required"))
            && statuses.last() == Some(&&json!("completed")),
        "{statuses:?}"
    );
}

#[test]
fn a_task_waiting_for_input_takes_it_by_send_event_too() {
    let directory = crate::support::temporary_directory("mcp-specification-tasks", "send");
    let lines = drive(&directory, "send_event", &served_ittw());
    let task = assert_created_then_input_required(&lines);
    assert_eq!(step(&lines, "sent")["report"]["status"], json!("finished"));
    assert_result_finished_with_guidance(&lines, &task);
    // This client takes no elicitation: nothing was asked.
    assert_eq!(step(&lines, "result")["asked"], json!([]));
    let refused = &step(&lines, "bad_input")["outcome"]["error"];
    assert_eq!(refused["code"], json!(-32602), "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("missing required input `path`"),
        "{refused}"
    );
}

#[test]
fn tasks_cancel_cancels_the_run_and_its_effects() {
    let directory = crate::support::temporary_directory("mcp-specification-tasks", "cancel");
    let sleeper = directory.join("sleeper.yaml");
    std::fs::write(&sleeper, SLEEPER).unwrap();
    let lines = drive(&directory, "cancel", &[&sleeper]);
    let sleeping = step(&lines, "sleeping");
    assert!(sleeping["group"].is_i64(), "the effect ran: {lines:?}");
    assert_eq!(sleeping["task"]["status"], json!("working"));
    let cancelled = &step(&lines, "cancelled")["outcome"]["result"];
    assert_eq!(cancelled["status"], json!("cancelled"), "{cancelled}");
    assert_eq!(step(&lines, "group")["alive"], json!(false));
    let task = cancelled["taskId"].as_str().unwrap();
    assert_eq!(
        step(&lines, "again")["outcome"]["error"],
        json!({"code": -32602,
               "message": format!("task `{task}` is already cancelled; a task that has ended \
                                   cannot be cancelled")})
    );
    let result = &step(&lines, "result")["result"];
    assert_eq!(result["structuredContent"]["status"], json!("cancelled"));
    let refused = &step(&lines, "not_a_task")["outcome"]["error"];
    assert_eq!(refused["code"], json!(-32601), "{refused}");
}

#[test]
fn tasks_list_pages_the_sessions_own_tasks_only() {
    let directory = crate::support::temporary_directory("mcp-specification-tasks", "list");
    let done = directory.join("done.yaml");
    std::fs::write(&done, DONE).unwrap();
    let mut server = crate::support::mcp_http_server::McpHttpServer::start(
        &directory,
        &[done.to_str().unwrap()],
    );
    let no_arguments: [&str; 0] = [];
    let url = std::ffi::OsString::from(&server.url);
    let (lines, _) = drive_client_of(
        "specification_tasks_client.py",
        &url,
        &directory,
        "list:done",
        &no_arguments,
    );
    assert_declared_tasks(&lines);
    let created = step(&lines, "created")["tasks"].as_array().unwrap().clone();
    assert_eq!(created.len(), 25);

    // 20 a page, oldest first; the cursor leads to the rest.
    let first = step(&lines, "first");
    assert_eq!(first["tasks"].as_array().unwrap()[..], created[..20]);
    assert!(first["next"].is_string(), "{first}");
    let second = step(&lines, "second");
    let listed: Vec<&Value> = second["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| &task["taskId"])
        .collect();
    assert_eq!(listed, created[20..].iter().collect::<Vec<_>>());
    assert_eq!(second["next"], json!(null));
    assert_eq!(second["tasks"][0]["status"], json!("completed"));
    assert_eq!(
        step(&lines, "bad_cursor")["outcome"]["error"]["code"],
        json!(-32602)
    );

    // Another session sees none of them.
    assert_eq!(step(&lines, "other_session")["tasks"], json!([]));
    let other = &step(&lines, "other_get")["outcome"]["error"];
    assert_eq!(other["code"], json!(-32602));
    assert!(
        other["message"].as_str().unwrap().starts_with(&format!(
            "no task `{}` in this session",
            created[0].as_str().unwrap()
        )),
        "{other}"
    );
    assert_eq!(server.stop(), Some(0));
}
