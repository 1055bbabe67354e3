//! Exit order (reverse document order), then transition actions, then entry order (document order).

use crate::support::Run;

#[test]
fn exits_inner_to_outer_then_transition_actions_then_enters_outer_to_inner() {
    let mut run = Run::start(
        r#"
id: order
states:
  a:
    entry: [{ log: "enter a" }]
    exit: [{ log: "exit a" }]
    states:
      a1:
        entry: [{ log: "enter a1" }]
        exit: [{ log: "exit a1" }]
        on:
          go:
            target: b2
            actions: [{ log: "transition" }]
  b:
    entry: [{ log: "enter b" }]
    exit: [{ log: "exit b" }]
    initial: b1
    states:
      b1: {}
      b2:
        entry: [{ log: "enter b2" }]
"#,
    );
    assert_eq!(
        run.take_steps(),
        ["enter:a", "log:enter a", "enter:a1", "log:enter a1"]
    );
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "log:exit a1",
            "exit:a1",
            "log:exit a",
            "exit:a",
            "log:transition",
            "enter:b",
            "log:enter b",
            "enter:b2",
            "log:enter b2"
        ]
    );
    assert_eq!(run.leaves(), ["b2"]);
}

#[test]
fn deep_exit_and_entry_follow_document_order_with_several_actions_each() {
    let mut run = Run::start(
        r#"
id: deep
states:
  a:
    exit: [{ log: "exit a 1" }, { log: "exit a 2" }]
    states:
      a1:
        exit: [{ log: "exit a1" }]
        states:
          a11:
            exit: [{ log: "exit a11" }]
            on:
              go:
                target: b21
                actions: [{ log: "t1" }, { log: "t2" }]
  b:
    entry: [{ log: "enter b 1" }, { log: "enter b 2" }]
    states:
      b1: {}
      b2:
        entry: [{ log: "enter b2" }]
        states:
          b20: {}
          b21:
            entry: [{ log: "enter b21" }]
"#,
    );
    assert_eq!(run.take_steps(), ["enter:a", "enter:a1", "enter:a11"]);
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "log:exit a11",
            "exit:a11",
            "log:exit a1",
            "exit:a1",
            "log:exit a 1",
            "log:exit a 2",
            "exit:a",
            "log:t1",
            "log:t2",
            "enter:b",
            "log:enter b 1",
            "log:enter b 2",
            "enter:b2",
            "log:enter b2",
            "enter:b21",
            "log:enter b21",
        ]
    );
    assert_eq!(run.configuration(), ["b", "b2", "b21"]);
}

const NESTED: &str = r#"
id: nested
states:
  p:
    exit: [{ log: "exit p" }]
    states:
      q:
        exit: [{ log: "exit q" }]
        states:
          q1:
            on:
              next: q2
              leave: { target: r, actions: [{ log: "t" }] }
          q2: {}
      r:
        entry: [{ log: "enter r" }]
"#;

#[test]
fn transition_between_siblings_exits_and_enters_only_the_siblings() {
    let mut run = Run::start(NESTED);
    assert_eq!(run.take_steps(), ["enter:p", "enter:q", "enter:q1"]);
    run.send("next");
    assert_eq!(run.take_steps(), ["exit:q1", "enter:q2"]);
    run.send("leave");
    assert_eq!(
        run.take_steps(),
        Vec::<String>::new(),
        "`leave` belongs to q1, which is no longer active"
    );
}

#[test]
fn transition_domain_is_the_nearest_compound_ancestor_of_source_and_target() {
    let mut run = Run::start(NESTED);
    run.take_steps();
    run.send("leave");
    // The domain is `p`, which holds both q1 and r: p is neither exited nor entered.
    assert_eq!(
        run.take_steps(),
        [
            "exit:q1",
            "log:exit q",
            "exit:q",
            "log:t",
            "enter:r",
            "log:enter r"
        ]
    );
    assert_eq!(run.configuration(), ["p", "r"]);
}

#[test]
fn external_self_transition_exits_and_reenters_the_state() {
    let mut run = Run::start(
        r#"
id: self
states:
  s:
    entry: [{ log: "enter s" }]
    exit: [{ log: "exit s" }]
    on:
      again: { target: s, actions: [{ log: "t" }] }
"#,
    );
    assert_eq!(run.take_steps(), ["enter:s", "log:enter s"]);
    run.send("again");
    assert_eq!(
        run.take_steps(),
        ["log:exit s", "exit:s", "log:t", "enter:s", "log:enter s"]
    );
}

#[test]
fn external_self_transition_on_a_compound_state_reenters_its_initial_child() {
    let mut run = Run::start(
        r#"
id: reset
states:
  p:
    entry: [{ log: "enter p" }]
    exit: [{ log: "exit p" }]
    on:
      reset: { target: p, actions: [{ log: "t" }] }
    states:
      p1: { on: { next: p2 } }
      p2: {}
"#,
    );
    run.send("next");
    run.take_steps();
    run.send("reset");
    assert_eq!(
        run.take_steps(),
        [
            "exit:p2",
            "log:exit p",
            "exit:p",
            "log:t",
            "enter:p",
            "log:enter p",
            "enter:p1"
        ]
    );
}

#[test]
fn external_transition_from_a_compound_state_to_its_descendant_exits_the_source() {
    let mut run = Run::start(
        r#"
id: external
states:
  p:
    entry: [{ log: "enter p" }]
    exit: [{ log: "exit p" }]
    on:
      go: { target: p2, actions: [{ log: "t" }] }
    states:
      p1: {}
      p2: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "exit:p1",
            "log:exit p",
            "exit:p",
            "log:t",
            "enter:p",
            "log:enter p",
            "enter:p2"
        ]
    );
}

#[test]
fn internal_transition_to_a_descendant_does_not_exit_the_compound_source() {
    let mut run = Run::start(
        r#"
id: internal
states:
  p:
    entry: [{ log: "enter p" }]
    exit: [{ log: "exit p" }]
    on:
      go: { target: p2, type: internal, actions: [{ log: "t" }] }
    states:
      p1:
        exit: [{ log: "exit p1" }]
      p2:
        entry: [{ log: "enter p2" }]
        states:
          p21: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "log:exit p1",
            "exit:p1",
            "log:t",
            "enter:p2",
            "log:enter p2",
            "enter:p21"
        ]
    );
    // Again from p21: only the descendants of p are exited and re-entered.
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "exit:p21",
            "exit:p2",
            "log:t",
            "enter:p2",
            "log:enter p2",
            "enter:p21"
        ]
    );
    assert_eq!(run.configuration(), ["p", "p2", "p21"]);
}

#[test]
fn internal_transition_targeting_its_own_source_behaves_as_external() {
    // SCXML: the domain is the source only if every target is a proper descendant of it.
    let mut run = Run::start(
        r#"
id: internal-self
states:
  p:
    exit: [{ log: "exit p" }]
    on:
      go: { target: p, type: internal }
    states:
      p1: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        ["exit:p1", "log:exit p", "exit:p", "enter:p", "enter:p1"]
    );
}

#[test]
fn internal_transition_on_an_atomic_source_behaves_as_external() {
    let mut run = Run::start(
        r#"
id: internal-atomic
states:
  a:
    exit: [{ log: "exit a" }]
    on:
      go: { target: a, type: internal, actions: [{ log: "t" }] }
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        ["log:exit a", "exit:a", "log:t", "enter:a"]
    );
}

#[test]
fn targetless_transition_runs_its_actions_without_exiting_or_entering() {
    let mut run = Run::start(
        r#"
id: targetless
context: { n: 0 }
states:
  p:
    exit: [{ log: "exit p" }]
    on:
      bump: { actions: [{ assign: { n: "n + 10" } }, { log: "p ${n}" }] }
    states:
      p1:
        exit: [{ log: "exit p1" }]
        on:
          tick: { actions: [{ assign: { n: "n + 1" } }, { log: "p1 ${n}" }] }
"#,
    );
    run.take_steps();
    run.send("tick").send("bump").send("tick");
    assert_eq!(run.take_steps(), ["log:p1 1", "log:p 11", "log:p1 12"]);
    assert_eq!(run.configuration(), ["p", "p1"]);
}

#[test]
fn exit_transition_and_entry_actions_all_see_the_triggering_event() {
    let mut run = Run::start(
        r#"
id: event
states:
  a:
    exit: [{ log: "exit a on ${event.name} ${event.data.n}" }]
    on:
      go: { target: b, actions: [{ log: "t on ${event.name}" }] }
  b:
    entry: [{ log: "enter b on ${event.name}" }]
"#,
    );
    run.take_steps();
    run.send_with("go", serde_json::json!({ "n": 1 }));
    assert_eq!(
        run.take_logs(),
        ["exit a on go 1", "t on go", "enter b on go"]
    );
}
