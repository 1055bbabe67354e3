//! Loading is linear in the file: the worst shapes within the size limits validate, check, start or import quickly.

use std::fmt::Write as _;

use crate::support::{run_binary, temporary_directory};

/// What "quickly" allows here, in one-state validates measured at the same moment
/// (`support::timing`, 20 ms in the debug binary on the project's machine): each shape takes up
/// to about 100 of them, and took from 750 to hundreds of thousands before loading was made
/// linear.
const QUICKLY: u32 = 500;

/// Runs the binary in `directory` and checks it finished within `QUICKLY`; returns (exit code,
/// stdout, stderr).
fn run_quickly(directory: &std::path::Path, arguments: &[&str]) -> (i32, String, String) {
    crate::support::timing::within(&format!("`{}`", arguments.join(" ")), QUICKLY, || {
        run_binary(directory, arguments)
    })
}

/// 50,000 `on` keys on one state (0.8 MB).
fn fifty_thousand_on_keys() -> String {
    let mut text = String::from("id: many\npermissions: { exec: [] }\nstates:\n  a:\n    on:\n");
    for index in 0..50_000 {
        writeln!(text, "      e{index}: b").unwrap();
    }
    text.push_str("  b: { type: final }\n");
    text
}

#[test]
fn a_child_invoked_twice_at_each_of_22_levels_is_compiled_once() {
    let directory = temporary_directory("loading", "chain");
    for level in 0..22 {
        let text = if level < 21 {
            let next = level + 1;
            format!(
                "id: p{level}\nstates:\n  a:\n    invoke: [{{ id: x, protocol: p{next}.yaml }}, {{ id: y, protocol: p{next}.yaml }}]\n    on: {{ done.invoke.x: b }}\n  b: {{ type: final }}\n"
            )
        } else {
            format!("id: p{level}\nstates:\n  a: {{ type: final }}\n")
        };
        std::fs::write(directory.join(format!("p{level}.yaml")), text).unwrap();
    }
    let (code, stdout, stderr) = run_quickly(&directory, &["validate", "p0.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ok: p0.yaml"), "{stdout}");
}

#[test]
fn an_invalid_child_invoked_twice_is_reported_once_and_both_invokes_fail() {
    let directory = temporary_directory("loading", "invalid-child");
    std::fs::write(
        directory.join("parent.yaml"),
        "id: parent\nstates:\n  a:\n    invoke: [{ id: x, protocol: child.yaml }, { id: y, protocol: child.yaml }]\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("child.yaml"),
        "id: child\nstates:\n  a: { on: { go: nowhere } }\n",
    )
    .unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["validate", "parent.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert_eq!(
        stderr.matches("unknown target `nowhere`").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("the child protocol `child.yaml` is invalid")
            .count(),
        2,
        "{stderr}"
    );
    assert!(
        stderr.contains("its problems are listed where it is first invoked"),
        "{stderr}"
    );
}

#[test]
fn a_child_cycle_through_a_shared_child_is_still_caught() {
    let directory = temporary_directory("loading", "cycle");
    std::fs::write(
        directory.join("a.yaml"),
        "id: a\nstates:\n  s:\n    invoke: [{ id: x, protocol: b.yaml }, { id: y, protocol: b.yaml }]\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("b.yaml"),
        "id: b\nstates:\n  s:\n    invoke: [{ id: x, protocol: a.yaml }]\n",
    )
    .unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["validate", "a.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("invoke cycle: `a.yaml`"), "{stderr}");
}

#[test]
fn fifty_thousand_on_keys_validate_check_and_run_quickly() {
    let directory = temporary_directory("loading", "on-keys");
    std::fs::write(directory.join("many.yaml"), fifty_thousand_on_keys()).unwrap();
    let (code, stdout, stderr) = run_quickly(&directory, &["validate", "many.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("50001 transitions"), "{stdout}");
    let (code, stdout, stderr) = run_quickly(&directory, &["check", "many.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("no warnings"), "{stdout}");
    // The last key's event is the one taken: the candidate table holds every key.
    std::fs::write(directory.join("events.jsonl"), "{\"event\": \"e49999\"}\n").unwrap();
    let (code, stdout, stderr) = run_quickly(
        &directory,
        &[
            "run",
            "many.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"state\":\"b\""), "{stdout}");
}

#[test]
fn wildcards_and_prefixes_over_many_event_names_match_as_before() {
    // 3,000 states with a `*` transition and 20,000 event names: each wildcard must not cost a
    // pass over every name. A prefix still matches its dotted events, `*` still skips `after`.
    let mut text = String::from(
        "id: wild\nstates:\n  start:\n    after: [{ delay: 1h, target: late }]\n    on:\n",
    );
    for index in 0..20_000 {
        writeln!(text, "      n{index}.x: start").unwrap();
    }
    text.push_str("      '*': { target: w0 }\n  late: { type: final }\n");
    for index in 0..3_000 {
        let next = (index + 1) % 3_000;
        writeln!(
            text,
            "  w{index}: {{ on: {{ n7: w{next}, '*': w{index} }} }}"
        )
        .unwrap();
    }
    let directory = temporary_directory("loading", "wildcards");
    std::fs::write(directory.join("wild.yaml"), text).unwrap();
    std::fs::write(
        directory.join("events.jsonl"),
        "{\"event\": \"other\"}\n{\"event\": \"n7.x\"}\n",
    )
    .unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["validate", "wild.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    let (_, stdout, stderr) = run_quickly(
        &directory,
        &[
            "run",
            "wild.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    );
    // `other` is taken by the `*` of `start` (to w0), `n7.x` by the prefix `n7` of w0 (to w1).
    assert!(
        stderr.contains("stopped unfinished in w1"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn ten_thousand_states_with_targets_validate_and_check_quickly() {
    let mut text = String::from("id: states\nstates:\n");
    for index in 0..9_999 {
        let next = index + 1;
        let jump = (index * 7) % 9_999;
        writeln!(
            text,
            "  s{index}: {{ on: {{ go: s{next}, e{index}: s{jump} }} }}"
        )
        .unwrap();
    }
    text.push_str("  s9999: { type: final }\n");
    let directory = temporary_directory("loading", "states");
    std::fs::write(directory.join("states.yaml"), text).unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["validate", "states.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    run_quickly(&directory, &["check", "states.yaml"]);
}

#[test]
fn ten_thousand_problems_on_one_long_line_are_located_quickly() {
    let keys: Vec<String> = (0..10_000)
        .map(|index| format!("e{index}: nowhere{index}"))
        .collect();
    let text = format!(
        "id: flow\nstates:\n  a: {{ on: {{ {} }} }}\n",
        keys.join(", ")
    );
    let directory = temporary_directory("loading", "flow");
    std::fs::write(directory.join("flow.yaml"), text).unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["validate", "flow.yaml"]);
    assert_eq!(code, 65);
    assert!(
        stderr.ends_with("10000 errors\n"),
        "{}",
        &stderr[stderr.len() - 500..]
    );
    // The last problem is shown from a cut excerpt of its line, the marker under its target.
    let last = stderr.rsplit("error: ").next().unwrap();
    assert!(last.contains("unknown target `nowhere9999`"), "{last}");
    let shown = last.lines().find(|line| line.starts_with("3 | ")).unwrap();
    let marker = last.lines().find(|line| line.contains('^')).unwrap();
    let marked = marker.find('^').unwrap();
    assert!(shown.starts_with("3 | …"), "{shown}");
    let under_marker: String = shown.chars().skip(marked).collect();
    assert!(under_marker.starts_with("nowhere9999"), "{shown}\n{marker}");
}

#[test]
fn an_scxml_element_with_20000_attributes_is_refused_quickly() {
    let attributes: Vec<String> = (0..20_000).map(|index| format!("a{index}=\"v\"")).collect();
    let text = format!(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" version=\"1.0\">\n<state id=\"s\" {}/></scxml>\n",
        attributes.join(" ")
    );
    let directory = temporary_directory("loading", "scxml-attributes");
    std::fs::write(directory.join("wide.scxml"), text).unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["import", "scxml", "wide.scxml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("an element has more than 256 attributes, the most one may have"),
        "{stderr}"
    );
    assert!(stderr.contains("wide.scxml:2:1"), "{stderr}");
}

#[test]
fn an_scxml_document_of_many_bad_attributes_reports_the_first_hundred_and_counts_the_rest() {
    // 200 elements with 200 unsupported attributes each: under the per-element limit, but
    // 40,000 problems, each of which once scanned the document for its line.
    let attributes: Vec<String> = (0..200).map(|index| format!("a{index}=\"v\"")).collect();
    let mut text =
        String::from("<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" version=\"1.0\">\n");
    for index in 0..200 {
        writeln!(text, "<state id=\"s{index}\" {}/>", attributes.join(" ")).unwrap();
    }
    text.push_str("</scxml>\n");
    let directory = temporary_directory("loading", "scxml-problems");
    std::fs::write(directory.join("bad.scxml"), text).unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["import", "scxml", "bad.scxml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("39900 more problems are not shown: only the first 100 are"),
        "{}",
        &stderr[stderr.len().saturating_sub(1000)..]
    );
    assert!(
        stderr.ends_with("101 errors\n"),
        "{}",
        &stderr[stderr.len() - 300..]
    );
}

#[test]
fn fifteen_thousand_raised_and_fifteen_thousand_handled_events_check_quickly() {
    // Every raised event was matched against every handler, and each unhandled one compared
    // with every handler for a suggestion: a minute for this file.
    let mut text =
        String::from("id: events\npermissions: { exec: [] }\nstates:\n  a:\n    entry:\n");
    for index in 0..15_000 {
        writeln!(text, "      - raise: r{index}").unwrap();
    }
    text.push_str("    on:\n");
    for index in 0..15_000 {
        writeln!(text, "      h{index}: b").unwrap();
    }
    text.push_str("  b: { type: final }\n");
    let directory = temporary_directory("loading", "events");
    std::fs::write(directory.join("events.yaml"), text).unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["check", "events.yaml"]);
    assert_eq!(code, 0, "{}", &stderr[..stderr.len().min(2000)]);
    assert_eq!(
        stderr
            .matches("is raised but no transition handles it")
            .count(),
        15_000
    );
    assert!(
        stderr.ends_with("15000 warnings\n"),
        "{}",
        &stderr[stderr.len() - 300..]
    );
}

#[test]
fn a_shared_child_is_compiled_again_under_narrower_capabilities() {
    // `child.yaml` is compiled first for `open.yaml`, which grants everything; under
    // `narrow.yaml`, which passes on no environment, its child `grand.yaml` may not read HOME.
    let directory = temporary_directory("loading", "capabilities");
    let files = [
        (
            "root.yaml",
            "id: root\nstates:\n  a:\n    invoke: [{ id: x, protocol: open.yaml }, { id: y, protocol: narrow.yaml }]\n",
        ),
        (
            "open.yaml",
            "id: open\nstates:\n  a:\n    invoke: [{ id: x, protocol: child.yaml }]\n",
        ),
        (
            "narrow.yaml",
            "id: narrow\npermissions: { env: [] }\nstates:\n  a:\n    invoke: [{ id: x, protocol: child.yaml }]\n",
        ),
        (
            "child.yaml",
            "id: child\nstates:\n  a:\n    invoke: [{ id: x, protocol: grand.yaml }]\n",
        ),
        (
            "grand.yaml",
            "id: grand\ncontext: { home: \"\" }\nstates:\n  a:\n    entry: [{ assign: { home: \"env('HOME')\" } }]\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(directory.join(name), text).unwrap();
    }
    let (code, _, stderr) = run_quickly(&directory, &["validate", "open.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run_quickly(&directory, &["validate", "root.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert_eq!(
        stderr
            .matches("reads a variable `permissions.env` does not grant")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_thousand_declared_events_and_fifteen_thousand_unmatched_handlers_validate_quickly() {
    // Each handler is looked up, not compared with every name; suggestions stop at a budget.
    let mut text = String::from("id: declared\nevents:\n");
    for index in 0..1_000 {
        writeln!(text, "  d{index}: {{ type: object }}").unwrap();
    }
    text.push_str("states:\n  a:\n    on:\n");
    for index in 0..15_000 {
        writeln!(text, "      h{index}: b").unwrap();
    }
    text.push_str("  b: { type: final }\n");
    let directory = temporary_directory("loading", "declared");
    std::fs::write(directory.join("declared.yaml"), text).unwrap();
    let (code, _, stderr) = run_quickly(&directory, &["validate", "declared.yaml"]);
    assert_eq!(code, 65, "{}", &stderr[..stderr.len().min(2000)]);
    assert!(
        stderr.ends_with("15000 errors\n"),
        "{}",
        &stderr[stderr.len() - 300..]
    );
}
