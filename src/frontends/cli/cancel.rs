//! `protocol-run cancel RUN_ID`: a run cancelled by whoever drives it (asked through its inbox), or at once when nobody does.

use clap::Args;

use super::run_selection::StateDirectory;
use crate::runtime::runs::cancel::{Cancelled, cancel as cancel_run};

/// `protocol-run cancel RUN_ID`.
#[derive(Debug, Args)]
pub struct CancelArguments {
    /// The run to cancel (see `protocol-run runs`): a run started on its own, not a child
    /// protocol's (cancel its root).
    #[arg(value_name = "RUN_ID")]
    run_id: String,
    #[command(flatten)]
    state: StateDirectory,
}

/// Cancels the run: exit 0 once it is recorded cancelled, or once the request waits in the
/// inbox of the process that holds it (said on stdout as `{"run", "cancel": "recorded" |
/// "queued", "entry"?}`); 64 for a finished run or a child's, 66 for a run the store does not
/// have, 74 when the store fails.
pub fn cancel(arguments: &CancelArguments) -> u8 {
    let mut store = match arguments.state.open_store_to_drive("cancel") {
        Ok(store) => store,
        Err(code) => return code,
    };
    let run = &arguments.run_id;
    match cancel_run(&mut *store, &arguments.state.path, run) {
        Ok(cancelled) => {
            let line = match &cancelled {
                Cancelled::Queued { entry } => {
                    serde_json::json!({"run": run, "cancel": "queued", "entry": entry})
                }
                Cancelled::Recorded => serde_json::json!({"run": run, "cancel": "recorded"}),
            };
            println!("{line}");
            eprintln!("{}", cancelled.description(run));
            0
        }
        Err(refusal) => {
            eprint!("{}", refusal.text);
            refusal.exit_code
        }
    }
}
