//! Transitions whose blocks only assign (taken by a plan worked out once per leaf) keep SCXML's order: exits, transition actions, entries, each observer call in its place.
//!
//! Each block appends a digit to `order`, so the context records the order the blocks ran in;
//! the host records the states exited and entered. Every machine is also run with a `log` in
//! each block, which the general procedures take: both runs must agree on everything but the
//! log lines.

use crate::support::{Run, run_binary, temporary_directory};

/// What one step (the start, or an event) did: the states it exited and entered, the context
/// and transitions taken, and the configuration it reached.
type Step = (Vec<String>, serde_json::Value, Vec<String>);

/// What a run did, step by step (log lines left out).
fn trace(yaml: &str, events: &[&str]) -> Vec<Step> {
    let mut run = Run::start(yaml);
    let mut steps = Vec::new();
    let record = |run: &mut Run| -> Step {
        let records = run
            .take_steps()
            .into_iter()
            .filter(|step| !step.starts_with("log:"))
            .collect();
        let transitions = std::mem::take(&mut run.host.transitions);
        (
            records,
            serde_json::json!({
                "order": run.context("order"),
                "transitions": transitions.len(),
                "context": run.interpreter.context_json(),
            }),
            run.configuration(),
        )
    };
    steps.push(record(&mut run));
    for event in events {
        run.send(event);
        steps.push(record(&mut run));
    }
    steps
}

/// The same machine with a log before every assignment: no plan is plain, and each step is
/// taken by the general procedures.
fn with_logs(yaml: &str) -> String {
    yaml.replace("[{ assign:", "[{ log: \"general\" }, { assign:")
}

/// Runs `yaml` both ways and says what the plain run did.
fn agreed(yaml: &str, events: &[&str]) -> Vec<Step> {
    let logged = with_logs(yaml);
    assert_ne!(logged, yaml, "the machine has assignments to log before");
    let plain = trace(yaml, events);
    assert_eq!(
        plain,
        trace(&logged, events),
        "plain and general runs differ"
    );
    plain
}

const NESTED: &str = r#"
id: plain_order
context: { order: 0 }
states:
  a:
    exit: [{ assign: { order: "order * 10 + 1" } }]
    states:
      a1:
        exit: [{ assign: { order: "order * 10 + 2" } }]
        on:
          go:
            target: b2
            actions: [{ assign: { order: "order * 10 + 3" } }]
          stay:
            actions: [{ assign: { order: "order * 10 + 9" } }]
  b:
    entry: [{ assign: { order: "order * 10 + 4" } }]
    initial: b1
    states:
      b1:
        entry: [{ assign: { order: "order * 10 + 6" } }]
      b2:
        entry: [{ assign: { order: "order * 10 + 5" } }]
        on:
          again: { target: b2, actions: [{ assign: { order: "order * 10 + 7" } }] }
          back: a
"#;

#[test]
fn exits_inner_to_outer_then_transition_actions_then_entries_outer_to_inner() {
    let steps = agreed(NESTED, &["go"]);
    let (records, context, configuration) = &steps[1];
    assert_eq!(records, &["exit:a1", "exit:a", "enter:b", "enter:b2"]);
    assert_eq!(
        context["order"], 21345,
        "exit a1, exit a, transition, enter b, enter b2"
    );
    assert_eq!(context["transitions"], 1);
    assert_eq!(configuration, &["b", "b2"]);
}

#[test]
fn a_self_transition_exits_and_reenters_and_a_targetless_one_stays() {
    let steps = agreed(NESTED, &["stay", "go", "again", "back"]);
    // Targetless: its actions only, nothing exited or entered.
    assert_eq!(steps[1].0, Vec::<String>::new());
    assert_eq!(steps[1].1["order"], 9);
    assert_eq!(steps[1].1["transitions"], 1);
    // External self-transition on b2: exits and re-enters b2 only (its domain is b).
    assert_eq!(steps[3].0, ["exit:b2", "enter:b2"]);
    assert_eq!(steps[3].1["order"], 92134575_i64);
    // From b2 to a: exits b2 and b, enters a and its first child by default.
    assert_eq!(steps[4].0, ["exit:b2", "exit:b", "enter:a", "enter:a1"]);
    assert_eq!(steps[4].2, ["a", "a1"]);
}

#[test]
fn events_the_reached_leaf_ignores_are_ignored_and_those_it_takes_are_taken() {
    // `again` is b2's alone and `go`/`stay` are a1's: after each plain step, the leaf reached
    // decides which are quiet, whatever the leaf before took.
    let steps = agreed(
        NESTED,
        &["again", "go", "stay", "again", "back", "again", "stay"],
    );
    let orders: Vec<i64> = steps
        .iter()
        .map(|(_, context, _)| context["order"].as_i64().unwrap())
        .collect();
    assert_eq!(
        orders,
        [0, 0, 21345, 21345, 2134575, 2134575, 2134575, 21345759]
    );
    assert_eq!(steps[3].0, Vec::<String>::new(), "stay is not b2's");
    assert_eq!(steps[6].0, Vec::<String>::new(), "again is not a1's");
}

#[test]
fn a_failing_assignment_raises_its_error_and_the_step_goes_on_to_take_it() {
    let yaml = r#"
id: plain_error
context: { order: 0, zero: 0 }
states:
  a:
    on:
      go:
        target: b
        actions: [{ assign: { order: "order / zero" } }]
  b:
    entry: [{ assign: { order: "order * 10 + 1" } }]
    on:
      error.execution: c
      go: a
  c:
    entry: [{ assign: { order: "order * 10 + 2" } }]
    on:
      back: a
"#;
    let steps = agreed(yaml, &["go", "go", "back", "go"]);
    assert_eq!(steps[1].0, ["exit:a", "enter:b", "exit:b", "enter:c"]);
    assert_eq!(steps[1].1["order"], 12);
    assert_eq!(steps[1].2, ["c"]);
    // c takes no `go`: the quiet events were worked out for c after the step went on.
    assert_eq!(steps[2].0, Vec::<String>::new());
    assert_eq!(steps[3].0, ["exit:c", "enter:a"]);
    assert_eq!(steps[4].1["order"], 1212);
    assert_eq!(steps[4].2, ["c"]);
}

/// The real binary, on a run that takes plain transitions (the self-transition, the one out of
/// a nested state, the targetless one) and then ends: its outcome records the order its blocks
/// ran in, the same as with a log in every block.
#[test]
fn a_run_of_the_binary_ends_with_the_order_its_blocks_ran_in() {
    let protocol = NESTED.replace(
        "          back: a\n",
        "          back: a\n          finish: done\n  done: { type: final, output: { order: \"${order}\" } }\n",
    );
    assert_ne!(protocol, NESTED);
    let plain = binary_agreed(
        "nested",
        &protocol,
        &["stay", "go", "again", "stay", "finish"],
    );
    // stay (9), go (exit a1 2, exit a 1, transition 3, enter b 4, enter b2 5), again (7, 5);
    // stay is not b2's.
    assert_eq!(plain["output"]["order"], 92134575, "{plain}");
}

/// The `finished` line of the binary run on `protocol`, which ends in `done`, the same as
/// with a log in every block.
fn binary_agreed(name: &str, protocol: &str, events: &[&str]) -> serde_json::Value {
    let plain = binary_outcome(&format!("{name}-plain"), protocol, events);
    assert_eq!(plain["state"], "done", "{plain}");
    let general = binary_outcome(&format!("{name}-general"), &with_logs(protocol), events);
    assert_eq!(general, plain);
    plain
}

/// The `finished` line of the real binary run on `protocol` with `events`.
fn binary_outcome(name: &str, protocol: &str, events: &[&str]) -> serde_json::Value {
    let events = events
        .iter()
        .map(|event| format!("{{\"event\":\"{event}\"}}\n"))
        .collect::<String>();
    let directory = temporary_directory("plain-transitions", name);
    std::fs::write(directory.join("plain.yaml"), protocol).unwrap();
    std::fs::write(directory.join("events.jsonl"), &events).unwrap();
    let arguments = [
        "plain.yaml",
        "--events",
        "events.jsonl",
        "--state-dir",
        "state",
    ];
    let (code, stdout, stderr) = run_binary(&directory, &arguments);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    crate::execution_errors::finished(&stdout)
}

/// Blocks of several assignments, some with a raw int form and some without, in one action
/// and across actions: a plain plan applies the leading int forms in place and runs the rest
/// of the block its own way, from the first assignment without one (a path, a literal that is
/// no int) or whose form gives no int when it runs (a slot holding a double, an overflow),
/// which then fails and stops its block.
const MIXED: &str = r#"
id: plain_mixed
context: { order: 0, ratio: 1.5, big: 9223372036854775806, m: {}, flag: false }
states:
  a:
    on:
      double:
        target: b
        actions: [{ assign: { order: "order * 10 + 1", ratio: "ratio * 2", big: "big + 1" } }, { assign: { order: "order * 10 + 2" } }]
      path:
        target: b
        actions: [{ assign: { order: "order * 10 + 3", "m.k": "order", flag: true } }, { assign: { order: "order * 10 + 4" } }]
  b:
    entry: [{ assign: { order: "order * 10 + 5" } }, { assign: { big: "big + 1", order: "order * 10 + 6" } }]
    on:
      error.execution: c
      back: a
  c:
    entry: [{ assign: { order: "order * 10 + 7" } }]
    on:
      back: a
"#;

#[test]
fn a_block_goes_its_own_way_from_the_first_assignment_without_a_raw_int() {
    let steps = agreed(MIXED, &["double", "back", "path"]);
    // double: order 1, then `ratio * 2` over a double fails (an int and a double do not
    // multiply): its block stops there (big and the next action's 2 are not run). b's entry:
    // 5, big + 1 (the last int), 6; b takes the error to c (7).
    let (records, context, configuration) = &steps[1];
    assert_eq!(records, &["exit:a", "enter:b", "exit:b", "enter:c"]);
    assert_eq!(context["order"], 1567, "{context}");
    assert_eq!(context["context"]["ratio"], 1.5, "{context}");
    assert_eq!(context["context"]["big"], i64::MAX, "{context}");
    assert_eq!(configuration, &["c"]);
    // path: order 3; a path is checked (no shortcut) and sees the order its block left; a
    // bool literal; the next action's 4. b's entry: 5, then big + 1 overflows: the error stops
    // that block (no 6), and b takes it to c (7).
    let (records, context, configuration) = &steps[3];
    assert_eq!(records, &["exit:a", "enter:b", "exit:b", "enter:c"]);
    assert_eq!(context["order"], 15673457, "{context}");
    assert_eq!(context["context"]["m"]["k"], 15673, "{context}");
    assert_eq!(context["context"]["flag"], true, "{context}");
    assert_eq!(configuration, &["c"]);
}

/// The same machine through the real binary agrees with its general run.
#[test]
fn a_run_of_the_binary_with_mixed_blocks_agrees_with_the_general_procedures() {
    let protocol = format!(
        "{MIXED}      finish: done\n  done: {{ type: final, output: {{ order: \"${{order}}\" }} }}\n"
    );
    let plain = binary_agreed("mixed", &protocol, &["double", "back", "path", "finish"]);
    assert_eq!(plain["output"]["order"], 15673457, "{plain}");
}

/// A machine of more than 64 states keeps its configuration in several words: a plain plan
/// changes it state by state there, and agrees with the general procedures all the same.
#[test]
fn a_machine_of_more_than_64_states_changes_its_configuration_state_by_state() {
    let fillers: String = (0..70)
        .map(|index| format!("  filler{index}: {{}}\n"))
        .collect();
    let yaml = NESTED.replace(
        "states:\n  a:\n",
        &format!("initial: a\nstates:\n{fillers}  a:\n"),
    );
    assert_ne!(yaml, NESTED);
    let steps = agreed(&yaml, &["stay", "go", "again", "back"]);
    assert_eq!(steps[2].0, ["exit:a1", "exit:a", "enter:b", "enter:b2"]);
    assert_eq!(steps[3].0, ["exit:b2", "enter:b2"]);
    assert_eq!(steps[4].0, ["exit:b2", "exit:b", "enter:a", "enter:a1"]);
    assert_eq!(steps[4].1["order"], 92134575);
    assert_eq!(steps[4].2, ["a", "a1"]);
}
