//! The committed schemas give a real yaml-language-server completion, hover and diagnostics.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// Long enough for a cold node start on a loaded CI machine, short enough that a stuck server fails the run.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

const PROTOCOL_MODELINE: &str = "# yaml-language-server: $schema=../schemas/protocol.schema.json";
const SCENARIO_MODELINE: &str = "# yaml-language-server: $schema=../schemas/scenario.schema.json";
const LIBRARY_MODELINE: &str = "# yaml-language-server: $schema=../schemas/library.schema.json";

// Hover and completion by where a key is written and how: the schema's forms and kinds.
#[path = "editor_forms.rs"]
mod forms;

// Shared with the integration tests' support, which this binary does not include.
#[path = "support/npm_package.rs"]
mod npm_package;

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A virtual document beside the real protocols, so the modeline's relative path reaches the real schema.
fn document_uri(file_name: &str) -> String {
    file_uri(&repository().join("protocols").join(file_name))
}

/// A `file://` URI, percent-encoding what a path may hold but a URI may not (a space, `#`, `%`).
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

#[test]
fn protocol_completion_offers_the_schema_keys_and_values() {
    let mut server = LanguageServer::start();

    let top_level = server.open(
        "editor-test-top-level.yaml",
        &format!("{PROTOCOL_MODELINE}\n\n"),
    );
    let labels = server.completion_labels(&top_level, 1, 0);
    assert_offers(&labels, &["states", "inputs", "context", "id"], "top level");

    let state = server.open(
        "editor-test-state.yaml",
        &format!("{PROTOCOL_MODELINE}\nid: editor-test\nstates:\n  idle:\n    \n"),
    );
    let labels = server.completion_labels(&state, 4, 4);
    assert_offers(
        &labels,
        &["entry", "on", "after", "always", "type", "initial"],
        "a state",
    );

    let state_type = server.open(
        "editor-test-state-type.yaml",
        &format!("{PROTOCOL_MODELINE}\nid: editor-test\nstates:\n  idle:\n    type: \n"),
    );
    let labels = server.completion_labels(&state_type, 4, 10);
    assert_offers(
        &labels,
        &["parallel", "final", "history"],
        "the value of `type:`",
    );

    let action = server.open(
        "editor-test-action.yaml",
        &format!("{PROTOCOL_MODELINE}\nid: editor-test\nstates:\n  idle:\n    entry:\n      - \n"),
    );
    let labels = server.completion_labels(&action, 5, 8);
    assert_offers(&labels, &["log", "assign", "exec"], "an entry action");

    server.shut_down();
}

#[test]
fn protocol_hover_and_diagnostics_come_from_the_schema() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repository().join("schemas/protocol.schema.json"))
            .expect("schemas/protocol.schema.json is committed"),
    )
    .expect("the protocol schema is JSON");
    // Read rather than copied, so rewording the doc comment does not break this test.
    let states_documentation = schema["properties"]["states"]["markdownDescription"]
        .as_str()
        .expect("the schema documents `states`");
    assert!(
        !states_documentation.is_empty(),
        "the schema documents `states`"
    );

    let mut server = LanguageServer::start();

    let valid = server.open(
        "editor-test-hover.yaml",
        &format!("{PROTOCOL_MODELINE}\nid: editor-test\nstates:\n  done:\n    type: final\n"),
    );
    let hover = server.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": valid }, "position": { "line": 2, "character": 2 } }),
    );
    let hover_text = hover["contents"]["value"].as_str().unwrap_or_default();
    assert!(
        hover_text.contains(states_documentation),
        "hover on `states` shows its schema documentation; got {hover}"
    );

    // Line 5 (0-based) holds the typo; every other line is valid, so it must be the only diagnostic.
    let mistyped = server.open(
        "editor-test-diagnostics.yaml",
        &format!(
            "{PROTOCOL_MODELINE}\nid: editor-test\nstates:\n  idle:\n    entry: [{{ log: hello }}]\n    entyr: []\n"
        ),
    );
    let diagnostics = server.wait_for_diagnostics(&mistyped);
    assert!(
        !diagnostics.is_empty(),
        "an unknown key in a state is flagged"
    );
    for diagnostic in &diagnostics {
        let message = diagnostic["message"].as_str().unwrap_or_default();
        assert_eq!(
            diagnostic["range"]["start"]["line"], 5,
            "the diagnostic is on the `entyr:` line: {diagnostic}"
        );
        assert!(
            message.contains("entyr") && message.contains("not allowed"),
            "the diagnostic says the property is not allowed: {diagnostic}"
        );
    }

    server.shut_down();
}

#[test]
fn scenario_completion_offers_the_step_kinds() {
    let mut server = LanguageServer::start();
    let scenario = server.open(
        "editor-test.scenario.yaml",
        &format!(
            "{SCENARIO_MODELINE}\nprotocol: retry-backoff.yaml\nscenarios:\n  - name: editor test\n    steps:\n      - \n"
        ),
    );
    let labels = server.completion_labels(&scenario, 5, 8);
    assert_offers(&labels, &["send", "after", "expect"], "a scenario step");
    server.shut_down();
}

#[test]
fn library_completion_offers_blocks_and_policies_and_a_block_offers_use() {
    let mut server = LanguageServer::start();
    let library = server.open(
        "editor-test.library.yaml",
        &format!("{LIBRARY_MODELINE}\n\n"),
    );
    let labels = server.completion_labels(&library, 1, 0);
    assert_offers(
        &labels,
        &["blocks", "retry_policies", "imports"],
        "a library's top level",
    );
    let block = server.open(
        "editor-test-block.library.yaml",
        &format!("{LIBRARY_MODELINE}\nblocks:\n  call:\n    do:\n      - \n"),
    );
    let labels = server.completion_labels(&block, 4, 8);
    assert_offers(&labels, &["use", "log", "exec"], "an action in a block");
    server.shut_down();
}

fn assert_offers(labels: &[String], expected: &[&str], place: &str) {
    for label in expected {
        assert!(
            labels.iter().any(|offered| offered == label),
            "completion in {place} offers `{label}`; offered {labels:?}"
        );
    }
}

/// The path of the pinned server's entry point, installed with `npm ci` when missing or not the pinned version.
fn server_entry_point() -> &'static Path {
    static ENTRY_POINT: OnceLock<PathBuf> = OnceLock::new();
    ENTRY_POINT.get_or_init(|| {
        npm_package::installed("editor", "yaml-language-server").join("bin/yaml-language-server")
    })
}

/// A running yaml-language-server; dropping it kills the process, so a failed assertion never leaves it behind.
struct LanguageServer {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    /// Notifications that arrived while waiting for something else.
    notifications: VecDeque<Value>,
    standard_error: Arc<Mutex<String>>,
    next_id: u64,
}

impl LanguageServer {
    fn start() -> LanguageServer {
        let entry_point = server_entry_point();
        let mut child = Command::new("node")
            .arg(entry_point)
            .arg("--stdio")
            .current_dir(repository())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot start node ({error}): install Node.js 20 or later with npm")
            });
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");

        let (sender, messages) = mpsc::channel();
        thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let standard_error = Arc::new(Mutex::new(String::new()));
        let collected = Arc::clone(&standard_error);
        // Line by line, so a timeout can show what the server said before it went quiet.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut text = collected.lock().unwrap_or_else(PoisonError::into_inner);
                text.push_str(&line);
                text.push('\n');
            }
        });

        let mut server = LanguageServer {
            child,
            stdin,
            messages,
            notifications: VecDeque::new(),
            standard_error,
            next_id: 1,
        };
        let root = file_uri(repository());
        server.request(
            "initialize",
            json!({
                "processId": std::process::id(),
                "rootUri": root,
                "workspaceFolders": [{ "uri": root, "name": "protocol-run" }],
                "capabilities": {
                    "workspace": { "configuration": true },
                    "textDocument": {
                        "completion": { "completionItem": { "snippetSupport": false } },
                        "hover": { "contentFormat": ["markdown", "plaintext"] },
                        "publishDiagnostics": {}
                    }
                }
            }),
        );
        server.notify("initialized", json!({}));
        server
    }

    fn open(&mut self, file_name: &str, text: &str) -> String {
        let uri = document_uri(file_name);
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "yaml", "version": 1, "text": text } }),
        );
        uri
    }

    fn completion_labels(&mut self, uri: &str, line: u32, character: u32) -> Vec<String> {
        let result = self.request(
            "textDocument/completion",
            json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": character } }),
        );
        // The result is either a CompletionList or a bare array of items.
        let items = result.get("items").unwrap_or(&result);
        items
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| item["label"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        let response = self.wait_for(method, |message| {
            message.get("method").is_none() && message["id"] == id
        });
        if let Some(error) = response.get("error") {
            panic!("{method} failed: {error}");
        }
        response["result"].clone()
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    fn wait_for_diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let is_for_uri = |message: &Value| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
        };
        let notification = match self.notifications.iter().position(is_for_uri) {
            Some(index) => self
                .notifications
                .remove(index)
                .expect("the index was just found"),
            None => self.wait_for("textDocument/publishDiagnostics", is_for_uri),
        };
        notification["params"]["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Reads messages until one matches, answering the server's own requests on the way.
    fn wait_for(&mut self, awaited: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let message = match self.messages.recv_timeout(remaining) {
                Ok(message) => message,
                Err(error) => panic!(
                    "no answer to {awaited} within {RESPONSE_TIMEOUT:?} ({error}); server stderr:\n{}",
                    self.standard_error()
                ),
            };
            if matches(&message) {
                return message;
            }
            match (message.get("id"), message["method"].as_str()) {
                (Some(id), Some(method)) => {
                    let result = answer_server_request(method, &message["params"]);
                    self.send(json!({ "jsonrpc": "2.0", "id": id, "result": result }));
                }
                (None, Some(_)) => self.notifications.push_back(message),
                _ => {}
            }
        }
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        let written = write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len())
            .and_then(|()| self.stdin.flush());
        if let Err(error) = written {
            panic!(
                "cannot write to yaml-language-server ({error}); server stderr:\n{}",
                self.standard_error()
            );
        }
    }

    /// A copy, so no lock is held while a failure message is built and the test panics.
    fn standard_error(&self) -> String {
        let text = self
            .standard_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        text.clone()
    }

    /// The orderly end: `shutdown`, `exit`, then the process must be gone within the timeout.
    fn shut_down(mut self) {
        self.request("shutdown", Value::Null);
        self.notify("exit", Value::Null);
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            match self
                .child
                .try_wait()
                .expect("the server's status is readable")
            {
                Some(_) => return,
                None if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                None => panic!(
                    "yaml-language-server did not exit within {RESPONSE_TIMEOUT:?} of `exit`"
                ),
            }
        }
    }
}

impl Drop for LanguageServer {
    fn drop(&mut self) {
        // After a clean shut_down the process is already reaped and kill merely reports it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What this test's client says to the server's requests: settings for `workspace/configuration`,
/// `null` for everything else (capability registration, progress tokens).
fn answer_server_request(method: &str, params: &Value) -> Value {
    if method != "workspace/configuration" {
        return Value::Null;
    }
    let items = params["items"].as_array().cloned().unwrap_or_default();
    let settings = items
        .iter()
        .map(|item| match item["section"].as_str() {
            // The schema store and the Kubernetes store would be fetched from the internet:
            // off, so the test sees only the modelines' schemas and needs no network.
            Some("yaml") => json!({
                "validate": true,
                "completion": true,
                "hover": true,
                "schemas": {},
                "schemaStore": { "enable": false },
                "kubernetesCRDStore": { "enable": false }
            }),
            Some("http" | "[yaml]" | "editor") => json!({}),
            _ => Value::Null,
        })
        .collect();
    Value::Array(settings)
}

/// One LSP message: `Content-Length` headers, a blank line, then that many bytes of JSON.
fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut content_length = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        // Other headers (only Content-Type is defined) say nothing this client needs.
        match header.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("Content-Length") => {
                content_length = value.trim().parse::<usize>().ok();
            }
            _ => {}
        }
    }
    let mut body = vec![0; content_length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}
