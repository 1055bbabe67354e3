//! Hosts on one PostgreSQL database: a `serve` host paused past its lease has its instances taken over by another host, and when it comes back it ends (exit 75) without writing, whatever it was sent meanwhile.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use protocol_run::store::{PostgresStore, Store};

use crate::support;

/// Waits in `idle` for `go`.
const WAITING: &str = "id: waiting\npermissions: { exec: [] }\nstates:\n  idle:\n    on: { go: done }\n  done: { type: final }\n";

/// A `serve` host of `waiting.yaml` on the database at `url`, with its own state directory
/// `state` and a lease of a second: the process, its input and its output.
fn serving(
    directory: &std::path::Path,
    state: &str,
    url: &str,
) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let mut child = serve(directory, state, url);
    let input = child.stdin.take().unwrap();
    let output = BufReader::new(child.stdout.take().unwrap());
    (child, input, output)
}

fn serve(directory: &std::path::Path, state: &str, url: &str) -> Child {
    serve_with(directory, state, url, "waiting.yaml", &[])
}

/// `serve FILE` with arguments of its own besides those every host here takes.
fn serve_with(
    directory: &std::path::Path,
    state: &str,
    url: &str,
    file: &str,
    arguments: &[&str],
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "serve",
            file,
            "--state-dir",
            state,
            "--lease",
            "1s",
            // Hosts look at the inboxes only once a minute: a queued event reaches its holder,
            // and its outcome the sender, by the database's notifications (`LISTEN`), or the
            // inbox test would take minutes.
            "--inbox-poll",
            "1m",
        ])
        .args(arguments)
        .env("PROTOCOL_RUN_STORE", "postgres")
        .env("PROTOCOL_RUN_DATABASE_URL", url)
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads `child`'s stdout until a line contains `needle`; the line.
pub(crate) fn line_with(stdout: &mut impl BufRead, needle: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "stdout ended before `{needle}`"
        );
        if line.contains(needle) {
            return line;
        }
    }
}

fn signal(child: &Child, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
}

#[test]
fn a_host_paused_past_its_lease_loses_its_instances_and_comes_back_to_end_without_writing() {
    let test = "postgres_hosts::a_host_paused_past_its_lease_loses_its_instances_and_comes_back_to_end_without_writing";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let directory = support::temporary_directory("postgres-hosts", "paused");
    std::fs::write(directory.join("waiting.yaml"), WAITING).unwrap();
    let (first, mut first_in, mut first_out) = serving(&directory, "first", database.url());
    writeln!(first_in, "{{\"instance\": \"i1\"}}").unwrap();
    line_with(&mut first_out, "\"idle\"");
    let store = PostgresStore::connect(database.url()).unwrap();
    let run = store.list_runs().unwrap().remove(0);
    let first_lease = run.holder.clone().unwrap().host.unwrap();
    assert!(first_lease.starts_with("serve@"), "{first_lease}");
    // Paused (SIGSTOP) until its lease has run out by the database's clock.
    signal(&first, nix::sys::signal::Signal::SIGSTOP);
    let mut client = database.connect();
    support::eventually("the first host's lease runs out", || {
        let row = client
            .query_one(
                "SELECT expires_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT \
                 FROM hosts WHERE id = $1",
                &[&first_lease],
            )
            .unwrap();
        row.get::<_, bool>(0).then_some(())
    });
    // Meanwhile it is sent the event that would end the instance: it must never apply it.
    writeln!(first_in, "{{\"instance\": \"i1\", \"event\": \"go\"}}").unwrap();
    // A second host takes the instance over at its start and ends it.
    let (mut second, mut second_in, mut second_out) = serving(&directory, "second", database.url());
    writeln!(second_in, "{{\"instance\": \"i1\", \"event\": \"go\"}}").unwrap();
    line_with(&mut second_out, "\"done\"");
    drop(second_in);
    let status = second.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let taken = store.run_summary(&run.id).unwrap().unwrap();
    assert_eq!(taken.status, protocol_run::store::RunStatus::Finished);
    let journal = store.journal(&run.id).unwrap();
    // The first host comes back: it ends at once, having written nothing.
    signal(&first, nix::sys::signal::Signal::SIGCONT);
    drop(first_in);
    let output = first.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("lease"), "{stderr}");
    assert_eq!(store.journal(&run.id).unwrap(), journal);
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_running_host_takes_over_the_instances_of_a_host_killed_beside_it() {
    let test = "postgres_hosts::a_running_host_takes_over_the_instances_of_a_host_killed_beside_it";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let directory = support::temporary_directory("postgres-hosts", "killed");
    std::fs::write(directory.join("waiting.yaml"), WAITING).unwrap();
    let (mut first, mut first_in, mut first_out) = serving(&directory, "first", database.url());
    writeln!(first_in, "{{\"instance\": \"i1\"}}").unwrap();
    line_with(&mut first_out, "\"idle\"");
    // A second host, already serving (an instance of its own keeps it waiting for input).
    let (second, mut second_in, mut second_out) = serving(&directory, "second", database.url());
    writeln!(second_in, "{{\"instance\": \"i2\"}}").unwrap();
    line_with(&mut second_out, "\"i2\"");
    let store = PostgresStore::connect(database.url()).unwrap();
    let i1 = store
        .list_runs()
        .unwrap()
        .into_iter()
        .find(|run| run.id.ends_with(":i1"))
        .unwrap();
    let first_lease = i1.holder.clone().unwrap().host.unwrap();
    // The first host dies at once.
    first.kill().unwrap();
    first.wait().unwrap();
    // The second takes its instance over while it runs, with no restart.
    support::eventually("the second host takes i1 over", || {
        let holder = store.run_summary(&i1.id).unwrap()?.holder?;
        (holder.host.as_deref() != Some(first_lease.as_str())).then_some(())
    });
    writeln!(second_in, "{{\"instance\": \"i1\", \"event\": \"go\"}}").unwrap();
    line_with(&mut second_out, "\"done\"");
    writeln!(second_in, "{{\"instance\": \"i2\", \"event\": \"go\"}}").unwrap();
    drop(second_in);
    let output = second.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("instance `i1` taken over"), "{stderr}");
    assert_eq!(
        store.run_summary(&i1.id).unwrap().unwrap().status,
        protocol_run::store::RunStatus::Finished
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn an_event_sent_to_another_host_is_queued_applied_once_by_the_holder_and_relayed_back() {
    let test = "postgres_hosts::an_event_sent_to_another_host_is_queued_applied_once_by_the_holder_and_relayed_back";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let directory = support::temporary_directory("postgres-hosts", "inbox");
    std::fs::write(directory.join("waiting.yaml"), WAITING).unwrap();
    let (first, mut first_in, mut first_out) = serving(&directory, "first", database.url());
    writeln!(first_in, "{{\"instance\": \"i1\"}}").unwrap();
    line_with(&mut first_out, "\"idle\"");
    let (second, mut second_in, mut second_out) = serving(&directory, "second", database.url());
    // An event the state does not take, then the one that ends it, both to the host that
    // does not hold the instance: each is queued there, applied by the holder in order, and
    // its outcome comes back where it was sent.
    writeln!(second_in, "{{\"instance\": \"i1\", \"event\": \"poke\"}}").unwrap();
    let queued = line_with(&mut second_out, "\"queued\"");
    assert!(queued.contains("\"entry\":1"), "{queued}");
    let relayed = line_with(&mut second_out, "\"poke\"");
    assert!(relayed.contains("\"outcome\":\"discarded\""), "{relayed}");
    writeln!(second_in, "{{\"instance\": \"i1\", \"event\": \"go\"}}").unwrap();
    let queued = line_with(&mut second_out, "\"queued\"");
    assert!(queued.contains("\"entry\":2"), "{queued}");
    line_with(&mut second_out, "\"finished\"");
    // The holder applied both and ended the instance itself.
    line_with(&mut first_out, "\"finished\"");
    let mut client = database.connect();
    let rows = client
        .query(
            "SELECT entry, status, step, tries FROM inbox WHERE run_id = 'waiting:i1' ORDER BY entry",
            &[],
        )
        .unwrap();
    let rows: Vec<(i64, String, Option<i64>, i64)> = rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect();
    assert_eq!(
        rows,
        [
            (1, "applied".to_string(), Some(1), 1),
            (2, "applied".to_string(), Some(2), 1)
        ]
    );
    let store = PostgresStore::connect(database.url()).unwrap();
    let journal = store.journal("waiting:i1").unwrap();
    let events: Vec<Option<&str>> = journal
        .iter()
        .map(|entry| entry.event.as_ref().map(|event| event.name.as_str()))
        .collect();
    assert_eq!(events, [None, Some("poke"), Some("go")]);
    // `status` on any host shows what became of each queued event.
    let shown = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["status", "waiting:i1", "--json", "--state-dir", "elsewhere"])
        .env("PROTOCOL_RUN_STORE", "postgres")
        .env("PROTOCOL_RUN_DATABASE_URL", database.url())
        .current_dir(&directory)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{shown:?}");
    let status: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        status["inbox"],
        serde_json::json!([
            {"entry": 2, "event": "go", "tries": 1, "state": "applied", "outcome": "taken", "step": 2},
            {"entry": 1, "event": "poke", "tries": 1, "state": "applied", "outcome": "discarded", "step": 1},
        ])
    );
    drop(first_in);
    drop(second_in);
    for host in [first, second] {
        let output = host.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

/// Waits for `go`, with a secret input the store never holds.
const SECRET: &str = "id: secret\ninputs:\n  token: { type: string, secret: true }\npermissions: { exec: [] }\nstates:\n  idle:\n    on: { go: done }\n  done: { type: final }\n";

#[test]
fn a_run_with_a_secret_input_is_taken_over_only_by_a_host_that_has_the_secret() {
    let test = "postgres_hosts::a_run_with_a_secret_input_is_taken_over_only_by_a_host_that_has_the_secret";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let directory = support::temporary_directory("postgres-hosts", "secret");
    std::fs::write(directory.join("secret.yaml"), SECRET).unwrap();
    let with_token = ["--input", "token=s3cr3t-value"];
    let mut first = serve_with(
        &directory,
        "first",
        database.url(),
        "secret.yaml",
        &with_token,
    );
    let mut first_in = first.stdin.take().unwrap();
    let mut first_out = BufReader::new(first.stdout.take().unwrap());
    writeln!(first_in, "{{\"instance\": \"i1\"}}").unwrap();
    line_with(&mut first_out, "\"idle\"");
    // A host without the secret, already serving when the first dies (an instance of its own
    // keeps it waiting for input): it never claims the instance, and says why once, naming the
    // input.
    let mut second = serve_with(&directory, "second", database.url(), "secret.yaml", &[]);
    let mut second_in = second.stdin.take().unwrap();
    let mut second_out = BufReader::new(second.stdout.take().unwrap());
    writeln!(
        second_in,
        "{{\"instance\": \"i2\", \"inputs\": {{\"token\": \"other-token\"}}}}"
    )
    .unwrap();
    line_with(&mut second_out, "\"i2\"");
    let store = PostgresStore::connect(database.url()).unwrap();
    let first_holder = store.run_summary("secret:i1").unwrap().unwrap().holder;
    first.kill().unwrap();
    first.wait().unwrap();
    let mut stderr = BufReader::new(second.stderr.take().unwrap());
    let said = line_with(&mut stderr, "secret input(s) token");
    assert!(said.contains("--input token"), "{said}");
    assert!(!said.contains("s3cr3t-value"), "{said}");
    let left = store.run_summary("secret:i1").unwrap().unwrap();
    assert_eq!(left.status, protocol_run::store::RunStatus::Running);
    assert_eq!(left.holder, first_holder, "left as the dead host left it");
    // A host with the secret takes it over and ends it.
    let mut third = serve_with(
        &directory,
        "third",
        database.url(),
        "secret.yaml",
        &with_token,
    );
    let mut third_in = third.stdin.take().unwrap();
    let mut third_out = BufReader::new(third.stdout.take().unwrap());
    writeln!(third_in, "{{\"instance\": \"i1\", \"event\": \"go\"}}").unwrap();
    line_with(&mut third_out, "\"finished\"");
    drop(third_in);
    assert_eq!(third.wait().unwrap().code(), Some(0));
    writeln!(second_in, "{{\"instance\": \"i2\", \"event\": \"go\"}}").unwrap();
    line_with(&mut second_out, "\"finished\"");
    drop(second_in);
    assert_eq!(second.wait().unwrap().code(), Some(0));
    let _ = std::fs::remove_dir_all(&directory);
}
