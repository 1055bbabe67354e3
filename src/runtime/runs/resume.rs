//! What every way of resuming a recorded run shares (`resume`, a `serve` host, an MCP server): the protocol checked unchanged since the run started, its recorded inputs bound again with its secrets supplied again, and its interpreter restored from its latest committed step.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::base::durable::{Resume, TimerPolicy};
use crate::base::value::Value;
use crate::pipeline::compile::inputs::InputError;
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::Interpreter;
use crate::store::read_files::{ChangedFile, other_files};
use crate::store::{RunRecord, Store, StoreError, content_hash};

/// A file of a run's protocol (the protocol, a library, a child protocol) that changed since
/// the run started.
#[derive(Debug)]
pub struct ProtocolChanged {
    /// How the run is named to the reader: `run `ID``, or `instance `NAME``.
    pub whose: String,
    pub changed: ChangedFile,
}

impl ProtocolChanged {
    /// What to say, ending with what the reader can do (`remedy`), which differs by front end.
    pub fn message(&self, remedy: &str) -> String {
        let ChangedFile {
            path,
            recorded,
            now,
        } = &self.changed;
        format!(
            "{path} changed since {} started (recorded {recorded}, now {now}); resuming would \
             mix two protocols. {remedy}",
            self.whose
        )
    }
}

/// Checks that the protocol at `path`, whose text is now `text`, and every file its load read
/// are as they were when the run recorded `recorded_hash` started.
pub fn unchanged(
    path: &str,
    text: &str,
    recorded_hash: &str,
    whose: impl FnOnce() -> String,
) -> Result<(), ProtocolChanged> {
    match crate::store::read_files::changed_file(path, recorded_hash, text) {
        None => Ok(()),
        Some(changed) => Err(ProtocolChanged {
            whose: whose(),
            changed,
        }),
    }
}

/// The texts a run started with, as the store keeps them: its protocol's, and each other file
/// its load read (libraries, child protocols) by the path it was read from.
pub struct PinnedTexts {
    pub protocol: String,
    pub others: HashMap<PathBuf, String>,
}

/// Runs `body` (loading and compiling a run's protocol) with `others` (a run's pinned texts
/// but its protocol's) read in place of the files at their paths; with `None`, from disk.
pub fn reading_pinned<T>(others: Option<HashMap<PathBuf, String>>, body: impl FnOnce() -> T) -> T {
    match others {
        Some(others) => crate::pipeline::load::pinned::with_texts(others, body),
        None => body(),
    }
}

/// Which version of its protocol a resumed run runs.
pub enum Version {
    /// The files as they are now: none changed, or the run is moved to them (`--upgrade`).
    Current,
    /// The texts it started with, because this file changed.
    Pinned(ProtocolChanged, PinnedTexts),
    /// A file changed, and the store does not keep every text the run started with (it was
    /// recorded before libraries and children were kept).
    NotKept(ProtocolChanged),
}

/// Which version `record`'s run resumes with, its protocol at `path` being `text` now: the
/// current files unless one changed and the run is not moved to them (`upgrade`), then the
/// texts it started with when the store keeps them all.
pub fn version(
    store: &dyn Store,
    record: &RunRecord,
    path: &str,
    text: &str,
    upgrade: bool,
    whose: impl FnOnce() -> String,
) -> Result<Version, StoreError> {
    let changed = match unchanged(path, text, &record.summary.protocol_hash, whose) {
        Ok(()) => return Ok(Version::Current),
        Err(_) if upgrade => return Ok(Version::Current),
        Err(changed) => changed,
    };
    Ok(match pinned_texts(store, record)? {
        Some(texts) => Version::Pinned(changed, texts),
        None => Version::NotKept(changed),
    })
}

/// The texts `record`'s run started with, when the store keeps every one (`None` for a run
/// recorded before its libraries and children were kept): each text found by the hash the
/// run recorded for it, and checked against it. A resume after a file changed runs them.
pub fn pinned_texts(
    store: &dyn Store,
    record: &RunRecord,
) -> Result<Option<PinnedTexts>, StoreError> {
    let recorded = &record.summary.protocol_hash;
    let own = recorded.split('\n').next().unwrap_or_default();
    let Some(protocol) = record
        .protocol_text
        .as_deref()
        .filter(|text| content_hash(text) == own)
    else {
        return Ok(None);
    };
    let others: Vec<(&str, &str)> = other_files(recorded).collect();
    let hashes: Vec<String> = others.iter().map(|(hash, _)| hash.to_string()).collect();
    let kept = if hashes.is_empty() {
        HashMap::new()
    } else {
        store.protocol_texts(&hashes)?
    };
    let mut texts = HashMap::new();
    for (hash, path) in others {
        match kept.get(hash) {
            Some(text) if content_hash(text) == hash => {
                texts.insert(PathBuf::from(path), text.clone());
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(PinnedTexts {
        protocol: protocol.to_string(),
        others: texts,
    }))
}

/// The protocol `record`'s run was recorded with, compiled from the texts kept with it (its
/// libraries' and child protocols' too when the store keeps them all), whatever the files hold
/// now: what reads its journal's pointers as states and transitions (`status`, `replay`).
/// `None` when no text was kept, or it no longer compiles (a library it reads, not kept,
/// changed or went).
pub fn recorded_machine(store: &dyn Store, record: &RunRecord) -> Option<Machine> {
    let (text, others) = match pinned_texts(store, record).ok().flatten() {
        Some(texts) => (texts.protocol, Some(texts.others)),
        None => (record.protocol_text.clone()?, None),
    };
    reading_pinned(others, || {
        let loaded = crate::pipeline::load::load_text(&record.summary.protocol_path, text).ok()?;
        crate::pipeline::compile::compile(&loaded).ok()
    })
}

/// Binds `record`'s recorded inputs again, its secret inputs supplied from `secrets` (they are
/// never stored); each problem says what to do about it, a missing secret naming how an
/// operator supplies it (`supply_secret`, which differs by front end).
pub fn bind_recorded(
    machine: &Machine,
    record: &RunRecord,
    secrets: &[(String, String)],
    supply_secret: impl Fn(&str) -> String,
) -> Result<Vec<Value>, String> {
    machine
        .bind_recorded_inputs(&record.inputs, secrets)
        .map_err(|errors| {
            let messages: Vec<String> = errors
                .iter()
                .map(|error| match error {
                    InputError::SecretNotStored { name } => format!(
                        "secret input `{name}` is not stored with the run: {}",
                        supply_secret(name)
                    ),
                    other => other.to_string(),
                })
                .collect();
            messages.join("; ")
        })
}

/// The run's interpreter as its latest committed step left it, with how to re-arm its timers;
/// a run whose start was never committed starts again from the beginning (nothing of it took
/// effect), with no `Resume`.
pub fn restore_latest(
    store: &dyn Store,
    run_id: &str,
    machine: Arc<Machine>,
    inputs: Vec<Value>,
    secrets: &[(String, String)],
    timers: TimerPolicy,
) -> Result<(Interpreter, Option<Resume>), String> {
    let Some(stored) = store
        .latest_snapshot(run_id)
        .map_err(|error| error.to_string())?
    else {
        return Ok((Interpreter::new(machine, inputs), None));
    };
    let snapshot = stored.snapshot.with_secrets(&stored.secrets, secrets)?;
    let interpreter =
        Interpreter::restore(machine, inputs, &snapshot).map_err(|error| error.to_string())?;
    // A redrive's step, not yet resumed from (a resume after it commits a step of its own),
    // names the children to start again.
    let latest = store
        .journal_tail(run_id, 1)
        .map_err(|error| error.to_string())?;
    let children_again = latest
        .iter()
        .filter(|entry| entry.sequence == stored.sequence)
        .flat_map(super::redrive::children_again)
        .collect();
    Ok((
        interpreter,
        Some(Resume {
            snapshot,
            sequence: stored.sequence,
            committed_unix_milliseconds: stored.unix_milliseconds,
            timers,
            children_again,
        }),
    ))
}
