//! Final states: `done.state.<parent>` with the final's output as data, and the end of the run
//! at a top-level final state (`exitInterpreter`).

use serde_json::json;

use crate::support::Run;

#[test]
fn entering_a_final_child_raises_done_state_of_the_parent_with_the_output_as_data() {
    let mut run = Run::start(
        r#"
id: done
states:
  job:
    on:
      done.state.job:
        - { target: wrong, guard: "event.data.x != 3" }
        - { target: next, actions: [{ log: "done ${event.data.x} ${event.data.label}" }] }
    states:
      work: { on: { finish: fin } }
      fin:
        type: final
        entry: [{ log: "enter fin" }]
        exit: [{ log: "exit fin" }]
        output: { x: "${1 + 2}", label: "n=${1 + 1}" }
  next: {}
  wrong: {}
"#,
    );
    run.take_steps();
    run.send("finish");
    assert_eq!(
        run.take_steps(),
        [
            "exit:work",
            "enter:fin",
            "log:enter fin",
            "log:exit fin",
            "exit:fin",
            "exit:job",
            "log:done 3 n=2",
            "enter:next",
        ]
    );
}

#[test]
fn events_raised_on_entering_the_final_state_come_before_the_done_event() {
    let mut run = Run::start(
        r#"
id: order
states:
  job:
    on:
      ping: { actions: [{ log: "ping" }] }
      done.state.job: { actions: [{ log: "done" }] }
    states:
      work: { on: { finish: fin } }
      fin:
        type: final
        entry: [{ raise: ping }]
"#,
    );
    run.take_steps();
    run.send("finish");
    assert_eq!(
        run.take_steps(),
        ["exit:work", "enter:fin", "log:ping", "log:done"]
    );
}

#[test]
fn only_the_direct_parent_of_the_final_state_is_done() {
    let mut run = Run::start(
        r#"
id: nested
states:
  outer:
    on:
      "done.state": { actions: [{ log: "${event.name}" }] }
    states:
      inner:
        states:
          i1: { on: { finish: ifin } }
          ifin: { type: final }
      sibling: {}
"#,
    );
    run.take_steps();
    run.send("finish");
    assert_eq!(
        run.take_steps(),
        ["exit:i1", "enter:ifin", "log:done.state.inner"]
    );
}

#[test]
fn a_compound_state_whose_initial_child_is_final_is_done_at_once() {
    let mut run = Run::start(
        r#"
id: instant
states:
  job:
    on:
      done.state.job: { target: next, actions: [{ log: "done ${event.type}" }] }
    initial: fin
    states:
      work: {}
      fin: { type: final }
  next: {}
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:job",
            "enter:fin",
            "exit:fin",
            "exit:job",
            "log:done platform",
            "enter:next"
        ]
    );
}

const TOP_LEVEL: &str = r#"
id: top
context: { count: 0 }
states:
  working:
    exit: [{ log: "exit working" }]
    on:
      tick: { actions: [{ assign: { count: "count + 1" } }] }
      finish: { target: end, actions: [{ log: "finishing" }] }
  end:
    type: final
    exit_code: 3
    entry: [{ assign: { count: "count * 10" } }, { log: "enter end" }]
    exit: [{ log: "exit end ${count}" }]
    output: { count: "${count}", text: "count is ${count}" }
"#;

#[test]
fn top_level_final_state_ends_the_run_with_its_exit_code_and_output() {
    let mut run = Run::start(TOP_LEVEL);
    run.send("tick").send("tick");
    assert!(run.interpreter.is_running());
    assert!(run.interpreter.outcome().is_none());
    run.take_steps();
    run.send("finish");
    // The run's end exits what is still active (exitInterpreter), after entering the final.
    assert_eq!(
        run.take_steps(),
        [
            "log:exit working",
            "exit:working",
            "log:finishing",
            "enter:end",
            "log:enter end",
            "log:exit end 20",
            "exit:end"
        ]
    );
    assert!(!run.interpreter.is_running());
    let outcome = run.interpreter.outcome().expect("an outcome").clone();
    assert_eq!(&*run.machine.state(outcome.final_state.unwrap()).id, "end");
    assert_eq!(outcome.exit_code, 3);
    assert_eq!(
        outcome.output.to_json(),
        json!({ "count": 20, "text": "count is 20" })
    );
    assert!(run.configuration().is_empty());
}

#[test]
fn events_after_the_end_are_ignored() {
    let mut run = Run::start(TOP_LEVEL);
    run.send("finish");
    run.take_steps();
    run.send("tick").send("finish");
    assert!(run.take_steps().is_empty());
    assert_eq!(run.context("count"), json!(0));
}

#[test]
fn a_final_initial_state_ends_the_run_at_start_with_exit_code_zero_by_default() {
    let run = Run::start(
        r#"
id: instant
initial: end
states:
  never: {}
  end: { type: final }
"#,
    );
    let outcome = run.interpreter.outcome().expect("an outcome");
    assert_eq!(outcome.exit_code, 0);
    assert_eq!(outcome.output.to_json(), json!(null));
    assert!(!run.interpreter.is_running());
}

#[test]
fn the_internal_queue_is_discarded_when_the_run_ends() {
    let mut run = Run::start(
        r#"
id: discard
states:
  a:
    on:
      go: { target: end, actions: [{ raise: later }] }
  end:
    type: final
    entry: [{ raise: also_later }]
"#,
    );
    run.send("go");
    assert!(!run.interpreter.is_running());
    assert_eq!(
        run.take_steps(),
        ["enter:a", "exit:a", "enter:end", "exit:end"]
    );
}
