//! Starting and resuming a run in this process: the protocol loaded and compiled within the operator's limit, its inputs bound, its grants resolved, the run claimed, then recorded or restored; each refusal says what to print and its exit code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::claims::HolderLock;
use super::exit_code;
use crate::base::diagnostic::render_all;
use crate::base::durable::{Checkpoint, CheckpointStep, Resume, TimerPolicy};
use crate::base::log_record::LogRecord;
use crate::base::model::action::LogLevel;
use crate::base::value::Value;
use crate::effects::capabilities::Capabilities;
use crate::pipeline::compile::compile_limited;
use crate::pipeline::compile::machine::Machine;
use crate::pipeline::load::Loaded;
use crate::runtime::lifecycle::{LifecycleEvent, RunLifecycle};
use crate::runtime::run::Interpreter;
use crate::store::{NewRun, RunOrigin, RunRecord, Store, Write};

/// Why a run cannot start or resume: the text to print on stderr, and the exit code.
#[derive(Debug)]
pub struct Refusal {
    pub text: String,
    pub exit_code: u8,
}

impl Refusal {
    /// `error: MESSAGE`, on a line of its own.
    pub fn error(message: impl std::fmt::Display, exit_code: u8) -> Refusal {
        Refusal {
            text: format!("error: {message}\n"),
            exit_code,
        }
    }

    /// Text already rendered (located diagnostics, a load error).
    pub fn rendered(text: impl std::fmt::Display, exit_code: u8) -> Refusal {
        Refusal {
            text: text.to_string(),
            exit_code,
        }
    }

    /// A refusal the front end has already printed (its own report of the inputs it read).
    pub fn reported(exit_code: u8) -> Refusal {
        Refusal {
            text: String::new(),
            exit_code,
        }
    }

    /// Prints the refusal on stderr and gives its exit code, for a front end that exits with it.
    pub fn report(self) -> u8 {
        eprint!("{}", self.text);
        self.exit_code
    }
}

/// The run `run` as recorded, for a command (`verb`: `fork`, `redrive`) that takes only a
/// run started on its own: refused, saying why, when the store has no such run or it is a
/// child protocol's (the command is given its root instead).
pub fn recorded_root(store: &dyn Store, run: &str, verb: &str) -> Result<RunRecord, Refusal> {
    let Some(record) = store.run(run).map_err(store_refusal)? else {
        return Err(Refusal::error(
            format!(
                "no run `{run}` in {}; `protocol-run runs` lists them",
                store.location()
            ),
            exit_code::NO_INPUT_FILE,
        ));
    };
    if let Some(parent) = &record.summary.parent {
        return Err(Refusal::error(
            format!("run `{run}` is a child protocol of run `{parent}`: {verb} `{parent}`"),
            exit_code::USAGE,
        ));
    }
    Ok(record)
}

fn store_refusal(error: crate::store::StoreError) -> Refusal {
    Refusal::error(error, exit_code::IO)
}

/// What the operator decided about grants, as the front end holds it (`--allow-*`,
/// `--sandbox strict`): the rules below apply it the same for a new run and a resumed one.
pub trait Operator {
    /// The limit on what the protocol may do: the operator's narrowing, after the one
    /// `recorded` when the run started, so a resume never forgets what was withheld.
    fn limit(&self, recorded: Option<&serde_json::Value>) -> Result<Capabilities, Refusal>;
    /// What the run records of the narrowing, with the grants it starts with (`granted`).
    fn recorded(&self, granted: &Capabilities) -> Option<serde_json::Value>;
    /// Whether every kind of grant is narrowed, so a protocol without `permissions` is bounded.
    fn is_strict(&self) -> bool;
}

/// Where a run is kept and who decides its grants: what starting and resuming share.
pub struct Place<'a> {
    pub store: &'a mut dyn Store,
    /// The store's path, where the run's claim is taken.
    pub state_path: &'a Path,
    pub operator: &'a dyn Operator,
    pub lifecycle: &'a mut RunLifecycle,
}

/// A run ready to drive: new, or restored from the store.
pub struct Prepared {
    pub machine: Arc<Machine>,
    pub interpreter: Interpreter,
    pub run_id: String,
    pub resume: Option<Resume>,
    /// Held until the run's process ends: no other process drives the run meanwhile.
    pub lock: HolderLock,
    /// What the run may do, to log before anything runs.
    pub grants: Vec<LogRecord>,
}

/// Loads, compiles and records a new run of `file` as `run_id`; `bind` binds the inputs the
/// front end was given against the compiled machine.
pub fn new_run(
    place: Place,
    file: &Path,
    run_id: &str,
    bind: &mut dyn FnMut(&Machine) -> Result<Vec<Value>, Refusal>,
) -> Result<Prepared, Refusal> {
    let limit = place.operator.limit(None)?;
    let text = crate::pipeline::load::read_text(file)
        .map_err(|error| Refusal::rendered(&error, exit_code::of_load_error(&error)))?;
    let loaded = crate::pipeline::load::load_text(&file.display().to_string(), text.clone())
        .map_err(|diagnostics| Refusal::rendered(render_all(&diagnostics), exit_code::INVALID))?;
    advance(place.lifecycle, LifecycleEvent::Loaded)?;
    let machine = compile(&loaded, &limit)?;
    let inputs = bind(&machine)?;
    let (machine, grants) = resolve_grants(&loaded, &limit, machine, &inputs, place.operator)?;
    let lock = claim(place.store, place.state_path, run_id, "run")?;
    place
        .store
        .create_run(&NewRun {
            id: run_id.to_string(),
            protocol_path: canonical(file),
            protocol_hash: crate::store::read_files::recorded_hash(&machine),
            protocol_text: Some(text),
            read_texts: crate::store::read_files::read_texts(&machine),
            inputs: machine.recorded_inputs(&inputs),
            started_unix_milliseconds: crate::base::clock::unix_milliseconds_now(),
            grants: place.operator.recorded(&machine.capabilities),
            origin: RunOrigin::Run,
            holder: Some(lock.holder().clone()),
            forked_from: None,
        })
        .map_err(store_refusal)?;
    Ok(Prepared {
        interpreter: Interpreter::new(machine.clone(), inputs),
        machine,
        run_id: run_id.to_string(),
        resume: None,
        lock,
        grants,
    })
}

/// How a recorded run is resumed.
pub struct Resumption<'a> {
    pub run_id: &'a str,
    /// Go on although the protocol changed, as long as every recorded state and variable exists.
    pub force: bool,
    pub timers: TimerPolicy,
    /// Binds the run's recorded inputs with its secret inputs supplied again, and gives those
    /// secrets (by name) for the snapshot's masked values.
    pub resupply: &'a mut dyn FnMut(&Machine, &RunRecord) -> Result<Resupplied, Refusal>,
    /// A redrive (`redrive::record`), recorded once the run is claimed and before it is
    /// restored, then told to this (what the front end says of it): a run that failed is taken,
    /// not refused as finished.
    pub redrive: Option<&'a mut dyn FnMut(&super::redrive::Redriven)>,
}

/// A resumed run's inputs: the recorded ones bound again, and the secrets supplied again (by
/// name), which also fill the snapshot's masked values.
pub struct Resupplied {
    pub inputs: Vec<Value>,
    pub secrets: Vec<(String, String)>,
}

/// Restores a recorded run from its last committed step, refusing a changed protocol unless
/// `force` is given and every recorded state and variable still exists.
pub fn restored_run(place: Place, resumption: Resumption) -> Result<Prepared, Refusal> {
    let run_id = resumption.run_id;
    let location = place.store.location().to_string();
    let missing = || {
        Refusal::error(
            format!("no run `{run_id}` in {location}"),
            exit_code::NO_INPUT_FILE,
        )
    };
    match place.store.run(run_id).map_err(store_refusal)? {
        None => return Err(missing()),
        // Refused before its lock is taken: a child's run has no lock of its own.
        Some(record) if record.summary.parent.is_some() => {
            let error = super::claims::ClaimError::Child {
                run: run_id.to_string(),
                parent: record.summary.parent.unwrap_or_default(),
            };
            return Err(Refusal::error(&error, error.exit_code()));
        }
        // A finished run is not resumed: said before its claim, which would refuse it without
        // saying what to do instead.
        Some(record) if resumption.redrive.is_none() => {
            if let Some(refusal) = super::redrive::not_resumed(run_id, &record.summary) {
                return Err(refusal);
            }
        }
        Some(_) => {}
    }
    let lock = match resumption.redrive {
        // A failed run is claimed by the redrive's reopening.
        Some(_) => HolderLock::run_to_reopen(place.store, place.state_path, run_id)
            .map_err(|error| Refusal::error(&error, error.exit_code()))?,
        None => claim(place.store, place.state_path, run_id, "resume")?,
    };
    // Read again under the lock: a process that held it may have finished the run meanwhile.
    let Some(record) = place.store.run(run_id).map_err(store_refusal)? else {
        return Err(missing());
    };
    let summary = &record.summary;
    // A redrive takes a failed run (`redrive::record` says which it refuses).
    if resumption.redrive.is_none()
        && let Some(refusal) = super::redrive::not_resumed(run_id, summary)
    {
        return Err(refusal);
    }
    let file = PathBuf::from(&summary.protocol_path);
    let (text, pinned) = texts_to_run(&*place.store, &record, resumption.force)?;
    let lifecycle = &mut *place.lifecycle;
    let operator = place.operator;
    // Every file its load reads (again when grants are resolved) is read pinned.
    let (machine, inputs, secrets, grants) = super::resume::reading_pinned(pinned, || {
        let loaded = crate::pipeline::load::load_text(&file.display().to_string(), text).map_err(
            |diagnostics| Refusal::rendered(render_all(&diagnostics), exit_code::INVALID),
        )?;
        advance(lifecycle, LifecycleEvent::Loaded)?;
        let limit = operator.limit(record.grants.as_ref())?;
        let machine = compile(&loaded, &limit)?;
        let Resupplied { inputs, secrets } = (resumption.resupply)(&machine, &record)?;
        let (machine, grants) = resolve_grants(&loaded, &limit, machine, &inputs, operator)?;
        Ok::<_, Refusal>((machine, inputs, secrets, grants))
    })?;
    // Recorded once the protocol is known to load, compile and take the run's inputs.
    if let Some(tell) = resumption.redrive {
        let redrive = super::redrive::Redrive {
            run: run_id,
            holder: lock.holder(),
            secrets: &secrets,
            unix_milliseconds: crate::base::clock::unix_milliseconds_now(),
        };
        tell(&super::redrive::record(place.store, &redrive)?);
    }
    place
        .store
        .mark_running(run_id, crate::base::clock::unix_milliseconds_now())
        .map_err(store_refusal)?;
    let (interpreter, resume) = super::resume::restore_latest(
        &*place.store,
        run_id,
        machine.clone(),
        inputs,
        &secrets,
        resumption.timers,
    )
    .map_err(|error| {
        Refusal::error(
            format!(
                "run `{run_id}` cannot resume: {}",
                crate::base::secrets::mask(&error)
            ),
            exit_code::INVALID,
        )
    })?;
    Ok(Prepared {
        machine,
        interpreter,
        run_id: run_id.to_string(),
        resume,
        lock,
        grants,
    })
}

/// The protocol text a resumed run loads, and the texts of the other files it reads in place
/// of theirs (`None`: from disk). A changed file (the protocol, a library, a child protocol):
/// the texts it started with (pinned), said on stderr, or the files (`upgrade`, once `force`)
/// as long as its states and variables still exist. Its protocol's file gone: the texts it
/// started with, as there is no file to move it to.
fn texts_to_run(
    store: &dyn Store,
    record: &RunRecord,
    upgrade: bool,
) -> Result<(String, Option<HashMap<PathBuf, String>>), Refusal> {
    let summary = &record.summary;
    let run_id = &summary.id;
    let said = |path: &str, how: &str| {
        eprintln!(
            "run `{run_id}`: {path} {how} since the run started; it goes on with the text it \
             started with (--upgrade moves it to the file's)"
        );
    };
    let text = match crate::pipeline::load::read_text(Path::new(&summary.protocol_path)) {
        Ok(text) => text,
        Err(error) => {
            let gone = matches!(error, crate::pipeline::load::LoadError::NotFound { .. });
            let pinned = if gone && !upgrade {
                super::resume::pinned_texts(store, record).map_err(store_refusal)?
            } else {
                None
            };
            return match pinned {
                Some(texts) => {
                    said(&summary.protocol_path, "is gone");
                    Ok((texts.protocol, Some(texts.others)))
                }
                None => Err(Refusal::rendered(&error, exit_code::of_load_error(&error))),
            };
        }
    };
    let version = super::resume::version(
        store,
        record,
        &summary.protocol_path,
        &text,
        upgrade,
        || format!("run `{run_id}`"),
    )
    .map_err(store_refusal)?;
    match version {
        super::resume::Version::Current => Ok((text, None)),
        super::resume::Version::Pinned(changed, texts) => {
            said(&changed.changed.path, "changed");
            Ok((texts.protocol, Some(texts.others)))
        }
        super::resume::Version::NotKept(changed) => Err(Refusal::error(
            changed.message(
                "The texts it started with are not all kept (it was recorded before libraries \
                 and child protocols were): restore the file, or pass --upgrade to move the run \
                 to it as long as every state and variable it recorded still exists",
            ),
            exit_code::INVALID,
        )),
    }
}

fn compile(loaded: &Loaded, limit: &Capabilities) -> Result<Arc<Machine>, Refusal> {
    compile_limited(loaded, &Arc::default(), limit)
        .map(Arc::new)
        .map_err(|diagnostics| Refusal::rendered(render_all(&diagnostics), exit_code::INVALID))
}

/// Applies a lifecycle move; a move the lifecycle refuses is an internal error (exit 70)
/// rather than a silently wrong state.
pub fn advance(lifecycle: &mut RunLifecycle, event: LifecycleEvent) -> Result<(), Refusal> {
    lifecycle.advance(event).map_err(|refused| Refusal {
        text: format!("internal error: {refused}\n"),
        exit_code: exit_code::INTERNAL,
    })
}

/// Resolves the grants that name inputs from the bound `inputs` (`grants::for_operator`),
/// before anything runs, and says what the run may do: its grants (`#grants`), and a warning
/// when the protocol declares none (`#permissions_undeclared`), as log lines for its start.
fn resolve_grants(
    loaded: &Loaded,
    limit: &Capabilities,
    machine: Arc<Machine>,
    inputs: &[Value],
    operator: &dyn Operator,
) -> Result<(Arc<Machine>, Vec<LogRecord>), Refusal> {
    let machine = super::grants::for_operator(loaded, limit, machine, inputs)
        .map_err(|diagnostics| Refusal::rendered(render_all(&diagnostics), exit_code::INVALID))?;
    let record = |level: LogLevel, message: String, tag: &str| LogRecord {
        level,
        message,
        tags: Arc::from([Arc::from(tag)]),
        fields: Vec::new(),
        from: None,
    };
    let mut records = Vec::new();
    if loaded.protocol.permissions.is_none() && !operator.is_strict() {
        records.push(record(
            LogLevel::Warn,
            format!(
                "{} declares no `permissions`: it may run any program and read and write any \
                 file; declare `permissions:` in it, or run it with --sandbox strict",
                loaded.source.path
            ),
            "permissions_undeclared",
        ));
    }
    if !machine.capabilities.is_unrestricted() {
        records.push(record(
            LogLevel::Info,
            format!("grants: {}", machine.capabilities.summary()),
            "grants",
        ));
    }
    Ok((machine, records))
}

/// Claims the run for this process (`claims`): a run another process holds (another `resume`,
/// a `serve` or `mcp` host) is refused with 75 (try again once it ends), naming it.
fn claim(
    store: &mut dyn Store,
    state_path: &Path,
    run_id: &str,
    process: &str,
) -> Result<HolderLock, Refusal> {
    HolderLock::run(store, state_path, run_id, process)
        .map_err(|error| Refusal::error(&error, error.exit_code()))
}

/// The path runs are recorded under, so a resume finds them from any working directory.
pub fn canonical(file: &Path) -> String {
    file.canonicalize()
        .unwrap_or_else(|_| file.to_path_buf())
        .display()
        .to_string()
}

/// Commits each macrostep of a run to the store: at once, or (batched) held back and committed
/// with the others of its read batch in one transaction at the next `flush`.
pub struct StoreCheckpoint<'a> {
    store: &'a mut dyn Store,
    run_id: String,
    /// The steps held back since the last flush; `None` commits each step at once.
    held: Option<Vec<Write>>,
    /// The process that holds the run, and how often it looks at the run's inbox
    /// (`taking_queued`); `None` looks at none.
    queued: Option<(crate::store::Holder, std::time::Duration)>,
}

impl<'a> StoreCheckpoint<'a> {
    pub fn new(store: &'a mut dyn Store, run_id: String, batched: bool) -> StoreCheckpoint<'a> {
        StoreCheckpoint {
            store,
            run_id,
            held: batched.then(Vec::new),
            queued: None,
        }
    }

    /// Looks at the run's inbox every `every` for events other processes queued (another host,
    /// `protocol-run ui`), taken for `holder`, the process that holds the run. Their outcomes
    /// join the batch of the steps that applied them: a checkpoint that takes them is batched.
    pub fn taking_queued(
        mut self,
        holder: crate::store::Holder,
        every: std::time::Duration,
    ) -> StoreCheckpoint<'a> {
        self.queued = Some((holder, every));
        self
    }
}

impl StoreCheckpoint<'_> {
    /// Holds `write` back for the next flush, or (not batched) commits it at once.
    fn hold_or_commit(&mut self, write: Write) -> Result<(), String> {
        match &mut self.held {
            Some(held) => {
                held.push(write);
                Ok(())
            }
            None => self.store.commit_batch(&[write]).map_err(|error| {
                crate::runtime::runs::lease::end_if_lost(&error);
                error.to_string()
            }),
        }
    }
}

impl Checkpoint for StoreCheckpoint<'_> {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        let write = Write::step(self.run_id.clone(), step);
        self.hold_or_commit(write)
    }

    fn run_id(&self) -> Option<&str> {
        Some(&self.run_id)
    }

    fn queued_every(&self) -> Option<std::time::Duration> {
        // Applied once only when committed with its step: held back with it.
        self.held.as_ref()?;
        self.queued.as_ref().map(|(_, every)| *every)
    }

    fn take_queued(&mut self, limit: usize) -> Result<crate::base::durable::TakenQueued, String> {
        let Some((holder, _)) = &self.queued else {
            return Ok(Default::default());
        };
        let scope = crate::store::InboxScope::Run(&self.run_id);
        let taken = self
            .store
            .take_inbox(holder, scope, limit)
            .map_err(|error| {
                crate::runtime::runs::lease::end_if_lost(&error);
                error.to_string()
            })?;
        Ok(crate::base::durable::TakenQueued {
            events: taken
                .entries
                .into_iter()
                .map(|entry| crate::base::durable::QueuedEvent {
                    entry: entry.entry,
                    cancel: entry.kind == crate::store::inbox::EntryKind::Cancel,
                    event: entry.event,
                    data: entry.data,
                })
                .collect(),
            set_aside: taken
                .set_aside
                .iter()
                .map(|entry| {
                    format!(
                        "inbox entry {} (`{}`) {}",
                        entry.entry,
                        entry.event,
                        crate::store::inbox::set_aside_reason(entry.tries.saturating_sub(1))
                    )
                })
                .collect(),
        })
    }

    fn applied_queued(
        &mut self,
        entry: u64,
        step: Option<u64>,
        outcome: serde_json::Value,
    ) -> Result<(), String> {
        let write = Write::ApplyInbox {
            run: self.run_id.clone(),
            entry,
            step,
            outcome,
            output: String::new(),
        };
        self.hold_or_commit(write)
    }

    fn telemetry(&mut self, lines: String) -> Result<(), String> {
        let write = Write::Telemetry {
            run: self.run_id.clone(),
            lines,
        };
        self.hold_or_commit(write)
    }

    fn flush(&mut self) -> Result<(), String> {
        let Some(held) = self.held.as_mut().filter(|held| !held.is_empty()) else {
            return Ok(());
        };
        let committed = self.store.commit_batch(held);
        // Committed or not, they are not committed again: a failure ends the run.
        held.clear();
        committed.map_err(|error| {
            crate::runtime::runs::lease::end_if_lost(&error);
            error.to_string()
        })
    }
}
