//! Time values: timestamps and durations in expressions, deadlines (`until:`) on the virtual clock and across a resume, located misuse, overflow.

use crate::support::{Run, errors};

/// 2026-01-01T09:00:00Z, where these runs' clocks start.
const NINE: u64 = 1_767_258_000_000;

#[test]
fn arithmetic_comparison_and_formatting_on_the_run_clock() {
    let mut run = Run::start_at(
        r#"
id: arithmetic
inputs:
  patience: { type: duration, default: 2s }
context: { started: null, deadline: null, left: null, late: null }
states:
  a:
    entry:
      - assign: { started: now(), deadline: "now() + duration('1h30m')" }
      - assign: { left: deadline - now(), late: now() > deadline }
      - log: "started ${started}, deadline ${deadline}, left ${left} = ${left.getSeconds()} s, late ${late}"
      - log: "${duration('1m') * 3 + duration('500ms')} ${deadline.getHours()}:${deadline.getMinutes()} ${string(deadline)}"
      - log: "patience until ${now() + duration('1ms') * patience}"
    on:
      later:
        actions:
          - log: "${now() - started} after the start; ${timestamp('2026-01-01T10:00:00+01:00') == started}"
          - log: "${duration('1d') > now() - started} ${started + duration('1d') < now()}"
"#,
        NINE,
    );
    assert_eq!(
        run.take_logs(),
        [
            "started 2026-01-01T09:00:00.000Z, deadline 2026-01-01T10:30:00.000Z, left 1h30m = 5400 s, late false",
            "3m0.5s 10:30 2026-01-01T10:30:00Z",
            "patience until 2026-01-01T09:00:02.000Z",
        ]
    );
    // Context holds the values; JSON shows them as text.
    assert_eq!(run.context("started"), "2026-01-01T09:00:00.000Z");
    assert_eq!(run.context("left"), "1h30m");
    run.advance(90_250).send("later");
    assert_eq!(
        run.take_logs(),
        ["1m30.25s after the start; true", "true false"]
    );
}

/// An `until` deadline fires at its instant, before a later `delay` timer of the same state,
/// which the exit cancels; the transition runs between the exit and the entry.
#[test]
fn a_deadline_fires_at_its_virtual_instant_in_order() {
    let mut run = Run::start_at(
        r#"
id: deadline
context: { started: null }
states:
  waiting:
    entry: [{ assign: { started: now() } }, { log: "waiting from ${started}" }]
    exit: [{ log: "exit waiting at ${now()}" }]
    after:
      - { delay: 2m, target: late }
      - until: "started + duration('90s')"
        target: due
        actions: [{ log: "deadline ${started + duration('90s')} reached" }]
  due:
    entry: [{ log: "due at ${now()}" }]
    after:
      - { delay: 5m, target: late }
  late: { type: final }
"#,
        NINE,
    );
    assert_eq!(
        run.take_steps(),
        ["enter:waiting", "log:waiting from 2026-01-01T09:00:00.000Z"]
    );
    run.advance(89_999);
    assert_eq!(run.take_steps(), Vec::<String>::new());
    run.advance(1);
    assert_eq!(
        run.take_steps(),
        [
            "log:exit waiting at 2026-01-01T09:01:30.000Z",
            "exit:waiting",
            "log:deadline 2026-01-01T09:01:30.000Z reached",
            "enter:due",
            "log:due at 2026-01-01T09:01:30.000Z",
        ]
    );
    // The 2 m timer went with `waiting`; only `due`'s own 5 m is left.
    run.advance(30_000 + 60_000);
    assert_eq!(run.leaves(), ["due"]);
    run.advance(5 * 60_000);
    assert_eq!(run.leaves(), Vec::<String>::new());
}

/// A deadline already past fires at once; a state `timeout` and a `send` delay that give a
/// timestamp wait until it too.
#[test]
fn past_deadlines_fire_at_once_and_timeouts_and_sends_take_timestamps() {
    let mut run = Run::start_at(
        r#"
id: past
states:
  first:
    after:
      - { until: "timestamp('2000-01-01T00:00:00Z')", target: second }
  second:
    timeout: "timestamp('2026-01-01T09:05:00Z')"
    on:
      timeout.second: third
  third:
    entry:
      - log: "third at ${now()}"
      - send: ping
        delay: "now() + duration('1h')"
    on:
      ping: { target: fourth, actions: [{ log: "ping at ${now()}" }] }
  fourth:
    timeout: { until: "timestamp('2026-01-01T10:05:00.000001Z')" }
    on:
      timeout: { target: done, actions: [{ log: "timed out at ${now()}" }] }
  done: { type: final }
"#,
        NINE,
    );
    assert_eq!(run.leaves(), ["second"]);
    run.advance(5 * 60_000 - 1);
    assert_eq!(run.leaves(), ["second"]);
    run.advance(1);
    run.advance(60 * 60_000);
    // A deadline a microsecond past a millisecond fires at the next one, never before it.
    run.advance(1);
    assert_eq!(
        run.take_logs(),
        [
            "third at 2026-01-01T09:05:00.000Z",
            "ping at 2026-01-01T10:05:00.000Z",
            "timed out at 2026-01-01T10:05:00.001Z",
        ]
    );
    assert_eq!(run.leaves(), Vec::<String>::new());
}

/// An effect's `timeout` giving a timestamp limits the attempt to the time left until it.
#[test]
fn an_effect_timeout_may_be_a_deadline() {
    let run = Run::start_at(
        r#"
id: effect-deadline
states:
  a:
    entry:
      - exec: [sh, -c, "sleep 100"]
        id: slow
        timeout: "timestamp('2026-01-01T09:05:00Z')"
"#,
        NINE,
    );
    assert_eq!(
        run.host.effects[0].plan.timeout,
        Some(std::time::Duration::from_secs(300))
    );
}

#[test]
fn misuse_is_a_located_load_error() {
    let rendered = errors(
        r#"
id: misuse
context: { started: null }
states:
  a:
    entry:
      - assign: { started: now() + 5 }
      - log: "${now() - duration('1s') > duration('1m')}"
    after:
      - { until: 30s, target: a }
      - { until: "'2026-01-01T09:00:00Z'", target: a }
      - { until: "now()", delay: 1s, target: a }
      - { target: a }
    on:
      go: { until: "now()", target: a }
  b:
    timeout: { until: 15m }
"#,
    );
    for (location, says) in [
        (
            "test.yaml:7:34",
            "`+` between a timestamp and a number fails when it runs",
        ),
        (
            "test.yaml:7:34",
            "write `duration('5s')` for 5 seconds (e.g. `now() + duration('5s')`)",
        ),
        ("test.yaml:8:40", "a timestamp and a duration never compare"),
        (
            "test.yaml:10:18",
            "`until` takes a timestamp expression, not `30s`",
        ),
        ("test.yaml:10:18", "write `delay: 30s`"),
        (
            "test.yaml:11:18",
            "write `until: timestamp('2026-01-01T09:00:00Z')`",
        ),
        ("test.yaml:12:11", "has a `delay` or an `until`, not both"),
        ("test.yaml:13:9", "needs a `delay` or an `until`"),
        (
            "test.yaml:15:13",
            "`until` belongs to transitions under `after`",
        ),
        (
            "test.yaml:17:23",
            "`until` takes a timestamp expression, not `15m`",
        ),
    ] {
        let found = rendered
            .split("error")
            .any(|error| error.contains(location) && error.contains(says));
        assert!(found, "{location} {says}:\n{rendered}");
    }
}

/// What only the run can tell (a variable's type, a range) is `error.execution`, with the
/// message; the run goes on.
#[test]
fn a_bad_deadline_or_an_overflow_at_run_time_is_error_execution() {
    let mut run = Run::start_at(
        r#"
id: runtime
context: { span: null, late: null, count: 2000 }
states:
  a:
    entry:
      - assign: { span: "duration('5s')" }
    after:
      - { until: span, target: b }
    on:
      error.execution: { target: b, actions: [{ log: "${event.data.message}" }] }
  b:
    entry:
      - assign: { late: "timestamp('9999-12-31T23:59:59Z') + duration('1s')" }
    on:
      error.execution: { target: c, actions: [{ log: "${event.data.message}" }] }
  c:
    entry:
      - assign: { late: "timestamp('10000-01-01T00:00:00Z')" }
    on:
      error.execution: { target: d, actions: [{ log: "${event.data.message}" }] }
  d:
    entry:
      - assign: { span: "duration('200000d')" }
    on:
      error.execution: { target: e, actions: [{ log: "${event.data.message}" }] }
  e:
    entry:
      - assign: { late: "now() + count" }
    on:
      error.execution: { target: f, actions: [{ log: "${event.data.message}" }] }
  f: { type: final }
"#,
        NINE,
    );
    let logs = run.take_logs();
    assert_eq!(logs.len(), 5, "{logs:#?}");
    for (log, says) in logs.iter().zip([
        "`until` takes a timestamp (e.g. `timestamp('2026-01-01T09:00:00Z')` or `started + duration('1h')`), not duration `5s`",
        "`9999-12-31T23:59:59.000Z + 1s` overflows: timestamps run from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z",
        "not an RFC 3339 timestamp",
        "longer than a duration can be: about 292 years",
        "timestamp + int is not defined: a number has no unit; write `duration('1ms') * n` for `n` milliseconds (a `duration` input is milliseconds)",
    ]) {
        assert!(log.contains(says), "{log} lacks {says}");
    }
    assert_eq!(run.leaves(), Vec::<String>::new());
}

/// A run stopped while waiting for a deadline and a delayed send that carries a timestamp,
/// resumed with `--timers restart` (which re-arms a relative timer with its whole delay): both
/// keep their instants, in order, and the context's and the send's timestamps come back
/// timestamps.
#[test]
fn a_resumed_run_keeps_an_absolute_deadline() {
    use crate::durability::{command, finish, scratch, spawn_ready, terminate};
    use protocol_run::store::{SqliteStore, Store};
    let directory = scratch("time-deadline");
    std::fs::write(
        directory.join("deadline.yaml"),
        r#"
id: deadline-resume
context: { started: null, pinged: false }
states:
  waiting:
    entry:
      - assign: { started: now() }
      - send: ping
        delay: "started + duration('1s')"
        data: { at: "${started}" }
      - log: "entered waiting"
    on:
      ping: { actions: [{ assign: { pinged: "event.data.at == started && now() - event.data.at >= duration('1s')" } }] }
    after:
      - { until: "started + duration('1500ms')", target: due }
  due:
    type: final
    output: { started: "${started}", pinged: "${pinged}", waited: "${now() - started >= duration('1500ms')}" }
"#,
    )
    .unwrap();
    let begun = std::time::Instant::now();
    let (child, lines) = spawn_ready(
        &directory,
        &["deadline.yaml", "--virtual-time", "--events", "-"],
        "entered waiting",
    );
    let (code, stderr) = terminate(child, lines);
    assert_eq!(code, Some(75), "{stderr}");
    let (code, stdout, stderr) = finish(&mut command(&directory, &["status", "--json"]));
    assert_eq!(code, 0, "{stderr}");
    let status: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let timers = &status["state"]["timers"];
    assert_eq!(timers[0]["event"], "ping", "{status}");
    assert_eq!(timers[1]["event"], "after.waiting.0", "{status}");
    assert_eq!(timers[1]["deadline"], true, "{status}");
    // `status` shows the text; the store keeps the value tagged as a timestamp.
    let started = status["state"]["context"]["started"]
        .as_str()
        .unwrap_or_else(|| panic!("{status}"))
        .to_string();
    let store = SqliteStore::open(directory.join("state")).unwrap();
    let run = store.list_runs().unwrap().remove(0);
    let snapshot = store.latest_snapshot(&run.id).unwrap().unwrap().snapshot;
    assert_eq!(
        snapshot.context["started"],
        serde_json::json!({ "$timestamp": started })
    );
    assert!(snapshot.timers.iter().all(|timer| timer.absolute));
    assert_eq!(
        snapshot.timers[0].data,
        serde_json::json!({ "at": { "$timestamp": started } })
    );
    std::thread::sleep(std::time::Duration::from_millis(1700).saturating_sub(begun.elapsed()));
    let (code, stdout, stderr) = finish(&mut command(
        &directory,
        &["deadline.yaml", "--resume", "--timers", "restart"],
    ));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!(
            r#""output":{{"started":"{started}","pinged":true,"waited":true}}"#
        )),
        "{stdout}"
    );
    // Passed while the engine was down: at once, not a whole second after the resume (by the
    // engine's own clock, which no process start adds to).
    let after = crate::durability::fired_after_resume(&directory, "after.waiting.0");
    assert!(
        after < 700,
        "the deadline fired {after} ms after the resume"
    );
}
