//! Child protocols' rows as every store keeps them: each child's state encoded for its own row (`<run>/<path>`), and the run above a child.

use super::Codec;
use crate::base::durable::ChildState;
use crate::store::StoreError;

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

/// The run a child at `path` below `run` belongs to: `run` itself, or the child above it.
pub(in crate::store) fn parent_of(run: &str, path: &str) -> String {
    match path.rsplit_once('/') {
        Some((above, _)) => format!("{run}/{above}"),
        None => run.to_string(),
    }
}
