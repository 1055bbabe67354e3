//! `protocol-run mcp` under the MCP Inspector's CLI (`@modelcontextprotocol/inspector`, pinned in tests/inspector, installed by .ci/run): tools with their schemas, a run started, read back and resumed by one-shot calls, resources, and Streamable HTTP.

use std::ffi::OsStr;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// A protocol whose start shows in its report: a directive with the inputs, one event to take.
const GATE: &str = "\
id: gate
title: A gate that opens for a visitor
inputs:
  visitor: { type: string, required: true, description: Who is at the gate }
  knocks: { type: integer, default: 1, minimum: 1, maximum: 3, description: How often they knock }
permissions: { exec: [], write: [], read: [], env: [] }
states:
  closed:
    entry:
      - emit: greet
        data: { visitor: \"${visitor}\" }
    on: { open: opened }
  opened: { type: final }
";

/// The Inspector's launcher, the program `npx @modelcontextprotocol/inspector` runs.
fn launcher() -> PathBuf {
    crate::support::npm_package::installed("inspector", "@modelcontextprotocol/inspector")
        .join("clients/launcher/build/index.js")
}

/// A scratch directory holding gate.yaml; the servers keep their runs in its `state`.
fn directory_with_gate(name: &str) -> PathBuf {
    let directory = crate::support::temporary_directory("mcp-inspector", name);
    std::fs::write(directory.join("gate.yaml"), GATE).unwrap();
    directory
}

/// `protocol-run mcp` over stdio, serving gate.yaml from `directory`: what the Inspector
/// starts, after its `--`.
fn stdio_server(directory: &Path) -> Vec<PathBuf> {
    vec![
        PathBuf::from(env!("CARGO_BIN_EXE_protocol-run")),
        PathBuf::from("mcp"),
        PathBuf::from("--state-dir"),
        directory.join("state"),
        directory.join("gate.yaml"),
    ]
}

/// Runs `mcp-inspector --cli ARGUMENTS -- SERVER...` in `directory`; returns the JSON it
/// printed and its stderr, panicking with both when it fails.
fn inspect<S: AsRef<OsStr>>(directory: &Path, arguments: &[&str], server: &[S]) -> (Value, String) {
    inspect_exiting(0, directory, arguments, server)
}

/// As `inspect`, when the Inspector is to exit with `code` (5: the tool returned an error).
fn inspect_exiting<S: AsRef<OsStr>>(
    code: i32,
    directory: &Path,
    arguments: &[&str],
    server: &[S],
) -> (Value, String) {
    let mut command = Command::new("node");
    command.arg(launcher()).arg("--cli").args(arguments);
    if !server.is_empty() {
        command.arg("--").args(server);
    }
    let output = command
        .current_dir(directory)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "cannot start node ({error}): install Node.js 20 or later with npm, then run \
                 `npm ci --prefix tests/inspector --no-audit --no-fund` (as .ci/run does)"
            )
        });
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(
        output.status.code(),
        Some(code),
        "the Inspector on {arguments:?}:\n{stdout}\n{stderr}"
    );
    let value = serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("the Inspector printed no JSON ({error}):\n{stdout}"));
    (value, stderr)
}

/// Calls `tool` with `key=value` arguments; returns the call's structured content.
fn call<S: AsRef<OsStr>>(directory: &Path, tool: &str, arguments: &[&str], server: &[S]) -> Value {
    let mut all = vec!["--method", "tools/call", "--tool-name", tool];
    for argument in arguments {
        all.extend(["--tool-arg", argument]);
    }
    let (result, _) = inspect(directory, &all, server);
    assert_eq!(result["isError"], json!(false), "{result}");
    result["structuredContent"].clone()
}

#[test]
fn the_inspector_lists_the_protocol_and_management_tools_with_their_schemas() {
    let directory = directory_with_gate("tools");
    // `--strict` exits 6 when a tool's schema has an error-severity portability problem.
    let (listed, stderr) = inspect(
        &directory,
        &["--method", "tools/list", "--strict"],
        &stdio_server(&directory),
    );
    assert!(stderr.contains("0 errors"), "{stderr}");
    let tools = listed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "gate",
            "send_event",
            "get_run",
            "list_runs",
            "cancel_run",
            "resume_run",
            "get_logs",
            "get_diagram"
        ]
    );
    let schema = |name: &str| &tools[names.iter().position(|n| *n == name).unwrap()]["inputSchema"];
    assert_eq!(
        schema("gate"),
        &json!({
            "type": "object",
            "properties": {
                "visitor": {"type": "string", "description": "Who is at the gate"},
                "knocks": {"type": "integer", "description": "How often they knock",
                           "default": 1, "minimum": 1, "maximum": 3},
            },
            "required": ["visitor"],
            "additionalProperties": false,
        })
    );
    assert_eq!(schema("send_event")["required"], json!(["run", "event"]));
    assert_eq!(schema("get_run")["required"], json!(["run"]));
    assert_eq!(
        schema("list_runs"),
        &json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
}

#[test]
fn the_inspector_starts_a_run_and_the_next_servers_read_and_resume_it() {
    let directory = directory_with_gate("run");
    let server = stdio_server(&directory);
    // `knocks=2` reaches the engine as the integer the schema says: the Inspector types it.
    let started = call(&directory, "gate", &["visitor=ada", "knocks=2"], &server);
    let run = started["run"].as_str().unwrap().to_string();
    assert!(run.starts_with("gate:mcp-"), "{run}");
    assert_eq!(started["status"], json!("running"));
    assert_eq!(started["states"], json!(["closed"]));
    assert_eq!(
        started["directives"],
        json!([{"directive": "greet", "visitor": "ada"}])
    );
    assert_eq!(started["events"], json!([{"name": "open"}]));

    // Each Inspector call is a server of its own: the first one's client went, the run is
    // stopped in the store, and the next server reads it and resumes it.
    let read = call(&directory, "get_run", &[&format!("run={run}")], &server);
    assert_eq!(read["run"], json!(run));
    assert_eq!(read["status"], json!("stopped"), "{read}");
    let (listed, _) = inspect(
        &directory,
        &["--method", "tools/call", "--tool-name", "list_runs"],
        &server,
    );
    let listed: Value =
        serde_json::from_str(listed["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(listed[0]["run"], json!(run), "{listed}");
    let resumed = call(&directory, "resume_run", &[&format!("run={run}")], &server);
    assert_eq!(resumed["states"], json!(["closed"]), "{resumed}");
    assert_eq!(resumed["events"], json!([{"name": "open"}]));

    // A bad input is a tool error naming it; the Inspector exits 5 and says so.
    let (refused, stderr) = inspect_exiting(
        5,
        &directory,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "gate",
            "--tool-arg",
            "visitor=bo",
            "--tool-arg",
            "knocks=9",
        ],
        &server,
    );
    assert_eq!(refused["isError"], json!(true), "{refused}");
    assert_eq!(
        refused["content"][0]["text"],
        json!("input `knocks`: 9 is above the maximum 3")
    );
    assert!(stderr.contains("\"tool_is_error\""), "{stderr}");

    let (resources, _) = inspect(&directory, &["--method", "resources/list"], &server);
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|resource| resource["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "protocol-run://protocol/gate".to_string(),
            format!("protocol-run://run/{run}")
        ]
    );

    // The Inspector sets a log level on connecting; asked alone, the server takes it.
    let (level, _) = inspect(
        &directory,
        &["--method", "logging/setLevel", "--log-level", "warning"],
        &server,
    );
    assert_eq!(level, json!({}));
}

/// `protocol-run mcp --http 127.0.0.1:0` serving gate.yaml; killed when dropped, so a failed
/// assertion never leaves it behind.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    /// Starts it in `directory`; its URL is on its first stderr line.
    fn start(directory: &Path) -> HttpServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args([
                "mcp",
                "--http",
                "127.0.0.1:0",
                "--state-dir",
                "state",
                "gate.yaml",
            ])
            .current_dir(directory)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let url = first
            .trim()
            .strip_prefix("mcp: listening on ")
            .unwrap_or_else(|| panic!("no address on stderr: {first}"))
            .to_string();
        // The rest of stderr is drained so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        HttpServer { child, url }
    }

    /// Sends SIGTERM; returns the exit code.
    fn stop(&mut self) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        self.child.wait().unwrap().code()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_inspector_drives_a_run_over_streamable_http() {
    let directory = directory_with_gate("http");
    let mut server = HttpServer::start(&directory);
    let over_http = |method: &[&str]| -> Vec<String> {
        let mut arguments: Vec<String> = ["--transport", "http", "--server-url", &server.url]
            .map(String::from)
            .to_vec();
        arguments.extend(method.iter().map(|argument| argument.to_string()));
        arguments
    };
    let no_server: [&str; 0] = [];
    let tool = |name: &str, tool_arguments: &[&str]| -> Value {
        let mut method = vec!["--method", "tools/call", "--tool-name", name];
        for argument in tool_arguments {
            method.extend(["--tool-arg", argument]);
        }
        let arguments = over_http(&method);
        let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
        let (result, _) = inspect(&directory, &arguments, &no_server);
        assert_eq!(result["isError"], json!(false), "{result}");
        result["structuredContent"].clone()
    };

    let started = tool("gate", &["visitor=ada"]);
    let run = started["run"].as_str().unwrap().to_string();
    assert_eq!(started["states"], json!(["closed"]));
    // One server, many sessions: the run stays live between the Inspector's calls.
    let opened = tool("send_event", &[&format!("run={run}"), "event=open"]);
    assert_eq!(opened["status"], json!("finished"), "{opened}");
    assert_eq!(opened["finished"]["state"], json!("opened"));
    let read = tool("get_run", &[&format!("run={run}")]);
    assert_eq!(read["status"], json!("finished"), "{read}");

    // SIGTERM ends the server cleanly.
    assert_eq!(server.stop(), Some(0));
}
