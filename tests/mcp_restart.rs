//! A restarted `protocol-run mcp` resumes the runs a killed or closed server left, real processes driven by the official Python SDK: their reports keep the directives from before the restart, a changed protocol or a run another process drives is left and named, `--no-resume` leaves them all, timers keep their deadlines.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::mcp::{drive, ittw, served_ittw, served_ittw_from, step};

/// `status RUN --json`, run from `directory` over its `state`.
fn status(directory: &Path, run: &str) -> Value {
    let (code, text) = crate::support::run_binary_with_state(directory, &["status", run, "--json"]);
    assert_eq!(code, 0, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// The names of a report's directives, in order.
fn directive_names(report: &Value) -> Vec<&str> {
    report["directives"]
        .as_array()
        .unwrap_or_else(|| panic!("no directives in {report}"))
        .iter()
        .map(|directive| directive["directive"].as_str().unwrap())
        .collect()
}

/// The `mcp:` lines of a server's stderr (its log lines are JSON).
fn notices(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|line| line.starts_with("mcp: "))
        .collect()
}

/// Starts ITTW case B (a missing file) in a server that is killed once the run waits for
/// `captain_guidance`; returns the run id.
fn ittw_left_by_a_killed_server(directory: &Path, protocol: &Path) -> String {
    let (lines, _) = drive(directory, "kill", &served_ittw_from(protocol));
    step(&lines, "waiting")["run"].as_str().unwrap().to_string()
}

/// ITTW's run `run`, left by a restarted server: `got`, its report, has it running but not
/// live, with the directives its journal kept, and the store still has it running.
fn assert_left_not_live(directory: &Path, run: &str, got: &Value) {
    assert_eq!(
        (&got["run"], &got["status"], &got["live"]),
        (&json!(run), &json!("running"), &json!(false)),
        "{got}"
    );
    // Not live, yet its journal's directives are read back.
    assert_eq!(directive_names(got), ["escalate_to_captain"]);
    assert_eq!(status(directory, run)["status"], json!("running"));
}

fn canonical(path: &Path) -> String {
    path.canonicalize().unwrap().display().to_string()
}

#[test]
fn a_restarted_server_resumes_a_killed_servers_run_with_its_directives() {
    let directory = crate::support::temporary_directory("mcp-restart", "killed");
    let run = ittw_left_by_a_killed_server(&directory, &ittw());
    let left = status(&directory, &run);
    assert_eq!(left["status"], json!("running"), "{left}");
    assert_eq!(left["origin"], json!("mcp"), "{left}");

    let (lines, stderr) = drive(&directory, &format!("guide:{run}"), &served_ittw());
    assert_eq!(
        notices(&stderr),
        [format!(
            "mcp: resumed {run} ({}, 1 state: waiting_for_guidance)",
            canonical(&ittw())
        )]
    );
    let got = &step(&lines, "got")["report"];
    assert_eq!(got["status"], json!("running"), "{got}");
    assert_eq!(got["states"], json!(["waiting_for_guidance"]));
    assert_eq!(got["events"], json!([{"name": "captain_guidance"}]));
    assert_eq!(directive_names(got), ["escalate_to_captain"]);
    assert_eq!(got["directives"][0]["path"], json!("missing/file.txt"));
    assert_eq!(got["directives"][0]["grep_failed"], json!(true));

    let sent = &step(&lines, "sent")["report"];
    assert_eq!(sent["status"], json!("finished"), "{sent}");
    assert_eq!(
        sent["finished"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
    assert_eq!(directive_names(sent), ["escalate_to_captain"]);
    let finished = status(&directory, &run);
    assert_eq!(finished["status"], json!("finished"), "{finished}");
    assert_eq!(finished["finish"]["exit_code"], json!(0));
    assert_eq!(
        finished["finish"]["output"],
        json!({"guidance": {"action": "skip the task"}})
    );
}

#[test]
fn a_run_stopped_when_its_client_went_is_resumed_by_the_next_server() {
    let directory = crate::support::temporary_directory("mcp-restart", "closed");
    let (lines, _) = drive(&directory, "leave", &served_ittw());
    let run = step(&lines, "waiting")["run"].as_str().unwrap().to_string();
    let left = status(&directory, &run);
    assert_eq!(left["status"], json!("stopped"), "{left}");

    let (lines, stderr) = drive(&directory, &format!("guide:{run}"), &served_ittw());
    assert_eq!(notices(&stderr).len(), 1, "{stderr}");
    assert!(notices(&stderr)[0].starts_with(&format!("mcp: resumed {run} (")));
    let got = &step(&lines, "got")["report"];
    assert_eq!(got["status"], json!("running"), "{got}");
    assert_eq!(directive_names(got), ["escalate_to_captain"]);
    assert_eq!(step(&lines, "sent")["report"]["status"], json!("finished"));
    assert_eq!(status(&directory, &run)["status"], json!("finished"));
}

/// A run whose protocol changed goes on with the text it started with (pinned), said on
/// stderr; one whose text the store does not keep (recorded before texts were kept apart, say)
/// is left and named.
#[test]
fn a_run_whose_protocol_changed_goes_on_with_its_text_unless_it_is_not_kept() {
    let directory = crate::support::temporary_directory("mcp-restart", "changed");
    let protocol = directory.join("ittw.yaml");
    std::fs::copy(ittw(), &protocol).unwrap();
    let run = ittw_left_by_a_killed_server(&directory, &protocol);
    let mut text = std::fs::read_to_string(&protocol).unwrap();
    text.push_str("# edited while the run waited\n");
    std::fs::write(&protocol, text).unwrap();
    // Not kept: the notice names the file and both hashes, then what to do.
    let store = rusqlite::Connection::open(directory.join("state/state.db")).unwrap();
    let kept: (String, String) = store
        .query_row("SELECT hash, text FROM protocol_texts", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    store.execute("DELETE FROM protocol_texts", []).unwrap();
    let (lines, stderr) = drive(
        &directory,
        &format!("get:{run}"),
        &served_ittw_from(&protocol),
    );
    let said = notices(&stderr);
    let prefix = format!(
        "mcp: not resumed {run}: {} changed since run `{run}` started (recorded ",
        canonical(&protocol)
    );
    assert!(
        said.len() == 1
            && said[0].starts_with(&prefix)
            && said[0].ends_with(
                "; resuming would mix two protocols. The texts it started with are not all \
                 kept: restore the file to resume it"
            ),
        "{stderr}"
    );
    assert_left_not_live(&directory, &run, &step(&lines, "got")["report"]);
    // Kept: it goes on with it.
    store
        .execute(
            "INSERT INTO protocol_texts (hash, text) VALUES (?1, ?2)",
            [&kept.0, &kept.1],
        )
        .unwrap();
    let (lines, stderr) = drive(
        &directory,
        &format!("get:{run}"),
        &served_ittw_from(&protocol),
    );
    let said = notices(&stderr);
    assert!(
        said.contains(
            &format!(
                "mcp: {} changed since run `{run}` started; it goes on with the text it started \
                 with",
                canonical(&protocol)
            )
            .as_str()
        ) && said
            .iter()
            .any(|line| line.starts_with(&format!("mcp: resumed {run} ("))),
        "{stderr}"
    );
    let got = &step(&lines, "got")["report"];
    assert_eq!(got["states"], json!(["waiting_for_guidance"]), "{got}");
}

#[test]
fn no_resume_leaves_the_runs_for_resume_run_whose_report_keeps_the_directives() {
    let directory = crate::support::temporary_directory("mcp-restart", "no-resume");
    let run = ittw_left_by_a_killed_server(&directory, &ittw());
    let protocol = ittw();
    let no_resume = [&["--no-resume".into()], &served_ittw_from(&protocol)[..]].concat();

    let (lines, stderr) = drive(&directory, &format!("get:{run}"), &no_resume);
    assert_eq!(notices(&stderr), Vec::<&str>::new());
    assert_left_not_live(&directory, &run, &step(&lines, "got")["report"]);

    let (lines, stderr) = drive(&directory, &format!("resume:{run}"), &no_resume);
    assert_eq!(notices(&stderr), Vec::<&str>::new());
    let resumed = &step(&lines, "resumed")["report"];
    assert_eq!(resumed["states"], json!(["waiting_for_guidance"]));
    assert_eq!(directive_names(resumed), ["escalate_to_captain"]);
    assert_eq!(step(&lines, "sent")["report"]["status"], json!("finished"));
}

/// `protocol-run resume RUN`, driving the run over `directory`'s `state` and waiting for events
/// on a stdin kept open, once it holds the run: its lock taken, and the store naming it the
/// run's holder.
pub(crate) fn hold(directory: &Path, run: &str) -> std::process::Child {
    let holder = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["resume", run, "--events", "-", "--state-dir"])
        .arg(directory.join("state"))
        .current_dir(directory)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = directory.join("state/runs").join(run).join("run.lock");
    let holding = std::time::Instant::now();
    let recorded = || {
        protocol_run::store::SqliteStore::open(directory.join("state"))
            .ok()
            .and_then(|store| {
                protocol_run::store::Store::run_summary(&store, run)
                    .ok()
                    .flatten()
            })
            .and_then(|summary| summary.holder)
            .is_some_and(|recorded| recorded.pid == holder.id())
    };
    while std::fs::read_to_string(&lock).unwrap_or_default() != holder.id().to_string()
        || !recorded()
    {
        assert!(
            holding.elapsed() < std::time::Duration::from_secs(20),
            "`resume` never took the run's lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    holder
}

#[test]
fn a_run_another_process_drives_is_not_taken_over() {
    let directory = crate::support::temporary_directory("mcp-restart", "held");
    let run = ittw_left_by_a_killed_server(&directory, &ittw());
    let mut holder = hold(&directory, &run);

    let (lines, stderr) = drive(&directory, &format!("get:{run}"), &served_ittw());
    holder.kill().unwrap();
    holder.wait().unwrap();
    let notices = notices(&stderr);
    assert_eq!(notices.len(), 1, "{stderr}");
    assert!(
        notices[0].starts_with(&format!(
            "mcp: not resumed {run}: run `{run}` is being run by another process (pid {}",
            holder.id()
        )),
        "{stderr}"
    );
    assert_eq!(step(&lines, "got")["report"]["live"], json!(false));
}

/// Waits in `waiting`, emitting `armed`, until its timer fires 3 s after it started.
const ALARM: &str = "id: alarm
permissions: { exec: [], write: [], read: [], env: [] }
states:
  waiting:
    entry: [{ emit: armed }]
    on: { snooze: waiting }
    after:
      - { delay: 3s, target: rang }
  rang: { type: final, exit_code: 0 }
";

#[test]
fn a_resumed_runs_timer_fires_at_its_original_deadline() {
    let directory = crate::support::temporary_directory("mcp-restart", "timer");
    let protocol: PathBuf = directory.join("alarm.yaml");
    std::fs::write(&protocol, ALARM).unwrap();
    let (lines, _) = drive(&directory, "start_kill:alarm", &[&protocol]);
    let run = step(&lines, "started")["report"]["run"]
        .as_str()
        .unwrap()
        .to_string();
    let left = status(&directory, &run);
    let due = left["state"]["timers"][0]["due"]
        .as_str()
        .unwrap()
        .to_string();
    let restarted = protocol_run::base::clock::unix_milliseconds_now();

    let (lines, stderr) = drive(&directory, &format!("finish:{run}"), &[&protocol]);
    assert_eq!(notices(&stderr).len(), 1, "{stderr}");
    assert_eq!(directive_names(&step(&lines, "got")["report"]), ["armed"]);
    let ended = &step(&lines, "ended")["report"];
    assert_eq!(ended["status"], json!("finished"), "{ended}");
    assert_eq!(ended["finished"]["state"], json!("rang"));
    let finished = status(&directory, &run);
    let fired = finished["last_events"].as_array().unwrap().last().unwrap()["at"]
        .as_str()
        .unwrap()
        .to_string();
    // RFC 3339 at a fixed width, all UTC: the text orders as the instants do. Not before its
    // deadline, and before a timer restarted at the resume could have fired.
    assert!(fired >= due, "fired at {fired}, due at {due}");
    let restarted_deadline = protocol_run::base::clock::format_rfc3339(restarted + 3_000);
    assert!(
        fired < restarted_deadline,
        "fired at {fired}: restarted at the resume, not kept at {due}"
    );
}

/// Delegates to `CHILD`, which asks for a review: a directive the parent forwards.
const PARENT: &str = "id: parent
permissions: { exec: [], write: [], env: [] }
states:
  delegating:
    entry: [{ emit: delegated }]
    invoke:
      - { protocol: child.yaml, id: helper }
    on:
      done.invoke.helper: finished
      stop: finished
  finished: { type: final }
";

const CHILD: &str = "id: child
permissions: { exec: [], write: [], read: [], env: [] }
states:
  asking:
    entry: [{ emit: need_review, data: { page: 3 } }]
    on: { reviewed: done }
  done: { type: final }
";

#[test]
fn a_childs_directives_are_recorded_with_its_parents_and_reported_after_a_restart() {
    let directory = crate::support::temporary_directory("mcp-restart", "child");
    let protocol = directory.join("parent.yaml");
    std::fs::write(&protocol, PARENT).unwrap();
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    let (lines, _) = drive(&directory, "start_kill:parent,2", &[&protocol]);
    let before = &step(&lines, "started")["report"];
    let run = before["run"].as_str().unwrap().to_string();

    let (lines, stderr) = drive(
        &directory,
        &format!("get:{run}"),
        &served_ittw_from(&protocol),
    );
    assert_eq!(notices(&stderr).len(), 1, "{stderr}");
    let after = &step(&lines, "got")["report"];
    assert_eq!(after["directives"], before["directives"]);
    assert_eq!(
        after["directives"],
        json!([
            {"directive": "delegated"},
            {"directive": "need_review", "page": 3, "from": "helper"},
        ])
    );
}

/// Waits for an event that never comes.
const WAITER: &str = "id: waiter
permissions: { exec: [], write: [], read: [], env: [] }
states:
  waiting:
    on: { go: gone }
  gone: { type: final }
";

#[test]
fn a_restarted_server_names_twenty_resumed_runs_and_counts_the_rest() {
    let directory = crate::support::temporary_directory("mcp-restart", "many");
    let protocol = directory.join("waiter.yaml");
    std::fs::write(&protocol, WAITER).unwrap();
    drive(&directory, "start_many:waiter,23", &[&protocol]);

    let (lines, stderr) = drive(&directory, "list", &[&protocol]);
    let notices = notices(&stderr);
    assert_eq!(notices.len(), 21, "{stderr}");
    assert!(
        notices[..20]
            .iter()
            .all(|line| line.starts_with("mcp: resumed waiter:mcp-")
                && line.ends_with("1 state: waiting)")),
        "{stderr}"
    );
    assert_eq!(
        notices[20],
        "mcp: resumed 3 more runs (`protocol-run runs --status running` lists them)"
    );
    // Every one of them is live again.
    let runs = step(&lines, "listed")["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 23);
    assert!(
        runs.iter().all(|run| run["status"] == "running"),
        "{runs:?}"
    );
}

/// Waits for an event, holding a secret input.
const SECRETIVE: &str = "id: secretive
inputs:
  token: { type: string, required: true, secret: true }
permissions: { exec: [], write: [], read: [], env: [] }
states:
  waiting:
    on: { go: gone }
  gone: { type: final }
";

#[test]
fn a_run_with_a_secret_input_is_left_naming_the_command_that_resumes_it() {
    use crate::support::mcp_raw::{RawMcp, reported_run};
    let directory = crate::support::temporary_directory("mcp-restart", "secret");
    std::fs::write(directory.join("secretive.yaml"), SECRETIVE).unwrap();
    let mut server = RawMcp::start(&directory, &["secretive.yaml"], json!({}));
    let started = server.call(1, "secretive", json!({"token": "s3cret-value"}));
    let run = reported_run(&started);
    server.finish();

    let server = RawMcp::start(&directory, &["secretive.yaml"], json!({}));
    let stderr = server.finish();
    assert_eq!(
        notices(&stderr),
        [format!(
            "mcp: not resumed {run}: secret input `token` is not stored with the run: a client \
             cannot supply it; start the server with --input token=VALUE, or \
             `protocol-run resume {run} --input token=VALUE` resumes it outside this server"
        )]
    );
    assert!(!stderr.contains("s3cret-value"), "{stderr}");

    // The operator pins it: the run resumes with it.
    let pinned = ["--input", "token=s3cret-value", "secretive.yaml"];
    let server = RawMcp::start(&directory, &pinned, json!({}));
    let stderr = server.finish();
    assert_eq!(
        notices(&stderr),
        [format!(
            "mcp: resumed {run} ({}, 1 state: waiting)",
            canonical(&directory.join("secretive.yaml"))
        )]
    );
    assert!(!stderr.contains("s3cret-value"), "{stderr}");
}

#[test]
fn serve_leaves_the_runs_an_mcp_server_started_to_the_next_one() {
    let directory = crate::support::temporary_directory("mcp-restart", "serve-leaves");
    let mut server = crate::mcp_limits::serve_waiter(&directory, &[], json!({}));
    let run = crate::support::mcp_raw::reported_run(&server.call(1, "waiter", json!({})));
    server.finish();

    let (code, stderr) =
        crate::support::run_binary_with_state(&directory, &["serve", "waiter.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(
            "serve: 1 unfinished run(s) of this protocol were started by `protocol-run mcp` and \
             are left to it (the next `mcp` server resumes them)"
        ),
        "{stderr}"
    );
    let server = crate::mcp_limits::serve_waiter(&directory, &[], json!({}));
    let stderr = server.finish();
    assert!(stderr.contains(&format!("mcp: resumed {run} ")), "{stderr}");
}
