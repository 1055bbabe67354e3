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
    assert_eq!(run.take_steps(), ["enter:a", "log:enter a", "enter:a1", "log:enter a1"]);
    run.send("go");
    assert_eq!(
        run.take_steps(),
        ["log:exit a1", "exit:a1", "log:exit a", "exit:a", "log:transition", "enter:b", "log:enter b", "enter:b2", "log:enter b2"]
    );
    assert_eq!(run.leaves(), ["b2"]);
}
