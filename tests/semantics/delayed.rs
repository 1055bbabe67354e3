//! Delayed transitions and sends, on the test host's clock and on the runtime's virtual time.

use protocol_run::pipeline::actions::{Directive, LogRecord};
use protocol_run::pipeline::compile::machine::{Machine, TransitionId};
use protocol_run::runtime::run::Interpreter;
use protocol_run::runtime::run::driver::{
    DriveOptions, EventSource, InputLineError, Observer, TimeMode, drive,
};

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

// ---------------------------------------------------------------------------------------------
// The same timers through the runtime: `driver::drive` on virtual time orders and cancels them,
// not the test host above.

/// What a driven run did, in order: `MS log:MESSAGE` and `MS enter:STATE`, MS being virtual
/// milliseconds since the start. A state is entered, then its entry actions run.
#[derive(Default)]
struct Steps {
    /// (virtual Unix milliseconds, or none for the start's entries, which come before the
    /// start is recorded; the step)
    steps: Vec<(Option<u64>, String)>,
    /// The last time the run's clock was read: entries happen at the time of their transition.
    now: Option<u64>,
    start: Option<u64>,
}

impl Observer for Steps {
    fn log(&mut self, record: &LogRecord, time: &str) {
        let now = protocol_run::base::clock::parse_rfc3339(time).expect("an RFC 3339 time");
        self.now = Some(now);
        self.steps
            .push((Some(now), format!("log:{}", record.message)));
    }

    fn directive(&mut self, _directive: &Directive) {}

    fn input_error(&mut self, error: &InputLineError) {
        panic!("line {}: {}", error.line, error.message);
    }

    fn record(&mut self, time: &str, kind: &str, _fields: serde_json::Value) {
        if kind == "start" {
            self.start = protocol_run::base::clock::parse_rfc3339(time);
        }
    }

    fn transition(&mut self, now: &dyn Fn() -> u64, _machine: &Machine, _id: TransitionId) {
        self.now = Some(now());
    }

    fn state_entered(&mut self, state: &str) {
        self.steps.push((self.now, format!("enter:{state}")));
    }
}

/// Drives `yaml` through the runtime on virtual time, fed `lines` (events, and `advance` lines
/// that let virtual time pass); after the last line the remaining timers fire. Returns its
/// steps as `MS log:MESSAGE` and `MS enter:STATE`.
fn driven(yaml: &str, lines: &[&str]) -> Vec<String> {
    let machine = crate::support::machine(yaml);
    let mut interpreter = Interpreter::new(machine.clone(), machine.bind_inputs(&[]).unwrap());
    let mut steps = Steps::default();
    let options = DriveOptions {
        time_mode: TimeMode::Virtual,
        ..DriveOptions::default()
    };
    let mut text = lines.join("\n");
    text.push('\n');
    drive(
        &mut interpreter,
        EventSource::Lines(text),
        options,
        &mut steps,
    )
    .unwrap();
    let start = steps.start.expect("the start is recorded");
    steps
        .steps
        .into_iter()
        .map(|(time, step)| format!("{} {step}", time.unwrap_or(start) - start))
        .collect()
}

#[test]
fn the_runtime_fires_an_after_transition_at_its_delay() {
    assert_eq!(
        driven(WAIT, &[]),
        [
            "0 enter:a",
            "0 log:enter a",
            "100 log:exit a",
            "100 log:after.a.0",
            "100 enter:b"
        ]
    );
}

#[test]
fn the_runtime_cancels_a_timer_when_its_state_is_left_or_entered_again() {
    // Left at 50 ms: the timer due at 100 never fires, though the run goes on until 1 s.
    assert_eq!(
        driven(
            WAIT,
            &[
                r#"{"advance": "50ms"}"#,
                r#"{"event": "leave"}"#,
                r#"{"advance": "1s"}"#
            ]
        ),
        ["0 enter:a", "0 log:enter a", "50 log:exit a", "50 enter:c"]
    );
    // Entered again at 60 ms: the first timer is cancelled, the fresh one fires at 160.
    assert_eq!(
        driven(WAIT, &[r#"{"advance": "60ms"}"#, r#"{"event": "reset"}"#]),
        [
            "0 enter:a",
            "0 log:enter a",
            "60 log:exit a",
            "60 enter:a",
            "60 log:enter a",
            "160 log:exit a",
            "160 log:after.a.0",
            "160 enter:b"
        ]
    );
}

#[test]
fn the_runtime_keeps_a_parents_timer_and_cancels_its_childrens() {
    let nested = r#"
id: nested
states:
  p:
    after:
      - { delay: 100ms, target: out }
    states:
      p1: { on: { next: p2 } }
      p2:
        entry: [{ log: "p2" }]
        after:
          - { delay: 80ms, actions: [{ log: "p2 timer" }] }
  out: { entry: [{ log: "out" }] }
"#;
    assert_eq!(
        driven(nested, &[r#"{"advance": "50ms"}"#, r#"{"event": "next"}"#]),
        [
            "0 enter:p",
            "0 enter:p1",
            "50 enter:p2",
            "50 log:p2",
            "100 enter:out",
            "100 log:out"
        ]
    );
}

#[test]
fn the_runtime_fires_timers_in_deadline_then_arming_order() {
    let deadlines = r#"
id: deadlines
states:
  a:
    entry:
      - { send: slow, delay: 300ms }
      - { send: fast, delay: 100ms }
      - { send: fast2, delay: 100ms }
      - { send: from_entry, delay: 200ms }
    on:
      "fast fast2 slow from_entry": { actions: [{ log: "${event.name}" }] }
    after:
      - { delay: 200ms, actions: [{ log: "after 0" }] }
      - { delay: 200ms, actions: [{ log: "after 1" }] }
      - { delay: 400ms, target: done }
  done: { type: final }
"#;
    assert_eq!(
        driven(deadlines, &[]),
        [
            "0 enter:a",
            "100 log:fast",
            "100 log:fast2",
            "200 log:from_entry",
            "200 log:after 0",
            "200 log:after 1",
            "300 log:slow",
            "400 enter:done"
        ]
    );
}

#[test]
fn in_the_runtime_the_first_of_two_timers_due_together_cancels_the_second() {
    let preempt = r#"
id: preempt
states:
  a:
    after:
      - { delay: 100ms, target: b }
      - { delay: 100ms, target: c, actions: [{ log: "never" }] }
  b: {}
  c: {}
"#;
    assert_eq!(driven(preempt, &[]), ["0 enter:a", "100 enter:b"]);
}

#[test]
fn the_runtime_cancels_a_delayed_send_by_id_and_lets_others_outlive_their_state() {
    // Cancelled at 50 ms: no tick, ever.
    assert_eq!(
        driven(
            SEND,
            &[
                r#"{"advance": "50ms"}"#,
                r#"{"event": "stop"}"#,
                r#"{"advance": "1s"}"#
            ]
        ),
        ["0 enter:a", "50 log:stopped"]
    );
    // Not cancelled: delivered at 100 ms.
    assert_eq!(
        driven(SEND, &[]),
        ["0 enter:a", "100 log:tick t1", "100 enter:b"]
    );
    // Sent from a state left at once: still delivered, in the next state.
    let outlives = r#"
id: outlives
states:
  a:
    entry: [{ send: ping, delay: 100ms }]
    on: { leave: b }
  b:
    on:
      ping: { actions: [{ log: "ping in b" }] }
"#;
    assert_eq!(
        driven(outlives, &[r#"{"event": "leave"}"#]),
        ["0 enter:a", "0 enter:b", "100 log:ping in b"]
    );
}
