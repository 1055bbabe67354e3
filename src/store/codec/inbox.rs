//! A run's inbox as both stores keep it: the statements, written once with `$N` parameters (SQLite's copy takes `?N`), and their rows read back.

use super::Codec;
use crate::store::inbox::{EntryKind, InboxEntry, InboxRecord, InboxScope, InboxState, MAX_TRIES};
use crate::store::{StoreError, inbox};

/// Gives the run its next inbox number, under its row lock, with its holder (to wake); no row
/// for an unknown or finished run.
pub(in crate::store) const NEXT_ENTRY: &str = "UPDATE runs SET inbox_next = inbox_next + 1 \
     WHERE id = $1 AND parent IS NULL AND status <> 'finished' RETURNING inbox_next, holder";

/// `$6`: the lease of the host that queued it, woken when it is applied; `$7` its request
/// (`EntryKind`).
pub(in crate::store) const INSERT_ENTRY: &str = "INSERT INTO inbox (run_id, entry, event_name, \
     event_data, queued_at, sender, request) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Counts a try of the waiting entries of the runs a holder holds (`$1`, its encoding) whose
/// `{scope}` column is `$3` (a protocol's path, or one run's id: `InboxScope`), at most `$2` of
/// them, and sets aside those past `MAX_TRIES`. `{lock}` is where PostgreSQL skips the entries
/// another host's take has locked.
const TAKE: &str = "UPDATE inbox SET tries = tries + 1, status = CASE WHEN tries + 1 > {max} \
     THEN 'set_aside' ELSE status END WHERE (run_id, entry) IN (SELECT inbox.run_id, \
     inbox.entry FROM inbox JOIN runs ON runs.id = inbox.run_id WHERE inbox.status = \
     'pending' AND runs.holder = $1 AND runs.{scope} = $3 ORDER BY inbox.run_id, inbox.entry LIMIT $2{lock}) \
     RETURNING run_id, entry, event_name, event_data, tries, status, request";

/// `TAKE` for a store and a scope: `lock` is appended to its subquery.
pub(in crate::store) fn take_statement(lock: &str, scope: InboxScope) -> String {
    TAKE.replace("{max}", &MAX_TRIES.to_string())
        .replace("{lock}", lock)
        .replace("{scope}", scope.column())
}

/// Applies a waiting entry; no row changed when it is not waiting.
pub(in crate::store) const APPLY: &str = "UPDATE inbox SET status = 'applied', step = $3, \
     outcome = $4, output = $5 WHERE run_id = $1 AND entry = $2 AND status = 'pending'";

/// One entry's state (SQLite, in the same file, reads them one at a time; PostgreSQL reads a
/// host's entries in one statement).
pub(in crate::store) const STATE: &str = "SELECT status, outcome, output, step, event_name, tries, \
     request FROM inbox WHERE run_id = $1 AND entry = $2";

/// A run's newest `$2` entries, newest first, their number before `STATE`'s columns.
pub(in crate::store) const RECENT: &str = "SELECT entry, status, outcome, output, step, \
     event_name, tries, request FROM inbox WHERE run_id = $1 ORDER BY entry DESC LIMIT $2";

/// An entry's row as `TAKE` returns it.
pub(in crate::store) struct RawTaken {
    pub(in crate::store) run: String,
    pub(in crate::store) entry: i64,
    pub(in crate::store) event: String,
    pub(in crate::store) data: String,
    pub(in crate::store) tries: i64,
    pub(in crate::store) status: String,
    pub(in crate::store) request: String,
}

/// An entry's state as its row says it.
pub(in crate::store) struct RawState {
    pub(in crate::store) status: String,
    pub(in crate::store) outcome: Option<String>,
    pub(in crate::store) output: Option<String>,
    pub(in crate::store) step: Option<i64>,
    pub(in crate::store) event: String,
    pub(in crate::store) tries: i64,
    pub(in crate::store) request: String,
}

impl Codec {
    /// What a take returned, entries to apply (in arrival order per run) and those set aside.
    pub(in crate::store) fn taken(
        &self,
        rows: Vec<RawTaken>,
    ) -> Result<inbox::TakenInbox, StoreError> {
        let mut taken = inbox::TakenInbox::default();
        for row in rows {
            let entry = InboxEntry {
                data: self.decode(&row.run, "inbox entry's data", &row.data)?,
                entry: row.entry.max(0) as u64,
                kind: EntryKind::parse(&row.request),
                event: row.event,
                tries: u32::try_from(row.tries).unwrap_or(u32::MAX),
                run: row.run,
            };
            match row.status.as_str() {
                "set_aside" => taken.set_aside.push(entry),
                _ => taken.entries.push(entry),
            }
        }
        let order = |entry: &InboxEntry| (entry.run.clone(), entry.entry);
        taken.entries.sort_by_key(order);
        taken.set_aside.sort_by_key(order);
        Ok(taken)
    }

    /// An entry's state as its row says.
    pub(in crate::store) fn inbox_record(
        &self,
        run: &str,
        entry: u64,
        row: RawState,
    ) -> Result<InboxRecord, StoreError> {
        let state = match row.status.as_str() {
            "pending" => InboxState::Pending,
            "set_aside" => InboxState::SetAside,
            _ => InboxState::Applied {
                outcome: match &row.outcome {
                    Some(text) => self.decode(run, "inbox entry's outcome", text)?,
                    None => serde_json::Value::Null,
                },
                output: row.output.unwrap_or_default(),
                step: row.step.map(|step| step.max(0) as u64),
            },
        };
        Ok(InboxRecord {
            run: run.to_string(),
            entry,
            kind: EntryKind::parse(&row.request),
            event: row.event,
            tries: u32::try_from(row.tries).unwrap_or(u32::MAX),
            state,
        })
    }

    /// The refusal of an `ApplyInbox` whose entry is not waiting.
    pub(in crate::store) fn not_waiting(&self, run: &str, entry: u64) -> StoreError {
        StoreError::InboxEntryNotWaiting {
            database: self.location(),
            run: run.to_string(),
            entry,
        }
    }
}

/// `sql` with SQLite's parameters (`?N` for `$N`).
pub(in crate::store) fn for_sqlite(sql: &str) -> String {
    let mut converted = String::with_capacity(sql.len());
    let mut characters = sql.chars().peekable();
    while let Some(character) = characters.next() {
        if character == '$' && characters.peek().is_some_and(char::is_ascii_digit) {
            converted.push('?');
        } else {
            converted.push(character);
        }
    }
    converted
}
