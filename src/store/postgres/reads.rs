//! Reading from PostgreSQL: runs and their summaries, the journal, and the state after any step rebuilt from its nearest full snapshot and the deltas after it.

use tokio_postgres::{GenericClient, Row};

use super::session::Session;
use crate::base::snapshot::Snapshot;
use crate::store::codec::children::child_in;
use crate::store::codec::{
    JOURNAL_COLUMNS, PROTOCOL_TEXT, RUN_COLUMNS, RawEntry, RawRun, SELECT_TELEMETRY,
};
use crate::store::{JournalEntry, RunCursor, RunRecord, RunSummary, StoreError, StoredSnapshot};

/// How deep children's rows are followed when a snapshot is read: a run tree is finite (a
/// protocol cannot invoke itself), and a damaged store must not recurse without end.
const MAX_CHILD_DEPTH: usize = 64;

impl<C: GenericClient + Sync> Session<'_, C> {
    /// A run's row read by `RUN_COLUMNS`, as a summary.
    fn summary(&self, row: &Row) -> Result<RunSummary, StoreError> {
        let id: String = self.column(row, 0, "")?;
        let column = |index| self.column::<Option<i64>>(row, index, &id);
        let text = |index| self.column::<Option<String>>(row, index, &id);
        let raw = RawRun {
            protocol_path: self.column(row, 1, &id)?,
            protocol_hash: self.column(row, 2, &id)?,
            status: self.column(row, 3, &id)?,
            started_at: self.column(row, 4, &id)?,
            last_step: column(5)?,
            last_step_at: column(6)?,
            final_state: text(7)?,
            exit_code: column(8)?,
            output: text(9)?,
            finished_at: column(10)?,
            origin: text(11)?,
            holder: text(12)?,
            parent: text(13)?,
            forked_from: text(14)?,
            redrives: self.column(row, 15, &id)?,
            id: id.clone(),
        };
        self.codec.summary(raw)
    }

    fn summaries(
        &self,
        sql: &str,
        parameters: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.query(&|| "list runs".to_string(), sql, parameters)?
            .iter()
            .map(|row| self.summary(row))
            .collect()
    }

    /// `Store::telemetry`.
    pub(super) fn telemetry(&self, run: &str) -> Result<Vec<String>, StoreError> {
        self.query(
            &|| format!("read the telemetry of run `{run}`"),
            SELECT_TELEMETRY,
            &[&run],
        )?
        .iter()
        .map(|row| self.column(row, 0, run))
        .collect()
    }

    pub(super) fn run_summary(&self, run: &str) -> Result<Option<RunSummary>, StoreError> {
        let mut runs = self.summaries(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
            &[&run],
        )?;
        Ok(runs.pop())
    }

    pub(super) fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        let Some(row) = self.query_optional(
            &|| format!("read run `{run}`"),
            &format!(
                "SELECT {RUN_COLUMNS}, {PROTOCOL_TEXT}, inputs, grants FROM runs WHERE id = $1"
            ),
            &[&run],
        )?
        else {
            return Ok(None);
        };
        let inputs: String = self.column(&row, 17, run)?;
        let grants: Option<String> = self.column(&row, 18, run)?;
        Ok(Some(RunRecord {
            summary: self.summary(&row)?,
            protocol_text: self.column(&row, 16, run)?,
            inputs: self.codec.decode(run, "inputs", &inputs)?,
            grants: grants
                .map(|grants| self.codec.decode(run, "grants", &grants))
                .transpose()?,
        }))
    }

    pub(super) fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.summaries(
            &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY started_at DESC, id DESC"),
            &[],
        )
    }

    pub(super) fn unfinished_runs(
        &self,
        protocol_path: &str,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.summaries(
            &format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE protocol_path = $1 AND status <> 'finished' \
                 AND root IS NULL ORDER BY started_at DESC, id DESC LIMIT $2"
            ),
            &[&protocol_path, &count],
        )
    }

    pub(super) fn runs_of_protocols(
        &self,
        paths: &[&str],
        after: Option<&RunCursor>,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        match after {
            Some(after) => {
                let started = self
                    .codec
                    .integer("start time", after.started_unix_milliseconds)?;
                self.summaries(
                    &format!(
                        "SELECT {RUN_COLUMNS} FROM runs WHERE protocol_path = ANY($1) AND \
                         (started_at < $2 OR (started_at = $2 AND id < $3)) \
                         ORDER BY started_at DESC, id DESC LIMIT $4"
                    ),
                    &[&paths, &started, &after.id, &count],
                )
            }
            None => self.summaries(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE protocol_path = ANY($1) \
                     ORDER BY started_at DESC, id DESC LIMIT $2"
                ),
                &[&paths, &count],
            ),
        }
    }

    pub(super) fn directives_before(&self, run: &str, before: u64) -> Result<u64, StoreError> {
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let row = self.query_optional(
            &|| format!("count the directives of run `{run}`"),
            "SELECT COUNT(*) FROM journal, jsonb_array_elements(CASE WHEN \
             jsonb_typeof(journal.actions::jsonb) = 'array' THEN journal.actions::jsonb ELSE \
             '[]'::jsonb END) AS action WHERE journal.run_id = $1 AND journal.step < $2 AND \
             jsonb_typeof(action) = 'object' AND action ? 'directive'",
            &[&run, &before],
        )?;
        let count: i64 = match row {
            Some(row) => self.column(&row, 0, run)?,
            None => 0,
        };
        Ok(count as u64)
    }

    /// The journal of `run` before step `before`: the last `count` entries when `from_end`,
    /// otherwise all of them from the first; in order either way.
    pub(super) fn journal(
        &self,
        run: &str,
        before: i64,
        count: i64,
        from_end: bool,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let order = if from_end { "DESC" } else { "" };
        let rows = self.query(
            &|| format!("read the journal of run `{run}`"),
            &format!(
                "SELECT {JOURNAL_COLUMNS} FROM journal WHERE run_id = $1 AND step < $2 \
                 ORDER BY step {order} LIMIT $3"
            ),
            &[&run, &before, &count],
        )?;
        let mut entries = rows
            .iter()
            .map(|row| {
                let raw = RawEntry {
                    step: self.column(row, 0, run)?,
                    event_name: self.column(row, 1, run)?,
                    event_data: self.column(row, 2, run)?,
                    transitions: self.column(row, 3, run)?,
                    actions: self.column(row, 4, run)?,
                    recorded_at: self.column(row, 5, run)?,
                    children: self.column(row, 6, run)?,
                };
                self.codec.journal_entry(run, raw)
            })
            .collect::<Result<Vec<_>, _>>()?;
        if from_end {
            entries.reverse();
        }
        Ok(entries)
    }

    /// The snapshot after the run's last step with its children's states put back; a child's
    /// own state when `run` is a child.
    pub(super) fn latest_snapshot(&self, run: &str) -> Result<Option<StoredSnapshot>, StoreError> {
        let Some(mut stored) = self.rebuild(run, None)? else {
            return self.child_snapshot(run);
        };
        self.fill_below(run, &mut stored.snapshot, &mut stored.secrets, 0)?;
        Ok(Some(stored))
    }

    /// The state after step `up_to` (`None`: the run's last step), without its children's.
    pub(super) fn rebuild(
        &self,
        run: &str,
        up_to: Option<i64>,
    ) -> Result<Option<StoredSnapshot>, StoreError> {
        let operation = || format!("read the snapshot of run `{run}`");
        let last = up_to.unwrap_or(i64::MAX);
        let Some(full) = self.query_optional(
            &operation,
            "SELECT step, snapshot, recorded_at FROM journal WHERE run_id = $1 AND step <= $2 \
             AND snapshot IS NOT NULL ORDER BY step DESC LIMIT 1",
            &[&run, &last],
        )?
        else {
            return self.kept_apart(run, up_to);
        };
        let full_step: i64 = self.column(&full, 0, run)?;
        let text: String = self.column(&full, 1, run)?;
        let (mut sequence, mut time): (i64, i64) = (full_step, self.column(&full, 2, run)?);
        let mut deltas = Vec::new();
        for row in self.query(
            &operation,
            "SELECT step, snapshot_delta, recorded_at FROM journal WHERE run_id = $1 \
             AND step > $2 AND step <= $3 ORDER BY step",
            &[&run, &full_step, &last],
        )? {
            let step: i64 = self.column(&row, 0, run)?;
            deltas.push((step, self.column::<Option<String>>(&row, 1, run)?));
            (sequence, time) = (step, self.column(&row, 2, run)?);
        }
        if up_to.is_some_and(|up_to| up_to != sequence) {
            return Ok(None);
        }
        let (snapshot, secrets) = self.codec.rebuild_state(run, (full_step, &text), &deltas)?;
        Ok(Some(StoredSnapshot {
            sequence: sequence as u64,
            unix_milliseconds: time as u64,
            snapshot,
            secrets,
        }))
    }

    /// A state the journal does not keep: a child's, in its own row of `snapshots` (its latest).
    fn kept_apart(
        &self,
        run: &str,
        up_to: Option<i64>,
    ) -> Result<Option<StoredSnapshot>, StoreError> {
        let Some(row) = self.query_optional(
            &|| format!("read the snapshot of run `{run}`"),
            "SELECT step, snapshot, taken_at FROM snapshots WHERE run_id = $1",
            &[&run],
        )?
        else {
            return Ok(None);
        };
        let step: i64 = self.column(&row, 0, run)?;
        if up_to.is_some_and(|up_to| up_to != step) {
            return Ok(None);
        }
        let text: String = self.column(&row, 1, run)?;
        let taken_at: i64 = self.column(&row, 2, run)?;
        let (snapshot, secrets) = self.codec.decode_snapshot(run, &text)?;
        Ok(Some(StoredSnapshot {
            sequence: step as u64,
            unix_milliseconds: taken_at as u64,
            snapshot,
            secrets,
        }))
    }

    /// Puts back in `snapshot` (of `run`) the state of each child it names without one, from
    /// the child's own row, its own children's too; their secrets' labels join `secrets`.
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
            let Some(row) = self.query_optional(
                &|| format!("read the state of child run `{id}`"),
                "SELECT snapshot FROM snapshots WHERE run_id = $1",
                &[&id],
            )?
            else {
                continue;
            };
            let text: String = self.column(&row, 0, &id)?;
            let (mut state, labels) = self.codec.decode_snapshot(&id, &text)?;
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
    /// `run` is no child, or the child is no longer in that snapshot.
    fn child_snapshot(&self, run: &str) -> Result<Option<StoredSnapshot>, StoreError> {
        let Some(row) = self.query_optional(
            &|| format!("read run `{run}`"),
            "SELECT root FROM runs WHERE id = $1",
            &[&run],
        )?
        else {
            return Ok(None);
        };
        let Some(root) = self.column::<Option<String>>(&row, 0, run)? else {
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
