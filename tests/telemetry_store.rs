//! Telemetry in the store: `logs` and `stats` read the same run from any state directory, a run driven by two processes in turn (stopped, or its host killed) shows both parts, and pruning a run takes its telemetry; on SQLite and on PostgreSQL, through the real binary.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::support;

/// `fetch` (retried on a timeout: the mocks time its first attempt out), then `waiting` for
/// ticks until `answer`.
const PROTOCOL: &str = r#"
id: telemetry-demo
context: { ticks: 0 }
permissions: { exec: [sh], shell: true, write: [], read: [], env: [] }
states:
  fetching:
    entry:
      - { log: "fetching", tags: [begin] }
      - { id: fetch, exec: [sh, -c, "true"], timeout: 10s, retry: [{ error_equals: [error.exec.timeout], max_attempts: 2 }] }
    on: { done.exec.fetch: waiting }
  waiting:
    entry: [{ log: "entered waiting", tags: [entered] }]
    on:
      tick:
        actions: [{ assign: { ticks: "ticks + 1" } }, { log: "tick ${ticks}", tags: [tick] }]
      answer: answered
  answered: { type: final }
"#;

/// Where the tests run the binary: a directory holding the protocol, and the store's choice.
pub(crate) struct Place {
    pub(crate) directory: std::sync::Arc<crate::support::TemporaryDirectory>,
    pub(crate) environment: Vec<(&'static str, String)>,
}

impl Place {
    pub(crate) fn new(name: &str, environment: Vec<(&'static str, String)>) -> Place {
        let directory = support::temporary_directory("telemetry-store", name);
        std::fs::write(directory.join("demo.yaml"), PROTOCOL).unwrap();
        Place {
            directory: std::sync::Arc::new(directory),
            environment,
        }
    }

    /// A place whose commands use the PostgreSQL database `database`.
    pub(crate) fn on_postgres(name: &str, database: &support::postgres::TestDatabase) -> Place {
        let url = database.url().to_string();
        Place::new(
            name,
            vec![
                ("PROTOCOL_RUN_STORE", "postgres".to_string()),
                ("PROTOCOL_RUN_DATABASE_URL", url),
            ],
        )
    }

    /// The PostgreSQL URL its commands use, if they use one.
    pub(crate) fn database_url(&self) -> Option<&str> {
        self.environment
            .iter()
            .find(|(name, _)| *name == "PROTOCOL_RUN_DATABASE_URL")
            .map(|(_, url)| url.as_str())
    }

    /// The binary with `arguments` on the state directory `state` (a host of its own).
    pub(crate) fn command(&self, state: &str, arguments: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_protocol-run"));
        command
            .args(arguments)
            .args(["--state-dir", state])
            .envs(self.environment.iter().map(|(name, value)| (name, value)))
            .current_dir(self.directory.as_path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// (exit code, stdout, stderr).
    pub(crate) fn run(&self, state: &str, arguments: &[&str]) -> (i32, String, String) {
        let output = self.command(state, arguments).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    }

    /// Stdout of a command that must succeed.
    pub(crate) fn succeed(&self, state: &str, arguments: &[&str]) -> String {
        let (code, stdout, stderr) = self.run(state, arguments);
        assert_eq!(code, 0, "{arguments:?} on {state}: {stdout}{stderr}");
        stdout
    }

    /// A SQLite host reads its own state directory's store: another host of the same store is
    /// one given a copy of the database (without the telemetry files beside it). A PostgreSQL
    /// host is any state directory.
    pub(crate) fn another_host(&self, from: &str, to: &str) {
        if !self.environment.is_empty() {
            return;
        }
        std::fs::create_dir_all(self.directory.join(to)).unwrap();
        for file in ["state.db", "state.db-wal"] {
            let (source, copy) = (self.directory.join(from), self.directory.join(to));
            let _ = std::fs::remove_file(copy.join(file));
            if source.join(file).exists() {
                std::fs::copy(source.join(file), copy.join(file)).unwrap();
            }
        }
    }

    fn telemetry_file(&self, state: &str, run: &str) -> PathBuf {
        self.directory
            .join(state)
            .join("runs")
            .join(run)
            .join("events.jsonl")
    }
}

/// The messages `logs` shows, in order.
pub(crate) fn messages(logs: &str) -> Vec<String> {
    logs.lines()
        .map(|line| {
            let entry: serde_json::Value = serde_json::from_str(line).unwrap();
            entry["message"].as_str().unwrap().to_string()
        })
        .collect()
}

fn logs_and_stats_are_the_same_from_any_host(place: &Place) {
    std::fs::write(
        place.directory.join("events.jsonl"),
        "{\"await\": \"waiting\"}\n{\"event\": \"tick\"}\n{\"event\": \"answer\"}\n",
    )
    .unwrap();
    place.succeed(
        "a",
        &[
            "run",
            "demo.yaml",
            "--run-id",
            "first",
            "--virtual-time",
            "--mock",
            "fetch=timeout,ok",
            "--events",
            "events.jsonl",
        ],
    );
    place.another_host("a", "b");
    assert!(!place.telemetry_file("b", "first").exists());
    let read = |state: &str| {
        (
            place.succeed(state, &["logs", "first", "--json"]),
            place.succeed(state, &["stats", "first", "--json"]),
            place.succeed(state, &["stats", "--protocol", "telemetry-demo"]),
        )
    };
    let (logs, stats, table) = read("a");
    let logged = messages(&logs);
    for message in ["fetching", "entered waiting", "tick 1"] {
        assert!(logged.iter().any(|line| line == message), "{logs}");
    }
    let figures: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(figures["retry_sequences"], 1, "{stats}");
    assert_eq!(figures["timeouts_per_action"]["fetch"], 1, "{stats}");
    assert_eq!(figures["tags"]["tick"], 1, "{stats}");
    assert!(
        table.starts_with("protocol telemetry-demo: 1 runs\n"),
        "{table}"
    );
    // Another host, without the run's telemetry file, shows the same lines and figures.
    assert_eq!(read("b"), (logs.clone(), stats.clone(), table));
    // And they are those of the whole file (which keeps every kind of entry, the store only
    // those `logs` and `stats` read): read where there is no store, only the file.
    let file = place.telemetry_file("f", "first");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::copy(place.telemetry_file("a", "first"), &file).unwrap();
    let sqlite = [("PROTOCOL_RUN_STORE", "sqlite".to_string())];
    let from_file = Place {
        directory: place.directory.clone(),
        environment: sqlite.to_vec(),
    };
    assert_eq!(from_file.succeed("f", &["logs", "first", "--json"]), logs);
    assert_eq!(from_file.succeed("f", &["stats", "first", "--json"]), stats);
}

/// How host `a` stops driving a run.
#[derive(Clone, Copy, PartialEq)]
enum Stop {
    /// SIGTERM: the run is stopped (75) and released.
    Signal,
    /// SIGKILL: the host dies holding it; another host takes it once its lease has run out.
    Death,
}

/// A run (`run`) that host `a` drove through a tick, then stopped driving (`stop`), resumed on
/// host `b` with another tick and the answer: `logs` shows both parts, from either host and
/// from a third (on PostgreSQL), where each host's `events.jsonl` has its own part only.
fn a_run_driven_in_turn_shows_both_parts(place: &Place, run: &str, stop: Stop) {
    let mut arguments = vec![
        "run",
        "demo.yaml",
        "--run-id",
        run,
        "--mock",
        "fetch=ok",
        "--events",
        "-",
    ];
    if stop == Stop::Death {
        arguments.extend(["--lease", "1s"]);
    }
    let mut child = place
        .command("a", &arguments)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    stdin
        .write_all(b"{\"await\": \"waiting\"}\n{\"event\": \"tick\"}\n")
        .unwrap();
    // The tick's outcome is written once its step is committed.
    for line in stdout.by_ref() {
        if line.unwrap().contains("\"event\":\"tick\"") {
            break;
        }
    }
    let signal = match stop {
        Stop::Signal => nix::sys::signal::Signal::SIGTERM,
        Stop::Death => nix::sys::signal::Signal::SIGKILL,
    };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    if stop == Stop::Signal {
        assert_eq!(
            output.status.code(),
            Some(75),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    place.another_host("a", "b");
    std::fs::write(
        place.directory.join("more.jsonl"),
        "{\"event\": \"tick\"}\n{\"event\": \"answer\"}\n",
    )
    .unwrap();
    // A dead host's run is its own until its lease runs out: 75 until then.
    let resumed = support::eventually("the run is resumed on host b", || {
        let (code, stdout, stderr) = place.run("b", &["resume", run, "--events", "more.jsonl"]);
        match code {
            75 if stop == Stop::Death => None,
            0 => Some(stdout),
            _ => panic!("resume: {code}: {stdout}{stderr}"),
        }
    });
    assert!(resumed.contains("\"finished\""), "{resumed}");
    // Each host's file has its own part only.
    let file = std::fs::read_to_string(place.telemetry_file("a", run)).unwrap();
    assert!(
        file.contains("tick 1") && !file.contains("tick 2"),
        "{file}"
    );
    let whole = ["fetching", "entered waiting", "tick 1", "tick 2"];
    // On SQLite, `b` has the store the run went on in (`a` keeps its own copy, stopped).
    let hosts = match place.environment.is_empty() {
        true => vec!["b"],
        false => vec!["a", "b", "c"],
    };
    for host in hosts {
        let logs = place.succeed(host, &["logs", run, "--json"]);
        let logged = messages(&logs);
        let shown: Vec<&str> = logged
            .iter()
            .map(String::as_str)
            .filter(|message| whole.contains(message))
            .collect();
        assert_eq!(shown, whole, "on {host}: {logs}");
        let stats = place.succeed(host, &["stats", run, "--json"]);
        let figures: serde_json::Value = serde_json::from_str(&stats).unwrap();
        assert_eq!(figures["tags"]["tick"], 2, "on {host}: {stats}");
    }
}

/// The rows of the store's telemetry table for `run`, as host `b` sees them.
fn stored_parts(
    place: &Place,
    database: Option<&support::postgres::TestDatabase>,
    run: &str,
) -> i64 {
    match database {
        Some(database) => database
            .connect()
            .query_one("SELECT COUNT(*) FROM telemetry WHERE run_id = $1", &[&run])
            .unwrap()
            .get(0),
        None => rusqlite::Connection::open(place.directory.join("b/state.db"))
            .unwrap()
            .query_row(
                "SELECT COUNT(*) FROM telemetry WHERE run_id = ?1",
                [run],
                |row| row.get(0),
            )
            .unwrap(),
    }
}

/// Pruning the run driven in turn (finished on host `b`, in real time) deletes its telemetry
/// from the store, and `logs` then knows no such run.
fn pruning_takes_the_telemetry(place: &Place, database: Option<&support::postgres::TestDatabase>) {
    assert!(stored_parts(place, database, "turns") > 0);
    let (code, stdout, stderr) = place.run("b", &["runs", "prune", "--older-than", "0s"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("pruned "), "{stdout}{stderr}");
    assert_eq!(stored_parts(place, database, "turns"), 0);
    assert!(!place.telemetry_file("b", "turns").exists());
    let (code, _, stderr) = place.run("b", &["logs", "turns"]);
    assert_eq!(code, 66, "{stderr}");
    assert!(stderr.contains("no run `turns`"), "{stderr}");
}

#[test]
fn sqlite_keeps_telemetry_in_the_store() {
    let place = Place::new("sqlite", Vec::new());
    logs_and_stats_are_the_same_from_any_host(&place);
    a_run_driven_in_turn_shows_both_parts(&place, "turns", Stop::Signal);
    pruning_takes_the_telemetry(&place, None);
}

#[test]
fn postgres_keeps_telemetry_in_the_store() {
    let Some(database) =
        support::postgres::database("telemetry_store::postgres_keeps_telemetry_in_the_store")
    else {
        return;
    };
    let place = Place::on_postgres("postgres", &database);
    logs_and_stats_are_the_same_from_any_host(&place);
    a_run_driven_in_turn_shows_both_parts(&place, "turns", Stop::Signal);
    a_run_driven_in_turn_shows_both_parts(&place, "died", Stop::Death);
    pruning_takes_the_telemetry(&place, Some(&database));
}
