//! Stepping a member: a session over its interpreter, for a line's event, a timer or an effect's message, and what the step leaves in the batch.

use std::cmp::Reverse;

use tokio::time::Instant;

use crate::base::durable::{Checkpoint, CheckpointStep, Resume, TimerPolicy};
use crate::runtime::otlp::spans::SessionEnd;
use crate::runtime::run::Interpreter;
use crate::runtime::run::algorithm::RunError;
use crate::runtime::run::driver::{EffectMessage, Observer, Session};
use crate::runtime::run::stop::Stop;
use crate::store::{Finish, Write};

use super::commit::write_line;
use super::observer::MemberObserver;
use super::{Fleet, Pending, awaiting, telemetry, tracing};

/// The exit code of an instance ended by an error (as `run`'s for an invalid protocol or input).
const ERROR_EXIT_CODE: i32 = 64;

impl Fleet {
    /// Resumes one recorded run of this protocol (`<protocol id>:<instance>`) from its latest
    /// snapshot, as `resume_recorded` resumes each; its first step joins the batch.
    pub fn resume_run(&mut self, run_id: &str, timers: TimerPolicy) -> Result<(), String> {
        let Some(name) = run_id.strip_prefix(&self.prefix) else {
            return Err(format!(
                "run `{run_id}` is not of protocol `{}`",
                self.machine.id
            ));
        };
        let (interpreter, resume) = self.restore(run_id, timers)?;
        let trace = self.begin_restored_trace(run_id, &interpreter)?;
        let slot = self.add_member(name, interpreter);
        self.keep_trace(slot, trace);
        self.step(slot, |session| match &resume {
            Some(resume) => session.resume(resume),
            None => session.start(),
        });
        Ok(())
    }

    /// An instance as its run's record and latest snapshot left it.
    fn restore(
        &self,
        run_id: &str,
        timers: TimerPolicy,
    ) -> Result<(Interpreter, Option<Resume>), String> {
        let store = &self
            .recording
            .as_ref()
            .expect("restoring needs a store")
            .store;
        let record = store
            .run(run_id)
            .map_err(|error| error.to_string())?
            .ok_or_else(|| format!("no run `{run_id}`"))?;
        let grants = self
            .recording
            .as_ref()
            .and_then(|recording| recording.grants.as_ref());
        if record.grants.as_ref() != grants {
            return Err(format!(
                "it started under the operator's narrowing {}, and this host runs under {}; \
                 start the server again with the --allow-*/--no-shell flags the run started under",
                record
                    .grants
                    .as_ref()
                    .map_or("none".to_string(), serde_json::Value::to_string),
                grants.map_or("none".to_string(), serde_json::Value::to_string)
            ));
        }
        // Its version's machine: the file's, or the texts it started with when they changed.
        let machine = self.machine_recorded_as(&record.summary.protocol_hash);
        let secret_inputs = self.pinned.texts_of(&machine.secret_input_names());
        let values = crate::runtime::runs::resume::bind_recorded(
            &machine,
            &record,
            &secret_inputs,
            |name| {
                format!(
                    "start the host again with --input {name}=VALUE, or `protocol-run resume \
                 {run_id} --input {name}=VALUE` resumes it outside this host"
                )
            },
        )?;
        crate::runtime::runs::resume::restore_latest(
            &**store,
            run_id,
            machine,
            values,
            &secret_inputs,
            timers,
        )
    }

    /// Runs `body` on a session over the instance in `slot`, then parks it again: its output
    /// and writes join the batch, its next timer joins the heap, and an instance that finished,
    /// failed, or has nothing left to wait for after input ended leaves the fleet.
    pub(super) fn step(
        &mut self,
        slot: usize,
        body: impl FnOnce(&mut Session) -> Result<(), RunError>,
    ) {
        self.step_as(slot, None, body);
    }

    /// `step`, with the instance's name as the line gave it (already in cache, unlike the
    /// member's own copy).
    pub(super) fn step_as(
        &mut self,
        slot: usize,
        name: Option<&str>,
        body: impl FnOnce(&mut Session) -> Result<(), RunError>,
    ) {
        let Some(member) = self.members.get_mut(slot).and_then(Option::as_deref_mut) else {
            // An effect's message for an instance that has ended: nobody waits for it.
            return;
        };
        // Written only by a fleet with a store (`--store memory` keeps no telemetry).
        let mut lines = String::new();
        let mut observer = MemberObserver {
            name: name.unwrap_or(&member.name),
            output: &mut self.output,
            log_sink: self.log_sink.as_mut(),
            line_outcome: None,
            keeps_line_outcome: self.outcome_reply.is_some() || self.keep_outcome,
            telemetry: self.recording.is_some().then_some(&mut lines),
            entered: Vec::new(),
        };
        let mut checkpoint = self.recording.as_ref().map(|_| BatchCheckpoint {
            run: format!("{}{}", self.prefix, member.name),
            writes: &mut self.pending,
        });
        // A fleet without `--otlp` pays one test of `tracing` a step.
        let mut trace = self
            .tracing
            .as_mut()
            .and_then(|tracing| tracing.trace_of(slot));
        let mut traced;
        let told: &mut dyn Observer = match trace.as_deref_mut() {
            Some(trace) => {
                traced = crate::runtime::otlp::observer::TracedObserver {
                    inner: &mut observer,
                    trace,
                };
                &mut traced
            }
            None => &mut observer,
        };
        let mut session = Session::new(
            &mut member.interpreter,
            &mut member.state,
            self.mocks.clone(),
            told,
        );
        if let Some(checkpoint) = checkpoint.as_mut() {
            session = session.with_checkpoint(checkpoint);
        }
        let result = body(&mut session).and_then(|()| session.handle_queued());
        drop(session);
        let line_outcome = observer.line_outcome.take();
        let entered = std::mem::take(&mut observer.entered);
        if let Some(run) = checkpoint.map(|checkpoint| checkpoint.run) {
            // The instance's finish, when this step ends it (as the branches below do).
            let ended = match &result {
                Err(RunError::Interrupted { .. }) => None,
                Err(error) => Some(Some((error.to_string(), ERROR_EXIT_CODE))),
                Ok(()) if member.interpreter.outcome().is_some() && !member.state.has_running() => {
                    Some(None)
                }
                Ok(()) => None,
            };
            if let Some(error) = ended {
                telemetry::push_finish(&mut lines, &member.interpreter, entered, error);
            }
            // The spans open now, when they changed: a host that takes the run over after a
            // crash ends them `interrupted`.
            if let Some(open) =
                trace.and_then(crate::runtime::otlp::spans::RunTrace::take_open_spans)
            {
                tracing::push_open_spans(&mut lines, open);
            }
            // Committed with the steps it tells of, in the same batch.
            self.telemetry.add(slot, run, lines);
        }
        if let (Some(report), Some(origin), Some(reply)) = (
            line_outcome.as_deref(),
            self.line_origin,
            &mut self.outcome_reply,
        ) && report.ticket == Some(self.line_number as u64)
        {
            reply(origin, report);
        }
        if self.keep_outcome {
            self.kept_outcome = line_outcome;
        }
        if let Err(RunError::Interrupted { .. }) = result {
            // A signal stopped its step half-way: kept as its last commit left it, for the
            // next host, like every other instance the signal stops.
            self.park_for_good(slot, Stop::Park);
            return;
        }
        if let Err(error) = result {
            write_line(
                &mut self.output,
                &serde_json::json!({"instance": &*member.name, "error": error.to_string()}),
            );
            if self.recording.is_some() {
                self.pending.push(Write::FinishRun {
                    run: format!("{}{}", self.prefix, member.name),
                    finish: Finish {
                        final_state: None,
                        exit_code: ERROR_EXIT_CODE,
                        output: serde_json::Value::Null,
                        unix_milliseconds: crate::base::clock::unix_milliseconds_now(),
                    },
                });
            }
            let masked = crate::base::secrets::mask(&error.to_string()).into_owned();
            self.end_trace(
                slot,
                SessionEnd::Finished { succeeded: false },
                &[("protocol_run.error", masked.into())],
                true,
            );
            self.remove(slot, true);
            return;
        }
        if let Some(outcome) = member.interpreter.outcome() {
            // It stays until the effects it left running end; the commit that records the last
            // of them finishes the run in the store.
            if member.state.has_running() {
                return;
            }
            let state = outcome
                .state_name(member.interpreter.machine())
                .map(|state| state.to_string());
            awaiting::note_finished(&mut self.awaiting, slot, state.as_deref());
            let mut finished = serde_json::json!({
                "instance": &*member.name,
                "finished": {
                    "state": state,
                    "exit_code": outcome.exit_code,
                    "output": outcome.output.to_json(),
                    "effects": member.state.effects_after_finish(),
                },
            });
            if let Some(failure) = &outcome.failure {
                finished["finished"]["error"] = failure.to_json();
            }
            // Deferred events the end of the run discarded, each said once more here.
            let discarded = member.state.discarded_at_finish();
            if !discarded.is_empty() {
                finished["finished"]["discarded"] = discarded.to_vec().into();
            }
            let exit_code = outcome.exit_code;
            write_line(&mut self.output, &finished);
            self.end_trace(
                slot,
                SessionEnd::Finished {
                    succeeded: exit_code == 0,
                },
                &[("protocol_run.exit_code", exit_code.into())],
                true,
            );
            self.remove(slot, true);
            return;
        }
        if self.input_ended && member.state.is_idle() {
            self.park_for_good(slot, Stop::Park);
            return;
        }
        // The heap holds an entry at or before the instance's earliest timer unless `armed`
        // was cleared (its entry popped) or the timers changed.
        let recheck = member.state.take_timers_changed() || member.armed.is_none();
        if recheck
            && let Some(next) = member.state.next_deadline()
            && member.armed.is_none_or(|armed| next < armed)
        {
            member.armed = Some(next);
            self.deadlines.push(Reverse((next, slot)));
        }
        if let Some(sink) = &mut self.pending_sink {
            let pending = Pending {
                running: member.state.has_running(),
                timers: member.state.next_deadline().is_some(),
            };
            sink(&member.name, pending);
        }
    }

    /// Fires every timer due by now, each instance's in order, with the steps they cause.
    pub fn fire_due_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((deadline, slot))) = self.deadlines.peek().copied()
            && deadline <= now
        {
            self.deadlines.pop();
            let Some(member) = self.members[slot].as_deref_mut() else {
                continue;
            };
            if member.armed == Some(deadline) {
                member.armed = None;
            }
            // An entry whose timer was cancelled fires nothing; `step` re-arms the next one.
            self.step(slot, |session| {
                while session.is_running()
                    && session.next_deadline().is_some_and(|next| next <= now)
                {
                    session.fire_due_timer();
                    session.handle_queued()?;
                }
                Ok(())
            });
        }
    }

    /// A message from a running effect of the instance in `slot`.
    pub(super) fn deliver(&mut self, slot: usize, message: EffectMessage) {
        self.step(slot, |session| session.receive(message));
    }
}

/// Hands each step to the batch being built.
struct BatchCheckpoint<'p> {
    run: String,
    writes: &'p mut Vec<Write>,
}

impl Checkpoint for BatchCheckpoint<'_> {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        self.writes.push(Write::step(self.run.clone(), step));
        Ok(())
    }
}
