//! Eventless (`always`) transitions and the internal queue: the inner loop of `mainEventLoop`.

use protocol_run::base::event::{Event, Origin};
use protocol_run::base::value::Value;
use protocol_run::runtime::run::algorithm::{Limits, RunError};
use protocol_run::runtime::run::{Interpreter, RecordingHost};

use crate::support::{self, Run};

#[test]
fn eventless_transitions_are_taken_after_entry_until_the_configuration_is_stable() {
    let mut run = Run::start(
        r#"
id: chain
states:
  a:
    entry: [{ log: "enter a" }]
    always: { target: b, actions: [{ log: "a->b" }] }
  b:
    always: c
  c: {}
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:a",
            "log:enter a",
            "exit:a",
            "log:a->b",
            "enter:b",
            "exit:b",
            "enter:c"
        ]
    );
}

#[test]
fn guards_are_reevaluated_after_every_microstep() {
    let mut run = Run::start(
        r#"
id: count
context: { n: 0 }
states:
  s:
    entry: [{ log: "s ${n}" }]
    always:
      - { target: s, guard: "n < 3", actions: [{ assign: { n: "n + 1" } }] }
      - { target: done, guard: "n >= 3" }
  done: {}
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:s",
            "log:s 0",
            "exit:s",
            "enter:s",
            "log:s 1",
            "exit:s",
            "enter:s",
            "log:s 2",
            "exit:s",
            "enter:s",
            "log:s 3",
            "exit:s",
            "enter:done",
        ]
    );
}

#[test]
fn targetless_eventless_transition_repeats_while_its_guard_holds() {
    let mut run = Run::start(
        r#"
id: loop
context: { n: 0 }
states:
  s:
    on:
      again: { actions: [{ assign: { n: 0 } }] }
    always: { guard: "n < 3", actions: [{ assign: { n: "n + 1" } }, { log: "n=${n}" }] }
"#,
    );
    assert_eq!(
        run.take_steps(),
        ["enter:s", "log:n=1", "log:n=2", "log:n=3"]
    );
    run.send("again");
    assert_eq!(run.take_steps(), ["log:n=1", "log:n=2", "log:n=3"]);
}

#[test]
fn eventless_transitions_come_before_internal_events() {
    let mut run = Run::start(
        r#"
id: first
states:
  a:
    entry: [{ raise: ev }]
    always: b
    on:
      ev: { actions: [{ log: "ev in a" }] }
  b:
    always: c
    on:
      ev: { actions: [{ log: "ev in b" }] }
  c:
    on:
      ev: { actions: [{ log: "ev in c" }] }
"#,
    );
    // The raise during a's entry waits until no eventless transition is enabled.
    assert_eq!(
        run.take_steps(),
        [
            "enter:a",
            "exit:a",
            "enter:b",
            "exit:b",
            "enter:c",
            "log:ev in c"
        ]
    );
}

#[test]
fn eventless_transitions_are_checked_again_after_each_internal_event() {
    let mut run = Run::start(
        r#"
id: between
context: { ready: false }
states:
  a:
    entry: [{ raise: e1 }, { raise: e2 }]
    always: { target: b, guard: "ready" }
    on:
      e1: { actions: [{ assign: { ready: true } }, { log: "e1" }] }
      e2: { actions: [{ log: "e2 in a" }] }
  b:
    on:
      e2: { actions: [{ log: "e2 in b" }] }
"#,
    );
    assert_eq!(
        run.take_steps(),
        ["enter:a", "log:e1", "exit:a", "enter:b", "log:e2 in b"]
    );
}

#[test]
fn internal_events_are_handled_in_fifo_order_before_the_next_external_event() {
    let mut run = Run::start(
        r#"
id: fifo
states:
  a:
    on:
      go: { actions: [{ send: external1 }, { raise: x }, { raise: y }, { log: "go" }] }
      x: { actions: [{ log: "x" }, { raise: z }] }
      y: { actions: [{ log: "y" }] }
      z: { actions: [{ log: "z" }] }
      external1: { actions: [{ log: "external1" }] }
      external2: { actions: [{ log: "external2" }] }
"#,
    );
    run.take_steps();
    // `send` goes to the external queue: it is handled after every internal event.
    run.send("go").send("external2");
    assert_eq!(
        run.take_logs(),
        ["go", "x", "y", "z", "external1", "external2"]
    );
}

#[test]
fn raised_events_carry_their_data_and_origin() {
    let mut run = Run::start(
        r#"
id: data
context: { n: 4 }
states:
  a:
    entry: [{ raise: ev, data: { double: "${n * 2}" } }]
    on:
      ev: { actions: [{ log: "${event.name} ${event.type} ${event.data.double}" }] }
"#,
    );
    assert_eq!(run.take_logs(), ["ev internal 8"]);
}

/// The limit and the states named by a livelock error.
#[allow(irrefutable_let_patterns)]
fn livelock(error: &RunError) -> (usize, &str) {
    let RunError::MicrostepLimit { microsteps, states } = error else {
        panic!("expected the microstep limit, got: {error}");
    };
    (*microsteps, states)
}

const LOOP: &str = r#"
id: runaway
states:
  idle:
    on: { go: ping }
  ping:
    always: pong
  pong:
    always: ping
"#;

#[test]
fn an_eventless_loop_at_start_is_stopped_by_the_microstep_limit() {
    let machine = support::machine(&LOOP.replace("  idle:\n    on: { go: ping }\n", ""));
    let mut interpreter =
        Interpreter::new(machine.clone(), machine.bind_inputs(&[]).expect("inputs")).with_limits(
            Limits {
                max_microsteps: 50,
                ..Limits::default()
            },
        );
    let mut host = RecordingHost::for_machine(machine);
    let error = interpreter.start(&mut host).expect_err("a livelock");
    let (microsteps, states) = livelock(&error);
    assert_eq!(microsteps, 50);
    assert_eq!(states, "ping, pong");
    let message = error.to_string();
    assert!(message.contains("ping, pong"), "{message}");
    assert!(!interpreter.is_running());
}

#[test]
fn an_eventless_loop_after_an_event_is_stopped_and_names_the_looping_states() {
    let mut run = Run::start(LOOP);
    assert_eq!(run.leaves(), ["idle"]);
    let event = Event::named(&run.machine, "go", Value::Null, Origin::External);
    let error = run
        .interpreter
        .handle(&event, &mut run.host)
        .expect_err("a livelock");
    let (microsteps, states) = livelock(&error);
    assert_eq!(microsteps, Limits::default().max_microsteps);
    assert_eq!(states, "ping, pong");
    assert!(!run.interpreter.is_running());
}

#[test]
fn a_targetless_eventless_loop_names_the_state_that_loops() {
    let yaml = r#"
id: targetless-runaway
states:
  outer:
    states:
      spin:
        always: { actions: [{ log: "again" }] }
"#;
    let machine = support::machine(yaml);
    let mut interpreter =
        Interpreter::new(machine.clone(), machine.bind_inputs(&[]).expect("inputs")).with_limits(
            Limits {
                max_microsteps: 20,
                ..Limits::default()
            },
        );
    let mut host = RecordingHost::for_machine(machine);
    let error = interpreter.start(&mut host).expect_err("a livelock");
    let (_, states) = livelock(&error);
    assert_eq!(states, "spin");
}

#[test]
fn eventless_transitions_see_the_last_event_processed() {
    // SCXML binds `_event` when an event is processed and keeps it until the next one, so the
    // eventless transitions that follow an event still see it.
    let mut run = Run::start(
        r#"
id: last-event
states:
  a:
    on: { go: b }
  b:
    entry: [{ log: "enter b ${event.name}" }]
    always: { target: c, guard: "event.data.ok", actions: [{ log: "always ${event.name}" }] }
  c:
    entry: [{ log: "enter c ${event.name} ${event.data.ok}" }]
"#,
    );
    run.send_with("go", serde_json::json!({ "ok": true }));
    assert_eq!(
        run.take_logs(),
        ["enter b go", "always go", "enter c go true"]
    );
}

#[test]
fn eventless_transitions_after_an_internal_event_see_that_event() {
    let run = Run::start(
        r#"
id: last-internal
states:
  a:
    entry: [{ raise: ping, data: { n: 1 } }]
    on:
      ping: { target: b }
  b:
    always: { target: c, guard: "event.name == 'ping' && event.data.n == 1" }
  c: {}
"#,
    );
    assert_eq!(run.leaves(), ["c"]);
}

#[test]
fn a_failing_eventless_guard_without_a_handler_is_stopped_as_a_loop() {
    // Under `errors: scxml`, each eventless selection raises `error.execution`, which enables
    // nothing, and the next selection raises it again: internal events that enable nothing count
    // towards the limit. (By default the first such error fails the run: `execution_errors`.)
    let machine = support::machine(
        r#"
id: error-loop
errors: scxml
context: { m: {} }
states:
  waiting:
    always: { target: done, guard: "m.ready" }
  done: {}
"#,
    );
    let mut interpreter =
        Interpreter::new(machine.clone(), machine.bind_inputs(&[]).expect("inputs")).with_limits(
            Limits {
                max_microsteps: 30,
                ..Limits::default()
            },
        );
    let mut host = RecordingHost::for_machine(machine);
    let error = interpreter.start(&mut host).expect_err("a livelock");
    let (microsteps, states) = livelock(&error);
    assert_eq!(microsteps, 30);
    assert_eq!(states, "waiting");
}

#[test]
fn a_raise_loop_is_stopped_by_the_limit() {
    let machine = support::machine(
        r#"
id: raise-loop
states:
  idle:
    on: { start: echo }
  echo:
    entry: [{ raise: ping }]
    on:
      ping: { actions: [{ raise: ping }] }
"#,
    );
    let mut interpreter =
        Interpreter::new(machine.clone(), machine.bind_inputs(&[]).expect("inputs")).with_limits(
            Limits {
                max_microsteps: 40,
                ..Limits::default()
            },
        );
    let mut host = RecordingHost::for_machine(machine.clone());
    interpreter.start(&mut host).expect("idle is stable");
    let start = Event::named(&machine, "start", Value::Null, Origin::External);
    let error = interpreter
        .handle(&start, &mut host)
        .expect_err("a livelock");
    let (_, states) = livelock(&error);
    assert_eq!(states, "echo");
    // Once stopped, the instance takes no more events.
    assert!(interpreter.handle(&start, &mut host).is_ok());
    assert!(!interpreter.is_running());
}

#[test]
fn a_long_but_finite_eventless_chain_is_not_a_loop() {
    let machine = support::machine(
        r#"
id: finite
context: { n: 0 }
states:
  counting:
    always: { guard: "n < 25", actions: [{ assign: { n: "n + 1" } }] }
"#,
    );
    let mut interpreter =
        Interpreter::new(machine.clone(), machine.bind_inputs(&[]).expect("inputs")).with_limits(
            Limits {
                max_microsteps: 25,
                ..Limits::default()
            },
        );
    let mut host = RecordingHost::for_machine(machine);
    interpreter
        .start(&mut host)
        .expect("exactly the limit is allowed");
    assert_eq!(
        interpreter.context_value("n").map(|n| n.to_json()),
        Some(serde_json::json!(25))
    );
}
