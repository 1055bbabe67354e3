//! A language-server client over stdio, as an editor is one: framed JSON-RPC, requests
//! answered in order, notifications kept until asked for.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::{Value, json};

/// Long enough for a compile on a loaded machine; a stuck server fails the test instead of hanging it.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A `file://` URI for a path without characters that need escaping.
pub fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The server, with its messages read on a thread so a silent server fails on a timeout.
pub struct Client {
    pub child: Child,
    pub stdin: ChildStdin,
    messages: Receiver<Value>,
    next_id: i64,
    /// Notifications received while waiting for responses.
    notifications: Vec<Value>,
}

impl Client {
    pub fn start() -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            while let Some(message) = read_framed(&mut stdout) {
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            child,
            stdin,
            messages,
            next_id: 0,
            notifications: Vec::new(),
        };
        let initialized = client.request("initialize", json!({ "capabilities": {} }));
        assert_eq!(initialized["capabilities"]["hoverProvider"], true);
        client.notify("initialized", json!({}));
        client
    }

    pub fn send(&mut self, message: &Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Sends a request and waits for its response, keeping notifications that come first.
    pub fn request_raw(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let message = self.receive();
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            self.notifications.push(message);
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.request_raw(method, params);
        assert!(response.get("error").is_none(), "{method}: {response}");
        response["result"].clone()
    }

    pub fn receive(&mut self) -> Value {
        self.messages
            .recv_timeout(RESPONSE_TIMEOUT)
            .expect("the language server did not answer in time")
    }

    /// The next diagnostics published for `uri`.
    pub fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let matches = |message: &Value| {
            message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
        };
        if let Some(index) = self.notifications.iter().position(matches) {
            let message = self.notifications.remove(index);
            return message["params"]["diagnostics"].as_array().unwrap().clone();
        }
        loop {
            let message = self.receive();
            if matches(&message) {
                return message["params"]["diagnostics"].as_array().unwrap().clone();
            }
            self.notifications.push(message);
        }
    }

    pub fn open(&mut self, uri: &str, text: &str) -> Vec<Value> {
        let document = json!({ "uri": uri, "languageId": "yaml", "version": 1, "text": text });
        self.notify("textDocument/didOpen", json!({ "textDocument": document }));
        self.diagnostics(uri)
    }

    pub fn change(&mut self, uri: &str, version: i64, text: &str) -> Vec<Value> {
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": { "uri": uri, "version": version },
                "contentChanges": [{ "text": text }],
            }),
        );
        self.diagnostics(uri)
    }

    pub fn at(&mut self, method: &str, uri: &str, line: usize, character: usize) -> Value {
        self.request(
            method,
            json!({
                "textDocument": { "uri": uri },
                "position": { "line": line, "character": character },
            }),
        )
    }

    /// The labels offered at the end of `needle`'s first line match in `text`.
    pub fn labels_after(&mut self, uri: &str, text: &str, needle: &str) -> Vec<String> {
        let (line, character) = end_of(text, needle);
        let items = self.at("textDocument/completion", uri, line, character);
        items
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["label"].as_str().unwrap().to_string())
            .collect()
    }

    /// Shuts down as an editor does and returns the exit code.
    pub fn shut_down(mut self) -> i32 {
        assert_eq!(self.request("shutdown", Value::Null), Value::Null);
        self.notify("exit", Value::Null);
        self.child.wait().unwrap().code().unwrap()
    }
}

/// The 0-based line and UTF-16 column just after `needle` in `text`.
pub fn end_of(text: &str, needle: &str) -> (usize, usize) {
    let offset = text.find(needle).unwrap_or_else(|| panic!("no {needle:?}")) + needle.len();
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let column = before[line_start..].encode_utf16().count();
    (before.matches('\n').count(), column)
}

fn read_framed(input: &mut impl BufRead) -> Option<Value> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if input.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    input.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}
