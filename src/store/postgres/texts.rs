//! The texts runs started with (protocols, libraries, child protocols), each kept once by its content hash: what a resume runs after a file changed.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::GenericClient;

use super::session::Session;
use crate::store::{NewRun, StoreError, content_hash};

impl<C: GenericClient + Sync> Session<'_, C> {
    /// Keeps the texts `runs` started with, each once, in one statement: a text of a hash kept
    /// already (another run's) is left as it is. The hash of each run's protocol text, by run,
    /// which its row names.
    pub(super) fn keep_texts(&self, runs: &[&NewRun]) -> Result<Vec<Option<String>>, StoreError> {
        // By hash, in order: hosts keeping the same texts at once lock them in the same order,
        // so they wait for each other rather than deadlock.
        let mut texts: BTreeMap<String, &str> = BTreeMap::new();
        let mut protocol_hashes = Vec::with_capacity(runs.len());
        for run in runs {
            let protocol = run.protocol_text.as_deref().map(|text| {
                let hash = content_hash(text);
                texts.entry(hash.clone()).or_insert(text);
                hash
            });
            protocol_hashes.push(protocol);
            for text in &run.read_texts {
                texts.entry(content_hash(text)).or_insert(text);
            }
        }
        if texts.is_empty() {
            return Ok(protocol_hashes);
        }
        let (hashes, texts): (Vec<&str>, Vec<&str>) = texts
            .iter()
            .map(|(hash, text)| (hash.as_str(), *text))
            .unzip();
        self.execute(
            &|| format!("keep the texts of {} run(s)", runs.len()),
            "INSERT INTO protocol_texts (hash, text) SELECT * FROM unnest($1::text[], \
             $2::text[]) ON CONFLICT (hash) DO NOTHING",
            &[&hashes, &texts],
        )?;
        Ok(protocol_hashes)
    }

    /// The texts kept under `hashes`, by hash (`Store::protocol_texts`).
    pub(super) fn kept_texts(
        &self,
        hashes: &[String],
    ) -> Result<HashMap<String, String>, StoreError> {
        let rows = self.query(
            &|| "read the texts runs started with".to_string(),
            "SELECT hash, text FROM protocol_texts WHERE hash = ANY($1)",
            &[&hashes],
        )?;
        rows.iter()
            .map(|row| Ok((self.column(row, 0, "")?, self.column(row, 1, "")?)))
            .collect()
    }
}
