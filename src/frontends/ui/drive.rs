//! Redrive and fork from a page: the inspector drives no run, so each starts a driver, `protocol-run redrive` or `protocol-run fork`, as a process of its own that holds the run and takes its inbox, and says how it began and ended.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Inspector;
use super::read::{Answer, Failure, RunQuery};
use crate::store::StoreChoice;

/// The most drivers the inspector remembers; older ones are forgotten (their processes go on).
const MAX_DRIVERS: usize = 64;

/// The most drivers started here that may run at once: a page cannot make processes without
/// end.
const MAX_RUNNING_DRIVERS: usize = 16;

/// How long a request waits for its driver to record the redrive or the fork (or to fail).
const STARTING_PATIENCE: Duration = Duration::from_secs(20);

/// How much of a driver's log its record shows: the end, where the outcome is.
const LOG_TAIL_BYTES: u64 = 4096;

/// Where a driver finds the store, as the inspector was told.
#[derive(Clone)]
pub struct DriverPlace {
    /// The state directory, absolute: the driver's working directory may differ.
    pub state_dir: PathBuf,
    pub store: StoreChoice,
}

/// A driver the inspector started.
#[derive(Debug, Clone)]
struct Driver {
    /// The run it drives (the new run, for a fork).
    run: String,
    command: Vec<String>,
    pid: u32,
    log: PathBuf,
    started_unix_milliseconds: u64,
    /// Its exit code once it has ended (`None` while it runs, or killed by a signal: `ended`).
    exit_code: Option<i32>,
    ended: bool,
}

/// The drivers started, newest last.
#[derive(Clone, Default)]
pub struct Drivers(Arc<Mutex<VecDeque<Driver>>>);

impl Drivers {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Driver>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn ended(&self, pid: u32, exit_code: Option<i32>) {
        let mut drivers = self.lock();
        if let Some(driver) = drivers.iter_mut().find(|driver| driver.pid == pid) {
            driver.exit_code = exit_code;
            driver.ended = true;
        }
    }

    fn get(&self, pid: u32) -> Option<Driver> {
        let drivers = self.lock();
        drivers.iter().find(|driver| driver.pid == pid).cloned()
    }

    fn of_run(&self, run: &str) -> Vec<Driver> {
        let drivers = self.lock();
        drivers
            .iter()
            .filter(|driver| driver.run == run)
            .cloned()
            .collect()
    }
}

impl Driver {
    fn to_json(&self) -> Value {
        json!({
            "run": self.run,
            "command": self.command.join(" "),
            "pid": self.pid,
            "log": self.log.display().to_string(),
            "log_tail": log_tail(&self.log),
            "started": crate::base::clock::format_rfc3339(self.started_unix_milliseconds),
            "running": !self.ended,
            "exit_code": self.exit_code,
        })
    }
}

/// The end of a driver's log (its last `LOG_TAIL_BYTES`, from a line's start).
fn log_tail(path: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let length = file.metadata().map(|metadata| metadata.len()).unwrap_or(0);
    let start = length.saturating_sub(LOG_TAIL_BYTES);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = file.take(LOG_TAIL_BYTES).read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    match (start > 0, text.find('\n')) {
        (true, Some(newline)) => text[newline + 1..].to_string(),
        _ => text,
    }
}

/// `GET /api/drivers?id=RUN`: the drivers this inspector started for the run, oldest first.
pub async fn drivers(State(inspector): State<Inspector>, Query(query): Query<RunQuery>) -> Answer {
    let drivers: Vec<Value> = inspector
        .drivers
        .of_run(&query.id)
        .iter()
        .map(Driver::to_json)
        .collect();
    Ok(axum::Json(json!({"drivers": drivers})))
}

/// `POST /api/redrive?id=RUN`: starts `protocol-run redrive RUN --events inbox` once the run is
/// one a redrive takes, and answers when the driver has recorded the redrive (`{"outcome":
/// "redriven", "driver"}`) or has ended without it (refused, with its log's end).
pub async fn redrive(State(inspector): State<Inspector>, Query(query): Query<RunQuery>) -> Answer {
    let run = query.id;
    let redrives_before = {
        let store = inspector.store.lock();
        crate::runtime::runs::redrive::check(&**store, &run)
            .map_err(|refusal| Failure::refused(refused_text(&refusal.text)))?;
        store
            .run_summary(&run)?
            .map(|summary| summary.redrives)
            .unwrap_or_default()
    };
    let arguments = vec!["redrive".to_string(), run.clone()];
    let pid = start(&inspector, &run, arguments)?;
    let recorded = wait_for(&inspector, pid, |store| {
        Ok(store
            .run_summary(&run)?
            .is_some_and(|summary| summary.redrives > redrives_before))
    })
    .await?;
    answer(&inspector, pid, recorded, "redriven")
}

/// The body of `POST /api/fork?id=RUN`.
#[derive(Deserialize)]
pub struct ForkRequest {
    step: u64,
}

/// `POST /api/fork?id=RUN` with `{"step": N}`: starts `protocol-run fork RUN --at N --run-id
/// fork-MILLISECONDS-N --events inbox`, and answers when the new run is recorded (`{"outcome": "forked",
/// "run": NEW, "driver"}`) or the driver has ended without it (refused, with its log's end).
pub async fn fork(
    State(inspector): State<Inspector>,
    Query(query): Query<RunQuery>,
    axum::Json(request): axum::Json<ForkRequest>,
) -> Answer {
    let source = query.id;
    {
        let store = inspector.store.lock();
        crate::runtime::runs::start::recorded_root(&**store, &source, "fork")
            .map_err(|refusal| Failure::refused(refused_text(&refusal.text)))?;
    }
    // Numbered too: two forks asked in one millisecond get ids of their own.
    static FORKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let new_run = format!(
        "fork-{}-{}",
        crate::base::clock::unix_milliseconds_now(),
        FORKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let arguments = vec![
        "fork".to_string(),
        source,
        "--at".to_string(),
        request.step.to_string(),
        "--run-id".to_string(),
        new_run.clone(),
    ];
    let pid = start(&inspector, &new_run, arguments)?;
    let recorded = wait_for(&inspector, pid, |store| {
        Ok(store.run_summary(&new_run)?.is_some())
    })
    .await?;
    let mut answered = answer(&inspector, pid, recorded, "forked")?;
    answered.0["run"] = Value::from(new_run);
    Ok(answered)
}

/// `error: WHY\n` as the page says it.
pub(super) fn refused_text(text: &str) -> String {
    text.trim().trim_start_matches("error: ").to_string()
}

/// Starts the driver `protocol-run ARGUMENTS --events inbox` for `run` in a process group of
/// its own (the inspector stopping leaves it driving), its output in a log of the state
/// directory; its end is recorded when it comes.
fn start(inspector: &Inspector, run: &str, mut arguments: Vec<String>) -> Result<u32, Failure> {
    // Counted and added under one lock: requests at once cannot pass the limit together.
    let mut drivers = inspector.drivers.lock();
    let running = drivers.iter().filter(|driver| !driver.ended).count();
    if running >= MAX_RUNNING_DRIVERS {
        return Err(Failure::refused(format!(
            "{running} drivers started here still run, the limit (MAX_RUNNING_DRIVERS): wait for \
             one to end, or start this one from the command line"
        )));
    }
    let place = &inspector.place;
    let executable = std::env::current_exe().map_err(|error| {
        Failure::refused(format!(
            "cannot find this program to start a driver: {error}"
        ))
    })?;
    arguments.extend(["--events".to_string(), "inbox".to_string()]);
    let directory = place.state_dir.join("drivers");
    // The operator's alone, as the state directory is: a log may hold a run's output.
    let created = {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&directory)
    };
    created.map_err(|error| {
        Failure::refused(format!("cannot create {}: {error}", directory.display()))
    })?;
    let started = crate::base::clock::unix_milliseconds_now();
    // Numbered: two drivers started in one millisecond write logs of their own.
    static LOGS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let number = LOGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = directory.join(format!("{started}-{number}-{}.log", arguments[0]));
    let output = std::fs::File::create(&log)
        .map_err(|error| Failure::refused(format!("cannot create {}: {error}", log.display())))?;
    let errors = output.try_clone().map_err(|error| {
        Failure::refused(format!("cannot open {} twice: {error}", log.display()))
    })?;
    let mut command = std::process::Command::new(&executable);
    command
        .args(&arguments)
        .env("PROTOCOL_RUN_STATE_DIR", &place.state_dir)
        .env_remove(crate::store::choice::DATABASE_URL_FILE)
        // The inspector's own secret is not the driver's.
        .env_remove("PROTOCOL_RUN_UI_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(output)
        .stderr(errors);
    // The URL goes in the environment, never in argv, where other users could read it.
    match &place.store {
        StoreChoice::Postgres(url) => {
            command
                .env("PROTOCOL_RUN_STORE", "postgres")
                .env(crate::store::choice::DATABASE_URL, url);
        }
        _ => {
            command.env("PROTOCOL_RUN_STORE", "sqlite");
        }
    }
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().map_err(|error| {
        Failure::refused(format!("cannot start {}: {error}", executable.display()))
    })?;
    let pid = child.id();
    remember(
        &mut drivers,
        Driver {
            run: run.to_string(),
            command: std::iter::once("protocol-run".to_string())
                .chain(arguments)
                .collect(),
            pid,
            log,
            started_unix_milliseconds: started,
            exit_code: None,
            ended: false,
        },
    );
    drop(drivers);
    let drivers = inspector.drivers.clone();
    std::thread::spawn(move || {
        let code = child.wait().ok().and_then(|status| status.code());
        drivers.ended(pid, code);
    });
    Ok(pid)
}

/// Adds `driver`; at `MAX_DRIVERS`, the oldest that has ended is forgotten and its log removed
/// (one always has: fewer may run at once, `MAX_RUNNING_DRIVERS`).
fn remember(drivers: &mut VecDeque<Driver>, driver: Driver) {
    if drivers.len() >= MAX_DRIVERS
        && let Some(oldest) = drivers.iter().position(|driver| driver.ended)
        && let Some(forgotten) = drivers.remove(oldest)
    {
        let _ = std::fs::remove_file(&forgotten.log);
    }
    drivers.push_back(driver);
}

/// Waits until `recorded` says what the driver `pid` was started for is in the store (true), or
/// the driver has ended (false), at most `STARTING_PATIENCE`.
async fn wait_for(
    inspector: &Inspector,
    pid: u32,
    recorded: impl Fn(&dyn crate::store::Store) -> Result<bool, crate::store::StoreError>,
) -> Result<bool, Failure> {
    let deadline = tokio::time::Instant::now() + STARTING_PATIENCE;
    loop {
        // Read before looking at the driver's end: a driver that recorded and ended at once
        // is seen as recorded.
        let ended = inspector.drivers.get(pid).is_none_or(|driver| driver.ended);
        if recorded(&**inspector.store.lock())? {
            return Ok(true);
        }
        if ended || tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The answer once the driver recorded what it was started for (`outcome`), or why not.
fn answer(inspector: &Inspector, pid: u32, recorded: bool, outcome: &str) -> Answer {
    let Some(driver) = inspector.drivers.get(pid) else {
        return Err(Failure::refused(format!(
            "the driver (pid {pid}) was forgotten"
        )));
    };
    if recorded {
        return Ok(axum::Json(
            json!({"outcome": outcome, "driver": driver.to_json()}),
        ));
    }
    let why = match (driver.ended, driver.exit_code) {
        (true, Some(code)) => format!("the driver ended with exit code {code}"),
        (true, None) => "the driver was killed by a signal".to_string(),
        (false, _) => format!(
            "the driver (pid {pid}) has not recorded it after {} s; its log is {}",
            STARTING_PATIENCE.as_secs(),
            driver.log.display()
        ),
    };
    let tail = log_tail(&driver.log);
    Err(Failure::refused(if tail.trim().is_empty() {
        why
    } else {
        format!("{why}: {}", tail.trim())
    }))
}
