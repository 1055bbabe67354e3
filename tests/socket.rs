//! `serve --socket` and `--events FILE` held to their limits by the real binary and real Unix socket clients: line limits, bounded client queues, the descriptor limit, replies, instance limits, the socket path and the state directory's lock.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::temporary_directory;

const PROTOCOL: &str = "id: simple\nstates:\n  a:\n    on:\n      go: b\n  b: { type: final }\n";

/// A `serve` process started for one test, its stderr kept in a file; killed when dropped.
struct Host {
    child: Child,
    stderr: PathBuf,
}

impl Host {
    /// Starts `serve p.yaml` in `directory` with `arguments`, after `prefix` (e.g. `prlimit`).
    fn start(directory: &Path, prefix: &[&str], arguments: &[&str]) -> Host {
        std::fs::write(directory.join("p.yaml"), PROTOCOL).unwrap();
        let stderr = directory.join(format!(
            "stderr-{}.txt",
            arguments.join("-").replace('/', "_")
        ));
        let binary = env!("CARGO_BIN_EXE_protocol-run");
        let mut command = match prefix {
            [] => Command::new(binary),
            [program, rest @ ..] => {
                let mut command = Command::new(program);
                command.args(rest).arg(binary);
                command
            }
        };
        let child = command
            .args(["serve", "p.yaml"])
            .args(arguments)
            .current_dir(directory)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Host { child, stderr }
    }

    /// Starts a host on `socket` and waits until it accepts clients.
    fn listening(directory: &Path, prefix: &[&str], socket: &str, arguments: &[&str]) -> Host {
        let mut all = vec!["--socket", socket];
        all.extend_from_slice(arguments);
        let mut host = Host::start(directory, prefix, &all);
        let path = directory.join(socket);
        let started = Instant::now();
        while UnixStream::connect(&path).is_err() {
            if let Some(status) = host.child.try_wait().unwrap() {
                panic!("serve ended ({status}): {}", host.stderr());
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{}",
                host.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        host
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until stderr holds `text`, failing after 20 s.
    fn wait_for_stderr(&self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let stderr = self.stderr();
            if stderr.contains(text) {
                return stderr;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no `{text}` in: {stderr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The exit code, waiting at most 20 s.
    fn exit_code(&mut self) -> i32 {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The peak resident memory of the host, from `/proc`.
    fn peak_memory_kilobytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status
            .lines()
            .find(|line| line.starts_with("VmHWM:"))
            .unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client that sends lines and reads the host's answers, each read bounded by 20 s.
struct Client {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Client {
    /// Connects, waiting (at most 20 s) while the host's backlog is full.
    fn connect(path: &Path) -> Client {
        let started = Instant::now();
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(stream) => break stream,
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(started.elapsed() < Duration::from_secs(20), "{error}");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(error) => panic!("cannot connect to {}: {error}", path.display()),
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Client { stream, reader }
    }

    fn send(&mut self, line: &str) {
        self.stream.write_all(line.as_bytes()).unwrap();
        self.stream.write_all(b"\n").unwrap();
    }

    /// The next line the host sent that contains `text`.
    fn read_until(&mut self, text: &str) -> String {
        loop {
            let mut line = String::new();
            let read = self.reader.read_line(&mut line).unwrap();
            assert!(read > 0, "the host closed the connection before `{text}`");
            if line.contains(text) {
                return line;
            }
        }
    }
}

#[test]
fn an_events_file_skips_an_invalid_utf8_line_and_goes_on() {
    let directory = temporary_directory("socket", "events-utf8");
    std::fs::write(directory.join("p.yaml"), PROTOCOL).unwrap();
    std::fs::write(
        directory.join("events.jsonl"),
        b"{\"event\": \"x\xff\"}\n{\"event\": \"go\"}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = crate::support::run_binary(
        &directory,
        &[
            "run",
            "p.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("events line 1: the line is not UTF-8; line skipped"),
        "{stderr}"
    );
    assert!(stdout.contains("\"state\":\"b\""), "{stdout}");
}

#[test]
fn an_events_file_line_of_200_mebibytes_without_newline_is_skipped_unread() {
    let directory = temporary_directory("socket", "events-long");
    std::fs::write(directory.join("p.yaml"), PROTOCOL).unwrap();
    let mut file = std::fs::File::create(directory.join("events.jsonl")).unwrap();
    file.write_all(b"{\"event\": \"").unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..200 {
        file.write_all(&chunk).unwrap();
    }
    drop(file);
    let output = Command::new("/usr/bin/time")
        .args(["-f", "peak %M KB"])
        .arg(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "run",
            "p.yaml",
            "--events",
            "events.jsonl",
            "--state-dir",
            "state",
        ])
        .current_dir(&directory)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    assert!(
        stderr.contains(
            "events line 1: the line is 209715211 bytes, longer than the limit of 1048576 bytes; \
             raise it with --max-event-bytes; line skipped"
        ),
        "{stderr}"
    );
    let peak: u64 = stderr
        .split("peak ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap();
    assert!(peak < 100_000, "the run took {peak} KB for a skipped line");
    let _ = std::fs::remove_file(directory.join("events.jsonl"));
}

#[test]
fn a_socket_line_of_400_mebibytes_without_newline_is_skipped_and_answered_with_bounded_memory() {
    let directory = temporary_directory("socket", "long-line");
    let host = Host::listening(&directory, &[], "s.sock", &["--store", "memory"]);
    let mut client = Client::connect(&directory.join("s.sock"));
    let chunk = vec![b'a'; 1 << 20];
    client.stream.write_all(b"{\"instance\": \"").unwrap();
    for _ in 0..400 {
        client.stream.write_all(&chunk).unwrap();
    }
    client.send("");
    client.send("{\"instance\": \"t1\", \"event\": \"go\"}");
    let answer = client.read_until("\"error\"");
    assert!(answer.contains("\"line\":1"), "{answer}");
    assert!(
        answer.contains("longer than the limit of 1048576 bytes; raise it with --max-event-bytes"),
        "{answer}"
    );
    client.read_until("\"finished\"");
    let peak = host.peak_memory_kilobytes();
    assert!(peak < 100_000, "the host took {peak} KB for a skipped line");
}

#[test]
fn a_bad_line_is_answered_to_the_client_that_sent_it() {
    let directory = temporary_directory("socket", "reply");
    let host = Host::listening(&directory, &[], "s.sock", &["--store", "memory"]);
    let mut sender = Client::connect(&directory.join("s.sock"));
    let mut other = Client::connect(&directory.join("s.sock"));
    sender.send("{\"instance\": \"t1\"}");
    sender.send("not json");
    sender.send("{\"instance\": \"t1\", \"event\": \"nothing\"}");
    sender
        .stream
        .write_all(b"{\"instance\": \"\xff\"}\n")
        .unwrap();
    let answer = sender.read_until("\"error\"");
    assert!(answer.contains("\"line\":2"), "{answer}");
    assert!(answer.contains("not JSON"), "{answer}");
    let answer = sender.read_until("\"error\"");
    assert!(answer.contains("\"line\":4"), "{answer}");
    assert!(answer.contains("the line is not UTF-8"), "{answer}");
    // The other client gets the output every client gets, then the next, never the error.
    other.send("{\"instance\": \"t2\"}");
    let seen = other.read_until("\"t2\"");
    assert!(!seen.contains("error"), "{seen}");
    assert!(host.stderr().contains("not JSON"), "{}", host.stderr());
}

#[test]
fn a_client_that_does_not_read_is_disconnected_with_a_line_naming_it() {
    let directory = temporary_directory("socket", "slow-client");
    let host = Host::listening(
        &directory,
        &[],
        "s.sock",
        &["--store", "memory", "--max-client-queue-bytes", "1048576"],
    );
    let idle = UnixStream::connect(directory.join("s.sock")).unwrap();
    let mut busy = Client::connect(&directory.join("s.sock"));
    // Each instance started is an output line every client gets: 60,000 of them are over 3 MB,
    // more than the idle client's socket buffer and its queue hold.
    let mut lines = String::new();
    for index in 0..60_000 {
        lines.push_str(&format!("{{\"instance\": \"t{index}\"}}\n"));
    }
    let writer = {
        let mut stream = busy.stream.try_clone().unwrap();
        std::thread::spawn(move || stream.write_all(lines.as_bytes()).unwrap())
    };
    busy.read_until("\"t59999\"");
    writer.join().unwrap();
    let stderr = host.wait_for_stderr("does not read its output");
    assert!(
        // Client 1 was the probe that saw the host listening.
        stderr.contains(&format!("client 2 (pid {})", std::process::id()))
            && stderr.contains("more than the limit of 1048576 bytes; disconnected (raise it with --max-client-queue-bytes)"),
        "{stderr}"
    );
    // The idle client's connection is closed: reading ends once what was written is read.
    idle.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut drained = Vec::new();
    (&idle).read_to_end(&mut drained).unwrap();
    assert!(drained.len() < 3 << 20, "{} bytes", drained.len());
}

#[test]
fn the_accept_loop_survives_the_descriptor_limit_and_serves_once_clients_leave() {
    let directory = temporary_directory("socket", "descriptors");
    let host = Host::listening(
        &directory,
        &["prlimit", "--nofile=32:32", "--"],
        "s.sock",
        &["--store", "memory"],
    );
    let path = directory.join("s.sock");
    // Clients until the host runs out of descriptors (a full backlog refuses the rest).
    let mut crowd = Vec::new();
    while !host.stderr().contains("cannot accept a client") {
        assert!(crowd.len() < 500, "{}", host.stderr());
        if let Ok(stream) = UnixStream::connect(&path) {
            crowd.push(stream);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(crowd);
    let mut client = Client::connect(&path);
    client.send("{\"instance\": \"late\"}");
    let answer = client.read_until("\"late\"");
    assert!(answer.contains("\"started\":true"), "{answer}");
    host.wait_for_stderr("accepting clients again");
}

#[test]
fn max_instances_refuses_one_more_naming_the_limit_and_the_flag() {
    let directory = temporary_directory("socket", "max-instances");
    let _host = Host::listening(
        &directory,
        &[],
        "s.sock",
        &["--store", "memory", "--max-instances", "2"],
    );
    let mut client = Client::connect(&directory.join("s.sock"));
    for name in ["t1", "t2", "t3"] {
        client.send(&format!("{{\"instance\": \"{name}\"}}"));
    }
    let answer = client.read_until("\"error\"");
    assert!(answer.contains("\"line\":3"), "{answer}");
    assert!(
        answer.contains(
            "instance `t3` not created: 2 instances are alive, the limit; raise it with --max-instances"
        ),
        "{answer}"
    );
    // One finishing makes room.
    client.send("{\"instance\": \"t1\", \"event\": \"go\"}");
    client.read_until("\"finished\"");
    client.send("{\"instance\": \"t3\"}");
    let answer = client.read_until("\"t3\"");
    assert!(answer.contains("\"started\":true"), "{answer}");
}

#[test]
fn the_socket_path_replaces_only_a_stale_socket() {
    let directory = temporary_directory("socket", "path");
    std::fs::write(directory.join("precious.txt"), "keep me").unwrap();
    let mut host = Host::start(
        &directory,
        &[],
        &["--socket", "precious.txt", "--store", "memory"],
    );
    assert_eq!(host.exit_code(), 64, "{}", host.stderr());
    assert!(
        host.stderr()
            .contains("precious.txt exists and is not a socket: it is left as it is"),
        "{}",
        host.stderr()
    );
    assert_eq!(
        std::fs::read_to_string(directory.join("precious.txt")).unwrap(),
        "keep me"
    );
    // A socket nothing listens on is a dead host's: replaced.
    drop(std::os::unix::net::UnixListener::bind(directory.join("stale.sock")).unwrap());
    let _first = Host::listening(&directory, &[], "stale.sock", &["--state-dir", "one"]);
    // A socket a host listens on is refused, whatever the state directory.
    let mut second = Host::start(
        &directory,
        &[],
        &["--socket", "stale.sock", "--state-dir", "two"],
    );
    assert_eq!(second.exit_code(), 64, "{}", second.stderr());
    assert!(
        second
            .stderr()
            .contains("stale.sock is the socket of a host that is running"),
        "{}",
        second.stderr()
    );
    let mut client = Client::connect(&directory.join("stale.sock"));
    client.send("{\"instance\": \"t1\"}");
    client.read_until("\"t1\"");
}

#[test]
fn a_second_host_on_the_same_state_directory_is_refused_naming_the_first() {
    let directory = temporary_directory("socket", "state-lock");
    let first = Host::listening(&directory, &[], "one.sock", &["--state-dir", "state"]);
    let mut second = Host::start(
        &directory,
        &[],
        &["--socket", "two.sock", "--state-dir", "state"],
    );
    assert_eq!(second.exit_code(), 75, "{}", second.stderr());
    let expected = format!(
        "another host (pid {}) serves the state directory state: stop it first, or give this one another --state-dir",
        first.child.id()
    );
    assert!(second.stderr().contains(&expected), "{}", second.stderr());
    assert!(!directory.join("two.sock").exists());
}

#[test]
fn a_client_that_only_stops_sending_still_gets_its_output() {
    // `nc -U` style: send the lines, shut down the sending side, read the answers.
    let directory = temporary_directory("socket", "half-close");
    let _host = Host::listening(&directory, &[], "s.sock", &["--store", "memory"]);
    let mut client = Client::connect(&directory.join("s.sock"));
    client.send("{\"instance\": \"t1\"}");
    client.send("{\"instance\": \"t1\", \"event\": \"go\"}");
    client.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let answer = client.read_until("\"finished\"");
    assert!(answer.contains("\"state\":\"b\""), "{answer}");
}

#[test]
fn a_socket_client_is_told_its_event_was_discarded() {
    let directory = temporary_directory("socket", "discarded");
    let _host = Host::listening(&directory, &[], "s.sock", &["--store", "memory"]);
    let mut client = Client::connect(&directory.join("s.sock"));
    client.send("{\"instance\": \"t1\"}");
    client.send("{\"instance\": \"t1\", \"event\": \"nothing\"}");
    let told: serde_json::Value = serde_json::from_str(&client.read_until("\"outcome\"")).unwrap();
    assert_eq!(told["instance"], "t1", "{told}");
    assert_eq!(told["event"], "nothing", "{told}");
    assert_eq!(told["outcome"], "discarded", "{told}");
    assert!(
        told["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("no transition of the active states")),
        "{told}"
    );
    assert_eq!(told["configuration"], serde_json::json!(["a"]), "{told}");
}

#[test]
fn a_clients_await_holds_its_own_later_lines_and_not_anothers() {
    let directory = temporary_directory("socket", "await-per-client");
    let _host = Host::listening(&directory, &[], "s.sock", &["--store", "memory"]);
    let mut waiting = Client::connect(&directory.join("s.sock"));
    waiting.send("{\"instance\": \"t1\"}");
    waiting.read_until("\"started\"");
    waiting.send("{\"instance\": \"t1\", \"await\": \"b\", \"timeout\": \"10m\"}");
    waiting.send("{\"instance\": \"t2\"}");
    // The other client's event is taken while the first client's wait holds its own next
    // line; held behind the wait, it would wait ten minutes.
    let mut other = Client::connect(&directory.join("s.sock"));
    other.send("{\"instance\": \"t1\", \"event\": \"go\"}");
    let reached: serde_json::Value =
        serde_json::from_str(&waiting.read_until("\"await\"")).unwrap();
    assert_eq!(reached["outcome"], "reached", "{reached}");
    let held = waiting.read_until("\"started\"");
    assert!(held.contains("\"t2\""), "{held}");
}
