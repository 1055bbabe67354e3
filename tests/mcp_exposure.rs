//! `protocol-run mcp --http` exposure and transport failures: a non-loopback address refused without `--http-allow-remote`, a busy port exiting 75, and the session limit held under a burst of concurrent `initialize` requests.

use std::process::{Command, Stdio};

use crate::mcp_limits::{exchange, post_head};

/// A protocol that waits for `go`.
const WAITER: &str = "id: waiter\ninitial: waiting\nstates:\n  waiting:\n    on: { go: done }\n  done: { type: final }\n";

/// `protocol-run mcp ARGUMENTS waiter.yaml` in a fresh directory, to its end: exit code and
/// stderr.
fn mcp_to_end(name: &str, arguments: &[&str]) -> (Option<i32>, String) {
    let directory = crate::support::temporary_directory("mcp-exposure", name);
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .arg("mcp")
        .args(arguments)
        .args(["--state-dir", "state", "waiter.yaml"])
        .current_dir(&directory)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[test]
fn a_non_loopback_address_is_refused_without_the_flag_that_allows_it() {
    let (code, stderr) = mcp_to_end("remote", &["--http", "0.0.0.0:0"]);
    assert_eq!(code, Some(64), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: --http 0.0.0.0:0 is not a loopback address: anyone who reaches it could start \
         runs, which may execute programs, and the server has no authentication. Listen on \
         127.0.0.1 (or [::1]) behind a reverse proxy that authenticates, or pass \
         --http-allow-remote to listen there anyway"
    );
    let (code, stderr) = mcp_to_end("remote-flag-alone", &["--http-allow-remote"]);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("--http <ADDR>"), "{stderr}");
}

#[test]
fn a_non_loopback_address_is_served_with_the_flag() {
    let directory = crate::support::temporary_directory("mcp-exposure", "remote-allowed");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let mut server = crate::support::mcp_http_server::McpHttpServer::start_with(
        &directory,
        &["--http", "0.0.0.0:0", "--http-allow-remote"],
        &["waiter.yaml"],
    );
    assert!(server.url.starts_with("http://0.0.0.0:"), "{}", server.url);
    assert_eq!(server.stop(), Some(0));
}

#[test]
fn a_busy_port_is_a_transport_failure_exit_75() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let (code, stderr) = mcp_to_end("busy", &["--http", &address]);
    assert_eq!(code, Some(75), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: cannot listen on {address}: ")),
        "{stderr}"
    );
    drop(taken);
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[test]
fn concurrent_initializes_open_no_more_sessions_than_the_limit() {
    let directory = crate::support::temporary_directory("mcp-exposure", "session-race");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let server =
        crate::support::mcp_http_server::McpHttpServer::start(&directory, &["waiter.yaml"]);
    let address = server
        .url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap()
        .to_string();
    // 200 at once, past the 128 sessions: each checks the count while the others insert.
    let start = std::sync::Arc::new(std::sync::Barrier::new(200));
    let openings: Vec<_> = (0..200)
        .map(|_| {
            let address = address.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let head = post_head(&address, Some(INITIALIZE.len()), None);
                exchange(&address, &head, INITIALIZE.as_bytes())
            })
        })
        .collect();
    let mut opened = 0;
    for opening in openings {
        let (head, body) = opening.join().unwrap();
        if head.starts_with("HTTP/1.1 200") {
            opened += 1;
        } else {
            // Refused before the body is read (503), or where the session is made (500).
            assert!(
                body.contains(
                    "128 sessions are open, the limit (MAX_HTTP_SESSIONS); close one (DELETE \
                     with its Mcp-Session-Id) or wait for an idle one to expire"
                ),
                "{head}\n{body}"
            );
        }
    }
    assert_eq!(opened, 128);
}
