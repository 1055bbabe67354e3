//! Two `protocol-run mcp` servers on one PostgreSQL database: an event sent to either for a run the other holds is queued in its inbox and answered with its outcome once the holder applies it, and a server takes over the runs of one killed with SIGKILL once its lease runs out.

use serde_json::{Value, json};

use crate::support::mcp_raw::{RawMcp, reported_run};

/// Waits for `go`, then for `finish`.
const WAITER: &str = "id: waiter\ninitial: waiting\nstates:\n  waiting:\n    on: { go: ready }\n  ready:\n    on: { finish: done }\n  done: { type: final }\n";

/// A server of `waiter.yaml` in `directory` with the state directory `state`, on the database
/// at `url`, with one-second leases.
fn server(directory: &std::path::Path, state: &str, url: &str) -> RawMcp {
    RawMcp::start_in(
        directory,
        state,
        &["waiter.yaml", "--store", url, "--lease", "1s"],
        json!({}),
    )
}

#[test]
fn an_event_sent_to_another_server_is_queued_and_answered_with_its_outcome() {
    let Some(database) = crate::support::postgres::database("mcp-fleet-queue") else {
        return;
    };
    let directory = crate::support::temporary_directory("mcp-fleet", "queue");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let mut holder = server(&directory, "state-a", database.url());
    let mut other = server(&directory, "state-b", database.url());
    let run = reported_run(&holder.call(1, "waiter", json!({})));
    let sent = other.call(1, "send_event", json!({"run": run, "event": "go"}));
    assert_eq!(sent["isError"], json!(false), "{sent}");
    let report = &sent["structuredContent"];
    assert_eq!(report["sent"]["outcome"], json!("taken"), "{sent}");
    assert_eq!(report["sent"]["entry"], json!(1), "{sent}");
    assert_eq!(report["live"], json!(false), "{sent}");
    // The holder applied it: its own report shows the state the event led to.
    let held = holder.call(2, "get_run", json!({"run": run}));
    assert_eq!(
        held["structuredContent"]["states"],
        json!(["ready"]),
        "{held}"
    );
    // An event the run cannot take now is discarded by the holder, and said so to the sender.
    let discarded = other.call(2, "send_event", json!({"run": run, "event": "go"}));
    assert_eq!(
        discarded["structuredContent"]["sent"]["outcome"],
        json!("discarded"),
        "{discarded}"
    );
    let finished = other.call(3, "send_event", json!({"run": run, "event": "finish"}));
    assert_eq!(
        finished["structuredContent"]["status"],
        json!("finished"),
        "{finished}"
    );
    // A finished run takes no more: refused by the store, said by the tool.
    let late = other.call(4, "send_event", json!({"run": run, "event": "finish"}));
    assert_eq!(late["isError"], json!(true), "{late}");
    holder.finish();
    other.finish();
}

#[test]
fn a_server_takes_over_the_runs_of_one_killed_and_applies_their_queued_events() {
    let Some(database) = crate::support::postgres::database("mcp-fleet-takeover") else {
        return;
    };
    let directory = crate::support::temporary_directory("mcp-fleet", "takeover");
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let mut doomed = server(&directory, "state-a", database.url());
    let mut survivor = server(&directory, "state-b", database.url());
    let run = reported_run(&doomed.call(1, "waiter", json!({})));
    doomed.kill();
    // Queued while no live host holds the run: applied by whichever takes it over.
    let sent = survivor.call(1, "send_event", json!({"run": run, "event": "go"}));
    assert_eq!(
        sent["structuredContent"]["sent"]["outcome"],
        json!("taken"),
        "{sent}"
    );
    let stderr_path = directory.join("stderr-2.txt");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        stderr.contains(&format!("mcp: took over (its host is gone) {run}")),
        "{stderr}"
    );
    // Live here now: the next event is taken by this server's own fleet.
    let finished = survivor.call(2, "send_event", json!({"run": run, "event": "finish"}));
    let report: &Value = &finished["structuredContent"];
    assert_eq!(report["status"], json!("finished"), "{finished}");
    assert_eq!(report["live"], Value::Null, "a live report: {finished}");
    survivor.finish();
}
