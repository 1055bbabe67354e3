//! Delayed transitions (`after`) and delayed `send`, on the test host's virtual clock.

use crate::support::Run;

const WAIT: &str = r#"
id: wait
states:
  a:
    entry: [{ log: "enter a" }]
    exit: [{ log: "exit a" }]
    on:
      leave: c
      reset: a
    after:
      - { delay: 100ms, target: b, actions: [{ log: "${event.name}" }] }
  b: {}
  c:
    on: { back: a }
"#;

#[test]
fn after_transition_fires_when_its_delay_has_passed() {
    let mut run = Run::start(WAIT);
    run.take_steps();
    run.advance(99);
    assert_eq!(run.leaves(), ["a"]);
    run.advance(1);
    assert_eq!(
        run.take_steps(),
        ["log:exit a", "exit:a", "log:after.a.0", "enter:b"]
    );
    assert!(run.host.timers.is_empty());
}

#[test]
fn leaving_before_the_delay_cancels_the_timer() {
    let mut run = Run::start(WAIT);
    run.advance(50);
    run.send("leave");
    assert!(run.host.timers.is_empty());
    run.take_steps();
    run.advance(1_000);
    assert!(run.take_steps().is_empty());
    assert_eq!(run.leaves(), ["c"]);
}

#[test]
fn reentering_the_state_arms_a_fresh_timer() {
    let mut run = Run::start(WAIT);
    run.advance(60);
    run.send("reset");
    run.advance(60);
    assert_eq!(
        run.leaves(),
        ["a"],
        "the first timer (due at 100) was cancelled by the exit"
    );
    run.advance(39);
    assert_eq!(run.leaves(), ["a"]);
    run.advance(1);
    assert_eq!(run.leaves(), ["b"]);
    assert_eq!(run.host.now, 160);
}

#[test]
fn a_state_left_and_entered_again_waits_the_whole_delay_again() {
    let mut run = Run::start(WAIT);
    run.advance(90);
    run.send("leave");
    run.advance(90);
    run.send("back");
    run.advance(99);
    assert_eq!(run.leaves(), ["a"]);
    run.advance(1);
    assert_eq!(run.leaves(), ["b"]);
}

#[test]
fn a_parents_timer_keeps_running_while_its_children_change_and_cancels_theirs() {
    let mut run = Run::start(
        r#"
id: nested
states:
  p:
    after:
      - { delay: 100ms, target: out }
    states:
      p1: { on: { next: p2 } }
      p2:
        after:
          - { delay: 80ms, actions: [{ log: "p2 timer" }] }
  out: {}
"#,
    );
    run.advance(50);
    run.send("next");
    run.take_steps();
    run.advance(100);
    assert_eq!(run.take_steps(), ["exit:p2", "exit:p", "enter:out"]);
    assert!(run.host.timers.is_empty());
}

#[test]
fn timers_started_on_entry_follow_the_entry_actions() {
    // The `after` timer is armed after the state's entry actions, so a timer the entry
    // actions send with the same delay comes first.
    let mut run = Run::start(
        r#"
id: same-deadline
states:
  a:
    entry: [{ send: from_entry, delay: 100ms }]
    on:
      from_entry: { actions: [{ log: "from entry" }] }
    after:
      - { delay: 100ms, actions: [{ log: "after 0" }] }
      - { delay: 100ms, actions: [{ log: "after 1" }] }
"#,
    );
    run.take_steps();
    run.advance(100);
    assert_eq!(run.take_logs(), ["from entry", "after 0", "after 1"]);
}

#[test]
fn of_two_timers_due_together_the_first_one_can_cancel_the_second() {
    let mut run = Run::start(
        r#"
id: preempt
states:
  a:
    after:
      - { delay: 100ms, target: b }
      - { delay: 100ms, target: c, actions: [{ log: "never" }] }
  b: {}
  c: {}
"#,
    );
    run.advance(100);
    assert_eq!(run.leaves(), ["b"]);
    assert!(!run.take_logs().contains(&"never".to_string()));
    assert!(run.host.timers.is_empty());
}

#[test]
fn timers_fire_in_deadline_order_whatever_the_order_they_were_armed_in() {
    let mut run = Run::start(
        r#"
id: deadlines
states:
  a:
    entry:
      - { send: slow, delay: 300ms }
      - { send: fast, delay: 100ms }
      - { send: fast2, delay: 100ms }
    on:
      "fast fast2 slow": { actions: [{ log: "${event.name}" }] }
    after:
      - { delay: 200ms, actions: [{ log: "after" }] }
"#,
    );
    run.take_steps();
    run.advance(1_000);
    assert_eq!(run.take_logs(), ["fast", "fast2", "after", "slow"]);
}

#[test]
fn timer_events_are_named_after_the_state_and_the_position_in_after() {
    let mut run = Run::start(
        r#"
id: names
states:
  a:
    after:
      - { delay: 10ms, actions: [{ log: "after 0" }] }
      - { delay: 20ms, actions: [{ log: "after 1" }] }
    states:
      a1:
        on:
          "after.a.1": { actions: [{ log: "a1 took ${event.name} (${event.type}, ${event.sendid})" }] }
"#,
    );
    run.advance(20);
    // The child's transition on the parent's timer event comes first, as for any event.
    assert_eq!(
        run.take_logs(),
        ["after 0", "a1 took after.a.1 (platform, after.a.1)"]
    );
}

#[test]
fn a_wildcard_never_takes_a_timer_event() {
    // Timer events are matched only by the `after` transition that owns the timer.
    let mut run = Run::start(
        r#"
id: wildcard
states:
  b:
    after:
      - { delay: 10ms, actions: [{ log: "after" }] }
    on:
      "*": { actions: [{ log: "wildcard ${event.name}" }] }
"#,
    );
    run.advance(10);
    assert_eq!(run.take_logs(), ["after"]);
    run.send("other");
    assert_eq!(run.take_logs(), ["wildcard other"]);
}

const SEND: &str = r#"
id: send
states:
  a:
    entry: [{ send: tick, delay: 100ms, id: t1 }]
    on:
      stop: { actions: [{ cancel: t1 }, { log: "stopped" }] }
      tick: { target: b, actions: [{ log: "tick ${event.sendid}" }] }
  b: {}
"#;

#[test]
fn delayed_send_is_delivered_after_its_delay() {
    let mut run = Run::start(SEND);
    run.take_steps();
    run.advance(100);
    assert_eq!(run.take_steps(), ["exit:a", "log:tick t1", "enter:b"]);
}

#[test]
fn cancel_withdraws_a_delayed_send_by_its_id() {
    let mut run = Run::start(SEND);
    run.advance(50);
    run.send("stop");
    run.advance(1_000);
    assert_eq!(run.take_logs(), ["stopped"]);
    assert_eq!(run.leaves(), ["a"]);
}

#[test]
fn a_delayed_send_is_not_cancelled_by_leaving_the_state_that_sent_it() {
    let mut run = Run::start(
        r#"
id: outlives
states:
  a:
    entry: [{ send: ping, delay: 100ms }]
    on: { leave: b }
  b:
    on:
      ping: { actions: [{ log: "ping in b" }] }
"#,
    );
    run.send("leave");
    run.advance(100);
    assert_eq!(run.take_logs(), ["ping in b"]);
}

#[test]
fn delays_may_be_expressions_giving_milliseconds() {
    let mut run = Run::start(
        r#"
id: computed
context: { attempts: 3 }
states:
  a:
    entry: [{ assign: { attempts: "attempts + 1" } }, { send: retry, delay: "attempts * 50" }]
    on:
      retry: { actions: [{ log: "retry" }] }
    after:
      - { delay: "attempts * 100", target: b }
  b: {}
"#,
    );
    run.take_steps();
    run.advance(199);
    assert!(run.take_logs().is_empty());
    run.advance(1);
    assert_eq!(run.take_logs(), ["retry"]);
    run.advance(199);
    assert_eq!(run.leaves(), ["a"]);
    run.advance(1);
    assert_eq!(run.leaves(), ["b"]);
    assert_eq!(run.host.now, 400);
}

#[test]
fn a_delay_expression_may_give_a_duration_string() {
    let mut run = Run::start(
        r#"
id: text
context: { wait: "2s" }
states:
  a:
    after:
      - { delay: "wait", target: b }
  b: {}
"#,
    );
    run.advance(1_999);
    assert_eq!(run.leaves(), ["a"]);
    run.advance(1);
    assert_eq!(run.leaves(), ["b"]);
}

#[test]
fn a_state_timeout_leaves_through_its_timeout_event_unless_left_first() {
    const TIMEOUT: &str = r#"
id: state-timeout
inputs: { agent_type: { type: enum, values: [developer, critic], default: critic } }
context: { limits: { developer: 900000, critic: 600000 } }
states:
  working:
    timeout: limits[agent_type]
    on:
      timeout: { target: timed_out, actions: [{ log: "${event.name}" }] }
      done: finished
  timed_out: {}
  finished: {}
"#;
    let mut run = Run::start(TIMEOUT);
    run.advance(599_999);
    assert_eq!(run.leaves(), ["working"]);
    run.advance(1);
    assert_eq!(run.take_logs(), ["timeout.working"]);
    assert_eq!(run.leaves(), ["timed_out"]);

    let mut run = Run::start_with_inputs(TIMEOUT, &[("agent_type", "developer")]);
    run.advance(600_000);
    run.send("done");
    run.advance(900_000);
    assert_eq!(run.leaves(), ["finished"]);
    assert!(run.take_logs().is_empty());
}
