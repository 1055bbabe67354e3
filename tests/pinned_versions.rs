//! Pinned versions through the real binary, on SQLite and on PostgreSQL: a resumed run whose library or child protocol changed runs the texts it started with, each kept once per content hash; `--upgrade` moves it to the files as they are now.

use std::path::Path;

use crate::support;

/// Logs which version of the library ran.
const LIBRARY: &str = "blocks:\n  greet: { do: [{ log: library v1 }] }\n";

/// Logs which version of the child ran.
const CHILD: &str = "id: child\nstates:\n  a: { type: final, entry: [{ log: child v1 }] }\n";

/// Waits for `go` (nobody sends it at first: the run stops unfinished, exit 75), then uses the
/// library's block and invokes the child.
const MAIN: &str = "id: main
imports: [common.library.yaml]
states:
  waiting:
    on: { go: greeting }
  greeting:
    entry: [{ use: greet }]
    invoke: [{ id: helper, protocol: child.yaml }]
    on: { done.invoke.helper: done }
  done: { type: final }
";

/// A child that is running when its parent stops: it waits for `go`, forwarded by its parent.
const LISTENING_CHILD: &str = "id: child
states:
  listening:
    entry: [{ log: child listening }]
    on: { go: heard }
  heard: { type: final, entry: [{ log: child v1 heard }] }
";

const PARENT: &str = "id: parent
states:
  asking:
    invoke: [{ id: helper, protocol: child.yaml, autoforward: true }]
    on: { done.invoke.helper: done }
  done: { type: final }
";

/// Where a test's runs are kept: SQLite in its directory, or a PostgreSQL database of its own.
struct Kept {
    database: Option<support::postgres::TestDatabase>,
}

impl Kept {
    /// The arguments that choose the store, after the command's own.
    fn store_arguments(&self) -> Vec<&str> {
        let mut arguments = vec!["--state-dir", "state"];
        if let Some(database) = &self.database {
            arguments.extend(["--store", database.url()]);
        }
        arguments
    }

    /// The command line `arguments` on this store.
    fn with_store<'a>(&'a self, arguments: &[&'a str]) -> Vec<&'a str> {
        let mut all = arguments.to_vec();
        all.extend(self.store_arguments());
        all
    }

    /// Runs the binary in `directory` on this store: (exit code, stdout, stderr).
    fn run(&self, directory: &Path, arguments: &[&str]) -> (i32, String, String) {
        support::run_binary(directory, &self.with_store(arguments))
    }

    /// How many texts the store keeps, counted in its table.
    fn texts(&self, directory: &Path) -> i64 {
        let count = "SELECT COUNT(*) FROM protocol_texts";
        match &self.database {
            Some(database) => database.connect().query_one(count, &[]).unwrap().get(0),
            None => rusqlite::Connection::open(directory.join("state/state.db"))
                .unwrap()
                .query_row(count, [], |row| row.get(0))
                .unwrap(),
        }
    }
}

/// Two runs started with the same files share their texts (one row each); resumed after the
/// library and the child protocol changed, one runs the texts it started with, the other is
/// moved to the files (`--upgrade`); a run of the new files adds their texts alone.
fn runs_keep_their_library_and_child(name: &str, kept: &Kept) {
    let directory = support::temporary_directory("pinned_versions", name);
    std::fs::write(directory.join("common.library.yaml"), LIBRARY).unwrap();
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    std::fs::write(directory.join("main.yaml"), MAIN).unwrap();
    std::fs::write(directory.join("go.jsonl"), "{\"event\": \"go\"}\n").unwrap();
    for run in ["first", "second"] {
        let (code, _, stderr) = kept.run(&directory, &["run", "main.yaml", "--run-id", run]);
        assert_eq!(code, 75, "{stderr}");
    }
    // The protocol, the library and the child, once for both runs.
    assert_eq!(kept.texts(&directory), 3);
    std::fs::write(
        directory.join("common.library.yaml"),
        LIBRARY.replace("v1", "v2"),
    )
    .unwrap();
    std::fs::write(directory.join("child.yaml"), CHILD.replace("v1", "v2")).unwrap();
    let library = directory
        .join("common.library.yaml")
        .canonicalize()
        .unwrap();
    let (code, stdout, stderr) = kept.run(&directory, &["resume", "first", "--events", "go.jsonl"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "run `first`: {} changed since the run started; it goes on with the text it started \
             with (--upgrade moves it to the file's)",
            library.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("library v1") && stderr.contains("helper: child v1"),
        "{stderr}"
    );
    assert!(!stderr.contains("v2"), "{stderr}");
    let (code, stdout, stderr) = kept.run(
        &directory,
        &["resume", "second", "--events", "go.jsonl", "--upgrade"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("library v2") && stderr.contains("helper: child v2"),
        "{stderr}"
    );
    assert!(!stderr.contains("goes on with the text"), "{stderr}");
    let (code, _, stderr) = kept.run(&directory, &["run", "main.yaml", "--run-id", "third"]);
    assert_eq!(code, 75, "{stderr}");
    // The new library and child; the protocol's text is the one kept already.
    assert_eq!(kept.texts(&directory), 5);
}

#[test]
fn sqlite_runs_keep_their_library_and_child() {
    runs_keep_their_library_and_child("sqlite", &Kept { database: None });
}

#[test]
fn postgres_runs_keep_their_library_and_child() {
    let Some(database) =
        support::postgres::database("pinned_versions::postgres_runs_keep_their_library_and_child")
    else {
        return;
    };
    runs_keep_their_library_and_child(
        "postgres",
        &Kept {
            database: Some(database),
        },
    );
}

/// A child protocol running when its parent stopped resumes with the text it started with,
/// after its file changed.
fn a_running_child_keeps_its_text(name: &str, kept: &Kept) {
    use std::io::BufRead;
    let directory = support::temporary_directory("pinned_versions", name);
    std::fs::write(directory.join("child.yaml"), LISTENING_CHILD).unwrap();
    std::fs::write(directory.join("parent.yaml"), PARENT).unwrap();
    std::fs::write(directory.join("go.jsonl"), "{\"event\": \"go\"}\n").unwrap();
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(kept.with_store(&["run", "parent.yaml", "--run-id", "parent", "--events", "-"]))
        .current_dir(&directory)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(host.stderr.take().unwrap()).lines();
    let listening = lines
        .by_ref()
        .map(Result::unwrap)
        .any(|line| line.contains("child listening"));
    assert!(listening, "the child never started");
    let (code, rest) = crate::durability::terminate(host, lines);
    assert_eq!(code, Some(75), "{rest}");
    std::fs::write(
        directory.join("child.yaml"),
        LISTENING_CHILD.replace("v1", "v2"),
    )
    .unwrap();
    let (code, stdout, stderr) =
        kept.run(&directory, &["resume", "parent", "--events", "go.jsonl"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("helper: child v1 heard"), "{stderr}");
    assert!(!stderr.contains("v2"), "{stderr}");
}

#[test]
fn sqlite_a_running_child_keeps_its_text() {
    a_running_child_keeps_its_text("sqlite-child", &Kept { database: None });
}

#[test]
fn postgres_a_running_child_keeps_its_text() {
    let Some(database) =
        support::postgres::database("pinned_versions::postgres_a_running_child_keeps_its_text")
    else {
        return;
    };
    a_running_child_keeps_its_text(
        "postgres-child",
        &Kept {
            database: Some(database),
        },
    );
}

/// `serve ARGUMENTS` on this store with `input` as its whole input: (exit code, stdout, stderr).
fn serve(kept: &Kept, directory: &Path, arguments: &[&str], input: &str) -> (i32, String, String) {
    let mut command = vec!["serve"];
    command.extend(arguments);
    let output =
        support::run_binary_with_input(directory, &kept.with_store(&command), input.as_bytes());
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// Version 1 of a served protocol: waits for `go`, then logs its version and its library's.
const WAITER: &str = "id: waiter
imports: [common.library.yaml]
states:
  waiting:
    on: { go: done }
  done: { type: final, entry: [{ use: greet }, { log: protocol v1 }] }
";

/// Version 2: other states (an instance of version 1 would not find its own), another event
/// first, other logs.
const WAITER_2: &str = "id: waiter
imports: [common.library.yaml]
states:
  pending:
    on: { poke: pending, go: finished }
  finished: { type: final, entry: [{ use: greet }, { log: protocol v2 }] }
";

/// The line `instance` finished with, from a host's output.
fn finished<'a>(stdout: &'a str, instance: &str) -> &'a str {
    stdout
        .lines()
        .find(|line| line.contains(&format!(r#""instance":"{instance}","finished""#)))
        .unwrap_or_else(|| panic!("{instance} did not finish: {stdout}"))
}

/// An instance started under version 1 of a served file, its host restarted with version 2:
/// the instance finishes under version 1 while a new one runs version 2, in the same host;
/// `--force` moves the old instances to the file instead.
fn a_host_runs_two_versions(name: &str, kept: &Kept) {
    let directory = support::temporary_directory("pinned_versions", name);
    std::fs::write(directory.join("common.library.yaml"), LIBRARY).unwrap();
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let poke = |instance: &str| format!("{{\"instance\": \"{instance}\", \"event\": \"poke\"}}\n");
    let go = |instance: &str| format!("{{\"instance\": \"{instance}\", \"event\": \"go\"}}\n");
    let (code, stdout, stderr) = serve(
        kept,
        &directory,
        &["waiter.yaml"],
        &format!("{}{}", poke("old"), poke("moved")),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    std::fs::write(directory.join("waiter.yaml"), WAITER_2).unwrap();
    std::fs::write(
        directory.join("common.library.yaml"),
        LIBRARY.replace("v1", "v2"),
    )
    .unwrap();
    let (code, stdout, stderr) = serve(
        kept,
        &directory,
        &["waiter.yaml"],
        &format!("{}{}", go("old"), go("new")),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let waiter = directory.join("waiter.yaml").canonicalize().unwrap();
    assert!(
        stderr.contains(&format!(
            "serve: {} changed since instance `",
            waiter.display()
        )) && stderr.contains("go on with it (--upgrade moves them to the file's)"),
        "{stderr}"
    );
    // Log lines go to stderr, the instance named.
    let logged = |instance: &str, message: &str| {
        stderr.lines().any(|line| {
            line.contains(&format!(r#""instance":"{instance}""#))
                && line.contains(&format!(r#""message":"{message}""#))
        })
    };
    assert!(
        finished(&stdout, "old").contains(r#""state":"done""#),
        "{stdout}"
    );
    assert!(
        logged("old", "library v1") && logged("old", "protocol v1"),
        "{stderr}"
    );
    assert!(
        finished(&stdout, "new").contains(r#""state":"finished""#),
        "{stdout}"
    );
    assert!(
        logged("new", "library v2") && logged("new", "protocol v2"),
        "{stderr}"
    );
    // `--force` moves an instance to the file, refused while its state is gone from it.
    let (code, stdout, stderr) = serve(kept, &directory, &["waiter.yaml", "--force"], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("instance `moved` cannot resume")
            && stderr.contains("`waiting`, which the protocol does not have"),
        "{stderr}"
    );
}

#[test]
fn sqlite_a_host_runs_two_versions() {
    a_host_runs_two_versions("sqlite-serve", &Kept { database: None });
}

#[test]
fn postgres_a_host_runs_two_versions() {
    let Some(database) =
        support::postgres::database("pinned_versions::postgres_a_host_runs_two_versions")
    else {
        return;
    };
    a_host_runs_two_versions(
        "postgres-serve",
        &Kept {
            database: Some(database),
        },
    );
}

/// On PostgreSQL a running host serving version 2 of a file takes over, with version 1, the
/// instance a host serving version 1 left when it was killed, beside its own of version 2.
#[test]
fn postgres_a_running_host_takes_over_an_instance_of_the_older_version() {
    use crate::postgres_hosts::line_with;
    use std::io::Write;
    let test =
        "pinned_versions::postgres_a_running_host_takes_over_an_instance_of_the_older_version";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let directory = support::temporary_directory("pinned_versions", "postgres-takeover");
    std::fs::write(directory.join("common.library.yaml"), LIBRARY).unwrap();
    std::fs::write(directory.join("waiter.yaml"), WAITER).unwrap();
    let host = |state: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args([
                "serve",
                "waiter.yaml",
                "--state-dir",
                state,
                "--lease",
                "1s",
            ])
            .args(["--store", database.url()])
            .current_dir(&directory)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = std::io::BufReader::new(child.stdout.take().unwrap());
        (child, input, output)
    };
    let (mut first, mut first_in, mut first_out) = host("first");
    writeln!(first_in, "{{\"instance\": \"old\"}}").unwrap();
    line_with(&mut first_out, "\"waiting\"");
    std::fs::write(directory.join("waiter.yaml"), WAITER_2).unwrap();
    let (second, mut second_in, mut second_out) = host("second");
    writeln!(second_in, "{{\"instance\": \"new\"}}").unwrap();
    line_with(&mut second_out, "\"pending\"");
    first.kill().unwrap();
    first.wait().unwrap();
    drop(first_in);
    // Taken over with the text it started with, while the host runs.
    line_with(&mut second_out, r#"{"instance":"old","resumed""#);
    writeln!(second_in, "{{\"instance\": \"old\", \"event\": \"go\"}}").unwrap();
    let old = line_with(&mut second_out, r#"{"instance":"old","finished""#);
    assert!(old.contains(r#""state":"done""#), "{old}");
    writeln!(second_in, "{{\"instance\": \"new\", \"event\": \"go\"}}").unwrap();
    let new = line_with(&mut second_out, r#"{"instance":"new","finished""#);
    assert!(new.contains(r#""state":"finished""#), "{new}");
    drop(second_in);
    let output = second.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("instance `old` taken over")
            && stderr.contains("\"message\":\"protocol v1\"")
            && stderr.contains("\"message\":\"protocol v2\""),
        "{stderr}"
    );
}

/// Approved at once; its waiting state uses the library.
const DEPLOY: &str = "id: deploy
imports: [common.library.yaml]
states:
  waiting:
    entry: [{ use: greet }]
    on: { approve: done }
  done: { type: final, exit_code: 0 }
";

/// A new version, without the library, whose `approve` fails, written at the same pointer.
const DEPLOY_FAILING: &str = "id: deploy
states:
  waiting:
    on: { approve: failed }
  done: { type: final, exit_code: 0 }
  failed: { type: final, exit_code: 1 }
";

/// `replay --against` and `status` read a run's journal with the texts it started with, its
/// library's included: its library gone, the transition it took is still known by its states
/// and named, so a new version that takes another one at the same pointer diverges (compared by
/// pointer, it would replay cleanly).
fn replay_reads_the_journal_with_the_texts_kept(name: &str, kept: &Kept) {
    let directory = support::temporary_directory("pinned_versions", name);
    std::fs::write(directory.join("common.library.yaml"), LIBRARY).unwrap();
    std::fs::write(directory.join("deploy.yaml"), DEPLOY).unwrap();
    std::fs::write(directory.join("failing.yaml"), DEPLOY_FAILING).unwrap();
    std::fs::write(
        directory.join("approve.jsonl"),
        "{\"event\": \"approve\"}\n",
    )
    .unwrap();
    let (code, _, stderr) = kept.run(
        &directory,
        &[
            "run",
            "deploy.yaml",
            "--run-id",
            "deployed",
            "--events",
            "approve.jsonl",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    std::fs::remove_file(directory.join("common.library.yaml")).unwrap();
    // `status` names the transitions it took the same way.
    let (code, stdout, stderr) = kept.run(&directory, &["status", "deployed", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("waiting → done (approve)"), "{stdout}");
    let (code, stdout, stderr) = kept.run(
        &directory,
        &["replay", "deployed", "--against", "failing.yaml"],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "the journal took `waiting → done (approve)`; the new version takes `waiting → \
             failed (approve)`"
        ),
        "{stdout}"
    );
}

#[test]
fn sqlite_replay_reads_the_journal_with_the_texts_kept() {
    replay_reads_the_journal_with_the_texts_kept("sqlite-replay", &Kept { database: None });
}

#[test]
fn postgres_replay_reads_the_journal_with_the_texts_kept() {
    let Some(database) = support::postgres::database(
        "pinned_versions::postgres_replay_reads_the_journal_with_the_texts_kept",
    ) else {
        return;
    };
    replay_reads_the_journal_with_the_texts_kept(
        "postgres-replay",
        &Kept {
            database: Some(database),
        },
    );
}
