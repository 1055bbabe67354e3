//! Child protocols' rows as every store keeps them: each child's state encoded for its own row (`<run>/<path>`), and the run above a child.

use super::Codec;
use crate::base::durable::{ChildChange, ChildState};
use crate::store::{JournalEntry, StoreError, StoredSnapshot};

/// What one of a step's child changes writes to the child's row (`<run>/<path>`, `run` being
/// the run whose steps record it), encoded; each store writes it with its own statements.
pub(in crate::store) enum ChildRowWrite {
    /// A row for a child that started (`replace`: the same invoke started again, so its row
    /// tells of the latest start, if that row is this run's child) or was resumed (made only
    /// where it has none: a run recorded before children had rows).
    Begin {
        id: String,
        protocol_path: String,
        protocol_hash: String,
        inputs: String,
        parent: String,
        replace: bool,
    },
    /// The child took step `step`.
    Stepped { id: String, step: i64 },
    /// The child ended; its own children (ids starting with `below`) ended with it.
    Ended {
        id: String,
        final_state: Option<String>,
        exit_code: i32,
        output: String,
        below: String,
    },
}

/// A child's state encoded for its row (`<run>/<path>`), before the write lock is taken.
pub(in crate::store) struct EncodedChildState {
    pub(in crate::store) id: String,
    pub(in crate::store) step: i64,
    pub(in crate::store) snapshot: String,
    pub(in crate::store) taken_at: i64,
}

impl Codec {
    /// Each child's state as its row keeps it: masked, with its secrets' labels.
    pub(in crate::store) fn encode_child_states(
        &self,
        run: &str,
        states: &[ChildState],
    ) -> Result<Vec<EncodedChildState>, StoreError> {
        states
            .iter()
            .map(|state| {
                let id = format!("{run}/{}", state.path);
                Ok(EncodedChildState {
                    snapshot: self.encode_snapshot(&id, &state.snapshot)?,
                    step: self.integer("a step number", state.sequence)?,
                    taken_at: self.integer("a step time", state.committed_unix_milliseconds)?,
                    id,
                })
            })
            .collect()
    }
}

impl Codec {
    /// What `entry`'s child changes write to the children's rows, in order.
    pub(in crate::store) fn child_row_writes(
        &self,
        run: &str,
        entry: &JournalEntry,
    ) -> Result<Vec<ChildRowWrite>, StoreError> {
        entry
            .children
            .iter()
            .map(|change| {
                let id = format!("{run}/{}", change.path());
                Ok(match change {
                    ChildChange::Started {
                        path,
                        protocol_path,
                        protocol_hash,
                        inputs,
                    }
                    | ChildChange::Resumed {
                        path,
                        protocol_path,
                        protocol_hash,
                        inputs,
                    } => ChildRowWrite::Begin {
                        inputs: self.encode(&id, "inputs", inputs)?,
                        id,
                        protocol_path: protocol_path.clone(),
                        protocol_hash: protocol_hash.clone(),
                        parent: parent_of(run, path),
                        replace: matches!(change, ChildChange::Started { .. }),
                    },
                    ChildChange::Stepped { sequence, .. } => ChildRowWrite::Stepped {
                        step: self.integer("a step number", *sequence)?,
                        id,
                    },
                    ChildChange::Ended {
                        final_state,
                        exit_code,
                        output,
                        ..
                    } => ChildRowWrite::Ended {
                        output: self.encode(&id, "output", output)?,
                        below: format!("{id}/"),
                        id,
                        final_state: final_state.clone(),
                        exit_code: *exit_code,
                    },
                })
            })
            .collect()
    }
}

/// The run a child at `path` below `run` belongs to: `run` itself, or the child above it.
pub(in crate::store) fn parent_of(run: &str, path: &str) -> String {
    match path.rsplit_once('/') {
        Some((above, _)) => format!("{run}/{above}"),
        None => run.to_string(),
    }
}

/// The state of the child at `path` (`a/b`) as `recording` (the latest snapshot of the run that
/// records it) holds it inline, as runs recorded before children had rows of their own did;
/// `None` when it is not there (it ended).
pub(in crate::store) fn child_in(recording: StoredSnapshot, path: &str) -> Option<StoredSnapshot> {
    let mut children = recording.snapshot.children;
    let mut found = None;
    for id in path.split('/') {
        let child = children.into_iter().find(|child| child.id == id)?;
        children = child
            .snapshot
            .as_ref()
            .map(|state| state.children.clone())
            .unwrap_or_default();
        found = Some(child);
    }
    let child = found?;
    Some(StoredSnapshot {
        sequence: child.sequence,
        unix_milliseconds: child.committed_unix_milliseconds,
        snapshot: *child.snapshot?,
        secrets: recording.secrets,
    })
}
