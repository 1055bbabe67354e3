//! A secret holding `"`, `\`, a newline, a tab and a control character stays masked where the engine escapes it: a list rendered as JSON, a `Debug` form in an expression error, both escaped again.

use crate::support::{run_binary_with_state as protocol_run, temporary_directory};

/// Renders the secret as a list, then makes an expression error hold it (`'Bearer ' + token +
/// 1`: a string plus an int), logs and keeps the message, and outputs all of it.
const ESCAPES_SECRET: &str = r#"
id: escaped-secret
inputs:
  token: { type: string, required: true, secret: true }
context: { l: [], err: "" }
states:
  waiting:
    entry:
      - assign: { l: "[token, env('PROTOCOL_RUN_TEST_ESCAPED_SECRET')]" }
      - log: "as list: ${l}"
        fields: { list: "${l}", text: "as list: ${l}" }
    on:
      go: failing
  failing:
    entry:
      - assign: { err: "'Bearer ' + token + event.data.n" }
    on:
      error.execution:
        target: done
        actions:
          - assign: { err: "event.data.message" }
          - log: "failed: ${event.data.message}"
            fields: { message: "${event.data.message}" }
  done: { type: final, output: { err: "${err}", list: "${l}", rendered: "as list: ${l}" } }
"#;

/// The variable `env()` reads in `ESCAPES_SECRET`.
const VARIABLE: &str = "PROTOCOL_RUN_TEST_ESCAPED_SECRET";

/// Fails when `bytes` hold `marker`, the part of the secret no escaping changes: a leak in any
/// spelling shows it.
fn assert_hidden(what: &str, bytes: &[u8], marker: &str) {
    assert!(
        !bytes
            .windows(marker.len())
            .any(|window| window == marker.as_bytes()),
        "{what} holds the secret:\n{}",
        String::from_utf8_lossy(bytes)
    );
}

#[test]
fn a_secret_the_engine_escapes_is_masked_in_every_log_view_and_stored_file() {
    for log_format in ["human", "json"] {
        let directory = temporary_directory("secret-spellings", log_format);
        std::fs::write(directory.join("escapes.yaml"), ESCAPES_SECRET).unwrap();
        std::fs::write(
            directory.join("events.jsonl"),
            "{\"event\":\"go\",\"data\":{\"n\":1}}\n",
        )
        .unwrap();
        let marker = format!("mArk{}{log_format}", std::process::id());
        let token = format!("pa\"ss\\wo\nrd\tx\u{1}y{marker}");
        // The variable's value escapes too, with its own control character.
        let environment_value = format!("en\"v\\al\n\t\u{2}{marker}E");
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(["run", "escapes.yaml", "--events", "events.jsonl"])
            .args(["--log-format", log_format, "-i", &format!("token={token}")])
            .arg("--state-dir")
            .arg(directory.join("state"))
            .env(VARIABLE, &environment_value)
            .current_dir(&directory)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let code = output.status.code().unwrap_or(-1);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(code, 0, "{text}");
        assert_hidden("the run's output", text.as_bytes(), &marker);
        assert!(
            text.contains(
                "as list: [\\\"***token***\\\",\\\"***env.PROTOCOL_RUN_TEST_ESCAPED_SECRET***\\\"]"
            ) || text.contains(
                "as list: [\"***token***\",\"***env.PROTOCOL_RUN_TEST_ESCAPED_SECRET***\"]"
            ),
            "{text}"
        );
        assert!(
            text.contains("Bearer ***token***"),
            "the error reached the log: {text}"
        );
        for view in [
            &["status"][..],
            &["status", "--json"],
            &["runs"],
            &["logs"],
            &["logs", "--json"],
        ] {
            let (code, seen) = protocol_run(&directory, view);
            assert_eq!(code, 0, "{view:?}: {seen}");
            assert_hidden(&format!("{view:?}"), seen.as_bytes(), &marker);
        }
        let mut directories = vec![directory.join("state")];
        let mut files = 0;
        while let Some(parent) = directories.pop() {
            for entry in std::fs::read_dir(&parent).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    directories.push(path);
                } else {
                    assert_hidden(
                        &path.display().to_string(),
                        &std::fs::read(&path).unwrap(),
                        &marker,
                    );
                    files += 1;
                }
            }
        }
        assert!(files > 0, "the store was written");
    }
}
