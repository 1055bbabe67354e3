//! The W3C SCXML algorithm (Appendix D), pure and synchronous, named after the spec's procedures.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::actions::{execute_block, Action, Execution, Host, SendRequest};
use crate::compile::expression::{EvaluationError, Scope};
use crate::compile::machine::{Machine, StateId, StateKind, TransitionId};
use crate::run::event::{Event, Origin};
use crate::run::state_set::StateSet;
use crate::value::Value;

/// How a run ended: the top-level final state reached, its exit code and output.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub final_state: StateId,
    pub exit_code: u8,
    pub output: Value,
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
    pub outcome: Option<Outcome>,
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
    /// States entered during the current macrostep, for naming the states of a runaway loop.
    entered_this_macrostep: StateSet,
}

/// Limits on one macrostep.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Microsteps one macrostep may take before the run is stopped as a livelock.
    pub max_microsteps: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_microsteps: 10_000,
        }
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
}

impl Instance {
    pub fn new(machine: &Machine, inputs: Arc<[Value]>) -> Instance {
        Instance {
            configuration: StateSet::with_capacity(machine.states.len()),
            context: machine.context.iter().map(|(_, value)| value.clone()).collect(),
            inputs,
            history: Vec::new(),
            internal_queue: VecDeque::new(),
            running: false,
            outcome: None,
        }
    }

    fn history_of(&self, history_state: StateId) -> Option<&StateSet> {
        self.history
            .iter()
            .find(|(state, _)| *state == history_state)
            .map(|(_, recorded)| recorded)
    }
}

/// One run of the algorithm over an instance: the procedures of Appendix D.
pub struct Algorithm<'a> {
    pub machine: &'a Machine,
    pub instance: &'a mut Instance,
    pub workspace: &'a mut Workspace,
    pub host: &'a mut dyn Host,
    pub limits: Limits,
}

impl Algorithm<'_> {
    /// Enters the initial configuration and runs to completion (SCXML `interpret`).
    pub fn start(&mut self) -> Result<(), RunError> {
        self.instance.running = true;
        self.workspace.entered_this_macrostep.clear();
        if let Some(initial) = self.machine.state(StateId::ROOT).initial {
            self.workspace.enabled.clear();
            self.workspace.enabled.push(initial);
            self.enter_states(None);
        }
        self.run_to_completion()
    }

    /// Handles one external event: its microstep, then eventless and internal events until
    /// stable (one iteration of SCXML's `mainEventLoop`).
    pub fn process_external_event(&mut self, event: &Event) -> Result<(), RunError> {
        if !self.instance.running {
            return Ok(());
        }
        self.workspace.entered_this_macrostep.clear();
        self.select_transitions(Some(event));
        if !self.workspace.enabled.is_empty() {
            self.microstep(Some(event));
        }
        self.run_to_completion()
    }

    /// The inner loop of `mainEventLoop`: eventless transitions first, then internal events.
    fn run_to_completion(&mut self) -> Result<(), RunError> {
        let mut microsteps = 0;
        while self.instance.running {
            self.select_transitions(None);
            let internal_event = if self.workspace.enabled.is_empty() {
                let Some(event) = self.instance.internal_queue.pop_front() else {
                    break;
                };
                self.select_transitions(Some(&event));
                Some(event)
            } else {
                None
            };
            if !self.workspace.enabled.is_empty() {
                microsteps += 1;
                if microsteps > self.limits.max_microsteps {
                    return Err(self.livelock(microsteps));
                }
                self.microstep(internal_event.as_ref());
            }
        }
        if !self.instance.running {
            self.exit_interpreter();
        }
        Ok(())
    }

    fn livelock(&mut self, microsteps: usize) -> RunError {
        let states: Vec<&str> = self
            .workspace
            .entered_this_macrostep
            .iter()
            .map(|state| &*self.machine.state(state).id)
            .collect();
        self.instance.running = false;
        RunError::MicrostepLimit {
            microsteps: microsteps - 1,
            states: states.join(", "),
        }
    }

    /// `selectTransitions` / `selectEventlessTransitions`: for each active atomic state in
    /// document order, the first enabled transition of it or its nearest ancestor.
    fn select_transitions(&mut self, event: Option<&Event>) {
        let machine = self.machine;
        let instance = &*self.instance;
        let workspace = &mut *self.workspace;
        workspace.enabled.clear();
        for atomic in instance.configuration.iter() {
            if !machine.state(atomic).is_atomic() {
                continue;
            }
            let chain = std::iter::once(atomic).chain(machine.state(atomic).ancestors.iter().copied());
            'ancestors: for state in chain {
                let node = machine.state(state);
                let candidates = match event {
                    Some(_) => &node.transitions,
                    None => &node.eventless,
                };
                for &transition_id in candidates {
                    let transition = machine.transition(transition_id);
                    if let Some(event) = event
                        && !transition.matches(&event.name, event.event_type)
                    {
                        continue;
                    }
                    match condition_holds(machine, instance, transition_id, event) {
                        Ok(false) => {}
                        Ok(true) => {
                            if !workspace.enabled.contains(&transition_id) {
                                workspace.enabled.push(transition_id);
                            }
                            break 'ancestors;
                        }
                        // A failing guard counts as false and raises `error.execution`.
                        Err(error) => workspace.guard_errors.push(error),
                    }
                }
            }
        }
        for error in std::mem::take(&mut self.workspace.guard_errors) {
            self.raise_execution_error(error);
        }
        if self.workspace.enabled.len() > 1 {
            self.remove_conflicting_transitions();
        }
    }

    /// `removeConflictingTransitions`: of two transitions whose exit sets intersect, the one
    /// from the descendant source wins if it comes later, otherwise the earlier one wins.
    fn remove_conflicting_transitions(&mut self) {
        let machine = self.machine;
        let workspace = &mut *self.workspace;
        workspace.filtered.clear();
        for index in 0..workspace.enabled.len() {
            let first = workspace.enabled[index];
            compute_exit_set(machine, self.instance, &[first], &mut workspace.exit_set, &mut workspace.targets);
            workspace.to_remove.clear();
            let mut preempted = false;
            for &second in &workspace.filtered {
                compute_exit_set(machine, self.instance, &[second], &mut workspace.other_exit_set, &mut workspace.targets);
                if workspace.exit_set.intersects(&workspace.other_exit_set) {
                    if machine.is_descendant(machine.transition(first).source, machine.transition(second).source) {
                        workspace.to_remove.push(second);
                    } else {
                        preempted = true;
                        break;
                    }
                }
            }
            if !preempted {
                let to_remove = &workspace.to_remove;
                workspace.filtered.retain(|transition| !to_remove.contains(transition));
                workspace.filtered.push(first);
            }
        }
        std::mem::swap(&mut workspace.enabled, &mut workspace.filtered);
    }

    /// `microstep`: exit states, run transition content, enter states.
    fn microstep(&mut self, event: Option<&Event>) {
        for index in 0..self.workspace.enabled.len() {
            self.host.transition_taken(self.workspace.enabled[index]);
        }
        self.exit_states(event);
        self.execute_transition_content(event);
        self.enter_states(event);
    }

    /// `exitStates`: record history, then run exit actions in exit order.
    fn exit_states(&mut self, event: Option<&Event>) {
        let workspace = &mut *self.workspace;
        compute_exit_set(self.machine, self.instance, &workspace.enabled, &mut workspace.exit_set, &mut workspace.targets);
        let machine = self.machine;
        for state in workspace.exit_set.iter_reverse() {
            for &child in &machine.state(state).children {
                if let StateKind::History { deep } = machine.state(child).kind {
                    let mut recorded = StateSet::with_capacity(machine.states.len());
                    for active in self.instance.configuration.iter() {
                        let keep = if deep {
                            machine.state(active).is_atomic() && machine.is_descendant(active, state)
                        } else {
                            machine.state(active).parent == Some(state)
                        };
                        if keep {
                            recorded.insert(active);
                        }
                    }
                    match self.instance.history.iter_mut().find(|(h, _)| *h == child) {
                        Some((_, slot)) => *slot = recorded,
                        None => self.instance.history.push((child, recorded)),
                    }
                }
            }
        }
        let exit_set = std::mem::take(&mut self.workspace.exit_set);
        for state in exit_set.iter_reverse() {
            let node = machine.state(state);
            for timer in &node.timers {
                self.host.cancel(&timer.event);
            }
            self.execute_content(&node.exit, event);
            self.instance.configuration.remove(state);
            self.host.state_exited(state);
        }
        self.workspace.exit_set = exit_set;
    }

    /// `executeTransitionContent`: transition actions, in the order of the enabled set.
    fn execute_transition_content(&mut self, event: Option<&Event>) {
        for index in 0..self.workspace.enabled.len() {
            let transition = self.machine.transition(self.workspace.enabled[index]);
            self.execute_content(&transition.actions, event);
        }
    }

    /// `enterStates`: compute the entry set, then enter in document order, running entry
    /// actions, initial and default-history content, and raising done events.
    fn enter_states(&mut self, event: Option<&Event>) {
        let machine = self.machine;
        self.compute_entry_set();
        let states_to_enter = std::mem::take(&mut self.workspace.states_to_enter);
        for state in states_to_enter.iter() {
            let node = machine.state(state);
            self.instance.configuration.insert(state);
            self.workspace.entered_this_macrostep.insert(state);
            self.host.state_entered(state);
            self.execute_content(&node.entry, event);
            self.start_timers(state, event);
            if self.workspace.states_for_default_entry.contains(state)
                && let Some(initial) = node.initial
            {
                self.execute_content(&machine.transition(initial).actions, event);
            }
            if let Some(position) = self
                .workspace
                .default_history_content
                .iter()
                .position(|(parent, _)| *parent == state)
            {
                let (_, transition) = self.workspace.default_history_content.swap_remove(position);
                self.execute_content(&machine.transition(transition).actions, event);
            }
            if node.kind == StateKind::Final {
                self.reached_final_state(state, event);
            }
        }
        self.workspace.states_to_enter = states_to_enter;
    }

    fn reached_final_state(&mut self, state: StateId, event: Option<&Event>) {
        let machine = self.machine;
        let node = machine.state(state);
        let Some(parent) = node.parent else { return };
        let output = self.done_data(state, event);
        if parent == StateId::ROOT {
            self.instance.running = false;
            self.instance.outcome = Some(Outcome {
                final_state: state,
                exit_code: node.exit_code,
                output,
            });
            return;
        }
        let done = Event::of_type(machine, machine.done_events[parent.index()], Origin::Platform).with_data(output);
        self.instance.internal_queue.push_back(done);
        if let Some(grandparent) = machine.state(parent).parent
            && machine.state(grandparent).kind == StateKind::Parallel
            && self.children(grandparent).all(|child| self.is_in_final_state(child))
        {
            let done = Event::of_type(machine, machine.done_events[grandparent.index()], Origin::Platform);
            self.instance.internal_queue.push_back(done);
        }
    }

    /// The final state's output, rendered now; a failure raises `error.execution`.
    fn done_data(&mut self, state: StateId, event: Option<&Event>) -> Value {
        let Some(output) = &self.machine.state(state).output else {
            return Value::Null;
        };
        let mut result = Value::Null;
        let outcome = self.with_execution(event, |execution| {
            execution.with_scope(|scope| output.render(scope)).map(|value| result = value)
        });
        if let Err(error) = outcome {
            self.raise_execution_error(error);
        }
        result
    }

    /// Schedules the `after` timers of a state just entered.
    fn start_timers(&mut self, state: StateId, event: Option<&Event>) {
        let machine = self.machine;
        for timer in &machine.state(state).timers {
            let delay = self.with_execution(event, |execution| execution.with_scope(|scope| timer.delay.evaluate(scope)));
            match delay {
                Ok(delay_milliseconds) => {
                    let mut timer_event = Event::of_type(machine, timer.event_type, Origin::Platform);
                    timer_event.send_id = Some(timer.event.clone());
                    self.host.send(SendRequest {
                        event: timer_event,
                        delay_milliseconds,
                        id: Some(timer.event.clone()),
                    });
                }
                Err(error) => self.raise_execution_error(error),
            }
        }
    }

    /// `computeEntrySet`.
    fn compute_entry_set(&mut self) {
        self.workspace.states_to_enter.clear();
        self.workspace.states_for_default_entry.clear();
        self.workspace.default_history_content.clear();
        for index in 0..self.workspace.enabled.len() {
            let transition_id = self.workspace.enabled[index];
            let transition = self.machine.transition(transition_id);
            for &target in &transition.targets {
                self.add_descendant_states_to_enter(target);
            }
            let domain = transition_domain(self.machine, self.instance, transition_id, &mut self.workspace.targets);
            let mut effective = std::mem::take(&mut self.workspace.targets);
            effective_target_states(self.machine, self.instance, transition_id, &mut effective);
            for &target in &effective {
                self.add_ancestor_states_to_enter(target, domain);
            }
            self.workspace.targets = effective;
        }
    }

    /// `addDescendantStatesToEnter`.
    fn add_descendant_states_to_enter(&mut self, state: StateId) {
        let machine = self.machine;
        let node = machine.state(state);
        if node.is_history() {
            let parent = node.parent.unwrap_or(StateId::ROOT);
            let recorded: Vec<StateId> = match self.instance.history_of(state) {
                Some(recorded) => recorded.iter().collect(),
                None => {
                    let Some(default) = node.initial else { return };
                    self.workspace.default_history_content.push((parent, default));
                    machine.transition(default).targets.clone()
                }
            };
            for &target in &recorded {
                self.add_descendant_states_to_enter(target);
            }
            for &target in &recorded {
                self.add_ancestor_states_to_enter(target, Some(parent));
            }
            return;
        }
        self.workspace.states_to_enter.insert(state);
        if node.is_compound() {
            self.workspace.states_for_default_entry.insert(state);
            if let Some(initial) = node.initial {
                for &target in &machine.transition(initial).targets {
                    self.add_descendant_states_to_enter(target);
                }
                for &target in &machine.transition(initial).targets {
                    self.add_ancestor_states_to_enter(target, Some(state));
                }
            }
        } else if node.kind == StateKind::Parallel {
            self.enter_missing_regions(state);
        }
    }

    /// `addAncestorStatesToEnter`: proper ancestors of `state` below `ancestor`.
    fn add_ancestor_states_to_enter(&mut self, state: StateId, ancestor: Option<StateId>) {
        let machine = self.machine;
        for &proper_ancestor in &machine.state(state).ancestors {
            if Some(proper_ancestor) == ancestor || proper_ancestor == StateId::ROOT {
                break;
            }
            self.workspace.states_to_enter.insert(proper_ancestor);
            if machine.state(proper_ancestor).kind == StateKind::Parallel {
                self.enter_missing_regions(proper_ancestor);
            }
        }
    }

    /// Regions of a parallel state that nothing in the entry set enters yet get their default.
    fn enter_missing_regions(&mut self, parallel: StateId) {
        let machine = self.machine;
        for &child in &machine.state(parallel).children {
            if machine.state(child).is_history() {
                continue;
            }
            let end = machine.state(child).descendants_end;
            let covered = (child.0..end.0).any(|index| self.workspace.states_to_enter.contains(StateId(index)));
            if !covered {
                self.add_descendant_states_to_enter(child);
            }
        }
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
                self.machine.state(child).kind == StateKind::Final && self.instance.configuration.contains(child)
            }),
            StateKind::Parallel => self.children(state).all(|child| self.is_in_final_state(child)),
            _ => false,
        }
    }

    /// `exitInterpreter`: exit what is still active, in exit order.
    fn exit_interpreter(&mut self) {
        let machine = self.machine;
        let active = self.instance.configuration.clone();
        for state in active.iter_reverse() {
            let node = machine.state(state);
            for timer in &node.timers {
                self.host.cancel(&timer.event);
            }
            self.execute_content(&node.exit, None);
            self.instance.configuration.remove(state);
            self.host.state_exited(state);
        }
        self.instance.internal_queue.clear();
    }

    /// Runs a block; a failure stops the block and raises `error.execution`.
    fn execute_content(&mut self, actions: &[Action], event: Option<&Event>) {
        if actions.is_empty() {
            return;
        }
        if let Err(error) = self.with_execution(event, |execution| execute_block(actions, execution)) {
            self.raise_execution_error(error);
        }
    }

    fn with_execution<T>(&mut self, event: Option<&Event>, body: impl FnOnce(&mut Execution) -> T) -> T {
        let instance = &mut *self.instance;
        let mut execution = Execution {
            machine: self.machine,
            context: &mut instance.context,
            inputs: &instance.inputs,
            event,
            configuration: &instance.configuration,
            internal_queue: &mut instance.internal_queue,
            host: self.host,
        };
        body(&mut execution)
    }

    fn raise_execution_error(&mut self, error: EvaluationError) {
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("message"), Value::string(error.message.as_str()));
        data.insert(Arc::from("expression"), Value::String(error.expression.clone()));
        let event = Event::of_type(self.machine, self.machine.error_execution, Origin::Platform)
            .with_data(Value::Map(Arc::new(data)));
        self.instance.internal_queue.push_back(event);
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
        if machine.transition(transition_id).targets.is_empty() {
            continue;
        }
        let Some(domain) = transition_domain(machine, instance, transition_id, scratch) else {
            continue;
        };
        for state in instance.configuration.iter() {
            if machine.is_descendant(state, domain) {
                exit_set.insert(state);
            }
        }
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
        && scratch.iter().all(|target| machine.is_descendant(*target, source))
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
        .find(|ancestor| tail.iter().all(|state| machine.is_descendant(*state, *ancestor)))
        .unwrap_or(StateId::ROOT)
}

/// `getEffectiveTargetStates`: targets with history states replaced by what they restore.
fn effective_target_states(machine: &Machine, instance: &Instance, transition_id: TransitionId, out: &mut Vec<StateId>) {
    out.clear();
    let mut pending: Vec<StateId> = Vec::new();
    let targets = &machine.transition(transition_id).targets;
    if targets.iter().all(|target| !machine.state(*target).is_history()) {
        out.extend_from_slice(targets);
        return;
    }
    pending.extend(targets.iter().rev());
    while let Some(target) = pending.pop() {
        let node = machine.state(target);
        if !node.is_history() {
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
                if let Some(default) = node.initial {
                    pending.extend(machine.transition(default).targets.iter().rev());
                }
            }
        }
    }
}

/// Evaluates a transition's guard (true when it has none).
fn condition_holds(
    machine: &Machine,
    instance: &Instance,
    transition_id: TransitionId,
    event: Option<&Event>,
) -> Result<bool, EvaluationError> {
    let Some(guard) = &machine.transition(transition_id).guard else {
        return Ok(true);
    };
    let configuration = &instance.configuration;
    let is_active = |index: usize| configuration.contains(StateId(index as u32));
    let scope = Scope {
        names: &machine.names,
        context: &instance.context,
        inputs: &instance.inputs,
        event: event.map(Event::view),
        is_active: &is_active,
    };
    guard.evaluate_condition(&scope)
}
