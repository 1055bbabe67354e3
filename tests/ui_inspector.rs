//! `protocol-run ui`, the web inspector, through the real binary: a real browser (the distribution's Chromium, driven by Playwright's core) opens the run list and an ITTW run waiting for guidance, sees `monitoring` highlighted, sends `captain_guidance` from the page and sees the run finish live; and raw HTTP requests are refused where they come from another site, lack the CSRF token or the access token.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;

use crate::support;

/// A process of the binary, killed when dropped.
pub(crate) struct Process {
    pub(crate) child: Child,
    pub(crate) input: Option<ChildStdin>,
}

impl Drop for Process {
    fn drop(&mut self) {
        drop(self.input.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve protocols/ittw.yaml` in `directory` (its path pinned to one that does not exist, so
/// the run escalates and monitors), with instance `i1` started and stdin held open.
fn ittw_host(directory: &Path) -> Process {
    let ittw = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols/ittw.yaml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["serve", ittw.to_str().unwrap(), "--state-dir", "state"])
        .args([
            "-i",
            "path=/nonexistent/protocol-run-ui-test",
            "--inbox-poll",
            "50ms",
        ])
        .current_dir(directory)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(directory.join("serve.err")).unwrap())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"{\"instance\": \"i1\"}\n").unwrap();
    input.flush().unwrap();
    Process {
        child,
        input: Some(input),
    }
}

/// `protocol-run ui` on a free loopback port in `directory`, on its state directory's store,
/// looking every 50 ms, with `arguments` and `environment` besides; the process and its
/// address, once it listens.
pub(crate) fn inspector(
    directory: &Path,
    arguments: &[&str],
    environment: &[(&str, &str)],
) -> (Process, String) {
    let store = ["--state-dir", "state", "--poll", "50ms"];
    inspector_on(directory, &[&store, arguments].concat(), environment)
}

/// `protocol-run ui` on a free loopback port in `directory` with `arguments` (its store and
/// `--poll` among them) and `environment`; the process and its address, once it listens.
pub(crate) fn inspector_on(
    directory: &Path,
    arguments: &[&str],
    environment: &[(&str, &str)],
) -> (Process, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["ui", "--listen", "127.0.0.1:0"])
        .args(arguments)
        .envs(environment.iter().copied())
        .current_dir(directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in: {line}"))
        .to_string();
    // The rest of stderr is drained, so the server never blocks on it.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    (Process { child, input: None }, address)
}

/// One HTTP/1.1 request to `address` with `headers` (a Host of the address unless given);
/// the status and the body.
pub(crate) fn request(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        text.push_str(&format!("Host: {address}\r\n"));
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(text.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status in: {response}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A JSON answer of the API (a chunked body is read whole: its one chunk).
pub(crate) fn api(address: &str, path: &str) -> Value {
    let (status, body) = request(address, "GET", path, &[], "");
    assert_eq!(status, 200, "{path}: {body}");
    let start = body.find('{').unwrap_or(0);
    let end = body.rfind('}').map_or(body.len(), |end| end + 1);
    serde_json::from_str(&body[start..end]).unwrap_or_else(|_| panic!("{path}: not JSON: {body}"))
}

/// The page's CSRF token.
pub(crate) fn csrf_token(address: &str) -> String {
    let (_, page) = request(address, "GET", "/", &[], "");
    page.split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page carries its CSRF token")
        .to_string()
}

/// Waits until ITTW run `run` is monitoring, as the inspector reads it.
pub(crate) fn wait_for_monitoring(address: &str, run: &str) {
    let path = format!("/api/run?id={run}");
    support::eventually("ITTW monitoring", || {
        let (status, _) = request(address, "GET", &path, &[], "");
        if status != 200 {
            return None;
        }
        let run = api(address, &path);
        run["state"]["configuration"]
            .as_array()
            .is_some_and(|states| states.iter().any(|state| state == "waiting_for_guidance"))
            .then_some(())
    });
}

/// Runs `script` of tests/ui (Playwright's core, installed first) on `chromium` with `arguments`
/// and the screenshot directory after them; the JSON line it prints, and that directory.
pub(crate) fn drive_page(chromium: &Path, script: &str, arguments: &[&str]) -> (Value, PathBuf) {
    let playwright = support::npm_package::installed("ui", "playwright-core");
    let screenshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui-screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    let script = playwright.parent().unwrap().parent().unwrap().join(script);
    let output = Command::new("node")
        .arg(&script)
        .arg(chromium)
        .args(arguments)
        .arg(&screenshots)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    let seen = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("{stdout}"));
    (seen, screenshots)
}

/// The strings of a JSON array the page script reported.
pub(crate) fn texts(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// The distribution's Chromium, or `None` after the skip's line (a failure under
/// `PROTOCOL_RUN_REQUIRE_ALL`).
pub(crate) fn chromium(test: &str) -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.exists());
    support::requirement::met(
        test,
        "Chromium",
        "apt-get install chromium (as .ci/run does)",
        found.is_some(),
    )
    .then(|| found.unwrap())
}

#[test]
fn a_browser_sends_guidance_to_a_waiting_ittw_run_and_sees_it_finish_live() {
    let Some(chromium) = chromium("a_browser_sends_guidance_to_a_waiting_ittw_run") else {
        return;
    };
    let directory = support::temporary_directory("ui", "browser");
    let _host = ittw_host(&directory);
    let (_inspector, address) = inspector(&directory, &[], &[]);
    wait_for_monitoring(&address, "ittw:i1");
    let url = format!("http://{address}/");
    let (seen, screenshots) = drive_page(&chromium, "inspector.mjs", &[&url, "ittw:i1"]);
    assert_eq!(seen["listed_status"], "running", "{seen}");
    assert_eq!(
        seen["listed_states"], "monitoring, waiting_for_guidance",
        "{seen}"
    );
    let active = texts(&seen["active"]);
    assert!(active.contains(&"monitoring"), "{seen}");
    assert!(active.contains(&"waiting_for_guidance"), "{seen}");
    assert_eq!(seen["navigations"], 0, "the page was reloaded: {seen}");
    assert_eq!(
        seen["final_states"],
        serde_json::json!(["guided"]),
        "{seen}"
    );
    assert_eq!(seen["inbox"], "taken", "{seen}");
    assert!(
        texts(&seen["directives"]).contains(&"escalate_to_captain"),
        "{seen}"
    );
    // Filtered by level, only errors; by tag, only the monitoring lines; fewer than all.
    let errors = texts(&seen["error_levels"]);
    assert!(
        !errors.is_empty() && errors.iter().all(|level| *level == "error"),
        "{seen}"
    );
    let monitoring = texts(&seen["monitoring_tags"]);
    assert!(
        !monitoring.is_empty()
            && monitoring
                .iter()
                .all(|tags| tags.contains("ittw_monitoring")),
        "{seen}"
    );
    assert!(
        errors.len() + monitoring.len() <= seen["log_lines"].as_u64().unwrap() as usize,
        "{seen}"
    );
    assert_eq!(seen["problems"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["stray_text"], false, "{seen}");
    assert!(
        !seen["moment_configuration"].as_str().unwrap().is_empty(),
        "{seen}"
    );
    for shot in [
        "runs.png",
        "run-waiting.png",
        "run-finished.png",
        "run-step.png",
    ] {
        assert!(screenshots.join(shot).exists(), "{shot}");
    }
    // The store agrees: the guidance finished the run.
    let run = api(&address, "/api/run?id=ittw:i1");
    assert_eq!(run["finish"]["state"], "guided", "{run}");
    assert_eq!(
        run["finish"]["output"]["guidance"]["say"], "take the other route",
        "{run}"
    );
}

#[test]
fn requests_from_another_site_or_without_their_tokens_are_refused() {
    let directory = support::temporary_directory("ui", "guard");
    let _host = ittw_host(&directory);
    let (_inspector, address) = inspector(&directory, &[], &[]);
    wait_for_monitoring(&address, "ittw:i1");
    let send = "{\"event\": \"captain_guidance\", \"data\": {\"say\": \"x\"}}";
    let path = "/api/event?id=ittw:i1";
    // DNS rebinding: a page of another name that resolves here.
    let (status, body) = request(
        &address,
        "GET",
        "/api/runs",
        &[("Host", "evil.example:80")],
        "",
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("is not this server's"), "{body}");
    // A page of another site posting here, even with the token.
    let token = csrf_token(&address);
    let (status, body) = request(
        &address,
        "POST",
        path,
        &[
            ("Origin", "http://evil.example"),
            ("X-CSRF-Token", &token),
            ("Content-Type", "application/json"),
        ],
        send,
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("another origin"), "{body}");
    // No CSRF token, or a wrong one.
    for given in [None, Some("0".repeat(64))] {
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(given) = &given {
            headers.push(("X-CSRF-Token", given));
        }
        let (status, body) = request(&address, "POST", path, &headers, send);
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("CSRF token"), "{body}");
    }
    // An event the run does not declare, and an engine event, are refused before the inbox.
    let headers = [
        ("X-CSRF-Token", token.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = request(
        &address,
        "POST",
        path,
        &headers,
        "{\"event\": \"done.invoke.x\"}",
    );
    assert_eq!(status, 422, "{body}");
    let run = api(&address, "/api/run?id=ittw:i1");
    assert_eq!(run["inbox"], serde_json::json!([]), "{run}");
    // With all it needs, it is queued.
    let (status, body) = request(&address, "POST", path, &headers, send);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"outcome\":\"queued\""), "{body}");
}

#[test]
fn another_address_needs_an_access_token_and_every_request_brings_it() {
    let directory = support::temporary_directory("ui", "token");
    std::fs::create_dir_all(directory.join("state")).unwrap();
    // Not on loopback without saying so, nor without a token.
    let (code, _, stderr) = support::run_binary(&directory, &["ui", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("--allow-remote"), "{stderr}");
    let (code, _, stderr) = support::run_binary(
        &directory,
        &["ui", "--listen", "0.0.0.0:0", "--allow-remote"],
    );
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("no access token"), "{stderr}");
    // On loopback with a token: every request needs it.
    let (_inspector, address) = inspector(
        &directory,
        &[],
        &[("PROTOCOL_RUN_UI_TOKEN", "s3cret-token")],
    );
    let (status, body) = request(&address, "GET", "/api/runs", &[], "");
    assert_eq!(status, 401, "{body}");
    let (status, _) = request(
        &address,
        "GET",
        "/api/runs",
        &[("Authorization", "Bearer wrong")],
        "",
    );
    assert_eq!(status, 401);
    let (status, body) = request(
        &address,
        "GET",
        "/api/runs",
        &[("Authorization", "Bearer s3cret-token")],
        "",
    );
    assert_eq!(status, 200, "{body}");
    // A browser brings it once in the address and keeps it as a cookie.
    let (status, body) = request(&address, "GET", "/?token=s3cret-token", &[], "");
    assert_eq!(status, 303, "{body}");
    let (status, body) = request(
        &address,
        "GET",
        "/api/runs",
        &[("Cookie", "protocol_run_ui_token=s3cret-token")],
        "",
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn the_timeout_wrappers_timeline_shows_its_attempts_with_their_growing_timeouts_and_its_statistics()
{
    let Some(chromium) = chromium("the_timeline_of_the_timeout_wrapper") else {
        return;
    };
    let directory = support::temporary_directory("ui", "timeline");
    let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocols/timeout-wrapper.yaml");
    // Three attempts of 5, 10 and 15 seconds, each timing out (virtual time: at once).
    let (code, _, stderr) = support::run_binary(
        &directory,
        &[
            "run",
            wrapper.to_str().unwrap(),
            "--state-dir",
            "state",
            "--run-id",
            "wrapped",
            "--virtual-time",
            "-i",
            "command=[\"sleep\",\"1000\"]",
            "--input",
            "base_timeout=5s",
            "--input",
            "max_retries=3",
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    let (_inspector, address) = inspector(&directory, &[], &[]);
    let url = format!("http://{address}/runs/wrapped");
    let (seen, screenshots) = drive_page(&chromium, "timeline.mjs", &[&url]);
    assert_eq!(
        seen["attempts"],
        serde_json::json!([
            {"effect": "operation", "attempt": 1, "timeout_ms": 5000},
            {"effect": "operation", "attempt": 2, "timeout_ms": 10000},
            {"effect": "operation", "attempt": 3, "timeout_ms": 15000},
        ]),
        "{seen}"
    );
    // A run without maps or children nests nothing.
    assert_eq!(seen["nested"], serde_json::json!([]), "{seen}");
    let states = texts(&seen["states"]);
    assert!(states.contains(&"running"), "{seen}");
    assert!(states.contains(&"timeout_exhausted"), "{seen}");
    // Its protocol's statistics: one call, retried, exhausted, every attempt timed out.
    assert_eq!(seen["retries"], "0% of 1 retried calls", "{seen}");
    assert_eq!(
        seen["outcomes"],
        serde_json::json!([
            {"action": "operation", "part": "succeeded", "value": 0},
            {"action": "operation", "part": "failed", "value": 1},
            {"action": "operation", "part": "timed out", "value": 3},
        ]),
        "{seen}"
    );
    for shot in ["run-timeline.png", "stats.png"] {
        assert!(screenshots.join(shot).exists(), "{shot}");
    }
}

#[test]
fn an_event_sent_from_the_inspector_reaches_a_run_that_a_run_process_holds() {
    let directory = support::temporary_directory("ui", "run-holder");
    let mut child = crate::run_inbox::ittw_run(&directory, "guided", Stdio::null);
    let input = child.stdin.take();
    let _run = Process { child, input };
    let (_inspector, address) = inspector(&directory, &[], &[]);
    wait_for_monitoring(&address, "guided");
    let token = csrf_token(&address);
    let headers = [
        ("X-CSRF-Token", token.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = request(
        &address,
        "POST",
        "/api/event?id=guided",
        &headers,
        "{\"event\": \"captain_guidance\", \"data\": {\"say\": \"stop\"}}",
    );
    assert_eq!(status, 200, "{body}");
    let run = support::eventually("the run's end", || {
        let run = api(&address, "/api/run?id=guided");
        (run["status"] == "finished").then_some(run)
    });
    assert_eq!(run["finish"]["state"], "guided", "{run}");
    assert_eq!(run["inbox"][0]["outcome"], "taken", "{run}");
}
