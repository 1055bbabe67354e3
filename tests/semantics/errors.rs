//! Errors in executable content and guards: `error.execution` on the internal queue, the rest
//! of the failing block skipped, a failing guard counted as false.

use crate::support::Run;

#[test]
fn a_failing_action_raises_error_execution_and_skips_the_rest_of_its_block() {
    let mut run = Run::start(
        r#"
id: failing
context: { m: {}, x: 0 }
states:
  a:
    entry: [{ log: "before" }, { assign: { x: "m.missing" } }, { log: "skipped" }]
    on:
      error.execution: { target: failed, actions: [{ log: "caught ${event.name} ${event.type}" }] }
  failed: {}
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:a",
            "log:before",
            "exit:a",
            "log:caught error.execution platform",
            "enter:failed"
        ]
    );
    assert_eq!(run.context("x"), serde_json::json!(0));
}

/// Assignments of ints, which the interpreter stores in place without building a value, fail
/// as every other action does: an overflow raises `error.execution` with CEL's message, keeps
/// the assignments before it and skips the rest; an int replaces a value of another type; a
/// comparison with an int over a text is CEL's error, and (under `errors: scxml`, W3C's rule)
/// the guard counts as false.
#[test]
fn int_assignments_and_guards_fail_like_any_other_action() {
    let mut run = Run::start(
        r#"
id: ints
context: { big: 9223372036854775806, n: "text", after: 0, count: 0 }
states:
  a:
    entry:
      - { assign: { n: 1, big: "big + 1" } }
      - { assign: { count: "count + 1", big: "big + 1", after: 1 } }
      - { assign: { after: 2 } }
    on:
      error.execution: { target: b, actions: [{ log: "${event.data.message}" }] }
  b:
    on:
      go:
        - { target: c, guard: "n < 3" }
        - { target: d, guard: "n >= 1", actions: [{ log: "n=${n}" }, { assign: { count: "count + 10" } }] }
  c: {}
  d: {}
"#,
    );
    let logs = run.take_logs();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(logs[0].to_lowercase().contains("overflow"), "{logs:?}");
    assert_eq!(
        run.context("big"),
        serde_json::json!(9223372036854775807i64)
    );
    assert_eq!(run.context("count"), serde_json::json!(1));
    assert_eq!(run.context("after"), serde_json::json!(0));
    assert_eq!(run.context("n"), serde_json::json!(1));
    run.send("go");
    assert_eq!(run.leaves(), ["c"]);

    let mut run = Run::start(
        r#"
id: text-guard
errors: scxml
context: { n: "text", count: 0 }
states:
  a:
    on:
      go:
        - { target: b, guard: "n < 3" }
        - { target: c, actions: [{ log: "n=${n}" }, { assign: { count: "count + 10" } }] }
  b: {}
  c: {}
"#,
    );
    run.send("go");
    assert_eq!(run.leaves(), ["c"]);
    // The guard's error is raised before the transition taken instead runs its actions, and
    // handled after it: in `c`, which has no transition for it, so it is only reported.
    let logs = run.take_logs();
    assert_eq!(logs[0], "n=text");
    assert!(logs[1].contains("no matching overload for '_<_' applied to '(string, int)'"));
    assert_eq!(run.context("count"), serde_json::json!(10));
}

#[test]
fn error_execution_is_caught_by_the_error_prefix() {
    let mut run = Run::start(
        r#"
id: prefix
context: { m: {} }
states:
  a:
    on:
      go: { actions: [{ log: "${m.missing}" }] }
      error: { actions: [{ log: "error: ${event.name}" }] }
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(run.take_logs(), ["error: error.execution"]);
}

#[test]
fn the_error_message_and_expression_are_in_the_event_data() {
    let mut run = Run::start(
        r#"
id: message
context: { m: {} }
states:
  a:
    on:
      go: { actions: [{ assign: { m: "m.nope + 1" } }] }
      error.execution: { actions: [{ log: "${event.data.message}" }, { log: "${event.data.expression}" }] }
"#,
    );
    run.send("go");
    let logs = run.take_logs();
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert!(
        logs[0].contains("nope"),
        "the message names the missing key: {logs:?}"
    );
    assert_eq!(logs[1], "m.nope + 1");
}

#[test]
fn only_the_failing_block_is_cut_short() {
    let mut run = Run::start(
        r#"
id: blocks
context: { m: {} }
states:
  a:
    exit: [{ log: "exit a" }, { log: "${m.bad}" }, { log: "exit a skipped" }]
    on:
      go:
        target: b
        actions: [{ log: "t1" }, { log: "${m.worse}" }, { log: "t2 skipped" }]
  b:
    entry: [{ log: "enter b" }]
    on:
      error.execution: { actions: [{ log: "error ${event.data.expression}" }] }
"#,
    );
    run.take_steps();
    run.send("go");
    // Each error is queued when it happens and handled after the microstep, in order.
    assert_eq!(
        run.take_steps(),
        [
            "log:exit a",
            "exit:a",
            "log:t1",
            "enter:b",
            "log:enter b",
            "log:error m.bad",
            "log:error m.worse"
        ]
    );
}

#[test]
fn a_failing_condition_in_if_counts_as_false_and_the_block_goes_on() {
    // SCXML 5.9.1: a condition that cannot be evaluated is false, and error.execution is queued.
    let mut run = Run::start(
        r#"
id: if
context: { m: {} }
states:
  a:
    on:
      go:
        actions:
          - { log: "first" }
          - { if: "m.flag", then: [{ log: "then" }], else: [{ log: "else" }] }
          - { log: "after if" }
      error.execution: { actions: [{ log: "error" }] }
"#,
    );
    run.send("go");
    assert_eq!(run.take_logs(), ["first", "else", "after if", "error"]);
}

#[test]
fn under_errors_strict_a_failed_guard_takes_nothing_and_its_error_is_handled_first() {
    let mut run = Run::start(
        r#"
id: guard
context: { m: {} }
states:
  a:
    exit: [{ log: "exit a" }]
    on:
      go:
        - { target: b, guard: "m.flag == true" }
        - { target: c }
      error.execution: { target: d, actions: [{ log: "guard error in a: ${event.data.expression}" }] }
  b: {}
  c: {}
  d:
    always: { target: e, guard: "true" }
  e: {}
"#,
    );
    run.take_steps();
    run.send("go");
    // No fallback to `c`: the failed guard voids the selection, and `a`'s handler goes first.
    assert_eq!(
        run.take_steps(),
        [
            "log:exit a",
            "exit:a",
            "log:guard error in a: m.flag == true",
            "enter:d",
            "exit:d",
            "enter:e"
        ]
    );
}

#[test]
fn under_errors_strict_an_error_goes_before_eventless_transitions_and_earlier_raised_events() {
    let mut run = Run::start(
        r#"
id: order
context: { n: 0 }
states:
  a:
    on:
      go:
        target: b
        actions:
          - raise: earlier
          - assign: { n: "1 / n" }
  b:
    entry: [{ log: "enter b" }]
    always: { target: eventless, guard: "n == 0" }
    on:
      error.execution: { target: handled, actions: [{ log: "handled" }] }
      earlier: { target: raised }
  eventless: {}
  raised: {}
  handled:
    on:
      earlier: { target: raised_after, actions: [{ log: "earlier, after the error" }] }
  raised_after: {}
"#,
    );
    run.take_steps();
    run.send("go");
    assert_eq!(
        run.take_steps(),
        [
            "exit:a",
            "enter:b",
            "log:enter b",
            "exit:b",
            "log:handled",
            "enter:handled",
            "exit:handled",
            "log:earlier, after the error",
            "enter:raised_after"
        ]
    );
}

#[test]
fn a_guard_that_fails_counts_as_false_and_raises_error_execution() {
    let mut run = Run::start(
        r#"
id: guard
errors: scxml
context: { m: {} }
states:
  a:
    on:
      go:
        - { target: b, guard: "m.flag == true" }
        - { target: c }
  b: {}
  c:
    on:
      error.execution: { actions: [{ log: "guard error in c: ${event.data.expression}" }] }
"#,
    );
    run.take_steps();
    run.send("go");
    // The error is queued during selection; the transition to c is taken first.
    assert_eq!(
        run.take_steps(),
        ["exit:a", "enter:c", "log:guard error in c: m.flag == true"]
    );
}

#[test]
fn a_guard_that_does_not_give_a_bool_is_an_error() {
    let mut run = Run::start(
        r#"
id: not-bool
context: { n: 1 }
states:
  a:
    on:
      go: { target: b, guard: "n + 1" }
      error.execution: { actions: [{ log: "not a bool" }] }
  b: {}
"#,
    );
    run.send("go");
    assert_eq!(run.take_logs(), ["not a bool"]);
    assert_eq!(run.leaves(), ["a"]);
}

#[test]
fn a_failing_eventless_guard_is_false_and_its_error_is_handled_once_stable() {
    let mut run = Run::start(
        r#"
id: eventless-guard
context: { m: {}, errors: 0 }
states:
  a:
    always: { target: b, guard: "m.ready" }
    on:
      error.execution: { target: c, actions: [{ assign: { errors: "errors + 1" } }] }
  b: {}
  c: {}
"#,
    );
    assert_eq!(run.take_steps(), ["enter:a", "exit:a", "enter:c"]);
    assert_eq!(run.context("errors"), serde_json::json!(1));
}

#[test]
fn a_failing_delay_expression_raises_error_execution_and_arms_no_timer() {
    let mut run = Run::start(
        r#"
id: delay
context: { m: {} }
states:
  a:
    after:
      - { delay: "m.wait", target: b }
    on:
      error.execution: { actions: [{ log: "bad delay" }] }
  b: {}
"#,
    );
    assert_eq!(run.take_logs(), ["bad delay"]);
    assert!(run.host.timers.is_empty());
}

#[test]
fn a_failing_output_raises_error_execution_before_the_done_event() {
    let mut run = Run::start(
        r#"
id: output
context: { m: {} }
states:
  job:
    on:
      error.execution: { actions: [{ log: "error" }] }
      done.state.job: { target: next, actions: [{ log: "done ${event.data}" }] }
    states:
      fin:
        type: final
        output: { x: "${m.nope}" }
  next: {}
"#,
    );
    assert_eq!(run.take_logs(), ["error", "done null"]);
}

#[test]
fn an_unhandled_error_is_reported_even_when_the_run_ends_first() {
    // W3C's order (`errors: scxml`): the eventless transition ends the run before the error is
    // processed, and the error is still reported.
    let protocol = r#"
id: lost-error
ERRORS
states:
  a:
    entry: [{ log: "${1 / 0}" }]
    always: done
  done: { type: final }
"#;
    let mut run = Run::start(&protocol.replace("ERRORS", "errors: scxml"));
    let logs = run.take_logs();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(
        logs[0].starts_with("error.execution was not handled by any transition: Division by zero"),
        "{logs:?}"
    );
    let outcome = run.interpreter.outcome().expect("ended");
    assert_eq!(outcome.exit_code, 0);
    // By default the error goes first: the run fails in `a` and never reaches `done`.
    let mut run = Run::start(&protocol.replace("ERRORS", ""));
    let logs = run.take_logs();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let outcome = run.interpreter.outcome().expect("ended");
    assert_eq!((outcome.final_state, outcome.exit_code), (None, 76));
    let failure = outcome.failure.as_ref().expect("a failure");
    assert_eq!(
        failure
            .states
            .iter()
            .map(|state| &**state)
            .collect::<Vec<_>>(),
        ["a"]
    );
}

#[test]
fn an_external_error_event_no_transition_takes_is_reported_and_others_are_discarded_quietly() {
    // No parallel state and no eventless transition: the events the active leaf ignores are
    // discarded without a macrostep, which must not swallow an error event's warning, and
    // must follow the leaf as it changes.
    let mut run = Run::start(
        r#"
id: quiet-leaf
states:
  a:
    on: { go: b }
  b:
    on: { back: a, error.tool: a }
"#,
    );
    run.send("back").send("error.tool.timeout");
    let logs = run.take_logs();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(
        logs[0].starts_with("error.tool.timeout was not handled by any transition"),
        "{logs:?}"
    );
    assert_eq!(run.leaves(), ["a"]);
    run.send("go").send("go").send("error.tool.timeout");
    assert_eq!(run.take_logs(), Vec::<String>::new());
    assert_eq!(run.leaves(), ["a"]);
    run.send("go").send("back");
    assert_eq!(run.leaves(), ["a"]);
}
