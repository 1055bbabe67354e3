//! One MCP client cannot exhaust the server: under a limit of 1,024 open files, 2,000 starts are each running or refused naming `--max-live-runs`, and every other request, of this client and of new ones, is answered throughout.

use serde_json::Value;

/// Waits for an event that never comes: each run stays live, holding no process.
const WAITER: &str = "id: waiter
states:
  waiting:
    on: { go: done }
  done: { type: final }
";

#[test]
fn two_thousand_starts_under_1024_descriptors_run_or_are_refused_naming_the_limit() {
    let directory = crate::support::temporary_directory("mcp-live-runs", "flood");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let mut server = crate::support::mcp_http_server::McpHttpServer::start_under_descriptor_limit(
        &directory,
        1_024,
        &["waiter.yaml"],
    );
    let url = std::ffi::OsString::from(&server.url);
    let no_protocols: [&str; 0] = [];
    let (lines, _) = crate::mcp::drive_client_of(
        "client.py",
        &url,
        &directory,
        "flood:waiter,2000",
        &no_protocols,
    );
    let flooded = crate::mcp::step(&lines, "flooded");
    // list_runs answered in the flooding session and in a new client's, after every 100 starts.
    assert_eq!(flooded["answered"], 20, "{flooded}");
    let outcomes = flooded["outcomes"].as_object().unwrap();
    let running = outcomes.get("running").and_then(Value::as_u64).unwrap_or(0);
    let refused: u64 = outcomes
        .iter()
        .filter(|(outcome, _)| *outcome != "running")
        .map(|(outcome, count)| {
            assert!(
                outcome.contains("the limit (--max-live-runs"),
                "a start failed otherwise: {outcome} ({count} times)"
            );
            count.as_u64().unwrap()
        })
        .sum();
    assert_eq!(running + refused, 2_000, "{flooded}");
    // The limit follows from the descriptors: what 1,024 leaves once the server's own are set
    // aside, a run's effect pipes apiece.
    assert_eq!(running, 112, "{flooded}");
    // Still serving: a new client lists the runs.
    let (lines, _) =
        crate::mcp::drive_client_of("client.py", &url, &directory, "list", &no_protocols);
    let listed = crate::mcp::step(&lines, "listed")["runs"]
        .as_array()
        .unwrap();
    assert_eq!(listed.len(), 112, "list_runs' first page");
    assert_eq!(server.stop(), Some(0));
}
