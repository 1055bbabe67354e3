//! A session: one instance with its queue, timers and running work, stepped an event at a time by the run loop, a `serve` fleet or a scenario.

use super::Interpreter;
use super::algorithm::{RunError, Selection};
use super::driver::{Observer, RunReport};
use super::host::{DriverHost, DriverState, EffectMessage, Waiting};
use super::input::InputLines;
use crate::base::durable::{Checkpoint, CheckpointStep, Resume, TimerPolicy};
use crate::base::event::{Event, Origin};
use crate::base::snapshot::{InFlightEffect, PendingTimer};
use crate::base::value::Value;
use crate::effects::EffectRequest;
use crate::effects::mock::Mocks;
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::admission::{EventOutcome, EventReport};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What one wait ended with.
pub enum Waited {
    /// An effect reported, or a timer fired.
    Progress,
    /// The deadline given to `wait` was reached.
    Deadline,
    /// An input line (or why it could not be read), or the end of input (`None`).
    Line(Option<Result<String, String>>),
    /// The look at the events other processes queued for the run is due (`take_queued`).
    Queued,
}

/// A started machine with its queues, timers and running effects: the steps a driver (the CLI
/// run loop, a scenario) takes, one at a time, on the (possibly virtual) tokio clock.
pub struct Session<'a> {
    pub interpreter: &'a mut Interpreter,
    pub(super) host: DriverHost<'a>,
    /// Effect outcomes, once an effect has started (`DriverHost::completions`).
    completed: Option<mpsc::UnboundedReceiver<EffectMessage>>,
    /// Timers do not fire while held (virtual time with an open event stream).
    pub(super) timers_held: bool,
    /// Where each macrostep is committed (durable runs).
    pub(super) checkpoint: Option<&'a mut dyn Checkpoint>,
    /// A child protocol's queue, which its parent sends to.
    pub(super) inbox: Option<mpsc::UnboundedReceiver<Event>>,
    /// When the next look at the events other processes queued for the run is due (a durable
    /// run's checkpoint that has an inbox, `Checkpoint::queued_every`; never on virtual time).
    pub(super) next_queued_look: Option<Instant>,
    /// What became of the last input event's macrostep, for a queued event's entry.
    pub(super) last_input_report: Option<EventReport>,
    /// A cancel taken from the run's inbox: the driver stops, and its front end records the
    /// run cancelled.
    pub(super) cancel_request: Option<super::queued::CancelRequest>,
}

impl<'a> Session<'a> {
    /// A session over an instance and what its driver keeps between steps (`DriverState`):
    /// a single run makes one of each; a host of many instances keeps them parked, and opens a
    /// session over one when something happens to it. The external queue starts empty.
    pub fn new(
        interpreter: &'a mut Interpreter,
        state: &'a mut DriverState,
        mocks: Arc<std::sync::Mutex<Mocks>>,
        observer: &'a mut dyn Observer,
    ) -> Session<'a> {
        let machine = interpreter.machine().clone();
        let max_microsteps = interpreter.limits().max_microsteps;
        let max_children = interpreter.limits().max_children;
        let max_tree_bytes = interpreter.limits().max_tree_bytes;
        let host = DriverHost {
            max_microsteps,
            max_children,
            max_tree_bytes,
            external_queue: VecDeque::new(),
            state,
            observer,
            machine,
            new_receiver: None,
            mocks,
            taken: Vec::new(),
            step_actions: Vec::new(),
            recording: false,
            child_changes: Vec::new(),
            child_states: Vec::new(),
            parent: None,
            commit_due: false,
        };
        Session {
            interpreter,
            host,
            completed: None,
            timers_held: false,
            checkpoint: None,
            inbox: None,
            next_queued_look: None,
            last_input_report: None,
            cancel_request: None,
        }
    }

    /// Commits every macrostep to `checkpoint`, from the start (step 0) on.
    pub fn with_checkpoint(mut self, checkpoint: &'a mut dyn Checkpoint) -> Session<'a> {
        self.checkpoint = Some(checkpoint);
        self.host.recording = true;
        self
    }

    /// Commits the step just taken, with the state after it, then tells what became of the
    /// events the step discarded (a sender is told only what the journal holds).
    fn commit(&mut self, event: Option<&Event>) -> Result<(), RunError> {
        self.commit_step(event)?;
        let untold = match self.host.state.extras.as_deref_mut() {
            Some(inbox) if !inbox.untold.is_empty() => std::mem::take(&mut inbox.untold),
            _ => return Ok(()),
        };
        let time = self.host.now_text();
        for report in untold {
            self.host.observer.event_outcome(&time, &report);
        }
        Ok(())
    }

    fn commit_step(&mut self, event: Option<&Event>) -> Result<(), RunError> {
        self.host.commit_due = false;
        let taken = std::mem::take(&mut self.host.taken);
        let actions = std::mem::take(&mut self.host.step_actions);
        let children = std::mem::take(&mut self.host.child_changes);
        let child_states = std::mem::take(&mut self.host.child_states);
        let Some(checkpoint) = self.checkpoint.as_deref_mut() else {
            return Ok(());
        };
        let mut snapshot = self.interpreter.snapshot();
        let now_unix = self.host.now_milliseconds();
        snapshot.timers = self
            .host
            .state
            .timers
            .iter()
            .map(
                |((deadline, _), (id, event, delay, absolute))| PendingTimer {
                    event: event.name.to_string(),
                    send_id: id.as_deref().map(String::from),
                    deadline_unix_milliseconds: self.host.state.unix_milliseconds_at(*deadline),
                    delay_milliseconds: *delay,
                    // `after` timers are named `after.<state>.<index>`, a reserved prefix.
                    private: event.name.starts_with("after."),
                    absolute: *absolute,
                    data: event.data.to_stored_json(),
                },
            )
            .collect();
        snapshot.effects = self
            .host
            .state
            .running
            .effects()
            .iter()
            .map(|effect| InFlightEffect {
                action: effect.request.id.to_string(),
                kind: effect.request.kind.name().to_string(),
                attempt: effect
                    .progress
                    .as_ref()
                    .map_or(1, |progress| progress.attempt),
                retriers: effect
                    .progress
                    .as_ref()
                    .map(|progress| progress.retriers.clone())
                    .unwrap_or_default(),
                request: serde_json::to_value(&effect.request).unwrap_or(serde_json::Value::Null),
                invocation: effect.invocation,
                started_unix_milliseconds: effect.started_unix_milliseconds,
            })
            .collect();
        snapshot.invocations = self.host.state.running.invocations();
        snapshot.children = self.host.state.running.child_snapshots();
        snapshot.maps = self
            .host
            .state
            .running
            .maps
            .iter()
            .filter_map(|map| serde_json::to_value(map).ok())
            .collect();
        snapshot.deferred = self
            .host
            .state
            .waiting()
            .iter()
            .map(|waiting| crate::base::snapshot::DeferredEvent {
                event: waiting.event.name.to_string(),
                data: waiting.event.data.to_stored_json(),
                from_child: waiting.event.invoke_id.as_deref().map(String::from),
                ticket: waiting.ticket,
            })
            .collect();
        let step = CheckpointStep {
            sequence: self.host.state.step,
            event: event.map(|event| (event.name.to_string(), event.data.to_json())),
            transitions: taken,
            actions: serde_json::Value::Array(actions),
            snapshot,
            unix_milliseconds: now_unix,
            children,
            child_states,
        };
        self.host.state.step += 1;
        checkpoint
            .commit(step)
            .map_err(|message| RunError::Checkpoint { message })
    }

    /// Commits the steps the checkpoint held back, then lets the observer release what tells of
    /// them: nothing is told of a step before it is committed.
    pub fn flush(&mut self) -> Result<(), RunError> {
        if let Some(checkpoint) = self.checkpoint.as_deref_mut() {
            // The telemetry of the steps goes into their transaction: kept exactly when they are.
            if let Some(lines) = self.host.observer.take_telemetry() {
                checkpoint
                    .telemetry(lines)
                    .map_err(|message| RunError::Checkpoint { message })?;
            }
            checkpoint
                .flush()
                .map_err(|message| RunError::Checkpoint { message })?;
        }
        self.host.observer.release();
        Ok(())
    }

    /// Continues a restored run instead of starting it: re-arms its timers by `resume.timers`,
    /// and restarts (policy `retry`) or fails (policy `fail`) the effects that were running.
    /// Entry actions do not run again.
    pub fn resume(&mut self, resume: &Resume) -> Result<(), RunError> {
        self.host.state.step = resume.sequence + 1;
        let now = Instant::now();
        let now_unix = self.host.now_milliseconds();
        let machine = self.host.machine.clone();
        for timer in &resume.snapshot.timers {
            // A deadline keeps its own instant on this run's clock (a past one is due at once).
            let after = |milliseconds| now + std::time::Duration::from_millis(milliseconds);
            let due = match resume.timers {
                _ if timer.absolute => self.host.state.instant_at(timer.deadline_unix_milliseconds),
                TimerPolicy::Deadline => {
                    self.host.state.instant_at(timer.deadline_unix_milliseconds)
                }
                TimerPolicy::Remaining => after(
                    timer
                        .deadline_unix_milliseconds
                        .saturating_sub(resume.committed_unix_milliseconds),
                ),
                TimerPolicy::Restart => after(timer.delay_milliseconds),
            };
            // A delayed send's event is external, as when it was sent; a timer's is the engine's.
            let origin = if timer.private {
                Origin::Platform
            } else {
                Origin::External
            };
            let event = Event::named(
                &machine,
                &timer.event,
                Value::from_stored_json(&timer.data),
                origin,
            );
            self.host.add_timer(
                due,
                (
                    timer.send_id.as_deref().map(Arc::from),
                    event,
                    timer.delay_milliseconds,
                    timer.absolute,
                ),
            );
        }
        for deferred in &resume.snapshot.deferred {
            let origin = match deferred.from_child {
                Some(_) => Origin::Child,
                None => Origin::External,
            };
            let mut event = Event::named(
                &machine,
                &deferred.event,
                Value::from_stored_json(&deferred.data),
                origin,
            );
            event.invoke_id = deferred.from_child.as_deref().map(Arc::from);
            self.host
                .state
                .extras
                .get_or_insert_default()
                .waiting
                .push(Waiting {
                    event,
                    ticket: deferred.ticket,
                });
        }
        self.host
            .state
            .running
            .continue_from(resume.snapshot.invocations);
        self.host.restore_maps(&resume.snapshot.maps);
        for effect in &resume.snapshot.effects {
            let request: Option<EffectRequest> =
                serde_json::from_value(effect.request.clone()).ok();
            // Processes the interrupted effect left running are stopped first, so a retry never
            // runs beside them.
            if request.as_ref().is_some_and(stop_leftover_processes) {
                let time = self.host.now_text();
                let fields = serde_json::json!({
                    "id": effect.action,
                    "invocation": effect.invocation,
                    "outcome": "stopped_on_resume",
                });
                self.host.observer.record(&time, "effect", fields);
            }
            match request {
                Some(request) if request.on_interrupt == crate::effects::InterruptPolicy::Retry => {
                    // Its retry plan goes on from the attempt that was running.
                    let from = (effect.attempt > 1).then(|| crate::effects::PlanProgress {
                        attempt: effect.attempt,
                        retriers: effect.retriers.clone(),
                    });
                    if self.host.is_map_item(effect.invocation) {
                        self.host.restart_map_item(effect.invocation, request, from);
                    } else {
                        self.host.start_effect_from(request, from);
                    }
                }
                request => {
                    let event = interrupted_failure(&machine, effect, request.as_ref(), now_unix);
                    if self.host.is_map_item(effect.invocation) {
                        // Its map keeps the failure as the item's outcome.
                        self.host.record_item(
                            effect.invocation,
                            super::fan_out::ItemStatus::Error,
                            &event.data,
                        );
                    } else if self.interpreter.is_running() {
                        self.host.external_queue.push_back(event);
                    } else {
                        self.host.receive_interrupted_after_finish(effect, &event);
                    }
                }
            }
        }
        // Maps go on: items not started yet start, a map whose items all ended completes.
        if self.interpreter.is_running() {
            self.host.resume_maps();
        } else {
            self.host.maps_after_the_run();
        }
        // Children continue where their last committed step left them: no entry action again.
        for child in &resume.snapshot.children {
            if self.host.resume_map_child(child, resume.timers) {
                continue;
            }
            let Some(request) = self.invoke_request(&child.id, &child.inputs) else {
                continue;
            };
            self.host
                .spawn_child(request, Some((child.clone(), resume.timers)));
        }
        // A redrive's failed children start again from their beginning, while the state that
        // invoked them is still active.
        for child in &resume.children_again {
            let invoking = machine
                .states
                .iter()
                .find(|state| state.invokes.iter().any(|invoke| *invoke.id == *child.id));
            if !invoking.is_some_and(|state| self.interpreter.is_active(&state.id)) {
                continue;
            }
            if let Some(request) = self.invoke_request(&child.id, &child.inputs) {
                self.host.spawn_child_again(request, child.first_invocation);
            }
        }
        self.host.restart_map_children();
        let time = self.host.now_text();
        let fields = serde_json::json!({
            "protocol": machine.id,
            "configuration": self.interpreter.active_leaves(),
            "states": self.interpreter.active_states(),
            "step": resume.sequence,
            "children": resume.snapshot.children.iter().map(|child| &child.id).collect::<Vec<_>>(),
        });
        self.host.observer.record(&time, "resume", fields);
        self.host.warn_if_unconfined();
        // The resume is a step of its own: the effects it restarted (their tags, their new
        // invocations) are durable before anything else happens, so a second crash finds them.
        if self.host.recording {
            self.host
                .step_actions
                .insert(0, serde_json::json!({"resumed": resume.sequence}));
        }
        self.commit(None)
    }

    /// The invoke `id` of the protocol, to start with `inputs` (stored, in the child's
    /// declaration order); `None`, recorded, when the protocol has no such invoke.
    fn invoke_request(
        &mut self,
        id: &str,
        inputs: &[serde_json::Value],
    ) -> Option<crate::pipeline::actions::InvokeRequest> {
        let machine = self.interpreter.machine().clone();
        let Some(invoke) = machine
            .states
            .iter()
            .flat_map(|state| &state.invokes)
            .find(|invoke| *invoke.id == *id)
        else {
            let time = self.host.now_text();
            let fields = serde_json::json!({"id": id, "outcome": "unknown_on_resume"});
            self.host.observer.record(&time, "invoke", fields);
            return None;
        };
        Some(crate::pipeline::actions::InvokeRequest {
            id: invoke.id.clone(),
            machine: invoke.machine.clone(),
            inputs: inputs.iter().map(Value::from_stored_json).collect(),
            done: invoke.done,
            failed: invoke.failed,
            autoforward: invoke.autoforward,
            takes_events: invoke.takes_events,
        })
    }

    /// Enters the initial configuration.
    pub fn start(&mut self) -> Result<(), RunError> {
        self.begin(None)
    }

    /// Begins a restored configuration by entering `states` of it (a scenario's `start:`).
    pub fn start_in(
        &mut self,
        states: &[crate::pipeline::compile::machine::StateId],
    ) -> Result<(), RunError> {
        self.begin(Some(states))
    }

    fn begin(
        &mut self,
        states: Option<&[crate::pipeline::compile::machine::StateId]>,
    ) -> Result<(), RunError> {
        self.host.warn_if_unconfined();
        self.interpreter.set_clock(self.host.now_milliseconds());
        match states {
            None => self.interpreter.start(&mut self.host)?,
            Some(states) => self.interpreter.start_in(&mut self.host, states)?,
        }
        self.after_step()?;
        let time = self.host.now_text();
        let start = serde_json::json!({
            "protocol": self.host.machine.id,
            "configuration": self.interpreter.active_leaves(),
            "states": self.interpreter.active_states(),
        });
        self.host.observer.record(&time, "start", start);
        self.commit(None)
    }

    /// Queues an external event.
    pub fn send(&mut self, event: Event) {
        self.host.external_queue.push_back(event);
    }

    /// Whether the instance has not reached a top-level final state.
    pub fn is_running(&self) -> bool {
        self.interpreter.is_running()
    }

    /// Moves the earliest timer that is due onto the queue (one: handling it may cancel others).
    pub fn fire_due_timer(&mut self) {
        self.host.fire_due_timer();
    }

    /// Takes in a message a running effect sent to a host's shared channel.
    pub(crate) fn receive(&mut self, message: EffectMessage) -> Result<(), RunError> {
        let running = self.interpreter.is_running();
        self.host.receive(message, running);
        self.commit_between_steps()
    }

    /// Commits what happened between macrosteps that must be durable: a child's step, or after
    /// the final state what the effects that ended since did (the commit that leaves none
    /// running finishes the run in the store).
    pub fn commit_between_steps(&mut self) -> Result<(), RunError> {
        let after_finish = !self.interpreter.is_running() && !self.host.step_actions.is_empty();
        if !after_finish && !self.host.commit_due {
            return Ok(());
        }
        self.commit(None)
    }

    /// After a step: the run tree's data accounted for; a run that reached its final state
    /// fires no more timers, and the outcomes waiting on its queue are recorded as ended after
    /// it.
    fn after_step(&mut self) -> Result<(), RunError> {
        self.account_tree_data()?;
        if self.interpreter.is_running() {
            return Ok(());
        }
        if !self.host.state.timers.is_empty() {
            self.host.state.timers.clear();
            self.host.state.timers_changed = true;
        }
        if !self.host.external_queue.is_empty() {
            self.host.outcomes_after_the_run();
        }
        self.host.maps_after_the_run();
        self.discard_waiting();
        Ok(())
    }

    /// Reports this instance's context and pending event data to its run tree, if it belongs
    /// to one (it has, or is, a child protocol): past `--max-tree-bytes` for the whole tree, this
    /// instance, which grew it, stops. A run with no children pays nothing.
    fn account_tree_data(&mut self) -> Result<(), RunError> {
        let Some(extras) = self.host.state.extras.as_deref() else {
            return Ok(());
        };
        let Some(tree) = extras.tree.clone() else {
            return Ok(());
        };
        let before = extras.tree_bytes;
        let now = self
            .interpreter
            .instance
            .context
            .iter()
            .map(crate::base::value::Value::size_in_bytes)
            .fold(self.host.state.held_event_bytes(), usize::saturating_add);
        let total = tree.hold(before, now);
        self.host.state.extras_mut().tree_bytes = now;
        let limit = self.host.max_tree_bytes;
        if now > before && total > limit {
            return Err(RunError::TreeBytes { total, limit });
        }
        Ok(())
    }

    /// The run ended: every event still waiting in its inbox is discarded, and said so.
    fn discard_waiting(&mut self) {
        let Some(inbox) = self.host.state.extras.as_deref_mut() else {
            return;
        };
        let waiting = std::mem::take(&mut inbox.waiting);
        for entry in waiting {
            let report = EventReport {
                event: entry.event.name.clone(),
                outcome: EventOutcome::Discarded,
                reason: Some(
                    "the run ended while it waited in the inbox (deferred), before a state took it"
                        .into(),
                ),
                ticket: entry.ticket,
                waited: true,
            };
            let line = report.to_json();
            if let Some(inbox) = self.host.state.extras.as_deref_mut() {
                inbox.discarded.push(line);
                inbox.untold.push(report);
            }
        }
    }

    /// Handles every queued external event, one macrostep each.
    pub fn handle_queued(&mut self) -> Result<(), RunError> {
        while self.interpreter.is_running() {
            let Some(event) = self.host.external_queue.pop_front() else {
                break;
            };
            self.handle_one(&event)?;
        }
        Ok(())
    }

    /// Offers an input event (an `--events` line, a `serve` line, an MCP `send_event`) after
    /// what is queued before it, and handles the queue. What became of it (taken, deferred,
    /// discarded) goes to the observer with `ticket`, the sender's number for it.
    pub fn offer(&mut self, event: Event, ticket: Option<u64>) -> Result<(), RunError> {
        self.handle_queued()?;
        self.handle_event(&event, ticket)?;
        self.handle_queued()
    }

    /// One external event's macrostep, observed and committed.
    fn handle_one(&mut self, event: &Event) -> Result<(), RunError> {
        self.handle_event(event, None)
    }

    /// One external event's macrostep, observed and committed, then the deferred events
    /// offered again if the configuration changed. An input event's outcome is reported.
    fn handle_event(&mut self, event: &Event, ticket: Option<u64>) -> Result<(), RunError> {
        if event.origin == Origin::Outcome {
            self.host.delivered(event);
        }
        // Children with `autoforward` get the external events their parent takes.
        if event.origin == Origin::External && self.host.state.running.has_children() {
            self.host.state.running.autoforward(event);
        }
        let now = self.host.now_milliseconds();
        self.interpreter.set_clock(now);
        let before = (!self.host.state.waiting().is_empty())
            .then(|| self.interpreter.instance.configuration.clone());
        let selection = self.interpreter.take(event, &mut self.host)?;
        let report = is_input(event).then(|| self.settle(event, selection, ticket));
        self.last_input_report = report.clone();
        self.after_step()?;
        // Committed before it is told: a sender told `deferred` finds its event in the journal.
        self.commit(Some(event))?;
        let observer = &mut self.host.observer;
        observer.step(now, event, self.interpreter, report.as_ref());
        if before.is_some_and(|before| before != self.interpreter.instance.configuration) {
            self.offer_waiting()?;
        }
        Ok(())
    }

    /// What becomes of an input event its macrostep did or did not take: taken, or deferred
    /// into the inbox (refused past its bound), or discarded.
    fn settle(&mut self, event: &Event, selection: Selection, ticket: Option<u64>) -> EventReport {
        let (outcome, reason) = if selection == Selection::Taken {
            (EventOutcome::Taken, None)
        } else if selection == Selection::GuardFailed {
            let reason = crate::runtime::run::admission::GUARD_FAILED;
            (EventOutcome::Discarded, Some(reason.into()))
        } else if let Some(state) = self.interpreter.deferred_by(event) {
            match self.defer(event, ticket) {
                Ok(waiting) => (
                    EventOutcome::Deferred,
                    Some(
                        format!(
                            "{} defers it: it waits in the inbox ({waiting} waiting) and is \
                             offered again when the active states change",
                            self.deferring_name(state)
                        )
                        .into(),
                    ),
                ),
                Err(limit) => (EventOutcome::Refused, Some(limit.into())),
            }
        } else {
            (EventOutcome::Discarded, Some(self.discarded_reason()))
        };
        EventReport {
            event: event.name.clone(),
            outcome,
            reason,
            ticket,
            waited: false,
        }
    }

    /// `state `x`` for a state that defers, `the protocol` for the top level's `defer:`.
    fn deferring_name(&self, state: crate::pipeline::compile::machine::StateId) -> String {
        if state == crate::pipeline::compile::machine::StateId::ROOT {
            "the protocol's `defer:`".to_string()
        } else {
            format!("state `{}`", self.host.machine.state(state).id)
        }
    }

    /// Why an event is discarded now: the fixed text (an observer that prints for a reader
    /// spells it out with `admission::discarded_reason`).
    fn discarded_reason(&self) -> std::borrow::Cow<'static, str> {
        let reason = if self.interpreter.is_running() {
            crate::runtime::run::admission::DISCARDED
        } else {
            crate::runtime::run::admission::AFTER_THE_END
        };
        reason.into()
    }

    /// Puts `event` in the inbox, within the bounds the run's pending events share: at most
    /// `--max-pending-sends` events waiting, their data within the pending-data limit. Returns
    /// how many wait now, or why it cannot wait.
    fn defer(&mut self, event: &Event, ticket: Option<u64>) -> Result<usize, String> {
        let budgets = self.interpreter.limits().budgets;
        let count = self.host.state.waiting().len();
        if count >= budgets.max_pending_sends {
            return Err(format!(
                "the run's inbox already holds {count} deferred events, the limit; raise it \
                 with --max-pending-sends"
            ));
        }
        let held = self
            .host
            .state
            .held_event_bytes()
            .saturating_add(event.data.size_in_bytes());
        let limit = budgets.max_context_bytes();
        if held > limit {
            return Err(format!(
                "deferring it would make the data of the events this run holds (pending \
                 delayed sends and deferred events) {held} bytes, more than {limit} ({} times \
                 --max-value-bytes); raise it with --max-value-bytes",
                crate::pipeline::compile::budget::CONTEXT_VALUES
            ));
        }
        let inbox = self.host.state.extras.get_or_insert_default();
        inbox.waiting.push(Waiting {
            event: event.clone(),
            ticket,
        });
        Ok(inbox.waiting.len())
    }

    /// Offers the deferred events again, oldest first, after the configuration changed: each
    /// one a transition takes now leaves the inbox (and the scan starts again from the oldest,
    /// the configuration having changed again); one no state defers any more is discarded.
    fn offer_waiting(&mut self) -> Result<(), RunError> {
        let mut index = 0;
        while self.interpreter.is_running() {
            let Some(waiting) = self.host.state.waiting().get(index).cloned() else {
                break;
            };
            let now = self.host.now_milliseconds();
            self.interpreter.set_clock(now);
            let before = self.interpreter.instance.configuration.clone();
            let selection = self.interpreter.take(&waiting.event, &mut self.host)?;
            let taken = selection == Selection::Taken;
            let changed = before != self.interpreter.instance.configuration;
            let still_deferred = !taken && self.interpreter.deferred_by(&waiting.event).is_some();
            if still_deferred && !changed {
                index += 1;
                continue;
            }
            let report = (!still_deferred).then(|| {
                let (outcome, reason) = match selection {
                    Selection::Taken => (EventOutcome::Taken, None),
                    Selection::GuardFailed => (
                        EventOutcome::Discarded,
                        Some(crate::runtime::run::admission::GUARD_FAILED.into()),
                    ),
                    Selection::NotTaken => (EventOutcome::Discarded, Some(self.discarded_reason())),
                };
                EventReport {
                    event: waiting.event.name.clone(),
                    outcome,
                    reason,
                    ticket: waiting.ticket,
                    waited: true,
                }
            });
            if report.is_some()
                && let Some(inbox) = self.host.state.extras.as_deref_mut()
            {
                inbox.waiting.remove(index);
            }
            self.after_step()?;
            self.commit(Some(&waiting.event))?;
            let observer = &mut self.host.observer;
            observer.step(now, &waiting.event, self.interpreter, report.as_ref());
            if taken {
                index = 0;
            } else if still_deferred {
                index += 1;
            }
        }
        Ok(())
    }

    /// Sets what the run's clock reads now (Unix milliseconds): a scenario's fixed start, so
    /// `now()` and timestamps are the same on every run. Call before `start`.
    pub fn set_wall_clock(&mut self, unix_milliseconds: u64) {
        self.host.state.started_unix_milliseconds = unix_milliseconds;
        self.host.state.started_at = Instant::now();
    }

    /// Lets `duration` of (virtual) time pass, handling each timer that falls due, in order,
    /// with the macrosteps it causes.
    pub async fn advance(&mut self, duration: std::time::Duration) -> Result<(), RunError> {
        let target = Instant::now() + duration;
        loop {
            self.handle_queued()?;
            if !self.interpreter.is_running() {
                return Ok(());
            }
            let timer_due = self
                .next_deadline()
                .is_some_and(|deadline| deadline <= target);
            if timer_due || self.effects_running() {
                if let Waited::Deadline = self.wait(Some(target), None).await {
                    return self.handle_queued();
                }
            } else {
                tokio::time::sleep_until(target).await;
                return self.handle_queued();
            }
        }
    }

    /// Whether effects or child protocols are still running.
    pub fn effects_running(&self) -> bool {
        self.host.state.has_running()
    }

    /// The earliest pending timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.host.next_deadline()
    }

    /// When each pending timer is due, earliest first.
    pub fn timer_deadlines(&self) -> impl Iterator<Item = Instant> + '_ {
        self.host
            .state
            .timers
            .iter()
            .map(|((deadline, _), _)| *deadline)
    }

    /// Waits for the next thing to happen: an effect's message, a due timer, `until`, or an input
    /// line. On the virtual clock, the wait jumps straight to the earliest of them.
    pub async fn wait(&mut self, until: Option<Instant>, input: Option<&mut InputLines>) -> Waited {
        let deadline = self.host.next_deadline();
        if self.completed.is_none() {
            self.completed = self.host.new_receiver.take();
        }
        let effects_pending = self.host.state.has_running();
        let timer = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        let limit = async {
            match until {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        let reading = input.is_some();
        let inbox_open = self.inbox.is_some();
        let queued_look = async {
            match self.next_queued_look {
                Some(due) => tokio::time::sleep_until(due).await,
                None => std::future::pending().await,
            }
        };
        let from_parent = async {
            match self.inbox.as_mut() {
                Some(inbox) => inbox.recv().await,
                None => std::future::pending().await,
            }
        };
        let next_line = async {
            match input {
                Some(lines) => lines.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            // In a block: the branch's expression is evaluated even when the branch is off.
            Some(message) = async {
                match self.completed.as_mut() {
                    Some(completed) => completed.recv().await,
                    None => std::future::pending().await,
                }
            }, if effects_pending => {
                self.host.receive(message, self.interpreter.is_running());
                Waited::Progress
            }
            // Input before timers: on the virtual clock a timer is always ready, and input
            // must not starve behind it.
            line = next_line, if reading => Waited::Line(line),
            event = from_parent, if inbox_open => {
                match event {
                    Some(event) => {
                        // The parent's events are input to this protocol, admitted like any other.
                        match crate::runtime::run::admission::admit(&self.host.machine, &event.name, &event.data) {
                            Err(message) => self.host.refuse_event(&event.name, "parent", message),
                            // Event types are the sender's machine's: this one names them anew.
                            Ok(()) => {
                                let event = Event::named(&self.host.machine, &event.name, event.data, Origin::External);
                                self.host.external_queue.push_back(event);
                            }
                        }
                    }
                    // The parent is gone: nothing more will come.
                    None => self.inbox = None,
                }
                Waited::Progress
            }
            () = timer, if !self.timers_held && deadline.is_some_and(|deadline| until.is_none_or(|until| deadline <= until)) => {
                self.host.fire_due_timer();
                Waited::Progress
            }
            () = limit, if until.is_some() => Waited::Deadline,
            () = queued_look, if self.next_queued_look.is_some() => Waited::Queued,
        }
    }

    /// A signal stops the run: every effect still running is recorded as interrupted (its
    /// process is stopped when the runtime goes; a resume applies its `on_interrupt`).
    pub fn record_interrupted(&mut self) {
        self.host.record_interrupted();
    }

    /// Ends the session: records the finish and reports.
    pub fn finish(mut self) -> RunReport {
        let time = self.host.now_text();
        let outcome = self.interpreter.outcome().cloned();
        let finish = super::driver::finish_fields(self.interpreter);
        self.host.observer.record(&time, "finish", finish);
        RunReport {
            stopped_by_signal: false,
            cancelled: self.cancel_request.take(),
            effects: self.host.state.effects_after_finish().to_vec(),
            discarded: self.host.state.discarded_at_finish().to_vec(),
            outcome,
            active_states: self
                .interpreter
                .active_leaves()
                .into_iter()
                .map(String::from)
                .collect(),
            context: self.interpreter.context_json(),
        }
    }
}

/// How long a resume waits for an interrupted effect's leftover processes to die.
pub(super) const STOP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Stops the processes an interrupted effect (`request`) left running, waiting up to
/// `STOP_PATIENCE`; says whether there were any.
fn stop_leftover_processes(request: &EffectRequest) -> bool {
    match &request.kind {
        crate::effects::EffectKind::Process(process) => process
            .tag
            .as_deref()
            .is_some_and(|tag| crate::effects::process::stop_tagged_and_wait(tag, STOP_PATIENCE)),
        _ => false,
    }
}

/// Stops the processes the effects `snapshot` records as running left behind, its children's
/// too: a run that ends without being resumed (cancelled while no host drove it) leaves none.
pub fn stop_processes_left_by(snapshot: &crate::base::snapshot::Snapshot) {
    for effect in &snapshot.effects {
        if let Ok(request) = serde_json::from_value::<EffectRequest>(effect.request.clone()) {
            stop_leftover_processes(&request);
        }
    }
    for child in &snapshot.children {
        if let Some(state) = &child.snapshot {
            stop_processes_left_by(state);
        }
    }
}

/// The failure event of an effect the engine stopped while it ran, with the fields any failure
/// of that effect has (`attempts`, `timed_out`, `elapsed_ms`, ...) and `interrupted: true`.
pub(super) fn interrupted_failure(
    machine: &Machine,
    effect: &InFlightEffect,
    request: Option<&EffectRequest>,
    now_unix_milliseconds: u64,
) -> Event {
    let mut outcome = crate::effects::EffectOutcome::failure(
        &effect.action,
        "interrupted: the engine stopped while this action ran".into(),
    );
    let elapsed = now_unix_milliseconds.saturating_sub(effect.started_unix_milliseconds);
    let elapsed = if effect.started_unix_milliseconds == 0 {
        0
    } else {
        elapsed
    };
    for (key, value) in [
        ("attempts", Value::Int(effect.attempt.max(1).into())),
        ("elapsed_ms", Value::Int(elapsed as i64)),
        ("duration_ms", Value::Int(elapsed as i64)),
        ("invocation", Value::Int(effect.invocation as i64)),
        ("interrupted", Value::Bool(true)),
    ] {
        outcome.data.insert(Arc::from(key), value);
    }
    match request {
        Some(request) => Event::of_outcome(machine, outcome, &request.events),
        None => Event::named(
            machine,
            &format!("error.exec.{}", effect.action),
            Value::Map(Arc::new(outcome.data)),
            Origin::Outcome,
        ),
    }
}

/// Whether `event` is input to the run, whose outcome its sender is told: sent from outside,
/// by `send`, or by a child protocol; not the engine's own.
fn is_input(event: &Event) -> bool {
    matches!(event.origin, Origin::External | Origin::Child)
        && crate::base::event::refuse_platform_event(&event.name).is_none()
}
