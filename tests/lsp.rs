//! `protocol-run lsp` spoken to over stdio as an editor does: framed JSON-RPC, diagnostics as
//! the author types, completion, hover, definition, shutdown.

pub mod client;

use std::io::Write;

use serde_json::{Value, json};

use client::{Client, end_of, uri};

pub const LIBRARY: &str = "\
description: Shared blocks.
blocks:
  greet:
    description: Logs a greeting.
    parameters:
      who: { description: Whom to greet., default: \"'world'\" }
    do:
      - log: \"hello ${who}\"
retry_policies:
  quick:
    - { error_equals: [error.exec], max_attempts: 2 }
";

pub const PROTOCOL: &str = "\
id: lsp-demo
inputs:
  retries: { type: integer, default: 3, description: How often to try. }
context: { attempts: 0 }
events: { start: {}, stop: {} }
imports: [shared.library.yaml]
states:
  idle:
    description: Waiting for work.
    on:
      start: { target: working }
  working:
    entry:
      - use: greet
      - assign: { attempts: \"attempts + 1\" }
    on:
      stop: idle
    always: { target: finished, guard: \"'🎉' == '🎉' && attempts >= retries && size('ok') > 0\" }
  finished: { type: final, exit_code: 0 }
";

/// A directory holding the protocol and the library it imports.
pub fn project(name: &str) -> crate::support::TemporaryDirectory {
    let directory = crate::support::temporary_directory("lsp", name);
    std::fs::write(directory.join("shared.library.yaml"), LIBRARY).unwrap();
    std::fs::write(directory.join("demo.yaml"), PROTOCOL).unwrap();
    directory
}

fn messages(diagnostics: &[Value]) -> Vec<String> {
    diagnostics
        .iter()
        .map(|diagnostic| diagnostic["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn diagnostics_follow_the_unsaved_buffer_with_utf16_ranges() {
    let directory = project("diagnostics");
    let document = uri(&directory.join("demo.yaml"));
    let mut client = Client::start();

    let opened = client.open(&document, PROTOCOL);
    assert!(
        opened.iter().all(|diagnostic| diagnostic["severity"] == 2),
        "a valid protocol has warnings at most (check's lint): {opened:?}"
    );

    // A typo typed but not saved: the diagnostic comes from the buffer, not the file.
    let typo = PROTOCOL.replace("&& attempts >=", "&& atempts >=");
    let diagnostics = client.change(&document, 2, &typo);
    let unknown = diagnostics
        .iter()
        .find(|diagnostic| {
            diagnostic["message"]
                .as_str()
                .unwrap()
                .contains("unknown name `atempts`")
        })
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    assert_eq!(unknown["severity"], 1);
    assert_eq!(unknown["source"], "protocol-run");
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `attempts`?")
    );
    // Each emoji before it is one character but two UTF-16 code units.
    let (line, end) = end_of(&typo, "&& atempts");
    assert_eq!(
        unknown["range"],
        json!({
            "start": { "line": line, "character": end - "atempts".len() },
            "end": { "line": line, "character": end },
        })
    );

    // An unknown target and a schema error are reported together where the loader can.
    let broken = PROTOCOL
        .replace("target: working", "target: workng")
        .replace("description: Waiting", "descripton: Waiting");
    let diagnostics = client.change(&document, 3, &broken);
    let all = messages(&diagnostics).join("\n");
    assert!(all.contains("unknown key `descripton`"), "{all}");
    assert!(all.contains("workng"), "{all}");
    assert!(all.contains("did you mean `working`?"), "{all}");
    let (line, _) = end_of(&broken, "target: workng");
    assert!(
        diagnostics
            .iter()
            .any(|diagnostic| diagnostic["range"]["start"]["line"] == line),
        "{diagnostics:?}"
    );

    // Mid-typing (not YAML at all): a located syntax error, and the server lives on.
    let half = PROTOCOL.replace(
        "  finished: { type: final, exit_code: 0 }",
        "  finished: { type: fin",
    );
    let diagnostics = client.change(&document, 4, &half);
    assert!(!diagnostics.is_empty());
    assert_eq!(client.shut_down(), 0);
}

#[test]
fn completion_offers_the_names_that_belong_at_the_cursor() {
    let directory = project("completion");
    let document = uri(&directory.join("demo.yaml"));
    let mut client = Client::start();
    client.open(&document, PROTOCOL);

    // Typing a new target while the document does not parse: the last good outline answers.
    let typing = PROTOCOL.replace("target: working }", "target: wo");
    client.change(&document, 2, &typing);
    assert_eq!(
        client.labels_after(&document, &typing, "target: wo"),
        ["working"]
    );

    // Every state after `target:`, in an `on:` short form and inside `In('...')`.
    let states = ["idle", "working", "finished"];
    let typing = PROTOCOL.replace("target: working }", "target: ");
    client.change(&document, 3, &typing);
    assert_eq!(client.labels_after(&document, &typing, "target: "), states);
    let typing = PROTOCOL.replace("stop: idle", "stop: ");
    client.change(&document, 4, &typing);
    assert_eq!(
        client.labels_after(&document, &typing, "      stop: "),
        states
    );
    let typing = PROTOCOL.replace("guard: \"'🎉'", "guard: \"In('fi");
    client.change(&document, 5, &typing);
    assert_eq!(
        client.labels_after(&document, &typing, "In('fi"),
        ["finished"]
    );

    // Event names under `on:`: declared, and the engine's for states that exist.
    let typing = PROTOCOL.replace("      stop: idle\n", "      stop: idle\n      \n");
    client.change(&document, 6, &typing);
    let labels = client.labels_after(&document, &typing, "stop: idle\n      ");
    for event in ["start", "stop"] {
        assert!(labels.contains(&event.to_string()), "{labels:?}");
    }

    // Inputs, context and functions inside an expression.
    let typing = PROTOCOL.replace("&& attempts >= retries", "&& ");
    client.change(&document, 7, &typing);
    let labels = client.labels_after(&document, &typing, "'🎉' && ");
    for name in ["retries", "attempts", "event", "In", "now", "size"] {
        assert!(
            labels.contains(&name.to_string()),
            "{name} missing from {labels:?}"
        );
    }
    let typing = PROTOCOL.replace("attempts + 1", "${att");
    client.change(&document, 8, &typing);
    assert_eq!(
        client.labels_after(&document, &typing, "${att"),
        ["attempts"]
    );

    // Block names after `use:` (from the imported library) and policies after `retry:`.
    let typing = PROTOCOL.replace("use: greet", "use: ");
    client.change(&document, 9, &typing);
    assert_eq!(client.labels_after(&document, &typing, "use: "), ["greet"]);
    let typing = PROTOCOL.replace(
        "      - use: greet\n",
        "      - use: greet\n      - { exec: [true], id: build, retry: q",
    );
    client.change(&document, 10, &typing);
    assert_eq!(
        client.labels_after(&document, &typing, "retry: q"),
        ["quick"]
    );
    // ... and the effect's outcome events under `on:`, once the effect was written.
    let written = typing.replace("retry: q", "retry: quick }\n");
    client.change(&document, 11, &written);
    let typing = written.replace("      stop: idle\n", "      stop: idle\n      done.\n");
    client.change(&document, 12, &typing);
    let labels = client.labels_after(&document, &typing, "      done.");
    assert!(
        labels.contains(&"done.exec.build".to_string()),
        "{labels:?}"
    );
    assert_eq!(client.shut_down(), 0);
}

#[test]
fn hover_and_definition_explain_and_find_names() {
    let directory = project("hover");
    let document = uri(&directory.join("demo.yaml"));
    let mut client = Client::start();
    client.open(&document, PROTOCOL);

    let hover = |client: &mut Client, needle: &str| {
        let (line, character) = end_of(PROTOCOL, needle);
        let result = client.at("textDocument/hover", &document, line, character - 1);
        result["contents"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let state = hover(&mut client, "stop: idle");
    assert!(
        state.contains("state `idle`") && state.contains("Waiting for work."),
        "{state}"
    );
    let input = hover(&mut client, ">= retries");
    assert!(
        input.contains("input `retries`: integer, default 3")
            && input.contains("How often to try."),
        "{input}"
    );
    let function = hover(&mut client, "&& size");
    assert!(
        function.contains("size(value: string | list | map) -> int"),
        "{function}"
    );
    let block = hover(&mut client, "use: greet");
    assert!(
        block.contains("Logs a greeting.") && block.contains("`who`"),
        "{block}"
    );

    let definition = |client: &mut Client, needle: &str| {
        let (line, character) = end_of(PROTOCOL, needle);
        client.at("textDocument/definition", &document, line, character - 1)
    };
    let idle = definition(&mut client, "stop: idle");
    assert_eq!(idle["uri"], document);
    assert_eq!(idle["range"]["start"], json!({ "line": 7, "character": 2 }));
    let greet = definition(&mut client, "use: greet");
    let library = uri(&directory.join("shared.library.yaml"));
    assert_eq!(greet["uri"], library);
    assert_eq!(
        greet["range"]["start"],
        json!({ "line": 2, "character": 2 })
    );
    let import = definition(&mut client, "imports: [shared.library");
    assert_eq!(import["uri"], library);
    assert_eq!(client.shut_down(), 0);
}

#[test]
fn library_and_scenario_buffers_get_their_own_checks() {
    let directory = project("kinds");
    let mut client = Client::start();
    let library = uri(&directory.join("shared.library.yaml"));
    let broken = LIBRARY.replace("    do:", "    body:");
    let diagnostics = client.open(&library, &broken);
    let all = messages(&diagnostics).join("\n");
    assert!(all.contains("unknown key `body`"), "{all}");

    // Saved broken, the library's problems show in the protocol that imports it: on its first
    // line with the library's own place, and at its `imports:` entry.
    std::fs::write(directory.join("shared.library.yaml"), &broken).unwrap();
    let diagnostics = client.open(&uri(&directory.join("demo.yaml")), PROTOCOL);
    let library_path = directory.join("shared.library.yaml");
    let elsewhere = format!("{}:7:5: unknown key `body`", library_path.display());
    let first_line = diagnostics
        .iter()
        .find(|diagnostic| {
            diagnostic["message"]
                .as_str()
                .unwrap()
                .starts_with(&elsewhere)
        })
        .unwrap_or_else(|| panic!("no {elsewhere} in {diagnostics:?}"));
    assert_eq!(
        first_line["range"]["start"],
        json!({ "line": 0, "character": 0 })
    );
    let (imports_line, _) = end_of(PROTOCOL, "imports: [");
    assert!(
        diagnostics
            .iter()
            .any(|diagnostic| diagnostic["range"]["start"]["line"] == imports_line),
        "{diagnostics:?}"
    );
    std::fs::write(directory.join("shared.library.yaml"), LIBRARY).unwrap();

    let scenario = uri(&directory.join("demo.scenario.yaml"));
    let text = "protocol: missing.yaml\nscenarios: []\n";
    let diagnostics = client.open(&scenario, text);
    let all = messages(&diagnostics).join("\n");
    assert!(all.contains("missing.yaml"), "{all}");
    assert_eq!(
        diagnostics[0]["range"]["start"],
        json!({ "line": 0, "character": 10 })
    );
    let diagnostics = client.change(&scenario, 2, "protocol: demo.yaml\nscenarios: []\n");
    assert_eq!(diagnostics, Vec::<Value>::new());
    assert_eq!(client.shut_down(), 0);
}

#[test]
fn hostile_clients_meet_named_limits_and_bad_requests_do_not_stop_the_server() {
    let directory = project("limits");
    let mut client = Client::start();
    let document = uri(&directory.join("huge.yaml"));
    let diagnostics = client.open(&document, &"#".repeat(1024 * 1024 + 1));
    assert!(
        messages(&diagnostics)[0].contains("MAX_DOCUMENT_BYTES"),
        "{diagnostics:?}"
    );

    // Unknown methods and malformed parameters are errors, not crashes.
    let unknown = client.request_raw("textDocument/rename", json!({}));
    assert_eq!(unknown["error"]["code"], -32601);
    let malformed = client.request_raw("textDocument/hover", json!({ "position": 3 }));
    assert_eq!(malformed["error"]["code"], -32602);
    // A position far outside the document, and a document never opened: empty answers.
    let far = client.at("textDocument/completion", &document, 99_999, 99_999);
    assert_eq!(far, json!([]));

    // A message claiming to be larger than the limit ends the connection, without reading it.
    write!(client.stdin, "Content-Length: 999999999999\r\n\r\n").unwrap();
    client.stdin.flush().unwrap();
    let status = client.child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn invoked_protocols_are_found_and_their_outcomes_completed() {
    let directory = project("invoke");
    std::fs::write(
        directory.join("child.yaml"),
        "id: child\nstates:\n  only: { type: final, exit_code: 0 }\n",
    )
    .unwrap();
    let parent = "\
id: parent
states:
  running:
    invoke: [{ id: kid, protocol: child.yaml }]
    on:
      done.invoke.kid: finished
  finished: { type: final, exit_code: 0 }
";
    let document = uri(&directory.join("parent.yaml"));
    let mut client = Client::start();
    assert!(
        client
            .open(&document, parent)
            .iter()
            .all(|diagnostic| diagnostic["severity"] == 2)
    );
    let (line, character) = end_of(parent, "protocol: chi");
    let child = client.at("textDocument/definition", &document, line, character);
    assert_eq!(child["uri"], uri(&directory.join("child.yaml")));

    // A child that goes missing is the parent's error, located at its `protocol:`.
    std::fs::remove_file(directory.join("child.yaml")).unwrap();
    let diagnostics = client.change(&document, 2, parent);
    let missing = diagnostics
        .iter()
        .find(|diagnostic| diagnostic["severity"] == 1)
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    assert!(
        missing["message"].as_str().unwrap().contains("child.yaml"),
        "{missing}"
    );
    assert_eq!(missing["range"]["start"]["line"], 3);

    let typing = parent.replace("      done.invoke.kid: finished\n", "      done.\n");
    client.change(&document, 3, &typing);
    let labels = client.labels_after(&document, &typing, "      done.");
    assert_eq!(labels, ["done.invoke.kid"]);
    assert_eq!(client.shut_down(), 0);
}
