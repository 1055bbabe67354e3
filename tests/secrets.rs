//! Secret inputs and `env()` values: used by effects, found nowhere in the state dir, logs, status or output, before and after a kill.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{temporary_directory, wait_for_status};

/// The variable `env()` reads in `USES_SECRETS`.
const VARIABLE: &str = "PROTOCOL_RUN_TEST_SECRET";

/// Uses the secret input and the `env()` value in a `log`, the context, two processes'
/// arguments and the output; between the processes it waits (`pause`, or the event `go`).
const USES_SECRETS: &str = r#"
id: secret-use
inputs:
  token: { type: string, required: true, secret: true }
  out: { type: string, required: true }
  pause: { type: duration, default: 1h }
context: { header: "", from_env: "" }
states:
  working:
    entry:
      - assign: { header: "'Bearer ' + token", from_env: "env('PROTOCOL_RUN_TEST_SECRET')" }
      - log: "calling with ${header} and ${from_env}"
      - exec: [sh, -c, 'printf "%s %s" "$1" "$2" > "$3/first"', sh, "${token}", "${from_env}", "${out}"]
        id: first
    on:
      done.exec.first: waiting
  waiting:
    on:
      go: again
    after:
      - delay: pause
        target: again
  again:
    entry:
      - exec: [sh, -c, 'printf "%s %s" "$1" "$2" > "$3/again"', sh, "${header}", "${env('PROTOCOL_RUN_TEST_SECRET')}", "${out}"]
        id: again
    on:
      done.exec.again: done
  done: { type: final, output: { header: "${header}", echoed: "${token}" } }
"#;

/// `status` and `runs`, human and JSON: they read the store.
const STORE_VIEWS: [&[&str]; 3] = [&["status"], &["status", "--json"], &["runs"]];

/// `logs`, human and JSON: they read a run's telemetry (a `serve` instance's too).
const TELEMETRY_VIEWS: [&[&str]; 2] = [&["logs"], &["logs", "--json"]];

/// One test's directory, protocol, state dir and two tokens no other test uses.
struct Case {
    directory: crate::support::TemporaryDirectory,
    token: String,
    environment_token: String,
}

impl Case {
    fn new(name: &str) -> Case {
        let directory = temporary_directory("secrets", name);
        std::fs::write(directory.join("uses.yaml"), USES_SECRETS).unwrap();
        std::fs::create_dir_all(directory.join("out")).unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Case {
            token: format!("tok{name}{nanos}X"),
            environment_token: format!("envtok{name}{nanos}Y"),
            directory,
        }
    }

    fn state(&self) -> PathBuf {
        self.directory.join("state")
    }

    fn out(&self) -> String {
        self.directory.join("out").display().to_string()
    }

    /// The binary with `arguments`, the state dir, and the secret variable set.
    fn command(&self, arguments: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_protocol-run"));
        command
            .args(arguments)
            .arg("--state-dir")
            .arg(self.state())
            .env(VARIABLE, &self.environment_token)
            .current_dir(&self.directory)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs to the end; (exit code, stdout and stderr together), checked for both tokens.
    fn finish(&self, command: &mut Command) -> (i32, String) {
        let output = command.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        self.assert_hidden(&format!("the output of {command:?}"), text.as_bytes());
        (output.status.code().unwrap_or(-1), text)
    }

    fn assert_hidden(&self, what: &str, bytes: &[u8]) {
        for token in [&self.token, &self.environment_token] {
            assert!(
                !bytes
                    .windows(token.len())
                    .any(|window| window == token.as_bytes()),
                "{what} holds the secret {token}:\n{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    /// Every file under the state dir (the database, its WAL, a run's telemetry), byte for
    /// byte.
    fn assert_state_dir_hidden(&self) {
        let mut directories = vec![self.state()];
        let mut files = 0;
        while let Some(directory) = directories.pop() {
            for entry in std::fs::read_dir(&directory).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    directories.push(path);
                } else {
                    self.assert_hidden(&path.display().to_string(), &std::fs::read(&path).unwrap());
                    files += 1;
                }
            }
        }
        assert!(
            files > 0 && self.state().join("state.db").exists(),
            "the store was written"
        );
    }

    /// What an operator sees of the run with `views` (`STORE_VIEWS`, `TELEMETRY_VIEWS`).
    fn assert_views_hidden(&self, views: &[&[&str]]) -> String {
        let mut seen = String::new();
        for view in views {
            let (code, text) = self.finish(&mut self.command(view));
            assert_eq!(code, 0, "{view:?}: {text}");
            seen.push_str(&text);
        }
        seen
    }

    /// What the processes wrote: each received the real values.
    fn assert_effects_received(&self, files: &[&str]) {
        for file in files {
            let written = std::fs::read_to_string(self.directory.join("out").join(file)).unwrap();
            let expected = match *file {
                "first" => format!("{} {}", self.token, self.environment_token),
                _ => format!("Bearer {} {}", self.token, self.environment_token),
            };
            assert_eq!(written, expected, "out/{file}");
        }
    }

    /// `run uses.yaml` with both required inputs, then `more`.
    fn run_command(&self, more: &[&str]) -> Command {
        let mut command = self.command(&["run", "uses.yaml"]);
        command
            .arg("-i")
            .arg(self.token_input())
            .arg("-i")
            .arg(format!("out={}", self.out()))
            .args(more);
        command
    }

    fn token_input(&self) -> String {
        format!("token={}", self.token)
    }
}

#[test]
fn a_run_uses_its_secrets_and_shows_and_stores_only_placeholders() {
    let case = Case::new("run");
    let (code, text) =
        case.finish(&mut case.run_command(&["--virtual-time", "--log-format", "json"]));
    assert_eq!(code, 0, "{text}");
    case.assert_effects_received(&["first", "again"]);
    // The JSON log line and the finished line name the placeholders.
    assert!(
        text.contains("calling with Bearer ***token*** and ***env.PROTOCOL_RUN_TEST_SECRET***"),
        "{text}"
    );
    assert!(text.contains(r#""echoed":"***token***""#), "{text}");
    case.assert_state_dir_hidden();
    let mut views = case.assert_views_hidden(&STORE_VIEWS);
    views.push_str(&case.assert_views_hidden(&TELEMETRY_VIEWS));
    assert!(views.contains("***token***"), "{views}");
}

/// Killed with SIGKILL while waiting between the two processes, the run resumes only with its
/// secret input given again, and its second process still receives the real values.
#[test]
fn a_run_killed_and_resumed_still_has_its_secrets() {
    let case = Case::new("killed");
    let out = format!("out={}", case.out());
    let mut run = case.run_command(&["-i", "pause=1s"]).spawn().unwrap();
    wait_for_status(&case.directory, &case.state(), "the wait", |status| {
        status["state"]["configuration"]
            .as_array()
            .is_some_and(|states| states.iter().any(|state| state == "waiting"))
    });
    run.kill().unwrap();
    let killed = run.wait_with_output().unwrap();
    case.assert_hidden("the killed run's output", &killed.stderr);
    case.assert_hidden("the killed run's output", &killed.stdout);
    case.assert_state_dir_hidden();
    case.assert_views_hidden(&STORE_VIEWS);
    case.assert_views_hidden(&TELEMETRY_VIEWS);
    let run_id = latest_run_id(&case);

    let (code, text) = case.finish(&mut case.command(&["resume", &run_id]));
    assert_eq!(code, 64, "{text}");
    assert!(
        text.contains(
            "secret input `token` is not stored with the run; supply it again: --input token=VALUE"
        ),
        "{text}"
    );
    let (code, text) = case.finish(
        case.command(&["resume", &run_id, "-i", &out])
            .env_remove(VARIABLE),
    );
    assert_eq!(code, 64, "{text}");
    assert!(
        text.contains("only its secret inputs are supplied again"),
        "{text}"
    );
    let token = case.token_input();
    let (code, text) = case.finish(
        case.command(&["resume", &run_id, "-i", &token])
            .env_remove(VARIABLE),
    );
    assert_eq!(code, 65, "{text}");
    assert!(
        text.contains(&format!("environment variable {VARIABLE}")),
        "{text}"
    );

    // `-i token` alone reads it from the variable `token`: it stays out of the arguments.
    let (code, text) = case.finish(
        case.command(&["resume", &run_id, "-i", "token"])
            .env("token", &case.token),
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(r#""echoed":"***token***""#), "{text}");
    case.assert_effects_received(&["first", "again"]);
    case.assert_state_dir_hidden();
    case.assert_views_hidden(&STORE_VIEWS);
    case.assert_views_hidden(&TELEMETRY_VIEWS);
}

fn latest_run_id(case: &Case) -> String {
    let (code, text) = case.finish(&mut case.command(&["status", "--json"]));
    assert_eq!(code, 0, "{text}");
    let status: serde_json::Value = serde_json::from_str(&text).unwrap();
    status["run"].as_str().unwrap().to_string()
}

/// A `serve` instance created with a secret input: its socket client and stdout see only the
/// placeholder; the next host resumes it only when given the secret again (`--input`).
#[test]
fn serve_keeps_secrets_from_clients_and_the_store() {
    let case = Case::new("serve");
    let socket = case.directory.join("host.sock");
    let host = case
        .command(&["serve", "uses.yaml", "--socket", socket.to_str().unwrap()])
        .spawn()
        .unwrap();
    let client = connect(&socket);
    let create = serde_json::json!({
        "instance": "a",
        "inputs": {"token": case.token, "out": case.out()},
    });
    (&client)
        .write_all(format!("{create}\n").as_bytes())
        .unwrap();
    let mut reader = std::io::BufReader::new(&client);
    let mut seen = String::new();
    let started = Instant::now();
    while !seen.contains(r#""event":"done.exec.first""#) && !seen.contains(r#""error""#) {
        assert!(started.elapsed() < Duration::from_secs(20), "{seen}");
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "{seen}");
        seen.push_str(&line);
    }
    case.assert_hidden("what the client read", seen.as_bytes());
    let (code, stdout, stderr) = stop(host);
    assert_eq!(code, 75, "{stderr}");
    case.assert_hidden("the host's stdout", stdout.as_bytes());
    case.assert_hidden("the host's stderr", stderr.as_bytes());
    case.assert_effects_received(&["first"]);
    case.assert_state_dir_hidden();
    let views = case.assert_views_hidden(&STORE_VIEWS);
    assert!(views.contains(r#""token":"***token***""#), "{views}");

    // Without the secret the instance stays in the store, named; with it, it goes on.
    let (_, text) = case.finish(&mut case.command(&["serve", "uses.yaml"]));
    assert!(
        text.contains("instance `a` cannot resume: secret input `token` is not stored"),
        "{text}"
    );
    let token = case.token_input();
    let mut host = case.command(&["serve", "uses.yaml", "-i", &token]);
    host.stdin(Stdio::piped());
    let mut host = host.spawn().unwrap();
    host.stdin
        .take()
        .unwrap()
        .write_all(b"{\"instance\": \"a\", \"event\": \"go\"}\n")
        .unwrap();
    let (code, text) = case.finish_child(host);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(r#""echoed":"***token***""#), "{text}");
    case.assert_effects_received(&["first", "again"]);
    case.assert_state_dir_hidden();
    // Its telemetry, kept in the store by both hosts: its log line, the secrets masked.
    let logs = case.assert_views_hidden(&TELEMETRY_VIEWS);
    assert!(logs.contains("calling with Bearer ***token***"), "{logs}");
}

impl Case {
    fn finish_child(&self, child: Child) -> (i32, String) {
        let output = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        self.assert_hidden("a host's output", text.as_bytes());
        (output.status.code().unwrap_or(-1), text)
    }
}

fn connect(socket: &Path) -> std::os::unix::net::UnixStream {
    let started = Instant::now();
    loop {
        match std::os::unix::net::UnixStream::connect(socket) {
            Ok(stream) => return stream,
            Err(error) => {
                assert!(started.elapsed() < Duration::from_secs(20), "{error}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Stops a host with SIGTERM; (exit code, stdout, stderr).
fn stop(host: Child) -> (i32, String, String) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let output = host.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// `secret: true` is for strings without a default; a secret too short to mask is refused
/// without echoing it; `validate` lists the secret inputs.
#[test]
fn secret_inputs_are_checked_and_listed() {
    let numeric = crate::support::errors(
        "id: s\ninputs:\n  pin: { type: integer, secret: true }\nstates: { a: { type: final } }\n",
    );
    assert!(
        numeric.contains("`secret` applies to `type: string` inputs; `pin` is of type integer"),
        "{numeric}"
    );
    assert!(numeric.contains("test.yaml:3"), "located: {numeric}");
    let defaulted = crate::support::errors(
        "id: s\ninputs:\n  key: { type: string, secret: true, default: hunter22 }\nstates: { a: { type: final } }\n",
    );
    assert!(
        defaulted.contains("secret input `key` has a default"),
        "{defaulted}"
    );
    let case = Case::new("checked");
    let (code, text) =
        case.finish(&mut case.command(&["run", "uses.yaml", "-i", "token=ab1", "-i", "out=x"]));
    assert_eq!(code, 65, "{text}");
    assert!(
        text.contains("input `token`: a secret has at least 4 characters") && !text.contains("ab1"),
        "{text}"
    );
    let (code, text, _) = crate::support::run_binary(&case.directory, &["validate", "uses.yaml"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("secret inputs: token (masked as ***NAME***"),
        "{text}"
    );
}

/// Event data that spells a placeholder is not stored where a resume would take it for the
/// secret: the step is refused, naming why, and the run stops.
#[test]
fn a_text_spelling_a_placeholder_is_not_stored_as_the_secret() {
    let case = Case::new("spelled");
    std::fs::write(
        case.directory.join("events.jsonl"),
        "{\"event\": \"note\", \"data\": {\"text\": \"***token***\"}}\n",
    )
    .unwrap();
    std::fs::write(
        case.directory.join("notes.yaml"),
        r#"
id: notes
inputs:
  token: { type: string, required: true, secret: true }
context: { note: "" }
states:
  waiting:
    on:
      note:
        target: done
        actions: [{ assign: { note: "event.data.text" } }]
  done: { type: final }
"#,
    )
    .unwrap();
    let (code, text) = case.finish(&mut case.command(&[
        "run",
        "notes.yaml",
        "-i",
        &case.token_input(),
        "--events",
        "events.jsonl",
    ]));
    assert_eq!(code, 74, "{text}");
    assert!(
        text.contains("a text holds `***token***`, which reads as the placeholder of a secret"),
        "{text}"
    );
}

/// A parent passes its secret input to a child's secret input: the child's process gets the
/// value, the parent's store and output hold the parent's placeholder.
#[test]
fn a_secret_passed_to_a_child_protocol_stays_masked() {
    let case = Case::new("child");
    std::fs::write(
        case.directory.join("child.yaml"),
        r#"
id: child
inputs:
  key: { type: string, required: true, secret: true }
  out: { type: string, required: true }
states:
  using:
    entry:
      - exec: [sh, -c, 'printf "%s" "$1" > "$2/child"', sh, "${key}", "${out}"]
        id: use
    on:
      done.exec.use: done
  done: { type: final, output: { used: "${key}" } }
"#,
    )
    .unwrap();
    std::fs::write(
        case.directory.join("parent.yaml"),
        r#"
id: parent
inputs:
  token: { type: string, required: true, secret: true }
  out: { type: string, required: true }
states:
  calling:
    invoke: [{ id: kid, protocol: child.yaml, inputs: { key: "${token}", out: "${out}" } }]
    on:
      done.invoke.kid: { target: done, actions: [{ log: "child used ${event.data.used}" }] }
  done: { type: final }
"#,
    )
    .unwrap();
    let out = format!("out={}", case.out());
    let token = case.token_input();
    let (code, text) =
        case.finish(&mut case.command(&["run", "parent.yaml", "-i", &token, "-i", &out]));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("child used ***token***"), "{text}");
    let written = std::fs::read_to_string(case.directory.join("out/child")).unwrap();
    assert_eq!(written, case.token);
    case.assert_state_dir_hidden();
    case.assert_views_hidden(&STORE_VIEWS);
    case.assert_views_hidden(&TELEMETRY_VIEWS);
}

/// Prints `PADDING` bytes of `x` lines, then the secret input: the output cap (1 MiB) cuts the
/// secret after its 14th character. The output goes into the context and the finished line.
const CUT_BY_THE_CAP: &str = r#"
id: cut-by-the-cap
inputs:
  token: { type: string, required: true, secret: true }
context: { seen: "" }
states:
  printing:
    entry:
      - exec: [sh, -c, 'yes x | head -c PADDING; printf %s "$1"', sh, "${token}"]
        id: print
    on:
      done.exec.print:
        target: done
        actions: [{ assign: { seen: "event.data.stdout.substring(1048000)" } }]
  done: { type: final, output: { tail: "${seen}" } }
"#;

#[test]
fn a_secret_cut_by_the_output_cap_leaves_no_part_of_it() {
    let directory = crate::support::temporary_directory("secrets", "cut-by-the-cap");
    // 15 characters, no four of them in a row in the padding (`x\n`).
    let token = "Zq7Kw9Mv2Lp5Xr8";
    let padding = 1_048_576 - 14;
    std::fs::write(
        directory.join("cut.yaml"),
        CUT_BY_THE_CAP.replace("PADDING", &padding.to_string()),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["cut.yaml", "--state-dir", "state", "-i"])
        .arg(format!("token={token}"))
        .current_dir(&directory)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // Not vacuous: the cut output reached the run (its last bytes are padding).
    assert!(stdout.contains(r#""tail":"#), "{stdout}");
    let parts: Vec<&str> = (0..=token.len() - 4)
        .map(|start| &token[start..start + 4])
        .collect();
    let mut texts = vec![("stdout".to_string(), stdout.to_string())];
    texts.push(("stderr".to_string(), stderr.to_string()));
    let mut files = vec![directory.join("state")];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .map(|entry| entry.unwrap().path()),
            );
        } else {
            let bytes = std::fs::read(&path).unwrap();
            texts.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into(),
            ));
        }
    }
    assert!(
        texts.len() > 3,
        "no files under the state directory: {texts:?}"
    );
    for (place, text) in &texts {
        for part in &parts {
            assert!(!text.contains(part), "`{part}` of the secret is in {place}");
        }
    }
}
