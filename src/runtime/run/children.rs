//! Child protocols: each runs on a local task of its parent's host, reports through it, and (for a durable parent) commits its steps through it.

use super::Interpreter;
use super::algorithm::RunError;
use super::driver::{
    ChildLink, ChildNote, EventSource, Hosting, Observer, RunReport, drive_async, invoke_owner,
};
use super::host::{DriverHost, EffectMessage, EffectSink};
use super::input::{InputLineError, MAX_EVENT_LINE_BYTES};
use crate::base::durable::{Checkpoint, CheckpointStep, ChildChange, Resume, TimerPolicy};
use crate::base::event::{Event, Origin};
use crate::base::snapshot::ChildSnapshot;
use crate::base::value::Value;
use crate::pipeline::actions::{Directive, LogRecord};
use crate::pipeline::compile::machine::Machine;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Forwards a child protocol's logs, directives and the telemetry entries its parent keeps for
/// it (`ChildNote::Telemetry`) to its parent's driver; a directive says which child it is from
/// (`from`: the invoke ids down to it, `kid/grandkid`).
struct ChildObserver {
    parent: EffectSink,
    id: Arc<str>,
    /// The trace its parent's observer exports, if it does (`Observer::child_trace_context`):
    /// what this child does inside goes to it too, and its effects join it.
    trace: Option<crate::base::trace_context::ChildTrace>,
}

impl ChildObserver {
    fn tell(&self, note: ChildNote) {
        self.parent
            .send(EffectMessage::ChildTrace(self.id.clone(), note));
    }
}

impl Observer for ChildObserver {
    fn log(&mut self, record: &LogRecord, _time: &str) {
        let mut record = record.clone();
        record.from = Some(below(&self.id, record.from.as_deref()));
        self.parent.send(EffectMessage::Log(record));
    }

    fn directive(&mut self, directive: &Directive) {
        let mut directive = directive.clone();
        directive.from = Some(below(&self.id, directive.from.as_deref()));
        self.parent.send(EffectMessage::Directive(directive));
    }

    fn input_error(&mut self, _error: &InputLineError) {}

    fn child_trace_context(&self, id: &str) -> Option<crate::base::trace_context::ChildTrace> {
        self.trace.map(|trace| trace.child(id))
    }

    fn effect_trace(&self, invocation: u64) -> Option<crate::base::trace_context::EffectTrace> {
        self.trace.map(|trace| trace.effect(invocation))
    }

    fn state_entered(&mut self, state: &str) {
        if self.trace.is_some() {
            self.tell(ChildNote::StateEntered(state.to_string()));
        }
    }

    fn state_exited(&mut self, state: &str) {
        if self.trace.is_some() {
            self.tell(ChildNote::StateExited(state.to_string()));
        }
    }

    fn record(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        if super::telemetry_kinds::kept_of_a_child(kind) {
            self.tell(ChildNote::Telemetry {
                time: time.to_string(),
                kind: kind.to_string(),
                fields: fields.clone(),
            });
        }
        if self.trace.is_some()
            && matches!(
                kind,
                "effect_started" | "effect" | "map_started" | "map" | "invoke"
            )
        {
            self.tell(ChildNote::Record(kind.to_string(), fields));
        }
    }

    fn effect_attempt(&mut self, invocation: u64, attempt: u32, timeout_ms: Option<u64>) {
        if self.trace.is_some() {
            self.tell(ChildNote::Attempt {
                invocation,
                attempt,
                timeout_ms,
            });
        }
    }

    fn child_started(&mut self, machine: &Machine, id: &str) {
        if self.trace.is_some() {
            self.tell(ChildNote::ChildStarted {
                id: id.to_string(),
                owner: invoke_owner(machine, id).map(str::to_string),
            });
        }
    }

    /// A grandchild's, told on to the parent as below this child.
    fn child_trace(&mut self, path: &str, note: ChildNote) {
        self.parent
            .send(EffectMessage::ChildTrace(below(&self.id, Some(path)), note));
    }
}

/// Where a line or directive of child `id` comes from, seen from its parent: `id` itself, or
/// `id/below` when one of its own children sent it.
fn below(id: &Arc<str>, from: Option<&str>) -> Arc<str> {
    match from {
        Some(below) => Arc::from(format!("{id}/{below}")),
        None => id.clone(),
    }
}

/// A child protocol's checkpoint: each of its steps goes to its parent, which records it with
/// its own (the child's snapshot inside the parent's).
struct ParentCheckpoint {
    parent: EffectSink,
    id: Arc<str>,
}

impl Checkpoint for ParentCheckpoint {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        // A parent gone meanwhile has cancelled this child: nothing is left to record.
        self.parent
            .send(EffectMessage::ChildStep(self.id.clone(), Box::new(step)));
        Ok(())
    }
}

/// The event reporting how a child protocol ended: its output on `done.invoke.<id>` when it
/// reached a final state with exit code 0, otherwise `error.invoke.<id>` with a message; and how
/// it ended for its row.
fn invoke_outcome(
    parent: &Machine,
    request: &crate::pipeline::actions::InvokeRequest,
    result: Result<RunReport, RunError>,
) -> (Event, ChildChange) {
    let final_state = |report: &RunReport| {
        report
            .outcome
            .as_ref()
            .and_then(|outcome| outcome.state_name(&request.machine))
            .map(|state| state.to_string())
    };
    let ended = |final_state: Option<String>, exit_code: i32, output: serde_json::Value| {
        ChildChange::Ended {
            path: request.id.to_string(),
            final_state,
            exit_code,
            output,
        }
    };
    let failure = |message: String, report: Option<&RunReport>| {
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("id"), Value::String(request.id.clone()));
        data.insert(Arc::from("message"), Value::string(message));
        if let Some(outcome) = report.and_then(|report| report.outcome.as_ref()) {
            data.insert(Arc::from("exit_code"), Value::Int(outcome.exit_code.into()));
            if let Some(state) = outcome.state_name(&request.machine) {
                data.insert(Arc::from("state"), Value::String(state.clone()));
            }
            data.insert(Arc::from("output"), outcome.output.clone());
        }
        Event::of_type(parent, request.failed, Origin::Outcome)
            .with_data(Value::Map(Arc::new(data)))
    };
    match result {
        Ok(report) => match &report.outcome {
            Some(outcome) if outcome.exit_code == 0 => (
                Event::of_type(parent, request.done, Origin::Outcome)
                    .with_data(outcome.output.clone()),
                ended(final_state(&report), 0, outcome.output.to_stored_json()),
            ),
            Some(outcome) => {
                let message = match (&outcome.failure, outcome.state_name(&request.machine)) {
                    (Some(failure), _) => format!(
                        "the child protocol failed with exit code {}: {} was not handled: {}",
                        outcome.exit_code, failure.event, failure.message
                    ),
                    (None, state) => format!(
                        "the child protocol ended in `{}` with exit code {}",
                        state.map_or("?", |state| &**state),
                        outcome.exit_code
                    ),
                };
                (
                    failure(message, Some(&report)),
                    ended(
                        final_state(&report),
                        outcome.exit_code.into(),
                        outcome.output.to_stored_json(),
                    ),
                )
            }
            None => (
                failure(
                    format!(
                        "the child protocol stopped unfinished in {}",
                        report.active_states.join(", ")
                    ),
                    Some(&report),
                ),
                ended(
                    None,
                    crate::base::exit_code::UNFINISHED.into(),
                    serde_json::Value::Null,
                ),
            ),
        },
        Err(error) => (
            failure(error.to_string(), None),
            ended(None, error.exit_code().into(), serde_json::Value::Null),
        ),
    }
}

impl DriverHost<'_> {
    /// Runs a child protocol on a local task: a new one, or (`resumed`) one continuing from
    /// the step its parent's snapshot recorded, its timers re-armed by the given policy.
    pub(super) fn spawn_child(
        &mut self,
        request: crate::pipeline::actions::InvokeRequest,
        resumed: Option<(crate::base::snapshot::ChildSnapshot, TimerPolicy)>,
    ) {
        self.spawn_child_numbered(request, resumed, 0);
    }

    /// Starts a child again from its beginning for a redrive: its effects numbered from
    /// `first_invocation` (the failed child's count), so that their idempotency keys are new.
    pub(super) fn spawn_child_again(
        &mut self,
        request: crate::pipeline::actions::InvokeRequest,
        first_invocation: u64,
    ) {
        self.spawn_child_numbered(request, None, first_invocation);
    }

    fn spawn_child_numbered(
        &mut self,
        request: crate::pipeline::actions::InvokeRequest,
        resumed: Option<(crate::base::snapshot::ChildSnapshot, TimerPolicy)>,
        first_invocation: u64,
    ) {
        let tree = self.state.tree();
        let slot = match tree.take(self.max_children) {
            Ok(slot) => slot,
            Err(live) => return self.refuse_child(&request, live),
        };
        // As runs record theirs, so its row names the file from any directory.
        let protocol_path = std::path::Path::new(&request.machine.source_path)
            .canonicalize()
            .map_or_else(
                |_| request.machine.source_path.clone(),
                |path| path.display().to_string(),
            );
        let path = request.id.to_string();
        let protocol_hash = crate::store::read_files::recorded_hash(&request.machine);
        let inputs = request.machine.recorded_inputs(&request.inputs);
        if resumed.is_some() {
            // Its row is there, unless its parent was recorded before children had rows.
            self.child_changed(ChildChange::Resumed {
                path,
                protocol_path,
                protocol_hash,
                inputs,
            });
        } else {
            // Started anew: its row tells of this start.
            if self.state.running.has_child(&request.id) {
                // The same invoke started again before its state exited: the old child is gone.
                self.child_changed(ChildChange::cancelled(&request.id));
            }
            self.child_changed(ChildChange::Started {
                path,
                protocol_path,
                protocol_hash,
                inputs,
            });
        }
        let parent = self.completions();
        let machine = self.machine.clone();
        let mocks = self.mocks.clone();
        let id = request.id.clone();
        let (inbox, link_inbox) = if request.takes_events {
            let (sender, receiver) = mpsc::unbounded_channel();
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        let queue = super::running::ChildQueue {
            inbox,
            autoforward: request.autoforward,
            declared_events: request.machine.declared_events.clone(),
            inputs: request.inputs.iter().map(Value::to_stored_json).collect(),
            // Named without its state, which the child itself now holds.
            last_step: resumed.as_ref().map(|(child, _)| ChildSnapshot {
                snapshot: None,
                ..child.clone()
            }),
            slot,
        };
        let link = ChildLink {
            parent: parent.clone(),
            id: id.clone(),
            inbox: link_inbox,
            tree,
            // Its row's id: `<run>/<path>`, the path its parent's own run id already starts.
            run_id: self
                .state
                .run_id()
                .map(|run| Arc::from(format!("{run}/{id}"))),
            first_invocation,
        };
        // A durable parent records its children's steps with its own.
        let recording = self.recording;
        let trace = self.observer.child_trace_context(&id);
        // A child runs under its parent's limits: the budgets of the step that invokes it, and
        // the microstep limit.
        let limits = super::algorithm::Limits {
            budgets: crate::pipeline::compile::budget::current(),
            max_microsteps: self.max_microsteps,
            max_children: self.max_children,
            max_tree_bytes: self.max_tree_bytes,
        };
        // The child's driver holds borrowed state, so it runs on this thread (a local task).
        let handle = tokio::task::spawn_local(async move {
            let resume = match &resumed {
                None => Ok(None),
                Some((ChildSnapshot { snapshot: None, .. }, _)) => Err(RunError::Checkpoint {
                    message: "the child cannot be resumed: its state was not found in the store"
                        .into(),
                }),
                Some((child, timers)) => Ok(child.snapshot.as_deref().map(|snapshot| Resume {
                    snapshot: snapshot.clone(),
                    sequence: child.sequence,
                    committed_unix_milliseconds: child.committed_unix_milliseconds,
                    timers: *timers,
                    children_again: Vec::new(),
                })),
            };
            let resume = match resume {
                Ok(resume) => resume,
                Err(error) => {
                    let (event, ended) = invoke_outcome(&machine, &request, Err(error));
                    parent.send(EffectMessage::InvokeOutcome(
                        request.id.clone(),
                        event,
                        ended,
                    ));
                    return;
                }
            };
            let restored = match &resume {
                Some(resume) => Interpreter::restore(
                    request.machine.clone(),
                    request.inputs.clone(),
                    &resume.snapshot,
                )
                .map_err(|error| RunError::Checkpoint {
                    message: format!("the child cannot be resumed: {error}"),
                }),
                None => Ok(Interpreter::new(
                    request.machine.clone(),
                    request.inputs.clone(),
                )),
            }
            .map(|child| child.with_limits(limits));
            let mut observer = ChildObserver {
                parent: parent.clone(),
                id: request.id.clone(),
                trace,
            };
            // A restored child is already in its states: their visits go on in this session.
            if let (Some(_), Some(_), Ok(child)) = (trace, &resume, &restored) {
                let states = child.active_states().into_iter().map(str::to_string);
                observer.tell(ChildNote::StatesRestored(states.collect()));
            }
            let mut checkpoint = ParentCheckpoint {
                parent: parent.clone(),
                id: request.id.clone(),
            };
            let result = match restored {
                Ok(mut child) => {
                    Box::pin(drive_async(
                        &mut child,
                        EventSource::None,
                        false,
                        MAX_EVENT_LINE_BYTES,
                        mocks,
                        &mut observer,
                        Hosting {
                            checkpoint: recording.then_some(&mut checkpoint as &mut dyn Checkpoint),
                            resume: resume.as_ref(),
                            signals: false,
                            child: Some(link),
                        },
                    ))
                    .await
                }
                Err(error) => Err(error),
            };
            let (event, ended) = invoke_outcome(&machine, &request, result);
            parent.send(EffectMessage::InvokeOutcome(
                request.id.clone(),
                event,
                ended,
            ));
        });
        if self.state.running.start_child(id.clone(), handle, queue) {
            // The same invoke started again before its state exited: the old child is gone.
            let time = self.now_text();
            let fields = serde_json::json!({"id": &*id, "outcome": "superseded"});
            self.observer.record(&time, "invoke", fields);
        }
        self.observer.child_started(&self.machine, &id);
    }

    /// A child not started because its tree has `--max-children` alive: its invoke (or its
    /// map's item) fails with `error.invoke.<id>`, delivered as any child's outcome.
    fn refuse_child(&mut self, request: &crate::pipeline::actions::InvokeRequest, live: usize) {
        let message = format!(
            "the child protocol `{}` was not started: its run tree has {live} child protocols \
             alive, the limit (--max-children); one starts once another ends",
            request.id
        );
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("id"), Value::String(request.id.clone()));
        data.insert(Arc::from("message"), Value::string(message));
        data.insert(Arc::from("limit"), Value::string("max_children"));
        let event = Event::of_type(&self.machine, request.failed, Origin::Outcome)
            .with_data(Value::Map(Arc::new(data)));
        self.state.extras_mut().refused_children += 1;
        self.completions()
            .send(EffectMessage::InvokeRefused(request.id.clone(), event));
    }
}
