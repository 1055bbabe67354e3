//! Reading a run's state after a step back from SQLite: the nearest full snapshot at or before it and the deltas after it (`codec::states`).

use rusqlite::OptionalExtension;

use super::SqliteStore;
use super::statements::CachedStatements;
use crate::store::{StoreError, StoredSnapshot};

impl SqliteStore {
    /// `Store::snapshot_at`: rebuilt from the nearest full snapshot at or before the step and
    /// the deltas after it.
    pub(super) fn rebuild_at(
        &self,
        run: &str,
        step: u64,
    ) -> Result<Option<StoredSnapshot>, StoreError> {
        let step = self.context.integer("a step number", step)?;
        self.rebuild(run, Some(step))
    }

    /// The state after step `up_to` (`None`: the run's last step), without its children's.
    pub(super) fn rebuild(
        &self,
        run: &str,
        up_to: Option<i64>,
    ) -> Result<Option<StoredSnapshot>, StoreError> {
        let failed = self
            .context
            .failed(&format!("read the snapshot of run `{run}`"));
        let last = up_to.unwrap_or(i64::MAX);
        let full: Option<(i64, String, i64)> = self
            .connection
            .query_row_cached(
                "SELECT step, snapshot, recorded_at FROM journal WHERE run_id = ?1 AND step <= ?2 \
                 AND snapshot IS NOT NULL ORDER BY step DESC LIMIT 1",
                rusqlite::params![run, last],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(&failed)?;
        let Some((full_step, text, taken_at)) = full else {
            return self.kept_apart(run, up_to);
        };
        let mut read = self
            .connection
            .prepare_cached(
                "SELECT step, snapshot_delta, recorded_at FROM journal WHERE run_id = ?1 \
                 AND step > ?2 AND step <= ?3 ORDER BY step",
            )
            .map_err(&failed)?;
        let rows = read
            .query_map(rusqlite::params![run, full_step, last], |row| {
                Ok((row.get::<_, i64>(0)?, row.get(1)?, row.get::<_, i64>(2)?))
            })
            .map_err(&failed)?;
        let mut deltas = Vec::new();
        let (mut sequence, mut time) = (full_step, taken_at);
        for row in rows {
            let (step, delta, recorded_at) = row.map_err(&failed)?;
            deltas.push((step, delta));
            (sequence, time) = (step, recorded_at);
        }
        if up_to.is_some_and(|up_to| up_to != sequence) {
            return Ok(None);
        }
        let (snapshot, secrets) = self
            .context
            .rebuild_state(run, (full_step, &text), &deltas)?;
        Ok(Some(StoredSnapshot {
            sequence: sequence as u64,
            unix_milliseconds: time as u64,
            snapshot,
            secrets,
        }))
    }

    /// A state the journal does not keep: a child's (its own row in `snapshots`, which keeps its
    /// latest), or the latest of a run recorded before states were kept per step.
    fn kept_apart(
        &self,
        run: &str,
        up_to: Option<i64>,
    ) -> Result<Option<StoredSnapshot>, StoreError> {
        let row: Option<(i64, String, i64)> = self
            .connection
            .query_row_cached(
                "SELECT step, snapshot, taken_at FROM snapshots WHERE run_id = ?1",
                [run],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(
                self.context
                    .failed(&format!("read the snapshot of run `{run}`")),
            )?;
        let not_kept = |step: i64| StoreError::StateNotKept {
            database: self.context.location(),
            run: run.to_string(),
            step: step as u64,
        };
        let Some((step, text, taken_at)) = row else {
            return match up_to {
                Some(up_to) if self.has_step(run, up_to)? => Err(not_kept(up_to)),
                _ => Ok(None),
            };
        };
        match up_to {
            Some(up_to) if up_to != step && self.has_step(run, up_to)? => {
                return Err(not_kept(up_to));
            }
            Some(up_to) if up_to != step => return Ok(None),
            _ => {}
        }
        let (snapshot, secrets) = self.context.decode_snapshot(run, &text)?;
        Ok(Some(StoredSnapshot {
            sequence: step as u64,
            unix_milliseconds: taken_at as u64,
            snapshot,
            secrets,
        }))
    }

    /// Whether the journal has step `step` of `run`.
    fn has_step(&self, run: &str, step: i64) -> Result<bool, StoreError> {
        self.connection
            .query_row_cached(
                "SELECT 1 FROM journal WHERE run_id = ?1 AND step = ?2",
                rusqlite::params![run, step],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(
                self.context
                    .failed(&format!("read the journal of run `{run}`")),
            )
    }
}
