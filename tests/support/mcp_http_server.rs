//! `protocol-run mcp --http` started for a test on a free port, its address read from its first stderr line.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `protocol-run mcp --http 127.0.0.1:0`; killed when dropped, so a failed assertion never
/// leaves it behind.
pub struct McpHttpServer {
    child: Child,
    /// Where it listens, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl McpHttpServer {
    /// Starts it in `directory` serving `protocols`, its runs in `directory/state`; its URL is
    /// on its first stderr line.
    pub fn start(directory: &Path, protocols: &[&str]) -> McpHttpServer {
        McpHttpServer::start_with(directory, &["--http", "127.0.0.1:0"], protocols)
    }

    /// As `start`, with the `--http` arguments given (another address, `--http-allow-remote`).
    pub fn start_with(directory: &Path, http: &[&str], protocols: &[&str]) -> McpHttpServer {
        let mut command = Command::new(env!("CARGO_BIN_EXE_protocol-run"));
        command.arg("mcp").args(http);
        McpHttpServer::spawn(command, directory, protocols)
    }

    /// As `start`, the server's limit on open files (soft and hard) set to `descriptors` by the
    /// shell that then becomes it.
    pub fn start_under_descriptor_limit(
        directory: &Path,
        descriptors: u64,
        protocols: &[&str],
    ) -> McpHttpServer {
        let mut command = Command::new("sh");
        command
            .args([
                "-c",
                &format!("ulimit -n {descriptors} && exec \"$0\" \"$@\""),
            ])
            .arg(env!("CARGO_BIN_EXE_protocol-run"))
            .args(["mcp", "--http", "127.0.0.1:0"]);
        McpHttpServer::spawn(command, directory, protocols)
    }

    /// Starts `command` (`mcp` and its arguments so far) over `directory/state` serving
    /// `protocols`, and reads its URL.
    fn spawn(mut command: Command, directory: &Path, protocols: &[&str]) -> McpHttpServer {
        let mut child = command
            .args(["--state-dir", "state"])
            .args(protocols)
            .current_dir(directory)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let url = first
            .trim()
            .strip_prefix("mcp: listening on ")
            .unwrap_or_else(|| panic!("no address on stderr: {first}"))
            .to_string();
        // The rest of stderr is drained so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        McpHttpServer { child, url }
    }

    /// Sends SIGTERM; returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        self.child.wait().unwrap().code()
    }
}

impl Drop for McpHttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
