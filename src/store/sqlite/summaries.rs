//! Reads for a front end that must not load more than it shows: one run's summary without its protocol text and inputs, runs of some protocols a page at a time, and a run's telemetry.

use rusqlite::OptionalExtension;

use super::statements::CachedStatements;
use super::{SqliteStore, read_run};
use crate::store::codec::RUN_COLUMNS;
use crate::store::{RunCursor, RunSummary, StoreError};

impl SqliteStore {
    /// `Store::run_summary`.
    pub(super) fn read_run_summary(&self, run: &str) -> Result<Option<RunSummary>, StoreError> {
        let raw = self
            .connection
            .query_row_cached(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
                [run],
                read_run,
            )
            .optional()
            .map_err(self.context.failed(&format!("read run `{run}`")))?;
        raw.map(|raw| self.context.summary(raw)).transpose()
    }

    /// `Store::runs_of_protocols`.
    pub(super) fn read_runs_of_protocols(
        &self,
        paths: &[&str],
        after: Option<&RunCursor>,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = vec!["?"; paths.len()].join(", ");
        let mut parameters: Vec<rusqlite::types::Value> = paths
            .iter()
            .map(|path| rusqlite::types::Value::Text(path.to_string()))
            .collect();
        let mut condition = format!("protocol_path IN ({placeholders})");
        if let Some(after) = after {
            condition.push_str(" AND (started_at < ? OR (started_at = ? AND id < ?))");
            let started = self
                .context
                .integer("start time", after.started_unix_milliseconds)?;
            parameters.push(rusqlite::types::Value::Integer(started));
            parameters.push(rusqlite::types::Value::Integer(started));
            parameters.push(rusqlite::types::Value::Text(after.id.clone()));
        }
        parameters.push(rusqlite::types::Value::Integer(
            i64::try_from(count).unwrap_or(i64::MAX),
        ));
        let failed = self.context.failed("list runs");
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE {condition} \
                 ORDER BY started_at DESC, id DESC LIMIT ?"
            ))
            .map_err(&failed)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(parameters), read_run)
            .map_err(&failed)?;
        let mut runs = Vec::new();
        for row in rows {
            runs.push(self.context.summary(row.map_err(&failed)?)?);
        }
        Ok(runs)
    }
}

impl SqliteStore {
    /// `Store::directives_before`.
    pub(super) fn count_directives_before(
        &self,
        run: &str,
        before: u64,
    ) -> Result<u64, StoreError> {
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        self.connection
            .query_row_cached(
                "SELECT COUNT(*) FROM journal, json_each(journal.actions) AS action \
                 WHERE journal.run_id = ?1 AND journal.step < ?2 \
                 AND json_type(journal.actions) = 'array' \
                 AND CASE WHEN action.type = 'object' \
                 THEN json_type(action.value, '$.directive') END IS NOT NULL",
                rusqlite::params![run, before],
                |row| row.get::<_, i64>(0),
            )
            .map(|count| count as u64)
            .map_err(
                self.context
                    .failed(&format!("count the directives of run `{run}`")),
            )
    }

    /// `Store::telemetry`.
    pub(super) fn read_telemetry(&self, run: &str) -> Result<Vec<String>, StoreError> {
        let failed = self
            .context
            .failed(&format!("read the telemetry of run `{run}`"));
        let mut statement = self
            .connection
            .prepare_cached(&crate::store::codec::SELECT_TELEMETRY.replace('$', "?"))
            .map_err(&failed)?;
        statement
            .query_map([run], |row| row.get::<_, String>(0))
            .map_err(&failed)?
            .collect::<rusqlite::Result<Vec<String>>>()
            .map_err(&failed)
    }
}
