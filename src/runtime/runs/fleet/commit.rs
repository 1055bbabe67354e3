//! Committing a batch and writing its output, and taking instances out of the fleet.

use std::collections::HashSet;

use crate::runtime::otlp::spans::SessionEnd;
use crate::runtime::run::stop::Stop;

use super::{Fleet, telemetry};

impl Fleet {
    /// Commits the batch's writes, then writes its output lines: a step is reported only once
    /// it is durable. If the batch cannot be committed, each write is tried alone, and the
    /// instances whose writes still fail are reported and dropped from this host (their runs
    /// resume from their last committed step).
    pub fn commit(&mut self) {
        self.telemetry.append_to(&mut self.pending);
        if let Some(recording) = &mut self.recording
            && !self.pending.is_empty()
        {
            if let Err(error) = recording.store.commit_batch(&self.pending) {
                crate::runtime::runs::lease::end_if_lost(&error);
                let mut failed = HashSet::new();
                let mut errors = Vec::new();
                for write in &self.pending {
                    if failed.contains(write.run()) {
                        continue;
                    }
                    if let Err(error) = write.apply(&mut *recording.store) {
                        let name = write.run()[self.prefix.len()..].to_string();
                        errors.push(
                            serde_json::json!({"instance": name, "error": error.to_string()}),
                        );
                        failed.insert(write.run().to_string());
                    }
                }
                // Their steps of this batch were not all recorded: none of them is reported,
                // only why they stop here.
                let names: HashSet<&str> =
                    failed.iter().map(|run| &run[self.prefix.len()..]).collect();
                self.output = without_instances(&self.output, &names);
                for error in &errors {
                    write_line(&mut self.output, error);
                }
                self.store_failures += failed.len();
                for run in failed {
                    if let Some(slot) = self.by_name.get(&run[self.prefix.len()..]).copied() {
                        // It resumes from its last committed step, which lists what was open.
                        self.end_trace(slot, SessionEnd::Stopped, &[], false);
                        self.remove(slot, false);
                    }
                }
            }
            self.pending.clear();
        }
        self.finished.clear();
        if !self.output.is_empty() {
            (self.sink)(&self.output);
            self.output.clear();
        }
    }

    /// Stopped between steps: every live instance is parked to resume with the next host (a
    /// signal), or cancelled, its stop and finish committed in one batch.
    pub(super) fn stop(&mut self, how: Stop) {
        let live: Vec<usize> = self.by_name.values().copied().collect();
        for slot in live {
            self.park_for_good(slot, how);
        }
        self.commit();
    }

    /// The instance leaves this host for good, stopped as `how` says: parked for the next host
    /// (input ended and it has nothing left to wait for, or a signal), or cancelled.
    pub(super) fn park_for_good(&mut self, slot: usize, how: Stop) {
        if let Some(member) = self.members[slot].as_deref()
            && self.recording.is_some()
        {
            let run = format!("{}{}", self.prefix, member.name);
            let writes = how.writes(&run, crate::base::clock::unix_milliseconds_now());
            self.pending.extend(writes);
            if how == Stop::Cancel {
                // Its telemetry ends with it, as a finished instance's does.
                let mut lines = String::new();
                let cancelled = (
                    "cancelled".to_string(),
                    crate::runtime::run::stop::CANCELLED_EXIT_CODE,
                );
                telemetry::push_finish(
                    &mut lines,
                    &member.interpreter,
                    Vec::new(),
                    Some(cancelled),
                );
                self.telemetry.add(slot, run, lines);
            }
        }
        match how {
            Stop::Park => self.end_trace(slot, SessionEnd::Stopped, &[], true),
            Stop::Cancel => self.end_trace(
                slot,
                SessionEnd::Finished { succeeded: false },
                &[
                    (
                        "protocol_run.exit_code",
                        crate::runtime::run::stop::CANCELLED_EXIT_CODE.into(),
                    ),
                    ("protocol_run.error", "cancelled".into()),
                ],
                true,
            ),
        }
        self.remove(slot, how == Stop::Cancel);
    }

    /// Takes an instance out of the fleet; `finished` keeps its name from being created again
    /// before the batch that finishes it is committed.
    pub(super) fn remove(&mut self, slot: usize, finished: bool) {
        if let Some(member) = self.members[slot].take() {
            self.by_name.remove(&member.name);
            if finished {
                self.finished.insert(member.name);
            }
        }
    }

    /// No more input: instances finish what their timers and effects still hold, then the
    /// host ends.
    pub(super) fn end_input(&mut self) {
        self.input_ended = true;
        let idle: Vec<usize> = self
            .by_name
            .values()
            .copied()
            .filter(|slot| {
                self.members[*slot]
                    .as_deref()
                    .is_some_and(|member| member.state.is_idle())
            })
            .collect();
        for slot in idle {
            self.park_for_good(slot, Stop::Park);
        }
    }
}

/// `output`'s lines but those of the instances `names`.
fn without_instances(output: &[u8], names: &HashSet<&str>) -> Vec<u8> {
    let mut kept = Vec::with_capacity(output.len());
    for line in output.split_inclusive(|byte| *byte == b'\n') {
        let instance = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .and_then(|value| value["instance"].as_str().map(str::to_owned));
        if !instance.is_some_and(|instance| names.contains(instance.as_str())) {
            kept.extend_from_slice(line);
        }
    }
    kept
}

/// One output line, its secrets masked: every client of the host sees it.
pub(super) fn write_line(output: &mut Vec<u8>, value: &serde_json::Value) {
    // Writing JSON into a vector cannot fail.
    let _ = serde_json::to_writer(&mut *output, &*crate::base::secrets::mask_json(value));
    output.push(b'\n');
}
