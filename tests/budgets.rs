//! Budgets: value size, evaluation steps, step time and signals, each hit on purpose through the library and the real binary.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use protocol_run::base::value::Value;
use protocol_run::pipeline::compile::budget::{Budgets, StepBudgets};
use protocol_run::pipeline::compile::expression::{Expression, Names, Scope, Template};

use crate::support::run_binary;

fn scratch(name: &str) -> crate::support::TemporaryDirectory {
    crate::support::temporary_directory("budgets", name)
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_protocol-run"))
}

/// A list literal of `count` ints: ranges are built by hand, as CEL here has no generator.
fn ints(count: usize) -> String {
    let items: Vec<String> = (0..count).map(|number| number.to_string()).collect();
    format!("[{}]", items.join(","))
}

/// Runs `body` over a scope whose context variables are `s` (this text) and `n` (3).
fn with_scope<T>(s: &str, body: impl FnOnce(&Names, &Scope) -> T) -> T {
    let names = Names::new(["s".to_string(), "n".to_string()], [], HashMap::new());
    let context = [Value::string(s), Value::Int(3)];
    let scope = Scope {
        names: &names,
        context: &context,
        inputs: &[],
        event: None,
        is_active: &|_| false,
        clock: 0,
    };
    body(&names, &scope)
}

/// Evaluates `text` over `s` under `budgets`.
fn evaluate(text: &str, s: &str, budgets: Budgets) -> Result<Value, String> {
    with_scope(s, |names, scope| {
        let _budgets = StepBudgets::enter(Some(&budgets));
        let expression =
            Expression::compile(text, names).map_err(|problems| format!("{problems:?}"))?;
        expression.evaluate(scope).map_err(|error| error.message)
    })
}

fn bytes(max_value_bytes: usize) -> Budgets {
    Budgets {
        max_value_bytes,
        ..Budgets::default()
    }
}

/// Every CEL operation that can return more than it is given is refused past the bound, before
/// it builds the value, and allowed under a bound large enough.
#[test]
fn every_growing_operation_is_bounded_by_max_value_bytes() {
    let hundred = "x".repeat(100);
    let cases = [
        "s + s + s + s + s + s + s + s + s + s + s",
        "s.replace('x', 'yyyyyyyyyyyy')",
        "s.replace('', 'abcdefghijklmn')",
        "s.replace('x', 'yyyyyyyyyyyy', 90)",
        "[s, s, s, s, s, s, s, s, s, s, s, s].join('')",
        "[s, s, s, s, s, s, s, s, s, s, s, s].join(s)",
        "'%s%s%s%s%s%s'.format([s, s, s, s, s, s])",
        "(s + s).split('')",
        "strings.quote(s + s + s + s + s + s + s + s + s)",
        "[s, s, s, s, s, s, s, s, s, s, s] + [s]",
        "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12].map(x, s)",
        "{'a': s, 'b': s, 'c': s, 'd': s, 'e': s, 'f': s, 'g': s, 'h': s, 'i': s, 'j': s, 'k': s}",
    ];
    for text in cases {
        let error = evaluate(text, &hundred, bytes(1000))
            .map(|value| format!("{text} gave {} bytes", value.size_in_bytes()))
            .unwrap_err();
        assert!(
            error.contains("limit of 1000 bytes") && error.contains("--max-value-bytes"),
            "{text}: {error}"
        );
        assert!(
            evaluate(text, &hundred, bytes(100_000)).is_ok(),
            "{text} under a larger bound"
        );
    }
}

/// The issue's attack: a short expression of nested `replace` asked for gigabytes and aborted
/// the engine (exit 134). Now it is an `error.execution` the protocol handles.
#[test]
fn nested_replace_is_an_execution_error_not_an_abort() {
    let directory = scratch("replace");
    let bomb = format!("'aaaaaaaaaa'{}", ".replace('a','aaaaaaaaaa')".repeat(10));
    std::fs::write(
        directory.join("bomb.yaml"),
        format!(
            "id: bomb\ncontext:\n  s: ''\nstates:\n  a:\n    entry:\n      - assign: {{ s: \"{bomb}\" }}\n    \
             on:\n      error.execution:\n        target: refused\n        actions:\n          - log: \"${{event.data.message}}\"\n  \
             refused: {{ type: final, exit_code: 3 }}\n"
        ),
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&directory, &["run", "bomb.yaml", "--state-dir", "state"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("a value of 10000000 bytes is more than the limit of 1048576 bytes")
            && stderr.contains("--max-value-bytes"),
        "{stderr}"
    );
}

/// An eventless loop doubling a string in the context reached gigabytes. Now every doubling
/// past the bound fails (the eventless transition keeps winning over the error events, as SCXML
/// orders them), so the loop ends at the microstep limit with its memory bounded: under a
/// 1 GB address-space limit, where the unbounded loop aborted on a failed allocation (134).
#[test]
fn a_string_doubled_in_an_eventless_loop_stops_at_the_bound() {
    let directory = scratch("double");
    std::fs::write(
        directory.join("double.yaml"),
        "id: double\ncontext:\n  s: x\nstates:\n  grow:\n    always:\n      - target: grow\n        \
         actions:\n          - assign: { s: \"s + s\" }\n",
    )
    .unwrap();
    let output = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1000000 && exec \"$0\" run double.yaml --state-dir state --max-value-bytes 65536")
        .arg(env!("CARGO_BIN_EXE_protocol-run"))
        .current_dir(&directory)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The assignment past the bound fails, and nothing handles its error: the run fails there.
    assert_eq!(output.status.code(), Some(76), "{stderr}");
    assert!(
        stderr.contains("a value of 131072 bytes is more than the limit of 65536 bytes"),
        "{stderr}"
    );
}

/// The context as a whole holds at most 16 times the value bound, however many variables share it.
#[test]
fn the_context_as_a_whole_is_bounded() {
    let directory = scratch("context");
    let names: Vec<String> = (0..20).map(|index| format!("v{index}")).collect();
    let context: String = names.iter().map(|name| format!("  {name}: ''\n")).collect();
    let assignments: String = names
        .iter()
        .map(|name| format!("          - assign: {{ {name}: \"p + ''\" }}\n"))
        .collect();
    std::fs::write(
        directory.join("wide.yaml"),
        format!(
            "id: wide\ninputs:\n  p: {{ type: string }}\ncontext:\n{context}states:\n  a:\n    on:\n      fill:\n        \
             target: a\n        actions:\n{assignments}      error.execution:\n        target: full\n        \
             actions:\n          - log: \"${{event.data.message}}\"\n  full: {{ type: final, exit_code: 3 }}\n"
        ),
    )
    .unwrap();
    std::fs::write(directory.join("events.jsonl"), "{\"event\": \"fill\"}\n").unwrap();
    let input = format!("p={}", "x".repeat(900));
    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "run",
            "wide.yaml",
            "--state-dir",
            "state",
            "--max-value-bytes",
            "1000",
            "--input",
            &input,
            "--events",
            "events.jsonl",
        ],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("more than its limit of 16000 bytes (16 times --max-value-bytes)"),
        "{stderr}"
    );
}

/// A template repeating a value many times is checked as it is written.
#[test]
fn a_template_is_bounded_as_it_is_rendered() {
    with_scope(&"x".repeat(100), |names, scope| {
        let template = Template::compile(&"${s}".repeat(20), names).unwrap();
        let budgets = StepBudgets::enter(Some(&bytes(1000)));
        let error = template.render(scope).unwrap_err();
        assert!(error.message.contains("--max-value-bytes"), "{error}");
        drop(budgets);
        assert_eq!(template.render(scope).unwrap().len(), 2000);
    });
}

fn steps(max_evaluation_steps: u64) -> Budgets {
    Budgets {
        max_evaluation_steps,
        ..Budgets::default()
    }
}

/// Nested comprehensions, `all` and the `map`/`filter` that CEL builds in place alike, stop at
/// the step budget instead of running for ever; a budget large enough lets them finish.
#[test]
fn nested_comprehensions_stop_at_max_evaluation_steps() {
    let list = ints(100);
    let cases = [
        format!("{list}.all(a, {list}.all(b, {list}.all(c, a + b + c >= 0)))"),
        format!("{list}.map(a, {list}.map(b, {list}.filter(c, c > a)))"),
        format!("{list}.exists(a, {list}.exists_one(b, {list}.exists(c, c < 0)))"),
    ];
    for text in &cases {
        let started = Instant::now();
        let error = evaluate(text, "", steps(20_000)).unwrap_err();
        assert!(
            error.contains("more than 20000 steps") && error.contains("--max-evaluation-steps"),
            "{error}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{text} took {:?}",
            started.elapsed()
        );
    }
    let small = ints(10);
    let finishes =
        format!("{small}.all(a, {small}.all(b, {small}.map(c, a + b + c).size() == 10))");
    assert_eq!(evaluate(&finishes, "", steps(2_000)), Ok(Value::Bool(true)));
}

/// Writes `spin.yaml`, whose guard runs for ever once `go` came, and `go.jsonl`, that event.
fn write_runaway(directory: &std::path::Path) {
    std::fs::write(directory.join("spin.yaml"), runaway_protocol()).unwrap();
    std::fs::write(directory.join("go.jsonl"), "{\"event\": \"go\"}\n").unwrap();
}

/// A guard that runs for ever, in a protocol that waits for `go` first.
fn runaway_protocol() -> String {
    let list = ints(100);
    format!(
        "id: spin\nstates:\n  idle:\n    on: {{ go: busy, stop: done }}\n  busy:\n    always:\n      - target: done\n        \
         guard: \"{list}.all(a, {list}.all(b, {list}.all(c, {list}.all(d, a + b + c + d >= 0))))\"\n    \
         on:\n      error.execution: gave_up\n  done: {{ type: final }}\n  gave_up: {{ type: final, exit_code: 3 }}\n"
    )
}

/// A macrostep past `--max-step-time` stops the run, naming the state and the flag, with the
/// exit status of a looping protocol.
#[test]
fn a_step_past_max_step_time_stops_the_run_naming_the_state() {
    let directory = scratch("step-time");
    write_runaway(&directory);
    let started = Instant::now();
    let (code, _, stderr) = run_binary(
        &directory,
        &[
            "run",
            "spin.yaml",
            "--state-dir",
            "state",
            "--events",
            "go.jsonl",
            "--max-evaluation-steps",
            "1000000000000",
            "--max-step-time",
            "300ms",
        ],
    );
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("the macrostep ran longer than 300ms in the states busy")
            && stderr.contains("--max-step-time"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// In `serve`, a step past its time stops that instance only; another goes on to its end.
#[test]
fn serve_stops_only_the_instance_past_its_step_time() {
    let directory = scratch("serve-step-time");
    write_runaway(&directory);
    let mut host = binary()
        .args(["serve", "spin.yaml", "--store", "memory"])
        .args([
            "--max-evaluation-steps",
            "1000000000000",
            "--max-step-time",
            "300ms",
        ])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    host.stdin
        .take()
        .unwrap()
        .write_all(
            b"{\"instance\": \"slow\", \"event\": \"go\"}\n{\"instance\": \"calm\"}\n\
              {\"instance\": \"calm\", \"event\": \"stop\"}\n",
        )
        .unwrap();
    let output = host.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let slow = lines
        .iter()
        .find(|line| line["instance"] == "slow" && line.get("error").is_some())
        .unwrap_or_else(|| panic!("no error for the slow instance: {stdout}"));
    assert!(
        slow["error"].as_str().unwrap().contains("--max-step-time"),
        "{slow}"
    );
    let calm = lines
        .iter()
        .find(|line| line["instance"] == "calm" && line.get("finished").is_some())
        .unwrap_or_else(|| panic!("the other instance did not go on: {stdout}"));
    assert_eq!(calm["finished"]["state"], "done", "{calm}");
}

/// Sends SIGTERM to `child` once it has been busy for 0.7 s; its output, and how long it took
/// to end after the signal.
fn terminate_when_busy(child: std::process::Child) -> (std::process::Output, Duration) {
    // Busy in its step: the engine has spent 300 ms of CPU, which nothing else of it takes.
    wait_for_cpu(child.id(), Duration::from_millis(300));
    let sent = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    (output, sent.elapsed())
}

/// Waits until process `pid` has used `busy` of CPU time.
fn wait_for_cpu(pid: u32, busy: Duration) {
    // SAFETY: sysconf has no precondition.
    let ticks_per_second = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) }.max(1) as u64;
    crate::support::eventually("the engine busy in its step", || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // After `(command)`: state is field 3, utime and stime fields 14 and 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
        let ticks: u64 = fields.get(11..13).map_or(0, |times| {
            times
                .iter()
                .filter_map(|time| time.parse::<u64>().ok())
                .sum()
        });
        (Duration::from_millis(ticks * 1000 / ticks_per_second) >= busy).then_some(())
    });
}

/// How long a signal may take to end a busy run: 50 one-state validates measured now (a second
/// on the project's machine), so a loaded machine, slower at both, does not fail it.
fn prompt() -> Duration {
    (crate::support::timing::reference() * 50).max(Duration::from_secs(1))
}

/// SIGTERM stops a run busy in a runaway guard within well under a second, with the exit
/// status of a run stopped by a signal; its last committed step stands, and `resume` goes on
/// from it.
#[test]
fn sigterm_stops_a_busy_step_at_once_and_the_run_resumes() {
    let directory = scratch("sigterm");
    write_runaway(&directory);
    let child = binary()
        .args([
            "run",
            "spin.yaml",
            "--state-dir",
            "state",
            "--events",
            "go.jsonl",
        ])
        .args([
            "--max-evaluation-steps",
            "1000000000000",
            "--max-step-time",
            "none",
        ])
        .current_dir(&directory)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Busy in the guard by then: only the signal ends the run.
    let (output, took) = terminate_when_busy(child);
    let status = output.status;
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("SIGTERM to exit: {took:?}");
    assert!(took < prompt(), "took {took:?}");
    assert_eq!(status.code(), Some(75), "{stderr}");
    let run_id = stderr
        .split("protocol-run resume ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no resume hint: {stderr}"))
        .to_string();
    // The step that was busy is not committed: the run resumes waiting in `idle`, and the same
    // event, under a small step budget, ends it through its error handler.
    let (code, stdout, stderr) = run_binary(
        &directory,
        &[
            "resume",
            &run_id,
            "--state-dir",
            "state",
            "--events",
            "go.jsonl",
            "--max-evaluation-steps",
            "10000",
        ],
    );
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(stdout.contains("\"state\":\"gave_up\""), "{stdout}");
}

/// In `serve`, SIGTERM stops the host at once though an instance is busy in a runaway guard:
/// exit 75, and the busy instance is kept stopped at its last committed step.
#[test]
fn sigterm_stops_a_busy_serve_host_and_keeps_the_instance() {
    let directory = scratch("serve-sigterm");
    write_runaway(&directory);
    let mut host = binary()
        .args(["serve", "spin.yaml", "--state-dir", "state"])
        .args(["--max-evaluation-steps", "1000000000000"])
        .args(["--max-step-time", "none"])
        .current_dir(&directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = host.stdin.take().unwrap();
    stdin
        .write_all(b"{\"instance\": \"x\", \"event\": \"go\"}\n")
        .unwrap();
    let (output, took) = terminate_when_busy(host);
    drop(stdin);
    eprintln!("serve, SIGTERM to exit: {took:?}");
    assert!(took < prompt(), "took {took:?}");
    assert_eq!(
        output.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (code, stdout, stderr) = run_binary(&directory, &["runs", "--state-dir", "state"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("spin:x") && stdout.contains("stopped") && stdout.contains("step 0"),
        "{stdout}"
    );
}

/// `matches` pays for its regex before it compiles or runs it: a pattern past its length is
/// refused, and one whose work (compiled states times text bytes) passes the evaluation steps
/// left, while an ordinary pattern over a 1 MiB text still matches.
#[test]
fn matches_is_bounded_before_the_regex_runs() {
    let pattern = "'^' + s.replace('a', 'a?') + s + '$'";
    let refused = evaluate(
        &format!("s.matches({pattern})"),
        &"a".repeat(2100),
        Budgets::default(),
    )
    .unwrap_err();
    assert!(
        refused.contains("matches pattern of 6302 bytes") && refused.contains("4096"),
        "{refused}"
    );
    // 1,024 `a?` and 1,024 `a` (3,074 bytes) against 64 KiB: the tester's shape, scaled.
    let text = format!("s.replace('a', '{}')", "a".repeat(64));
    let refused = evaluate(
        &format!("{text}.matches({pattern})"),
        &"a".repeat(1024),
        Budgets::default(),
    )
    .unwrap_err();
    assert!(
        refused.contains("compiled states") && refused.contains("--max-evaluation-steps"),
        "{refused}"
    );
    let refused = evaluate(
        "matches(s, '(a?){4000}a{4000}')",
        &"a".repeat(1 << 20),
        Budgets::default(),
    )
    .unwrap_err();
    assert!(refused.contains("compiled states"), "{refused}");
    let large = "x".repeat(1 << 20);
    assert_eq!(
        evaluate("s.matches('^[a-z]+$')", &large, Budgets::default()),
        Ok(Value::Bool(true))
    );
    assert_eq!(
        evaluate("matches(s, '^[0-9]+$')", &large, Budgets::default()),
        Ok(Value::Bool(false))
    );
}

/// A step busy in `matches` calls (each within its budget) is stopped by SIGTERM within about
/// one call: the flag is looked at as each call pays for its work.
#[test]
fn sigterm_stops_a_step_busy_matching() {
    let directory = scratch("sigterm-matches");
    std::fs::write(
        directory.join("burn.yaml"),
        r#"id: burn
permissions: { exec: [], read: [], write: [], env: [] }
context: { q: "a?", a: "a", l: [0, 1, 2, 3, 4, 5, 6, 7], r: [] }
states:
  grow:
    always:
      - guard: size(a) < 1024
        target: grow
        actions: [{ assign: { q: "q + q", a: "a + a" } }]
      - target: burn
  burn:
    always:
      - target: burn
        actions: [{ assign: { r: "l.map(x, a.matches('^' + q + a + '$'))" } }]
"#,
    )
    .unwrap();
    let child = binary()
        .args(["run", "burn.yaml", "--state-dir", "state"])
        .args(["--max-step-time", "none", "--max-microsteps", "1000000000"])
        .current_dir(&directory)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (output, took) = terminate_when_busy(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("SIGTERM to exit while matching: {took:?}");
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    assert!(took < prompt() * 2, "took {took:?}");
}

/// The tester's protocol: a 12,290-byte pattern built in an eventless loop is refused at once.
#[test]
fn a_pattern_built_by_doubling_is_refused_at_once() {
    let directory = scratch("matches-doubling");
    std::fs::write(
        directory.join("c2.yaml"),
        r#"id: c2
inputs:
  n: { type: integer, default: 4096 }
  k: { type: integer, default: 8 }
permissions: { exec: [], read: [], write: [], env: [] }
context: { q: "a?", a: "a", l: [0], r: false }
states:
  grow:
    always:
      - guard: size(a) < n
        target: grow
        actions: [{ assign: { q: "q + q", a: "a + a" } }]
      - target: mk
  mk:
    always:
      - guard: size(l) < k
        target: mk
        actions: [{ assign: { l: "l + l" } }]
      - target: burn
  burn:
    entry:
      - assign: { r: "l.map(x, a.matches('^' + q + a + '$'))" }
    always: done
  done: { type: final }
"#,
    )
    .unwrap();
    let started = Instant::now();
    let (code, stdout, stderr) =
        run_binary(&directory, &["run", "c2.yaml", "--state-dir", "state"]);
    let took = started.elapsed();
    // The refused match fails `burn`'s assignment, which nothing handles: the run fails (76).
    assert_eq!(code, 76, "{stdout}{stderr}");
    assert!(
        stderr.contains("error.execution")
            && stderr.contains(
                "a matches pattern of 12290 bytes is longer than the limit of 4096 bytes"
            ),
        "{stderr}"
    );
    assert!(took < prompt(), "took {took:?}");
}
