//! `status`: what the store knows of one run: its protocol, configuration, context, timers, effects, children and last steps.

use clap::Args;

use super::exit_code;
use super::run_selection::{Latest, RunSelection, StateDirectory, choose_run};
use super::runs::open;
use super::transition_names::TransitionNames;
use crate::base::clock::format_rfc3339;
use crate::store::{RunSummary, Store};

/// `protocol-run status [RUN_ID]`.
#[derive(Debug, Args)]
pub struct StatusArguments {
    #[command(flatten)]
    run: RunSelection,
    /// One JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    state: StateDirectory,
}

/// `protocol-run status [RUN_ID]`: the run's protocol, configuration, context, pending timers,
/// running effects and last events (the latest run when no id is given).
pub fn status(arguments: &StatusArguments) -> u8 {
    let run_id = match choose_run(
        &arguments.state,
        &arguments.run,
        Latest::Any,
        !arguments.json,
    ) {
        Ok(id) => id,
        Err(code) => return code,
    };
    let store = match open(&arguments.state) {
        Ok(store) => store,
        Err(code) => return code,
    };
    match describe(&*store, &run_id) {
        Ok(description) => {
            if arguments.json {
                println!("{description}");
            } else {
                print_human(&description);
            }
            0
        }
        Err((message, code)) => {
            eprintln!("error: {message}");
            code
        }
    }
}

/// The run as one JSON object.
fn describe(store: &dyn Store, run_id: &str) -> Result<serde_json::Value, (String, u8)> {
    let io = |error: crate::store::StoreError| (error.to_string(), exit_code::IO);
    let record = store.run(run_id).map_err(io)?.ok_or_else(|| {
        (
            format!("no run `{run_id}` in {}", store.location()),
            exit_code::NO_INPUT_FILE,
        )
    })?;
    let snapshot = store.latest_snapshot(run_id).map_err(io)?;
    let journal = store.journal_tail(run_id, 5).map_err(io)?;
    let inbox = store.recent_inbox(run_id, 10).map_err(io)?;
    let summary: &RunSummary = &record.summary;
    let names = TransitionNames::of_recorded(store, &record);
    let snapshot_json = snapshot.as_ref().map(|stored| {
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
    });
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
        "last_events": journal.iter().map(|entry| serde_json::json!({
            "step": entry.sequence,
            "at": format_rfc3339(entry.unix_milliseconds),
            "event": entry.event.as_ref().map(|event| event.name.as_str()),
            "transitions": entry.transitions.iter().map(|pointer| names.name(pointer)).collect::<Vec<_>>(),
            "transition_pointers": entry.transitions,
            "what": step_kind(entry),
            "failure": entry.event.as_ref().and_then(|event| failure(&event.data)),
        })).collect::<Vec<_>>(),
        // Events other hosts queued for it (`serve` on a shared store), newest first.
        "inbox": inbox.iter().map(inbox_json).collect::<Vec<_>>(),
    }))
}

/// An inbox entry as `status` shows it: what it carried and what became of it.
fn inbox_json(record: &crate::store::InboxRecord) -> serde_json::Value {
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

fn print_human(description: &serde_json::Value) {
    let text = |key: &str| description[key].as_str().unwrap_or_default().to_string();
    println!("run       {}", text("run"));
    println!("protocol  {}", text("protocol"));
    println!("status    {} (started {})", text("status"), text("started"));
    if let Some(origin) = description["forked_from"].as_object() {
        println!(
            "forked    from run {} at step {}",
            origin["run"].as_str().unwrap_or_default(),
            origin["step"]
        );
    }
    if let Some(redrives) = description["redrives"].as_u64().filter(|count| *count > 0) {
        let plural = if redrives == 1 { "" } else { "s" };
        println!("redriven  {redrives} time{plural}");
    }
    for entry in description["inbox"].as_array().into_iter().flatten() {
        let state = entry["state"].as_str().unwrap_or_default();
        let what = match state {
            "applied" => format!(
                "applied at step {}: {}",
                entry["step"],
                entry["outcome"].as_str().unwrap_or_default()
            ),
            "set_aside" => entry["reason"].as_str().unwrap_or_default().to_string(),
            _ => format!(
                "waiting for the run's holder (taken {} times)",
                entry["tries"]
            ),
        };
        println!(
            "inbox     {} `{}`: {what}",
            entry["entry"],
            entry["event"].as_str().unwrap_or_default()
        );
    }
    println!("inputs    {}", description["inputs"]);
    let mut narrowing = description["grants"].clone();
    if let Some(recorded) = narrowing.as_object_mut() {
        // The grants the run started with, resolved; the rest is the operator's narrowing.
        if let Some(resolved) = recorded.remove("resolved") {
            println!("grants    {}", resolved.as_str().unwrap_or_default());
        }
        if !recorded.is_empty() {
            println!("narrowing {narrowing} (the operator's, applied on resume)");
        }
    }
    let state = &description["state"];
    if !state.is_null() {
        println!(
            "step      {} (committed {})",
            state["step"],
            state["committed"].as_str().unwrap_or_default()
        );
        println!("states    {}", state["configuration"]);
        println!("context   {}", state["context"]);
        for timer in state["timers"].as_array().into_iter().flatten() {
            println!(
                "timer     {} due {}{}",
                timer["event"].as_str().unwrap_or_default(),
                timer["due"].as_str().unwrap_or_default(),
                if timer["deadline"] == true {
                    " (deadline)"
                } else {
                    ""
                }
            );
        }
        for effect in state["running_effects"].as_array().into_iter().flatten() {
            println!("running   {}", effect.as_str().unwrap_or_default());
        }
        print_children(&state["children"], "");
    }
    if !description["finish"].is_null() {
        println!("finished  {}", description["finish"]);
    }
    for entry in description["last_events"].as_array().into_iter().flatten() {
        let transitions: Vec<&str> = entry["transitions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect();
        println!(
            "step {:<4} {} {}{}{}",
            entry["step"],
            entry["at"].as_str().unwrap_or_default(),
            entry["event"]
                .as_str()
                .or(entry["what"].as_str())
                .unwrap_or_default(),
            if transitions.is_empty() { "" } else { ": " },
            transitions.join("; ")
        );
        let failure = &entry["failure"];
        if !failure.is_null() {
            println!(
                "          {}",
                failure["message"].as_str().unwrap_or("failed")
            );
            super::logs::print_stderr_tail(
                failure["stderr"].as_str().unwrap_or_default(),
                "          ",
            );
        }
    }
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

/// One line per child protocol, its path (`kid/grandkid`) and its states.
fn print_children(children: &serde_json::Value, above: &str) {
    for child in children.as_array().into_iter().flatten() {
        let path = format!("{above}{}", child["id"].as_str().unwrap_or_default());
        println!(
            "child     {path}: {} (step {})",
            child["configuration"], child["step"]
        );
        print_children(&child["children"], &format!("{path}/"));
    }
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
