//! `--otlp` on the hosts of many runs: each `serve` instance and each `mcp` run is its own trace whose spans match its journal, an MCP call's `_meta.traceparent` makes its run a child of that trace, and an instance resumed by another host after a crash goes on in its trace with the spans the dead host left open ended `interrupted`.

use std::io::{BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::otlp::{Collector, attribute, event, named, status_code};
use crate::postgres_hosts::line_with;
use crate::support;

/// Logs, waits for `go`, runs an effect, and ends.
const SERVED: &str = r#"
id: served
states:
  waiting:
    entry:
      - log: "waiting for go"
        tags: [waiting]
    on:
      go: working
  working:
    entry:
      - exec: [sh, -c, 'true']
        id: op
    on:
      done.exec.op: done
  done: { type: final }
"#;

/// Ends at once, having logged.
const QUICK: &str = r#"
id: quick
description: Ends at once.
states:
  working:
    entry:
      - log: "working"
    always: done
  done: { type: final }
"#;

/// The spans of run `run`, by the `protocol_run.run_id` every span carries.
fn of_run<'a>(spans: &'a [Value], run: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|span| attribute(span, "protocol_run.run_id") == run)
        .collect()
}

/// The span of `spans` named `name`; fails unless there is exactly one.
fn only<'a>(spans: &[&'a Value], name: &str) -> &'a Value {
    let found: Vec<&&Value> = spans.iter().filter(|span| span["name"] == name).collect();
    assert_eq!(found.len(), 1, "one `{name}` in {spans:?}");
    found[0]
}

/// `status RUN --json` in `directory`.
fn status_of(directory: &std::path::Path, environment: &[(&str, &str)], run: &str) -> Value {
    let (code, status, stderr) =
        support::run_binary_in(directory, environment, &["status", run, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&status).unwrap()
}

#[test]
fn a_serve_instance_is_a_trace_of_its_own_that_matches_its_journal() {
    let directory = support::temporary_directory("otlp-hosts", "serve");
    std::fs::write(directory.join("served.yaml"), SERVED).unwrap();
    let collector = Collector::start(&directory);
    let input =
        b"{\"instance\": \"a\"}\n{\"instance\": \"b\"}\n{\"instance\": \"a\", \"event\": \"go\"}\n";
    let output = support::run_binary_with_input(
        &directory,
        &[
            "serve",
            "served.yaml",
            "--state-dir",
            "state",
            "--otlp",
            &collector.endpoint,
        ],
        input,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let spans = support::eventually("the root span of `served:a` arrives", || {
        let spans = collector.spans();
        (!named(&spans, "run served").is_empty()).then_some(spans)
    });
    // `a` finished: its root span, under no parent, with every span of its in its trace.
    let a = of_run(&spans, "served:a");
    let root = only(&a, "run served");
    assert_eq!(root["parent_span_id"], "", "an instance is a trace's root");
    assert_eq!(status_code(root), "STATUS_CODE_OK");
    assert_eq!(attribute(root, "protocol_run.exit_code"), "0");
    assert!(a.iter().all(|span| span["trace_id"] == root["trace_id"]));
    let status = status_of(&directory, &[], "served:a");
    assert_eq!(status["status"], "finished", "{status}");
    // Its state visits are the states its journal went through, each under the root.
    for state in ["waiting", "working", "done"] {
        let visit = only(&a, &format!("state {state}"));
        assert_eq!(visit["parent_span_id"], root["span_id"], "{state}");
    }
    let working = only(&a, "state working");
    let effect = only(&a, "effect op");
    assert_eq!(effect["parent_span_id"], working["span_id"]);
    assert_eq!(attribute(effect, "protocol_run.outcome"), "completed");
    let attempt = only(&a, "attempt 1");
    assert_eq!(attempt["parent_span_id"], effect["span_id"]);
    let waiting = only(&a, "state waiting");
    let log = event(waiting, "log").expect("the log is an event of `waiting`");
    assert!(log.to_string().contains("waiting for go"), "{log}");
    // `b` waits on, parked when input ended: a trace of its own, its open visit ended
    // `stopped`, its root span not sent (it has not finished).
    let b = of_run(&spans, "served:b");
    assert!(b.iter().all(|span| span["name"] != "run served"), "{b:?}");
    let parked = only(&b, "state waiting");
    assert_ne!(parked["trace_id"], root["trace_id"]);
    assert_eq!(parked["status"]["message"], "stopped");
}

#[test]
fn an_mcp_run_started_with_a_meta_traceparent_is_a_child_of_that_trace() {
    let directory = support::temporary_directory("otlp-hosts", "mcp");
    std::fs::write(directory.join("quick.yaml"), QUICK).unwrap();
    let collector = Collector::start(&directory);
    let mut server = support::mcp_raw::RawMcp::start(
        &directory,
        &["--otlp", &collector.endpoint, "quick.yaml"],
        json!({}),
    );
    let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let child = server.request(
        1,
        "tools/call",
        json!({"name": "quick", "arguments": {}, "_meta": {"traceparent": parent}}),
    )["result"]
        .clone();
    let child_run = support::mcp_raw::reported_run(&child);
    let own = server.call(2, "quick", json!({}));
    let own_run = support::mcp_raw::reported_run(&own);
    // One that does not parse is ignored, as W3C says, and said on stderr.
    let ignored = server.request(
        3,
        "tools/call",
        json!({"name": "quick", "arguments": {}, "_meta": {"traceparent": "00-not-a-span-01"}}),
    )["result"]
        .clone();
    let ignored_run = support::mcp_raw::reported_run(&ignored);
    // A call made a task (the 2025-11-25 dialect) takes its `_meta.traceparent` too.
    let task_parent = "00-1bf8651916cd43dd8448eb211c80319c-c8be8c7169203331-01";
    let task = server.request(
        4,
        "tools/call",
        json!({"name": "quick", "arguments": {}, "task": {"ttl": 60000},
               "_meta": {"traceparent": task_parent}}),
    );
    let task_run = task["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {task}"))
        .to_string();
    let stderr = server.finish();
    assert!(
        stderr.contains("_meta.traceparent \"00-not-a-span-01\" is not a W3C traceparent"),
        "{stderr}"
    );
    let spans = support::eventually("the four root spans arrive", || {
        let spans = collector.spans();
        (named(&spans, "run quick").len() == 4).then_some(spans)
    });
    let task = of_run(&spans, &task_run);
    let task_root = only(&task, "run quick");
    assert_eq!(task_root["trace_id"], "1bf8651916cd43dd8448eb211c80319c");
    assert_eq!(task_root["parent_span_id"], "c8be8c7169203331");
    let ignored = of_run(&spans, &ignored_run);
    assert_eq!(only(&ignored, "run quick")["parent_span_id"], "");
    let child = of_run(&spans, &child_run);
    let root = only(&child, "run quick");
    assert_eq!(
        root["trace_id"], "0af7651916cd43dd8448eb211c80319c",
        "{stderr}"
    );
    assert_eq!(root["parent_span_id"], "b7ad6b7169203331");
    assert!(
        child
            .iter()
            .all(|span| span["trace_id"] == "0af7651916cd43dd8448eb211c80319c")
    );
    assert_eq!(
        only(&child, "state working")["parent_span_id"],
        root["span_id"]
    );
    // A call without one starts a trace of its own.
    let own = of_run(&spans, &own_run);
    let own_root = only(&own, "run quick");
    assert_eq!(own_root["parent_span_id"], "");
    assert_ne!(own_root["trace_id"], root["trace_id"]);
}

/// A `serve` host of `served.yaml` with `--otlp`, its state directory `state`, the variables of
/// `environment` and `arguments`: the process, its input and its output.
fn serving(
    directory: &std::path::Path,
    state: &str,
    endpoint: &str,
    environment: &[(&str, &str)],
    arguments: &[&str],
) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "serve",
            "served.yaml",
            "--state-dir",
            state,
            "--otlp",
            endpoint,
        ])
        .args(arguments)
        .envs(environment.iter().copied())
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let input = child.stdin.take().unwrap();
    let output = BufReader::new(child.stdout.take().unwrap());
    (child, input, output)
}

/// The first host is killed with instance `a` in `waiting`; a second host (`second_state`,
/// after `before_second`) resumes it, and `go` ends it: one trace, the visit the dead host
/// left open ended `interrupted`, the root span sent by the second host with the run's start.
fn a_resumed_instance_continues_its_trace(
    test: &str,
    environment: &[(&str, &str)],
    second_state: &str,
    arguments: &[&str],
    before_second: impl FnOnce(),
) {
    let directory = support::temporary_directory("otlp-hosts", test);
    std::fs::write(directory.join("served.yaml"), SERVED).unwrap();
    let collector = Collector::start(&directory);
    let (mut first, mut first_in, mut first_out) = serving(
        &directory,
        "state",
        &collector.endpoint,
        environment,
        arguments,
    );
    writeln!(first_in, "{{\"instance\": \"a\"}}").unwrap();
    // Reported once committed, with the spans open then.
    line_with(&mut first_out, "\"started\"");
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(
        collector.spans().is_empty(),
        "nothing had ended before the crash"
    );
    before_second();
    let (mut second, mut second_in, mut second_out) = serving(
        &directory,
        second_state,
        &collector.endpoint,
        environment,
        arguments,
    );
    writeln!(second_in, "{{\"instance\": \"a\", \"event\": \"go\"}}").unwrap();
    line_with(&mut second_out, "\"finished\"");
    drop(second_in);
    assert_eq!(second.wait().unwrap().code(), Some(0));
    let spans = support::eventually("the root span arrives", || {
        let spans = collector.spans();
        (!named(&spans, "run served").is_empty()).then_some(spans)
    });
    let a = of_run(&spans, "served:a");
    let root = only(&a, "run served");
    assert_eq!(status_code(root), "STATUS_CODE_OK");
    assert!(a.iter().all(|span| span["trace_id"] == root["trace_id"]));
    let visits: Vec<&&Value> = a
        .iter()
        .filter(|span| span["name"] == "state waiting")
        .collect();
    assert_eq!(visits.len(), 2, "interrupted, then resumed: {visits:?}");
    let interrupted = visits
        .iter()
        .find(|span| span["status"]["message"] == "interrupted")
        .expect("the visit the dead host left open ends interrupted");
    let resumed = visits
        .iter()
        .find(|span| attribute(span, "protocol_run.resumed") == true)
        .expect("the visit goes on in the second host");
    for visit in [interrupted, resumed] {
        assert_eq!(visit["parent_span_id"], root["span_id"]);
    }
    // The root starts with the run, in the first host, before the visit it left open.
    let start = |span: &Value| -> u64 {
        span["start_time_unix_nano"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(start(root) <= start(interrupted));
    assert!(start(interrupted) < start(resumed));
    only(&a, "effect op");
    only(&a, "state done");
}

#[test]
fn sqlite_a_serve_instance_resumed_after_a_crash_continues_its_trace() {
    a_resumed_instance_continues_its_trace("resumed-sqlite", &[], "state", &[], || {});
}

#[test]
fn postgres_an_instance_taken_over_by_another_host_continues_its_trace() {
    let test = "otlp_hosts::postgres_an_instance_taken_over_by_another_host_continues_its_trace";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    let mut client = database.connect();
    // Another host, on its own state directory: it takes the instance over once the dead
    // host's lease has run out by the database's clock.
    a_resumed_instance_continues_its_trace(
        "taken-over-postgres",
        &environment,
        "second",
        &["--lease", "1s"],
        || {
            support::eventually("the dead host's lease runs out", || {
                let row = client
                    .query_one(
                        "SELECT bool_and(expires_at <= (EXTRACT(EPOCH FROM clock_timestamp()) \
                         * 1000)::BIGINT) FROM hosts",
                        &[],
                    )
                    .unwrap();
                row.get::<_, Option<bool>>(0).unwrap_or(false).then_some(())
            });
        },
    );
}
