//! The data model as SCXML's ECMAScript-free profile sees it: context and inputs by bare name,
//! assignments in order, `In()`, templates and the current event.

use serde_json::json;

use crate::support::Run;

#[test]
fn each_assignment_sees_the_ones_before_it() {
    let mut run = Run::start(
        r#"
id: assign
context: { a: 0, b: 0, c: 0, items: [] }
states:
  s:
    entry:
      - { assign: { a: "1", b: "a + 1" } }
      - { assign: { c: "a + b" } }
      - { assign: { a: "c * 10", items: [1, "two", 3] } }
      - { log: "a=${a} b=${b} c=${c}" }
"#,
    );
    assert_eq!(run.take_logs(), ["a=30 b=2 c=3"]);
    assert_eq!(run.context("items"), json!([1, "two", 3]));
}

#[test]
fn context_persists_across_transitions_and_actions_run_in_order() {
    let mut run = Run::start(
        r#"
id: order
context: { trail: "" }
states:
  a:
    exit: [{ assign: { trail: "trail + 'x'" } }]
    on:
      go: { target: b, actions: [{ assign: { trail: "trail + 't'" } }] }
  b:
    entry: [{ assign: { trail: "trail + 'e'" } }, { log: "${trail}" }]
"#,
    );
    run.send("go");
    assert_eq!(run.take_logs(), ["xte"]);
}

const INPUTS: &str = r#"
id: inputs
inputs:
  limit: { type: integer, default: 2 }
  name: { type: string, default: "world" }
context: { n: 0 }
states:
  counting:
    entry: [{ log: "hello ${name}" }]
    on:
      tick:
        - { target: full, guard: "n + 1 >= limit", actions: [{ assign: { n: "n + 1" } }] }
        - { actions: [{ assign: { n: "n + 1" } }] }
  full:
    entry: [{ log: "full at ${n} of ${limit}" }]
"#;

#[test]
fn inputs_are_read_by_bare_name_with_their_defaults() {
    let mut run = Run::start(INPUTS);
    run.send("tick").send("tick");
    assert_eq!(run.take_logs(), ["hello world", "full at 2 of 2"]);
}

#[test]
fn supplied_inputs_replace_the_defaults() {
    let mut run = Run::start_with_inputs(INPUTS, &[("limit", "3"), ("name", "there")]);
    run.send("tick").send("tick");
    assert_eq!(run.leaves(), ["counting"]);
    run.send("tick");
    assert_eq!(run.take_logs(), ["hello there", "full at 3 of 3"]);
}

#[test]
fn in_tests_the_current_configuration() {
    let mut run = Run::start(
        r#"
id: in
states:
  p:
    type: parallel
    states:
      r1:
        states:
          r1a:
            on:
              go:
                - { target: r1b, guard: "In('r2b') && In('p')", actions: [{ log: "r2 is at b" }] }
                - { actions: [{ log: "r2 not at b: ${In('r2a')}" }] }
          r1b: {}
      r2:
        states:
          r2a: { on: { flip: r2b } }
          r2b: {}
"#,
    );
    run.send("go");
    assert_eq!(run.take_logs(), ["r2 not at b: true"]);
    run.send("flip").send("go");
    assert_eq!(run.take_logs(), ["r2 is at b"]);
}

#[test]
fn in_during_a_microstep_sees_the_configuration_as_it_changes() {
    // Exit actions run while the state is still active; entry actions once it is.
    let mut run = Run::start(
        r#"
id: in-microstep
states:
  a:
    exit: [{ log: "exit a: a=${In('a')} b=${In('b')}" }]
    on:
      go: { target: b, actions: [{ log: "transition: a=${In('a')} b=${In('b')}" }] }
  b:
    entry: [{ log: "enter b: a=${In('a')} b=${In('b')}" }]
"#,
    );
    run.send("go");
    assert_eq!(
        run.take_logs(),
        [
            "exit a: a=true b=false",
            "transition: a=false b=false",
            "enter b: a=false b=true"
        ]
    );
}

#[test]
fn templates_render_expressions_inside_messages_and_fields() {
    let mut run = Run::start(
        r#"
id: templates
context: { n: 7, who: "ops", list: [1, 2] }
states:
  a:
    entry:
      - log: "n=${n} twice=${n * 2} who=${who} size=${size(list)} plain"
        fields: { doubled: "${n * 2}", text: "n is ${n}" }
"#,
    );
    assert_eq!(run.take_logs(), ["n=7 twice=14 who=ops size=2 plain"]);
    let fields: Vec<(String, serde_json::Value)> = run.host.logs[0]
        .fields
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_json()))
        .collect();
    assert_eq!(
        fields,
        [
            ("doubled".to_string(), json!(14)),
            ("text".to_string(), json!("n is 7"))
        ]
    );
}

#[test]
fn guards_and_actions_read_the_current_event() {
    let mut run = Run::start(
        r#"
id: event
context: { total: 0 }
states:
  a:
    on:
      "*":
        - { guard: "event.name == 'add' && event.data.amount > 0", actions: [{ assign: { total: "total + event.data.amount" } }] }
        - { guard: "event.name == 'show'", actions: [{ log: "${event.name} ${event.type} total=${total}" }] }
"#,
    );
    run.send_with("add", json!({ "amount": 5 }));
    run.send_with("add", json!({ "amount": -3 }));
    run.send_with("add", json!({ "amount": 2 }));
    run.send("show");
    assert_eq!(run.take_logs(), ["show external total=7"]);
    assert_eq!(run.context("total"), json!(7));
}

#[test]
fn conditionals_pick_the_first_true_branch() {
    let yaml = r#"
id: branches
context: { n: N }
states:
  a:
    entry:
      - if: "n < 0"
        then: [{ log: "negative" }]
        elif:
          - { if: "n == 0", then: [{ log: "zero" }] }
          - { if: "n < 10", then: [{ log: "small" }] }
        else: [{ log: "large" }]
      - { log: "end" }
"#;
    for (n, expected) in [
        ("-1", "negative"),
        ("0", "zero"),
        ("5", "small"),
        ("50", "large"),
    ] {
        let mut run = Run::start(&yaml.replace("N", n));
        assert_eq!(run.take_logs(), [expected, "end"], "n = {n}");
    }
}

#[test]
fn there_is_no_event_during_the_initial_entry() {
    let mut run = Run::start(
        r#"
id: no-event
states:
  a:
    entry: [{ log: "event=${event}" }]
"#,
    );
    assert_eq!(run.take_logs(), ["event=null"]);
}

#[test]
fn the_strings_lists_and_math_extensions_are_available() {
    let mut run = Run::start(
        r#"
id: extensions
context: { names: [b, a], scores: { z: 1, y: 2 } }
states:
  a:
    entry:
      - log: "${names.join(', ')}|${scores.map(k, k).sort()}|${'A-B'.lowerAscii().split('-')}|${math.abs(-3)}|${math.greatest(1, 5)}"
"#,
    );
    assert_eq!(run.take_logs(), [r#"b, a|["y","z"]|["a","b"]|3|5"#]);
}

#[test]
fn unknown_methods_and_namespaced_functions_are_load_errors() {
    let rendered = crate::support::errors(
        r#"
id: typos
context: { names: [] }
states:
  a:
    entry:
      - log: "${names.jion(', ')}"
      - log: "${math.abss(1)}"
"#,
    );
    assert!(rendered.contains("unknown method `jion`"), "{rendered}");
    assert!(rendered.contains("did you mean `join`"), "{rendered}");
    assert!(
        rendered.contains("unknown function `math.abss`"),
        "{rendered}"
    );
    assert!(rendered.contains("test.yaml:7:"), "{rendered}");
}

#[test]
fn log_tags_are_templates() {
    let mut run = Run::start_with_inputs(
        r#"
id: tags
inputs: { agent_type: { type: string, default: critic } }
states:
  a:
    entry: [{ log: "timed out", tags: ["${agent_type}_timeout", agent_crashed] }]
"#,
        &[("agent_type", "developer")],
    );
    run.take_steps();
    let tags: Vec<Vec<String>> = run
        .host
        .logs
        .iter()
        .map(|record| record.tags.iter().map(|tag| tag.to_string()).collect())
        .collect();
    assert_eq!(tags, [vec!["developer_timeout", "agent_crashed"]]);
}
