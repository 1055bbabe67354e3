//! `cancel_run` and `tasks/cancel`: a live run is stopped by its fleet; a run recorded unfinished that no fleet here drives is recorded cancelled under its run lock.

use serde_json::Value;

use crate::mcp::runs::fleets::cancelled_report;
use crate::mcp::runs::host::{Host, Reply};
use crate::run::stop::Stop;
use crate::store::Store;

impl Host {
    /// Cancels a run: a live one's fleet stops it, its effects and children dropped (their
    /// process groups killed), and records it finished with `CANCELLED_EXIT_CODE`, the stop and
    /// the finish in one commit; one recorded unfinished but not live here is recorded so too.
    pub(in crate::mcp) fn cancel_run(&mut self, run: &str, reply: Reply) {
        if !self.runs.contains_key(run) && self.ended.get(run).is_none() {
            let _ = reply.send(self.cancel_recorded(run));
            return;
        }
        let live = match self.running(run) {
            Ok(live) => live,
            Err(message) => {
                let _ = reply.send(Err(message));
                return;
            }
        };
        match live.cancel.take() {
            Some(cancel) => {
                if let Err(reply) = cancel.send(reply) {
                    let _ = reply.send(Err(format!("run `{run}` is no longer live")));
                }
            }
            None => {
                let _ = reply.send(Err(format!("run `{run}` is being cancelled")));
            }
        }
    }

    /// Records cancelled a run of a protocol served here that the store holds unfinished and
    /// no fleet here drives (left stopped, or by a server that died, under `--no-resume`):
    /// refused while another process holds its run lock, naming it.
    fn cancel_recorded(&self, run: &str) -> Result<Value, String> {
        let (mut store, record) = self.unfinished_record(run)?;
        let protocol = &record.summary.protocol_path;
        if !self.protocols.iter().any(|served| &served.path == protocol) {
            return Err(crate::mcp::runs::records::not_served(run, protocol));
        }
        let _lock = self.lock_run(run)?;
        // A server that died left its effects' processes running: they go with the run.
        if let Ok(Some(stored)) = store.latest_snapshot(run) {
            crate::run::session::stop_processes_left_by(&stored.snapshot);
        }
        let writes = Stop::Cancel.writes(run, crate::clock::unix_milliseconds_now());
        store
            .commit_batch(&writes)
            .map_err(|error| error.to_string())?;
        Ok(cancelled_report(run))
    }
}
