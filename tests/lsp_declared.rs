//! `protocol-run lsp` on declared data: `event.data.` completion, a declared event's enums and a typed variable's type on hover, an unknown function's range.

use serde_json::{Value, json};

use crate::lsp::client::{Client, end_of, uri};

const REVIEW: &str = "\
id: review
types:
  attempts: { type: integer, minimum: 0 }
  verdicts: { type: object, additionalProperties: { enum: [approved, rejected] } }
context: { attempts: 0, verdicts: {} }
events:
  critic.verdict:
    type: object
    properties:
      verdict: { type: string, enum: [approved, rejected], description: What the critic decided. }
      note: { type: string }
    required: [verdict]
  author.note:
    properties:
      text: { type: string }
      note: { type: string }
  cancel: {}
states:
  waiting:
    entry:
      - log: \"waiting, ${attempts} so far\"
    on:
      critic.verdict:
        - guard: \"event.data.verdict == 'approved'\"
          target: done
          actions:
            - assign: { attempts: \"attempts + 1\", verdicts.critic: \"event.data.verdict\" }
      \"author.note\": { target: waiting, guard: \"size(event.data.text) > 0\" }
      cancel: done
  done: { type: final }
";

fn open(name: &str) -> (Client, String, crate::support::TemporaryDirectory) {
    let directory = crate::support::temporary_directory("lsp-declared", name);
    std::fs::write(directory.join("review.yaml"), REVIEW).unwrap();
    let document = uri(&directory.join("review.yaml"));
    let mut client = Client::start();
    let diagnostics = client.open(&document, REVIEW);
    assert!(
        diagnostics
            .iter()
            .all(|diagnostic| diagnostic["severity"] != 1),
        "the protocol is valid: {diagnostics:?}"
    );
    (client, document, directory)
}

#[test]
fn event_data_completes_the_fields_of_the_transitions_declared_event() {
    let (mut client, document, _directory) = open("completion");
    let mut version = 1;
    let mut offered = |client: &mut Client, typing: &str, needle: &str| {
        version += 1;
        client.change(&document, version, typing);
        client.labels_after(&document, typing, needle)
    };

    // In a guard, in an assigned value (a block mapping below the `on:` key), and in a flow
    // mapping on the `on:` key's own line.
    let guard = REVIEW.replace("guard: \"event.data.verdict ==", "guard: \"event.data.");
    assert_eq!(
        offered(&mut client, &guard, "guard: \"event.data."),
        ["verdict", "note"]
    );
    let typed = REVIEW.replace("critic: \"event.data.verdict\"", "critic: \"event.data.v");
    assert_eq!(
        offered(&mut client, &typed, "critic: \"event.data.v"),
        ["verdict"]
    );
    let flow = REVIEW.replace("size(event.data.text)", "size(event.data.");
    assert_eq!(
        offered(&mut client, &flow, "size(event.data."),
        ["text", "note"]
    );

    // The field's type and enum as its detail, its description as its documentation.
    let (line, character) = end_of(&guard, "guard: \"event.data.");
    let items = client.at("textDocument/completion", &document, line, character);
    let verdict = &items[0];
    assert_eq!(
        verdict["detail"],
        "string, required, one of \"approved\", \"rejected\""
    );
    assert_eq!(verdict["documentation"], "What the critic decided.");

    // Entry actions run on no event: no field is offered, nor any other name.
    let entry = REVIEW.replace("${attempts} so far", "${event.data.");
    assert_eq!(
        offered(&mut client, &entry, "${event.data."),
        Vec::<String>::new()
    );
    assert_eq!(client.shut_down(), 0);
}

#[test]
fn hover_shows_a_declared_events_enums_and_a_typed_variables_type() {
    let (mut client, document, _directory) = open("hover");
    let hover = |client: &mut Client, needle: &str| {
        let (line, character) = end_of(REVIEW, needle);
        let result: Value = client.at("textDocument/hover", &document, line, character - 1);
        result["contents"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    // Under `on:` and under `events:` alike.
    for place in ["      critic.verdict", "  critic.verdict"] {
        let declared = hover(&mut client, place);
        assert!(
            declared.starts_with("declared event `critic.verdict`")
                && declared.contains(
                    "- `verdict`: string, required, one of \"approved\", \"rejected\" — What \
                     the critic decided."
                )
                && declared.contains("- `note`: string"),
            "{place}: {declared}"
        );
    }
    let attempts = hover(&mut client, "${attempts");
    assert_eq!(
        attempts,
        "context `attempts`: integer (from `types:`), initially 0"
    );
    let verdicts = hover(&mut client, "context: { attempts: 0, verdicts");
    assert_eq!(
        verdicts,
        "context `verdicts`: map of any, one of \"approved\", \"rejected\" (from `types:`), \
         initially {}"
    );
    assert_eq!(client.shut_down(), 0);
}

/// The editor gets `validate`'s range: the misspelled name, not the parentheses after it.
#[test]
fn an_unknown_function_is_underlined_at_its_name_in_the_editor() {
    let (mut client, document, _directory) = open("unknown-function");
    let typo = REVIEW.replace("${attempts} so far", "${noww()} so far");
    let diagnostics = client.change(&document, 2, &typo);
    let unknown = diagnostics
        .iter()
        .find(|diagnostic| diagnostic["message"].as_str().unwrap().contains("noww"))
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    let (line, end) = end_of(&typo, "${noww");
    assert_eq!(
        unknown["range"],
        json!({
            "start": { "line": line, "character": end - "noww".len() },
            "end": { "line": line, "character": end },
        })
    );
    assert_eq!(client.shut_down(), 0);
}
