//! What every store writes and reads the same way, whatever its database: rows encoded as JSON text (secrets masked), a run's summary and journal entries decoded, errors that name the database.

pub(super) mod children;
pub(super) mod inbox;
pub(super) mod states;
pub(super) mod steps;

use super::{
    Cause, Finish, Holder, JournalEntry, JournalEvent, RunOrigin, RunStatus, RunSummary,
    StoreError, Unclaimed,
};

/// The key under which a stored snapshot lists the labels of its secret placeholders.
pub(super) const SNAPSHOT_SECRETS: &str = "secrets";

/// A run's summary, in the SQL both stores read (`RawRun`). Its last step and that step's time are its journal's (schema version 7: a
/// running run's step does not write the run's row); a child run, whose steps the journal of
/// the run that records it keeps, has them in its own row.
pub(super) const RUN_COLUMNS: &str = "id, protocol_path, protocol_hash, status, started_at, \
     COALESCE((SELECT step FROM journal WHERE journal.run_id = runs.id ORDER BY step DESC \
     LIMIT 1), last_step), COALESCE((SELECT recorded_at FROM journal WHERE journal.run_id = \
     runs.id ORDER BY step DESC LIMIT 1), last_step_at), final_state, exit_code, output, \
     finished_at, origin, holder, parent, forked_from, redrives";

/// A run's protocol text, in the SQL both stores read: kept once by its hash (a run recorded
/// since texts were kept apart), or in its own row (one recorded before).
pub(super) const PROTOCOL_TEXT: &str = "COALESCE(protocol_text, (SELECT text FROM \
     protocol_texts WHERE protocol_texts.hash = runs.protocol_text_hash))";

pub(super) const JOURNAL_COLUMNS: &str =
    "step, event_name, event_data, transitions, actions, recorded_at, children";

/// A part of a run's telemetry (`Store::append_telemetry`), numbered after the run's last one
/// in the transaction that writes it: one holder writes to a run at a time (its row is locked
/// by the transaction, or the database by SQLite's writer), so no sequence generator is needed.
pub(super) const INSERT_TELEMETRY: &str = "INSERT INTO telemetry (run_id, part, lines) VALUES \
     ($1, (SELECT COALESCE(MAX(part) + 1, 0) FROM telemetry WHERE run_id = $1), $2)";

/// A run's telemetry parts, in order (`Store::telemetry`).
pub(super) const SELECT_TELEMETRY: &str =
    "SELECT lines FROM telemetry WHERE run_id = $1 ORDER BY part";

/// Both stores' statements for the trace a run is exported in (`Store::save_trace`).
pub(super) const UPDATE_TRACE: &str = "UPDATE runs SET trace = $2 WHERE id = $1";
pub(super) const SELECT_TRACE: &str = "SELECT trace FROM runs WHERE id = $1";

/// The query both stores select the runs `Store::prune_runs` deletes with: runs that are not
/// children, in one of `statuses` but never running, ended before the first parameter, oldest
/// first; the caller adds the limit. `None` when no status may be pruned. The statuses are
/// written in as the store's own names, never a caller's text.
pub(super) fn ended_runs(statuses: &[RunStatus]) -> Option<String> {
    let names: Vec<String> = statuses
        .iter()
        .filter(|status| **status != RunStatus::Running)
        .map(|status| format!("'{}'", status.as_str()))
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "SELECT id FROM runs WHERE root IS NULL AND status IN ({}) AND \
             COALESCE(finished_at, updated_at) < $1 ORDER BY COALESCE(finished_at, updated_at), id",
            names.join(", ")
        )
    })
}

/// Encodes and decodes a store's rows; its errors name `database` (a file, or a URL without
/// its password).
pub(super) struct Codec {
    pub(super) database: String,
}

impl Codec {
    pub(super) fn location(&self) -> String {
        self.database.clone()
    }

    pub(super) fn integer(&self, what: &'static str, value: u64) -> Result<i64, StoreError> {
        i64::try_from(value).map_err(|_| StoreError::OutOfRange {
            database: self.location(),
            what,
            value,
        })
    }

    /// `value` as stored: JSON with every secret masked (`crate::base::secrets`). Only the snapshot
    /// is ever read back with its secrets restored (`encode_snapshot`); the rest keeps the
    /// placeholders for good.
    pub(super) fn encode<T: serde::Serialize>(
        &self,
        run: &str,
        what: &'static str,
        value: &T,
    ) -> Result<String, StoreError> {
        let failed = |source| self.encode_failed(run, what, source);
        if !crate::base::secrets::active() {
            return serde_json::to_string(value).map_err(failed);
        }
        let mut json = serde_json::to_value(value).map_err(failed)?;
        crate::base::secrets::mask_json_in_place(&mut json);
        Ok(json.to_string())
    }

    pub(super) fn encode_failed(
        &self,
        run: &str,
        what: &'static str,
        source: serde_json::Error,
    ) -> StoreError {
        StoreError::Encode {
            database: self.location(),
            run: run.to_string(),
            what,
            source,
        }
    }

    pub(super) fn decode<T: serde::de::DeserializeOwned>(
        &self,
        run: &str,
        what: &'static str,
        text: &str,
    ) -> Result<T, StoreError> {
        serde_json::from_str(text).map_err(|source| self.corrupt(run, what, Box::new(source)))
    }

    pub(super) fn corrupt(&self, run: &str, what: &'static str, source: Cause) -> StoreError {
        StoreError::Corrupt {
            database: self.location(),
            run: run.to_string(),
            what,
            source,
        }
    }

    pub(super) fn summary(&self, raw: RawRun) -> Result<RunSummary, StoreError> {
        let status = RunStatus::parse(&raw.status).ok_or_else(|| {
            self.corrupt(
                &raw.id,
                "status",
                format!("`{}` is not a status", raw.status).into(),
            )
        })?;
        let finish = match status {
            RunStatus::Finished => Some(Finish {
                final_state: raw.final_state,
                exit_code: raw.exit_code.unwrap_or_default() as i32,
                output: match &raw.output {
                    Some(text) => self.decode(&raw.id, "output", text)?,
                    None => serde_json::Value::Null,
                },
                unix_milliseconds: raw.finished_at.unwrap_or_default() as u64,
            }),
            _ => None,
        };
        let holder = raw
            .holder
            .map(|holder| self.decode(&raw.id, "holder", &holder))
            .transpose()?;
        let forked_from = raw
            .forked_from
            .map(|origin| self.decode(&raw.id, "fork origin", &origin))
            .transpose()?;
        Ok(RunSummary {
            id: raw.id,
            protocol_path: raw.protocol_path,
            protocol_hash: raw.protocol_hash,
            status,
            started_unix_milliseconds: raw.started_at as u64,
            last_sequence: raw.last_step.map(|step| step as u64),
            last_step_unix_milliseconds: raw.last_step_at.map(|time| time as u64),
            finish,
            // An origin this build does not know reads as none: no front end claims the run.
            origin: raw.origin.as_deref().and_then(RunOrigin::parse),
            holder,
            parent: raw.parent,
            forked_from,
            redrives: raw.redrives.max(0) as u64,
        })
    }

    /// Why a write to `run` changed nothing (or violated a constraint, `cause`), from the run's
    /// status and last step as the database holds them (`None`: no such run): the run is
    /// unknown, finished, or already past `sequence`.
    pub(super) fn refusal(
        &self,
        row: Option<(String, Option<i64>)>,
        run: &str,
        sequence: Option<u64>,
        operation: &str,
        cause: Option<Cause>,
    ) -> StoreError {
        let database = self.location();
        let run = run.to_string();
        match (row, sequence) {
            (None, _) => StoreError::UnknownRun { database, run },
            (Some((status, _)), _) if status == RunStatus::Finished.as_str() => {
                StoreError::RunFinished { database, run }
            }
            (Some((_, Some(last))), Some(sequence)) if last >= 0 && last as u64 >= sequence => {
                StoreError::StaleStep {
                    database,
                    run,
                    sequence,
                    last: last as u64,
                }
            }
            (Some(_), _) => StoreError::Database {
                database,
                operation: operation.to_string(),
                source: cause.unwrap_or_else(|| "the run's row was not updated".into()),
            },
        }
    }

    /// Why a redrive did not reopen `run` (`Store::reopen_run`): there is no such run, or it
    /// has not finished and the store has not claimed it.
    pub(super) fn not_reopened(&self, exists: bool, run: &str, operation: &str) -> StoreError {
        let database = self.location();
        let run = run.to_string();
        if !exists {
            return StoreError::UnknownRun { database, run };
        }
        StoreError::Database {
            database,
            operation: operation.to_string(),
            source: "it has not finished, and this store has not claimed it".into(),
        }
    }

    /// The refusal of a write to `run` by a store that holds it with fencing token `held`, when
    /// the run's row says `current`: another holder claimed it since (`None`: no such run, which
    /// other checks refuse).
    pub(super) fn fenced(
        &self,
        run: &str,
        held: i64,
        current: Option<i64>,
    ) -> Result<(), StoreError> {
        match current {
            Some(current) if current != held => Err(StoreError::Fenced {
                database: self.location(),
                run: run.to_string(),
                held,
                current,
            }),
            _ => Ok(()),
        }
    }

    /// Whether `holder` may claim `run`, from the run's recorded holder and parent (`None`: no
    /// such run, which is claimed as nothing): `None` to take it, or why not. The rule of who
    /// may take a run is `runs::claims`'s (`holds`); a store applies it inside a transaction.
    pub(super) fn claim(
        &self,
        run: &str,
        recorded: Option<(Option<String>, Option<String>, String)>,
        holder: &Holder,
        holds: &mut dyn FnMut(&Holder) -> bool,
    ) -> Result<Option<Unclaimed>, StoreError> {
        let (other, parent, status) = recorded.unwrap_or_default();
        if let Some(parent) = parent {
            return Ok(Some(Unclaimed::Child { parent }));
        }
        // A run that finished since the claimant read it unfinished (a host looking for runs to
        // take over): nobody drives it any more.
        if status == RunStatus::Finished.as_str() {
            return Ok(Some(Unclaimed::Finished));
        }
        let other = match other {
            Some(text) => Some(self.decode::<Holder>(run, "holder", &text)?),
            None => None,
        };
        Ok(match other {
            Some(other) if other != *holder && holds(&other) => Some(Unclaimed::Held(other)),
            _ => None,
        })
    }

    /// A holder as its column keeps it: plain JSON (a holder holds no secret, and a masked lock
    /// path would name no lock).
    pub(super) fn encode_holder(&self, holder: &Holder) -> Result<String, StoreError> {
        serde_json::to_string(holder).map_err(|source| self.encode_failed("", "holder", source))
    }

    /// A journal row decoded.
    pub(super) fn journal_entry(
        &self,
        run: &str,
        raw: RawEntry,
    ) -> Result<JournalEntry, StoreError> {
        let event = match raw.event_name {
            Some(name) => Some(JournalEvent {
                name,
                data: match &raw.event_data {
                    Some(text) => self.decode(run, "journal event data", text)?,
                    None => serde_json::Value::Null,
                },
            }),
            None => None,
        };
        Ok(JournalEntry {
            sequence: raw.step as u64,
            event,
            transitions: self.decode(run, "journal transitions", &raw.transitions)?,
            actions: self.decode(run, "journal actions", &raw.actions)?,
            unix_milliseconds: raw.recorded_at as u64,
            children: match &raw.children {
                Some(text) => self.decode(run, "journal children", text)?,
                None => Vec::new(),
            },
        })
    }
}

/// A `runs` row as stored.
pub(super) struct RawRun {
    pub(super) id: String,
    pub(super) protocol_path: String,
    pub(super) protocol_hash: String,
    pub(super) status: String,
    pub(super) started_at: i64,
    pub(super) last_step: Option<i64>,
    pub(super) last_step_at: Option<i64>,
    pub(super) final_state: Option<String>,
    pub(super) exit_code: Option<i64>,
    pub(super) output: Option<String>,
    pub(super) finished_at: Option<i64>,
    pub(super) origin: Option<String>,
    pub(super) holder: Option<String>,
    pub(super) parent: Option<String>,
    pub(super) forked_from: Option<String>,
    pub(super) redrives: i64,
}

/// A `journal` row as stored.
pub(super) struct RawEntry {
    pub(super) step: i64,
    pub(super) event_name: Option<String>,
    pub(super) event_data: Option<String>,
    pub(super) transitions: String,
    pub(super) actions: String,
    pub(super) recorded_at: i64,
    pub(super) children: Option<String>,
}
