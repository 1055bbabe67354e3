//! A host's grants are the operator's: `serve` and `mcp` resolve a grant naming an input only
//! from the values the operator pins (`--input`), bound a kind naming another input by the
//! operator's narrowing, and refuse a protocol whose grants a client would choose otherwise.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::mcp_raw::{RawMcp, tool_error};
use crate::support::{run_binary, run_binary_with_input, temporary_directory};

/// Writes `report.md` under the input `directory`, granted to write there only.
const WRITER: &str = r#"
id: writer
inputs:
  directory: { type: string, required: true }
  note: { type: string, default: written }
permissions:
  write: ["${directory}/**"]
  exec: []
states:
  writing:
    entry:
      - write: "${directory}/report.md"
        content: "${note}"
        id: report
    on:
      done.exec.report: done
      error.permission: { target: denied, actions: [{ log: "denied ${event.data.subject}" }] }
  done: { type: final }
  denied: { type: final, exit_code: 3 }
"#;

/// A test's directory holding `writer.yaml`, and a directory outside it that no run may write.
fn writer_directory(
    name: &str,
) -> (
    crate::support::TemporaryDirectory,
    crate::support::TemporaryDirectory,
) {
    let directory = temporary_directory("host-grants", name);
    std::fs::write(directory.join("writer.yaml"), WRITER).unwrap();
    let outside = temporary_directory("host-grants", &format!("{name}-outside"));
    (directory, outside)
}

fn resilience_tool_failure() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("protocols/resilience-tool-failure.yaml")
        .display()
        .to_string()
}

/// `tools/list`'s tool `name`.
fn listed_tool(server: &mut RawMcp, id: u64, name: &str) -> Value {
    let listed = server.request(id, "tools/list", json!({}));
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .find(|tool| tool["name"] == name)
        .unwrap_or_else(|| panic!("no tool `{name}` in {listed}"))
        .clone()
}

/// The state and exit code the run a tool call started finished in, asked of `get_run` (with
/// request ids from `id` on) until it has.
fn finished(server: &mut RawMcp, mut id: u64, started: &Value) -> (Value, Value) {
    let run = crate::support::mcp_raw::reported_run(started);
    let mut report = started["structuredContent"].clone();
    // Bounded by asking, not by time: a run that never ends fails the test.
    for _ in 0..10_000 {
        if report["status"] != "running" {
            let finished = &report["finished"];
            return (finished["state"].clone(), finished["exit_code"].clone());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        report = server.call(id, "get_run", json!({"run": run}))["structuredContent"].clone();
        id += 1;
    }
    panic!("run {run} never finished: {report}");
}

/// A protocol that grants nothing and waits: served beside one that is not.
const WAITER: &str = "id: waiter\npermissions: { exec: [], write: [], read: [], env: [] }\n\
                      states:\n  waiting:\n    on: { go: done }\n  done: { type: final }\n";

#[test]
fn an_mcp_client_cannot_choose_grants_by_its_inputs() {
    let (directory, outside) = writer_directory("mcp-unpinned");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let mut server = RawMcp::start(&directory, &["writer.yaml", "waiter.yaml"], json!({}));
    let listed = server.request(1, "tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"waiter") && !names.contains(&"writer"),
        "{names:?}"
    );
    let refused = server.request(
        2,
        "tools/call",
        json!({"name": "writer", "arguments": {"directory": outside}}),
    );
    assert!(
        refused
            .get("result")
            .is_none_or(|result| result["isError"] == json!(true)),
        "{refused}"
    );
    let stderr = server.finish();
    assert!(
        stderr.contains(
            "writer.yaml: not served: `permissions.write` names the input `directory`, which each \
             client would choose; pin it with --input directory=VALUE, or narrow `write` with \
             --allow-write (or --sandbox strict)"
        ),
        "{stderr}"
    );
    assert!(!outside.join("report.md").exists());
}

#[test]
fn an_mcp_client_cannot_write_outside_what_the_operator_narrowed() {
    let (directory, outside) = writer_directory("mcp-narrowed");
    let mut server = RawMcp::start(
        &directory,
        &["--allow-write", "inside/**", "writer.yaml"],
        json!({}),
    );
    let widening = server.call(1, "writer", json!({"directory": outside}));
    assert_eq!(
        finished(&mut server, 100, &widening),
        (json!("denied"), json!(3))
    );
    let within = server.call(2, "writer", json!({"directory": "inside"}));
    assert_eq!(
        finished(&mut server, 20_000, &within),
        (json!("done"), json!(0))
    );
    server.finish();
    assert!(!outside.join("report.md").exists());
    assert_eq!(
        std::fs::read_to_string(directory.join("inside/report.md")).unwrap(),
        "written"
    );
}

#[test]
fn a_pinned_input_leaves_the_tools_schema_and_every_run_takes_it() {
    let (directory, outside) = writer_directory("mcp-pinned");
    let mut server = RawMcp::start(
        &directory,
        &["--input", "directory=pinned", "writer.yaml"],
        json!({}),
    );
    let tool = listed_tool(&mut server, 1, "writer");
    let schema = &tool["inputSchema"];
    assert_eq!(schema["properties"].get("directory"), None, "{tool}");
    assert!(schema["properties"].get("note").is_some(), "{tool}");
    assert_eq!(schema.get("required"), None, "{tool}");
    let run = server.call(2, "writer", json!({"note": "from the client"}));
    assert_eq!(finished(&mut server, 100, &run), (json!("done"), json!(0)));
    let overriding = server.call(3, "writer", json!({"directory": outside}));
    assert_eq!(
        tool_error(&overriding),
        "input `directory` is pinned by the operator (--input directory=...): every run takes \
         the pinned value; leave `directory` out"
    );
    server.finish();
    assert_eq!(
        std::fs::read_to_string(directory.join("pinned/report.md")).unwrap(),
        "from the client"
    );
    assert!(!outside.join("report.md").exists());
}

#[test]
fn resilience_tool_failure_is_served_only_pinned_or_narrowed() {
    let directory = temporary_directory("host-grants", "resilience");
    let protocol = resilience_tool_failure();
    let refusals = [
        "`permissions.exec` names the input `command`, which each client would choose; pin it \
         with --input command=VALUE, or narrow `exec` with --allow-exec (or --sandbox strict)",
        "`permissions.exec` names the input `alternative`",
        "`permissions.write` names the input `tasks_dir`, which each client would choose; pin \
         it with --input tasks_dir=VALUE, or narrow `write` with --allow-write",
    ];
    for command in ["mcp", "serve"] {
        let (code, _, stderr) =
            run_binary(&directory, &[command, &protocol, "--state-dir", "state"]);
        assert_eq!(code, 65, "{command}: {stderr}");
        for refusal in refusals {
            assert!(
                stderr.contains(&format!("{protocol}: not served: {refusal}")),
                "{command}: {stderr}"
            );
        }
    }
    // Narrowed, `serve` runs an instance: the program a client names is refused unless the
    // operator granted it.
    let lines = concat!(
        r#"{"instance": "a", "inputs": {"command": ["touch", "touched"], "tool": "touch", "#,
        r#""target": "touched", "tasks_dir": "tasks"}}"#,
        "\n"
    );
    let output = run_binary_with_input(
        &directory,
        &[
            "serve",
            &protocol,
            "--store",
            "memory",
            "--allow-exec",
            "echo",
            "--allow-write",
            "tasks/**",
        ],
        lines.as_bytes(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("attempt: running `touch` is not permitted"),
        "{stderr}"
    );
    assert!(!directory.join("touched").exists());
    // Pinned, `mcp` serves it, its tool without the pinned inputs.
    let mut server = RawMcp::start(
        &directory,
        &[
            "--input",
            "command=[echo, pinned]",
            "--input",
            "alternative=[]",
            "--input",
            "tasks_dir=tasks",
            &protocol,
        ],
        json!({}),
    );
    let tool = listed_tool(&mut server, 1, "resilience-tool-failure");
    let properties = tool["inputSchema"]["properties"].as_object().unwrap();
    for pinned in ["command", "alternative", "tasks_dir"] {
        assert!(!properties.contains_key(pinned), "{tool}");
    }
    let run = server.call(
        2,
        "resilience-tool-failure",
        json!({"tool": "echo", "target": "pinned", "target_type": "command"}),
    );
    assert_eq!(finished(&mut server, 100, &run).1, json!(0));
    server.finish();
}

#[test]
fn serve_pins_inputs_for_every_instance_and_refuses_a_line_that_gives_one() {
    let (directory, outside) = writer_directory("serve-pinned");
    let lines = format!(
        "{}\n{}\n",
        json!({"instance": "a", "inputs": {"note": "from a"}}),
        json!({"instance": "b", "inputs": {"directory": outside}}),
    );
    let output = run_binary_with_input(
        &directory,
        &[
            "serve",
            "writer.yaml",
            "--state-dir",
            "state",
            "--input",
            "directory=pinned",
        ],
        lines.as_bytes(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(r#"{"instance":"a","finished":{"state":"done","exit_code":0"#),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "input line 2: instance `b`: input `directory` is pinned by the operator \
             (--input directory=...): every run takes the pinned value; leave `directory` out"
        ),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(directory.join("pinned/report.md")).unwrap(),
        "from a"
    );
    assert!(!outside.join("report.md").exists());
}

#[test]
fn serve_narrowed_bounds_an_input_a_line_gives() {
    let (directory, outside) = writer_directory("serve-narrowed");
    let lines = format!(
        "{}\n{}\n",
        json!({"instance": "a", "inputs": {"directory": "inside"}}),
        json!({"instance": "b", "inputs": {"directory": outside}}),
    );
    let output = run_binary_with_input(
        &directory,
        &[
            "serve",
            "writer.yaml",
            "--store",
            "memory",
            "--allow-write",
            "inside/**",
        ],
        lines.as_bytes(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(r#"{"instance":"a","finished":{"state":"done","exit_code":0"#)
            && stdout.contains(r#"{"instance":"b","finished":{"state":"denied","exit_code":3"#),
        "{stdout}"
    );
    assert!(directory.join("inside/report.md").exists());
    assert!(!outside.join("report.md").exists());
}
