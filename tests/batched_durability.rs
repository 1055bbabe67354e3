//! `run --events -` commits the steps of one read batch in one transaction and tells of them (stdout) only once they are: killed (SIGKILL) after some of its outcome lines were read, every step it told of is in the store, and the resumed run goes on from there as if never killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Stdio;

use protocol_run::store::{SqliteStore, Store};

use crate::durability::{command, finish, scratch};

/// Counts pings, keeps the last one's number; `stop` ends it with both.
const COUNTER: &str = r#"
id: batched
context: { pings: 0, last: 0 }
states:
  counting:
    on:
      ping: { actions: [{ assign: { pings: "pings + 1", last: "event.data.n" } }] }
      stop: done
  done: { type: final, exit_code: 0, output: { pings: "${pings}", last: "${last}" } }
"#;

/// Events lines `ping` numbered `from..=to`, then `stop` when `stop`.
fn pings(from: u64, to: u64, stop: bool) -> String {
    let mut lines: String = (from..=to)
        .map(|n| format!("{{\"event\":\"ping\",\"data\":{{\"n\":{n}}}}}\n"))
        .collect();
    if stop {
        lines.push_str("{\"event\":\"stop\"}\n");
    }
    lines
}

/// Starts `run batched.yaml --events -` (or its resume) with `environment` set and writes
/// `input` to it from a thread of its own, ignoring a pipe the process closed by dying.
fn start(
    directory: &Path,
    arguments: &[&str],
    environment: &[(&str, &str)],
    input: String,
) -> std::process::Child {
    let mut child = command(directory, arguments)
        .envs(environment.iter().copied())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    child
}

/// Reads `child`'s stdout until it has told of the events line `until`, checking that lines
/// are told in order; the last line told of, and stdout, still open (a process whose stdout
/// closed would end on its own, not be killed at a point of the test's choosing).
fn read_told(
    child: &mut std::process::Child,
    until: u64,
    what: &str,
) -> (u64, BufReader<std::process::ChildStdout>) {
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut told = 0;
    let mut text = String::new();
    while told < until {
        text.clear();
        assert!(
            stdout.read_line(&mut text).unwrap() > 0,
            "{what}: stdout ended"
        );
        if let Some(line) = told_line(&text) {
            assert_eq!(line, told + 1, "{what}: lines are told in order");
            told = line;
        }
    }
    (told, stdout)
}

/// The numbers of the events lines an outcome line on stdout tells of.
fn told_line(line: &str) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value.get("input_line")?.as_u64()
}

#[test]
fn a_batched_run_killed_after_telling_some_steps_keeps_them_all_and_resumes() {
    killed_and_resumed("sqlite", &[], &|directory| {
        Box::new(SqliteStore::open(directory.join("state")).unwrap())
    });
}

/// The same on PostgreSQL, chosen through the environment (`PROTOCOL_RUN_STORE=postgres` and
/// the database's URL in `PROTOCOL_RUN_DATABASE_URL`): the state directory keeps no state.db.
#[test]
fn on_postgres_a_batched_run_killed_after_telling_some_steps_keeps_them_all_and_resumes() {
    let test = "batched_durability::on_postgres_a_batched_run_killed_after_telling_some_steps_keeps_them_all_and_resumes";
    let Some(database) = crate::support::postgres::database(test) else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    killed_and_resumed("postgres", &environment, &|directory| {
        assert!(!directory.join("state/state.db").exists());
        Box::new(protocol_run::store::PostgresStore::connect(database.url()).unwrap())
    });
}

/// Kills `run --events -` (SIGKILL) after it told of some steps, at five points: every step it
/// told of is in the store `open` reads, and the resumed run ends as if never killed. Each round
/// is a run of its own in that store, told apart by its id.
fn killed_and_resumed(
    name: &str,
    environment: &[(&str, &str)],
    open: &dyn Fn(&Path) -> Box<dyn Store>,
) {
    const EVENTS: u64 = 3_000;
    for (round, kill_after) in [1_u64, 37, 400, 1_500, 2_600].into_iter().enumerate() {
        let directory = scratch(&format!("batched-kill-{name}-{round}"));
        std::fs::write(directory.join("batched.yaml"), COUNTER).unwrap();
        let run_id = format!("{name}-{round}");
        let mut child = start(
            &directory,
            &["run", "batched.yaml", "--run-id", &run_id, "--events", "-"],
            environment,
            pings(1, EVENTS, true),
        );
        let (told, _stdout) = read_told(&mut child, kill_after, &format!("round {round}"));
        // SIGKILL: no chance to commit or print anything more.
        child.kill().unwrap();
        child.wait().unwrap();
        let store = open(&directory);
        let run = store.run_summary(&run_id).unwrap().unwrap();
        // Step 0 is the start; the ping of line n is step n.
        let last = run.last_sequence.unwrap();
        assert!(last >= told, "round {round}: told {told}, committed {last}");
        for step in [told, last] {
            let state = store.snapshot_at(&run.id, step).unwrap().unwrap().snapshot;
            assert_eq!(
                state.context["pings"],
                serde_json::json!(step),
                "round {round}"
            );
            assert_eq!(
                state.context["last"],
                serde_json::json!(step),
                "round {round}"
            );
        }
        drop(store);
        // The sender sends again what the store does not have.
        let resumed = start(
            &directory,
            &["run", "batched.yaml", "--resume", "--events", "-"],
            environment,
            pings(last + 1, EVENTS, true),
        );
        let output = resumed.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(0),
            "round {round}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let told_again: Vec<u64> = stdout.lines().filter_map(told_line).collect();
        assert_eq!(told_again.len() as u64, EVENTS - last + 1, "round {round}");
        let store = open(&directory);
        let finish = store.run(&run.id).unwrap().unwrap().summary.finish.unwrap();
        assert_eq!(
            finish.output,
            serde_json::json!({"pings": EVENTS, "last": EVENTS}),
            "round {round}"
        );
        let _ = std::fs::remove_dir_all(&directory);
    }
}

/// The commits in a SQLite write-ahead log: frames whose header gives the database's size
/// after them (non-zero only on a transaction's last frame), of the log's current generation.
fn commits_in_wal(wal: &Path) -> usize {
    let mut bytes = Vec::new();
    std::fs::File::open(wal)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let page_size = word(8) as usize;
    let salts = (word(16), word(20));
    let mut commits = 0;
    let mut frame = 32;
    while frame + 24 + page_size <= bytes.len() {
        if (word(frame + 8), word(frame + 12)) == salts && word(frame + 4) != 0 {
            commits += 1;
        }
        frame += 24 + page_size;
    }
    commits
}

/// 2,000 events written at once are committed in far fewer transactions than steps: a reader
/// holding its snapshot keeps the log from being checkpointed away, so every commit the run
/// made is still in it to count.
#[test]
fn the_steps_of_a_read_batch_are_committed_in_one_transaction() {
    const EVENTS: u64 = 2_000;
    let directory = scratch("batched-commits");
    std::fs::write(directory.join("batched.yaml"), COUNTER).unwrap();
    drop(SqliteStore::open(directory.join("state")).unwrap());
    let reader = rusqlite::Connection::open(directory.join("state/state.db")).unwrap();
    reader
        .execute_batch("BEGIN; SELECT COUNT(*) FROM runs;")
        .unwrap();
    let (code, stdout, stderr) = finish(
        command(&directory, &["run", "batched.yaml", "--events", "-"])
            .stdin(std::fs::File::open(write_input(&directory, pings(1, EVENTS, true))).unwrap()),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.lines().filter_map(told_line).count() as u64,
        EVENTS + 1
    );
    let commits = commits_in_wal(&directory.join("state/state.db-wal"));
    reader.execute_batch("COMMIT").unwrap();
    // Per step, there would be one commit for each of the 2,002 steps, plus the run's own.
    assert!(
        commits > 0 && commits as u64 * 4 <= EVENTS,
        "{commits} commits for {EVENTS} events"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

/// `input` in a file of `directory`, for a process's stdin.
fn write_input(directory: &Path, input: String) -> std::path::PathBuf {
    let path = directory.join("events.jsonl");
    std::fs::write(&path, input).unwrap();
    path
}

/// A running run's steps write its journal, not its row: killed (SIGKILL) in the middle of its
/// events, the run's row still holds no last step (no step rewrote it), while `runs` and the
/// store tell of the last step committed, read from the journal: at least every step told of.
#[test]
fn a_running_runs_steps_leave_its_row_as_created() {
    const EVENTS: u64 = 3_000;
    let directory = scratch("batched-row");
    std::fs::write(directory.join("batched.yaml"), COUNTER).unwrap();
    let mut child = start(
        &directory,
        &["run", "batched.yaml", "--events", "-"],
        &[],
        pings(1, EVENTS, false),
    );
    let (told, _stdout) = read_told(&mut child, 500, "the run");
    child.kill().unwrap();
    child.wait().unwrap();
    let reader = rusqlite::Connection::open(directory.join("state/state.db")).unwrap();
    let (status, last_step): (String, Option<i64>) = reader
        .query_row("SELECT status, last_step FROM runs", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    // Running, or stopped if it read the end of its input before the kill: neither rewrites
    // the row's last step.
    assert!(status == "running" || status == "stopped", "{status}");
    assert_eq!(last_step, None);
    let committed = reader
        .query_row("SELECT MAX(step) FROM journal", [], |row| {
            row.get::<_, i64>(0)
        })
        .unwrap() as u64;
    assert!(committed >= told, "told {told}, committed {committed}");
    drop(reader);
    let (code, listed, stderr) = finish(&mut command(&directory, &["runs", "--json"]));
    assert_eq!(code, 0, "{stderr}");
    let listed: serde_json::Value = serde_json::from_str(listed.trim()).unwrap();
    assert_eq!(listed["step"], serde_json::json!(committed), "{listed}");
    let store = SqliteStore::open(directory.join("state")).unwrap();
    let run = store.list_runs().unwrap().remove(0);
    assert_eq!(run.last_sequence, Some(committed));
    let state = store.latest_snapshot(&run.id).unwrap().unwrap();
    assert_eq!(
        (state.sequence, &state.snapshot.context["pings"]),
        (committed, &serde_json::json!(committed))
    );
    let _ = std::fs::remove_dir_all(&directory);
}
