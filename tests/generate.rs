//! `test --generate`, `test --explore` and `test --coverage`, through the binary as an author runs them.

use std::path::{Path, PathBuf};

use crate::support::{run_binary, temporary_directory};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/features/generate.yaml")
}

/// A protocol whose effect fails with an error nothing handles: only its timeout is caught.
const PLANTED: &str = r#"
id: planted
permissions: { exec: [job], write: [], read: [], env: [] }
states:
  idle:
    on:
      go: working
  working:
    entry:
      - exec: [job]
        id: job
        timeout: 5s
    on:
      done.exec.job: done
      error.exec.timeout.job: done
  done: { type: final }
"#;

#[test]
fn generated_scenarios_pass_and_take_every_reachable_transition() {
    let directory = temporary_directory("generate", "fixture");
    std::fs::copy(fixture(), directory.join("generate.yaml")).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["test", "--generate", "generate.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("to generate.generated.scenario.yaml: 8/9 transitions taken"),
        "{stdout}"
    );
    assert!(stdout.contains("configurations explored in"), "{stdout}");
    assert!(stdout.contains("the generated scenarios pass"), "{stdout}");
    let written =
        std::fs::read_to_string(directory.join("generate.generated.scenario.yaml")).unwrap();
    // No `schemas/` above the temporary directory: the schemas are written beside the file, so
    // its modeline resolves (as `new` does).
    assert!(
        written.starts_with(
            "# yaml-language-server: $schema=./scenario.schema.json\nprotocol: generate.yaml\n"
        ),
        "{written}"
    );
    assert!(directory.join("scenario.schema.json").is_file());
    // The timer is reached by letting its delay pass, the guard by data drawn from its literal,
    // the retry and the failure by mocking the effect.
    assert!(written.contains("- after: 10m"), "{written}");
    assert!(written.contains("amount: 101"), "{written}");
    assert!(written.contains("charge: timeout"), "{written}");
    assert!(written.contains("state: failed"), "{written}");

    // The file passes as written, and coverage names each transition.
    let (code, stdout, _) = run_binary(
        &directory,
        &["test", "--coverage", "generate.generated.scenario.yaml"],
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("7/8 states, 8/9 transitions"), "{stdout}");
    for taken in [
        "taken:       transition at /states/waiting/after/0: waiting → expired (after)",
        "taken:       transition at /states/waiting/on/order/0: waiting → reviewing (order) [event.data.amount > 100]",
        "taken:       transition at /states/charging/on/error.exec/0: charging → charging (error.exec) [attempts < max_attempts]",
        "never taken: transition at /states/reviewing/on/reject/0: reviewing → refunded (reject) [amount < 0]",
    ] {
        assert!(stdout.contains(taken), "{taken} in\n{stdout}");
    }
}

#[test]
fn the_transitions_no_scenario_takes_are_named_with_the_reason() {
    let directory = temporary_directory("generate", "unreached");
    std::fs::copy(fixture(), directory.join("generate.yaml")).unwrap();
    let (_, stdout, _) = run_binary(
        &directory,
        &[
            "test",
            "--generate",
            "generate.yaml",
            "--out",
            "out.scenario.yaml",
        ],
    );
    assert!(
        stdout.contains(
            "not taken: reviewing → refunded (reject) [amount < 0]: guard `amount < 0` was never \
             true in `reviewing` with the event data, inputs and mocks tried"
        ),
        "{stdout}"
    );
    assert!(directory.join("out.scenario.yaml").exists());

    // A state nothing leads to: its transitions are named with the state.
    std::fs::write(
        directory.join("island.yaml"),
        "id: island\nstates:\n  start:\n    on:\n      go: done\n  done: { type: final }\n  island:\n    on:\n      back: start\n",
    )
    .unwrap();
    let (code, stdout, _) = run_binary(&directory, &["test", "--generate", "island.yaml"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("not taken: island → start (back): state `island` was never reached"),
        "{stdout}"
    );
}

#[test]
fn explore_finds_an_unhandled_error_and_its_seed_replays_it() {
    let directory = temporary_directory("generate", "explore");
    std::fs::write(directory.join("planted.yaml"), PLANTED).unwrap();
    let arguments = ["test", "--explore", "20", "--seed", "7", "planted.yaml"];
    let (code, stdout, _) = run_binary(&directory, &arguments);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.starts_with("exploring with --seed 7\n"), "{stdout}");
    assert!(
        stdout.contains(
            "of --seed 7: an error event no transition handles: error.exec.job was not handled"
        ),
        "{stdout}"
    );
    // Shrunk to the one event and the one mock that matter.
    assert!(
        stdout.contains("    steps:\n      - send: go\n"),
        "{stdout}"
    );
    assert!(stdout.contains("    mocks:\n      job: "), "{stdout}");
    let (_, replayed, _) = run_binary(&directory, &arguments);
    assert_eq!(replayed, stdout);
}

/// What `--explore` prints for a broken invariant is a whole scenario file: saved as printed,
/// `protocol-run test` on it fails the same way (the run ends as usual, so its `expect` says
/// what must not happen).
#[test]
fn explore_prints_a_scenario_file_that_fails_the_same_way() {
    let directory = temporary_directory("generate", "explore-file");
    std::fs::write(directory.join("planted.yaml"), PLANTED).unwrap();
    let arguments = ["test", "--explore", "20", "--seed", "7", "planted.yaml"];
    let (code, stdout, _) = run_binary(&directory, &arguments);
    assert_eq!(code, 1, "{stdout}");
    let printed = &stdout[stdout.find("# A scenario file").expect(&stdout)..];
    assert!(printed.contains("\nprotocol: planted.yaml\n"), "{printed}");
    assert!(printed.contains("unhandled_errors: []"), "{printed}");
    std::fs::write(directory.join("planted.explore.scenario.yaml"), printed).unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["test", "planted.explore.scenario.yaml"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "unhandled_errors: expected none, seen [\"error.exec.job was not handled by any transition: failed\"]"
        ),
        "{stdout}{stderr}"
    );
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");

    // The loop: its step stops the run under `test` as under `--explore`.
    std::fs::write(
        directory.join("loop.yaml"),
        "id: looping\nstates:\n  idle:\n    on:\n      spin: ping\n  ping:\n    always: pong\n  pong:\n    always: ping\n",
    )
    .unwrap();
    let (_, stdout, _) = run_binary(
        &directory,
        &["test", "--explore", "3", "--seed", "1", "loop.yaml"],
    );
    let printed = &stdout[stdout.find("# A scenario file").expect(&stdout)..];
    std::fs::write(directory.join("loop.explore.scenario.yaml"), printed).unwrap();
    let (code, stdout, _) = run_binary(&directory, &["test", "loop.explore.scenario.yaml"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("step 1 (send spin)"), "{stdout}");
    assert!(stdout.contains("the protocol looped"), "{stdout}");
}

#[test]
fn explore_reports_a_run_that_loops() {
    let directory = temporary_directory("generate", "loop");
    std::fs::write(
        directory.join("loop.yaml"),
        "id: looping\nstates:\n  idle:\n    on:\n      spin: ping\n  ping:\n    always: pong\n  pong:\n    always: ping\n",
    )
    .unwrap();
    let (code, stdout, _) = run_binary(
        &directory,
        &["test", "--explore", "3", "--seed", "1", "loop.yaml"],
    );
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("the run stopped: send spin: the protocol looped"),
        "{stdout}"
    );
    assert!(
        stdout.contains("    steps:\n      - send: spin\n"),
        "{stdout}"
    );
}

#[test]
fn explore_passes_a_protocol_that_keeps_its_invariants() {
    let (code, stdout, _) = run_binary(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &[
            "test",
            "--explore",
            "20",
            "--seed",
            "3",
            "examples/features/generate.yaml",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("ok     examples/features/generate.yaml: 20 random runs"),
        "{stdout}"
    );
}

#[test]
fn every_shipped_protocol_keeps_its_invariants_under_random_events() {
    // Seed 23 once found agent-recovery reading `event.data.signal` of a `review` sent without
    // data; seed 7 retry-backoff reading `event.data.error` of a bare `fail`.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for seed in ["7", "23"] {
        // A directory: its protocols, scenario files left out.
        let arguments = ["test", "--explore", "100", "--seed", seed, "protocols/"];
        let (code, stdout, stderr) = run_binary(root, &arguments);
        assert_eq!(code, 0, "seed {seed}:\n{stdout}{stderr}");
        assert_eq!(stdout.matches(": 100 random runs").count(), 8, "{stdout}");
    }
}

#[test]
fn search_mistakes_are_reported() {
    let directory = temporary_directory("generate", "mistakes");
    let (code, _, stderr) = run_binary(&directory, &["test", "--explore", "5"]);
    assert_eq!(code, 64);
    assert!(
        stderr.contains("--explore needs the protocol files"),
        "{stderr}"
    );
    let (code, _, stderr) = run_binary(&directory, &["test", "--generate", "missing.yaml"]);
    assert_eq!(code, 66);
    assert!(
        stderr.contains("cannot read missing.yaml: no such file"),
        "{stderr}"
    );
    let (code, _, stderr) = run_binary(&directory, &["test", "--out", "x.yaml"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("--generate"), "{stderr}");
}

/// `test --explore protocols/*.yaml` names the scenario files beside the protocols: they are
/// skipped, not refused as protocols.
#[test]
fn explore_skips_scenario_files() {
    let directory = temporary_directory("generate", "explore-skips");
    std::fs::copy(fixture(), directory.join("generate.yaml")).unwrap();
    std::fs::write(
        directory.join("generate.scenario.yaml"),
        "protocol: generate.yaml\nscenarios: []\n",
    )
    .unwrap();
    let (_, stdout, stderr) = run_binary(
        &directory,
        &[
            "test",
            "--explore",
            "2",
            "--seed",
            "1",
            "generate.yaml",
            "generate.scenario.yaml",
        ],
    );
    assert!(
        stdout.contains("skipped generate.scenario.yaml: not a protocol"),
        "{stdout}{stderr}"
    );
    assert!(!stderr.contains("missing required key"), "{stderr}");
}

/// An effect without `timeout:` cannot time out: neither `--explore` nor `--generate` mocks a
/// timeout for it (once "timed out after 0 ms", an error nothing could handle).
#[test]
fn search_mocks_only_the_outcomes_an_effect_can_have() {
    let directory = temporary_directory("generate", "outcomes");
    // PLANTED without its timeout, its errors handled.
    let untimed = PLANTED
        .replace("        timeout: 5s\n", "")
        .replace("error.exec.timeout.job: done", "error.exec.job: failed")
        .replace(
            "{ type: final }",
            "{ type: final }\n  failed: { type: final, exit_code: 1 }",
        );
    std::fs::write(directory.join("untimed.yaml"), untimed).unwrap();
    let (code, stdout, _) = run_binary(
        &directory,
        &["test", "--explore", "50", "--seed", "1", "untimed.yaml"],
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("ok     untimed.yaml: 50 random runs"),
        "{stdout}"
    );
    let (code, stdout, _) = run_binary(&directory, &["test", "--generate", "untimed.yaml"]);
    assert_eq!(code, 0, "{stdout}");
    let written =
        std::fs::read_to_string(directory.join("untimed.generated.scenario.yaml")).unwrap();
    assert!(!written.contains("timeout"), "{written}");
    assert!(written.contains("state: failed"), "{written}");
}

/// The schemas `--generate` writes beside a protocol with no `schemas/` above are written when
/// missing or stale, not on every run.
#[test]
fn generate_writes_the_schemas_only_when_missing_or_stale() {
    let directory = temporary_directory("generate", "schemas-once");
    std::fs::copy(fixture(), directory.join("generate.yaml")).unwrap();
    let arguments = ["test", "--generate", "generate.yaml"];
    let (code, stdout, _) = run_binary(&directory, &arguments);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("scenario.schema.json (no schemas/ above it)"),
        "{stdout}"
    );
    let schema = directory.join("scenario.schema.json");
    let written = std::fs::metadata(&schema).unwrap().modified().unwrap();
    let (code, stdout, _) = run_binary(&directory, &arguments);
    assert_eq!(code, 0, "{stdout}");
    assert!(!stdout.contains("schema.json"), "{stdout}");
    assert_eq!(
        std::fs::metadata(&schema).unwrap().modified().unwrap(),
        written
    );
    // A stale one is written again.
    std::fs::write(&schema, "{}").unwrap();
    let (_, stdout, _) = run_binary(&directory, &arguments);
    assert!(stdout.contains("wrote "), "{stdout}");
    assert!(
        stdout.contains("scenario.schema.json (no schemas/ above it)"),
        "{stdout}"
    );
    assert!(!stdout.contains("protocol.schema.json"), "{stdout}");
    assert_ne!(std::fs::read_to_string(&schema).unwrap(), "{}");
}

/// Runs `--generate` on the protocol `name` in `directory`: what it printed and the file it
/// wrote, which passes.
fn generated(directory: &Path, name: &str) -> (String, String) {
    let (code, stdout, stderr) = run_binary(directory, &["test", "--generate", name]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("the generated scenarios pass"), "{stdout}");
    let stem = name.trim_end_matches(".yaml");
    let written =
        std::fs::read_to_string(directory.join(format!("{stem}.generated.scenario.yaml"))).unwrap();
    (stdout, written)
}

/// Copies the shipped file at `path` (from the repository's root) into `directory`; its name.
fn shipped(directory: &Path, path: &str) -> String {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let name = from.file_name().unwrap().to_str().unwrap().to_string();
    std::fs::copy(&from, directory.join(&name)).unwrap();
    name
}

/// A declared event whose data must carry a field is sent with data that fits its schema; a
/// guard on one of its fields is tried over that data.
#[test]
fn generate_sends_declared_events_with_data_that_fits_their_schema() {
    let directory = temporary_directory("generate", "declared");
    std::fs::write(
        directory.join("revising.yaml"),
        r#"
id: revising
events:
  revise:
    type: object
    properties:
      content: { type: string, minLength: 2 }
      urgency: { enum: [low, high] }
    required: [content, urgency]
states:
  drafting:
    on:
      revise:
        - guard: event.data.urgency == 'high'
          target: rushed
        - target: revised
  revised: { type: final }
  rushed: { type: final, exit_code: 3 }
"#,
    )
    .unwrap();
    let (stdout, written) = generated(&directory, "revising.yaml");
    assert!(stdout.contains(": 2/2 transitions taken"), "{stdout}");
    assert!(written.contains("content: xx"), "{written}");
    assert!(written.contains("urgency: high"), "{written}");
}

/// `--generate` on the shipped file `path` takes `taken` transitions and writes each of `lines`.
fn assert_shipped_generates(name: &str, path: &str, taken: &str, lines: &[&str]) {
    let directory = temporary_directory("generate", name);
    let name = shipped(&directory, path);
    let (stdout, written) = generated(&directory, &name);
    assert!(
        stdout.contains(&format!(": {taken} transitions taken")),
        "{stdout}"
    );
    for line in lines {
        assert!(written.contains(line), "{line} in\n{written}");
    }
}

/// ITTW's grep output cut at its limit leads to the fallback task, and its re-check works on a
/// later call: every transition is taken (12 of 16 before).
#[test]
fn generate_mocks_output_cut_at_its_limit_and_a_call_that_works_later() {
    assert_shipped_generates(
        "ittw",
        "protocols/ittw.yaml",
        "16/16",
        &[
            "grep_search: \"truncated:\"",
            "tool_call: \"timeout,timeout,ok:\"",
            "state: resolved",
        ],
    );
}

/// A deadline computed at entry (`until: deadline`) after a reminder of the same state: the
/// search lets time pass to each, though the configuration and context stay the same.
#[test]
fn generate_reaches_a_computed_deadline() {
    assert_shipped_generates(
        "until",
        "examples/features/time.yaml",
        "3/3",
        &["state: overdue"],
    );
}

/// A map's child items are mocked with the output their protocol declares, the text a parent's
/// guard compares with filled in and not, so the parent's verdict over the results is reached
/// either way (items mocked `ok:` with empty output reached only the other).
#[test]
fn generate_mocks_child_items_with_their_declared_output() {
    let directory = temporary_directory("generate", "children");
    std::fs::write(
        directory.join("reviewer.yaml"),
        r#"
id: reviewer
inputs: { who: { type: string, required: true } }
context: { verdict: "" }
states:
  reviewing:
    on:
      decide:
        target: decided
        actions: [{ assign: { verdict: event.data.verdict } }]
      withdraw: withdrawn
  decided: { type: final, output: { who: "${who}", verdict: "${verdict}" } }
  withdrawn: { type: final, exit_code: 2 }
"#,
    )
    .unwrap();
    std::fs::write(
        directory.join("gate.yaml"),
        r#"
id: gate
inputs:
  reviewers: { type: list, default: [ada, grace] }
context: { reviewer: null }
states:
  reviewing:
    entry:
      - map: reviewers
        id: review
        item: reviewer
        invoke: { protocol: reviewer.yaml, inputs: { who: "${reviewer}" } }
    on:
      done.map.review:
        - guard: event.data.results.all(r, r.verdict == 'approve')
          target: approved
        - target: undecided
      error.map.review: rejected
  approved: { type: final }
  undecided: { type: final, exit_code: 1 }
  rejected: { type: final, exit_code: 2 }
"#,
    )
    .unwrap();
    let (stdout, written) = generated(&directory, "gate.yaml");
    assert!(stdout.contains(": 3/3 transitions taken"), "{stdout}");
    assert!(written.contains("verdict"), "{written}");
    assert!(written.contains("state: approved"), "{written}");
}

/// `--explore` waits for the deadlines a run computes when it starts, not only for fixed delays:
/// an error nothing handles past a deadline 90 minutes away is found.
#[test]
fn explore_reaches_a_deadline_computed_at_start() {
    let directory = temporary_directory("generate", "explore-deadline");
    std::fs::write(
        directory.join("late.yaml"),
        r#"
id: late
permissions: { exec: [job], write: [], read: [], env: [] }
inputs:
  budget: { type: string, default: 1h30m }
context: { deadline: null }
states:
  waiting:
    entry:
      - assign: { deadline: "now() + duration(budget)" }
    on:
      done: finished
    after:
      - until: deadline
        target: overdue
  overdue:
    entry:
      - exec: [job]
        id: job
    on:
      done.exec.job: finished
  finished: { type: final }
"#,
    )
    .unwrap();
    let arguments = ["test", "--explore", "20", "--seed", "5", "late.yaml"];
    let (code, stdout, _) = run_binary(&directory, &arguments);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("error.exec.job was not handled"),
        "{stdout}"
    );
    assert!(stdout.contains("- after: 90m"), "{stdout}");
}
