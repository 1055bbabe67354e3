//! How a host stops a run it drives: parked for the next host, or cancelled for good.

use crate::store::{Finish, Write};

/// Exit code recorded for a cancelled run: 128 + SIGINT, as a shell reports an interrupted
/// command. A cancelled run has finished: it cannot be resumed.
pub const CANCELLED_EXIT_CODE: i32 = crate::base::exit_code::CANCELLED as i32;

/// What stopping does to each run still live in a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Marked stopped: the next host resumes it (a signal, a server going away).
    Park,
    /// Finished with `CANCELLED_EXIT_CODE` (`mcp`'s `cancel_run`, `tasks/cancel`).
    Cancel,
}

impl Stop {
    /// The writes that stop `run` at `unix_milliseconds`. A cancel records the stop and the
    /// finish together, to be committed in one batch: a crash between two commits would leave
    /// a cancelled run stopped, and the next host would resume it.
    pub fn writes(self, run: &str, unix_milliseconds: u64) -> Vec<Write> {
        let stopped = Write::MarkStopped {
            run: run.to_string(),
            unix_milliseconds,
        };
        match self {
            Stop::Park => vec![stopped],
            Stop::Cancel => vec![
                stopped,
                Write::FinishRun {
                    run: run.to_string(),
                    finish: Finish {
                        final_state: None,
                        exit_code: CANCELLED_EXIT_CODE,
                        output: serde_json::Value::Null,
                        unix_milliseconds,
                    },
                },
            ],
        }
    }
}
