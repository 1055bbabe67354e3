//! The texts runs started with (protocols, libraries, child protocols), each kept once by its content hash: what a resume runs after a file changed.

use std::collections::HashMap;

use rusqlite::Connection;

use super::statements::CachedStatements;
use super::{Context, SqliteStore};
use crate::store::{NewRun, StoreError, content_hash};

impl Context {
    /// Keeps the texts `run` started with, each under its hash unless a text of that hash is
    /// kept already (another run's); the hash of its protocol's text, which its row names.
    pub(super) fn keep_texts(
        &self,
        connection: &Connection,
        run: &NewRun,
    ) -> Result<Option<String>, StoreError> {
        let failed = self.failed(&format!("keep the texts of run `{}`", run.id));
        let protocol = run.protocol_text.as_deref();
        let others = run.read_texts.iter().map(|text| &**text);
        let mut protocol_hash = None;
        for (index, text) in protocol.into_iter().chain(others).enumerate() {
            let hash = content_hash(text);
            connection
                .execute_cached(
                    "INSERT INTO protocol_texts (hash, text) VALUES (?1, ?2) \
                     ON CONFLICT (hash) DO NOTHING",
                    rusqlite::params![hash, text],
                )
                .map_err(&failed)?;
            if index == 0 && protocol.is_some() {
                protocol_hash = Some(hash);
            }
        }
        Ok(protocol_hash)
    }
}

impl SqliteStore {
    /// The texts kept under `hashes`, by hash (`Store::protocol_texts`).
    pub(super) fn kept_texts(
        &self,
        hashes: &[String],
    ) -> Result<HashMap<String, String>, StoreError> {
        let failed = self.context.failed("read the texts runs started with");
        let mut texts = HashMap::new();
        for hash in hashes {
            let text = self
                .connection
                .query_row_cached(
                    "SELECT text FROM protocol_texts WHERE hash = ?1",
                    [hash],
                    |row| row.get::<_, String>(0),
                )
                .map(Some)
                .or_else(|error| match error {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    other => Err(other),
                })
                .map_err(&failed)?;
            if let Some(text) = text {
                texts.insert(hash.clone(), text);
            }
        }
        Ok(texts)
    }
}
