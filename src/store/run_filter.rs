//! Which recorded runs `runs` lists and `stats --protocol` sums: by protocol, status and start.

use super::{RunStatus, RunSummary, Store, StoreError};

/// What `runs` shows in its status column and `--status` selects: the store's status, with a
/// finished run that did not end well called `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShownStatus {
    /// Started and not finished: live, or its process died (resumable).
    Running,
    /// Stopped on purpose (a signal, no events left): resumable.
    Stopped,
    /// Reached a final state with exit code 0.
    Finished,
    /// Ended with a non-zero exit code, or by an error.
    Failed,
    /// Cancelled (`protocol-run cancel`, the inspector, MCP's `cancel_run`): ended in no
    /// final state with `CANCELLED_EXIT_CODE`.
    Cancelled,
}

impl ShownStatus {
    pub fn of(run: &RunSummary) -> ShownStatus {
        match (run.status, &run.finish) {
            (RunStatus::Running, _) => ShownStatus::Running,
            (RunStatus::Stopped, _) => ShownStatus::Stopped,
            (RunStatus::Finished, Some(finish))
                if finish.exit_code == 0 && finish.final_state.is_some() =>
            {
                ShownStatus::Finished
            }
            (RunStatus::Finished, Some(finish))
                if finish.final_state.is_none()
                    && finish.exit_code == i32::from(crate::base::exit_code::CANCELLED) =>
            {
                ShownStatus::Cancelled
            }
            (RunStatus::Finished, _) => ShownStatus::Failed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ShownStatus::Running => "running",
            ShownStatus::Stopped => "stopped",
            ShownStatus::Finished => "finished",
            ShownStatus::Failed => "failed",
            ShownStatus::Cancelled => "cancelled",
        }
    }
}

/// The conditions a run must meet; an empty filter takes every run.
#[derive(Debug, Default, Clone)]
pub struct RunFilter {
    /// The protocol's `id`, its file name without `.yaml`, or its path as recorded.
    pub protocol: Option<String>,
    pub status: Option<ShownStatus>,
    /// Started at or after this instant (Unix milliseconds).
    pub since_unix_milliseconds: Option<u64>,
}

impl RunFilter {
    /// The runs that pass, the most recently started first.
    pub fn runs(&self, store: &dyn Store) -> Result<Vec<RunSummary>, StoreError> {
        let mut kept = Vec::new();
        for run in store.list_runs()? {
            if self
                .status
                .is_some_and(|status| ShownStatus::of(&run) != status)
                || self
                    .since_unix_milliseconds
                    .is_some_and(|since| run.started_unix_milliseconds < since)
            {
                continue;
            }
            if let Some(protocol) = &self.protocol
                && !self.is_of_protocol(store, &run, protocol)?
            {
                continue;
            }
            kept.push(run);
        }
        Ok(kept)
    }

    fn is_of_protocol(
        &self,
        store: &dyn Store,
        run: &RunSummary,
        protocol: &str,
    ) -> Result<bool, StoreError> {
        let path = std::path::Path::new(&run.protocol_path);
        if run.protocol_path == protocol
            || path.file_stem().is_some_and(|stem| stem == protocol)
            || path.file_name().is_some_and(|name| name == protocol)
        {
            return Ok(true);
        }
        // The `id` inside the recorded text: a file may be named apart from its id.
        let text = store.run(&run.id)?.and_then(|record| record.protocol_text);
        Ok(text.is_some_and(|text| protocol_id(&text) == Some(protocol)))
    }
}

/// The top-level `id:` of a protocol's text, without quotes; a cheap read, not a load.
fn protocol_id(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|line| line.strip_prefix("id:"))
        .map(|value| {
            let value = value.split(" #").next().unwrap_or_default().trim();
            value.trim_matches(|quote| quote == '"' || quote == '\'')
        })
}

#[cfg(test)]
mod tests {
    use super::protocol_id;

    #[test]
    fn the_protocol_id_is_read_from_the_top_level_key() {
        let text = "# comment\nstates:\n  a:\n    id: inner\nid: \"retry\" # the id\n";
        assert_eq!(protocol_id(text), Some("retry"));
        assert_eq!(protocol_id("title: x\n"), None);
    }
}
