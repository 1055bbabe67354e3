//! The versions of its protocol a fleet runs besides the file's: instances recorded under texts that have since changed go on with those texts (pinned), one machine per version, compiled once, beside new instances of the file as it is.

use std::collections::HashMap;
use std::sync::Arc;

use super::Fleet;
use crate::pipeline::compile::machine::Machine;
use crate::runtime::runs::resume::PinnedTexts;

/// Compiles a version of the protocol from the texts its instances started with, as the host
/// compiled the file (within the operator's limit, its grants resolved from the pinned inputs).
pub type CompileVersion = Box<dyn FnMut(&PinnedTexts) -> Result<Arc<Machine>, String>>;

/// The pinned versions a fleet compiled, by the hash their instances recorded.
pub(super) struct Versions {
    compile: CompileVersion,
    machines: HashMap<String, Arc<Machine>>,
}

impl Fleet {
    /// Resumes the instances recorded under texts that changed since with those texts, each
    /// version compiled by `compile` (without it, such instances are refused, or moved to the
    /// file with `force`).
    pub fn with_pinned_versions(
        mut self,
        compile: impl FnMut(&PinnedTexts) -> Result<Arc<Machine>, String> + 'static,
    ) -> Fleet {
        self.versions = Some(Versions {
            compile: Box::new(compile),
            machines: HashMap::new(),
        });
        self
    }

    /// Makes ready the version `run` was recorded under (its recorded hash, `hash`): `false`
    /// when this fleet keeps no versions or the store does not keep every text it started
    /// with; an error when they no longer compile here.
    pub(super) fn prepare_version(&mut self, run: &str, hash: &str) -> Result<bool, String> {
        let (Some(versions), Some(recording)) = (&mut self.versions, &self.recording) else {
            return Ok(false);
        };
        if versions.machines.contains_key(hash) {
            return Ok(true);
        }
        let store = &*recording.store;
        let Some(record) = store.run(run).map_err(|error| error.to_string())? else {
            return Ok(false);
        };
        let Some(texts) = crate::runtime::runs::resume::pinned_texts(store, &record)
            .map_err(|error| error.to_string())?
        else {
            return Ok(false);
        };
        let machine = (versions.compile)(&texts).map_err(|message| {
            format!(
                "the text it started with does not compile here: {}",
                message.trim_end()
            )
        })?;
        versions.machines.insert(hash.to_string(), machine);
        Ok(true)
    }

    /// The machine a run recorded under `hash` resumes with: its pinned version's, when one
    /// was made ready, the file's otherwise.
    pub(super) fn machine_recorded_as(&self, hash: &str) -> Arc<Machine> {
        self.versions
            .as_ref()
            .and_then(|versions| versions.machines.get(hash))
            .unwrap_or(&self.machine)
            .clone()
    }

    /// The machine instance `name` runs: a live one's own (its version's), the file's for an
    /// instance not live here (a line creates it with that).
    pub(super) fn machine_of(&self, name: &str) -> Arc<Machine> {
        // On every event's path: a fleet of one version looks nothing up.
        if self
            .versions
            .as_ref()
            .is_none_or(|versions| versions.machines.is_empty())
        {
            return self.machine.clone();
        }
        self.by_name
            .get(name)
            .and_then(|slot| self.members[*slot].as_ref())
            .map_or(&self.machine, |member| member.interpreter.machine())
            .clone()
    }
}
