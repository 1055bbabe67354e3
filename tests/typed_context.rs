//! `types:` and path assignment: initial values and known values checked at load, the rest when assigned (`error.execution`, nothing changed); `a.b` sets one key, in order.

use serde_json::json;

use crate::support::{Run, assert_diagnostic, errors};

#[test]
fn a_path_sets_one_key_creating_maps_on_the_way_in_order() {
    let mut run = Run::start(
        r#"
id: paths
context: { verdicts: { developer: approved }, deep: null }
states:
  a:
    on:
      go:
        actions:
          - assign:
              verdicts.critic: "'rejected'"
              deep.one.two: 2
              deep.one.three: "deep.one.two + 1"
          - log: "${verdicts.critic} ${deep.one.three}"
          - assign: { verdicts.critic: "'approved'" }
"#,
    );
    run.send("go");
    assert_eq!(run.take_logs(), ["rejected 3"]);
    assert_eq!(
        run.context("verdicts"),
        json!({ "developer": "approved", "critic": "approved" })
    );
    assert_eq!(
        run.context("deep"),
        json!({ "one": { "two": 2, "three": 3 } })
    );
}

#[test]
fn a_path_through_a_value_that_is_not_a_map_raises_error_execution() {
    let mut run = Run::start(
        r#"
id: not-a-map
context: { items: [1, 2] }
states:
  a:
    on:
      go:
        actions:
          - assign: { items.first: 1 }
          - log: "not reached"
      error.execution:
        actions: [{ log: "${event.data.message}" }]
"#,
    );
    run.send("go");
    assert_eq!(
        run.take_logs(),
        ["cannot set `items.first`: `items` is a list, not a map"]
    );
    assert_eq!(run.context("items"), json!([1, 2]));
}

#[test]
fn a_run_time_value_of_the_wrong_type_is_not_assigned() {
    let mut run = Run::start(
        r#"
id: typed
context: { verdicts: {}, count: 0 }
types:
  verdicts: { type: object, additionalProperties: { enum: [approved, rejected] } }
  count: { type: integer, minimum: 0 }
states:
  a:
    on:
      verdict:
        actions:
          - assign: { verdicts.critic: "'approved'" }
          - assign: { verdicts.auditor: event.data }
          - log: "not reached"
      down:
        actions:
          - assign: { count: "count - 1" }
      error.execution:
        actions: [{ log: "${event.data.message}" }]
"#,
    );
    run.send_with("verdict", json!("maybe"));
    assert_eq!(
        run.take_logs(),
        [
            "`verdicts` would not conform to its type (at `/auditor`: \"maybe\" is not one of \
             \"approved\" or \"rejected\"); the assignment is not made"
        ]
    );
    assert_eq!(run.context("verdicts"), json!({ "critic": "approved" }));
    // An int assignment, which otherwise takes a shortcut, is checked too.
    run.send("down");
    assert_eq!(
        run.take_logs(),
        [
            "`count` would not conform to its type (at `/`: -1 is less than the minimum of 0); the assignment is not made"
        ]
    );
    assert_eq!(run.context("count"), json!(0));
}

#[test]
fn types_and_known_values_are_checked_at_load() {
    let rendered = errors(
        r#"id: typed
context: { verdicts: [], count: 0, items: [], maybe: null }
types:
  verdicts: { type: object, properties: { critic: { enum: [approved] } } }
  cuont: { type: integer }
  count: { type: 12 }
  items: { type: array, items: { type: integer } }
states:
  a:
    entry:
      - assign:
          items: "['a']"
          maybe.critic: 1
          verdicts.critic: "'maybe'"
"#,
    );
    for (message, place, help) in [
        (
            "the initial value of `verdicts` does not conform to its type: at `/`: [] is not of type \"object\"",
            "test.yaml:2:22",
            "change the value, or the type under `types: { verdicts: ... }`",
        ),
        (
            "`types:` names `cuont`, which is not a context variable",
            "test.yaml:5:3",
            "did you mean `count`?",
        ),
        (
            "the type of `count`: not a valid JSON Schema",
            "test.yaml:6:10",
            "write a JSON Schema",
        ),
        (
            "`items` cannot hold this value: at `/0`: \"a\" is not of type \"integer\"",
            "test.yaml:12:18",
            "the type of `items` is declared under `types:`",
        ),
        (
            "`verdicts.critic` cannot hold this value: at `/`: \"maybe\" is not one of \"approved\"",
            "test.yaml:14:28",
            "assign a value of that type",
        ),
    ] {
        assert_diagnostic(&rendered, &[message, place, help]);
    }
    assert!(rendered.ends_with("5 errors\n"), "{rendered}");
}

#[test]
fn misused_paths_are_located_errors() {
    let rendered = errors(
        r#"id: paths
context: { items: [], verdicts: {} }
states:
  a:
    entry:
      - assign:
          items[2]: 1
          verdicts..x: 1
          nothing.x: 1
          count.x: 1
"#,
    );
    for (message, place, help) in [
        (
            "`items[2]` indexes a list, and a path names only map keys",
            "test.yaml:7:11",
            "to change one element, assign the whole list",
        ),
        (
            "`verdicts..x` is not a path: it has an empty key",
            "test.yaml:8:11",
            "e.g. `verdicts.critic`",
        ),
        (
            "unknown context variable `nothing`",
            "test.yaml:9:11",
            "declare it under `context:` first, e.g. `nothing: null`",
        ),
    ] {
        assert_diagnostic(&rendered, &[message, place, help]);
    }
    // The help never proposes a dotted name as a variable.
    assert!(!rendered.contains("`count.x: null`"), "{rendered}");
}

#[test]
fn a_typed_foreach_item_is_checked_like_an_assignment() {
    let mut run = Run::start(
        r#"
id: typed-loop
context: { commit: "", seen: [] }
types:
  commit: { type: string }
states:
  a:
    on:
      go:
        actions:
          - foreach: "['a1f', 7, 'c3d']"
            item: commit
            do: [{ assign: { seen: "seen + [commit]" } }]
      error.execution:
        actions: [{ log: "${event.data.message}" }]
"#,
    );
    run.send("go");
    assert_eq!(
        run.take_logs(),
        [
            "`commit` would not conform to its type (at `/`: 7 is not of type \"string\"); the assignment is not made"
        ]
    );
    assert_eq!(run.context("seen"), json!(["a1f"]));
    assert_eq!(run.context("commit"), json!("a1f"));
}
