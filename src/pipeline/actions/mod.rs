//! Executable content: one file per action, each compiled once, then resolved (pure) and executed.

pub mod assign;
pub mod assign_target;
pub mod call;
pub mod cancel;
pub mod child_inputs;
mod compiler;
pub mod conditional;
pub mod effect;
pub mod emit;
pub mod exec;
pub mod file;
pub mod foreach;
pub mod log;
pub mod map;
pub mod raise;
pub mod send;
pub mod shape;
mod summary;
pub mod tolerance;
pub mod tool;

use std::collections::VecDeque;

use crate::base::event::Event;
use crate::base::state_set::StateSet;
use crate::base::value::Value;
use crate::pipeline::compile::expression::{EvaluationError, Scope};
use crate::pipeline::compile::machine::{Machine, StateId, TransitionId};

pub use crate::base::log_record::LogRecord;
pub use compiler::ActionCompiler;
pub use emit::Directive;
pub use send::SendRequest;

/// A compiled action.
#[derive(Debug)]
pub enum Action {
    Log(log::Log),
    Assign(assign::Assign),
    Raise(raise::Raise),
    // Boxed with the effects: a send carries several templates and a target.
    Send(Box<send::Send>),
    Cancel(cancel::Cancel),
    If(conditional::Conditional),
    Foreach(foreach::Foreach),
    Map(Box<map::Map>),
    // Effects are boxed: they are large (several templates each) and rare, and the actions a
    // macrostep walks stay small.
    Exec(Box<exec::Exec>),
    Emit(emit::Emit),
    Tool(Box<tool::Tool>),
    File(Box<file::File>),
    Call(call::Call),
}

/// What the engine asks of the world outside the pure algorithm: output, timers, observers.
pub trait Host {
    /// A `log` action's record, ready to print.
    fn log(&mut self, record: LogRecord);
    /// Put an event on the external queue, now or after a delay.
    fn send(&mut self, request: SendRequest);
    /// Why this send cannot be held (too many pending, or too many bytes), before `send`.
    fn refuse_send(&self, _request: &SendRequest) -> Option<String> {
        None
    }
    /// Withdraw a delayed send that has not been delivered.
    fn cancel(&mut self, send_id: &str);
    /// Start an effect (a process, ...); its outcome must come back later as an external event.
    fn start_effect(&mut self, request: crate::effects::EffectRequest);
    /// Start a map: its items run as effects, at most `max_concurrency` at once, and one
    /// `done.map.<id>` or `error.map.<id>` must come back later as an external event. A host
    /// that only records what the actions asked for may start the items as they are.
    fn start_map(&mut self, request: map::MapRequest) {
        for item in request.items {
            self.start_effect(item);
        }
    }
    /// Start a child protocol; its outcome must come back later as an external event.
    fn start_invoke(&mut self, request: InvokeRequest);
    /// Cancel a running child protocol (its state exited): its processes are killed.
    fn cancel_invoke(&mut self, id: &str);
    /// `state` exited while the run goes on: cancel the effects it owns (their processes are
    /// stopped and their outcomes never delivered). Not called when the run ends, whose
    /// effects are let finish.
    fn cancel_effects_of(&mut self, _state: StateId) {}
    /// Hand a directive to the program driving the protocol.
    fn emit(&mut self, directive: emit::Directive);
    /// Observers, called in the order the algorithm does things.
    fn state_entered(&mut self, _state: StateId) {}
    fn state_exited(&mut self, _state: StateId) {}
    fn transition_taken(&mut self, _transition: TransitionId) {}
    /// A transition taken while the run goes on, whose exit, transition and entry blocks ask
    /// nothing of the host (only assignments): one call through the host instead of one per
    /// observer and state, which makes exactly the calls the algorithm would have made, in
    /// its order (nothing else reached the host in between). A host may answer it itself, but
    /// must mean the same.
    fn transition_passed(
        &mut self,
        transition: TransitionId,
        exited: &[StateId],
        entered: &[StateId],
    ) {
        self.transition_taken(transition);
        for &state in exited {
            self.cancel_effects_of(state);
            self.state_exited(state);
        }
        for &state in entered {
            self.state_entered(state);
        }
    }
}

/// A child protocol to start: its machine, its bound inputs, and the events of its outcome.
#[derive(Debug, Clone)]
pub struct InvokeRequest {
    pub id: std::sync::Arc<str>,
    pub machine: std::sync::Arc<Machine>,
    pub inputs: Vec<Value>,
    pub done: crate::pipeline::compile::machine::EventType,
    pub failed: crate::pipeline::compile::machine::EventType,
    /// The parent's external events go to the child too.
    pub autoforward: bool,
    /// The child has a queue the parent sends to (see `InvokeNode::takes_events`).
    pub takes_events: bool,
}

/// Everything an action may read or change while it runs.
pub struct Execution<'a> {
    pub machine: &'a Machine,
    pub context: &'a mut [Value],
    pub inputs: &'a [Value],
    pub event: Option<&'a Event>,
    /// The host's clock in Unix milliseconds, for `now()`.
    pub clock: u64,
    pub configuration: &'a StateSet,
    pub internal_queue: &'a mut VecDeque<Event>,
    pub host: &'a mut dyn Host,
    /// The state the running actions belong to: an entry block's state, or for a transition's
    /// actions and the exit blocks it runs, the innermost state that stays active across it
    /// (`StateId::ROOT`: the run). Effects started now are cancelled when it exits.
    pub owner: StateId,
}

impl Execution<'_> {
    /// Runs `body`, which needs a read-only scope over the current data.
    #[inline]
    pub fn with_scope<T>(&self, body: impl FnOnce(&Scope) -> T) -> T {
        let view = StepView {
            machine: self.machine,
            configuration: self.configuration,
            inputs: self.inputs,
            event: self.event,
            clock: self.clock,
        };
        view.with_scope(self.context, body)
    }
}

/// What expressions read during a step besides the context, which actions may be changing:
/// the machine's names, the configuration (for `In()`), the inputs, the event, the clock.
#[derive(Clone, Copy)]
pub struct StepView<'a> {
    pub machine: &'a Machine,
    pub configuration: &'a StateSet,
    pub inputs: &'a [Value],
    pub event: Option<&'a Event>,
    pub clock: u64,
}

impl StepView<'_> {
    /// Runs `body` with a read-only scope over this and `context` as it is now.
    #[inline]
    pub fn with_scope<T>(&self, context: &[Value], body: impl FnOnce(&Scope) -> T) -> T {
        let configuration = self.configuration;
        let is_active = |index: usize| configuration.contains(StateId(index as u32));
        body(&Scope {
            names: &self.machine.names,
            context,
            inputs: self.inputs,
            event: self.event,
            is_active: &is_active,
            clock: self.clock,
        })
    }
}

impl Action {
    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        match self {
            Action::Log(log) => log.execute(execution),
            Action::Assign(assign) => assign.execute(execution),
            Action::Raise(raise) => raise.execute(execution),
            Action::Send(send) => send.execute(execution),
            Action::Cancel(cancel) => cancel.execute(execution),
            Action::If(conditional) => conditional.execute(execution),
            Action::Foreach(foreach) => foreach.execute(execution),
            Action::Map(map) => map.execute(execution),
            Action::Exec(exec) => exec.execute(execution),
            Action::Emit(emit) => emit.execute(execution),
            Action::Tool(tool) => tool.execute(execution),
            Action::File(file) => file.execute(execution),
            Action::Call(call) => call.execute(execution),
        }
    }
}

impl Action {
    /// Pure: the request of an effectful action (`exec`, a tool, a file action); `None` for
    /// the others.
    pub fn resolve_effect(
        &self,
        execution: &Execution,
    ) -> Option<Result<crate::effects::EffectRequest, EvaluationError>> {
        match self {
            Action::Exec(exec) => Some(exec.resolve(execution)),
            Action::Tool(tool) => Some(tool.resolve(execution)),
            Action::File(file) => Some(file.resolve(execution)),
            _ => None,
        }
    }
}

/// Runs a block in order. As in SCXML, the first failing action stops the rest of the block;
/// the error is returned so the caller can raise `error.execution`.
pub fn execute_block(actions: &[Action], execution: &mut Execution) -> Result<(), EvaluationError> {
    for action in actions {
        action.execute(execution)?;
    }
    Ok(())
}
