//! This process's lease in a shared store: taken when it starts driving runs, renewed on a thread of its own every third of its length, and, once lost, the end of the process (its effects stopped by the watchdog, nothing more written).

use std::sync::OnceLock;
use std::time::Duration;

use crate::store::{Store, StoreError};

/// How long a lease lasts without renewal by default: another host takes this one's runs once
/// it has run out.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The exit code of a process whose lease ran out: its runs may be another host's now.
pub const LOST_EXIT_CODE: i32 = 75;

/// This process's lease, once taken: every holder it records names it (`runs::claims`).
static LEASE: OnceLock<String> = OnceLock::new();

/// The lease this process holds, if it took one.
pub fn current() -> Option<&'static str> {
    LEASE.get().map(String::as_str)
}

/// Takes this process's lease through `store` (its id made of the front end, the machine's
/// name, the pid and the time), so that `store`'s writes are made under it; then renews it every
/// third of `length` through stores `open` gives, on a thread of its own. A renewal that finds
/// the lease lost ends the process with `LOST_EXIT_CODE`.
pub fn take(
    store: &mut dyn Store,
    process: &str,
    length: Duration,
    open: impl Fn() -> Result<Box<dyn Store>, StoreError> + Send + 'static,
) -> Result<String, StoreError> {
    let milliseconds = u64::try_from(length.as_millis()).unwrap_or(u64::MAX);
    let id = LEASE
        .get_or_init(|| {
            format!(
                "{process}@{}:{}:{}",
                machine_name(),
                std::process::id(),
                crate::base::clock::unix_milliseconds_now()
            )
        })
        .clone();
    store.renew_lease(&id, milliseconds)?;
    let renewed_by = id.clone();
    let spawned = std::thread::Builder::new()
        .name("lease".to_string())
        .spawn(move || keep(&renewed_by, milliseconds, length / 3, open));
    if let Err(error) = spawned {
        return Err(StoreError::Database {
            database: store.location(),
            operation: format!("renew the lease `{id}`"),
            source: Box::new(error),
        });
    }
    Ok(id)
}

/// Ends the process when `error` says its lease was lost: its runs may be another host's by
/// now, so nothing more of this process may act on them, and whatever it held back is never
/// reported. The effect watchdog stops its effects as the process ends.
pub fn end_if_lost(error: &StoreError) {
    if let StoreError::LeaseLost { .. } = error {
        eprintln!("error: {error}; this process ends");
        std::process::exit(LOST_EXIT_CODE);
    }
}

/// Renews the lease `id` every `every`; ends the process once it is lost.
fn keep(
    id: &str,
    milliseconds: u64,
    every: Duration,
    open: impl Fn() -> Result<Box<dyn Store>, StoreError>,
) {
    let mut store = None;
    loop {
        std::thread::sleep(every);
        if store.is_none() {
            store = open()
                .map_err(|error| eprintln!("warning: the lease `{id}`: {error}; tried again"))
                .ok();
        }
        let Some(connection) = store.as_mut() else {
            continue;
        };
        match connection.renew_lease(id, milliseconds) {
            Ok(()) => {}
            Err(error @ StoreError::LeaseLost { .. }) => end_if_lost(&error),
            Err(error) => {
                eprintln!("warning: the lease `{id}` was not renewed: {error}; tried again");
                // A new connection next time: this one may be broken.
                store = None;
            }
        }
    }
}

/// Whether the lease `id` was taken on this machine (the name in its id is this machine's):
/// then its holder's lock file tells at once whether it lives, as on one machine. The hosts of
/// one fleet are told apart by their names.
pub fn is_this_machine(id: &str) -> bool {
    id.split_once('@')
        .and_then(|(_, rest)| rest.split_once(':'))
        .is_some_and(|(machine, _)| machine == machine_name())
}

/// This machine's name, for the lease's id (which a person reads in `runs --json`).
fn machine_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "host".to_string())
}
