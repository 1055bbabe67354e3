//! A raw JSON-RPC client of `protocol-run mcp` over stdio: any initialize, requests and responses by id, and the server's own requests (elicitation) kept to be answered.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{Value, json};

/// How long a test waits for a message before it fails, rather than hang.
const PATIENCE: Duration = Duration::from_secs(30);

/// A server on stdio, spoken to line by line; its stderr kept in `stderr.txt`.
pub struct RawMcp {
    child: Child,
    input: Option<ChildStdin>,
    messages: Receiver<Value>,
    /// Requests from the server not handed out yet.
    server_requests: VecDeque<Value>,
    /// Responses read while waiting for another one.
    responses: Vec<Value>,
    directory: PathBuf,
}

impl RawMcp {
    /// `protocol-run mcp --state-dir state ARGUMENTS...` in `directory`, initialized with
    /// `capabilities` at revision 2025-11-25.
    pub fn start(directory: &Path, arguments: &[&str], capabilities: Value) -> RawMcp {
        let stderr = std::fs::File::create(directory.join("stderr.txt")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args(["mcp", "--state-dir", "state"])
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
            responses: Vec::new(),
            directory: directory.to_path_buf(),
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
        raw.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    pub fn write(&mut self, message: &Value) {
        let input = self.input.as_mut().expect("stdin is open");
        input.write_all(format!("{message}\n").as_bytes()).unwrap();
        input.flush().unwrap();
    }

    /// Sends request `id` without waiting for its response.
    pub fn send(&mut self, id: u64, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
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
            (true, false) => self.responses.push(message),
            _ => {}
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
                return self.responses.remove(index);
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
            std::mem::take(&mut self.responses),
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
        self.write(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }

    /// Closes stdin, waits for the server to end; its stderr.
    pub fn finish(mut self) -> String {
        drop(self.input.take());
        assert!(self.child.wait().unwrap().success());
        std::fs::read_to_string(self.directory.join("stderr.txt")).unwrap()
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
