//! `cancel_run` and `tasks/cancel`: a live run is stopped by its fleet; a run recorded unfinished that no fleet here drives is recorded cancelled under its run lock.

use serde_json::Value;

use crate::frontends::mcp::runs::fleets::cancelled_report;
use crate::frontends::mcp::runs::host::{Host, Reply};
use crate::store::Store;

impl Host {
    /// Cancels a run: a live one's fleet stops it, its effects and children dropped (their
    /// process groups killed), and records it finished with `CANCELLED_EXIT_CODE`, the stop and
    /// the finish in one commit; one recorded unfinished but not live here is recorded so too.
    pub(in crate::frontends::mcp) fn cancel_run(&mut self, run: &str, reply: Reply) {
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
    /// refused while another process holds it (`runs::claims`), naming it.
    fn cancel_recorded(&mut self, run: &str) -> Result<Value, String> {
        let record = self.unfinished_record(run)?;
        let protocol = &record.summary.protocol_path;
        if !self.protocols.iter().any(|served| &served.path == protocol) {
            return Err(crate::frontends::mcp::runs::records::not_served(
                run, protocol,
            ));
        }
        self.claim(run)?;
        let store = &mut self.settings.store;
        // A server that died left its effects' processes running: they go with the run. The
        // finish releases the claim; a store that refused it is released here.
        if let Err(error) = crate::runtime::runs::cancel::record_cancelled(store, run, Vec::new()) {
            let _ = store.release_runs(&[run.to_string()], &self.settings.holder);
            return Err(error.to_string());
        }
        Ok(cancelled_report(run))
    }
}
