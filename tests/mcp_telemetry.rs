//! A run's telemetry as an MCP resource, read with the official Python SDK: a run driven over
//! MCP (its journal), runs `protocol-run run` made (their telemetry file too, the latest
//! records only), an unknown run and a run of a protocol the server does not serve.

use serde_json::{Value, json};

use crate::mcp::{drive, ittw, step};

/// A protocol that counts ticks until `stop`.
const TICKER: &str = "id: ticker\ninitial: counting\nstates:\n  counting:\n    on: { tick: counting, stop: done }\n  done: { type: final }\n";

const OTHER: &str = "id: other\ninitial: done\nstates:\n  done: { type: final }\n";

#[test]
fn a_runs_telemetry_is_a_resource_bounded_to_its_latest_records() {
    let directory = crate::support::temporary_directory("mcp", "telemetry");
    std::fs::write(directory.join("present.txt"), "hello\n").unwrap();
    std::fs::write(directory.join("ticker.yaml"), TICKER).unwrap();
    std::fs::write(directory.join("other.yaml"), OTHER).unwrap();
    let mut ticks: String = "{\"event\":\"tick\"}\n".repeat(600);
    ticks.push_str("{\"event\":\"stop\"}\n");
    std::fs::write(directory.join("ticks.jsonl"), ticks).unwrap();
    let ittw = ittw().display().to_string();
    for arguments in [
        vec![
            ittw.as_str(),
            "--run-id",
            "cli-1",
            "--input",
            "path=present.txt",
        ],
        vec![
            "ticker.yaml",
            "--run-id",
            "many-1",
            "--events",
            "ticks.jsonl",
        ],
        vec!["other.yaml", "--run-id", "other-1"],
    ] {
        let (code, text) = crate::support::run_binary_with_state(&directory, &arguments);
        assert_eq!(code, 0, "{arguments:?}: {text}");
    }
    let (lines, _) = drive(
        &directory,
        "telemetry",
        &["--allow-read", "**", ittw.as_str(), "ticker.yaml"],
    );
    let templates = &step(&lines, "templates")["templates"];
    assert_eq!(
        templates[1],
        json!([
            "protocol-run://run/{run}/telemetry",
            "the run's latest journal steps and telemetry entries (at most 500 of each, 512 \
             KiB of each; `truncated` says when older ones were left out)"
        ])
    );

    // Over MCP: the journal, step by step, from the start to the guidance; the telemetry the
    // server kept in the store, from its start to its finish.
    let read = step(&lines, "mcp_run");
    assert_eq!(read["mime"], json!("application/json"));
    let telemetry = &read["telemetry"];
    assert_eq!(telemetry["run"], read["run"]);
    assert_eq!(telemetry["protocol"], json!(ittw));
    assert_eq!(telemetry["status"], json!("finished"));
    assert_eq!(telemetry["truncated"], json!(false));
    let entries = telemetry["entries"].as_array().unwrap();
    assert!(
        entries.iter().any(|entry| entry["kind"] == "start"),
        "{telemetry}"
    );
    assert_eq!(
        entries.last().unwrap()["kind"],
        json!("finish"),
        "{telemetry}"
    );
    let steps = telemetry["steps"].as_array().unwrap();
    let numbers: Vec<u64> = steps
        .iter()
        .map(|step| step["step"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..steps.len() as u64).collect::<Vec<_>>());
    assert_eq!(steps[0]["event"], Value::Null);
    // The first action (after, on a kernel without Landlock, the warning that it does not
    // confine).
    let first = steps[0]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|action| action["tags"] != json!(["sandbox_unenforced"]))
        .unwrap();
    assert_eq!(
        *first,
        json!({"effect": "tool_call", "kind": "read_file", "invocation": 0, "owner": "calling"})
    );
    // The read, its retry and the grep fail; the guidance is the last event (a health check's
    // outcome may come before it).
    let events: Vec<&Value> = steps[1..]
        .iter()
        .map(|step| &step["event"]["name"])
        .collect();
    assert_eq!(
        events[..3],
        [
            "error.exec.tool_call",
            "error.exec.tool_call",
            "error.exec.grep_search"
        ]
    );
    assert_eq!(events.last().unwrap(), &"captain_guidance");
    let last = steps.last().unwrap();
    assert_eq!(last["event"]["data"], json!({"action": "skip the task"}));
    assert!(
        last["actions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|action| action.is_object()),
        "{last}"
    );

    // A run of `protocol-run run`: its telemetry file's entries too, from start to finish.
    let telemetry = &step(&lines, "cli_run")["telemetry"];
    assert_eq!(telemetry["status"], json!("finished"));
    let entries = telemetry["entries"].as_array().unwrap();
    let kinds: Vec<&Value> = entries.iter().map(|entry| &entry["kind"]).collect();
    assert!(kinds.contains(&&json!("start")), "{kinds:?}");
    assert_eq!(kinds.last().unwrap(), &"finish");
    assert_eq!(entries.last().unwrap()["state"], json!("resolved_at_once"));
    assert!(entries.iter().all(|entry| entry["run"] == "cli-1"));

    // 602 steps and more entries: the latest 500 of each, the last one last.
    let telemetry = &step(&lines, "many")["telemetry"];
    assert_eq!(telemetry["truncated"], json!(true));
    let steps = telemetry["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 500);
    assert_eq!(steps[0]["step"], json!(102));
    assert_eq!(steps[499]["step"], json!(601));
    assert_eq!(steps[499]["event"], json!({"name": "stop", "data": null}));
    let entries = telemetry["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 500);
    assert_eq!(entries[499]["kind"], json!("finish"));

    assert_eq!(
        step(&lines, "unknown")["error"],
        json!("no run `ittw:nope`; list_runs lists them")
    );
    let other = directory.join("other.yaml").canonicalize().unwrap();
    assert_eq!(
        step(&lines, "not_served")["error"],
        json!(format!(
            "run `other-1` runs {}, which this server does not serve; `protocol-run logs \
             other-1` and `protocol-run status other-1` read it",
            other.display()
        ))
    );
}
