//! Running a machine: the pure SCXML algorithm and its instance, and the one runtime that hosts instances with their timers, effects and children.

// The algorithm and the instance it steps.
pub mod algorithm;
pub mod restore;

// The runtime every mode shares (`run`, `serve`, `test`): a session steps one instance; its
// host keeps the instance's timers, its running effects and children (`running`, `children`);
// `driver` is the loop of a single run, `fleet` the scheduler of many; `input` reads events.
pub mod admission;
pub mod awaiting;
mod children;
pub mod driver;
mod fan_out;
mod host;
pub mod input;
mod map_children;
pub mod map_resume;
pub mod queued;
pub mod running;
pub mod session;
pub mod stop;
pub mod telemetry_kinds;
mod tree;

use std::cell::Cell;
use std::sync::Arc;

use crate::base::event::{self, Event};
use crate::base::value::Value;
use crate::pipeline::actions::Host;
use crate::pipeline::compile::machine::{Machine, StateId};
use algorithm::{
    Algorithm, CurrentEvent, Instance, Limits, Outcome, RunError, Selection, Workspace,
};

/// One instance of a machine: start it, then hand it events.
pub struct Interpreter {
    machine: Arc<Machine>,
    instance: Instance,
    /// `None` for the default limits, which most instances run under: an instance then carries
    /// no copy of them (a `serve` host keeps 100,000 instances).
    limits: Option<Box<Limits>>,
}

/// The limits of an instance given none.
static DEFAULT_LIMITS: Limits = Limits::DEFAULT;

thread_local! {
    /// The scratch space of a macrostep, one per thread and lent to whichever instance steps:
    /// an idle instance then carries none of it (a `serve` host keeps 100,000 of them).
    static WORKSPACE: Cell<Option<Box<Workspace>>> = const { Cell::new(None) };
}

/// This thread's workspace, lent to a step until `give_back_workspace`. A step that starts
/// another instance's step inside it (a host running a child synchronously) finds the
/// workspace lent out and gets a new one.
fn lend_workspace() -> Box<Workspace> {
    WORKSPACE.take().unwrap_or_default()
}

fn give_back_workspace(workspace: Box<Workspace>) {
    // The slot is empty unless a step inside this one gave back a workspace of its own: only
    // then is there one to drop (`Cell::set` would call the drop either way).
    if let Some(other) = WORKSPACE.replace(Some(workspace)) {
        drop(other);
    }
}

impl Interpreter {
    /// A new, not yet started instance; `inputs` come from `Machine::bind_inputs`.
    pub fn new(machine: Arc<Machine>, inputs: Vec<Value>) -> Interpreter {
        let instance = Instance::new(&machine, algorithm::shared_inputs(inputs));
        Interpreter {
            machine,
            instance,
            limits: None,
        }
    }

    pub fn with_limits(mut self, limits: Limits) -> Interpreter {
        self.limits = (limits != Limits::DEFAULT).then(|| Box::new(limits));
        self
    }

    /// The limits this instance runs under.
    pub fn limits(&self) -> &Limits {
        self.limits.as_deref().unwrap_or(&DEFAULT_LIMITS)
    }

    /// Runs one entry point of the algorithm over this instance, with `event` bound as the
    /// current event. With `budgets_when_needed`, a step under the default budgets puts them in
    /// force only when it needs them (see `Algorithm::budgets`).
    fn step<'e, T>(
        &mut self,
        host: &mut dyn Host,
        event: CurrentEvent<'e>,
        budgets_when_needed: bool,
        body: impl for<'w> FnOnce(&mut Algorithm<'w, 'e>) -> T,
    ) -> T {
        use crate::pipeline::compile::budget::StepBudgets;
        let mut budgets = match self.limits.as_deref() {
            Some(limits) => Some(StepBudgets::enter(Some(&limits.budgets))),
            None if budgets_when_needed => None,
            None => Some(StepBudgets::enter(None)),
        };
        let limits = self.limits.as_deref().unwrap_or(&DEFAULT_LIMITS);
        let mut workspace = None;
        let mut event = event;
        // The algorithm only borrows (it has nothing to drop), and ends with this block.
        let (result, quiet_events_noted) = {
            let mut algorithm = Algorithm {
                machine: &self.machine,
                instance: &mut self.instance,
                workspace: &mut workspace,
                host,
                limits,
                event: &mut event,
                owner: StateId::ROOT,
                guard_failed: false,
                quiet_events_noted: false,
                budgets: &mut budgets,
            };
            let result = body(&mut algorithm);
            (result, algorithm.quiet_events_noted)
        };
        if budgets.is_none() {
            crate::pipeline::compile::budget::step_without_budgets_over();
        }
        if let Some(workspace) = workspace {
            give_back_workspace(workspace);
        }
        if !quiet_events_noted {
            self.instance.note_quiet_events(&self.machine);
        }
        result
    }

    /// Sets the clock `now()` reads (Unix milliseconds); hosts set it before each step.
    pub fn set_clock(&mut self, unix_milliseconds: u64) {
        self.instance.clock = unix_milliseconds;
    }

    /// Enters the initial configuration and runs to completion.
    pub fn start(&mut self, host: &mut dyn Host) -> Result<(), RunError> {
        self.step(host, CurrentEvent::None, false, |algorithm| {
            algorithm.start()
        })
    }

    /// Enters `states` of a restored configuration and runs to completion (a scenario's
    /// `start:`).
    pub fn start_in(
        &mut self,
        host: &mut dyn Host,
        states: &[crate::pipeline::compile::machine::StateId],
    ) -> Result<(), RunError> {
        self.step(host, CurrentEvent::None, false, |algorithm| {
            algorithm.start_in(states)
        })
    }

    /// Processes one external event as one macrostep.
    #[inline]
    pub fn handle(&mut self, event: &Event, host: &mut dyn Host) -> Result<(), RunError> {
        self.take(event, host).map(|_| ())
    }

    /// Processes one external event as one macrostep, and says whether a transition took it
    /// (or a guard failed on it).
    #[inline]
    pub fn take(&mut self, event: &Event, host: &mut dyn Host) -> Result<Selection, RunError> {
        if self.instance.ignores(event) {
            return Ok(Selection::NotTaken);
        }
        self.macrostep(event, host)
    }

    // Kept apart from `take`, so that an ignored event does not pay for this one's frame.
    #[inline(never)]
    fn macrostep(&mut self, event: &Event, host: &mut dyn Host) -> Result<Selection, RunError> {
        self.step(host, CurrentEvent::External(event), true, |algorithm| {
            algorithm.process_external_event(event)
        })
    }

    /// The active state that defers `event`, an external event no transition took (the root
    /// for the protocol's own `defer:`), if one does: engine events are never deferred.
    pub fn deferred_by(&self, event: &Event) -> Option<StateId> {
        if !self.machine.has_defer
            || !self.instance.running
            || event::refuse_platform_event(&event.name).is_some()
        {
            return None;
        }
        // The innermost first; the protocol's own `defer:` is the root's, never active.
        let mut active: Vec<StateId> = self.configuration().collect();
        active.reverse();
        active.push(StateId::ROOT);
        active.into_iter().find(|state| {
            self.machine
                .state(*state)
                .defer
                .iter()
                .any(|descriptor| descriptor.matches(&event.name))
        })
    }

    pub fn machine(&self) -> &Arc<Machine> {
        &self.machine
    }

    pub fn is_running(&self) -> bool {
        self.instance.running
    }

    pub fn outcome(&self) -> Option<&Outcome> {
        self.instance.outcome.as_deref()
    }

    /// Active states in document order.
    pub fn configuration(&self) -> impl Iterator<Item = StateId> + '_ {
        self.instance.configuration.iter()
    }

    /// Ids of the active atomic states, in document order.
    pub fn active_leaves(&self) -> Vec<&str> {
        self.configuration()
            .filter(|state| self.machine.state(*state).is_atomic())
            .map(|state| &*self.machine.state(state).id)
            .collect()
    }

    /// Every active state, compound and parallel ones with their descendants, in document
    /// order: time spent in a compound state is time spent in one of its children.
    pub fn active_states(&self) -> Vec<&str> {
        self.configuration()
            .map(|state| &*self.machine.state(state).id)
            .collect()
    }

    pub fn is_active(&self, id: &str) -> bool {
        self.machine
            .state_id(id)
            .is_some_and(|state| self.instance.configuration.contains(state))
    }

    /// A context variable's current value.
    pub fn context_value(&self, name: &str) -> Option<&Value> {
        let slot = self
            .machine
            .context
            .iter()
            .position(|(variable, _)| variable == name)?;
        self.instance.context.get(slot)
    }

    /// A context variable's value by slot (no name lookup).
    pub fn context_slot(&self, slot: usize) -> Option<&Value> {
        self.instance.context.get(slot)
    }

    /// The whole context as a JSON object, in declaration order.
    pub fn context_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.machine
                .context
                .iter()
                .zip(&self.instance.context)
                .map(|((name, _), value)| (name.clone(), value.to_json()))
                .collect(),
        )
    }
}

/// What the algorithm did, step by step: for tests and embedding.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Entered(String),
    Exited(String),
    Transition(String),
    Log(String),
    Send {
        event: String,
        delay_milliseconds: u64,
        id: Option<String>,
    },
    Cancel(String),
    Effect {
        id: String,
    },
    Directive(serde_json::Value),
    Invoke(String),
    CancelInvoke(String),
}

/// A host that keeps every request in order instead of acting on it. Sends without delay are
/// also queued in `external_queue`, so a caller can deliver them.
#[derive(Debug, Default)]
pub struct RecordingHost {
    pub records: Vec<Record>,
    pub logs: Vec<crate::pipeline::actions::LogRecord>,
    pub external_queue: std::collections::VecDeque<Event>,
    /// Delayed sends not cancelled yet: (delay in ms, id, event).
    pub delayed: Vec<(u64, Option<String>, Event)>,
    /// Effects started and not yet reported back; the caller decides their outcomes.
    pub effects: Vec<crate::effects::EffectRequest>,
    machine: Option<Arc<Machine>>,
}

impl RecordingHost {
    /// A host that names states and transitions in its records.
    pub fn for_machine(machine: Arc<Machine>) -> RecordingHost {
        RecordingHost {
            machine: Some(machine),
            ..RecordingHost::default()
        }
    }

    fn state_name(&self, state: StateId) -> String {
        match &self.machine {
            Some(machine) => machine.state(state).id.to_string(),
            None => format!("#{}", state.0),
        }
    }
}

impl Host for RecordingHost {
    fn log(&mut self, record: crate::pipeline::actions::LogRecord) {
        self.records.push(Record::Log(record.message.clone()));
        self.logs.push(record);
    }

    fn send(&mut self, request: crate::pipeline::actions::SendRequest) {
        self.records.push(Record::Send {
            event: request.event.name.to_string(),
            delay_milliseconds: request.delay_milliseconds,
            id: request.id.as_deref().map(String::from),
        });
        if request.delay_milliseconds == 0 {
            self.external_queue.push_back(request.event);
        } else {
            let id = request.id.as_deref().map(String::from);
            self.delayed
                .push((request.delay_milliseconds, id, request.event));
        }
    }

    fn cancel(&mut self, send_id: &str) {
        self.records.push(Record::Cancel(send_id.to_string()));
        self.delayed
            .retain(|(_, id, _)| id.as_deref() != Some(send_id));
    }

    fn start_invoke(&mut self, request: crate::pipeline::actions::InvokeRequest) {
        self.records.push(Record::Invoke(request.id.to_string()));
    }

    fn cancel_invoke(&mut self, id: &str) {
        self.records.push(Record::CancelInvoke(id.to_string()));
    }

    fn emit(&mut self, directive: crate::pipeline::actions::Directive) {
        self.records.push(Record::Directive(directive.to_json()));
    }

    fn start_effect(&mut self, request: crate::effects::EffectRequest) {
        self.records.push(Record::Effect {
            id: request.id.to_string(),
        });
        self.effects.push(request);
    }

    fn state_entered(&mut self, state: StateId) {
        let name = self.state_name(state);
        self.records.push(Record::Entered(name));
    }

    fn state_exited(&mut self, state: StateId) {
        let name = self.state_name(state);
        self.records.push(Record::Exited(name));
    }

    fn transition_taken(&mut self, transition: crate::pipeline::compile::machine::TransitionId) {
        let name = match &self.machine {
            Some(machine) => machine.transition(transition).pointer.clone(),
            None => format!("#{}", transition.0),
        };
        self.records.push(Record::Transition(name));
    }
}
