//! Redriving a run: one that stopped unfinished, or failed on an unhandled error, driven again under its own id from its last committed step before the failure; only what failed runs again (the effects running then, a map's items that did not end well), and the journal records the redrive.

use crate::base::durable::{ChildAgain, ChildChange};
use crate::base::exit_code;
use crate::base::snapshot::Snapshot;
use crate::effects::{EffectKind, EffectRequest, InterruptPolicy};
use crate::runtime::runs::start::{Refusal, recorded_root};
use crate::store::{Holder, JournalEntry, RunStatus, Store, StoreError, Write};

/// A redrive to record: of `run`, by `holder` (this process, which holds the run's lock), with
/// the run's secret inputs supplied again (`secrets`, by name), at `unix_milliseconds`.
pub struct Redrive<'a> {
    pub run: &'a str,
    pub holder: &'a Holder,
    pub secrets: &'a [(String, String)],
    pub unix_milliseconds: u64,
}

/// What a redrive recorded, for the front end to say.
#[derive(Debug, Clone, PartialEq)]
pub struct Redriven {
    /// The step whose state the run goes on from.
    pub from_step: u64,
    /// What the run was: finished (failed), stopped, or running with its process gone.
    pub was: RunStatus,
    /// The step whose unhandled error failed the run; `None` for a run that stopped, or one an
    /// engine error ended after its last step.
    pub failed_at: Option<u64>,
    /// The effects and map items that run again, by id.
    pub again: Vec<String>,
}

impl Redriven {
    /// `redriven from step 3 (it failed at step 4); again: check`, for stderr.
    pub fn description(&self) -> String {
        let failure = match (self.was, self.failed_at) {
            (RunStatus::Finished, Some(step)) => format!(" (it failed at step {step})"),
            (RunStatus::Finished, None) => " (an error ended it after that step)".to_string(),
            (RunStatus::Stopped, _) => " (it had stopped)".to_string(),
            (RunStatus::Running, _) => " (its process had died)".to_string(),
        };
        let again = if self.again.is_empty() {
            "nothing had failed there".to_string()
        } else {
            format!("again: {}", self.again.join(", "))
        };
        format!("redriven from step {}{failure}; {again}", self.from_step)
    }
}

/// Refuses, before the run is claimed, what no redrive can take: a run the store does not
/// have, a child protocol's run (its root is redriven), and a run that reached a final state
/// (forked instead).
pub fn check(store: &dyn Store, run: &str) -> Result<(), Refusal> {
    let record = recorded_root(store, run, "redrive")?;
    finished_in_final_state(run, &record.summary)
}

/// Records `redrive`: the run is running again, held by the redrive's holder (a failed run is
/// claimed so, its end cleared; a stopped one was claimed before), and its next step, in the
/// same transaction, is the state after its last step before the failure, with what failed
/// made to run again. The secret inputs supplied again put back the values that state's
/// placeholders stand for (the store masks them again). The caller then resumes the run as
/// from any step.
pub fn record(store: &mut dyn Store, redrive: &Redrive) -> Result<Redriven, Refusal> {
    let Redrive {
        run,
        holder,
        secrets,
        unix_milliseconds,
    } = *redrive;
    let store_failed = |error: StoreError| Refusal::error(error, exit_code::IO);
    // Read again under the claim: the run may have moved on since `check`.
    let record = recorded_root(store, run, "redrive")?;
    let summary = &record.summary;
    finished_in_final_state(run, summary)?;
    let Some(last) = summary.last_sequence else {
        return Err(Refusal::error(
            format!(
                "run `{run}` has no committed step to go on from: resume it, which starts it over"
            ),
            exit_code::USAGE,
        ));
    };
    let failed = summary.status == RunStatus::Finished;
    let from_step = match failed {
        true => before_the_failure(store, run, last)?,
        false => last,
    };
    // The first step that holds the run's end, when one does.
    let failed_at = (from_step < last).then_some(from_step + 1);
    let Some(stored) = store.snapshot_at(run, from_step).map_err(store_failed)? else {
        return Err(Refusal::error(
            format!("run `{run}` has no step {from_step} to go on from"),
            exit_code::USAGE,
        ));
    };
    let mut children = failed_children(store, run, from_step)?;
    let mut stored = stored;
    if failed {
        children.extend(running_children(store, run, from_step, &mut stored)?);
    }
    let mut snapshot = stored
        .snapshot
        .with_secrets(&stored.secrets, secrets)
        .map_err(|error| {
            Refusal::error(
                format!(
                    "run `{run}` cannot be redriven: {}",
                    crate::base::secrets::mask(&error)
                ),
                exit_code::INVALID,
            )
        })?;
    let mut again = run_failures_again(&mut snapshot).map_err(|error| {
        Refusal::error(
            format!("run `{run}` at step {from_step}: {error}"),
            exit_code::INVALID,
        )
    })?;
    again.extend(children.iter().map(|child| child.id.clone()));
    let entry = JournalEntry {
        sequence: last + 1,
        event: None,
        transitions: Vec::new(),
        actions: serde_json::json!([{"redrive": {
            "from_step": from_step,
            "failed_at": failed_at,
            "again": again,
            "children": children,
        }}]),
        unix_milliseconds,
        children: Vec::new(),
    };
    store
        .commit_batch(&[
            Write::Reopen {
                run: run.to_string(),
                unix_milliseconds,
                holder: holder.clone(),
            },
            Write::Step {
                run: run.to_string(),
                entry,
                snapshot: Box::new(snapshot),
                finish: None,
                child_states: Vec::new(),
            },
        ])
        .map_err(store_failed)?;
    Ok(Redriven {
        from_step,
        was: summary.status,
        failed_at,
        again,
    })
}

/// Why a finished run is not resumed, saying what to do instead: redrive one that failed, fork
/// one that reached its final state; `None` for a run that has not finished.
pub fn not_resumed(run: &str, summary: &crate::store::RunSummary) -> Option<Refusal> {
    let finish = summary.finish.as_ref()?;
    if let Err(refusal) = finished_in_final_state(run, summary) {
        return Some(refusal);
    }
    Some(Refusal::error(
        format!(
            "run `{run}` has finished: it failed (exit code {}), and there is nothing to resume; \
             `protocol-run redrive {run}` drives it again from its last step before the failure",
            finish.exit_code
        ),
        exit_code::USAGE,
    ))
}

/// A run that reached a final state is finished: it is forked, not redriven.
fn finished_in_final_state(run: &str, summary: &crate::store::RunSummary) -> Result<(), Refusal> {
    let Some(finish) = &summary.finish else {
        return Ok(());
    };
    let Some(state) = &finish.final_state else {
        return Ok(());
    };
    Err(Refusal::error(
        format!(
            "run `{run}` has finished in its final state `{state}` (exit code {}): a finished run \
             is not resumed nor redriven; `protocol-run fork {run} --at STEP` starts a new run from \
             one of its steps (`protocol-run status {run}` shows them)",
            finish.exit_code
        ),
        exit_code::USAGE,
    ))
}

/// The last step before the failure of a failed run whose last step is `last`: the steps from
/// the failure on (the failing one, and those that only recorded effects ending after it) all
/// hold the run's end; an engine error ends a run without a step, after its last.
fn before_the_failure(store: &dyn Store, run: &str, last: u64) -> Result<u64, Refusal> {
    let mut step = last;
    loop {
        let stored = store
            .snapshot_at(run, step)
            .map_err(|error| Refusal::error(error, exit_code::IO))?;
        let ended = stored.is_none_or(|stored| stored.snapshot.outcome.is_some());
        if !ended {
            return Ok(step);
        }
        if step == 0 {
            return Err(Refusal::error(
                format!(
                    "run `{run}` failed at its start (step 0): there is no step before the \
                     failure to go on from; run the protocol again"
                ),
                exit_code::USAGE,
            ));
        }
        step -= 1;
    }
}

/// Makes what failed at `snapshot`'s step run again: each effect that was running starts again
/// as a new attempt (a new invocation, so a new idempotency key, and its whole retry plan),
/// whatever its `on_interrupt`; each map's items that did not end `ok` run again. The ids of
/// what runs again.
fn run_failures_again(snapshot: &mut Snapshot) -> Result<Vec<String>, String> {
    let mut again = Vec::new();
    for effect in &mut snapshot.effects {
        let mut request: EffectRequest =
            serde_json::from_value(effect.request.clone()).map_err(|error| {
                format!(
                    "the request of effect `{}` is unreadable: {error}",
                    effect.action
                )
            })?;
        request.on_interrupt = InterruptPolicy::Retry;
        if let EffectKind::Process(process) = &mut request.kind {
            // Given again when it starts, from its new invocation.
            process.idempotency = None;
        }
        effect.request = serde_json::to_value(&request).map_err(|error| error.to_string())?;
        effect.attempt = 1;
        effect.retriers.clear();
        again.push(effect.action.clone());
    }
    // Their retry plans start over.
    snapshot
        .retries
        .retain(|counter| !again.contains(&counter.action));
    for map in &mut snapshot.maps {
        let (redriven, items) = crate::runtime::run::map_resume::rerun_failed_items(map)
            .map_err(|error| format!("a map is unreadable: {error}"))?;
        *map = redriven;
        again.extend(items);
    }
    Ok(again)
}

/// Whether `entry` is a redrive's step (its state is an earlier step's, made to run again).
pub fn is_redrive(entry: &JournalEntry) -> bool {
    redrive_actions(entry).next().is_some()
}

/// The `redrive` record of each of `entry`'s actions.
fn redrive_actions(entry: &JournalEntry) -> impl Iterator<Item = &serde_json::Value> {
    entry
        .actions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|action| action.get("redrive"))
}

/// The children a redrive's step (`entry`) starts again; none for any other step.
pub fn children_again(entry: &JournalEntry) -> Vec<ChildAgain> {
    redrive_actions(entry)
        .filter_map(|redrive| redrive.get("children"))
        .filter_map(|children| serde_json::from_value::<Vec<ChildAgain>>(children.clone()).ok())
        .flatten()
        .collect()
}

/// The invokes' children running at step `from_step` of a run that failed after it: the run's
/// end ended them, and their rows keep their latest state only, which may be past that step.
/// Each is taken out of the step's state and starts again from its beginning with the inputs it
/// had, as a failed child does. A map's child items running then are refused (not yet), and so
/// is a state holding secrets (the inputs go into the journal).
fn running_children(
    store: &dyn Store,
    run: &str,
    from_step: u64,
    stored: &mut crate::store::StoredSnapshot,
) -> Result<Vec<ChildAgain>, Refusal> {
    if stored.snapshot.children.is_empty() {
        return Ok(Vec::new());
    }
    let refused = |why: String| {
        Refusal::error(
            format!(
                "run `{run}` cannot be redriven from step {from_step}: {why}; run the protocol again"
            ),
            exit_code::USAGE,
        )
    };
    let items: Vec<&str> = stored
        .snapshot
        .children
        .iter()
        .map(|child| child.id.as_str())
        .filter(|id| id.contains('['))
        .collect();
    if !items.is_empty() {
        return Err(refused(format!(
            "a map's child protocols were running then ({}), and a redrive does not take them \
             back yet",
            items.join(", ")
        )));
    }
    if !stored.secrets.is_empty() {
        return Err(refused(format!(
            "child protocols were running then, and the state their inputs are taken from holds \
             secrets ({}), which a redrive does not take back yet",
            stored.secrets.join(", ")
        )));
    }
    let failed = |error: StoreError| Refusal::error(error, exit_code::IO);
    let mut children = Vec::new();
    for child in std::mem::take(&mut stored.snapshot.children) {
        // Its own row keeps its last state, with the invocations it numbered.
        let first_invocation = store
            .latest_snapshot(&format!("{run}/{}", child.id))
            .map_err(failed)?
            .map_or(0, |state| state.snapshot.invocations);
        children.push(ChildAgain {
            id: child.id,
            inputs: child.inputs,
            first_invocation,
        });
    }
    Ok(children)
}

/// The invokes' children that failed by step `from_step` and whose failure the run had not
/// taken by then (no `done.invoke.<id>` or `error.invoke.<id>` after their end, nor a new
/// start): each starts again from its beginning, with the inputs it had (its state in the
/// step before its end). A map's items (`check[3]`) are the map's own (`run_failures_again`).
fn failed_children(
    store: &dyn Store,
    run: &str,
    from_step: u64,
) -> Result<Vec<ChildAgain>, Refusal> {
    let failed = |error: StoreError| Refusal::error(error, exit_code::IO);
    // Each failed child by id, with the step that recorded its end.
    let mut ended: Vec<(String, u64)> = Vec::new();
    for entry in store.journal(run).map_err(failed)? {
        if entry.sequence > from_step {
            break;
        }
        if let Some(event) = &entry.event {
            ended.retain(|(id, _)| {
                event.name != format!("done.invoke.{id}")
                    && event.name != format!("error.invoke.{id}")
            });
        }
        for change in &entry.children {
            match change {
                ChildChange::Started { path, .. } => ended.retain(|(id, _)| id != path),
                ChildChange::Ended {
                    path,
                    final_state: None,
                    exit_code,
                    ..
                } if *exit_code != 0
                    && *exit_code != ChildChange::CANCELLED_EXIT_CODE
                    && !path.contains(['/', '[']) =>
                {
                    ended.push((path.clone(), entry.sequence));
                }
                _ => {}
            }
        }
    }
    let mut children = Vec::new();
    for (id, end) in ended {
        // Its inputs as its parent's state held them while it ran.
        let before = match end.checked_sub(1) {
            Some(step) => store.snapshot_at(run, step).map_err(failed)?,
            None => None,
        };
        let Some(before) = before else {
            continue;
        };
        if !before.secrets.is_empty() {
            return Err(Refusal::error(
                format!(
                    "run `{run}`: the child protocol `{id}` failed, and the state its inputs \
                     are taken from holds secrets ({}), which a redrive does not take back yet; \
                     run the protocol again",
                    before.secrets.join(", ")
                ),
                exit_code::USAGE,
            ));
        }
        let Some(child) = before.snapshot.children.iter().find(|child| child.id == id) else {
            continue;
        };
        // Its own row keeps its last state, with the invocations it numbered.
        let first_invocation = store
            .latest_snapshot(&format!("{run}/{id}"))
            .map_err(failed)?
            .map_or(0, |state| state.snapshot.invocations);
        children.push(ChildAgain {
            inputs: child.inputs.clone(),
            id,
            first_invocation,
        });
    }
    Ok(children)
}
