//! What every way of resuming a recorded run shares (`resume`, a `serve` host, an MCP server): the protocol checked unchanged since the run started, its recorded inputs bound again with its secrets supplied again, and its interpreter restored from its latest committed step.

use std::sync::Arc;

use crate::base::durable::{Resume, TimerPolicy};
use crate::base::value::Value;
use crate::pipeline::compile::inputs::InputError;
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::Interpreter;
use crate::store::read_files::ChangedFile;
use crate::store::{RunRecord, Store};

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

/// The protocol text `record`'s run started with, when it is kept whole: the run read no file
/// besides its protocol (its recorded hash is its own alone), and the text kept hashes to it.
/// A resume after the file changed goes on with it.
pub fn pinned_text(record: &RunRecord) -> Option<&str> {
    let recorded = &record.summary.protocol_hash;
    record
        .protocol_text
        .as_deref()
        .filter(|text| !recorded.contains('\n') && crate::store::content_hash(text) == *recorded)
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
