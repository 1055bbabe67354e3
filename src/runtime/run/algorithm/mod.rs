//! The W3C SCXML algorithm (Appendix D), pure and synchronous, named after the spec's procedures.

mod errors;
mod single_leaf;

pub use errors::Failure;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::base::event::{Event, Origin};
use crate::base::state_set::StateSet;
use crate::base::value::Value;
use crate::pipeline::actions::assign::Assign;
use crate::pipeline::actions::{Action, Execution, Host, SendRequest, StepView, execute_block};
use crate::pipeline::compile::budget::{self, Budgets, Exceeded, StepBudgets};
use crate::pipeline::compile::expression::EvaluationError;
use crate::pipeline::compile::machine::{Machine, Reach, StateId, StateKind, TransitionId};

/// How a run ended: the top-level final state reached, its exit code and output; or the
/// error that failed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `None` when an unhandled error ended the run instead (see `failure`).
    pub final_state: Option<StateId>,
    pub exit_code: u8,
    pub output: Value,
    pub failure: Option<Arc<Failure>>,
}

impl Outcome {
    /// The id of the final state reached, if the run reached one.
    pub fn state_name<'m>(&self, machine: &'m Machine) -> Option<&'m Arc<str>> {
        self.final_state.map(|state| &machine.state(state).id)
    }
}

/// The data of one running instance. Small: a configuration, context and queues.
#[derive(Debug, Clone)]
pub struct Instance {
    pub configuration: StateSet,
    pub context: Vec<Value>,
    pub inputs: Arc<[Value]>,
    /// Recorded history: history state → the states it restores.
    pub history: Vec<(StateId, StateSet)>,
    pub internal_queue: VecDeque<Event>,
    pub running: bool,
    /// Boxed: only an ended run has one, and every instance carries the slot.
    pub outcome: Option<Box<Outcome>>,
    /// The host's clock (Unix milliseconds, virtual under virtual time), for `now()`.
    pub clock: u64,
    /// The events (by type, the first 64) that the configuration ignores, as `ignores` says;
    /// worked out after each macrostep by `note_quiet_events`, empty when unknown.
    quiet_events: u64,
}

/// Scratch space reused across macrosteps so handling an event allocates nothing.
#[derive(Debug, Default)]
pub struct Workspace {
    enabled: Vec<TransitionId>,
    filtered: Vec<TransitionId>,
    to_remove: Vec<TransitionId>,
    guard_errors: Vec<EvaluationError>,
    exit_set: StateSet,
    other_exit_set: StateSet,
    states_to_enter: StateSet,
    states_for_default_entry: StateSet,
    default_history_content: Vec<(StateId, TransitionId)>,
    targets: Vec<StateId>,
    /// States entered, and sources of transitions taken, lately in the current macrostep: the
    /// states of a runaway loop, for its error message.
    looping_states: StateSet,
    /// Set when computing an entry set read a history state (see `fixed_reach`).
    consulted_history: bool,
}

/// Limits on one macrostep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Steps (microsteps, and internal events that enable no transition) one macrostep may
    /// take before the run is stopped as a livelock.
    pub max_microsteps: usize,
    /// Value size, evaluation work and wall clock of the macrostep.
    pub budgets: Budgets,
    /// Child protocols one run tree (a run, its children, theirs) may have alive at once;
    /// `--max-children`.
    pub max_children: usize,
    /// The context and pending event data one run tree may hold, all its instances together;
    /// `--max-tree-bytes`.
    pub max_tree_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

impl Limits {
    /// The limits when no option says otherwise.
    pub const DEFAULT: Limits = Limits {
        max_microsteps: 10_000,
        budgets: Budgets::DEFAULT,
        max_children: 128,
        max_tree_bytes: 256 << 20,
    };
}

/// The inputs of a new instance: most have none, and share one empty list instead of each
/// allocating its own (an empty `Arc<[T]>` made by `Default` is one static the standard
/// library shares).
pub fn shared_inputs(inputs: Vec<Value>) -> Arc<[Value]> {
    if inputs.is_empty() {
        Arc::default()
    } else {
        inputs.into()
    }
}

/// A failure that stops the run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error(
        "the protocol looped: {microsteps} microsteps in one macrostep without settling, through the states {states}; \
         give an eventless transition a guard that becomes false, or raise the limit with --max-microsteps"
    )]
    MicrostepLimit { microsteps: usize, states: String },
    #[error(
        "the macrostep ran longer than {limit} in the states {states}; make the work of one step \
         smaller, or raise the limit with --max-step-time"
    )]
    StepTime { limit: String, states: String },
    /// SIGINT or SIGTERM arrived while a macrostep was busy: it stopped where it was, and is
    /// not committed.
    #[error("stopped by a signal in the middle of a step, in the states {states}")]
    Interrupted { states: String },
    /// The run tree (a run and all its child protocols) holds more context and pending event
    /// data than its bound; the instance that grew it past stops.
    #[error(
        "the run tree holds {total} bytes of context and pending event data, more than its \
         limit of {limit} bytes (--max-tree-bytes); hold less in the children, or raise it"
    )]
    TreeBytes { total: usize, limit: usize },
    /// A durable run could not record a step; it stops rather than go on unrecorded.
    #[error("the run's step could not be recorded: {message}")]
    Checkpoint { message: String },
}

impl RunError {
    /// The exit code a run stopped by this error ends with.
    pub fn exit_code(&self) -> u8 {
        use crate::base::exit_code::{INVALID, IO, UNFINISHED};
        match self {
            // The store could not take a step (a full disk, a broken database): an I/O failure,
            // not a fault of the protocol.
            RunError::Checkpoint { .. } => IO,
            // A step past its limits stops as a looping protocol does.
            RunError::MicrostepLimit { .. }
            | RunError::StepTime { .. }
            | RunError::TreeBytes { .. } => INVALID,
            // The driver reports a step interrupted as a run stopped by a signal.
            RunError::Interrupted { .. } => UNFINISHED,
        }
    }
}

impl Instance {
    pub fn new(machine: &Machine, inputs: Arc<[Value]>) -> Instance {
        Instance {
            configuration: StateSet::with_capacity(machine.states.len()),
            context: machine
                .context
                .iter()
                .map(|(_, value)| value.clone())
                .collect(),
            inputs,
            history: Vec::new(),
            internal_queue: VecDeque::new(),
            running: false,
            outcome: None,
            clock: 0,
            quiet_events: 0,
        }
    }

    /// Whether handling `event` would change nothing and report nothing, known without a
    /// macrostep: the run has ended, or, in a machine without parallel states or eventless
    /// transitions, neither the active leaf nor any of its ancestors has a transition for the
    /// event and it is not an error to warn about. SCXML would select no transition, find no
    /// eventless one and no internal event, and settle at once. Most events of a busy protocol
    /// are of this kind, so the answer is one bit of `quiet_events`, kept up to date after
    /// each macrostep, read before a macrostep's scratch space is taken.
    #[inline]
    pub fn ignores(&self, event: &Event) -> bool {
        if !self.running {
            return true;
        }
        event.event_type.is_some_and(|event_type| {
            event_type.0 < 64 && self.quiet_events >> event_type.0 & 1 != 0
        })
    }

    /// Works out `quiet_events` for the configuration reached: the quiet events of its one
    /// active leaf, when the machine has no parallel states and no eventless transitions.
    pub fn note_quiet_events(&mut self, machine: &Machine) {
        self.quiet_events = match (
            machine.single_leaf,
            machine.has_eventless,
            &machine.candidates,
        ) {
            (true, false, Some(index)) => self
                .configuration
                .last()
                .map_or(0, |leaf| index.quiet_events(leaf)),
            _ => 0,
        };
    }

    fn history_of(&self, history_state: StateId) -> Option<&StateSet> {
        self.history
            .iter()
            .find(|(state, _)| *state == history_state)
            .map(|(_, recorded)| recorded)
    }
}

/// SCXML's `_event` during a macrostep: bound when an event is taken and kept until the next
/// one, so the eventless transitions that follow still see it. The external event is borrowed
/// from the caller, so handling it copies (and reference-counts) nothing.
#[derive(Debug, Default)]
pub enum CurrentEvent<'a> {
    #[default]
    None,
    External(&'a Event),
    Internal(Event),
}

impl CurrentEvent<'_> {
    pub fn get(&self) -> Option<&Event> {
        match self {
            CurrentEvent::None => None,
            CurrentEvent::External(event) => Some(event),
            CurrentEvent::Internal(event) => Some(event),
        }
    }
}

/// What became of an external event in its macrostep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// A transition took it.
    Taken,
    /// No transition took it.
    NotTaken,
    /// A guard failed while transitions were selected for it (`errors: strict`): none took it,
    /// and the error was processed instead.
    GuardFailed,
}

/// One run of the algorithm over an instance: the procedures of Appendix D.
pub struct Algorithm<'a, 'e> {
    pub machine: &'a Machine,
    pub instance: &'a mut Instance,
    /// Scratch space, lent by the thread when a procedure first needs it (a single-leaf step
    /// that settles at once needs none); whoever built the algorithm owns the slot and gives
    /// the workspace back after (the algorithm itself then owns nothing to drop but an
    /// internal event).
    pub workspace: &'a mut Option<Box<Workspace>>,
    pub host: &'a mut dyn Host,
    pub limits: &'a Limits,
    /// Bound when the algorithm is built: none for a start, the external event for a
    /// macrostep. Kept, like the workspace and the budgets, by whoever built the algorithm, so
    /// that the algorithm itself has nothing to drop.
    pub event: &'a mut CurrentEvent<'e>,
    /// The state the actions running now belong to (see `Execution::owner`).
    pub owner: StateId,
    /// A guard failed while selecting for the external event (`errors: strict`).
    pub guard_failed: bool,
    /// Whether the step left the instance's quiet events up to date for the configuration it
    /// reached (see `Instance::note_quiet_events`), which its host then need not work out.
    pub quiet_events_noted: bool,
    /// The step's budgets once in force. A macrostep under the default budgets puts them in
    /// force only when it first evaluates an expression in full, runs an action other than an
    /// assignment or goes on past its first microstep (see `budgets_in_force`): a plain
    /// transition whose guards and assignments the fast reader answers reads nothing of them,
    /// so it need not install them and put them back.
    pub budgets: &'a mut Option<StepBudgets>,
}

/// The workspace in `slot`, lent by the thread if there is none yet, with no loop recorded.
fn workspace_in(slot: &mut Option<Box<Workspace>>) -> &mut Workspace {
    slot.get_or_insert_with(|| {
        let mut workspace = super::lend_workspace();
        workspace.looping_states.clear();
        workspace
    })
}

impl<'e> Algorithm<'_, 'e> {
    /// Puts the step's budgets in force if they are not yet: before anything that reads them
    /// (an evaluation in full, a `foreach`, a microstep's clock). Only a step under the default
    /// budgets waits (see `Algorithm::budgets`).
    #[inline(always)]
    fn budgets_in_force(&mut self) {
        if self.budgets.is_none() {
            self.enter_budgets();
        }
    }

    #[inline(never)]
    fn enter_budgets(&mut self) {
        debug_assert!(*self.limits == Limits::DEFAULT);
        *self.budgets = Some(StepBudgets::enter(None));
    }

    /// This step's workspace (see `Algorithm::workspace`).
    fn workspace(&mut self) -> &mut Workspace {
        workspace_in(self.workspace)
    }

    /// Enters the initial configuration and runs to completion (SCXML `interpret`).
    pub fn start(&mut self) -> Result<(), RunError> {
        self.instance.running = true;
        let machine = self.machine;
        if let Some(initial) = machine.state(StateId::ROOT).initial {
            // The initial transition's entry set is worked out once per machine, as any
            // transition's reach is: every start then enters the states it lists, in document
            // order, as `enter_states` would.
            if let Reach::Fixed {
                enter,
                default_entry,
                ..
            } = reach(machine, initial)
            {
                for &state in enter.iter() {
                    self.enter_state(state, default_entry.contains(&state), None);
                }
                // A start that settles at once needs no workspace; one that goes on counts the
                // states entered towards a loop's, as `enter_states` would have recorded them.
                if self.settled() {
                    return self.finish_settled();
                }
                let looping = &mut self.workspace().looping_states;
                enter.iter().for_each(|state| looping.insert(*state));
            } else {
                let workspace = self.workspace();
                workspace.enabled.clear();
                workspace.enabled.push(initial);
                self.enter_states();
            }
        }
        if self.settled() {
            return self.finish_settled();
        }
        self.run_to_completion()
    }

    /// Begins a restored configuration by entering `states` of it as a transition to them
    /// would (their entry actions, timers and invokes; not their ancestors'), then runs to
    /// completion: a scenario's `start:` (docs/semantics.md, "A scenario may start in a given
    /// configuration").
    pub fn start_in(&mut self, states: &[StateId]) -> Result<(), RunError> {
        self.instance.running = true;
        for &state in states {
            self.enter_state(state, false, None);
        }
        self.run_to_completion()
    }

    /// Handles one external event: its microstep, then eventless and internal events until
    /// stable (one iteration of SCXML's `mainEventLoop`). Says whether a transition took it.
    /// The algorithm was built with `event` bound (see `Algorithm::event`): binding it here
    /// would move out whatever was bound before, an internal event's worth of bytes. Inlined
    /// into the step that builds the algorithm: a macrostep of a single-leaf machine that
    /// settles at once makes no call of its own but the host's; the rest is apart.
    #[inline(always)]
    pub fn process_external_event(&mut self, event: &'e Event) -> Result<Selection, RunError> {
        debug_assert!(
            matches!(*self.event, CurrentEvent::External(bound) if std::ptr::eq(bound, event))
        );
        if !self.instance.running {
            return Ok(Selection::NotTaken);
        }
        if let (true, Some(index), Some(event_type)) = (
            self.machine.single_leaf,
            &self.machine.candidates,
            event.event_type,
        ) && let Some(leaf) = self.instance.configuration.last()
        {
            let taken = self.take_on_single_leaf(index, leaf, event_type, event);
            // Nothing raised, nothing eventless to select, not finished: the macrostep is over
            // (unless a guard was cut short by a signal or the clock, and raised nothing).
            if self.settled() {
                // A step that took nothing left the configuration, and so its quiet events,
                // as they were (a plain plan noted those of the leaf it reached).
                self.quiet_events_noted |= taken.is_none();
                return self
                    .finish_settled()
                    .map(|()| self.selection(taken.is_some()));
            }
            return self.go_on_from_single_leaf(taken);
        }
        self.process_in_general()
    }

    /// The rest of a single-leaf macrostep that did not settle at once: it goes on, and may
    /// reach another configuration, whose quiet events are worked out when it is over. What
    /// the microstep went through counts towards a loop's states, as `microstep` and
    /// `enter_states` would have recorded.
    #[inline(never)]
    fn go_on_from_single_leaf(
        &mut self,
        taken: Option<TransitionId>,
    ) -> Result<Selection, RunError> {
        self.budgets_in_force();
        self.quiet_events_noted = false;
        if let Some(transition) = taken.map(|id| self.machine.transition(id)) {
            let looping = &mut self.workspace().looping_states;
            looping.insert(transition.source);
            if let Some(Reach::Fixed { enter, .. }) = transition.reach.get() {
                enter.iter().for_each(|state| looping.insert(*state));
            }
        }
        self.run_to_completion()
            .map(|()| self.selection(taken.is_some()))
    }

    /// An external event's macrostep by the general procedures (`selectTransitions`,
    /// `microstep`, then `run_to_completion`).
    #[inline(never)]
    fn process_in_general(&mut self) -> Result<Selection, RunError> {
        self.budgets_in_force();
        self.select_transitions_strictly(false);
        self.guard_failed = self.workspace().enabled.is_empty() && self.execution_error_waits();
        let took = !self.workspace().enabled.is_empty();
        if took {
            self.microstep();
        } else {
            self.report_unhandled_error();
        }
        self.run_to_completion().map(|()| self.selection(took))
    }

    /// Whether the step is over as it stands, as `run_to_completion` would find at once: the
    /// run goes on, no state has eventless transitions and nothing was raised.
    fn settled(&self) -> bool {
        self.instance.running
            && !self.machine.has_eventless
            && self.instance.internal_queue.is_empty()
    }

    /// Ends a settled step as `run_to_completion` would: only a signal or the clock, which
    /// may have cut an evaluation short, stops it.
    #[inline(always)]
    fn finish_settled(&mut self) -> Result<(), RunError> {
        // A step whose budgets never came into force evaluated nothing in full: nothing in it
        // was cut short, and its first microstep is too early to look at the clock.
        if self.budgets.is_none() {
            return Ok(());
        }
        self.finish_settled_in_force()
    }

    #[inline(never)]
    fn finish_settled_in_force(&mut self) -> Result<(), RunError> {
        match budget::step_must_stop(1) {
            None => Ok(()),
            Some(why) => Err(self.stop_step(why)),
        }
    }

    /// The external event's `Selection`, from whether a transition took it.
    fn selection(&self, took: bool) -> Selection {
        match (took, self.guard_failed) {
            (true, _) => Selection::Taken,
            (false, true) => Selection::GuardFailed,
            (false, false) => Selection::NotTaken,
        }
    }

    /// The inner loop of `mainEventLoop`: eventless transitions first, then internal events.
    ///
    /// Every microstep counts towards the limit, and so does an internal event that enables
    /// nothing: an eventless guard that keeps failing raises `error.execution` forever without
    /// taking a transition.
    fn run_to_completion(&mut self) -> Result<(), RunError> {
        let limit = self.limits.max_microsteps;
        let mut steps = 0;
        while self.instance.running {
            if let Some(why) = budget::step_must_stop(steps + 1) {
                return Err(self.stop_step(why));
            }
            if let Some(error) = self.take_execution_error() {
                // `errors: strict`: the error before anything that could read what failed.
                *self.event = CurrentEvent::Internal(error);
                self.select_transitions_strictly(false);
                if self.workspace().enabled.is_empty() {
                    self.fail_on_unhandled_error();
                    break;
                }
            } else {
                if self.machine.has_eventless {
                    self.select_transitions_strictly(true);
                } else {
                    // No state has eventless transitions: selecting them would find none.
                    self.workspace().enabled.clear();
                }
                if self.workspace().enabled.is_empty() && !self.execution_error_waits() {
                    let Some(event) = self.instance.internal_queue.pop_front() else {
                        break;
                    };
                    *self.event = CurrentEvent::Internal(event);
                    self.select_transitions_strictly(false);
                    if self.workspace().enabled.is_empty() {
                        self.report_unhandled_error();
                    }
                }
            }
            steps += 1;
            if steps > limit {
                return Err(self.livelock(limit));
            }
            // Only what the loop does in its second half is named: the states it cycles through,
            // not those it passed on the way in.
            if steps == limit / 2 {
                self.workspace().looping_states.clear();
            }
            if !self.workspace().enabled.is_empty() {
                self.microstep();
            }
        }
        // The last evaluation may have been cut short by a stop or the clock.
        if let Some(why) = budget::step_must_stop(1) {
            return Err(self.stop_step(why));
        }
        if !self.instance.running {
            self.settle_queued_errors();
            self.exit_interpreter();
            // The exit actions `exitInterpreter` ran may have failed too.
            self.settle_queued_errors();
        }
        Ok(())
    }

    /// Stops a macrostep that ran out of time, or that a signal interrupted, naming the
    /// states it was busy in.
    #[cold]
    fn stop_step(&mut self, why: Exceeded) -> RunError {
        let machine = self.machine;
        let states = self
            .instance
            .configuration
            .iter()
            .filter(|state| machine.state(*state).is_atomic())
            .map(|state| &*machine.state(state).id)
            .collect::<Vec<_>>()
            .join(", ");
        match why {
            Exceeded::StepTime { limit } => {
                self.instance.running = false;
                RunError::StepTime {
                    limit: budget::format_duration(limit),
                    states,
                }
            }
            _ => RunError::Interrupted { states },
        }
    }

    /// Stops a macrostep that does not settle, naming the states of the loop.
    fn livelock(&mut self, limit: usize) -> RunError {
        let machine = self.machine;
        let workspace = workspace_in(self.workspace);
        for &transition in &workspace.enabled {
            workspace
                .looping_states
                .insert(machine.transition(transition).source);
        }
        // A loop of events that enable nothing has no states of its own: name where it is.
        if workspace.looping_states.is_empty() {
            for state in self.instance.configuration.iter() {
                if machine.state(state).is_atomic() {
                    workspace.looping_states.insert(state);
                }
            }
        }
        let states: Vec<&str> = workspace
            .looping_states
            .iter()
            .map(|state| &*machine.state(state).id)
            .collect();
        self.instance.running = false;
        RunError::MicrostepLimit {
            microsteps: limit,
            states: states.join(", "),
        }
    }

    /// `selectTransitions` (the current event's) or `selectEventlessTransitions`: for each
    /// active atomic state in document order, the first enabled transition of it or of its
    /// nearest ancestor. Guards see the current event in both cases.
    fn select_transitions(&mut self, eventless: bool) {
        let machine = self.machine;
        let instance = &*self.instance;
        let workspace = workspace_in(self.workspace);
        let event = self.event.get();
        workspace.enabled.clear();
        // A known event reads the precomputed candidates of each atomic state.
        let index = match (eventless, event.and_then(|event| event.event_type)) {
            (false, Some(event_type)) => {
                machine.candidates.as_ref().map(|index| (index, event_type))
            }
            _ => None,
        };
        for atomic in instance.configuration.iter() {
            if !machine.state(atomic).is_atomic() {
                continue;
            }
            if let Some((index, event_type)) = index {
                for candidate in index.candidates(atomic, event_type) {
                    let transition_id = candidate.transition;
                    if enable_if_guard_holds(machine, instance, event, workspace, transition_id) {
                        break;
                    }
                }
                continue;
            }
            let chain =
                std::iter::once(atomic).chain(machine.state(atomic).ancestors.iter().copied());
            'ancestors: for state in chain {
                let node = machine.state(state);
                let candidates = if eventless {
                    &node.eventless
                } else {
                    &node.transitions
                };
                for &transition_id in candidates {
                    let transition = machine.transition(transition_id);
                    if !eventless
                        && !event
                            .is_some_and(|event| transition.matches(&event.name, event.event_type))
                    {
                        continue;
                    }
                    if enable_if_guard_holds(machine, instance, event, workspace, transition_id) {
                        break 'ancestors;
                    }
                }
            }
        }
        if !self.workspace().guard_errors.is_empty() {
            // Taken out and put back, so the buffer keeps its capacity.
            let mut errors = std::mem::take(&mut self.workspace().guard_errors);
            for error in errors.drain(..) {
                self.raise_execution_error(error);
            }
            self.workspace().guard_errors = errors;
        }
        if self.workspace().enabled.len() > 1 {
            self.remove_conflicting_transitions();
        }
    }

    /// `removeConflictingTransitions`: of two transitions whose exit sets intersect, the one
    /// from the descendant source wins if it comes later, otherwise the earlier one wins.
    fn remove_conflicting_transitions(&mut self) {
        let machine = self.machine;
        let workspace = workspace_in(self.workspace);
        workspace.filtered.clear();
        for index in 0..workspace.enabled.len() {
            let first = workspace.enabled[index];
            compute_exit_set(
                machine,
                self.instance,
                &[first],
                &mut workspace.exit_set,
                &mut workspace.targets,
            );
            workspace.to_remove.clear();
            let mut preempted = false;
            for &second in &workspace.filtered {
                compute_exit_set(
                    machine,
                    self.instance,
                    &[second],
                    &mut workspace.other_exit_set,
                    &mut workspace.targets,
                );
                if workspace.exit_set.intersects(&workspace.other_exit_set) {
                    if machine.is_descendant(
                        machine.transition(first).source,
                        machine.transition(second).source,
                    ) {
                        workspace.to_remove.push(second);
                    } else {
                        preempted = true;
                        break;
                    }
                }
            }
            if !preempted {
                let to_remove = &workspace.to_remove;
                workspace
                    .filtered
                    .retain(|transition| !to_remove.contains(transition));
                workspace.filtered.push(first);
            }
        }
        std::mem::swap(&mut workspace.enabled, &mut workspace.filtered);
    }

    /// `microstep`: exit states, run transition content, enter states.
    fn microstep(&mut self) {
        for index in 0..self.workspace().enabled.len() {
            let transition = self.workspace().enabled[index];
            let source = self.machine.transition(transition).source;
            self.workspace().looping_states.insert(source);
            self.host.transition_taken(transition);
        }
        self.exit_states();
        self.execute_transition_content();
        self.enter_states();
    }

    /// `exitStates`: record history, then run exit actions in exit order.
    fn exit_states(&mut self) {
        let machine = self.machine;
        let workspace = workspace_in(self.workspace);
        compute_exit_set(
            machine,
            self.instance,
            &workspace.enabled,
            &mut workspace.exit_set,
            &mut workspace.targets,
        );
        let exit_set = std::mem::take(&mut self.workspace().exit_set);
        for state in exit_set.iter_reverse() {
            self.record_history(state);
        }
        for state in exit_set.iter_reverse() {
            // The exit block belongs to the innermost ancestor that stays active.
            self.owner = machine
                .state(state)
                .ancestors
                .iter()
                .copied()
                .find(|ancestor| !exit_set.contains(*ancestor))
                .unwrap_or(StateId::ROOT);
            self.exit_state(state);
        }
        self.workspace().exit_set = exit_set;
    }

    /// Records what each history state of `state` restores, before `state` is exited.
    fn record_history(&mut self, state: StateId) {
        let machine = self.machine;
        let instance = &mut *self.instance;
        for &child in &machine.state(state).children {
            let StateKind::History { deep } = machine.state(child).kind else {
                continue;
            };
            // Each history state's set is allocated once, then overwritten in place.
            let position = match instance.history.iter().position(|(h, _)| *h == child) {
                Some(position) => position,
                None => {
                    let set = StateSet::with_capacity(machine.states.len());
                    instance.history.push((child, set));
                    instance.history.len() - 1
                }
            };
            let recorded = &mut instance.history[position].1;
            recorded.clear();
            for active in instance.configuration.iter() {
                let keep = if deep {
                    machine.state(active).is_atomic() && machine.is_descendant(active, state)
                } else {
                    machine.state(active).parent == Some(state)
                };
                if keep {
                    recorded.insert(active);
                }
            }
        }
    }

    /// Leaves one state: cancel its timers, run its exit actions, drop it from the configuration.
    #[inline(always)]
    fn exit_state(&mut self, state: StateId) {
        let node = self.machine.state(state);
        for timer in &node.timers {
            self.host.cancel(&timer.event);
        }
        for invoke in &node.invokes {
            self.host.cancel_invoke(&invoke.id);
        }
        self.execute_content(&node.exit);
        self.instance.configuration.remove(state);
        // When the run ends, what it started is let finish instead.
        if self.instance.running {
            self.host.cancel_effects_of(state);
        }
        self.host.state_exited(state);
    }

    /// `executeTransitionContent`: transition actions, in the order of the enabled set.
    fn execute_transition_content(&mut self) {
        for index in 0..self.workspace().enabled.len() {
            let transition_id = self.workspace().enabled[index];
            let transition = self.machine.transition(transition_id);
            if transition.actions.is_empty() {
                continue;
            }
            self.owner = self.transition_owner(transition_id);
            self.execute_content(&transition.actions);
        }
    }

    /// What a transition's actions belong to: the innermost state that stays active across
    /// it, its domain (its source, for a targetless transition).
    fn transition_owner(&mut self, transition_id: TransitionId) -> StateId {
        let machine = self.machine;
        let transition = machine.transition(transition_id);
        match reach(machine, transition_id) {
            Reach::Fixed { domain, .. } => *domain,
            Reach::Targetless => transition.source,
            Reach::Dynamic => {
                let workspace = workspace_in(self.workspace);
                transition_domain(
                    machine,
                    self.instance,
                    transition_id,
                    &mut workspace.targets,
                )
                .unwrap_or(transition.source)
            }
        }
    }

    /// `enterStates`: compute the entry set, then enter in document order, running entry
    /// actions, initial and default-history content, and raising done events.
    fn enter_states(&mut self) {
        self.compute_entry_set();
        let states_to_enter = std::mem::take(&mut self.workspace().states_to_enter);
        for state in states_to_enter.iter() {
            let default_entry = self.workspace().states_for_default_entry.contains(state);
            let history_content = self
                .workspace()
                .default_history_content
                .iter()
                .position(|(parent, _)| *parent == state)
                .map(|position| {
                    let (_, transition) = self
                        .workspace()
                        .default_history_content
                        .swap_remove(position);
                    transition
                });
            self.enter_state(state, default_entry, history_content);
        }
        self.workspace().states_to_enter = states_to_enter;
    }

    /// Enters one state: its entry actions, timers and invokes, then its initial transition's
    /// content if it is entered by default, or the default content of a history state of it
    /// that had nothing recorded; a final state then raises its done events or ends the run.
    #[inline(always)]
    fn enter_state(
        &mut self,
        state: StateId,
        default_entry: bool,
        history_content: Option<TransitionId>,
    ) {
        let machine = self.machine;
        let node = machine.state(state);
        self.instance.configuration.insert(state);
        if let Some(workspace) = &mut *self.workspace {
            workspace.looping_states.insert(state);
        }
        self.host.state_entered(state);
        // Its entry block, and its initial transition's or history's default content, run
        // inside it.
        self.owner = state;
        self.execute_content(&node.entry);
        // Most states have neither: checked here, without a call.
        if !node.timers.is_empty() {
            self.start_timers(state);
        }
        if !node.invokes.is_empty() {
            self.start_invokes(state);
        }
        if default_entry && let Some(initial) = node.initial {
            self.execute_content(&machine.transition(initial).actions);
        }
        if let Some(transition) = history_content {
            self.execute_content(&machine.transition(transition).actions);
        }
        if node.kind == StateKind::Final {
            self.reached_final_state(state);
        }
    }

    /// The final-state branch of `enterStates`: a top-level final ends the run with its
    /// outcome; otherwise `done.state.<parent>` (with the output as data) is raised, and
    /// `done.state.<grandparent>` too when that is a parallel state whose regions are all final.
    fn reached_final_state(&mut self, state: StateId) {
        let machine = self.machine;
        let node = machine.state(state);
        let Some(parent) = node.parent else { return };
        let output = self.done_data(state);
        if parent == StateId::ROOT {
            self.instance.running = false;
            self.instance.outcome = Some(Box::new(Outcome {
                final_state: Some(state),
                exit_code: node.exit_code,
                output,
                failure: None,
            }));
            return;
        }
        let done = Event::of_type(
            machine,
            machine.done_events[parent.index()],
            Origin::Platform,
        )
        .with_data(output);
        self.instance.internal_queue.push_back(done);
        if let Some(grandparent) = machine.state(parent).parent
            && machine.state(grandparent).kind == StateKind::Parallel
            && self
                .children(grandparent)
                .all(|child| self.is_in_final_state(child))
        {
            let done = Event::of_type(
                machine,
                machine.done_events[grandparent.index()],
                Origin::Platform,
            );
            self.instance.internal_queue.push_back(done);
        }
    }

    /// The final state's output, rendered now; a failure raises `error.execution`.
    fn done_data(&mut self, state: StateId) -> Value {
        let Some(output) = &self.machine.state(state).output else {
            return Value::Null;
        };
        let mut result = Value::Null;
        let outcome = self.with_execution(|execution| {
            execution
                .with_scope(|scope| output.render(scope))
                .map(|value| result = value)
        });
        if let Err(error) = outcome {
            self.raise_execution_error(error);
        }
        result
    }

    /// Schedules the `after` timers of a state just entered.
    fn start_timers(&mut self, state: StateId) {
        let machine = self.machine;
        for timer in &machine.state(state).timers {
            let delay = self
                .with_execution(|execution| execution.with_scope(|scope| timer.delay.wait(scope)));
            match delay {
                Ok(wait) => {
                    let mut timer_event =
                        Event::of_type(machine, timer.event_type, Origin::Platform);
                    timer_event.send_id = Some(timer.event.clone());
                    self.host.send(SendRequest {
                        event: timer_event,
                        delay_milliseconds: wait.milliseconds,
                        deadline: wait.deadline,
                        id: Some(timer.event.clone()),
                        to: None,
                    });
                }
                Err(error) => self.raise_execution_error(error),
            }
        }
    }

    /// Starts the child protocols of a state just entered, with their inputs rendered now.
    fn start_invokes(&mut self, state: StateId) {
        let machine = self.machine;
        for invoke in &machine.state(state).invokes {
            let child = &invoke.machine;
            let inputs = self.with_execution(|execution| {
                execution.with_scope(|scope| {
                    crate::pipeline::actions::child_inputs::render(
                        child,
                        &invoke.inputs,
                        scope,
                        &invoke.id,
                    )
                })
            });
            match inputs {
                Ok(inputs) => self
                    .host
                    .start_invoke(crate::pipeline::actions::InvokeRequest {
                        id: invoke.id.clone(),
                        machine: child.clone(),
                        inputs,
                        done: invoke.done,
                        failed: invoke.failed,
                        autoforward: invoke.autoforward,
                        takes_events: invoke.takes_events,
                    }),
                Err(error) => self.raise_execution_error(error),
            }
        }
    }

    /// `computeEntrySet`, over the enabled transitions.
    fn compute_entry_set(&mut self) {
        let workspace = workspace_in(self.workspace);
        compute_entry_set(self.machine, self.instance, workspace);
    }

    /// Child states (not history pseudo-states) of a state.
    fn children(&self, state: StateId) -> impl Iterator<Item = StateId> + '_ {
        self.machine
            .state(state)
            .children
            .iter()
            .copied()
            .filter(|child| !self.machine.state(*child).is_history())
    }

    /// `isInFinalState`.
    fn is_in_final_state(&self, state: StateId) -> bool {
        let node = self.machine.state(state);
        match node.kind {
            StateKind::Compound => self.children(state).any(|child| {
                self.machine.state(child).kind == StateKind::Final
                    && self.instance.configuration.contains(child)
            }),
            StateKind::Parallel => self
                .children(state)
                .all(|child| self.is_in_final_state(child)),
            _ => false,
        }
    }

    /// `exitInterpreter`: exit what is still active, in exit order. Each state leaves the
    /// configuration after its exit actions, so `In()` still sees it during them.
    fn exit_interpreter(&mut self) {
        self.owner = StateId::ROOT;
        loop {
            let Some(state) = self.instance.configuration.iter_reverse().next() else {
                break;
            };
            self.exit_state(state);
        }
    }

    /// Runs a block; a failure stops the block and raises `error.execution`.
    #[inline(always)]
    fn execute_content(&mut self, actions: &[Action]) {
        // Most blocks are empty: checked where the call is, without a call.
        if !actions.is_empty() {
            self.execute_block(actions);
        }
    }

    fn execute_block(&mut self, actions: &[Action]) {
        // Assignments, the commonest actions, are applied here, without an `Execution`.
        let mut rest = actions;
        while let [Action::Assign(assign), tail @ ..] = rest {
            if !self.apply_assignments_from(assign, 0) {
                return;
            }
            rest = tail;
        }
        if !rest.is_empty() {
            self.execute_rest(rest);
        }
    }

    /// Applies the assignments of `assign` from `first` on; false when one failed, its error
    /// raised (the block stops there).
    #[inline(always)]
    fn apply_assignments_from(&mut self, assign: &Assign, first: usize) -> bool {
        let mut next = assign.apply_integers(&mut self.instance.context, first);
        while let Some(index) = next {
            if let Err(error) = self.apply_evaluated(assign, index) {
                self.raise_execution_error(error);
                return false;
            }
            next = assign.apply_integers(&mut self.instance.context, index + 1);
        }
        true
    }

    /// The actions of a block after its leading assignments, through an `Execution`: apart,
    /// so that a block of assignments alone does not pay for this one's frame.
    #[inline(never)]
    fn execute_rest(&mut self, rest: &[Action]) {
        self.budgets_in_force();
        if let Err(error) = self.with_execution(|execution| execute_block(rest, execution)) {
            self.raise_execution_error(error);
        }
    }

    /// One assignment that has no raw int form, evaluated over the current data.
    #[inline(never)]
    fn apply_evaluated(&mut self, assign: &Assign, index: usize) -> Result<(), EvaluationError> {
        self.budgets_in_force();
        let Instance {
            configuration,
            context,
            inputs,
            clock,
            ..
        } = &mut *self.instance;
        let view = StepView {
            machine: self.machine,
            configuration,
            inputs,
            event: self.event.get(),
            clock: *clock,
        };
        assign.apply_evaluated(index, context, view)
    }

    /// Runs `body` with what actions may read and change, the current event included.
    fn with_execution<T>(&mut self, body: impl FnOnce(&mut Execution) -> T) -> T {
        let instance = &mut *self.instance;
        let mut execution = Execution {
            machine: self.machine,
            context: &mut instance.context,
            inputs: &instance.inputs,
            event: self.event.get(),
            clock: instance.clock,
            configuration: &instance.configuration,
            internal_queue: &mut instance.internal_queue,
            host: self.host,
            owner: self.owner,
        };
        body(&mut execution)
    }
}

/// `computeEntrySet`: the states the enabled transitions enter, which of them are entered by
/// default (their initial transition's content runs), and the default content of history
/// states that had nothing recorded.
fn compute_entry_set(machine: &Machine, instance: &Instance, workspace: &mut Workspace) {
    workspace.states_to_enter.clear();
    workspace.states_for_default_entry.clear();
    workspace.default_history_content.clear();
    for index in 0..workspace.enabled.len() {
        let transition_id = workspace.enabled[index];
        // Enabled transitions have disjoint domains, so each one's fixed entry set adds to the
        // others' exactly as computing it here would.
        // Read without working it out: `fixed_reach` itself comes here for the transition whose
        // reach it is working out.
        if let Some(Reach::Fixed {
            enter,
            default_entry,
            ..
        }) = machine.transition(transition_id).reach.get()
        {
            enter
                .iter()
                .for_each(|state| workspace.states_to_enter.insert(*state));
            default_entry
                .iter()
                .for_each(|state| workspace.states_for_default_entry.insert(*state));
            continue;
        }
        for &target in &machine.transition(transition_id).targets {
            add_descendant_states_to_enter(machine, instance, workspace, target);
        }
        let mut effective = std::mem::take(&mut workspace.targets);
        let domain = transition_domain(machine, instance, transition_id, &mut effective);
        for &target in &effective {
            add_ancestor_states_to_enter(machine, instance, workspace, target, domain);
        }
        workspace.targets = effective;
    }
}

/// `addDescendantStatesToEnter`: `state` and what entering it enters below it.
fn add_descendant_states_to_enter(
    machine: &Machine,
    instance: &Instance,
    workspace: &mut Workspace,
    state: StateId,
) {
    let node = machine.state(state);
    if node.is_history() {
        workspace.consulted_history = true;
        let parent = node.parent.unwrap_or(StateId::ROOT);
        if let Some(recorded) = instance.history_of(state) {
            for target in recorded.iter() {
                add_descendant_states_to_enter(machine, instance, workspace, target);
            }
            for target in recorded.iter() {
                add_ancestor_states_to_enter(machine, instance, workspace, target, Some(parent));
            }
        } else if let Some(default) = node.initial {
            workspace.default_history_content.push((parent, default));
            let targets = &machine.transition(default).targets;
            for &target in targets {
                add_descendant_states_to_enter(machine, instance, workspace, target);
            }
            for &target in targets {
                add_ancestor_states_to_enter(machine, instance, workspace, target, Some(parent));
            }
        }
        return;
    }
    workspace.states_to_enter.insert(state);
    if node.is_compound() {
        workspace.states_for_default_entry.insert(state);
        if let Some(initial) = node.initial {
            let targets = &machine.transition(initial).targets;
            for &target in targets {
                add_descendant_states_to_enter(machine, instance, workspace, target);
            }
            for &target in targets {
                add_ancestor_states_to_enter(machine, instance, workspace, target, Some(state));
            }
        }
    } else if node.kind == StateKind::Parallel {
        enter_missing_regions(machine, instance, workspace, state);
    }
}

/// `addAncestorStatesToEnter`: the proper ancestors of `state` below `ancestor` (all of them,
/// short of the document itself, for `None`).
fn add_ancestor_states_to_enter(
    machine: &Machine,
    instance: &Instance,
    workspace: &mut Workspace,
    state: StateId,
    ancestor: Option<StateId>,
) {
    for &proper_ancestor in &machine.state(state).ancestors {
        if Some(proper_ancestor) == ancestor || proper_ancestor == StateId::ROOT {
            break;
        }
        workspace.states_to_enter.insert(proper_ancestor);
        if machine.state(proper_ancestor).kind == StateKind::Parallel {
            enter_missing_regions(machine, instance, workspace, proper_ancestor);
        }
    }
}

/// The parallel-state step shared by both procedures above: every region that nothing in the
/// entry set enters yet is entered by default.
fn enter_missing_regions(
    machine: &Machine,
    instance: &Instance,
    workspace: &mut Workspace,
    parallel: StateId,
) {
    for &child in &machine.state(parallel).children {
        if machine.state(child).is_history() {
            continue;
        }
        let end = machine.state(child).descendants_end;
        let covered =
            (child.0 + 1..end.0).any(|index| workspace.states_to_enter.contains(StateId(index)));
        if !covered {
            add_descendant_states_to_enter(machine, instance, workspace, child);
        }
    }
}

/// `computeExitSet`: active states that are descendants of each transition's domain.
fn compute_exit_set(
    machine: &Machine,
    instance: &Instance,
    transitions: &[TransitionId],
    exit_set: &mut StateSet,
    scratch: &mut Vec<StateId>,
) {
    exit_set.clear();
    for &transition_id in transitions {
        let domain = match machine.transition(transition_id).reach.get() {
            Some(Reach::Fixed { domain, .. }) => *domain,
            Some(Reach::Targetless) => continue,
            Some(Reach::Dynamic) | None => {
                match transition_domain(machine, instance, transition_id, scratch) {
                    Some(domain) => domain,
                    None => continue,
                }
            }
        };
        for state in instance.configuration.iter() {
            if machine.is_descendant(state, domain) {
                exit_set.insert(state);
            }
        }
    }
}

/// A transition's reach, worked out the first time it is asked and kept in the machine.
fn reach(machine: &Machine, transition_id: TransitionId) -> &Reach {
    machine
        .transition(transition_id)
        .reach
        .get_or_init(|| fixed_reach(machine, transition_id))
}

/// What a transition exits and enters when history plays no part in it, computed by the
/// procedures below on an instance that has recorded no history; `Reach::Dynamic` as soon as
/// a history state is among the targets or is read while computing the entry set.
pub fn fixed_reach(machine: &Machine, transition_id: TransitionId) -> Reach {
    let transition = machine.transition(transition_id);
    if transition.targets.is_empty() {
        return Reach::Targetless;
    }
    if transition
        .targets
        .iter()
        .any(|target| machine.state(*target).is_history())
    {
        return Reach::Dynamic;
    }
    let instance = Instance::new(machine, Arc::from([]));
    let mut workspace = Workspace::default();
    let Some(domain) = transition_domain(machine, &instance, transition_id, &mut workspace.targets)
    else {
        return Reach::Targetless;
    };
    workspace.enabled.push(transition_id);
    compute_entry_set(machine, &instance, &mut workspace);
    if workspace.consulted_history {
        return Reach::Dynamic;
    }
    Reach::Fixed {
        domain,
        enter: workspace.states_to_enter.iter().collect(),
        default_entry: workspace.states_for_default_entry.iter().collect(),
    }
}

/// `getTransitionDomain`: the state whose descendants the transition exits and enters.
fn transition_domain(
    machine: &Machine,
    instance: &Instance,
    transition_id: TransitionId,
    scratch: &mut Vec<StateId>,
) -> Option<StateId> {
    let transition = machine.transition(transition_id);
    effective_target_states(machine, instance, transition_id, scratch);
    if scratch.is_empty() {
        return None;
    }
    let source = transition.source;
    // The document's own initial transition: everything is entered below the root.
    if source == StateId::ROOT {
        return Some(StateId::ROOT);
    }
    if transition.internal
        && machine.state(source).is_compound()
        && scratch
            .iter()
            .all(|target| machine.is_descendant(*target, source))
    {
        return Some(source);
    }
    Some(find_lcca(machine, source, scratch))
}

/// `findLCCA`: the nearest compound (or root) proper ancestor of `head` containing every state.
fn find_lcca(machine: &Machine, head: StateId, tail: &[StateId]) -> StateId {
    machine
        .state(head)
        .ancestors
        .iter()
        .copied()
        .filter(|ancestor| machine.state(*ancestor).is_compound())
        .find(|ancestor| {
            tail.iter()
                .all(|state| machine.is_descendant(*state, *ancestor))
        })
        .unwrap_or(StateId::ROOT)
}

/// `getEffectiveTargetStates`: targets with history states replaced by what they restore.
fn effective_target_states(
    machine: &Machine,
    instance: &Instance,
    transition_id: TransitionId,
    out: &mut Vec<StateId>,
) {
    out.clear();
    add_effective_targets(
        machine,
        instance,
        &machine.transition(transition_id).targets,
        out,
    );
}

fn add_effective_targets(
    machine: &Machine,
    instance: &Instance,
    targets: &[StateId],
    out: &mut Vec<StateId>,
) {
    for &target in targets {
        if !machine.state(target).is_history() {
            if !out.contains(&target) {
                out.push(target);
            }
            continue;
        }
        match instance.history_of(target) {
            Some(recorded) => {
                for state in recorded.iter() {
                    if !out.contains(&state) {
                        out.push(state);
                    }
                }
            }
            None => {
                if let Some(default) = machine.state(target).initial {
                    add_effective_targets(
                        machine,
                        instance,
                        &machine.transition(default).targets,
                        out,
                    );
                }
            }
        }
    }
}

/// Adds the transition to the enabled set if its guard holds, and says whether it did (which
/// ends the search for this atomic state). A failing guard counts as false and is kept to raise
/// `error.execution`.
fn enable_if_guard_holds(
    machine: &Machine,
    instance: &Instance,
    event: Option<&Event>,
    workspace: &mut Workspace,
    transition_id: TransitionId,
) -> bool {
    match condition_holds(machine, instance, event, transition_id) {
        Ok(true) => {
            if !workspace.enabled.contains(&transition_id) {
                workspace.enabled.push(transition_id);
            }
            true
        }
        Ok(false) => false,
        Err(error) => {
            workspace.guard_errors.push(error);
            false
        }
    }
}

/// `conditionMatch`: evaluates a transition's guard against the current event (true when it
/// has no guard). Inlined: no guard, or one the fast reader answers over the context, costs no
/// call; a guard evaluated in full is apart.
#[inline(always)]
fn condition_holds(
    machine: &Machine,
    instance: &Instance,
    event: Option<&Event>,
    transition_id: TransitionId,
) -> Result<bool, EvaluationError> {
    let Some(guard) = &machine.transition(transition_id).guard else {
        return Ok(true);
    };
    if let Some(holds) = guard.condition_over(&instance.context) {
        return Ok(holds);
    }
    evaluate_guard(machine, instance, event, guard)
}

/// A guard the fast reader does not answer, evaluated in full over the step's view.
#[inline(never)]
fn evaluate_guard(
    machine: &Machine,
    instance: &Instance,
    event: Option<&Event>,
    guard: &crate::pipeline::compile::expression::Expression,
) -> Result<bool, EvaluationError> {
    let view = StepView {
        machine,
        configuration: &instance.configuration,
        inputs: &instance.inputs,
        event,
        clock: instance.clock,
    };
    view.with_scope(&instance.context, |scope| guard.evaluate_condition(scope))
}
