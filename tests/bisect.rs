//! `examples/bisect`: the flaky-test triage finds the culprit in a real git repository with real `git` processes, and its scenario file passes.

use std::path::Path;
use std::process::Command;

use crate::support::{run_binary, temporary_directory};

fn git(repository: &Path, arguments: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(repository)
        .args(arguments)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {arguments:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// A repository of `count` commits, each changing the test file; from commit `culprit` (from
/// 0) on, the test sleeps. Returns the commits, oldest first.
fn repository(directory: &Path, count: usize, culprit: usize) -> Vec<String> {
    std::fs::create_dir_all(directory.join("tests")).unwrap();
    git(directory, &["init", "--quiet"]);
    (0..count)
        .map(|index| {
            let body = if index >= culprit {
                format!("def test_timing():\n    time.sleep(2)  # change {index}\n")
            } else {
                format!("def test_timing():\n    assert fast()  # change {index}\n")
            };
            std::fs::write(directory.join("tests/test_timing.py"), body).unwrap();
            git(directory, &["add", "--all"]);
            git(
                directory,
                &["commit", "--quiet", "-m", &format!("change {index}")],
            );
            git(directory, &["rev-parse", "--short", "HEAD"])
        })
        .collect()
}

fn triage(name: &str, count: usize, culprit: usize) -> (i32, serde_json::Value, Vec<String>) {
    let directory = temporary_directory("bisect", name);
    let repository_directory = directory.join("repository");
    let commits = repository(&repository_directory, count, culprit);
    let protocol = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/bisect/bisect.yaml");
    let state = directory.join("state");
    let repo = format!("repo={}", repository_directory.display());
    let list = format!("commits={}", commits.join(","));
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[
            protocol,
            "--state-dir",
            state.to_str().unwrap(),
            "--input",
            &repo,
            "--input",
            &list,
        ],
    );
    let finished = stdout
        .lines()
        .find_map(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|line| line.get("finished").cloned())
        })
        .unwrap_or_else(|| panic!("no finished line: {stdout}{stderr}"));
    (code, finished, commits)
}

#[test]
fn the_triage_finds_the_commit_that_made_the_test_sleep() {
    let (code, finished, commits) = triage("found", 12, 7);
    assert_eq!(code, 0, "{finished}");
    assert_eq!(finished["state"], "found");
    assert_eq!(finished["output"]["culprit"], commits[7].as_str());
    assert_eq!(finished["output"]["position"], 7);
    // Three probes a round cut the range of 13 gaps by about four each time.
    assert!(
        finished["output"]["rounds"].as_i64().unwrap() <= 3,
        "{finished}"
    );
}

#[test]
fn the_triage_finds_the_first_commit_and_says_when_there_is_none() {
    let (code, finished, commits) = triage("first", 5, 0);
    assert_eq!(code, 0, "{finished}");
    assert_eq!(finished["output"]["culprit"], commits[0].as_str());
    let (code, finished, _) = triage("none", 4, 4);
    assert_eq!(code, 3, "{finished}");
    assert_eq!(finished["state"], "not_found");
}

#[test]
fn the_scenarios_pass() {
    let directory = temporary_directory("bisect", "scenarios");
    let scenarios = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/bisect/bisect.scenario.yaml"
    );
    let (code, stdout, stderr) = run_binary(&directory, &["test", scenarios]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("4 passed, 0 failed"), "{stdout}");
}
