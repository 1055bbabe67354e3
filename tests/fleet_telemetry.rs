//! Telemetry of the runs a fleet hosts, in the store: a `serve` instance's and an `mcp` run's effect attempts, log lines (tags, levels) and states show in `logs` and `stats` like a single run's, from any host; a served run recorded before the fleet kept telemetry is read from its journal, said so; on SQLite and on PostgreSQL, through the real binary.

use serde_json::{Value, json};

use crate::support;
use crate::support::mcp_raw::{RawMcp, reported_run};
use crate::telemetry_store::{Place, messages};

/// `fetch` fails its first attempt (it leaves a mark named after the instance) and succeeds
/// its second under its retry plan; then `waiting` for ticks until `answer`.
const RETRIED: &str = r#"
id: retried
inputs:
  name: { type: string, required: true }
permissions: { exec: [sh], shell: true, write: ["attempts/**"], read: ["attempts/**"], env: [] }
states:
  fetching:
    entry:
      - { log: "fetching", tags: [begin] }
      - id: fetch
        exec: [sh, -c, 'if [ -e "attempts/$1" ]; then exit 0; fi; : > "attempts/$1"; exit 3', sh, "${name}"]
        retry: [{ max_attempts: 2, interval: 10ms }]
    on: { done.exec.fetch: waiting }
  waiting:
    entry: [{ log: "entered waiting", level: warn, tags: [entered] }]
    on:
      tick: { actions: [{ log: "a tick", tags: [tick] }] }
      answer: answered
  answered: { type: final }
"#;

/// The protocol beside the place's, with no attempt made yet.
fn write_protocol(place: &Place) {
    std::fs::write(place.directory.join("retried.yaml"), RETRIED).unwrap();
    let attempts = place.directory.join("attempts");
    let _ = std::fs::remove_dir_all(&attempts);
    std::fs::create_dir_all(attempts).unwrap();
}

/// `logs` and `stats` of `run` on host `state` show its two attempts, its log lines with their
/// levels and tags, and the states it went through: read from the store's telemetry.
fn shows_the_retried_run(place: &Place, state: &str, run: &str) {
    let (code, logs, stderr) = place.run(state, &["logs", run]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("journal"), "{stderr}");
    let shown = |level: &str, tag: &str| {
        logs.lines()
            .any(|line| line.contains(&format!(" {level:<5} ")) && line.ends_with(tag))
    };
    for (level, tag) in [
        ("INFO", "fetching #begin"),
        ("INFO", "fetch attempt 1/2 #fetch_timeout_attempt"),
        ("WARN", "#fetch_timeout_retry"),
        (
            "INFO",
            "fetch succeeded on attempt 2 #fetch_timeout_success",
        ),
        ("WARN", "entered waiting #entered"),
        ("INFO", "a tick #tick"),
    ] {
        assert!(shown(level, tag), "{level} {tag} on {state}: {logs}");
    }
    let warnings = place.succeed(state, &["logs", run, "--level", "warn", "--json"]);
    let warned = messages(&warnings);
    assert_eq!(warned.len(), 2, "{warnings}");
    assert!(
        warned[0].starts_with("fetch attempt 1 failed"),
        "{warnings}"
    );
    assert_eq!(warned[1], "entered waiting", "{warnings}");
    let stats = place.succeed(state, &["stats", run, "--json"]);
    let figures: Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(figures["retry_sequences"], 1, "{stats}");
    assert_eq!(figures["retry_success_rate"], 1.0, "{stats}");
    assert_eq!(
        figures["retries_per_action"]["fetch"],
        json!({"succeeded": 1, "exhausted": 0, "cancelled": 0, "attempts": 2}),
        "{stats}"
    );
    assert_eq!(
        figures["outcomes_per_action"]["fetch"],
        json!({"succeeded": 1, "failed": 0}),
        "{stats}"
    );
    for state_name in ["fetching", "waiting", "answered"] {
        assert_eq!(figures["entries_per_state"][state_name], 1, "{stats}");
    }
    assert!(figures["time_in_state_ms"]["waiting"].is_u64(), "{stats}");
    assert_eq!(figures["tags"]["tick"], 1, "{stats}");
}

/// Two `serve` instances, created in one batch (their parts are written together): each through
/// its retried effect, a tick and the answer, in one input.
fn served_instances_keep_their_telemetry(place: &Place) {
    write_protocol(place);
    let instances = place.directory.join("instances.jsonl");
    let mut lines = String::new();
    for name in ["i1", "i2"] {
        lines.push_str(&format!(
            "{}\n",
            json!({"instance": name, "inputs": {"name": name}})
        ));
    }
    for line in [
        json!({"await": "waiting", "timeout": "60s"}),
        json!({"event": "tick"}),
        json!({"event": "answer"}),
    ] {
        for name in ["i1", "i2"] {
            let mut line = line.clone();
            line["instance"] = name.into();
            lines.push_str(&format!("{line}\n"));
        }
    }
    std::fs::write(&instances, lines).unwrap();
    let output = place
        .command("a", &["serve", "retried.yaml"])
        .stdin(std::fs::File::open(&instances).unwrap())
        .output()
        .unwrap();
    let served = String::from_utf8_lossy(&output.stdout);
    assert_eq!(served.matches("\"finished\"").count(), 2, "{output:?}");
    shows_the_retried_run(place, "a", "retried:i1");
    // Another host of the store (without the first one's state directory) reads the same.
    place.another_host("a", "b");
    shows_the_retried_run(place, "b", "retried:i2");
}

/// An `mcp` run: started by its tool, waited for, sent a tick and the answer.
fn an_mcp_run_keeps_its_telemetry(place: &Place) {
    write_protocol(place);
    let mut arguments = vec!["retried.yaml"];
    if let Some(url) = place.database_url() {
        arguments.extend(["--store", url]);
    }
    let mut server = RawMcp::start(&place.directory, &arguments, json!({}));
    let run = reported_run(&server.call(1, "retried", json!({"name": "m1"})));
    let waited = server.call(
        2,
        "wait_for_state",
        json!({"run": run, "state": "waiting", "timeout": "60s"}),
    );
    assert_eq!(
        waited["structuredContent"]["awaited"], "reached",
        "{waited}"
    );
    for (id, event) in [(3, "tick"), (4, "answer")] {
        let sent = server.call(id, "send_event", json!({"run": run, "event": event}));
        assert_eq!(
            sent["structuredContent"]["sent"]["outcome"], "taken",
            "{sent}"
        );
    }
    // Another run, cancelled while it waits: its telemetry ends there, its time in `waiting`
    // counted to the cancel.
    let cancelled = reported_run(&server.call(5, "retried", json!({"name": "m2"})));
    let waited = server.call(
        6,
        "wait_for_state",
        json!({"run": cancelled, "state": "waiting", "timeout": "60s"}),
    );
    assert_eq!(
        waited["structuredContent"]["awaited"], "reached",
        "{waited}"
    );
    let cancel = server.call(7, "cancel_run", json!({"run": cancelled}));
    assert_ne!(cancel["isError"], true, "{cancel}");
    server.finish();
    // `mcp`'s state directory is `state` in the place's directory.
    shows_the_retried_run(place, "state", &run);
    let stats = place.succeed("state", &["stats", &cancelled, "--json"]);
    let figures: Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(figures["entries_per_state"]["waiting"], 1, "{stats}");
    assert!(figures["time_in_state_ms"]["waiting"].is_u64(), "{stats}");
}

/// A served run recorded before the fleet kept telemetry (its parts deleted here): `logs` reads
/// its log lines from its journal and says why; `stats` has nothing to sum and says so.
fn a_run_recorded_before_is_read_from_its_journal(
    place: &Place,
    database: Option<&support::postgres::TestDatabase>,
) {
    let run = "retried:i1";
    let deleted = match database {
        Some(database) => database
            .connect()
            .execute("DELETE FROM telemetry WHERE run_id = $1", &[&run])
            .unwrap(),
        None => rusqlite::Connection::open(place.directory.join("a/state.db"))
            .unwrap()
            .execute("DELETE FROM telemetry WHERE run_id = ?1", [run])
            .unwrap() as u64,
    };
    assert!(deleted > 0);
    let (code, logs, stderr) = place.run("a", &["logs", run]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("was recorded by `serve` before it kept telemetry in the store")
            && stderr.contains("read from its journal"),
        "{stderr}"
    );
    assert!(
        logs.lines()
            .any(|line| line.ends_with("WARN  entered waiting #entered")),
        "{logs}"
    );
    let (code, _, stderr) = place.run("a", &["stats", run]);
    assert_eq!(code, 66, "{stderr}");
    assert!(
        stderr.contains("before it kept telemetry in the store")
            && stderr.contains("protocol-run status retried:i1"),
        "{stderr}"
    );
}

#[test]
fn sqlite_keeps_the_telemetry_of_served_and_mcp_runs() {
    let place = Place::new("fleet-sqlite", Vec::new());
    served_instances_keep_their_telemetry(&place);
    an_mcp_run_keeps_its_telemetry(&place);
    a_run_recorded_before_is_read_from_its_journal(&place, None);
}

#[test]
fn postgres_keeps_the_telemetry_of_served_and_mcp_runs() {
    let Some(database) = support::postgres::database(
        "fleet_telemetry::postgres_keeps_the_telemetry_of_served_and_mcp_runs",
    ) else {
        return;
    };
    let place = Place::on_postgres("fleet-postgres", &database);
    served_instances_keep_their_telemetry(&place);
    an_mcp_run_keeps_its_telemetry(&place);
    a_run_recorded_before_is_read_from_its_journal(&place, Some(&database));
}
