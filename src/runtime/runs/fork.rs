//! Forking a run: a new run that starts from the state after a journaled step of another (its context changed where asked), recorded as forked from it, then driven as a resumed run, so that effects from there on run again.

use crate::base::exit_code;
use crate::runtime::runs::start::{Refusal, recorded_root};
use crate::store::{ForkedFrom, JournalEntry, NewRun, RunOrigin, Store};

/// What to fork: `source`'s state after `step`, as the new run `run_id`, with each
/// `context_set` variable set to its value.
pub struct Fork<'a> {
    pub source: &'a str,
    pub step: u64,
    pub run_id: &'a str,
    pub context_set: &'a [(String, serde_json::Value)],
    pub unix_milliseconds: u64,
}

/// Records the fork: the new run (the source's protocol text, inputs and grants, its origin
/// `forked_from`) and its first step, the source's state after `step`. The caller drives it
/// then as it resumes a run. Refused, saying why, for a run or step the store does not have, a
/// child's run, a step that ended the run, a state with child protocols or secrets in it (not
/// yet forked), and a context variable the state does not have.
pub fn record(store: &mut dyn Store, fork: &Fork) -> Result<(), Refusal> {
    let failed = |error: crate::store::StoreError| Refusal::error(error, exit_code::IO);
    let record = recorded_root(store, fork.source, "fork")?;
    let Some(stored) = store.snapshot_at(fork.source, fork.step).map_err(failed)? else {
        return Err(Refusal::error(
            format!(
                "run `{}` has no step {}{}; `protocol-run status {}` shows its steps",
                fork.source,
                fork.step,
                record
                    .summary
                    .last_sequence
                    .map(|last| format!(" (its last is {last})"))
                    .unwrap_or_default(),
                fork.source
            ),
            exit_code::USAGE,
        ));
    };
    let mut snapshot = stored.snapshot;
    let not_yet = |what: String| {
        Err(Refusal::error(
            format!(
                "run `{}` at step {}: {what}; fork at another step",
                fork.source, fork.step
            ),
            exit_code::USAGE,
        ))
    };
    if snapshot.outcome.is_some() {
        return not_yet("that step ended the run".to_string());
    }
    if !snapshot.children.is_empty() {
        let names: Vec<&str> = snapshot
            .children
            .iter()
            .map(|child| child.id.as_str())
            .collect();
        return not_yet(format!(
            "child protocols were running ({}), and a fork does not take children along yet",
            names.join(", ")
        ));
    }
    if !stored.secrets.is_empty() {
        return not_yet(format!(
            "its state holds secrets ({}), which a fork does not take along yet",
            stored.secrets.join(", ")
        ));
    }
    let unknown: Vec<&str> = fork
        .context_set
        .iter()
        .filter(|(name, _)| !snapshot.context.contains_key(name))
        .map(|(name, _)| name.as_str())
        .collect();
    if !unknown.is_empty() {
        return Err(Refusal::error(
            format!(
                "--context-set: the state of run `{}` has no variable {} (it has: {})",
                fork.source,
                unknown.join(", "),
                snapshot
                    .context
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            exit_code::USAGE,
        ));
    }
    for (name, value) in fork.context_set {
        snapshot.context.insert(name.clone(), value.clone());
    }
    let origin = ForkedFrom {
        run: fork.source.to_string(),
        step: fork.step,
    };
    store
        .create_run(&NewRun {
            id: fork.run_id.to_string(),
            protocol_path: record.summary.protocol_path,
            protocol_hash: record.summary.protocol_hash,
            protocol_text: record.protocol_text,
            // Its source's, kept already under the hashes it records.
            read_texts: Vec::new(),
            inputs: record.inputs,
            started_unix_milliseconds: fork.unix_milliseconds,
            grants: record.grants,
            origin: RunOrigin::Run,
            holder: None,
            forked_from: Some(origin.clone()),
        })
        .map_err(failed)?;
    let changed: serde_json::Map<String, serde_json::Value> = fork
        .context_set
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let first = JournalEntry {
        sequence: fork.step,
        event: None,
        transitions: Vec::new(),
        actions: serde_json::json!([{"forked_from": origin, "context_set": changed}]),
        unix_milliseconds: fork.unix_milliseconds,
        children: Vec::new(),
    };
    store
        .commit_step(fork.run_id, &first, &snapshot, None)
        .map_err(failed)
}
