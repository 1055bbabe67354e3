//! The compiled machine: index tables in document order, shared by every running instance.

use std::collections::HashMap;
use std::sync::Arc;

pub use super::event_index::{Candidate, CandidateIndex, KnownMatches};
use super::expression::{Expression, Names, ValueTemplate};
pub use crate::base::event::EventDescriptor;
pub use crate::base::ids::{EventType, StateId, TransitionId};
use crate::base::model::{Duration, InputType};
use crate::base::value::Value;
use crate::pipeline::actions::Action;

/// The kind of a compiled state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    /// The document itself (SCXML's `<scxml>`): a compound state that is never exited.
    Root,
    Atomic,
    Compound,
    Parallel,
    Final,
    History {
        deep: bool,
    },
}

/// A compiled state.
#[derive(Debug)]
pub struct StateNode {
    pub id: Arc<str>,
    pub kind: StateKind,
    pub parent: Option<StateId>,
    /// Children in document order, history pseudo-states included.
    pub children: Vec<StateId>,
    /// One past the last descendant: descendants are exactly `self+1 .. descendants_end`.
    pub descendants_end: StateId,
    /// Proper ancestors, nearest first, ending at the root.
    pub ancestors: Vec<StateId>,
    /// For compound states (and the root): the initial transition. For history states: the
    /// default transition.
    pub initial: Option<TransitionId>,
    /// Transitions triggered by events, in document order (`on`, then `after`).
    pub transitions: Vec<TransitionId>,
    /// Eventless transitions, in document order.
    pub eventless: Vec<TransitionId>,
    pub entry: Vec<Action>,
    pub exit: Vec<Action>,
    /// Timers started on entry and cancelled on exit, one per `after` transition.
    pub timers: Vec<Timer>,
    /// The external events that wait while this state is active and no transition takes them.
    pub defer: Vec<EventDescriptor>,
    /// Child protocols started on entry and cancelled on exit.
    pub invokes: Vec<InvokeNode>,
    /// For final states: the exit code of a run that ends here.
    pub exit_code: u8,
    /// For final states: the output / done data.
    pub output: Option<ValueTemplate>,
    /// JSON pointer of the state in the source, for messages.
    pub pointer: String,
}

impl StateNode {
    pub fn is_atomic(&self) -> bool {
        matches!(self.kind, StateKind::Atomic | StateKind::Final)
    }

    pub fn is_compound(&self) -> bool {
        matches!(self.kind, StateKind::Compound | StateKind::Root)
    }

    pub fn is_history(&self) -> bool {
        matches!(self.kind, StateKind::History { .. })
    }
}

/// When a timer fires: a fixed delay, one computed when it starts (a duration, milliseconds,
/// or a timestamp: a deadline), or `until:` a timestamp.
#[derive(Debug)]
pub enum Delay {
    Fixed(Duration),
    Computed(Expression),
    /// `until: <timestamp>`: fires at that instant, at once if it has passed.
    Until(Expression),
}

/// How long a timer waits from now, and the deadline it came from, if any (an instant, which a
/// resumed run keeps whatever its timer policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub milliseconds: u64,
    /// The deadline's Unix millisecond (rounded up, as the wait is).
    pub deadline: Option<u64>,
}

/// A timer a state starts on entry: the event it sends itself after the delay.
#[derive(Debug)]
pub struct Timer {
    pub delay: Delay,
    /// The event name, also the send id used to cancel it: `after.<state>.<index>` or
    /// `timeout.<state>`.
    pub event: Arc<str>,
    pub event_type: EventType,
    /// An `after` timer is matched only by its own transition; a state `timeout` is an ordinary
    /// event the protocol handles under `on`.
    pub private: bool,
}

/// A child protocol a state runs, compiled with its parent.
#[derive(Debug)]
pub struct InvokeNode {
    pub id: Arc<str>,
    pub machine: Arc<Machine>,
    /// Child input slot and the template of its value.
    pub inputs: Vec<(usize, super::expression::ValueTemplate)>,
    pub done: EventType,
    pub failed: EventType,
    /// The parent's external events are forwarded to the child.
    pub autoforward: bool,
    /// The child has a queue the parent sends to (`autoforward`, or a `send ... to:` it);
    /// such a child waits for events instead of ending when it has nothing else to wait for.
    pub takes_events: bool,
}

/// A compiled transition.
#[derive(Debug)]
pub struct TransitionNode {
    pub source: StateId,
    /// Empty for eventless transitions.
    pub events: Vec<EventDescriptor>,
    /// The known event types one of `events` matches.
    pub known_matches: KnownMatches,
    pub guard: Option<Expression>,
    /// Empty for a targetless transition.
    pub targets: Vec<StateId>,
    pub internal: bool,
    pub actions: Vec<Action>,
    pub pointer: String,
    /// What taking it exits and enters, worked out by the runtime's algorithm the first time
    /// it is asked (the compiler does not run the algorithm); `Reach::Dynamic` when history
    /// plays a part.
    pub reach: std::sync::OnceLock<Reach>,
}

/// What a transition exits and enters, when recorded history plays no part in it (no history
/// state among its targets or in what entering them enters by default): then its domain and
/// entry set are the same every time, and are worked out once, the first
/// time the transition is taken (`runtime::run::algorithm::fixed_reach`).
#[derive(Debug, Default)]
pub enum Reach {
    /// History is involved: worked out when the transition is taken.
    #[default]
    Dynamic,
    /// No targets: it exits and enters nothing.
    Targetless,
    Fixed {
        /// The transition domain: it exits the active descendants of this state.
        domain: StateId,
        /// The states it enters, in document order.
        enter: Box<[StateId]>,
        /// Those of them entered by default (their initial transition's actions run).
        default_entry: Box<[StateId]>,
    },
}

/// What taking a transition from one active leaf does, in a machine without parallel states
/// (its configuration is the leaf and its ancestors): worked out by the runtime's algorithm the
/// first time the transition is taken from that leaf (`runtime::run::algorithm::single_leaf`).
#[derive(Debug)]
pub enum LeafPlan {
    /// Taken by the general procedures: history is recorded or read, a state exited or entered
    /// has timers, invokes or is final, or some block does more than assign.
    General,
    /// Every block it runs only assigns, and it exits and enters states that start and cancel
    /// nothing: the exits, the transition's actions and the entries in SCXML's order, then the
    /// host's observers in one call.
    Plain(Box<PlainPlan>),
}

/// A `LeafPlan::Plain` transition from one leaf.
#[derive(Debug)]
pub struct PlainPlan {
    /// The states it exits, in exit order (the leaf first).
    pub exited: Box<[StateId]>,
    /// The states it enters, in entry order.
    pub entered: Box<[StateId]>,
    /// The blocks it runs that have actions, in SCXML's order (exit blocks, the transition's
    /// actions, entry blocks and initial content), each with its owner and the configuration
    /// change before it: the blocks without actions, most of them, cost nothing.
    pub blocks: Box<[PlainBlock]>,
    /// The configuration change after the last block: the exits and entries left.
    pub last_change: ConfigurationChange,
    /// The quiet events (`Instance::ignores`) of the leaf it reaches.
    pub quiet_after: u64,
}

/// One block of a plain plan that has actions.
#[derive(Debug)]
pub struct PlainBlock {
    pub actions: BlockOf,
    /// What its actions belong to (see `Execution::owner`).
    pub owner: StateId,
    /// What leaves and joins the configuration between the block before and this one.
    pub change_before: ConfigurationChange,
    /// Its leading assignments that have a raw int form, each with where it is in the block,
    /// applied in place without the block walked; the first whose form gives no int (a slot
    /// holding no int, an overflow) and everything after it run as the block would.
    pub integers: Box<[PlannedInteger]>,
    /// Where the block goes on after `integers`, if they do not cover it: an action, and an
    /// assignment of it.
    pub rest: Option<(u32, u32)>,
}

/// An assignment of a plain block applied as a raw int (see `Assign::apply_integers`).
#[derive(Debug, Clone, Copy)]
pub struct PlannedInteger {
    pub slot: usize,
    pub form: IntegerForm,
    /// Where it is in the block: an action, and an assignment of it.
    pub action: u32,
    pub assignment: u32,
}

pub use super::fast::IntegerForm;

/// Where a block's actions are in the machine.
#[derive(Debug, Clone, Copy)]
pub enum BlockOf {
    Exit(StateId),
    Entry(StateId),
    /// A transition's actions: the one taken, or a state's initial transition.
    Transition(TransitionId),
}

impl BlockOf {
    pub fn actions(self, machine: &Machine) -> &[crate::pipeline::actions::Action] {
        match self {
            BlockOf::Exit(state) => &machine.state(state).exit,
            BlockOf::Entry(state) => &machine.state(state).entry,
            BlockOf::Transition(transition) => &machine.transition(transition).actions,
        }
    }
}

/// States leaving and joining the configuration at one point of a plain plan, in its order:
/// `exited[removed]` of the plan leave (each after its exit block), then `entered[inserted]`
/// join. When every one of them has an index below 64, `masks` holds the bits they take away
/// and add, so that a one-word configuration changes in one step (nothing runs between them
/// that could see the configuration half changed).
#[derive(Debug, Clone, Default)]
pub struct ConfigurationChange {
    pub removed: std::ops::Range<u32>,
    pub inserted: std::ops::Range<u32>,
    pub masks: Option<(u64, u64)>,
}

impl TransitionNode {
    /// Whether this transition is triggered by an event called `name` (of `event_type`, if known).
    pub fn matches(&self, name: &str, event_type: Option<EventType>) -> bool {
        match event_type {
            Some(event_type) => self.known_matches.contains(event_type),
            None => self
                .events
                .iter()
                .any(|descriptor| descriptor.matches(name)),
        }
    }
}

/// A declared input, compiled.
#[derive(Debug)]
pub struct InputNode {
    pub name: String,
    pub kind: InputType,
    pub description: Option<String>,
    pub required: bool,
    pub default: Option<Value>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub values: Vec<String>,
    pub items: Option<InputType>,
    /// Masked in all output and kept out of the store (`crate::base::secrets`).
    pub secret: bool,
}

/// The compiled protocol: everything an instance needs, by index.
#[derive(Debug)]
pub struct Machine {
    pub id: String,
    pub version: Option<String>,
    pub title: Option<String>,
    pub states: Vec<StateNode>,
    pub transitions: Vec<TransitionNode>,
    pub inputs: Vec<InputNode>,
    /// Context variable names and initial values, by slot.
    pub context: Vec<(String, Value)>,
    pub names: Names,
    pub state_ids: HashMap<Arc<str>, StateId>,
    /// Known event names, by `EventType` index.
    pub event_names: Vec<Arc<str>>,
    pub event_types: HashMap<Arc<str>, EventType>,
    /// `done.state.<id>` event type of each state (compound and parallel ones are used).
    pub done_events: Vec<EventType>,
    pub error_execution: EventType,
    /// `errors: strict`: an `error.execution` is processed before eventless transitions, and
    /// one no transition takes ends the run (see `ErrorMode`).
    pub strict_errors: bool,
    /// Whether any state has eventless transitions (if none, the algorithm skips selecting them).
    pub has_eventless: bool,
    /// Whether some state (or the protocol) defers events.
    pub has_defer: bool,
    /// Whether no state is parallel: the configuration is then one atomic state and its
    /// ancestors, and a macrostep can select and take transitions from that leaf alone.
    pub single_leaf: bool,
    /// Whether any state is a history state (if none, exiting records nothing).
    pub has_history: bool,
    /// The transitions each known event can trigger from each atomic state (absent for
    /// machines too large to tabulate).
    pub candidates: Option<CandidateIndex>,
    /// For each known event type, whether it is an error event (`error` or `error.*`).
    pub error_types: Vec<bool>,
    /// Where the machine came from, for messages.
    pub source_path: String,
    /// Ids of effectful actions (for `--mock`), in document order, each once.
    pub action_ids: Vec<String>,
    /// What its effects may do: the declared permissions, narrowed by parents and the operator.
    pub capabilities: crate::effects::capabilities::Capabilities,
    /// The files its load read: its own first, then the libraries it imports (its children
    /// list theirs), for the hash a resume compares.
    pub read_files: Vec<crate::base::read_file::ReadFile>,
    /// `events:`: the external events the protocol takes; `None` takes any.
    pub declared_events: Option<Arc<super::declared_events::DeclaredEvents>>,
    /// The declared type of each context variable, by slot (`types:`).
    pub context_types: Vec<Option<super::data_schema::DataSchema>>,
    /// Without `events:`, the `on:` keys no event can match, for `check` to warn about.
    pub unmatched_handlers: Vec<super::handled_events::UnmatchedHandler>,
    /// The child protocol each map with an `invoke` body runs, by the map's id: a resumed run
    /// finds its items' machine here.
    pub map_children: Vec<(Arc<str>, Arc<Machine>)>,
}

impl Machine {
    /// Whether `id` names a map of child protocols or one of its items (`review`, `review[1]`):
    /// mockable like an effect (its scripted outcome stands for the child's ending), but no effect.
    pub fn is_child_map_item(&self, id: &str) -> bool {
        let map = crate::effects::mock::map_of_item(id).unwrap_or(id);
        self.map_children.iter().any(|(known, _)| **known == *map)
    }

    pub fn state(&self, id: StateId) -> &StateNode {
        &self.states[id.index()]
    }

    /// `source → target (event)`, as a reader names a transition (`status`, coverage): targets
    /// joined by `, `; a targetless transition stays in its source (`source (event)`); the
    /// trigger is the event descriptors, `after` for a timer, `always` for an eventless
    /// transition, `initial` for a compound state's initial one.
    pub fn transition_name(&self, transition: &TransitionNode) -> String {
        let source = &self.state(transition.source).id;
        let targets: Vec<&str> = transition
            .targets
            .iter()
            .map(|target| &*self.state(*target).id)
            .collect();
        let trigger = if transition.pointer.contains("/after/") {
            "after".to_string()
        } else if transition.events.is_empty() {
            let initial = transition.pointer.ends_with("/initial");
            if initial { "initial" } else { "always" }.to_string()
        } else {
            transition
                .events
                .iter()
                .map(|descriptor| match descriptor {
                    EventDescriptor::Any => "*",
                    EventDescriptor::Prefix(prefix) => prefix,
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        if targets.is_empty() {
            format!("{source} ({trigger})")
        } else {
            format!("{source} → {} ({trigger})", targets.join(", "))
        }
    }

    pub fn transition(&self, id: TransitionId) -> &TransitionNode {
        &self.transitions[id.index()]
    }

    /// The state with this id, if any.
    pub fn state_id(&self, id: &str) -> Option<StateId> {
        self.state_ids.get(id).copied()
    }

    /// The known event type of this name, if any (look it up once, reuse it for every send).
    pub fn event_type(&self, name: &str) -> Option<EventType> {
        self.event_types.get(name).copied()
    }

    pub fn event_name(&self, event_type: EventType) -> &Arc<str> {
        &self.event_names[event_type.0 as usize]
    }

    /// Whether input from outside (an events line, `serve`, a scenario's `send`, a parent or a
    /// child protocol) may deliver event `name` with `data`: with `events:` declared, only a
    /// declared event whose data conforms. The refusal says why.
    pub fn admit_external(&self, name: &str, data: &serde_json::Value) -> Result<(), String> {
        match &self.declared_events {
            Some(declared) => declared.admit(name, data),
            None => Ok(()),
        }
    }

    /// `admit_external` for data already read into a `Value` (a parent's or a child's event):
    /// converted back to JSON only when there is a schema to check it against.
    pub fn admit_external_value(&self, name: &str, data: &Value) -> Result<(), String> {
        match &self.declared_events {
            Some(declared) => declared.admit(name, &data.to_json()),
            None => Ok(()),
        }
    }

    /// `state` is a proper descendant of `ancestor`.
    pub fn is_descendant(&self, state: StateId, ancestor: StateId) -> bool {
        state > ancestor && state < self.state(ancestor).descendants_end
    }
}

impl Delay {
    /// The delay in milliseconds (see `wait`).
    pub fn evaluate(
        &self,
        scope: &super::expression::Scope,
    ) -> Result<u64, super::expression::EvaluationError> {
        self.wait(scope).map(|wait| wait.milliseconds)
    }

    /// How long to wait from the scope's clock: an expression may give a duration, an int
    /// (milliseconds), a literal such as `"30s"`, or a timestamp (a deadline: the time left
    /// until it, none if it has passed).
    pub fn wait(
        &self,
        scope: &super::expression::Scope,
    ) -> Result<Wait, super::expression::EvaluationError> {
        let (expression, until) = match self {
            Delay::Fixed(duration) => {
                return Ok(Wait {
                    milliseconds: duration.milliseconds,
                    deadline: None,
                });
            }
            Delay::Computed(expression) => (expression, false),
            Delay::Until(expression) => (expression, true),
        };
        let failure = |message: String| super::expression::EvaluationError {
            expression: expression.text.clone(),
            message,
        };
        let span = |milliseconds| {
            Ok(Wait {
                milliseconds,
                deadline: None,
            })
        };
        match expression.evaluate(scope)? {
            Value::Timestamp(deadline) => {
                let milliseconds = crate::base::time::milliseconds_until(&deadline, scope.clock);
                Ok(Wait {
                    milliseconds,
                    deadline: Some(scope.clock + milliseconds),
                })
            }
            other if until => Err(failure(format!(
                "`until` takes a timestamp (e.g. `timestamp('2026-01-01T09:00:00Z')` or `started + duration('1h')`), not {} `{other}`; for a span of time write `delay:`",
                other.type_name()
            ))),
            Value::Duration(duration) => match crate::base::time::milliseconds(&duration) {
                Some(milliseconds) => span(milliseconds),
                None => Err(failure(format!(
                    "a delay cannot be negative ({})",
                    crate::base::time::format_duration(&duration)
                ))),
            },
            Value::Int(milliseconds) => u64::try_from(milliseconds)
                .map_err(|_| failure(format!("a delay cannot be negative ({milliseconds} ms)")))
                .and_then(span),
            Value::UInt(milliseconds) => span(milliseconds),
            Value::String(text) => Duration::parse(&text)
                .map(|duration| duration.milliseconds)
                .ok_or_else(|| failure(format!("`{text}` is not a duration such as `30s`")))
                .and_then(span),
            other => Err(failure(format!(
                "a delay must be a duration, milliseconds (int), a duration string or a timestamp (a deadline), not {}",
                other.type_name()
            ))),
        }
    }
}
