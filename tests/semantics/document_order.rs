//! `selectTransitions`: the first enabled transition in document order wins, a descendant's
//! transitions are tried before its ancestors', and event descriptors match by token prefix.

use crate::support::Run;

#[test]
fn first_enabled_transition_in_a_list_wins() {
    let mut run = Run::start(
        r#"
id: list
states:
  a:
    on:
      go:
        - { target: b, guard: "false", actions: [{ log: "b" }] }
        - { target: c, actions: [{ log: "c" }] }
        - { target: d, actions: [{ log: "d" }] }
  b: {}
  c: {}
  d: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(run.take_steps(), ["exit:a", "log:c", "enter:c"]);
}

#[test]
fn first_matching_key_in_document_order_wins_across_on_keys() {
    let star_first = r#"
id: keys
states:
  a:
    on:
      "*": { target: star }
      go: { target: named }
  star: {}
  named: {}
"#;
    let mut run = Run::start(star_first);
    run.send("go");
    assert_eq!(run.leaves(), ["star"]);

    let named_first = r#"
id: keys
states:
  a:
    on:
      go: { target: named }
      "*": { target: star }
  star: {}
  named: {}
"#;
    let mut run = Run::start(named_first);
    run.send("go");
    assert_eq!(run.leaves(), ["named"]);
    let mut run = Run::start(named_first);
    run.send("other");
    assert_eq!(run.leaves(), ["star"]);
}

#[test]
fn guards_are_tried_in_order_and_a_false_guard_falls_through() {
    let yaml = r#"
id: guards
context: { n: 0 }
states:
  a:
    on:
      go:
        - { target: small, guard: "n < 1" }
        - { target: medium, guard: "n < 10" }
        - large
  small: {}
  medium: {}
  large: {}
"#;
    for (n, expected) in [(0, "small"), (5, "medium"), (50, "large")] {
        let yaml = yaml.replace("n: 0", &format!("n: {n}"));
        let mut run = Run::start(&yaml);
        run.send("go");
        assert_eq!(run.leaves(), [expected], "n = {n}");
    }
}

#[test]
fn a_descendants_transition_beats_its_ancestors() {
    let yaml = r#"
id: nesting
context: { inner: true }
states:
  p:
    on:
      go: { target: from_p, actions: [{ log: "p" }] }
    states:
      q:
        on:
          go: { target: from_q, actions: [{ log: "q" }] }
        states:
          q1:
            on:
              go: { target: from_q1, guard: "inner", actions: [{ log: "q1" }] }
  from_p: {}
  from_q: {}
  from_q1: {}
"#;
    let mut run = Run::start(yaml);
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        ["exit:q1", "exit:q", "exit:p", "log:q1", "enter:from_q1"]
    );

    // The innermost guard is false: the parent's transition is next, not the grandparent's.
    let mut run = Run::start(&yaml.replace("inner: true", "inner: false"));
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        ["exit:q1", "exit:q", "exit:p", "log:q", "enter:from_q"]
    );
}

#[test]
fn ancestor_transition_applies_when_the_descendant_has_none_for_the_event() {
    let mut run = Run::start(
        r#"
id: inherit
states:
  p:
    on:
      stop: done
    states:
      p1: { on: { next: p2 } }
      p2: {}
  done: {}
"#,
    );
    run.send("next").send("stop");
    assert_eq!(run.leaves(), ["done"]);
}

#[test]
fn a_key_with_several_descriptors_matches_each_of_them() {
    let yaml = r#"
id: several
states:
  a:
    on:
      "left right": { target: b, actions: [{ log: "${event.name}" }] }
  b:
    on: { back: a }
"#;
    let mut run = Run::start(yaml);
    run.take_steps();
    run.send("left");
    assert_eq!(run.take_logs(), ["left"]);
    run.send("back").send("right");
    assert_eq!(run.take_logs(), ["right"]);
    run.send("back").send("up");
    assert_eq!(run.leaves(), ["a"]);
}

const PREFIX: &str = r#"
id: prefix
states:
  a:
    on:
      "error.exec": { actions: [{ log: "exec ${event.name}" }] }
      error: { actions: [{ log: "error ${event.name}" }] }
      "*": { actions: [{ log: "any ${event.name}" }] }
"#;

#[test]
fn descriptors_match_whole_tokens_as_a_prefix() {
    let mut run = Run::start(PREFIX);
    for event in [
        "error",
        "error.exec",
        "error.exec.timeout",
        "error.execution",
        "errors",
        "err",
        "error.other.exec",
    ] {
        run.send(event);
    }
    assert_eq!(
        run.take_logs(),
        [
            "error error",
            "exec error.exec",
            "exec error.exec.timeout",
            "error error.execution",
            "any errors",
            "any err",
            "error error.other.exec",
        ]
    );
}

#[test]
fn wildcard_matches_any_event_including_names_unknown_to_the_protocol() {
    let mut run = Run::start(PREFIX);
    run.send("never.mentioned.anywhere").send("x");
    assert_eq!(run.take_logs(), ["any never.mentioned.anywhere", "any x"]);
}

#[test]
fn trailing_dot_star_means_the_same_as_the_bare_prefix() {
    let mut run = Run::start(
        r#"
id: dotstar
states:
  a:
    on:
      "error.*": { actions: [{ log: "caught ${event.name}" }] }
      "*": { actions: [{ log: "other ${event.name}" }] }
"#,
    );
    run.send("error")
        .send("error.execution")
        .send("error.a.b")
        .send("errors");
    assert_eq!(
        run.take_logs(),
        [
            "caught error",
            "caught error.execution",
            "caught error.a.b",
            "other errors"
        ]
    );
}

#[test]
fn unknown_event_names_match_by_prefix_too() {
    // `job.done.quick` is never named in the protocol, so it is matched by string, not by type.
    let mut run = Run::start(
        r#"
id: unknown
states:
  a:
    on:
      "job.done": { target: b, actions: [{ log: "${event.name}" }] }
  b: {}
"#,
    );
    run.send("job.doneish");
    assert_eq!(run.leaves(), ["a"]);
    run.send("job.done.quick");
    assert_eq!(run.take_logs(), ["job.done.quick"]);
    assert_eq!(run.leaves(), ["b"]);
}
