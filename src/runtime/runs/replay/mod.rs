//! Replaying recorded runs against a new version of their protocol (Temporal's replayer, for CI): each journaled event offered again in order to an instance of the new version, with no effect run and no real time, and the first step where it would do otherwise reported.

mod host;
mod inputs;
mod report;
pub mod steps;
mod walk;

pub use report::to_json;

use std::path::Path;
use std::sync::Arc;

use crate::base::diagnostic::Location;
use crate::pipeline::compile::machine::Machine;
use crate::pipeline::load::source::Part;
use crate::pipeline::load::{LoadError, Loaded};
use crate::runtime::runs::start::Operator;
use crate::store::{Store, StoreError};
use inputs::Unbound;
use steps::StepSeen;

/// The version replayed against: a protocol file loaded and compiled as `validate` does.
pub struct Version {
    pub loaded: Loaded,
    pub machine: Arc<Machine>,
}

impl Version {
    /// FILE loaded and compiled, or why not (its problems located).
    pub fn load(path: &Path) -> Result<Version, LoadError> {
        let (loaded, machine) = crate::pipeline::compile::set_aside::load_and_compile_file(path)?;
        Ok(Version {
            loaded,
            machine: Arc::new(machine),
        })
    }

    /// Where the node at `pointer` is written in this version.
    fn locate(&self, pointer: &str) -> Location {
        self.loaded.source.location(pointer, Part::Key)
    }

    /// Where the state `id` is written in this version, if it has it.
    fn locate_state(&self, id: &str) -> Option<Location> {
        let state = self.machine.state_id(id)?;
        Some(self.locate(&self.machine.state(state).pointer))
    }
}

/// What replaying one run found.
#[derive(Debug)]
pub enum Verdict {
    /// Every journaled step does the same in the new version.
    Clean { steps: usize },
    /// The first step that does not.
    Diverged(Box<Divergence>),
    /// The run cannot be replayed as the command was given (a secret input not supplied, a
    /// child protocol's run): why, and what to do.
    NotReplayable { reason: String },
}

/// The first step of a run the new version does otherwise.
#[derive(Debug)]
pub struct Divergence {
    pub step: u64,
    /// The event the step handled; `None` for the start.
    pub event: Option<String>,
    /// What differs: `transitions`, `started`, `states`, `deferred`, `end`
    /// (`steps::Difference`);
    /// `inbox` when the new version offers a deferred event again where the journal did not;
    /// at the start, `protocol` (another `id`), `inputs` or `grants` the new version refuses,
    /// `state` when it cannot hold the state a forked run started in; `error` when it fails on
    /// the step.
    pub kind: &'static str,
    /// What the journal did and what the new version does, in a sentence.
    pub message: String,
    pub recorded: Option<StepSeen>,
    pub replayed: Option<StepSeen>,
    /// Where in the new version the difference is (the transition it takes, or the state
    /// concerned), and what the marker there says.
    pub location: Option<(Location, String)>,
}

/// Replays run `run_id` of `store` against `version`; its secret inputs (never stored) come
/// from `secrets`, by name, and `operator` says what the run's recorded narrowing of its
/// grants comes to. A run the store does not have is `StoreError::UnknownRun`.
pub fn replay(
    store: &dyn Store,
    version: &Version,
    run_id: &str,
    secrets: &[(String, String)],
    operator: &dyn Operator,
) -> Result<Verdict, StoreError> {
    let Some(record) = store.run(run_id)? else {
        return Err(StoreError::UnknownRun {
            database: store.location(),
            run: run_id.to_string(),
        });
    };
    if let Some(parent) = &record.summary.parent {
        return Ok(Verdict::NotReplayable {
            reason: format!(
                "it is a child protocol of run `{parent}`: replay `{parent}`, whose journal holds \
                 what its children sent it"
            ),
        });
    }
    let journal = store.journal(run_id)?;
    if let Some(first) = journal.first()
        && let Some(divergence) = walk::other_protocol(store, version, run_id, first)?
    {
        return Ok(diverged(divergence));
    }
    let started = inputs::bind_inputs(&version.machine, &record, secrets).and_then(|inputs| {
        let machine = inputs::run_machine(version, &record, &inputs, operator)?;
        Ok((machine, inputs))
    });
    let (machine, inputs) = match started {
        Ok(started) => started,
        Err(Unbound::NotReplayable(reason)) => return Ok(Verdict::NotReplayable { reason }),
        Err(Unbound::Refused { kind, message }) => {
            return Ok(diverged(Divergence {
                step: 0,
                event: None,
                kind,
                message,
                recorded: None,
                replayed: None,
                location: None,
            }));
        }
    };
    let replaying = walk::Replaying {
        store,
        version,
        machine,
        run_id,
        recorded_machine: super::resume::recorded_machine(store, &record),
    };
    Ok(match replaying.walk(&journal, inputs, secrets)? {
        Some(divergence) => diverged(divergence),
        None => Verdict::Clean {
            steps: journal.len(),
        },
    })
}

fn diverged(divergence: Divergence) -> Verdict {
    Verdict::Diverged(Box::new(divergence))
}
