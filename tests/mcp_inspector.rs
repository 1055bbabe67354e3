//! `protocol-run mcp` under the MCP Inspector's CLI (`@modelcontextprotocol/inspector`, pinned in tests/inspector, installed by .ci/run): tools with their schemas, a run started, read back and resumed by one-shot calls, resources, log levels, and Streamable HTTP.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::mcp_http_server::McpHttpServer;

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
fn directory_with_gate(name: &str) -> crate::support::TemporaryDirectory {
    let directory = crate::support::temporary_directory("mcp-inspector", name);
    std::fs::write(directory.join("gate.yaml"), GATE).unwrap();
    directory
}

/// How the Inspector reaches the server: the arguments after its own.
type Target = Vec<OsString>;

/// `protocol-run mcp` over stdio, serving gate.yaml from `directory`: the Inspector starts it.
fn stdio_target(directory: &Path) -> Target {
    let mut target: Target = [
        "--",
        env!("CARGO_BIN_EXE_protocol-run"),
        "mcp",
        "--state-dir",
    ]
    .map(OsString::from)
    .to_vec();
    target.push(directory.join("state").into());
    target.push(directory.join("gate.yaml").into());
    target
}

/// A server already listening at `url`, over Streamable HTTP.
fn http_target(url: &str) -> Target {
    ["--transport", "http", "--server-url", url]
        .map(OsString::from)
        .to_vec()
}

/// `--method tools/call` of `tool` with its `key=value` arguments.
fn tool_call(tool: &str, arguments: &[&str]) -> Vec<String> {
    let mut method = vec!["--method", "tools/call", "--tool-name", tool];
    for argument in arguments {
        method.extend(["--tool-arg", argument]);
    }
    method.into_iter().map(String::from).collect()
}

/// Runs `mcp-inspector --cli METHOD... TARGET...` in `directory`; returns the JSON it printed
/// and its stderr, panicking with both when it fails.
fn inspect<A: AsRef<OsStr>>(directory: &Path, method: &[A], target: &Target) -> (Value, String) {
    inspect_exiting(0, directory, method, target)
}

/// As `inspect`, when the Inspector is to exit with `code` (5: the tool returned an error).
fn inspect_exiting<A: AsRef<OsStr>>(
    code: i32,
    directory: &Path,
    method: &[A],
    target: &Target,
) -> (Value, String) {
    let output = Command::new("node")
        .arg(launcher())
        .arg("--cli")
        .args(method)
        .args(target)
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
    let method: Vec<_> = method.iter().map(AsRef::as_ref).collect();
    assert_eq!(
        output.status.code(),
        Some(code),
        "the Inspector on {method:?}:\n{stdout}\n{stderr}"
    );
    let value = serde_json::from_str(&stdout)
        .unwrap_or_else(|error| panic!("the Inspector printed no JSON ({error}):\n{stdout}"));
    (value, stderr)
}

/// Calls `tool` with `key=value` arguments; returns the call's structured content.
fn call(directory: &Path, tool: &str, arguments: &[&str], target: &Target) -> Value {
    let (result, _) = inspect(directory, &tool_call(tool, arguments), target);
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
        &stdio_target(&directory),
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
        &json!({"type": "object",
                "properties": {"after": {"type": "string",
                                         "description": "The `next` of the previous page"}},
                "additionalProperties": false})
    );
}

#[test]
fn the_inspector_starts_a_run_and_the_next_servers_read_and_resume_it() {
    let directory = directory_with_gate("run");
    let server = stdio_target(&directory);
    // `knocks=2` reaches the engine as the integer the schema says: the Inspector types it.
    // The Inspector declares the tasks extension at initialize, where it takes it to be
    // ignored: the call is answered with the report, not a task.
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

    // Each Inspector call is a server of its own: the first one's client went, the run was
    // marked stopped, and the next server resumed it at start, its directives read back.
    let read = call(&directory, "get_run", &[&format!("run={run}")], &server);
    assert_eq!(read["run"], json!(run));
    assert_eq!(read["status"], json!("running"), "{read}");
    assert_eq!(read["states"], json!(["closed"]), "{read}");
    assert_eq!(read["directives"], started["directives"], "{read}");
    let (listed, _) = inspect(&directory, &tool_call("list_runs", &[]), &server);
    let listed: Value =
        serde_json::from_str(listed["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(listed["runs"][0]["run"], json!(run), "{listed}");
    let resumed = call(&directory, "resume_run", &[&format!("run={run}")], &server);
    assert_eq!(resumed["states"], json!(["closed"]), "{resumed}");
    assert_eq!(resumed["events"], json!([{"name": "open"}]));

    // A bad input is a tool error naming it; the Inspector exits 5 and says so.
    let (refused, stderr) = inspect_exiting(
        5,
        &directory,
        &tool_call("gate", &["visitor=bo", "knocks=9"]),
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

    let (protocol, _) = inspect(
        &directory,
        &[
            "--method",
            "resources/read",
            "--uri",
            "protocol-run://protocol/gate",
        ],
        &server,
    );
    assert_eq!(protocol["contents"][0]["text"], json!(GATE), "{protocol}");
    assert_eq!(
        protocol["contents"][0]["mimeType"],
        json!("application/yaml")
    );

    // The Inspector sets a log level on connecting; asked alone, the server takes it.
    let (level, _) = inspect(
        &directory,
        &["--method", "logging/setLevel", "--log-level", "warning"],
        &server,
    );
    assert_eq!(level, json!({}));
}

#[test]
fn the_inspector_drives_a_run_over_streamable_http() {
    let directory = directory_with_gate("http");
    let mut server = McpHttpServer::start(&directory, &["gate.yaml"]);
    let target = http_target(&server.url);
    let tool = |name: &str, arguments: &[&str]| call(&directory, name, arguments, &target);

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
