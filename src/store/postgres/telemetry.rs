//! A batch's telemetry parts, one a run, inserted in one statement with the batch's other rows (no round trip per run).

use std::collections::HashMap;

use foldhash::fast::RandomState;
use tokio_postgres::GenericClient;

use super::session::Session;
use crate::store::StoreError;

/// The telemetry a batch appends, column by column: each run's lines of the batch joined in
/// their order into one part, numbered after the run's last (two rows of a run in one statement
/// would both read the same last part).
#[derive(Default)]
pub(super) struct TelemetryRows {
    run: Vec<String>,
    lines: Vec<String>,
    /// Where each run's part is in the columns.
    index: HashMap<String, usize, RandomState>,
}

impl TelemetryRows {
    pub(super) fn push(&mut self, run: &str, lines: &str) {
        match self.index.get(run) {
            Some(index) => self.lines[*index].push_str(lines),
            None => {
                self.index.insert(run.to_string(), self.run.len());
                self.run.push(run.to_string());
                self.lines.push(lines.to_string());
            }
        }
    }
}

impl<C: GenericClient + Sync> Session<'_, C> {
    /// Appends every run's part of `rows`, each after the run's last.
    pub(super) fn insert_telemetry(&self, rows: &TelemetryRows) -> Result<(), StoreError> {
        match rows.run.len() {
            0 => Ok(()),
            1 => self
                .execute(
                    &|| format!("append to the telemetry of run `{}`", rows.run[0]),
                    crate::store::codec::INSERT_TELEMETRY,
                    &[&rows.run[0], &rows.lines[0]],
                )
                .map(drop),
            count => self
                .execute(
                    &|| format!("append to the telemetry of {count} runs"),
                    "INSERT INTO telemetry (run_id, part, lines) SELECT parts.run_id, (SELECT \
                     COALESCE(MAX(part) + 1, 0) FROM telemetry WHERE telemetry.run_id = \
                     parts.run_id), parts.lines FROM unnest($1::text[], $2::text[]) AS parts \
                     (run_id, lines)",
                    &[&rows.run, &rows.lines],
                )
                .map(drop),
        }
    }
}
