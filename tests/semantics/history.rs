//! History states: shallow and deep recording on exit, restoring on entry, and the default
//! transition when nothing has been recorded yet.

use crate::support::Run;

const SHALLOW: &str = r#"
id: shallow
initial: main
states:
  main:
    entry: [{ log: "enter main" }]
    on:
      pause: paused
    states:
      h: { type: history, target: s2 }
      s1: { on: { next: s2 } }
      s2: { on: { next: s3 } }
      s3:
        on: { next: s1 }
        states:
          s31: { on: { next: s32 } }
          s32: {}
  paused:
    on:
      resume: { target: h, actions: [{ log: "resume" }] }
      restart: main
"#;

#[test]
fn shallow_history_restores_the_active_child() {
    let mut run = Run::start(SHALLOW);
    run.send("next").send("pause");
    run.take_steps();
    run.send("resume");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "log:resume",
            "enter:main",
            "log:enter main",
            "enter:s2"
        ]
    );
}

#[test]
fn shallow_history_enters_the_restored_child_by_its_default_initial_state() {
    let mut run = Run::start(SHALLOW);
    run.send("next").send("next").send("next");
    assert_eq!(run.leaves(), ["s32"]);
    run.send("pause");
    run.take_steps();
    run.send("resume");
    // Shallow: s3 is restored, but its child is entered by default (s31, not s32).
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "log:resume",
            "enter:main",
            "log:enter main",
            "enter:s3",
            "enter:s31"
        ]
    );
}

#[test]
fn history_default_transition_is_used_when_nothing_was_recorded() {
    let mut run = Run::start(&SHALLOW.replace("initial: main", "initial: paused"));
    assert_eq!(run.take_steps(), ["enter:paused"]);
    run.send("resume");
    // Not main's initial state (s1) but the history's default target (s2).
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "log:resume",
            "enter:main",
            "log:enter main",
            "enter:s2"
        ]
    );
}

#[test]
fn history_default_target_may_be_a_deeper_descendant() {
    let mut run = Run::start(
        &SHALLOW
            .replace("initial: main", "initial: paused")
            .replace("target: s2 }", "target: s32 }"),
    );
    run.take_steps();
    run.send("resume");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "log:resume",
            "enter:main",
            "log:enter main",
            "enter:s3",
            "enter:s32"
        ]
    );
}

#[test]
fn history_is_recorded_again_on_every_exit() {
    let mut run = Run::start(SHALLOW);
    run.send("next").send("pause").send("resume");
    assert_eq!(run.leaves(), ["s2"]);
    run.send("next").send("next").send("pause");
    assert_eq!(run.leaves(), ["paused"]);
    run.take_steps();
    run.send("resume");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "log:resume",
            "enter:main",
            "log:enter main",
            "enter:s3",
            "enter:s31"
        ]
    );
}

#[test]
fn entering_the_parent_directly_ignores_the_history() {
    let mut run = Run::start(SHALLOW);
    run.send("next").send("pause");
    run.take_steps();
    run.send("restart");
    assert_eq!(
        run.take_steps(),
        ["exit:paused", "enter:main", "log:enter main", "enter:s1"]
    );
}

#[test]
fn transition_to_the_history_of_a_parent_never_exited_uses_the_default() {
    let mut run = Run::start(
        r#"
id: inside
states:
  main:
    states:
      h: { type: history, target: s3 }
      s1: { on: { next: s2 } }
      s2: { on: { back: h } }
      s3: {}
"#,
    );
    run.send("next");
    run.take_steps();
    // main was never exited: nothing recorded, so the default target s3; main stays active.
    run.send("back");
    assert_eq!(run.take_steps(), ["exit:s2", "enter:s3"]);
    assert_eq!(run.configuration(), ["main", "s3"]);
}

const DEEP: &str = r#"
id: deep
states:
  main:
    on: { pause: paused }
    states:
      hd: { type: history, history: deep }
      hs: { type: history }
      sub:
        entry: [{ log: "enter sub" }]
        states:
          x1: { on: { next: x2 } }
          x2: {}
      other: {}
  paused:
    on:
      deep: hd
      shallow: hs
"#;

#[test]
fn deep_history_restores_the_active_leaves_with_their_ancestors() {
    let mut run = Run::start(DEEP);
    run.send("next").send("pause");
    run.take_steps();
    run.send("deep");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "enter:main",
            "enter:sub",
            "log:enter sub",
            "enter:x2"
        ]
    );
}

#[test]
fn shallow_and_deep_history_of_one_parent_differ() {
    let mut run = Run::start(DEEP);
    run.send("next").send("pause");
    run.take_steps();
    run.send("shallow");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "enter:main",
            "enter:sub",
            "log:enter sub",
            "enter:x1"
        ]
    );
}

#[test]
fn history_without_a_target_defaults_to_the_first_child() {
    let mut run =
        Run::start(&DEEP.replace("id: deep\nstates:", "id: deep\ninitial: paused\nstates:"));
    run.take_steps();
    run.send("deep");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "enter:main",
            "enter:sub",
            "log:enter sub",
            "enter:x1"
        ]
    );
}

const PARALLEL: &str = r#"
id: parallel-history
states:
  p:
    type: parallel
    on: { pause: paused }
    states:
      hp: { type: history, history: deep }
      r1:
        states:
          h1: { type: history, history: deep }
          r1a: { on: { n1: r1b } }
          r1b:
            states:
              r1b1: { on: { n1: r1b2 } }
              r1b2: {}
      r2:
        states:
          h2: { type: history }
          r2a: { on: { n2: r2b } }
          r2b: {}
  paused:
    on:
      resume: hp
      regions: { target: [h1, h2] }
      one: h1
"#;

#[test]
fn deep_history_of_a_parallel_state_restores_every_region() {
    let mut run = Run::start(PARALLEL);
    run.send("n1").send("n1").send("n2");
    assert_eq!(run.leaves(), ["r1b2", "r2b"]);
    run.send("pause");
    run.take_steps();
    run.send("resume");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "enter:p",
            "enter:r1",
            "enter:r1b",
            "enter:r1b2",
            "enter:r2",
            "enter:r2b"
        ]
    );
}

#[test]
fn deep_history_in_a_nested_compound_inside_a_parallel_state() {
    let mut run = Run::start(PARALLEL);
    run.send("n1").send("n1").send("n2").send("pause");
    run.take_steps();
    run.send("regions");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "enter:p",
            "enter:r1",
            "enter:r1b",
            "enter:r1b2",
            "enter:r2",
            "enter:r2b"
        ]
    );
}

#[test]
fn restoring_one_regions_history_enters_the_other_regions_by_default() {
    let mut run = Run::start(PARALLEL);
    run.send("n1").send("n1").send("n2").send("pause");
    run.take_steps();
    run.send("one");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "enter:p",
            "enter:r1",
            "enter:r1b",
            "enter:r1b2",
            "enter:r2",
            "enter:r2a"
        ]
    );
}

#[test]
fn parallel_history_default_enters_its_target_and_the_other_regions() {
    let mut run = Run::start(&PARALLEL.replace(
        "id: parallel-history\nstates:",
        "id: parallel-history\ninitial: paused\nstates:",
    ));
    run.take_steps();
    run.send("resume");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "enter:p",
            "enter:r1",
            "enter:r1a",
            "enter:r2",
            "enter:r2a"
        ]
    );
}

#[test]
fn shallow_history_restoring_a_parallel_child_enters_all_its_regions_by_default() {
    let mut run = Run::start(
        r#"
id: shallow-parallel
states:
  main:
    on: { pause: paused }
    states:
      h: { type: history }
      idle: { on: { work: busy } }
      busy:
        type: parallel
        states:
          left:
            states:
              l1: { on: { l: l2 } }
              l2: {}
          right:
            states:
              r1: {}
  paused:
    on: { resume: h }
"#,
    );
    run.send("work").send("l").send("pause");
    run.take_steps();
    run.send("resume");
    assert_eq!(
        run.take_steps(),
        [
            "exit:paused",
            "enter:main",
            "enter:busy",
            "enter:left",
            "enter:l1",
            "enter:right",
            "enter:r1"
        ]
    );
}

/// A history state stands for its parent: with a state inside that parent it is not a set of
/// targets in different regions (found by the property tests: both were entered).
#[test]
fn a_history_target_with_a_state_of_its_own_parent_is_refused() {
    let rendered = crate::support::errors(
        r#"
id: repro
states:
  p:
    type: parallel
    states:
      r1: {}
      r2:
        states:
          a: {}
          b: {}
      h: { type: history }
    on:
      go: { target: [h, b] }
"#,
    );
    assert!(
        rendered.contains("these targets cannot be active together"),
        "{rendered}"
    );
}
