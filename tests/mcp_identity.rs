//! How the MCP server names itself and the calls it warns about: `serverInfo` is this program and its version, a refused tool call is named as the call, never as an input line.

use serde_json::json;

use crate::support::mcp_raw::{RawMcp, reported_run};
use crate::support::temporary_directory;

/// An event that requires `content`: a `revise` without it is refused at the door.
const DRAFT: &str = r#"
id: draft
events:
  revise:
    type: object
    properties: { content: { type: string } }
    required: [content]
  publish: {}
states:
  drafting:
    on:
      revise: drafting
      publish: published
  published: { type: final }
"#;

#[test]
fn initialize_names_this_program_and_its_version() {
    let directory = temporary_directory("mcp-identity", "initialize");
    std::fs::write(directory.join("draft.yaml"), DRAFT).unwrap();
    let server = RawMcp::start(&directory, &["draft.yaml"], json!({}));
    let info = &server.initialized["result"]["serverInfo"];
    assert_eq!(info["name"], "protocol-run", "{info}");
    // The version `--version` prints: one program, one version.
    let (_, version, _) = crate::support::run_binary(&directory, &["--version"]);
    assert_eq!(
        version.trim(),
        format!("protocol-run {}", info["version"].as_str().unwrap()),
        "{info}"
    );
    server.finish();
}

#[test]
fn a_refused_tool_call_is_named_as_the_call_on_stderr() {
    let directory = temporary_directory("mcp-identity", "refused");
    std::fs::write(directory.join("draft.yaml"), DRAFT).unwrap();
    let mut server = RawMcp::start(&directory, &["draft.yaml"], json!({}));
    let started = server.call(1, "draft", json!({}));
    let run = reported_run(&started);
    let refused = server.call(2, "send_event", json!({"run": run, "event": "revise"}));
    assert_eq!(
        refused["structuredContent"]["sent"]["outcome"],
        json!("refused"),
        "{refused}"
    );
    let published = server.call(3, "send_event", json!({"run": run, "event": "publish"}));
    assert_ne!(published["isError"], json!(true), "{published}");
    let stderr = server.finish();
    let warning = stderr
        .lines()
        .find(|line| line.contains("revise"))
        .unwrap_or_else(|| panic!("no warning about `revise` in:\n{stderr}"));
    assert!(
        warning.starts_with(&format!("warning: MCP call send_event to run `{run}`: ")),
        "{warning}"
    );
    assert!(warning.ends_with("; not taken"), "{warning}");
    assert!(!stderr.contains("input line"), "{stderr}");
}
