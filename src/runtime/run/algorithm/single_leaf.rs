//! A macrostep in a machine without parallel states: selection from the one active leaf, and each transition's plan from that leaf, worked out once.

use super::{Algorithm, evaluate_guard, reach};
use crate::base::event::Event;
use crate::pipeline::actions::Action;
use crate::pipeline::actions::assign::store_integer;
use crate::pipeline::compile::expression::EvaluationError;
use crate::pipeline::compile::machine::{
    BlockOf, Candidate, CandidateIndex, ConfigurationChange, EventType, LeafPlan, Machine,
    PlainBlock, PlainPlan, PlannedInteger, Reach, StateId, StateKind, TransitionId,
};

impl Algorithm<'_, '_> {
    /// `selectTransitions` and `microstep` for a machine without parallel states, whose
    /// configuration is one atomic state and its ancestors: at most one transition is enabled,
    /// so there are no conflicts to remove, and a transition of fixed reach exits the leaf's
    /// ancestors up to its domain, leaf first, and enters its precomputed entry set. Returns the
    /// transition taken.
    #[inline(always)]
    pub(super) fn take_on_single_leaf(
        &mut self,
        index: &CandidateIndex,
        leaf: StateId,
        event_type: EventType,
        event: &Event,
    ) -> Option<TransitionId> {
        let machine = self.machine;
        let candidates = index.candidates(leaf, event_type);
        let mut taken = None;
        for candidate in candidates {
            if !candidate.guarded {
                taken = Some(candidate);
                break;
            }
            let transition_id = candidate.transition;
            match self.guard_holds(event, transition_id) {
                Ok(true) => {
                    taken = Some(candidate);
                    break;
                }
                Ok(false) => {}
                // Raised in selection order before the microstep, as `select_transitions` does;
                // under `errors: strict` the selection stops there and the error goes first.
                Err(error) => {
                    self.raise_execution_error(error);
                    if machine.strict_errors {
                        self.guard_failed = true;
                        return None;
                    }
                }
            }
        }
        let Some(candidate) = taken else {
            self.report_unhandled_error();
            return None;
        };
        let transition_id = candidate.transition;
        // Worked out the first time, apart: the common case reads it and builds no closure.
        let plan = match candidate.plan.get() {
            Some(plan) => plan,
            None => first_plan(machine, index, leaf, candidate),
        };
        match plan {
            LeafPlan::Plain(plan) => self.take_plain(transition_id, plan),
            LeafPlan::General => {
                self.budgets_in_force();
                self.take_from_leaf(transition_id, leaf);
            }
        }
        Some(transition_id)
    }

    /// `condition_holds` for the external event, with the step's budgets put in force before a
    /// guard the fast reader does not answer is evaluated in full.
    #[inline(always)]
    fn guard_holds(
        &mut self,
        event: &Event,
        transition_id: TransitionId,
    ) -> Result<bool, EvaluationError> {
        let Some(guard) = &self.machine.transition(transition_id).guard else {
            return Ok(true);
        };
        if let Some(holds) = guard.condition_over(&self.instance.context) {
            return Ok(holds);
        }
        self.budgets_in_force();
        evaluate_guard(self.machine, self.instance, Some(event), guard)
    }

    /// Takes a transition by its plain plan: the blocks that have actions in SCXML's order
    /// (exit blocks, the transition's actions, entry blocks and initial content), each with the
    /// configuration as `exitStates` and `enterStates` leave it there (a state leaves after its
    /// exit block and joins before its entry block), then the host's observers, which nothing
    /// between reached, in one call. The run goes on: nothing final is entered.
    #[inline(always)]
    fn take_plain(&mut self, transition_id: TransitionId, plan: &PlainPlan) {
        for block in &plan.blocks {
            self.change_configuration(plan, &block.change_before);
            self.owner = block.owner;
            self.run_plain_block(block);
        }
        self.change_configuration(plan, &plan.last_change);
        self.host
            .transition_passed(transition_id, &plan.exited, &plan.entered);
        self.instance.quiet_events = plan.quiet_after;
        self.quiet_events_noted = true;
    }

    /// Runs a plain block as `execute_block` would: its planned raw ints in place, and from the
    /// first that gives none (or where they end, short of the block) the block's own way.
    #[inline(always)]
    fn run_plain_block(&mut self, block: &PlainBlock) {
        for planned in &block.integers {
            let context = &mut self.instance.context;
            match planned.form.integer(context) {
                Some(integer) => store_integer(context, planned.slot, integer),
                None => {
                    return self.finish_block(block.actions, planned.action, planned.assignment);
                }
            }
        }
        if let Some((action, assignment)) = block.rest {
            self.finish_block(block.actions, action, assignment);
        }
    }

    /// The rest of a block, from assignment `assignment` of action `action` on.
    #[inline(never)]
    fn finish_block(&mut self, block: BlockOf, action: u32, assignment: u32) {
        let rest = block
            .actions(self.machine)
            .get(action as usize..)
            .unwrap_or_default();
        if let [Action::Assign(assign), after @ ..] = rest {
            if self.apply_assignments_from(assign, assignment as usize) {
                self.execute_block(after);
            }
        } else {
            self.execute_block(rest);
        }
    }

    /// Makes `change` to the configuration: in one step when its masks apply.
    #[inline(always)]
    fn change_configuration(&mut self, plan: &PlainPlan, change: &ConfigurationChange) {
        let configuration = &mut self.instance.configuration;
        if let Some((remove, insert)) = change.masks
            && configuration.change_one_word(remove, insert)
        {
            return;
        }
        let range = |range: &std::ops::Range<u32>| range.start as usize..range.end as usize;
        for &state in &plan.exited[range(&change.removed)] {
            configuration.remove(state);
        }
        for &state in &plan.entered[range(&change.inserted)] {
            configuration.insert(state);
        }
    }

    /// Takes a transition from `leaf` by the general procedures of one state each.
    #[inline(never)]
    fn take_from_leaf(&mut self, transition_id: TransitionId, leaf: StateId) {
        let machine = self.machine;
        let transition = machine.transition(transition_id);
        let (domain, enter, default_entry) = match reach(machine, transition_id) {
            Reach::Fixed {
                domain,
                enter,
                default_entry,
            } => (Some(*domain), &**enter, &**default_entry),
            Reach::Targetless => (None, &[][..], &[][..]),
            Reach::Dynamic => {
                let workspace = self.workspace();
                workspace.enabled.clear();
                workspace.enabled.push(transition_id);
                // Its states are recorded in the workspace, as a general step's are.
                self.microstep();
                return;
            }
        };
        self.host.transition_taken(transition_id);
        if let Some(domain) = domain {
            let exited = || exited_from(machine, leaf, domain);
            // All history is recorded before any exit action runs, as in `exit_states`.
            if machine.has_history {
                for state in exited() {
                    self.record_history(state);
                }
            }
            self.owner = domain;
            for state in exited() {
                self.exit_state(state);
            }
        }
        // A targetless transition leaves its source active: its actions belong to it.
        self.owner = domain.unwrap_or(transition.source);
        self.execute_content(&transition.actions);
        for &state in enter {
            self.enter_state(state, default_entry.contains(&state), None);
        }
    }
}

/// `candidate`'s plan from `leaf`, worked out the first time it is taken.
#[cold]
#[inline(never)]
fn first_plan<'c>(
    machine: &Machine,
    index: &CandidateIndex,
    leaf: StateId,
    candidate: &'c Candidate,
) -> &'c LeafPlan {
    candidate
        .plan
        .get_or_init(|| leaf_plan(machine, index, leaf, candidate.transition))
}

/// The states a transition of domain `domain` exits from the active `leaf`, in exit order.
fn exited_from(machine: &Machine, leaf: StateId, domain: StateId) -> impl Iterator<Item = StateId> {
    std::iter::once(leaf)
        .chain(machine.state(leaf).ancestors.iter().copied())
        .take_while(move |state| *state != domain)
}

/// What taking `transition_id` from the active `leaf` does: a plain plan when every block it
/// runs only assigns (assignments ask nothing of the host, so the observers' calls can wait
/// until the transition is over), and the states it exits and enters start, cancel and record
/// nothing and end nothing; `LeafPlan::General` otherwise.
fn leaf_plan(
    machine: &Machine,
    index: &CandidateIndex,
    leaf: StateId,
    transition_id: TransitionId,
) -> LeafPlan {
    let transition = machine.transition(transition_id);
    let (owner, exited, entered, default_entry): (StateId, Vec<StateId>, &[StateId], &[StateId]) =
        match reach(machine, transition_id) {
            Reach::Dynamic => return LeafPlan::General,
            Reach::Targetless => (transition.source, Vec::new(), &[], &[]),
            Reach::Fixed {
                domain,
                enter,
                default_entry,
            } => (
                *domain,
                exited_from(machine, leaf, *domain).collect(),
                enter,
                default_entry,
            ),
        };
    let only_assigns = |actions: &[Action]| {
        actions
            .iter()
            .all(|action| matches!(action, Action::Assign(_)))
    };
    let starts_nothing = |state: StateId| {
        let node = machine.state(state);
        node.timers.is_empty() && node.invokes.is_empty()
    };
    let plain_exits = exited.iter().all(|&state| {
        let node = machine.state(state);
        starts_nothing(state)
            && only_assigns(&node.exit)
            && !node
                .children
                .iter()
                .any(|child| machine.state(*child).is_history())
    });
    let plain_entries = entered.iter().all(|&state| {
        let node = machine.state(state);
        let initial_actions = match node.initial {
            Some(initial) if default_entry.contains(&state) => {
                &machine.transition(initial).actions[..]
            }
            _ => &[],
        };
        starts_nothing(state)
            && node.kind != StateKind::Final
            && only_assigns(&node.entry)
            && only_assigns(initial_actions)
    });
    if !(only_assigns(&transition.actions) && plain_exits && plain_entries) {
        return LeafPlan::General;
    }
    // The blocks with actions, in order, each with the exits and entries since the one before.
    let mut blocks = Blocks {
        machine,
        exited: &exited,
        entered,
        blocks: Vec::new(),
        removed: 0..0,
        inserted: 0..0,
    };
    for (position, &state) in exited.iter().enumerate() {
        blocks.add(BlockOf::Exit(state), owner);
        blocks.removed.end = position as u32 + 1;
    }
    blocks.add(BlockOf::Transition(transition_id), owner);
    for (position, &state) in entered.iter().enumerate() {
        blocks.inserted.end = position as u32 + 1;
        blocks.add(BlockOf::Entry(state), state);
        if let Some(initial) = machine.state(state).initial
            && default_entry.contains(&state)
        {
            blocks.add(BlockOf::Transition(initial), state);
        }
    }
    let last_change = blocks.change();
    let blocks = blocks.blocks.into();
    // The leaf reached is the last state entered (states enter in document order, outer
    // first), or the leaf itself for a targetless transition; `note_quiet_events` would find
    // its quiet events, none when eventless transitions may follow.
    let reached = entered.last().copied().unwrap_or(leaf);
    let quiet_after = if machine.has_eventless {
        0
    } else {
        index.quiet_events(reached)
    };
    LeafPlan::Plain(Box::new(PlainPlan {
        exited: exited.into(),
        entered: entered.into(),
        blocks,
        last_change,
        quiet_after,
    }))
}

/// A plain plan's blocks while they are worked out, with the exits and entries made since
/// the last one.
struct Blocks<'p> {
    machine: &'p Machine,
    exited: &'p [StateId],
    entered: &'p [StateId],
    blocks: Vec<PlainBlock>,
    removed: std::ops::Range<u32>,
    inserted: std::ops::Range<u32>,
}

impl Blocks<'_> {
    /// The change since the last block, as the next point of the plan has it; the next one
    /// starts after it.
    fn change(&mut self) -> ConfigurationChange {
        let removed = &self.exited[self.removed.start as usize..self.removed.end as usize];
        let inserted = &self.entered[self.inserted.start as usize..self.inserted.end as usize];
        let mask = |states: &[StateId]| {
            states.iter().try_fold(0u64, |mask, state| {
                (state.index() < 64).then(|| mask | 1 << state.index())
            })
        };
        let change = ConfigurationChange {
            removed: self.removed.clone(),
            inserted: self.inserted.clone(),
            masks: mask(removed).zip(mask(inserted)),
        };
        self.removed.start = self.removed.end;
        self.inserted.start = self.inserted.end;
        change
    }

    /// The next block, if it has actions.
    fn add(&mut self, actions: BlockOf, owner: StateId) {
        let block = actions.actions(self.machine);
        if block.is_empty() {
            return;
        }
        let (integers, rest) = planned_integers(block);
        let change_before = self.change();
        self.blocks.push(PlainBlock {
            actions,
            owner,
            change_before,
            integers,
            rest,
        });
    }
}

/// A block's leading assignments that have a raw int form, and where the block goes on after
/// them if they do not cover it.
fn planned_integers(actions: &[Action]) -> (Box<[PlannedInteger]>, Option<(u32, u32)>) {
    let mut integers = Vec::new();
    for (action_index, action) in actions.iter().enumerate() {
        let Action::Assign(assign) = action else {
            return (integers.into(), Some((action_index as u32, 0)));
        };
        for (assignment_index, form) in assign.integer_forms().enumerate() {
            let Some((slot, form)) = form else {
                return (
                    integers.into(),
                    Some((action_index as u32, assignment_index as u32)),
                );
            };
            integers.push(PlannedInteger {
                slot,
                form,
                action: action_index as u32,
                assignment: assignment_index as u32,
            });
        }
    }
    (integers.into(), None)
}
