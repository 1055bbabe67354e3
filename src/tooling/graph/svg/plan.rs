//! Which containers each line crosses, and through which side it leaves and enters them.

use super::layers::{Link, Size, upward};
use super::layout::block_size;
use super::routes::LABEL_GAP;
use crate::pipeline::compile::machine::{Machine, StateId, StateKind};
use crate::tooling::graph::{Arrow, initial_targets};

/// The border of a container a line crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Top,
    Bottom,
}

/// How a line runs in the innermost container that holds both its ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// Between two children (`None`: the container's initial marker), each the end itself or
    /// a container the line leaves or enters.
    Siblings { from: Option<StateId>, to: StateId },
    /// From the container itself to what it holds, drawn from just below its header.
    Inward { to: StateId },
    /// From what the container holds to the container itself, drawn up to below its header.
    Outward { from: StateId },
}

/// One line to draw: an arrow (not a self-loop) or an initial marker's line to one target.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// The arrow's index, `None` for a marker's line.
    pub arrow: Option<usize>,
    pub source: StateId,
    pub target: StateId,
    /// The innermost container holding both ends (for a marker's line, the marker's).
    pub common: StateId,
    pub shape: Shape,
    /// The containers it leaves, innermost first, and those it enters, outermost first.
    pub exits: Vec<StateId>,
    pub entries: Vec<StateId>,
    pub exit_side: Side,
    pub entry_side: Side,
    /// Its label's box: the text and the gap from the line.
    pub label: Option<Size>,
}

impl Plan {
    /// The containers the line is drawn in, from its source to its target.
    pub fn levels(&self) -> impl Iterator<Item = StateId> + '_ {
        self.exits
            .iter()
            .copied()
            .chain(std::iter::once(self.common))
            .chain(self.entries.iter().copied())
    }
}

/// Every line to draw (the markers' first, then the arrows' in order; self-loops are drawn
/// beside their state), and for each container the lines drawn in it, in that order.
pub(super) struct Plans {
    pub lines: Vec<Plan>,
    pub by_container: Vec<Vec<usize>>,
    /// Each state's place among its parent's children.
    pub positions: Vec<usize>,
}

pub(super) fn plans(machine: &Machine, arrows: &[Arrow]) -> Plans {
    let mut lines = Vec::new();
    for (index, state) in machine.states.iter().enumerate() {
        let container = StateId(index as u32);
        for target in initial_targets(machine, state) {
            let Some(to) = child_towards(machine, container, target) else {
                continue;
            };
            let mut plan = structure(machine, container, target, None);
            plan.shape = Shape::Siblings { from: None, to };
            plan.exits.clear();
            lines.push(plan);
        }
    }
    for (index, arrow) in arrows.iter().enumerate() {
        if arrow.source == arrow.target {
            continue;
        }
        let label = block_size(&arrow.labels);
        let label = Size {
            width: label.width + LABEL_GAP,
            height: label.height,
        };
        let mut plan = structure(machine, arrow.source, arrow.target, Some(label));
        plan.arrow = Some(index);
        lines.push(plan);
    }
    let mut by_container = vec![Vec::new(); machine.states.len()];
    for (index, plan) in lines.iter().enumerate() {
        for level in plan.levels() {
            by_container[level.index()].push(index);
        }
    }
    let mut positions = vec![0; machine.states.len()];
    for state in &machine.states {
        for (position, child) in state.children.iter().enumerate() {
            positions[child.index()] = position;
        }
    }
    let mut plans = Plans {
        lines,
        by_container,
        positions,
    };
    let upwards = reversed_links(machine, &plans);
    for (plan, upward) in plans.lines.iter_mut().zip(upwards) {
        orient(machine, plan, upward);
    }
    plans
}

/// The common container, shape and crossed containers of a line from `source` to `target`.
fn structure(machine: &Machine, source: StateId, target: StateId, label: Option<Size>) -> Plan {
    let holds = |ancestor: StateId, state: StateId| machine.is_descendant(state, ancestor);
    let (common, shape) = if holds(source, target) {
        let to = child_towards(machine, source, target).unwrap_or(target);
        (source, Shape::Inward { to })
    } else if holds(target, source) {
        let from = child_towards(machine, target, source).unwrap_or(source);
        (target, Shape::Outward { from })
    } else {
        let common = machine
            .state(source)
            .ancestors
            .iter()
            .copied()
            .find(|ancestor| holds(*ancestor, target))
            .unwrap_or(StateId::ROOT);
        let from = child_towards(machine, common, source).unwrap_or(source);
        let to = child_towards(machine, common, target).unwrap_or(target);
        let shape = Shape::Siblings {
            from: Some(from),
            to,
        };
        (common, shape)
    };
    // The containers strictly between an end and the common container, nearest the end first.
    let between = |end: StateId| -> Vec<StateId> {
        machine
            .state(end)
            .ancestors
            .iter()
            .copied()
            .take_while(|ancestor| *ancestor != common)
            .collect()
    };
    let exits = if source == common {
        Vec::new()
    } else {
        between(source)
    };
    let mut entries = if target == common {
        Vec::new()
    } else {
        between(target)
    };
    entries.reverse();
    Plan {
        arrow: None,
        source,
        target,
        common,
        shape,
        exits,
        entries,
        exit_side: Side::Bottom,
        entry_side: Side::Top,
        label,
    }
}

/// The sides a line leaves and enters by: down when its link in the common container runs
/// down, up when it was turned around to break a cycle; under a parallel state's regions
/// between regions; through the top to reach the container itself.
fn orient(machine: &Machine, plan: &mut Plan, upward: bool) {
    let parallel = machine.state(plan.common).kind == StateKind::Parallel;
    (plan.exit_side, plan.entry_side) = match plan.shape {
        Shape::Inward { .. } | Shape::Outward { .. } => (Side::Top, Side::Top),
        Shape::Siblings { .. } if parallel => (Side::Bottom, Side::Bottom),
        Shape::Siblings { .. } if upward => (Side::Top, Side::Bottom),
        Shape::Siblings { .. } => (Side::Bottom, Side::Top),
    };
}

/// Whether each line's link between siblings runs up once the layered layout breaks cycles,
/// as `layers::place` will decide (the same links in the same order).
fn reversed_links(machine: &Machine, plans: &Plans) -> Vec<bool> {
    let mut upwards = vec![false; plans.lines.len()];
    for (index, state) in machine.states.iter().enumerate() {
        if !state.is_compound() {
            continue;
        }
        let (links, owners) = free_links(machine, StateId(index as u32), plans);
        let first = usize::from(state.initial.is_some());
        for (owner, up) in owners
            .iter()
            .zip(upward(first + state.children.len(), &links))
        {
            upwards[*owner] = up;
        }
    }
    upwards
}

/// A layered container's links between its own boxes (the initial marker first, then the
/// children), in the order the layout places them, with the line each is for.
pub(super) fn free_links(
    machine: &Machine,
    container: StateId,
    plans: &Plans,
) -> (Vec<Link>, Vec<usize>) {
    let state = machine.state(container);
    let first = usize::from(state.initial.is_some());
    let mut links = Vec::new();
    let mut owners = Vec::new();
    for index in &plans.by_container[container.index()] {
        let plan = &plans.lines[*index];
        let Shape::Siblings { from, to } = plan.shape else {
            continue;
        };
        if plan.common != container {
            continue;
        }
        links.push(Link {
            from: from.map_or(0, |from| first + plans.positions[from.index()]),
            to: first + plans.positions[to.index()],
            label: plan.label,
        });
        owners.push(*index);
    }
    (links, owners)
}

/// The child of `container` that is `state` or holds it.
pub(super) fn child_towards(
    machine: &Machine,
    container: StateId,
    state: StateId,
) -> Option<StateId> {
    if machine.state(state).parent == Some(container) {
        return Some(state);
    }
    machine
        .state(state)
        .ancestors
        .iter()
        .copied()
        .find(|ancestor| machine.state(*ancestor).parent == Some(container))
}
