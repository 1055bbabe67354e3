//! `protocol-run mcp` under the official MCP Python SDK (`mcp` on PyPI, pinned in
//! tests/mcp/requirements.txt, installed by .ci/run into tests/mcp/.venv): tools listed with
//! their input schemas, ITTW driven to its escalation and finished with guidance, bad inputs
//! refused by name, invalid protocols not served.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// The Python that has the SDK: `PROTOCOL_RUN_MCP_PYTHON`, or the venv .ci/run makes.
pub(crate) fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("PROTOCOL_RUN_MCP_PYTHON") {
        return PathBuf::from(python);
    }
    // Made (`python3 -m venv`, `pip install -r`, as .ci/run does) when missing or not pinned.
    crate::support::python_venv::python()
}

/// Runs tests/mcp/client.py's `script` against a server of `protocols` (and flags) in
/// `directory`; returns its JSON lines by `step`, and its stderr (the server's too).
pub(crate) fn drive<P: AsRef<std::ffi::OsStr>>(
    directory: &Path,
    script: &str,
    protocols: &[P],
) -> (Vec<Value>, String) {
    drive_client("client.py", directory, script, protocols)
}

/// `drive`, with another client of tests/mcp/.
pub(crate) fn drive_client<P: AsRef<std::ffi::OsStr>>(
    client: &str,
    directory: &Path,
    script: &str,
    protocols: &[P],
) -> (Vec<Value>, String) {
    let binary = std::ffi::OsStr::new(env!("CARGO_BIN_EXE_protocol-run"));
    drive_client_of(client, binary, directory, script, protocols)
}

/// As `drive_client`, the client talking to `server`: the binary it starts over stdio, or the
/// URL of a server already listening with `mcp --http`.
pub(crate) fn drive_client_of<P: AsRef<std::ffi::OsStr>>(
    client: &str,
    server: &std::ffi::OsStr,
    directory: &Path,
    script: &str,
    protocols: &[P],
) -> (Vec<Value>, String) {
    let client = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(client);
    let output = Command::new(python())
        .arg(client)
        .arg(server)
        .arg(directory.join("state"))
        .arg(script)
        .args(protocols)
        .current_dir(directory)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        output.status.success(),
        "the client failed:\n{stdout}\n{stderr}"
    );
    let lines = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (lines, stderr)
}

pub(crate) fn step<'l>(lines: &'l [Value], name: &str) -> &'l Value {
    lines
        .iter()
        .find(|line| line["step"] == name)
        .unwrap_or_else(|| panic!("no step `{name}` in {lines:?}"))
}

pub(crate) fn ittw() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols/ittw.yaml")
}

/// The arguments that serve ITTW as docs/mcp.md serves it: its reads (of the `path` a client
/// gives) narrowed to the working directory.
pub(crate) fn served_ittw() -> Vec<std::ffi::OsString> {
    served_ittw_from(&ittw())
}

/// `served_ittw` with ITTW at `protocol`.
pub(crate) fn served_ittw_from(protocol: &Path) -> Vec<std::ffi::OsString> {
    vec!["--allow-read".into(), "**".into(), protocol.into()]
}

#[test]
fn a_protocol_is_a_tool_whose_schema_is_its_inputs() {
    let directory = crate::support::temporary_directory("mcp", "schema");
    let (lines, _) = drive(&directory, "errors", &served_ittw());
    let tools = &step(&lines, "tools")["tools"];
    let names: Vec<&String> = tools.as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        [
            "ittw",
            "send_event",
            "wait_for_state",
            "get_run",
            "list_runs",
            "cancel_run",
            "resume_run",
            "redrive_run",
            "get_logs",
            "get_diagram"
        ]
    );
    let schema = &tools["ittw"];
    assert_eq!(schema["required"], json!(["path"]));
    assert_eq!(schema["additionalProperties"], json!(false));
    assert_eq!(
        schema["properties"]["tool"],
        json!({"type": "string", "enum": ["read_file", "list_dir"],
               "description": "The tool whose call failed", "default": "read_file"})
    );
    assert_eq!(
        schema["properties"]["timeout"],
        json!({"type": ["string", "integer"],
               "description": "Timeout of each tool call; minimum 100 ms; maximum 600000 ms",
               "default": 30000})
    );
}

#[test]
fn a_bad_input_is_a_tool_error_naming_it() {
    let directory = crate::support::temporary_directory("mcp", "bad-input");
    let (lines, _) = drive(&directory, "errors", &served_ittw());
    let bad = step(&lines, "bad_input");
    assert_eq!(bad["error"], json!(true));
    assert_eq!(
        bad["text"],
        json!("input `tool`: `write_file` is not one of read_file, list_dir")
    );
    let missing = step(&lines, "missing_input");
    assert_eq!(missing["error"], json!(true));
    assert_eq!(
        missing["text"],
        json!(
            "missing required input `path` (The file or directory the call targets); give the \
             tool its `path` argument"
        )
    );
    let unknown = step(&lines, "unknown_run");
    assert_eq!(
        unknown["text"],
        json!("no run `ittw:nope`; list_runs lists them")
    );
}

#[test]
fn ittw_escalates_takes_guidance_and_finishes_as_a_stored_run() {
    let directory = crate::support::temporary_directory("mcp", "ittw");
    let (lines, _) = drive(&directory, "ittw", &served_ittw());
    let started = &step(&lines, "started")["report"];
    let run = started["run"].as_str().unwrap();
    assert!(run.starts_with("ittw:mcp-"), "{run}");
    assert_eq!(started["status"], json!("running"));

    // The read and the grep fail on the missing path: the captain is asked, and guidance is
    // the one event the run can take.
    let waiting = &step(&lines, "waiting")["report"];
    assert_eq!(waiting["states"], json!(["waiting_for_guidance"]));
    assert_eq!(waiting["events"], json!([{"name": "captain_guidance"}]));
    let directives = waiting["directives"].as_array().unwrap();
    assert_eq!(directives.len(), 1, "{directives:?}");
    assert_eq!(directives[0]["directive"], json!("escalate_to_captain"));
    assert_eq!(directives[0]["grep_failed"], json!(true));

    // Logs by tag and least level; the diagram marks the active states.
    let logs = step(&lines, "logs")["logs"]["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0]["tags"], json!(["ittw_grep_failed"]));
    assert_eq!(logs[0]["level"], json!("error"));
    let error_logs = step(&lines, "error_logs")["logs"]["logs"]
        .as_array()
        .unwrap();
    assert!(
        error_logs.iter().all(|line| line["level"] == "error"),
        "{error_logs:?}"
    );
    assert_eq!(
        step(&lines, "bad_level")["text"],
        json!("argument `level`: `loud` is not one of debug, info, warn, error")
    );
    let diagram = step(&lines, "diagram")["report"]["mermaid"]
        .as_str()
        .unwrap();
    assert!(diagram.starts_with("stateDiagram-v2\n"), "{diagram}");
    assert!(
        diagram.ends_with("    class monitoring,waiting_for_guidance active\n"),
        "{diagram}"
    );

    let sent = &step(&lines, "sent")["report"];
    assert_eq!(sent["status"], json!("finished"));
    assert_eq!(
        sent["finished"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
    assert_eq!(sent["finished"]["exit_code"], json!(0));

    // The directive reached the client as it was committed: a log message from the run.
    let notices = step(&lines, "notices")["notices"].as_array().unwrap();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0]["logger"], json!(run));
    assert_eq!(notices[0]["level"], json!("notice"));
    assert_eq!(notices[0]["data"], directives[0]);
    assert_eq!(sent["finished"]["state"], json!("guided"));
    assert_eq!(
        step(&lines, "listed")["runs"][0]["run"],
        json!(run),
        "list_runs lists it"
    );

    // One engine, one store: `status` sees the run MCP started.
    let (code, text) =
        crate::support::run_binary_with_state(&directory, &["status", run, "--json"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("\"finished\""), "{text}");
}

#[test]
fn an_invalid_protocol_is_not_served_and_its_errors_are_located() {
    let directory = crate::support::temporary_directory("mcp", "invalid");
    let broken = directory.join("broken.yaml");
    std::fs::write(
        &broken,
        "id: broken\ninitial: a\nstates:\n  a:\n    on: { go: nowhere }\n",
    )
    .unwrap();
    // Alone, nothing is served: the server says why and exits 65.
    let (code, _, stderr) =
        crate::support::run_binary(&directory, &["mcp", "--state-dir", "state", "broken.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("broken.yaml:5:"), "{stderr}");
    assert!(stderr.contains("nowhere"), "{stderr}");
    assert!(stderr.contains("no protocol to serve"), "{stderr}");

    // Beside a valid one, the valid one is served and the invalid one reported.
    let (lines, stderr) = drive(
        &directory,
        "errors",
        &[&[broken.into()], &served_ittw()[..]].concat(),
    );
    let tools = &step(&lines, "tools")["tools"];
    assert!(tools.get("broken").is_none(), "{tools}");
    assert!(tools.get("ittw").is_some(), "{tools}");
    assert!(stderr.contains("broken.yaml:5:"), "{stderr}");
}

/// A run whose effect sleeps long enough to be cancelled while it runs.
pub(crate) const SLEEPER: &str = "\
id: sleeper
permissions: { exec: [sleep], write: [], read: [], env: [] }
states:
  working:
    entry:
      - exec: [sleep, \"31.4159\"]
        id: nap
    on: { stop: done }
  done: { type: final }
";

#[test]
fn cancel_run_kills_the_process_group_and_finishes_the_run() {
    let directory = crate::support::temporary_directory("mcp", "cancel");
    let sleeper = directory.join("sleeper.yaml");
    std::fs::write(&sleeper, SLEEPER).unwrap();
    let (lines, _) = drive(&directory, "cancel", &[&sleeper]);
    assert!(
        step(&lines, "sleeping")["group"].is_i64(),
        "the effect's `sleep` was seen running: {lines:?}"
    );
    let cancelled = &step(&lines, "cancelled")["report"];
    assert_eq!(cancelled["status"], json!("cancelled"));
    assert_eq!(cancelled["exit_code"], json!(130));
    assert_eq!(
        step(&lines, "group")["alive"],
        json!(false),
        "the process group is gone"
    );
    assert_eq!(
        step(&lines, "get_run")["report"]["status"],
        json!("cancelled")
    );
    let again = step(&lines, "resume_cancelled");
    assert_eq!(again["error"], json!(true));
    let run = cancelled["run"].as_str().unwrap();
    assert_eq!(
        again["text"],
        json!(format!("run `{run}` has finished; get_run tells how"))
    );

    // The store records it finished, exit code 130: `status` says so.
    let (code, text) =
        crate::support::run_binary_with_state(&directory, &["status", run, "--json"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("130"), "{text}");
}

#[test]
fn a_run_outlives_a_killed_server_and_resumes_in_the_next() {
    let directory = crate::support::temporary_directory("mcp", "resume");
    let (lines, _) = drive(&directory, "kill", &served_ittw());
    let run = step(&lines, "waiting")["run"].as_str().unwrap().to_string();

    let (lines, _) = drive(&directory, &format!("resume:{run}"), &served_ittw());
    let listed = &step(&lines, "listed")["runs"];
    assert_eq!(listed[0]["run"], json!(run), "{listed}");
    assert_eq!(
        listed[0]["status"],
        json!("running"),
        "the killed server left it running"
    );
    let resumed = &step(&lines, "resumed")["report"];
    assert_eq!(resumed["states"], json!(["waiting_for_guidance"]));
    assert_eq!(resumed["events"], json!([{"name": "captain_guidance"}]));
    let sent = &step(&lines, "sent")["report"];
    assert_eq!(sent["status"], json!("finished"));
    assert_eq!(
        sent["finished"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
}

#[test]
fn the_example_agent_walks_ittw_to_the_captains_guidance() {
    let directory = crate::support::temporary_directory("mcp", "example-agent");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mcp_agent.py");
    let output = Command::new(python())
        .arg(example)
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_protocol-run"))
        .arg("--state-dir")
        .arg(directory.join("state"))
        .current_dir(&directory)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("directive: escalate_to_captain (ITTW-v1.0 step 3.6)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("finished: {\"state\": \"guided\", \"exit_code\": 0"),
        "{stdout}"
    );
}

#[test]
fn the_operators_sandbox_limits_what_a_run_may_do() {
    let directory = crate::support::temporary_directory("mcp", "strict");
    std::fs::write(directory.join("present.txt"), "hello\n").unwrap();
    // The protocol grants reading `path`: the file is read, and the run ends at once.
    let (lines, _) = drive(&directory, "strict", &served_ittw());
    let outcome = step(&lines, "outcome");
    assert_eq!(
        outcome["report"]["finished"]["state"],
        json!("resolved_at_once"),
        "{outcome}"
    );

    // Under `--sandbox strict` without `--allow-read`, the same read is refused.
    let protocol = ittw().display().to_string();
    let arguments = [
        "--sandbox",
        "strict",
        "--allow-exec",
        "echo",
        protocol.as_str(),
    ];
    let (lines, _) = drive(&directory, "strict", &arguments);
    let outcome = step(&lines, "outcome");
    assert_eq!(outcome["report"]["status"], json!("running"), "{outcome}");
    assert_eq!(
        outcome["denied"][0]["message"],
        json!("tool_call: read access to `present.txt` is not permitted")
    );

    // The client went with the run still live: it is kept, stopped, for the next server.
    let run = outcome["report"]["run"].as_str().unwrap();
    let (code, text) =
        crate::support::run_binary_with_state(&directory, &["status", run, "--json"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("\"stopped\""), "{text}");
}

#[test]
fn protocols_and_runs_are_resources() {
    let directory = crate::support::temporary_directory("mcp", "resources");
    let (lines, _) = drive(&directory, "resources", &served_ittw());
    let run = step(&lines, "run")["run"].as_str().unwrap().to_string();
    assert_eq!(
        step(&lines, "resources")["resources"],
        json!([
            ["protocol-run://protocol/ittw", "application/yaml"],
            [format!("protocol-run://run/{run}"), "application/json"],
        ])
    );
    assert_eq!(
        step(&lines, "templates")["templates"],
        json!([
            "protocol-run://run/{run}",
            "protocol-run://run/{run}/telemetry"
        ])
    );
    let text = std::fs::read_to_string(ittw()).unwrap();
    assert_eq!(step(&lines, "protocol")["text"], json!(text));
    assert_eq!(step(&lines, "run")["report"]["run"], json!(run));
    assert_eq!(
        step(&lines, "bogus")["error"],
        json!(
            "no resource `file:///etc/passwd`: this server has \
             protocol-run://protocol/PROTOCOL_ID, protocol-run://run/RUN_ID and \
             protocol-run://run/RUN_ID/telemetry"
        )
    );
}

#[test]
fn streamable_http_serves_the_same_tools_and_runs() {
    let directory = crate::support::temporary_directory("mcp", "http");
    let ittw = ittw();
    let mut server = crate::support::mcp_http_server::McpHttpServer::start(
        &directory,
        &["--allow-read", "**", ittw.to_str().unwrap()],
    );
    let no_protocols: [&str; 0] = [];
    let url = std::ffi::OsString::from(&server.url);
    let (lines, _) = drive_client_of("client.py", &url, &directory, "ittw", &no_protocols);
    let tools = step(&lines, "tools")["tools"].as_object().unwrap();
    let mut names: Vec<&str> = tools.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "cancel_run",
            "get_diagram",
            "get_logs",
            "get_run",
            "ittw",
            "list_runs",
            "redrive_run",
            "resume_run",
            "send_event",
            "wait_for_state"
        ]
    );
    assert_eq!(tools["ittw"]["required"], json!(["path"]), "{tools:?}");
    // Only an external event can move it now: a plain client reads that as `waiting: input`.
    let waiting = &step(&lines, "waiting")["report"];
    assert_eq!(waiting["waiting"], json!("input"), "{waiting}");
    assert_eq!(
        waiting["states"],
        json!(["waiting_for_guidance"]),
        "{waiting}"
    );
    let sent = &step(&lines, "sent")["report"];
    assert_eq!(sent["status"], json!("finished"), "{lines:?}");
    assert_eq!(
        sent["finished"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
    assert_eq!(
        step(&lines, "notices")["notices"][0]["data"]["directive"],
        json!("escalate_to_captain")
    );

    // SIGTERM ends the server cleanly.
    assert_eq!(server.stop(), Some(0));
}
