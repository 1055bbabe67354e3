//! Child protocols' rows: written from their parent's steps (started, stepped, ended), stopped and resumed with it, and read through the snapshot of the run that records them.

use rusqlite::{Connection, OptionalExtension};

use super::statements::CachedStatements;
use super::{Context, SqliteStore};
use crate::base::durable::ChildChange;
use crate::base::snapshot::Snapshot;
use crate::store::codec::children::{ChildRowWrite, EncodedChildState, child_in};
use crate::store::{JournalEntry, RunStatus, Store, StoreError, StoredSnapshot};

/// How deep children's rows are followed when a snapshot is read: a run tree is finite (a
/// protocol cannot invoke itself), and a damaged store must not recurse without end.
const MAX_CHILD_DEPTH: usize = 64;

impl Context {
    /// Writes each child's state to its row's snapshot, replacing the one before; a child with
    /// no row (a run recorded before children had rows) keeps none.
    pub(super) fn insert_child_states(
        &self,
        connection: &Connection,
        states: &[EncodedChildState],
    ) -> Result<(), StoreError> {
        for state in states {
            connection
                .execute_cached(
                    "INSERT INTO snapshots (run_id, step, snapshot, taken_at) SELECT ?1, ?2, ?3, \
                     ?4 WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?1) ON CONFLICT (run_id) DO \
                     UPDATE SET step = excluded.step, snapshot = excluded.snapshot, taken_at = \
                     excluded.taken_at",
                    rusqlite::params![state.id, state.step, state.snapshot, state.taken_at],
                )
                .map_err(self.failed(&format!("keep the state of child run `{}`", state.id)))?;
        }
        Ok(())
    }

    /// Applies a step's child changes to the children's rows (`<run>/<path>`), `run` being the
    /// run that records them.
    pub(super) fn apply_child_changes(
        &self,
        connection: &Connection,
        run: &str,
        entry: &JournalEntry,
    ) -> Result<(), StoreError> {
        if entry.children.is_empty() {
            return Ok(());
        }
        let time = self.integer("a step time", entry.unix_milliseconds)?;
        let failed = self.failed(&format!(
            "record the children of run `{run}` at step {}",
            entry.sequence
        ));
        for write in self.child_row_writes(run, entry)? {
            match write {
                ChildRowWrite::Begin {
                    id,
                    protocol_path,
                    protocol_hash,
                    inputs,
                    parent,
                    replace,
                } => {
                    // A row of that id that is not this run's child is never taken over.
                    let on_conflict = if replace {
                        "DO UPDATE SET protocol_path = excluded.protocol_path, protocol_hash = \
                         excluded.protocol_hash, inputs = excluded.inputs, status = 'running', \
                         started_at = excluded.started_at, updated_at = excluded.updated_at, \
                         last_step = NULL, last_step_at = NULL, final_state = NULL, exit_code = \
                         NULL, output = NULL, finished_at = NULL WHERE runs.origin = 'child' AND \
                         runs.root = excluded.root"
                    } else {
                        "DO NOTHING"
                    };
                    let written = connection
                        .execute_cached(
                            &format!(
                                "INSERT INTO runs (id, protocol_path, protocol_hash, inputs, \
                                 status, started_at, updated_at, origin, parent, root) VALUES \
                                 (?1, ?2, ?3, ?4, 'running', ?5, ?5, 'child', ?6, ?7) ON \
                                 CONFLICT (id) {on_conflict}"
                            ),
                            rusqlite::params![
                                id,
                                protocol_path,
                                protocol_hash,
                                inputs,
                                time,
                                parent,
                                run
                            ],
                        )
                        .map_err(&failed)?;
                    if replace && written == 0 {
                        return Err(StoreError::RunExists {
                            database: self.location(),
                            run: id,
                        });
                    }
                }
                ChildRowWrite::Stepped { id, step } => {
                    connection
                        .execute_cached(
                            "UPDATE runs SET status = 'running', last_step = ?1, last_step_at = \
                             ?2, updated_at = ?2 WHERE id = ?3 AND root = ?4 AND status <> \
                             'finished'",
                            rusqlite::params![step, time, id, run],
                        )
                        .map_err(&failed)?;
                }
                ChildRowWrite::Ended {
                    id,
                    final_state,
                    exit_code,
                    output,
                    below,
                } => {
                    connection
                        .execute_cached(
                            "UPDATE runs SET status = 'finished', final_state = ?1, exit_code = \
                             ?2, output = ?3, finished_at = ?4, updated_at = ?4 WHERE id = ?5 \
                             AND root = ?6 AND status <> 'finished'",
                            rusqlite::params![final_state, exit_code, output, time, id, run],
                        )
                        .map_err(&failed)?;
                    // Its own children ended with it (a cancelled child's never said so).
                    connection
                        .execute_cached(
                            "UPDATE runs SET status = 'finished', exit_code = ?1, output = \
                             'null', finished_at = ?2, updated_at = ?2 WHERE root = ?3 AND \
                             substr(id, 1, length(?4)) = ?4 AND status <> 'finished'",
                            rusqlite::params![ChildChange::CANCELLED_EXIT_CODE, time, run, below],
                        )
                        .map_err(&failed)?;
                }
            }
        }
        Ok(())
    }

    /// The run that records children ended: the children it left running ended with it.
    pub(super) fn end_children(
        &self,
        connection: &Connection,
        run: &str,
        unix_milliseconds: u64,
    ) -> Result<(), StoreError> {
        let time = self.integer("a finish time", unix_milliseconds)?;
        connection
            .execute_cached(
                "UPDATE runs SET status = 'finished', exit_code = ?1, output = 'null', \
                 finished_at = ?2, updated_at = ?2 WHERE root = ?3 AND status <> 'finished'",
                rusqlite::params![ChildChange::CANCELLED_EXIT_CODE, time, run],
            )
            .map_err(self.failed(&format!("end the children of run `{run}`")))?;
        Ok(())
    }

    /// The run that records children stopped or was resumed: its live children did too.
    pub(super) fn children_follow(
        &self,
        connection: &Connection,
        run: &str,
        status: RunStatus,
        time: i64,
    ) -> Result<(), StoreError> {
        let from = match status {
            RunStatus::Stopped => RunStatus::Running,
            RunStatus::Running => RunStatus::Stopped,
            RunStatus::Finished => return Ok(()),
        };
        connection
            .execute_cached(
                "UPDATE runs SET status = ?1, updated_at = ?2 WHERE root = ?3 AND status = ?4",
                rusqlite::params![status.as_str(), time, run, from.as_str()],
            )
            .map_err(self.failed(&format!(
                "mark the children of run `{run}` {}",
                status.as_str()
            )))?;
        Ok(())
    }
}

impl SqliteStore {
    /// Puts back in `snapshot` (of the run `run`) the state of each child it names without one,
    /// from the child's own row, its own children's too; their secrets' labels join `secrets`.
    /// A child whose row holds no state is left without one (a resume then says so).
    pub(super) fn fill_child_states(
        &self,
        run: &str,
        snapshot: &mut Snapshot,
        secrets: &mut Vec<String>,
    ) -> Result<(), StoreError> {
        self.fill_below(run, snapshot, secrets, 0)
    }

    fn fill_below(
        &self,
        run: &str,
        snapshot: &mut Snapshot,
        secrets: &mut Vec<String>,
        depth: usize,
    ) -> Result<(), StoreError> {
        if depth == MAX_CHILD_DEPTH {
            return Ok(());
        }
        for child in snapshot
            .children
            .iter_mut()
            .filter(|child| child.snapshot.is_none())
        {
            let id = format!("{run}/{}", child.id);
            let row: Option<String> = self
                .connection
                .query_row_cached(
                    "SELECT snapshot FROM snapshots WHERE run_id = ?1",
                    [&id],
                    |row| row.get(0),
                )
                .optional()
                .map_err(
                    self.context
                        .failed(&format!("read the state of child run `{id}`")),
                )?;
            let Some(text) = row else {
                continue;
            };
            let (mut state, labels) = self.context.decode_snapshot(&id, &text)?;
            for label in labels {
                if !secrets.contains(&label) {
                    secrets.push(label);
                }
            }
            self.fill_below(&id, &mut state, secrets, depth + 1)?;
            child.snapshot = Some(Box::new(state));
        }
        Ok(())
    }

    /// A child's state as the latest snapshot of the run that records it holds it; `None` when
    /// `run` is no child, or the child is no longer in that snapshot (it ended).
    pub(super) fn child_snapshot(&self, run: &str) -> Result<Option<StoredSnapshot>, StoreError> {
        let root: Option<Option<String>> = self
            .connection
            .query_row_cached("SELECT root FROM runs WHERE id = ?1", [run], |row| {
                row.get(0)
            })
            .optional()
            .map_err(self.context.failed(&format!("read run `{run}`")))?;
        let Some(root) = root.flatten() else {
            return Ok(None);
        };
        let Some(path) = run
            .strip_prefix(root.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
        else {
            return Ok(None);
        };
        let Some(recording) = self.latest_snapshot(&root)? else {
            return Ok(None);
        };
        Ok(child_in(recording, path))
    }
}
