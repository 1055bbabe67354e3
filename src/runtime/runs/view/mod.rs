//! A run as its readers see it, read from the store: `status`, the web inspector and any other front end describe a run, its steps and its state at a step through here.

mod transition_names;

pub use transition_names::TransitionNames;

use crate::base::clock::format_rfc3339;
use crate::runtime::runs::exit_code;
use crate::store::{RunSummary, Store};

/// The run as one JSON object (`status --json`): its record, its latest state, its last
/// `last_steps` steps and its newest inbox entries.
pub fn describe(
    store: &dyn Store,
    run_id: &str,
    last_steps: usize,
) -> Result<serde_json::Value, (String, u8)> {
    let io = |error: crate::store::StoreError| (error.to_string(), exit_code::IO);
    let record = store.run(run_id).map_err(io)?.ok_or_else(|| {
        (
            format!("no run `{run_id}` in {}", store.location()),
            exit_code::NO_INPUT_FILE,
        )
    })?;
    describe_record(store, &record, last_steps).map_err(io)
}

/// `describe` of a run whose record was read already: what is read after it (its state, its
/// steps, its inbox) is at least as new, so a reader that reads the record once sees a status
/// and an end that agree.
pub fn describe_record(
    store: &dyn Store,
    record: &crate::store::RunRecord,
    last_steps: usize,
) -> Result<serde_json::Value, crate::store::StoreError> {
    let run_id = record.summary.id.as_str();
    let snapshot = store.latest_snapshot(run_id)?;
    let journal = store.journal_tail(run_id, last_steps)?;
    let inbox = store.recent_inbox(run_id, 10)?;
    let summary: &RunSummary = &record.summary;
    let names = TransitionNames::of_recorded(store, record);
    let snapshot_json = snapshot.as_ref().map(state_json);
    Ok(serde_json::json!({
        "run": summary.id,
        "protocol": summary.protocol_path,
        "status": summary.status.as_str(),
        "started": format_rfc3339(summary.started_unix_milliseconds),
        // What started it (`run`, `serve`, `mcp`); null for a run recorded before origins were.
        "origin": summary.origin.map(crate::store::RunOrigin::as_str),
        "forked_from": summary.forked_from,
        "redrives": summary.redrives,
        "inputs": record.inputs,
        "grants": record.grants,
        "state": snapshot_json,
        "finish": summary.finish.as_ref().map(|finish| serde_json::json!({
            "state": finish.final_state,
            "exit_code": finish.exit_code,
            "output": finish.output,
        })),
        "last_events": journal.iter().map(|entry| step_json(entry, &names)).collect::<Vec<_>>(),
        // Events other hosts queued for it (`serve` on a shared store), newest first.
        "inbox": inbox.iter().map(inbox_json).collect::<Vec<_>>(),
    }))
}

/// A run's state at one step, as `status` shows its latest: configuration, context (each value
/// readable), timers, running effects and their attempts, running children.
pub fn state_json(stored: &crate::store::StoredSnapshot) -> serde_json::Value {
    serde_json::json!({
        "step": stored.sequence,
        "committed": format_rfc3339(stored.unix_milliseconds),
        "configuration": stored.snapshot.configuration,
        // Readable: a timestamp or duration shows as its text, not its stored tag.
        "context": stored.snapshot.context.iter()
            .map(|(name, value)| (name.clone(), crate::base::value::Value::from_stored_json(value).to_json()))
            .collect::<serde_json::Map<_, _>>(),
        "timers": stored.snapshot.timers.iter().map(|timer| {
            let mut shown = serde_json::json!({
                "event": timer.event,
                "due": format_rfc3339(timer.deadline_unix_milliseconds),
            });
            // A deadline keeps its instant on every resume; say so where it is one.
            if timer.absolute {
                shown["deadline"] = serde_json::Value::Bool(true);
            }
            shown
        }).collect::<Vec<_>>(),
        "running_effects": stored.snapshot.effects.iter().map(|effect| &effect.action).collect::<Vec<_>>(),
        "effect_attempts": stored.snapshot.effects.iter().map(|effect| serde_json::json!({
            "id": effect.action,
            "invocation": effect.invocation,
            "attempt": effect.attempt,
        })).collect::<Vec<_>>(),
        "children": children_json(&stored.snapshot.children),
    })
}

/// One journaled step as `status` lists it: its number, time, event, the transitions it took
/// (named, and by pointer), what a step without an event was, and an effect's failure.
pub fn step_json(entry: &crate::store::JournalEntry, names: &TransitionNames) -> serde_json::Value {
    serde_json::json!({
        "step": entry.sequence,
        "at": format_rfc3339(entry.unix_milliseconds),
        "event": entry.event.as_ref().map(|event| event.name.as_str()),
        "transitions": entry.transitions.iter().map(|pointer| names.name(pointer)).collect::<Vec<_>>(),
        "transition_pointers": entry.transitions,
        "what": step_kind(entry),
        "failure": entry.event.as_ref().and_then(|event| failure(&event.data)),
    })
}

/// An inbox entry as `status` shows it: what it carried and what became of it.
pub fn inbox_json(record: &crate::store::InboxRecord) -> serde_json::Value {
    use crate::store::InboxState;
    let mut shown = serde_json::json!({
        "entry": record.entry,
        "event": record.event,
        "tries": record.tries,
    });
    match &record.state {
        InboxState::Pending => shown["state"] = "waiting".into(),
        InboxState::SetAside => {
            shown["state"] = "set_aside".into();
            shown["reason"] =
                crate::store::inbox::set_aside_reason(record.tries.saturating_sub(1)).into();
        }
        InboxState::Applied { outcome, step, .. } => {
            shown["state"] = "applied".into();
            shown["outcome"] = outcome["outcome"].clone();
            shown["step"] = (*step).into();
        }
    }
    shown
}

/// Why an effect failed, when `data` is a failed outcome's (it has a `message` and the output
/// keys): its message, exit code and the tail of its error output, masked as telemetry keeps it.
fn failure(data: &serde_json::Value) -> Option<serde_json::Value> {
    let message = data.get("message")?.as_str()?;
    let stderr = data.get("stderr")?.as_str()?;
    Some(serde_json::json!({
        "message": message,
        "exit_code": data.get("exit_code"),
        "stderr": crate::base::text::masked_tail(stderr),
    }))
}

/// The running child protocols of a snapshot, as a tree: each with its states, running effects
/// and its own children.
fn children_json(children: &[crate::base::snapshot::ChildSnapshot]) -> serde_json::Value {
    children
        .iter()
        .map(|child| {
            // A child whose state the store did not find is shown by its id and step alone.
            let state = child.snapshot.as_deref();
            serde_json::json!({
                "id": child.id,
                "step": child.sequence,
                "configuration": state.map(|state| &state.configuration),
                "running_effects": state.map(|state| state.effects.iter().map(|effect| &effect.action).collect::<Vec<_>>()),
                "children": state.map_or(serde_json::json!([]), |state| children_json(&state.children)),
            })
        })
        .collect()
}

/// What a step without an event was: the start, a resume, a redrive (and the step it went
/// back to), a child's step, or effects that ended after the run's final state.
fn step_kind(entry: &crate::store::JournalEntry) -> Option<String> {
    if entry.event.is_some() {
        return None;
    }
    let find = |key: &str| {
        entry
            .actions
            .as_array()
            .and_then(|actions| actions.iter().find_map(|action| action.get(key)))
    };
    let has = |key: &str| find(key).is_some();
    Some(if entry.sequence == 0 {
        "(start)".to_string()
    } else if has("resumed") {
        "(resumed)".to_string()
    } else if let Some(redrive) = find("redrive") {
        format!("(redrive from step {})", redrive["from_step"])
    } else if has("child") {
        "(child step)".to_string()
    } else if has("effect_outcome") {
        "(effects ended)".to_string()
    } else {
        "(no event)".to_string()
    })
}
