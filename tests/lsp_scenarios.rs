//! `protocol-run lsp` in scenario buffers (names from the protocol they test: completion, go
//! to definition, hover, the checks `validate` makes) and hover on the events under `on:`.

use serde_json::json;

use crate::lsp::client::{Client, end_of, uri};

const SHOP: &str = "\
id: shop
context: { shards: [a, b], shard: null }
events:
  order:
    description: A customer's order.
    properties:
      item: { type: string, description: What was ordered. }
    required: [item]
  cancel: {}
states:
  waiting:
    on:
      order: { target: saving }
      cancel: cancelled
  saving:
    entry:
      - raise: saved
      - write: out/order.json
        content: x
        id: save_order
      - map: shards
        id: check
        item: shard
        exec: [echo, \"${shard}\"]
    on:
      done.exec.save_order: checked
      error.exec.timeout.save_order: cancelled
      saved: { actions: [{ log: saved }] }
      error.execution: cancelled
      error.exec: cancelled
  checked: { type: final }
  cancelled: { type: final, exit_code: 1 }
";

/// A protocol with no `events:`: a scenario may send what some `on:` handles.
const UNDECLARED: &str = "\
id: open
states:
  idle:
    on:
      go: done
      done.exec.run: done
  done: { type: final }
";

fn project(name: &str) -> crate::support::TemporaryDirectory {
    let directory = crate::support::temporary_directory("lsp-scenarios", name);
    std::fs::write(directory.join("shop.yaml"), SHOP).unwrap();
    std::fs::write(directory.join("open.yaml"), UNDECLARED).unwrap();
    directory
}

const SCENARIO: &str = "\
protocol: shop.yaml
scenarios:
  - name: ordered
    start: { configuration: [wai] }
    mocks:
      sa
    steps:
      - send: or
      - expect:
          configuration: [sav]
          finished: { state: che }
          effects:
            - id: ch
";

#[test]
fn scenario_buffers_complete_the_protocols_states_effects_and_events() {
    let directory = project("complete");
    let scenario = uri(&directory.join("shop.scenario.yaml"));
    let mut client = Client::start();
    client.open(&scenario, SCENARIO);
    let labels =
        |client: &mut Client, needle: &str| client.labels_after(&scenario, SCENARIO, needle);
    assert_eq!(labels(&mut client, "configuration: [wai"), ["waiting"]);
    assert_eq!(labels(&mut client, "configuration: [sav"), ["saving"]);
    assert_eq!(labels(&mut client, "state: che"), ["checked"]);
    assert_eq!(labels(&mut client, "      sa"), ["save_order"]);
    // A map's items are keyed `check[N]`.
    assert_eq!(labels(&mut client, "- id: ch"), ["check", "check["]);
    // Declared events only: not `saved`, which the protocol raises itself.
    assert_eq!(labels(&mut client, "send: or"), ["order"]);
    let all_events = {
        let text = SCENARIO.replace("send: or", "send: ");
        client.change(&scenario, 2, &text);
        client.labels_after(&scenario, &text, "send: ")
    };
    assert_eq!(all_events, ["order", "cancel"]);

    let open = uri(&directory.join("open.scenario.yaml"));
    let text = "protocol: open.yaml\nscenarios:\n  - steps:\n      - send: \n";
    client.open(&open, text);
    // Undeclared: what an `on:` handles, without the engine's own events.
    assert_eq!(client.labels_after(&open, text, "send: "), ["go"]);
    assert_eq!(client.shut_down(), 0);
}

#[test]
fn scenario_names_lead_into_the_protocol_and_explain_themselves() {
    let directory = project("definition");
    let scenario = uri(&directory.join("shop.scenario.yaml"));
    let protocol = uri(&directory.join("shop.yaml"));
    let text = "\
protocol: shop.yaml
scenarios:
  - name: ordered
    mocks: { save_order: ok, check: ok }
    steps:
      - send: order
        data: { item: tea }
      - expect: { configuration: [checked] }
";
    let mut client = Client::start();
    client.open(&scenario, text);
    let at = |client: &mut Client, method: &str, needle: &str| {
        let (line, character) = end_of(text, needle);
        client.at(method, &scenario, line, character - 1)
    };
    // The start of `needle`'s last `length` characters in the protocol.
    let in_protocol = |needle: &str, length: usize| {
        let (line, character) = end_of(SHOP, needle);
        json!({ "line": line, "character": character - length })
    };
    let state = at(&mut client, "textDocument/definition", "[checked");
    assert_eq!(state["uri"], protocol);
    assert_eq!(state["range"]["start"], in_protocol("  checked", 7));
    let effect = at(&mut client, "textDocument/definition", "{ save_order");
    assert_eq!(effect["range"]["start"], in_protocol("        id", 2));
    let event = at(&mut client, "textDocument/definition", "send: order");
    assert_eq!(event["range"]["start"], in_protocol("  order", 5));
    let hover = at(&mut client, "textDocument/hover", "send: order");
    let shown = hover["contents"]["value"].as_str().unwrap();
    assert!(
        shown.contains("A customer's order.") && shown.contains("`item`: string, required"),
        "{shown}"
    );
    let hover = at(&mut client, "textDocument/hover", "{ save_order");
    let shown = hover["contents"]["value"].as_str().unwrap();
    assert_eq!(shown, "`write` effect `save_order` in state `saving`");
    assert_eq!(client.shut_down(), 0);
}

#[test]
fn scenario_buffers_get_the_checks_validate_makes_located_in_the_buffer() {
    let directory = project("diagnostics");
    let scenario = uri(&directory.join("shop.scenario.yaml"));
    let text = "\
protocol: shop.yaml
scenarios:
  - name: typos
    mocks: { save_ordr: ok }
    steps:
      - expect: { configuration: [chekced] }
";
    let mut client = Client::start();
    let diagnostics = client.open(&scenario, text);
    let found = |needle: &str, place: &str| {
        let (line, character) = end_of(text, place);
        let diagnostic = diagnostics
            .iter()
            .find(|diagnostic| diagnostic["message"].as_str().unwrap().contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in {diagnostics:?}"));
        assert_eq!(
            diagnostic["range"]["start"],
            json!({ "line": line, "character": character }),
            "{diagnostic}"
        );
    };
    found("save_ordr", "mocks: { ");
    found("chekced", "configuration: [");
    let fixed = text
        .replace("save_ordr", "save_order")
        .replace("chekced", "checked");
    assert_eq!(
        client.change(&scenario, 2, &fixed),
        Vec::<serde_json::Value>::new()
    );
    assert_eq!(client.shut_down(), 0);
}

#[test]
fn hover_on_an_event_under_on_says_what_it_is() {
    let directory = project("event-hover");
    let protocol = uri(&directory.join("shop.yaml"));
    let mut client = Client::start();
    client.open(&protocol, SHOP);
    let hover = |client: &mut Client, needle: &str| {
        let (line, character) = end_of(SHOP, needle);
        let result = client.at("textDocument/hover", &protocol, line, character - 1);
        result["contents"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let declared = hover(&mut client, "      order");
    assert!(
        declared.starts_with("declared event `order`")
            && declared.contains("A customer's order.")
            && declared.contains("`item`: string, required — What was ordered."),
        "{declared}"
    );
    let done = hover(&mut client, "done.exec.save_order");
    assert!(
        done.starts_with("engine event `done.exec.save_order`: the effect `save_order` succeeded")
            && done.contains("`bytes`"),
        "{done}"
    );
    let timeout = hover(&mut client, "error.exec.timeout.save_order");
    assert!(timeout.contains("`save_order` timed out"), "{timeout}");
    let raised = hover(&mut client, "      saved");
    assert_eq!(
        raised,
        "event `saved`, produced by the protocol itself:\n- `raise` in state `saving`"
    );
    let family = hover(&mut client, "      error.exec:");
    assert_eq!(
        family,
        "descriptor `error.exec`: matches every failure of every effect, timeouts included"
    );
    let execution = hover(&mut client, "      error.execution");
    assert!(
        execution.contains("an expression or action failed"),
        "{execution}"
    );
    assert_eq!(client.shut_down(), 0);
}
