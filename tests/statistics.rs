//! `stats` figures that mean what their labels say, each worked out by hand from the telemetry of a real run: time in compound states, retried calls (a second attempt made) and how they ended, cancelled ones included, every attempt that timed out, and no "gave up" line for a failure that was never retried.

use serde_json::Value;

use crate::support::{read_telemetry, run_binary, temporary_directory};

/// `working` (compound) runs three calls with retry policies on timeouts: `quick` succeeds at
/// once, `fetch` times out once then succeeds, `probe` times out once and is cancelled during
/// its second attempt when `probing` gives up after 15 s. Then `ending` runs `plain`, whose
/// failure (exit 2) its policy does not retry.
const PROTOCOL: &str = r#"
id: stats-demo
permissions: { exec: [sh], shell: true, write: [], read: [], env: [] }
states:
  working:
    initial: quick
    states:
      quick:
        entry:
          - exec: [sh, -c, "true"]
            id: quick
            timeout: 10s
            retry: [{ error_equals: [error.exec.timeout], max_attempts: 3, interval: 1s, backoff_rate: 1 }]
        on:
          done.exec.quick: fetching
      fetching:
        entry:
          - exec: [sh, -c, "true"]
            id: fetch
            timeout: 10s
            retry: [{ error_equals: [error.exec.timeout], max_attempts: 3, interval: 1s, backoff_rate: 1 }]
        on:
          done.exec.fetch: probing
      probing:
        entry:
          - exec: [sh, -c, "true"]
            id: probe
            timeout: 10s
            retry: [{ error_equals: [error.exec.timeout], max_attempts: 5, interval: 1s, backoff_rate: 1 }]
        after:
          - delay: 15s
            target: ending
  ending:
    entry:
      - exec: [sh, -c, "true"]
        id: plain
        timeout: 10s
        retry: [{ error_equals: [error.exec.timeout], max_attempts: 3, interval: 1s }]
    on:
      done.exec.plain: done
      error.exec: failed
  done: { type: final }
  failed: { type: final, exit_code: 1 }
"#;

/// Milliseconds since the epoch of an entry's time (`…T19:05:23.349Z`), read by hand.
fn milliseconds(entry: &Value) -> u64 {
    let text = entry["time"].as_str().unwrap();
    let clock: Vec<u64> = text[11..23]
        .split([':', '.'])
        .map(|part| part.parse().unwrap())
        .collect();
    ((clock[0] * 60 + clock[1]) * 60 + clock[2]) * 1000 + clock[3]
}

/// The time of the transition that left `source`.
fn left(telemetry: &[Value], source: &str) -> u64 {
    milliseconds(
        telemetry
            .iter()
            .find(|entry| entry["kind"] == "transition" && entry["source"] == source)
            .unwrap_or_else(|| panic!("no transition from {source}")),
    )
}

fn has_tag(entry: &Value, tag: &str) -> bool {
    entry["tags"]
        .as_array()
        .is_some_and(|tags| tags.iter().any(|other| other == tag))
}

#[test]
fn stats_figures_match_the_runs_telemetry() {
    let directory = temporary_directory("statistics", "figures");
    std::fs::write(directory.join("stats.yaml"), PROTOCOL).unwrap();
    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "stats.yaml",
            "--virtual-time",
            "--state-dir",
            "state",
            "--run-id",
            "one",
            "--mock",
            "quick=ok",
            "--mock",
            "fetch=timeout,ok",
            "--mock",
            "probe=timeout,timeout",
            "--mock",
            "plain=exit:2",
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    let telemetry = read_telemetry(&directory);

    // Time in a state, from the telemetry's own times: the start, and the transitions out.
    let start = milliseconds(
        telemetry
            .iter()
            .find(|entry| entry["kind"] == "start")
            .unwrap(),
    );
    let working = left(&telemetry, "probing") - start;
    let fetching = left(&telemetry, "fetching") - left(&telemetry, "quick");
    let probing = left(&telemetry, "probing") - left(&telemetry, "fetching");
    // And by hand from the mocks: a timeout takes its 10 s, a retry waits 1 s, `probing` 15 s.
    assert_eq!((working, fetching, probing), (26_000, 11_000, 15_000));

    // A call was retried when it began a second attempt; whether it succeeded is its outcome.
    let second_attempts: Vec<&str> = telemetry
        .iter()
        .filter(|entry| entry["kind"] == "log" && entry["fields"]["attempt"] == 2)
        .filter(|entry| entry["message"].as_str().unwrap().contains(" attempt 2/"))
        .map(|entry| {
            entry["message"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(second_attempts, ["fetch", "probe"]);
    let succeeded = |id: &str| {
        telemetry.iter().any(|entry| {
            entry["kind"] == "effect" && entry["id"] == id && entry["succeeded"] == true
        })
    };
    let retried_successes = second_attempts.iter().filter(|id| succeeded(id)).count();
    assert_eq!(retried_successes, 1);
    // Every attempt that timed out: the retried ones' retry lines, the last ones' outcomes.
    let timeouts = |id: &str| {
        telemetry
            .iter()
            .filter(|entry| {
                (has_tag(entry, &format!("{id}_timeout_retry"))
                    && entry["fields"]["error"] == format!("error.exec.timeout.{id}"))
                    || (entry["kind"] == "effect"
                        && entry["id"] == id
                        && entry["timed_out"] == true)
            })
            .count() as u64
    };
    assert_eq!((timeouts("fetch"), timeouts("probe")), (1, 1));

    // A failure never retried is no exhausted retry, and nothing at ERROR.
    assert!(
        !telemetry
            .iter()
            .any(|entry| entry["level"] == "error" || has_tag(entry, "plain_timeout_exhausted")),
        "{telemetry:#?}"
    );
    assert!(!stderr.contains("gave up"), "{stderr}");

    let (code, json, errors) = run_binary(
        &directory,
        &["stats", "one", "--json", "--state-dir", "state"],
    );
    assert_eq!(code, 0, "{errors}");
    let stats: Value = serde_json::from_str(&json).unwrap();
    let time = &stats["time_in_state_ms"];
    assert_eq!(time["working"], working, "{stats:#}");
    assert_eq!(time["fetching"], fetching, "{stats:#}");
    assert_eq!(time["probing"], probing, "{stats:#}");
    assert_eq!(time["quick"], 0, "{stats:#}");
    // Every state entered once, the compound one and its initial child included.
    for state in [
        "working", "quick", "fetching", "probing", "ending", "failed",
    ] {
        assert_eq!(stats["entries_per_state"][state], 1, "{state}: {stats:#}");
    }
    assert_eq!(stats["retry_sequences"], second_attempts.len(), "{stats:#}");
    assert_eq!(
        stats["retry_success_rate"],
        retried_successes as f64 / second_attempts.len() as f64
    );
    assert_eq!(stats["average_attempts_to_success"], 2.0);
    assert_eq!(
        stats["retries_per_action"],
        serde_json::json!({
            "fetch": {"succeeded": 1, "exhausted": 0, "cancelled": 0, "attempts": 2},
            "probe": {"succeeded": 0, "exhausted": 0, "cancelled": 1, "attempts": 2},
        })
    );
    assert_eq!(
        stats["timeouts_per_action"],
        serde_json::json!({"fetch": timeouts("fetch"), "probe": timeouts("probe")})
    );
    assert_eq!(
        stats["outcomes_per_action"],
        serde_json::json!({
            "quick": {"succeeded": 1, "failed": 0},
            "fetch": {"succeeded": 1, "failed": 0},
            "plain": {"succeeded": 0, "failed": 1},
        })
    );

    let (_, table, _) = run_binary(&directory, &["stats", "one", "--state-dir", "state"]);
    for line in [
        "retry success     50% of 2 retried calls",
        "attempts          2.0 on average for a retried call to succeed",
        "retried           succeeded  exhausted  cancelled   attempts",
        "probe                     0          0          1          2",
        "action            succeeded     failed   timeouts",
        "fetch                     1          0          1",
        "probe                     0          0          1",
        "working                   1    26.000s    26.000s",
    ] {
        assert!(
            table.lines().any(|shown| shown == line),
            "no `{line}` in:\n{table}"
        );
    }
}
