//! Where every state's box goes: sizes bottom-up (children before parents), places top-down.

use super::layers::{Link, Size, place};
use super::text::{LINE_HEIGHT, text_width};
use crate::pipeline::compile::machine::{Machine, StateId, StateKind};
use crate::tooling::graph::{Arrow, within};

/// Space between a container's border and what it holds.
pub(super) const PADDING: f64 = 14.0;
/// A history state's circle, and the initial marker's dot.
pub(super) const HISTORY_RADIUS: f64 = 14.0;
pub(super) const MARKER_RADIUS: f64 = 5.0;
/// How far a self-loop reaches right of its box, before its label.
pub(super) const LOOP_REACH: f64 = 22.0;
/// Space between parallel regions (the dashed separator runs in its middle).
const REGION_GAP: f64 = 2.0 * PADDING;

/// An axis-aligned rectangle in absolute SVG coordinates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Rect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

impl Rect {
    pub fn center(&self) -> (f64, f64) {
        (self.x + self.width / 2.0, self.y + self.height / 2.0)
    }
}

/// The drawing's geometry: one box per state (the root's is the whole machine), the initial
/// marker of each compound state that has one, and the top-left corner of each arrow's label
/// when it was placed between siblings (`None`: self-loops, and arrows into a state's own
/// descendants or across parallel regions, labelled at their middle).
pub(super) struct Layout {
    pub boxes: Vec<Rect>,
    pub markers: Vec<Option<(f64, f64)>>,
    pub labels: Vec<Option<(f64, f64)>>,
    /// The points each arrow's line passes through (its label's middle among them).
    pub routes: Vec<Vec<(f64, f64)>>,
}

/// What the layout needs to know of each state's drawing.
pub(super) struct Content<'a> {
    /// The lines written in the box (for a container, its header).
    pub lines: &'a [Vec<String>],
    /// The labels of each state's self-loop, if it has one.
    pub loops: &'a [Vec<String>],
}

pub(super) fn layout(machine: &Machine, arrows: &[Arrow], content: &Content, top: f64) -> Layout {
    let count = machine.states.len();
    let sibling_index = sibling_indices(machine);
    let links = sibling_links(machine, arrows, &sibling_index);
    // Label corners relative to their container, then made absolute.
    let mut labels_relative: Vec<Option<(StateId, f64, f64)>> = vec![None; arrows.len()];
    let mut routes_relative: Vec<(StateId, Vec<(f64, f64)>)> =
        vec![(StateId::ROOT, Vec::new()); arrows.len()];
    let mut sizes = vec![Size::default(); count];
    // Each container's children, relative to its top-left corner; and its initial marker.
    let mut offsets = vec![(0.0, 0.0); count];
    let mut markers_relative: Vec<Option<(f64, f64)>> = vec![None; count];
    // Document order puts descendants after their ancestors: walking backwards sizes every
    // child before its parent, without recursion (documents may nest deeply).
    for index in (0..count).rev() {
        let state = machine.state(StateId(index as u32));
        let header = block_size(&content.lines[index]);
        sizes[index] = match state.kind {
            StateKind::History { .. } => Size {
                width: 2.0 * HISTORY_RADIUS,
                height: 2.0 * HISTORY_RADIUS,
            },
            StateKind::Atomic | StateKind::Final => Size {
                width: header.width + 2.0 * PADDING,
                height: header.height + PADDING,
            },
            StateKind::Parallel => {
                let mut left = PADDING;
                let mut height: f64 = 0.0;
                for child in &state.children {
                    offsets[child.index()] = (left, header.height + PADDING);
                    let footprint = footprint(&sizes, content, *child);
                    left += footprint.width + REGION_GAP;
                    height = height.max(footprint.height);
                }
                let inner = left - REGION_GAP + PADDING;
                Size {
                    width: inner.max(header.width + 2.0 * PADDING),
                    height: header.height + height + 2.0 * PADDING,
                }
            }
            StateKind::Compound | StateKind::Root => {
                // The initial marker is the first box of the layered layout.
                let has_marker = state.initial.is_some();
                let first = usize::from(has_marker);
                let mut boxes = Vec::with_capacity(first + state.children.len());
                if has_marker {
                    boxes.push(Size {
                        width: 2.0 * MARKER_RADIUS,
                        height: 2.0 * MARKER_RADIUS,
                    });
                }
                boxes.extend(
                    state
                        .children
                        .iter()
                        .map(|child| footprint(&sizes, content, *child)),
                );
                let mut local: Vec<Link> = links[index].iter().map(|(link, _)| *link).collect();
                if let Some(initial) = state.initial {
                    for target in &machine.transition(initial).targets {
                        if let Some(child) = child_towards(machine, StateId(index as u32), *target)
                        {
                            local.push(Link {
                                from: 0,
                                to: first + sibling_index[child.index()],
                                label: None,
                            });
                        }
                    }
                }
                let placement = place(&boxes, &local);
                let (corners, area) = (placement.corners, placement.size);
                let inner_width = area.width.max(header.width);
                // The area is centred under a header that may be wider.
                let shift = (inner_width - area.width) / 2.0;
                let below = header.height + PADDING;
                if has_marker {
                    let (x, y) = corners[0];
                    markers_relative[index] = Some((
                        PADDING + shift + x + MARKER_RADIUS,
                        below + y + MARKER_RADIUS,
                    ));
                }
                for (position, child) in state.children.iter().enumerate() {
                    let (x, y) = corners[first + position];
                    offsets[child.index()] = (PADDING + shift + x, below + y);
                }
                let container = StateId(index as u32);
                let origin = (PADDING + shift, below);
                let arrows_here = links[index].iter().map(|(_, arrow)| *arrow);
                for (position, arrow) in arrows_here.enumerate() {
                    labels_relative[arrow] = placement.labels[position]
                        .map(|(x, y)| (container, origin.0 + x, origin.1 + y));
                    let points = placement.waypoints[position].iter();
                    let points = points.map(|(x, y)| (origin.0 + x, origin.1 + y));
                    routes_relative[arrow] = (container, points.collect());
                }
                let children_height = if boxes.is_empty() {
                    0.0
                } else {
                    area.height + PADDING
                };
                Size {
                    width: inner_width + 2.0 * PADDING,
                    height: below + children_height,
                }
            }
        };
    }
    let mut boxes = vec![Rect::default(); count];
    boxes[0] = Rect {
        x: 0.0,
        y: top,
        width: sizes[0].width,
        height: sizes[0].height,
    };
    for index in 1..count {
        let parent = machine.states[index]
            .parent
            .unwrap_or(StateId::ROOT)
            .index();
        let (x, y) = offsets[index];
        boxes[index] = Rect {
            x: boxes[parent].x + x,
            y: boxes[parent].y + y,
            width: sizes[index].width,
            height: sizes[index].height,
        };
    }
    let markers = markers_relative
        .iter()
        .zip(&boxes)
        .map(|(marker, area)| marker.map(|(x, y)| (area.x + x, area.y + y)))
        .collect();
    let labels = labels_relative
        .iter()
        .map(|label| {
            label.map(|(container, x, y)| {
                let area = boxes[container.index()];
                (area.x + x, area.y + y)
            })
        })
        .collect();
    let routes = routes_relative
        .into_iter()
        .map(|(container, points)| {
            let area = boxes[container.index()];
            points
                .into_iter()
                .map(|(x, y)| (area.x + x, area.y + y))
                .collect()
        })
        .collect();
    Layout {
        boxes,
        markers,
        labels,
        routes,
    }
}

/// The size of some lines of text.
pub(super) fn block_size(lines: &[String]) -> Size {
    Size {
        width: lines
            .iter()
            .map(|line| text_width(line))
            .fold(0.0, f64::max),
        height: LINE_HEIGHT * lines.len() as f64,
    }
}

/// A box with the room its self-loop and the loop's labels take on its right.
fn footprint(sizes: &[Size], content: &Content, state: StateId) -> Size {
    let size = sizes[state.index()];
    let labels = &content.loops[state.index()];
    if labels.is_empty() {
        return size;
    }
    let text = block_size(labels);
    Size {
        width: size.width + LOOP_REACH + 4.0 + text.width,
        height: size.height.max(text.height),
    }
}

/// For each container, the links between its children that the arrows make: an arrow between
/// two states counts for the children of their nearest common container that hold them.
/// Arrows between a state and its own descendant, and self-loops, do not rank anything.
/// Each link comes with the index of its arrow.
fn sibling_links(
    machine: &Machine,
    arrows: &[Arrow],
    sibling_index: &[usize],
) -> Vec<Vec<(Link, usize)>> {
    let mut links: Vec<Vec<(Link, usize)>> = vec![Vec::new(); machine.states.len()];
    for (index, arrow) in arrows.iter().enumerate() {
        let (source, target) = (arrow.source, arrow.target);
        if within(machine, source, target) || within(machine, target, source) {
            continue;
        }
        // The nearest proper ancestor of the source that also holds the target.
        let Some(common) = machine
            .state(source)
            .ancestors
            .iter()
            .copied()
            .find(|ancestor| machine.is_descendant(target, *ancestor))
        else {
            continue;
        };
        let container = machine.state(common);
        if container.kind == StateKind::Parallel {
            continue;
        }
        let (Some(from), Some(to)) = (
            child_towards(machine, common, source),
            child_towards(machine, common, target),
        ) else {
            continue;
        };
        let first = usize::from(container.initial.is_some());
        let link = Link {
            from: first + sibling_index[from.index()],
            to: first + sibling_index[to.index()],
            label: Some(block_size(&arrow.labels)),
        };
        links[common.index()].push((link, index));
    }
    links
}

/// Each state's place among its parent's children.
fn sibling_indices(machine: &Machine) -> Vec<usize> {
    let mut indices = vec![0; machine.states.len()];
    for state in &machine.states {
        for (position, child) in state.children.iter().enumerate() {
            indices[child.index()] = position;
        }
    }
    indices
}

/// The child of `container` that is `state` or holds it.
fn child_towards(machine: &Machine, container: StateId, state: StateId) -> Option<StateId> {
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
