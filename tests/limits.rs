//! Every limit is hit on purpose and its message checked: file size, states, expression length,
//! event line size, waiting events per `serve` instance.

use std::process::Command;

fn scratch(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("limits", name)
}

/// Runs the binary in `directory` with `arguments` and its state in `state`, `input` on stdin.
fn run_with_input(
    directory: &std::path::Path,
    arguments: &[&str],
    state: &std::path::Path,
    input: &[u8],
) -> std::process::Output {
    let state = state.to_str().unwrap();
    let arguments = [arguments, &["--state-dir", state]].concat();
    crate::support::run_binary_with_input(directory, &arguments, input)
}

fn validate(name: &str, text: &str) -> String {
    let directory = scratch(name);
    std::fs::write(directory.join("p.yaml"), text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["validate", "p.yaml"])
        .current_dir(&directory)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(65));
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn a_protocol_file_over_one_mebibyte_is_refused() {
    let text = format!(
        "id: big\n# {}\nstates: {{ a: {{}} }}\n",
        "x".repeat(1 << 20)
    );
    let stderr = validate("size", &text);
    assert!(
        stderr.contains("larger than the limit of 1048576 bytes"),
        "{stderr}"
    );
}

#[test]
fn more_than_ten_thousand_states_are_refused() {
    let mut text = String::from("id: many\nstates:\n");
    for index in 0..10_001 {
        text.push_str(&format!("  s{index}: {{}}\n"));
    }
    let stderr = validate("states", &text);
    assert!(
        stderr.contains("the protocol has 10001 states, more than the limit of 10000"),
        "{stderr}"
    );
    assert!(stderr.contains("child protocols"), "{stderr}");
}

#[test]
fn an_expression_over_four_kibibytes_is_refused() {
    let long = vec!["1"; 2100].join(" + ");
    let text = format!("id: long\nstates:\n  a:\n    entry: [{{ log: \"${{{long}}}\" }}]\n");
    let stderr = validate("expression", &text);
    assert!(stderr.contains("longer than the limit of 4096"), "{stderr}");
}

#[test]
fn an_event_line_over_the_limit_is_skipped_and_the_run_goes_on() {
    let directory = scratch("event-line");
    std::fs::write(
        directory.join("p.yaml"),
        "id: events\nstates:\n  a: { on: { go: done } }\n  done: { type: final }\n",
    )
    .unwrap();
    let mut input = format!(
        "{{\"event\": \"go\", \"data\": \"{}\"}}\n",
        "x".repeat(3 << 20)
    );
    input.push_str("{\"event\": \"go\"}\n");
    let output = run_with_input(
        &directory,
        &["p.yaml", "--events", "-", "--max-event-bytes", "1000"],
        &directory.join("state"),
        input.as_bytes(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("events line 1: the line is")
            && stderr.contains(
                "bytes, longer than the limit of 1000 bytes; raise it with --max-event-bytes"
            ),
        "{stderr}"
    );
}

/// `serve` keeps no queue per instance: each line is handled as it is read (a fast writer is
/// slowed down by the reader's bounded hand-over instead), so 50 events for one instance are 50
/// steps, in order. Bad lines are reported with their numbers and skipped.
#[test]
fn a_serve_host_handles_each_line_in_order_and_reports_bad_ones() {
    let directory = scratch("queue");
    std::fs::write(
        directory.join("p.yaml"),
        "id: queue\ncontext: { ticks: 0 }\nstates:\n  a: { on: { tick: { actions: [{ assign: { ticks: \"ticks + 1\" } }] } } }\n",
    )
    .unwrap();
    // Each event has its own name (`tick.N`, which `tick` matches as a prefix), so the output
    // shows the order they were handled in.
    let mut lines = String::from("{\"instance\": \"one\"}\n");
    for number in 1..=50 {
        lines.push_str(&format!(
            "{{\"instance\": \"one\", \"event\": \"tick.{number}\"}}\n"
        ));
    }
    lines.push_str("not json\n");
    lines.push_str("{\"instance\": \"one\", \"evnt\": \"tick\"}\n");
    lines.push_str("{\"event\": \"tick\"}\n");
    lines.push_str("[1, 2]\n");
    // An escaped name is the same instance; a line that is not UTF-8 or too long is skipped,
    // and the lines after it are read where they start.
    lines.push_str("{\"instance\": \"o\\u006ee\", \"event\": \"tick.51\"}\n");
    let mut lines = lines.into_bytes();
    lines.extend_from_slice(b"{\"instance\": \"one\", \"event\": \"\xff\"}\n");
    lines.extend_from_slice(format!("{{\"instance\": \"{}\"}}\n", "x".repeat(2000)).as_bytes());
    lines.extend_from_slice(b"{\"instance\": \"one\", \"event\": \"tick.52\"}\n");
    let mut expected_output =
        vec![r#"{"instance":"one","started":true,"configuration":["a"]}"#.to_string()];
    for number in 1..=52 {
        expected_output.push(format!(
            r#"{{"instance":"one","event":"tick.{number}","configuration":["a"]}}"#
        ));
    }
    for store in ["sqlite", "memory"] {
        let state = directory.join(format!("state-{store}"));
        let output = run_with_input(
            &directory,
            &[
                "serve",
                "p.yaml",
                "--store",
                store,
                "--max-event-bytes",
                "1000",
            ],
            &state,
            &lines,
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        assert_eq!(
            stdout.lines().collect::<Vec<_>>(),
            expected_output,
            "{store}"
        );
        for expected in [
            "input line 52: not JSON",
            "input line 53: unknown field `evnt`, expected one of `instance`, `inputs`, `event`, `data`",
            "input line 54: missing `instance` (a non-empty string)",
            "input line 55: invalid type",
            "input line 57: the line is not UTF-8",
            "input line 58: the line is 2016 bytes, longer than the limit of 1000",
        ] {
            assert!(stderr.contains(expected), "{expected}\n{stderr}");
        }
        // Only the durable host leaves a database behind.
        assert_eq!(
            state.join("state.db").exists(),
            store == "sqlite",
            "{store}"
        );
    }
}

// The YAML node limit (200,000) is hit in `src/pipeline/load/yaml.rs`'s unit tests with a small limit:
// a file that hits the real one takes seconds to parse in a debug build.

#[test]
fn an_events_file_follows_the_rules_of_stdin_line_by_line() {
    let directory = crate::support::temporary_directory("limits", "events-file");
    std::fs::write(
        directory.join("count.yaml"),
        "id: count\ncontext: { n: 0 }\nstates:\n  counting:\n    on:\n      tick: { actions: [{ assign: { n: \"n + 1\" } }] }\n      stop: done\n  done: { type: final, output: { n: \"${n}\" } }\n",
    )
    .unwrap();
    let mut events = Vec::new();
    events.extend_from_slice(b"{\"event\":\"tick\"}\n");
    events.extend_from_slice(b"{\"event\":\"tick\",\"data\":\"\xff\xfe\"}\n");
    events.extend_from_slice(
        format!(
            "{{\"event\":\"tick\",\"data\":\"{}\"}}\n",
            "x".repeat(2_000)
        )
        .as_bytes(),
    );
    events.extend_from_slice(b"{\"event\":\"tick\"}\n{\"event\":\"stop\"}\n");
    std::fs::write(directory.join("events.jsonl"), events).unwrap();
    let state = directory.join("state");
    let (code, stdout, stderr) = crate::support::run_binary(
        &directory,
        &[
            "count.yaml",
            "--events",
            "events.jsonl",
            "--max-event-bytes",
            "1000",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("events line 2: the line is not UTF-8; line skipped"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("events line 3: the line is 2026 bytes, longer than the limit of 1000 bytes"),
        "{stderr}"
    );
    assert!(stdout.contains("\"output\":{\"n\":2}"), "{stdout}");
}

#[test]
fn serve_resumes_no_more_instances_than_its_limit_and_says_how_many_it_left() {
    let directory = scratch("resume-max-instances");
    std::fs::write(
        directory.join("waiter.yaml"),
        "id: waiter\nstates:\n  waiting:\n    on: { go: done }\n  done: { type: final }\n",
    )
    .unwrap();
    let state = directory.join("state");
    let started = b"{\"instance\":\"a\",\"event\":\"hello\"}\n{\"instance\":\"b\",\"event\":\"hello\"}\n{\"instance\":\"c\",\"event\":\"hello\"}\n";
    run_with_input(&directory, &["serve", "waiter.yaml"], &state, started);
    let output = run_with_input(
        &directory,
        &["serve", "waiter.yaml", "--max-instances", "2"],
        &state,
        b"",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "warning: 1 unfinished instance(s) not resumed: 2 are live, the limit \
             (--max-instances); they resume with a later `serve` once fewer are"
        ),
        "{stderr}"
    );
    // The one left still resumes once the limit allows it.
    let output = run_with_input(&directory, &["serve", "waiter.yaml"], &state, b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("not resumed"), "{stderr}");
}
