//! `protocol-run mcp` against a hostile client, in raw JSON-RPC: an oversized stdio line, a
//! burst of requests, oversized tool arguments, an oversized HTTP body, too many HTTP sessions;
//! each refused with the limit named, and the server answers the next request.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::mcp_raw::{RawMcp, reported_run, tool_error};

/// A protocol that waits for `go`.
const WAITER: &str = "id: waiter\ninitial: waiting\nstates:\n  waiting:\n    on: { go: done }\n  done: { type: final }\n";

/// A server of `waiter.yaml`, written into `directory`, with `flags` besides, initialized by a
/// client of `capabilities`; the directory is kept, so a second server finds what the first
/// left.
pub(crate) fn serve_waiter(directory: &Path, flags: &[&str], capabilities: Value) -> RawMcp {
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    RawMcp::start(directory, &[&["waiter.yaml"], flags].concat(), capabilities)
}

/// A server of `waiter.yaml` in a new directory `name`, for a client of `capabilities`.
pub(crate) fn waiter_server(name: &str, capabilities: Value) -> RawMcp {
    let directory = crate::support::temporary_directory("mcp-limits", name);
    serve_waiter(&directory, &[], capabilities).keeping(directory)
}

#[test]
fn an_oversized_stdio_line_is_refused_by_name_and_the_session_goes_on() {
    let mut server = waiter_server("stdio-line", json!({}));
    let huge = "x".repeat(5 * 1024 * 1024);
    let line = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "waiter", "arguments": {"padding": huge}}});
    server.write(&line.to_string());
    let refused = server.next_response();
    assert_eq!(refused["id"], json!(7), "{refused}");
    assert_eq!(refused["error"]["code"], json!(-32600));
    assert_eq!(
        refused["error"]["message"],
        json!(
            "a message longer than 4194304 bytes was refused, the limit (MAX_MESSAGE_BYTES); \
             send less at once"
        )
    );
    // A line whose id comes after the cut is dropped unanswered (`finish` fails on a response
    // left unread): the next request is answered.
    let late =
        format!(r#"{{"jsonrpc":"2.0","method":"tools/list","params":{{"x":"{huge}"}},"id":8}}"#);
    server.write(&late);
    let listed = server.request(9, "tools/list", json!({}));
    assert_eq!(listed["result"]["tools"][0]["name"], json!("waiter"));
    let stderr = server.finish();
    assert!(
        stderr.contains(
            "warning: mcp: a message longer than 4194304 bytes was refused, the limit \
             (MAX_MESSAGE_BYTES); send less at once; answered request 7 with an error"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("no request id before the cut, so no answer"),
        "{stderr}"
    );
}

/// The places a session has (MAX_REQUESTS_IN_FLIGHT).
const PLACES: u64 = 32;

/// Fills every place of `server`'s session with a `wait_for_state` that ends after a few
/// seconds, then sends `method` with `params` until `refused` says the server refused one for
/// the limit; returns that refusal and the answers before it (probes that found a place free,
/// since the waits were not all admitted yet), once every wait has ended. A wait that ends
/// before the refusal is sent again, so no load on the machine makes the probe find a place.
pub(crate) fn probe_past_the_limit(
    server: &mut RawMcp,
    method: &str,
    params: Value,
    refused: impl Fn(&Value) -> bool,
) -> (Value, Vec<Value>) {
    // A run for each wait: a run's waits are answered one after another.
    let waits = 100..100 + PLACES;
    let wait = |server: &mut RawMcp, id: u64| {
        let run = reported_run(&server.call(id + 100, "waiter", json!({})));
        let arguments = json!({"run": run, "state": "done", "timeout": "3s"});
        (
            id,
            json!({"name": "wait_for_state", "arguments": arguments}),
        )
    };
    let waits: std::collections::BTreeMap<u64, Value> = waits.map(|id| wait(server, id)).collect();
    for (id, call) in &waits {
        server.send(*id, "tools/call", call.clone());
    }
    let mut answered = Vec::new();
    let mut probe = 1_000;
    let refusal = loop {
        probe += 1;
        server.send(probe, method, params.clone());
        let response = loop {
            let response = server.next_response();
            let id = response["id"].as_u64().unwrap();
            if let Some(call) = waits.get(&id) {
                server.send(id, "tools/call", call.clone());
            } else if id == probe {
                break response;
            }
        };
        if refused(&response) {
            break response;
        }
        answered.push(response);
    };
    for _ in 0..PLACES {
        let ended = server.next_response();
        assert_eq!(
            ended["result"]["structuredContent"]["awaited"],
            json!("timed_out"),
            "{ended}"
        );
    }
    (refusal, answered)
}

#[test]
fn a_request_past_the_limit_in_flight_is_refused_and_the_next_answered() {
    let mut server = waiter_server("burst", json!({}));
    let (refusal, answered) = probe_past_the_limit(
        &mut server,
        "tools/call",
        json!({"name": "list_runs", "arguments": {}}),
        |response| response["result"]["isError"] == json!(true),
    );
    assert_eq!(
        tool_error(&refusal["result"]),
        "32 requests of this session are in flight, the limit (MAX_REQUESTS_IN_FLIGHT); \
         wait for their answers"
    );
    for response in answered {
        assert_eq!(response["result"]["isError"], json!(false), "{response}");
    }
    let listed = server.call(2, "list_runs", json!({}));
    assert_eq!(listed["isError"], json!(false), "{listed}");
    server.finish();
}

#[test]
fn a_burst_of_requests_is_answered_whole() {
    let mut server = waiter_server("burst-whole", json!({}));
    server.send_at_once(
        300,
        "tools/call",
        &json!({"name": "list_runs", "arguments": {}}),
    );
    let mut answered = std::collections::BTreeSet::new();
    for _ in 1..=300 {
        let response = server.next_response();
        answered.insert(response["id"].as_u64().unwrap());
        let result = &response["result"];
        if result["isError"] == json!(true) {
            assert_eq!(
                tool_error(result),
                "32 requests of this session are in flight, the limit (MAX_REQUESTS_IN_FLIGHT); \
                 wait for their answers"
            );
        }
    }
    assert_eq!(answered.len(), 300, "every request is answered");
    server.finish();
}

#[test]
fn oversized_tool_arguments_are_refused_by_name() {
    let mut server = waiter_server("arguments", json!({}));
    let long_name = "r".repeat(2_000);
    let name_refusal = |argument: &str| {
        format!(
            "argument `{argument}` is 2000 bytes, longer than the limit of 1024 \
             (MAX_NAME_ARGUMENT_BYTES)"
        )
    };
    let result = server.call(1, "get_run", json!({"run": long_name}));
    assert_eq!(tool_error(&result), name_refusal("run"));
    // A value of another type is named by its type, not echoed.
    let result = server.call(9, "get_run", json!({"run": [long_name]}));
    assert_eq!(
        tool_error(&result),
        "argument `run` must be a string, not list"
    );
    let result = server.call(2, "get_logs", json!({"run": "waiter:x", "tag": long_name}));
    assert_eq!(tool_error(&result), name_refusal("tag"));

    let started = server.call(3, "waiter", json!({}));
    let run = reported_run(&started);
    let result = server.call(4, "send_event", json!({"run": run, "event": long_name}));
    assert_eq!(tool_error(&result), name_refusal("event"));
    let data = "d".repeat(2 * 1024 * 1024);
    let result = server.call(
        5,
        "send_event",
        json!({"run": run, "event": "go", "data": data}),
    );
    let message = tool_error(&result);
    assert!(
        message.starts_with("the run's input (the event's data, or the inputs) is 2097"),
        "{message}"
    );
    assert!(
        message.ends_with(
            "bytes as JSON, more than the limit of 1048576 bytes (MAX_EVENT_LINE_BYTES, \
             `serve`'s --max-event-bytes)"
        ),
        "{message}"
    );
    let result = server.call(6, "waiter", json!({"padding": data}));
    assert!(
        tool_error(&result).contains("(MAX_EVENT_LINE_BYTES"),
        "{result}"
    );
    let uri = format!("protocol-run://run/{}", "u".repeat(3_000));
    let read = server.request(7, "resources/read", json!({"uri": uri}));
    assert_eq!(
        read["error"]["message"],
        json!(format!(
            "the resource URI `protocol-run://run/uuuuuuuuuuuuuuuuuuuuu…` is 3019 bytes, longer \
             than the limit of 2048 (MAX_RESOURCE_URI_BYTES); this server has \
             protocol-run://protocol/PROTOCOL_ID, protocol-run://run/RUN_ID and \
             protocol-run://run/RUN_ID/telemetry"
        ))
    );
    // The run took none of it, and takes its event.
    let sent = server.call(8, "send_event", json!({"run": run, "event": "go"}));
    assert_eq!(
        sent["structuredContent"]["status"],
        json!("finished"),
        "{sent}"
    );
    server.finish();
}

/// An HTTP/1.1 exchange on a new connection: the status line and headers, and the body.
pub(crate) fn exchange(address: &str, head: &str, body: &[u8]) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    // The server may answer and close before the whole body is in: that is the point.
    let _ = stream.write_all(body);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).to_string();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_string(), body.to_string())
}

pub(crate) fn post_head(address: &str, length: Option<usize>, session: Option<&str>) -> String {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n"
    );
    match length {
        Some(length) => head.push_str(&format!("Content-Length: {length}\r\n")),
        None => head.push_str("Transfer-Encoding: chunked\r\n"),
    }
    if let Some(session) = session {
        head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
    }
    head + "\r\n"
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// A new session's id, from its `initialize`.
pub(crate) fn open_session(address: &str) -> Result<String, (String, String)> {
    let (head, body) = exchange(
        address,
        &post_head(address, Some(INITIALIZE.len()), None),
        INITIALIZE.as_bytes(),
    );
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .ok_or((head, body))
}

#[test]
fn http_bounds_bodies_and_sessions_and_serves_on() {
    let directory = crate::support::temporary_directory("mcp-limits", "http");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--state-dir",
            "state",
            "waiter.yaml",
        ])
        .current_dir(&directory)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let address = first
        .trim()
        .strip_prefix("mcp: listening on http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("no address on stderr: {first}"))
        .to_string();
    let drain = std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));

    // A body declared past the limit is refused before it is read.
    let (head, body) = exchange(&address, &post_head(&address, Some(5 << 20), None), b"");
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert_eq!(
        body,
        "a message longer than 4194304 bytes was refused, the limit (MAX_MESSAGE_BYTES); send \
         less at once"
    );
    // One sent in chunks, with no length, is cut off as it streams in, by the same name.
    let chunk = vec![b' '; 1 << 20];
    let mut chunked = Vec::new();
    for _ in 0..5 {
        chunked.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        chunked.extend_from_slice(&chunk);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let (head, body) = exchange(&address, &post_head(&address, None, None), &chunked);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert_eq!(
        body,
        "a message longer than 4194304 bytes was refused, the limit (MAX_MESSAGE_BYTES); send \
         less at once"
    );

    // Sessions up to the limit, then a refusal naming it; closing one makes room.
    let sessions: Vec<String> = (0..128).map(|_| open_session(&address).unwrap()).collect();
    let (head, body) = open_session(&address).unwrap_err();
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert_eq!(
        body,
        "128 sessions are open, the limit (MAX_HTTP_SESSIONS); close one (DELETE with its \
         Mcp-Session-Id) or wait for an idle one to expire"
    );
    let (head, _) = exchange(
        &address,
        &format!(
            "DELETE /mcp HTTP/1.1\r\nHost: {address}\r\nMcp-Session-Id: {}\r\n\
             Connection: close\r\n\r\n",
            sessions[0]
        ),
        b"",
    );
    assert!(head.starts_with("HTTP/1.1 2"), "{head}");
    open_session(&address).expect("a session opens once one closed");

    let pid = nix::unistd::Pid::from_raw(server.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(server.wait().unwrap().code(), Some(0));
    drain.join().unwrap().unwrap();
}
