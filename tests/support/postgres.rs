//! A fresh PostgreSQL database per call: on the server `PROTOCOL_RUN_TEST_DATABASE_URL` names, else on a private server `tests/postgres/server.sh` starts once per test process and stops when it ends; a skip with a line when neither is at hand.

use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::requirement;

/// The URL of a PostgreSQL server the tests make their databases on (`.ci/run` sets it); a
/// superuser's, since each test creates and drops a database.
pub const DATABASE_URL: &str = "PROTOCOL_RUN_TEST_DATABASE_URL";

/// How to get a server, for the skip's line.
const REMEDY: &str = "apt-get install postgresql, or set PROTOCOL_RUN_TEST_DATABASE_URL";

/// The line the watchdog writes once the private server accepts connections.
const READY: &str = "protocol-run test server ready";

/// The private server's keeper: starts the server, then waits for its standard input to close,
/// which happens when this process ends however it ends (the kernel closes the pipe even on
/// SIGKILL, and a test binary has no teardown hook), then stops the server and removes its
/// directory. `$0` is server.sh, `$1` the directory, `$2` the line READY. SIGPIPE is ignored so
/// that the server of a process gone before it read READY is stopped all the same.
const WATCHDOG: &str = r#"exec 2>&1
"$0" start "$1" </dev/null || { "$0" stop "$1" >/dev/null; exit 1; }
trap '' PIPE
echo "$2"
exec >/dev/null 2>&1
cat
exec "$0" stop "$1""#;

/// The server this process makes its databases on.
struct Server {
    /// A URL of its `postgres` database, where databases are created and dropped.
    url: String,
    /// The private server's watchdog, whose standard input this process holds open.
    watchdog: Option<Mutex<Child>>,
}

/// Found (or started) by the first call, for the whole process.
static SERVER: OnceLock<Result<Option<Server>, String>> = OnceLock::new();

/// Numbers the databases of this process, for unique names.
static CREATED: AtomicUsize = AtomicUsize::new(0);

/// A database of its own for one test, dropped (with whoever is still connected) on drop.
pub struct TestDatabase {
    url: String,
    name: String,
}

impl TestDatabase {
    /// A URL that connects to this database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name on the server.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A new connection to this database.
    pub fn connect(&self) -> postgres::Client {
        connect(&self.url)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some(Ok(Some(server))) = SERVER.get() else {
            return;
        };
        // A failure leaves a database behind on a throwaway server; a panic here would hide the
        // test's own failure.
        if let Ok(mut client) = postgres::Client::connect(&server.url, postgres::NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A new, empty database for `test` (its name goes into the database's), or `None` after the
/// skip's line when there is no server (a failure under `PROTOCOL_RUN_REQUIRE_ALL`).
pub fn database(test: &str) -> Option<TestDatabase> {
    let server = match SERVER.get_or_init(find_server) {
        Ok(Some(server)) => server,
        Ok(None) => {
            requirement::met(test, "PostgreSQL", REMEDY, false);
            return None;
        }
        Err(error) => panic!("{test}: {error}"),
    };
    let name = unique_name(test);
    connect(&server.url)
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .unwrap_or_else(|error| {
            panic!(
                "{test}: cannot create database {name} on {}: {}",
                shown(&server.url),
                causes(&error)
            )
        });
    Some(TestDatabase {
        url: with_database(&server.url, &name),
        name,
    })
}

/// A connection to `url`, or a panic saying where it failed.
fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|error| {
        let whose = match std::env::var(DATABASE_URL) {
            Ok(set) if !set.is_empty() => format!("the server {DATABASE_URL} names"),
            _ => "the private server tests/postgres/server.sh started".to_owned(),
        };
        panic!(
            "cannot connect to PostgreSQL at {}: {}; check that {whose} runs and lets this user \
             in",
            shown(url),
            causes(&error)
        )
    })
}

/// An error with its causes (the postgres crate's own message leaves them out).
fn causes(error: &dyn std::error::Error) -> String {
    let mut described = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        described.push_str(": ");
        described.push_str(&inner.to_string());
        cause = inner.source();
    }
    described
}

/// `DATABASE_URL` when set, else a private server when PostgreSQL's binaries are here, else none.
fn find_server() -> Result<Option<Server>, String> {
    if let Some(url) = std::env::var(DATABASE_URL)
        .ok()
        .filter(|url| !url.is_empty())
    {
        return Ok(Some(Server {
            url,
            watchdog: None,
        }));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/postgres/server.sh");
    let binaries = Command::new(&script)
        .arg("bindir")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|error| format!("cannot run {}: {error}", script.display()))?;
    if !binaries.success() {
        return Ok(None);
    }
    start_private_server(&script).map(Some)
}

/// Starts a server on a Unix socket in a new directory under the temporary directory, kept by a
/// watchdog that stops it when this process ends.
fn start_private_server(script: &Path) -> Result<Server, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let directory = std::env::temp_dir().join(format!(
        "protocol-run-postgres-{}-{nanos}",
        std::process::id()
    ));
    let mut watchdog = Command::new("sh")
        .arg("-c")
        .arg(WATCHDOG)
        .arg(script)
        .arg(&directory)
        .arg(READY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // Its own process group: Ctrl-C on `cargo test` reaches the tests, not the keeper, which
        // stops the server once the tests are gone.
        .process_group(0)
        .spawn()
        .map_err(|error| format!("cannot run sh for {}: {error}", script.display()))?;
    let mut said = String::new();
    let stdout = watchdog.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if line == READY {
            // Stopped synchronously at a normal exit; the closing pipe covers every other end.
            // SAFETY: `atexit` only records a function to call at exit; stop_private_server takes
            // no arguments and does nothing that panics.
            unsafe { nix::libc::atexit(stop_private_server) };
            return Ok(Server {
                url: format!(
                    "postgres://postgres@{}/postgres",
                    percent_encoded(&directory)
                ),
                watchdog: Some(Mutex::new(watchdog)),
            });
        }
        said.push_str(&line);
        said.push('\n');
    }
    let _ = watchdog.wait();
    Err(format!(
        "PostgreSQL is installed but {} could not start a server in {}:\n{said}\
         Fix the above, or set {DATABASE_URL} to a running server's URL",
        script.display(),
        directory.display()
    ))
}

/// At exit: close the watchdog's standard input and wait while it stops the server, so that no
/// server outlives `cargo test`.
extern "C" fn stop_private_server() {
    let Some(Ok(Some(Server {
        watchdog: Some(watchdog),
        ..
    }))) = SERVER.get()
    else {
        return;
    };
    let mut watchdog = watchdog.lock().unwrap_or_else(PoisonError::into_inner);
    drop(watchdog.stdin.take());
    let _ = watchdog.wait();
}

/// `test_PID_N_TEST`: unique on the server across processes and calls, within PostgreSQL's 63
/// bytes, in the characters a name needs no quoting for.
fn unique_name(test: &str) -> String {
    let number = CREATED.fetch_add(1, Ordering::Relaxed);
    let readable: String = test
        .chars()
        .map(|character| match character {
            'a'..='z' | '0'..='9' => character,
            'A'..='Z' => character.to_ascii_lowercase(),
            _ => '_',
        })
        .collect();
    let mut name = format!("test_{}_{number}_{readable}", std::process::id());
    name.truncate(63);
    name
}

/// `url` naming database `name` instead: the path of a `postgres://` URL, or a `dbname=` added to
/// `key=value` settings (the last one counts).
fn with_database(url: &str, name: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|at| at + 3) else {
        return format!("{url} dbname={name}");
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let query = rest.find('?').map_or("", |at| &rest[at..]);
    format!(
        "{}{}/{name}{query}",
        &url[..scheme_end],
        &rest[..authority_end]
    )
}

/// A socket directory as a URL's host: every byte but unreserved ones percent-encoded, so its
/// `/` do not end the host.
fn percent_encoded(path: &Path) -> String {
    path.as_os_str()
        .as_bytes()
        .iter()
        .map(|&byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(byte).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// `url` with its password, if any, masked, for a message.
fn shown(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|at| at + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!(
            "{}{}:***{}",
            &url[..scheme_end],
            &authority[..colon],
            &url[scheme_end + at..]
        ),
        _ => url.to_owned(),
    }
}
