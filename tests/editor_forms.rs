//! Hover names the form a key is written in; completion and diagnostics follow the place (`on`, `after`) and the kind of state.

use serde_json::json;

use super::{LanguageServer, PROTOCOL_MODELINE, assert_offers, repository};

/// Hover on a key whose value takes several forms describes the key and names the form written.
#[test]
fn hover_names_the_form_each_key_is_written_in() {
    let fixture = std::fs::read_to_string(repository().join("tests/fixtures/editor/forms.yaml"))
        .expect("tests/fixtures/editor/forms.yaml is committed");
    let mut server = LanguageServer::start();
    let forms = server.open("editor-test-forms.yaml", &fixture);
    // (line, column, the hover includes, the hover does not include), 0-based as in LSP.
    let cases: [(u32, u32, &[&str], &[&str]); 9] = [
        (
            5,
            10,
            &["What to run", "one expression giving that list"],
            &["A list: the program"],
        ),
        (
            10,
            10,
            &["What to run", "A list: the program and its arguments"],
            &["one expression"],
        ),
        (
            8,
            14,
            &["Attempts in all", "A whole number, e.g. `3`"],
            &["An expression"],
        ),
        (
            9,
            14,
            &["Attempts in all", "An expression giving a whole number"],
            &["A whole number,"],
        ),
        (
            13,
            7,
            &[
                "Transitions taken on events",
                "The id of the state to go to",
            ],
            &["Short form"],
        ),
        (
            14,
            7,
            &[
                "Transitions taken on events",
                "A transition written in full",
            ],
            &["The id of"],
        ),
        (
            15,
            7,
            &[
                "Transitions taken on events",
                "A list of transitions, tried in order",
            ],
            &[],
        ),
        (
            16,
            5,
            &["Eventless transitions", "The id of the state to go to"],
            &[],
        ),
        (18, 10, &["How long after entry the transition fires"], &[]),
    ];
    for (line, character, includes, excludes) in cases {
        let hover = server.request(
            "textDocument/hover",
            json!({ "textDocument": { "uri": forms }, "position": { "line": line, "character": character } }),
        );
        let text = hover["contents"]["value"].as_str().unwrap_or_default();
        let written = fixture.lines().nth(line as usize).unwrap_or_default();
        for expected in includes {
            assert!(
                text.contains(expected),
                "hover on `{written}` says {expected:?}: {text}"
            );
        }
        // No serde notes and no variant names ("Literal", "Computed") in what an author reads.
        for unexpected in excludes
            .iter()
            .chain(&["serde", "#### Literal", "#### Computed"])
        {
            assert!(
                !text.contains(unexpected),
                "hover on `{written}` avoids {unexpected:?}: {text}"
            );
        }
    }
    server.shut_down();
}

/// (line, column, offered, not offered, the place in words), 0-based as in LSP.
type CompletionCase = (
    u32,
    u32,
    &'static [&'static str],
    &'static [&'static str],
    &'static str,
);

/// `delay` is offered only under `after`, and kind-only keys only on that kind of state.
#[test]
fn completion_offers_only_the_keys_of_the_place_and_the_kind() {
    let mut server = LanguageServer::start();
    let document = server.open(
        "editor-test-kinds.yaml",
        &format!(
            "{PROTOCOL_MODELINE}\nid: editor-test\nstates:\n  a:\n    on:\n      go:\n        \n  atomic:\n    \n  b:\n    type: final\n    \n  h:\n    type: history\n    \n"
        ),
    );
    let cases: [CompletionCase; 4] = [
        (
            6,
            8,
            &["target", "guard", "actions"],
            &["delay", "until"],
            "a transition under `on`",
        ),
        (
            8,
            4,
            &["entry", "on", "type"],
            &["exit_code", "output", "history", "target"],
            "an atomic state",
        ),
        (
            11,
            4,
            &["exit_code", "output"],
            &["history", "target"],
            "a final state",
        ),
        (
            14,
            4,
            &["history", "target"],
            &["exit_code", "output"],
            "a history state",
        ),
    ];
    for (line, character, offered, hidden, place) in cases {
        let labels = server.completion_labels(&document, line, character);
        assert_offers(&labels, offered, place);
        for label in hidden {
            assert!(
                !labels.iter().any(|offered| offered == label),
                "completion in {place} does not offer `{label}`; offered {labels:?}"
            );
        }
    }
    server.shut_down();
}

/// The editor flags what the place or the kind of state does not take, as `validate` does.
#[test]
fn the_editor_flags_delay_under_on_and_exit_code_on_an_atomic_state() {
    let mut server = LanguageServer::start();
    let document = server.open(
        "editor-test-misplaced.yaml",
        &format!(
            "{PROTOCOL_MODELINE}\nid: editor-test\nstates:\n  a:\n    exit_code: 3\n    on:\n      go: {{ target: b, delay: 1s }}\n  b:\n    type: final\n    exit_code: 0\n"
        ),
    );
    let diagnostics = server.wait_for_diagnostics(&document);
    let mut found: Vec<(u64, String)> = diagnostics
        .iter()
        .map(|diagnostic| {
            (
                diagnostic["range"]["start"]["line"]
                    .as_u64()
                    .unwrap_or_default(),
                diagnostic["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    found.sort();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].0 == 4 && found[0].1.contains("exit_code") && found[0].1.contains("not allowed"),
        "{found:?}"
    );
    assert!(
        found[1].0 == 6 && found[1].1.contains("delay") && found[1].1.contains("not allowed"),
        "{found:?}"
    );
    server.shut_down();
}
