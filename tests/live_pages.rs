//! Live pages woken by PostgreSQL's notifications: a transaction that commits runs' steps or status changes notifies once per run, and the inspector's page of a run gets a step another process commits long before its `--poll` would have brought it.

use std::io::{BufRead, BufReader, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use protocol_run::store::{PostgresStore, Store, Write};
use serde_json::Value;

use crate::store_conformance::{finish, new_run, step};
use crate::support;
use crate::ui_inspector::{Process, api, inspector_on};

/// The channel the store notifies on, as `docs/inspector.md` names it.
const RUNS_CHANNEL: &str = "protocol_run_runs";

/// Waits in `idle` for `poke`, then in `poked` for `go`.
const WAITING: &str = "id: waiting\npermissions: { exec: [] }\nstates:\n  idle:\n    on: { poke: poked }\n  poked:\n    on: { go: done }\n  done: { type: final }\n";

/// The inspector's poll in the live test: so long that only a notification brings an update
/// before it.
const POLL: Duration = Duration::from_secs(60);

#[test]
fn a_committed_transaction_notifies_once_per_run_it_stepped_or_ended() {
    let test = "live_pages::a_committed_transaction_notifies_once_per_run_it_stepped_or_ended";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let mut listener = database.connect();
    listener
        .batch_execute(&format!("LISTEN {RUNS_CHANNEL}"))
        .unwrap();
    let mut watcher = PostgresStore::connect(database.url()).unwrap();
    let changes = watcher
        .watch_runs()
        .unwrap()
        .expect("PostgreSQL tells of commits");
    let mut follower = changes.follow();
    let mut store = PostgresStore::connect(database.url()).unwrap();
    for run in ["a", "b", "c"] {
        store.create_run(&new_run(run)).unwrap();
    }
    // Three steps of `a`, and a step and a stop of `b`, in one transaction; then telemetry
    // alone, which changes no step or status; then the end of `c`, the last word this test
    // waits for.
    let stop = Write::MarkStopped {
        run: "b".to_string(),
        unix_milliseconds: 2_000,
    };
    store
        .commit_batch(&[step("a", 0), step("a", 1), step("b", 0), step("a", 2), stop])
        .unwrap();
    store
        .commit_batch(&[Write::Telemetry {
            run: "b".to_string(),
            lines: "{}\n".to_string(),
        }])
        .unwrap();
    store.finish_run("c", &finish(5_000)).unwrap();
    let mut heard = Vec::new();
    let mut notifications = listener.notifications();
    let mut waiting = notifications.timeout_iter(support::HANG);
    while heard.last().map(String::as_str) != Some("c") || heard.len() < 6 {
        let notification = waiting
            .next()
            .unwrap()
            .unwrap_or_else(|| panic!("no more notifications after {heard:?}"));
        assert_eq!(notification.channel(), RUNS_CHANNEL);
        heard.push(notification.payload().to_string());
    }
    // Each creation, then the batch once per run in its order, then the end of `c`.
    assert_eq!(heard, ["a", "b", "c", "a", "b", "c"]);
    // The store that listens hands the same word on to its followers (all of it heard by now
    // answered by one wake).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let woken = runtime
        .block_on(async { tokio::time::timeout(support::HANG, follower.changed("b")).await });
    assert_eq!(woken, Ok(true), "word of `b`");
}

#[test]
fn a_live_page_gets_a_step_committed_by_another_process_before_its_poll() {
    let test = "live_pages::a_live_page_gets_a_step_committed_by_another_process_before_its_poll";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let directory = support::temporary_directory("live-pages", "postgres");
    std::fs::write(directory.join("waiting.yaml"), WAITING).unwrap();
    // The run, held by a `run` process of its own, its events on stdin (held open).
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["run", "waiting.yaml", "--run-id", "live", "--events", "-"])
        .args(["--store", database.url(), "--state-dir", "run-state"])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let input = child.stdin.take();
    let mut run = Process { child, input };
    let poll = format!("{}s", POLL.as_secs());
    let arguments = ["--store", database.url(), "--state-dir", "ui-state"];
    let (_inspector, address) = inspector_on(
        &directory,
        &[&arguments[..], &["--poll", &poll]].concat(),
        &[],
    );
    support::eventually("the run waiting in `idle`", || {
        let (status, _) =
            crate::ui_inspector::request(&address, "GET", "/api/run?id=live", &[], "");
        let run = (status == 200).then(|| api(&address, "/api/run?id=live"))?;
        (run["state"]["configuration"] == serde_json::json!(["idle"])).then_some(())
    });
    let updates = live_updates(&address, "live");
    // The page's first look, at once: the run as it stands.
    let first = updates.recv_timeout(support::HANG).unwrap();
    assert_eq!(
        first["run"]["state"]["configuration"],
        serde_json::json!(["idle"])
    );
    let input = run.input.as_mut().unwrap();
    writeln!(input, "{{\"event\": \"poke\"}}").unwrap();
    input.flush().unwrap();
    let poked = next_update_with(&updates, |update| stepped_by(update, "poke"));
    assert_eq!(
        poked["run"]["state"]["configuration"],
        serde_json::json!(["poked"])
    );
    writeln!(input, "{{\"event\": \"go\"}}").unwrap();
    input.flush().unwrap();
    let ended = next_update_with(&updates, |update| update["run"]["status"] == "finished");
    assert!(stepped_by(&ended, "go"), "{ended}");
    // Both came by the notifications, not by the page's next look of its own (a poll away).
    assert_eq!(first["woken_by"], "first", "{first}");
    assert_eq!(poked["woken_by"], "notification", "{poked}");
    assert_eq!(ended["woken_by"], "notification", "{ended}");
}

/// Whether `update` carries a step that took `event`.
fn stepped_by(update: &Value, event: &str) -> bool {
    update["steps"]
        .as_array()
        .is_some_and(|steps| steps.iter().any(|step| step["event"] == event))
}

/// The next update `wanted` holds of, from `updates`; fails past `support::HANG`.
fn next_update_with(updates: &mpsc::Receiver<Value>, wanted: impl Fn(&Value) -> bool) -> Value {
    support::eventually("the update", || {
        updates.try_recv().ok().filter(|update| wanted(update))
    })
}

/// The `update` events of run `run`'s live feed (`/api/live`), each as JSON, read by a thread of
/// their own until the inspector ends the feed or the receiver is dropped.
fn live_updates(address: &str, run: &str) -> mpsc::Receiver<Value> {
    let mut stream = TcpStream::connect(address).unwrap();
    // HTTP/1.0: the feed's body is its bytes as sent, until the connection closes, never chunked.
    write!(
        stream,
        "GET /api/live?id={run} HTTP/1.0\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut event = String::new();
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else {
                return;
            };
            if let Some(name) = line.strip_prefix("event: ") {
                event = name.to_string();
            } else if let Some(data) = line.strip_prefix("data: ")
                && event == "update"
            {
                let update = serde_json::from_str(data)
                    .unwrap_or_else(|error| panic!("an update not JSON ({error}): {data}"));
                if sender.send(update).is_err() {
                    return;
                }
            }
        }
    });
    receiver
}
