//! Parallel states: every region is entered in document order and exited in reverse; when
//! several regions take transitions on one event, `removeConflictingTransitions` decides.

use crate::support::Run;

const TWO_REGIONS: &str = r#"
id: regions
states:
  p:
    type: parallel
    entry: [{ log: "enter p" }]
    exit: [{ log: "exit p" }]
    on:
      leave: { target: out, actions: [{ log: "t" }] }
    states:
      r1:
        entry: [{ log: "enter r1" }]
        exit: [{ log: "exit r1" }]
        states:
          r1a:
            entry: [{ log: "enter r1a" }]
            exit: [{ log: "exit r1a" }]
            on: { step: r1b }
          r1b: {}
      r2:
        entry: [{ log: "enter r2" }]
        exit: [{ log: "exit r2" }]
        states:
          r2a:
            entry: [{ log: "enter r2a" }]
            exit: [{ log: "exit r2a" }]
          r2b: {}
  out:
    on:
      back: p
      deep: r2b
      both: { target: [r1b, r2b] }
"#;

#[test]
fn entering_a_parallel_state_enters_every_region_in_document_order() {
    let mut run = Run::start(TWO_REGIONS);
    assert_eq!(
        run.take_steps(),
        [
            "enter:p",
            "log:enter p",
            "enter:r1",
            "log:enter r1",
            "enter:r1a",
            "log:enter r1a",
            "enter:r2",
            "log:enter r2",
            "enter:r2a",
            "log:enter r2a",
        ]
    );
}

#[test]
fn exiting_a_parallel_state_exits_every_region_in_reverse_document_order() {
    let mut run = Run::start(TWO_REGIONS);
    run.take_steps();
    run.send("leave");
    assert_eq!(
        run.take_steps(),
        [
            "log:exit r2a",
            "exit:r2a",
            "log:exit r2",
            "exit:r2",
            "log:exit r1a",
            "exit:r1a",
            "log:exit r1",
            "exit:r1",
            "log:exit p",
            "exit:p",
            "log:t",
            "enter:out",
        ]
    );
}

#[test]
fn a_transition_within_one_region_leaves_the_other_regions_alone() {
    let mut run = Run::start(TWO_REGIONS);
    run.take_steps();
    run.send("step");
    assert_eq!(run.take_steps(), ["log:exit r1a", "exit:r1a", "enter:r1b"]);
    assert_eq!(run.leaves(), ["r1b", "r2a"]);
}

#[test]
fn targeting_a_state_in_one_region_enters_the_other_regions_by_default() {
    let mut run = Run::start(TWO_REGIONS);
    run.send("leave");
    run.take_steps();
    run.send("deep");
    assert_eq!(
        run.take_steps(),
        [
            "exit:out",
            "enter:p",
            "log:enter p",
            "enter:r1",
            "log:enter r1",
            "enter:r1a",
            "log:enter r1a",
            "enter:r2",
            "log:enter r2",
            "enter:r2b",
        ]
    );
}

#[test]
fn several_targets_enter_each_named_state_in_its_region() {
    let mut run = Run::start(TWO_REGIONS);
    run.send("leave");
    run.take_steps();
    run.send("both");
    assert_eq!(
        run.take_steps(),
        [
            "exit:out",
            "enter:p",
            "log:enter p",
            "enter:r1",
            "log:enter r1",
            "enter:r1b",
            "enter:r2",
            "log:enter r2",
            "enter:r2b"
        ]
    );
}

#[test]
fn initial_may_name_a_state_in_each_region() {
    let mut run = Run::start(
        r#"
id: initial-list
initial: [a2, b2]
states:
  p:
    type: parallel
    states:
      a:
        states:
          a1: {}
          a2: {}
      b:
        states:
          b1: {}
          b2: {}
"#,
    );
    assert_eq!(
        run.take_steps(),
        ["enter:p", "enter:a", "enter:a2", "enter:b", "enter:b2"]
    );
}

const BOTH_REGIONS_REACT: &str = r#"
id: both
states:
  p:
    type: parallel
    states:
      r1:
        states:
          r1a:
            on:
              go: { target: r1b, actions: [{ log: "t1" }] }
          r1b: {}
      r2:
        states:
          r2a:
            on:
              go: { target: r2b, actions: [{ log: "t2" }] }
          r2b: {}
"#;

#[test]
fn both_regions_take_their_transition_in_one_microstep_in_document_order() {
    let mut run = Run::start(BOTH_REGIONS_REACT);
    run.take_steps();
    run.send("go");
    // One microstep: all exits (reverse document order), all actions (document order), all entries.
    assert_eq!(
        run.take_steps(),
        [
            "exit:r2a",
            "exit:r1a",
            "log:t1",
            "log:t2",
            "enter:r1b",
            "enter:r2b"
        ]
    );
    assert_eq!(run.leaves(), ["r1b", "r2b"]);
}

#[test]
fn an_earlier_region_leaving_the_parallel_state_preempts_a_later_regions_transition() {
    let mut run =
        Run::start(&(BOTH_REGIONS_REACT.replace("target: r1b", "target: out") + "  out: {}\n"));
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "exit:r2a",
            "exit:r2",
            "exit:r1a",
            "exit:r1",
            "exit:p",
            "log:t1",
            "enter:out"
        ]
    );
}

#[test]
fn a_later_region_leaving_the_parallel_state_is_preempted_by_an_earlier_region() {
    let mut run =
        Run::start(&(BOTH_REGIONS_REACT.replace("target: r2b", "target: out") + "  out: {}\n"));
    run.take_steps();
    run.send("go");
    assert_eq!(run.take_steps(), ["exit:r1a", "log:t1", "enter:r1b"]);
    assert_eq!(run.leaves(), ["r1b", "r2a"]);
}

#[test]
fn targetless_transitions_never_conflict() {
    let mut run = Run::start(
        r#"
id: targetless
states:
  p:
    type: parallel
    states:
      r1:
        on:
          go: { target: out, actions: [{ log: "leave" }] }
        states:
          r1a:
            on:
              go: { actions: [{ log: "r1a" }] }
      r2:
        states:
          r2a:
            on:
              go: { actions: [{ log: "r2a" }] }
  out: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(run.take_steps(), ["log:r1a", "log:r2a"]);
}

const ANCESTOR_AND_DESCENDANT: &str = r#"
id: ancestor
states:
  p:
    type: parallel
    on:
      go: { target: out, actions: [{ log: "p" }] }
    states:
      r1:
        states:
          r1a:
            on: { R1 }
          r1b: {}
      r2:
        states:
          r2a:
            on: { R2 }
          r2b: {}
  out: {}
"#;

fn ancestor_case(r1: &str, r2: &str) -> String {
    ANCESTOR_AND_DESCENDANT
        .replace("{ R1 }", r1)
        .replace("{ R2 }", r2)
}

#[test]
fn a_descendant_in_an_earlier_region_preempts_the_ancestors_transition() {
    // r1a selects its own transition, r2a selects p's: p's would exit r1a, and p is not a
    // descendant of r1a, so p's transition is dropped.
    let mut run = Run::start(&ancestor_case(
        r#"{ go: { target: r1b, actions: [{ log: "r1a" }] } }"#,
        "{}",
    ));
    run.take_steps();
    run.send("go");
    assert_eq!(run.take_steps(), ["exit:r1a", "log:r1a", "enter:r1b"]);
    assert_eq!(run.leaves(), ["r1b", "r2a"]);
}

#[test]
fn a_descendant_in_a_later_region_replaces_the_ancestors_transition() {
    // r1a selects p's transition first; r2a's comes later but its source is a descendant of p,
    // so it replaces p's.
    let mut run = Run::start(&ancestor_case(
        "{}",
        r#"{ go: { target: r2b, actions: [{ log: "r2a" }] } }"#,
    ));
    run.take_steps();
    run.send("go");
    assert_eq!(run.take_steps(), ["exit:r2a", "log:r2a", "enter:r2b"]);
    assert_eq!(run.leaves(), ["r1a", "r2b"]);
}

#[test]
fn the_ancestors_transition_is_taken_once_when_no_region_handles_the_event() {
    let mut run = Run::start(&ancestor_case("{}", "{}"));
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "exit:r2a",
            "exit:r2",
            "exit:r1a",
            "exit:r1",
            "exit:p",
            "log:p",
            "enter:out"
        ]
    );
}

#[test]
fn external_transition_to_a_region_exits_and_reenters_the_whole_parallel_state() {
    // findLCCA skips parallel states: the domain of r1a -> r1 is the parallel state's parent.
    let mut run = Run::start(
        r#"
id: region-target
states:
  p:
    type: parallel
    states:
      r1:
        states:
          r1a:
            on: { go: r1 }
      r2:
        states:
          r2a: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "exit:r2a",
            "exit:r2",
            "exit:r1a",
            "exit:r1",
            "exit:p",
            "enter:p",
            "enter:r1",
            "enter:r1a",
            "enter:r2",
            "enter:r2a",
        ]
    );
}

const DONE: &str = r#"
id: done
states:
  p:
    type: parallel
    on:
      done.state.p: { target: finished, actions: [{ log: "p done" }] }
    states:
      r1:
        on:
          done.state.r1: { actions: [{ log: "r1 done" }] }
        states:
          r1a: { on: { a: r1f } }
          r1f: { type: final }
      r2:
        on:
          done.state.r2: { actions: [{ log: "r2 done" }] }
        states:
          r2a: { on: { b: r2f } }
          r2f: { type: final }
  finished: {}
"#;

#[test]
fn parallel_is_done_only_when_every_region_is_final() {
    let mut run = Run::start(DONE);
    run.take_steps();
    run.send("a");
    assert_eq!(run.take_steps(), ["exit:r1a", "enter:r1f", "log:r1 done"]);
    assert_eq!(run.leaves(), ["r1f", "r2a"]);
    run.send("b");
    assert_eq!(
        run.take_steps(),
        [
            "exit:r2a",
            "enter:r2f",
            "log:r2 done",
            "exit:r2f",
            "exit:r2",
            "exit:r1f",
            "exit:r1",
            "exit:p",
            "log:p done",
            "enter:finished",
        ]
    );
}

#[test]
fn parallel_entered_with_every_region_final_is_done_at_once() {
    let mut run = Run::start(&DONE.replace(
        "finished: {}",
        "finished:\n    on: { again: { target: [r1f, r2f] } }",
    ));
    run.send("a").send("b");
    assert_eq!(run.leaves(), ["finished"]);
    run.take_steps();
    run.send("again");
    assert_eq!(
        run.take_steps(),
        [
            "exit:finished",
            "enter:p",
            "enter:r1",
            "enter:r1f",
            "enter:r2",
            "enter:r2f",
            "log:r1 done",
            "log:r2 done",
            "exit:r2f",
            "exit:r2",
            "exit:r1f",
            "exit:r1",
            "exit:p",
            "log:p done",
            "enter:finished",
        ]
    );
}

#[test]
fn eventless_transitions_in_several_regions_share_one_microstep() {
    let mut run = Run::start(
        r#"
id: eventless-regions
states:
  p:
    type: parallel
    states:
      r1:
        states:
          r1a: { always: r1b }
          r1b: {}
      r2:
        states:
          r2a: { always: r2b }
          r2b: {}
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:p",
            "enter:r1",
            "enter:r1a",
            "enter:r2",
            "enter:r2a",
            "exit:r2a",
            "exit:r1a",
            "enter:r1b",
            "enter:r2b"
        ]
    );
}

#[test]
fn with_three_regions_only_the_conflicting_transition_is_dropped() {
    let mut run = Run::start(
        r#"
id: three
states:
  p:
    type: parallel
    states:
      r1:
        states:
          r1a: { on: { go: { target: r1b, actions: [{ log: "t1" }] } } }
          r1b: {}
      r2:
        states:
          r2a: { on: { go: { target: out, actions: [{ log: "t2" }] } } }
      r3:
        states:
          r3a: { on: { go: { target: r3b, actions: [{ log: "t3" }] } } }
          r3b: {}
  out: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "exit:r3a",
            "exit:r1a",
            "log:t1",
            "log:t3",
            "enter:r1b",
            "enter:r3b"
        ]
    );
}

#[test]
fn a_transition_leaving_a_region_for_another_region_conflicts_with_that_regions_own() {
    // The nearest compound ancestor of r1a and r2b is the document (findLCCA skips parallel
    // states), so r1a -> r2b exits and re-enters all of p, and preempts r2a's transition.
    let mut run = Run::start(
        r#"
id: cross
states:
  p:
    type: parallel
    states:
      r1:
        states:
          r1a: { on: { go: { target: r2b, actions: [{ log: "cross" }] } } }
          r1b: {}
      r2:
        states:
          r2a: { on: { go: { target: r2c, actions: [{ log: "own" }] } } }
          r2b: {}
          r2c: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "exit:r2a",
            "exit:r2",
            "exit:r1a",
            "exit:r1",
            "exit:p",
            "log:cross",
            "enter:p",
            "enter:r1",
            "enter:r1a",
            "enter:r2",
            "enter:r2b",
        ]
    );
}
