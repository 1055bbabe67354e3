//! The telemetry a fleet's instances record in a batch (what `logs` and `stats` read), one write an instance, committed after the batch's steps.

use std::collections::HashMap;

use crate::runtime::run::Interpreter;
use crate::runtime::telemetry::push_stored_entry;
use crate::store::Write;

/// Each instance's telemetry of the current batch: its lines of every step it took in the
/// batch joined into one write, so that an instance stepped many times adds one part, not one
/// a step.
#[derive(Default)]
pub(super) struct BatchTelemetry {
    writes: Vec<Write>,
    /// Where each instance's write is in `writes`, by slot (slots are never reused).
    slots: HashMap<usize, usize, foldhash::fast::RandomState>,
}

impl BatchTelemetry {
    /// Adds `lines` of run `run` (in slot `slot`) to its write of the batch.
    pub(super) fn add(&mut self, slot: usize, run: String, lines: String) {
        if lines.is_empty() {
            return;
        }
        match self.slots.get(&slot) {
            Some(index) => {
                if let Write::Telemetry { lines: kept, .. } = &mut self.writes[*index] {
                    kept.push_str(&lines);
                }
            }
            None => {
                self.slots.insert(slot, self.writes.len());
                self.writes.push(Write::Telemetry { run, lines });
            }
        }
    }

    /// Moves the batch's writes after `pending`'s (the creations and steps they tell of), for
    /// one commit.
    pub(super) fn append_to(&mut self, pending: &mut Vec<Write>) {
        pending.append(&mut self.writes);
        self.slots.clear();
    }
}

/// Adds the `finish` entry of an instance that ended: how (`error` and its exit code, when it
/// ended otherwise than in a final state: its step failed, or it was cancelled), and the states
/// entered since its last entry.
pub(super) fn push_finish(
    telemetry: &mut String,
    interpreter: &Interpreter,
    entered: Vec<String>,
    error: Option<(String, i32)>,
) {
    let mut fields = crate::runtime::run::driver::finish_fields(interpreter);
    fields["entered"] = entered.into();
    if let Some((error, exit_code)) = error {
        fields["exit_code"] = exit_code.into();
        fields["error"] = error.into();
    }
    let time = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
    push_stored_entry(telemetry, &time, "finish", fields);
}
