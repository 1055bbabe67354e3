//! How `run` and `resume` end: the finished line on stdout and the state's exit code, or why the run stopped unfinished and how to continue it.

use super::{advance, exit_code};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::lifecycle::{LifecycleEvent, RunLifecycle};
use crate::runtime::run::driver::RunReport;
use crate::store::Store;

/// A run its driver returned from.
pub(super) struct Ended<'a> {
    pub(super) machine: &'a Machine,
    pub(super) run_id: &'a str,
    /// `--strict-effects`: an effect that failed after the final state fails the run (70).
    pub(super) strict_effects: bool,
}

impl Ended<'_> {
    /// Prints how the run ended and gives its exit code; a run that stopped unfinished is
    /// marked stopped in `store`, resumable.
    pub(super) fn report(
        &self,
        report: &RunReport,
        store: &mut dyn Store,
        lifecycle: &mut RunLifecycle,
    ) -> Result<u8, u8> {
        let Ended {
            machine,
            run_id,
            strict_effects,
        } = *self;
        let now = crate::base::clock::unix_milliseconds_now();
        // A run that reached its final state ended before any cancel could stop it.
        if let Some(request) = report
            .cancelled
            .as_ref()
            .filter(|_| report.outcome.is_none())
        {
            return self.cancelled(request, report, store, lifecycle);
        }
        match report
            .outcome
            .as_ref()
            .filter(|_| !report.stopped_by_signal)
        {
            Some(outcome) => {
                advance(lifecycle, LifecycleEvent::Finished)?;
                // The commit that left no effect running finished the run in the store.
                let mut finished = serde_json::json!({"finished": {
                    "state": outcome.state_name(machine).map(|state| &**state),
                    "exit_code": outcome.exit_code,
                    "output": outcome.output.to_json(),
                    "effects": &report.effects,
                }});
                if let Some(failure) = &outcome.failure {
                    finished["finished"]["error"] = failure.to_json();
                }
                // Deferred events the end of the run discarded, each said once more here.
                if !report.discarded.is_empty() {
                    finished["finished"]["discarded"] = report.discarded.clone().into();
                }
                println!("{}", crate::base::secrets::mask_json(&finished));
                if strict_effects && report.an_effect_failed_after_finish() {
                    eprintln!(
                        "error: an effect failed after the run finished (--strict-effects); see the \
                         `effects` of the finished line"
                    );
                    return Ok(exit_code::INTERNAL);
                }
                Ok(outcome.exit_code)
            }
            None => {
                advance(lifecycle, LifecycleEvent::Abort)?;
                if let Err(error) = store.mark_stopped(run_id, now) {
                    eprintln!("warning: {error}");
                }
                if report.stopped_by_signal {
                    eprintln!(
                        "run {run_id} stopped by a signal in {}; its last step is committed: \
                         `protocol-run resume {run_id}` continues it",
                        report.active_states.join(", ")
                    );
                } else {
                    eprintln!(
                        "run stopped unfinished in {}: no events left and no timer pending \
                         (`protocol-run resume {run_id}` continues it)",
                        report.active_states.join(", ")
                    );
                }
                Ok(exit_code::UNFINISHED)
            }
        }
    }

    /// Records the run cancelled as its inbox asked (`request`), with that entry and those the
    /// cancel discarded applied in the same commit, and says so: exit `CANCELLED_EXIT_CODE`.
    fn cancelled(
        &self,
        request: &crate::runtime::run::queued::CancelRequest,
        report: &RunReport,
        store: &mut dyn Store,
        lifecycle: &mut RunLifecycle,
    ) -> Result<u8, u8> {
        use crate::runtime::runs::cancel;
        advance(lifecycle, LifecycleEvent::Abort)?;
        let run_id = self.run_id;
        let applied = |entry: u64, outcome: serde_json::Value| crate::store::Write::ApplyInbox {
            run: run_id.to_string(),
            entry,
            step: None,
            outcome,
            output: String::new(),
        };
        let mut writes = vec![applied(request.entry, cancel::request_outcome())];
        for (entry, event) in &request.later {
            writes.push(applied(*entry, cancel::after_cancel_outcome(event)));
        }
        if let Err(error) = cancel::record_cancelled(store, run_id, writes) {
            eprintln!(
                "error: run {run_id} was stopped for a cancel (inbox entry {}), but the store did \
                 not record it: {error}; `protocol-run cancel {run_id}` records it",
                request.entry
            );
            return Ok(exit_code::IO);
        }
        let line = serde_json::json!({"cancelled": {
            "entry": request.entry,
            "states": &report.active_states,
            "exit_code": crate::runtime::run::stop::CANCELLED_EXIT_CODE,
        }});
        println!("{line}");
        eprintln!(
            "run {run_id} cancelled (inbox entry {}) in {}: its effects and children are stopped",
            request.entry,
            report.active_states.join(", ")
        );
        Ok(crate::runtime::run::stop::CANCELLED_EXIT_CODE as u8)
    }
}
