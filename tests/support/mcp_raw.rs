//! A raw JSON-RPC client of `protocol-run mcp` over stdio: any initialize, raw lines, requests and responses by id or in arrival order, and the server's own requests (elicitation) kept to be answered.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{Value, json};

/// How long a test waits for a message before it fails, rather than hang.
const PATIENCE: Duration = Duration::from_secs(30);

/// A server on stdio, spoken to line by line; its stderr kept in a file of its directory.
pub struct RawMcp {
    child: Child,
    input: Option<ChildStdin>,
    messages: Receiver<Value>,
    /// Requests from the server not handed out yet.
    server_requests: VecDeque<Value>,
    /// Responses read while waiting for another one, in the order they came.
    responses: VecDeque<Value>,
    directory: PathBuf,
    /// `stderr.txt`, or the next free `stderr-N.txt` for a later server over the same
    /// directory, so each server's stderr is its own.
    stderr: PathBuf,
    /// The server's answer to `initialize`.
    pub initialized: Value,
    /// The test directory the server runs in, when the server owns it: removed after the
    /// server is killed.
    owned: Option<super::TemporaryDirectory>,
}

impl RawMcp {
    /// `protocol-run mcp --state-dir state ARGUMENTS...` in `directory`, initialized with
    /// `capabilities` at revision 2025-11-25.
    pub fn start(directory: &Path, arguments: &[&str], capabilities: Value) -> RawMcp {
        RawMcp::start_in(directory, "state", arguments, capabilities)
    }

    /// `start` with the state directory `state` (servers in one directory, each with its own
    /// state directory, share the protocols' paths).
    pub fn start_in(
        directory: &Path,
        state: &str,
        arguments: &[&str],
        capabilities: Value,
    ) -> RawMcp {
        let stderr_path = (1..)
            .map(|count| match count {
                1 => directory.join("stderr.txt"),
                count => directory.join(format!("stderr-{count}.txt")),
            })
            .find(|path| !path.exists())
            .unwrap();
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(["mcp", "--state-dir", state])
            .args(arguments)
            .current_dir(directory)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let input = child.stdin.take();
        let output = BufReader::new(child.stdout.take().unwrap());
        let (sender, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in output.lines() {
                let Ok(line) = line else { return };
                if sender.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        let mut raw = RawMcp {
            child,
            input,
            messages,
            server_requests: VecDeque::new(),
            responses: VecDeque::new(),
            directory: directory.to_path_buf(),
            stderr: stderr_path,
            initialized: Value::Null,
            owned: None,
        };
        let initialized = raw.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert!(
            initialized["result"]["serverInfo"].is_object(),
            "{initialized}"
        );
        raw.initialized = initialized;
        raw.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        raw
    }

    /// The server owning `directory`, its test directory: the directory lives as long as it.
    pub fn keeping(mut self, directory: super::TemporaryDirectory) -> RawMcp {
        self.owned = Some(directory);
        self
    }

    /// The directory the server runs in.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes `lines` as they are, with a newline after the last.
    pub fn write(&mut self, lines: &str) {
        let input = self.input.as_mut().expect("stdin is open");
        input.write_all(format!("{lines}\n").as_bytes()).unwrap();
        input.flush().unwrap();
    }

    /// Sends request `id` without waiting for its response.
    pub fn send(&mut self, id: u64, method: &str, params: Value) {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(&request.to_string());
    }

    /// Sends requests `1..=count`, each `method` with `params`, in one write: they arrive at
    /// once.
    pub fn send_at_once(&mut self, count: u64, method: &str, params: &Value) {
        let requests: Vec<String> = (1..=count)
            .map(|id| {
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
            })
            .collect();
        self.write(&requests.join("\n"));
    }

    /// The next message, sorted: a server request or a response is kept, a notification
    /// dropped.
    fn read_one(&mut self) {
        let message = match self.messages.recv_timeout(PATIENCE) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => panic!("no message from the server in {PATIENCE:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
        };
        match (message.get("id").is_some(), message.get("method").is_some()) {
            (true, true) => self.server_requests.push_back(message),
            (true, false) => self.responses.push_back(message),
            _ => {}
        }
    }

    /// The next response, whichever request it answers.
    pub fn next_response(&mut self) -> Value {
        loop {
            if let Some(response) = self.responses.pop_front() {
                return response;
            }
            self.read_one();
        }
    }

    /// The response to request `id`.
    pub fn response(&mut self, id: u64) -> Value {
        loop {
            if let Some(index) = self
                .responses
                .iter()
                .position(|response| response["id"] == id)
            {
                return self.responses.remove(index).unwrap();
            }
            self.read_one();
        }
    }

    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(id, method, params);
        self.response(id)
    }

    /// `tools/call` of `tool`; its result.
    pub fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )["result"]
            .clone()
    }

    /// Reads until `responses` responses and `server_requests` server requests are in, and
    /// hands them all out, each in the order it came.
    pub fn collect(
        &mut self,
        responses: usize,
        server_requests: usize,
    ) -> (Vec<Value>, Vec<Value>) {
        while self.responses.len() < responses || self.server_requests.len() < server_requests {
            self.read_one();
        }
        (
            self.responses.drain(..).collect(),
            self.server_requests.drain(..).collect(),
        )
    }

    /// The next request the server sends.
    pub fn server_request(&mut self) -> Value {
        loop {
            if let Some(request) = self.server_requests.pop_front() {
                return request;
            }
            self.read_one();
        }
    }

    /// Answers the server's request `request` with `result`.
    pub fn answer(&mut self, request: &Value, result: Value) {
        let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        self.write(&answer.to_string());
    }

    /// Kills the server, as a crash would, and waits for it: SIGKILL before its input closes,
    /// so that it never sees its client go and stops on its own.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        drop(self.input.take());
    }

    /// Closes stdin, waits for the server to end; its stderr. Every response must have been
    /// read: one left over answers a request the test did not expect answered.
    pub fn finish(mut self) -> String {
        drop(self.input.take());
        assert!(self.child.wait().unwrap().success());
        while let Ok(message) = self.messages.recv_timeout(PATIENCE) {
            if message.get("id").is_some() && message.get("method").is_none() {
                self.responses.push_back(message);
            }
        }
        assert!(
            self.responses.is_empty(),
            "responses left unread: {:?}",
            self.responses
        );
        std::fs::read_to_string(&self.stderr).unwrap()
    }
}

impl Drop for RawMcp {
    /// A test that failed leaves no server behind.
    fn drop(&mut self) {
        if self.input.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A tool result's text, as an error.
pub fn tool_error(result: &Value) -> &str {
    assert_eq!(result["isError"], json!(true), "{result}");
    result["content"][0]["text"].as_str().unwrap()
}

/// The run a tool result reports, such as the one a protocol's tool started.
pub fn reported_run(result: &Value) -> String {
    result["structuredContent"]["run"]
        .as_str()
        .unwrap_or_else(|| panic!("no run in {result}"))
        .to_string()
}
