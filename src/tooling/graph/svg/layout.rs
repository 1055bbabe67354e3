//! Where every state's box goes: sizes bottom-up (children before parents), places top-down.

use std::collections::HashMap;

use super::layers::{Link, Node, Pin, Size, place};
use super::parallel;
use super::plan::{Plans, Shape, Side, child_towards, free_links};
use super::routes::{Attachment, LABEL_GAP, routes};
use super::text::{LINE_HEIGHT, text_width};
use crate::pipeline::compile::machine::{Machine, StateId, StateKind};

/// Space between a container's border and what it holds.
pub(super) const PADDING: f64 = 14.0;
/// A history state's circle, and the initial marker's dot.
pub(super) const HISTORY_RADIUS: f64 = 14.0;
pub(super) const MARKER_RADIUS: f64 = 5.0;
/// How far a self-loop reaches right of its box, before its label.
pub(super) const LOOP_REACH: f64 = 22.0;
/// A state's rounded corners, which lines leave alone.
pub(super) const CORNER_RADIUS: f64 = 8.0;
/// The point where a line leaves or enters a container, in the container's layout.
const PORT: Size = Size {
    width: 6.0,
    height: 0.0,
};

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
/// marker of each compound state that has one, and for each planned line its points and the
/// top-left corner of its label's text.
pub(super) struct Layout {
    pub boxes: Vec<Rect>,
    pub markers: Vec<Option<(f64, f64)>>,
    pub lines: Vec<Vec<(f64, f64)>>,
    pub labels: Vec<Option<(f64, f64)>>,
}

/// What the layout needs to know of each state's drawing.
pub(super) struct Content<'a> {
    /// The lines written in the box (for a container, its header).
    pub lines: &'a [Vec<String>],
    /// The labels of each state's self-loop, if it has one.
    pub loops: &'a [Vec<String>],
}

/// What every container's layout reads: the machine, its planned lines, its states' text.
pub(super) struct Scene<'a> {
    pub machine: &'a Machine,
    pub plans: &'a Plans,
    pub content: &'a Content<'a>,
}

/// What containers hand to the one holding them, all relative to their own box.
pub(super) struct Work {
    pub sizes: Vec<Size>,
    /// Each child's corner in its parent's box.
    pub offsets: Vec<(f64, f64)>,
    pub markers: Vec<Option<(f64, f64)>>,
    /// The points of a line (by plan) drawn in a container.
    pub pieces: HashMap<(usize, StateId), Vec<(f64, f64)>>,
    /// Where a line crosses a container's border (by plan and container), from its left.
    pub ports: HashMap<(usize, StateId), f64>,
    /// A line's label corner, in the container it is drawn in.
    pub labels: Vec<Option<(StateId, f64, f64)>>,
}

pub(super) fn layout(machine: &Machine, plans: &Plans, content: &Content, top: f64) -> Layout {
    let count = machine.states.len();
    let mut work = Work {
        sizes: vec![Size::default(); count],
        offsets: vec![(0.0, 0.0); count],
        markers: vec![None; count],
        pieces: HashMap::new(),
        ports: HashMap::new(),
        labels: vec![None; plans.lines.len()],
    };
    let scene = Scene {
        machine,
        plans,
        content,
    };
    // Document order puts descendants after their ancestors: walking backwards sizes every
    // child before its parent, without recursion (documents may nest deeply).
    for index in (0..count).rev() {
        let id = StateId(index as u32);
        let state = machine.state(id);
        let header = block_size(&content.lines[index]);
        work.sizes[index] = match state.kind {
            StateKind::History { .. } => Size {
                width: 2.0 * HISTORY_RADIUS,
                height: 2.0 * HISTORY_RADIUS,
            },
            StateKind::Atomic | StateKind::Final => Size {
                width: header.width + 2.0 * PADDING,
                height: header.height + PADDING,
            },
            StateKind::Parallel => parallel::arrange(&scene, id, &mut work),
            StateKind::Compound | StateKind::Root => layered(&scene, id, &mut work),
        };
    }
    let mut boxes = vec![Rect::default(); count];
    boxes[0] = Rect {
        x: 0.0,
        y: top,
        width: work.sizes[0].width,
        height: work.sizes[0].height,
    };
    for index in 1..count {
        let parent = machine.states[index]
            .parent
            .unwrap_or(StateId::ROOT)
            .index();
        let (x, y) = work.offsets[index];
        boxes[index] = Rect {
            x: boxes[parent].x + x,
            y: boxes[parent].y + y,
            width: work.sizes[index].width,
            height: work.sizes[index].height,
        };
    }
    let markers = work
        .markers
        .iter()
        .zip(&boxes)
        .map(|(marker, area)| marker.map(|(x, y)| (area.x + x, area.y + y)))
        .collect();
    let labels = work
        .labels
        .iter()
        .map(|label| {
            label.map(|(container, x, y)| {
                let area = boxes[container.index()];
                (area.x + x, area.y + y)
            })
        })
        .collect();
    let lines = plans
        .lines
        .iter()
        .enumerate()
        .map(|(line, plan)| {
            let mut points: Vec<(f64, f64)> = Vec::new();
            for level in plan.levels() {
                let area = boxes[level.index()];
                let piece = work.pieces.get(&(line, level)).into_iter().flatten();
                points.extend(piece.map(|(x, y)| (area.x + x, area.y + y)));
            }
            points.dedup_by(|a, b| (a.0 - b.0).abs() < 0.01 && (a.1 - b.1).abs() < 0.01);
            points
        })
        .collect();
    Layout {
        boxes,
        markers,
        lines,
        labels,
    }
}

/// A compound state (or the machine): its children in ranks under its header, with its
/// initial marker, the labels of the lines between them, and the points where lines leave or
/// enter it.
fn layered(scene: &Scene, container: StateId, work: &mut Work) -> Size {
    let (machine, plans, content) = (scene.machine, scene.plans, scene.content);
    let index = container.index();
    let state = machine.state(container);
    let header = block_size(&content.lines[index]);
    let has_marker = state.initial.is_some();
    let first = usize::from(has_marker);
    let mut nodes: Vec<Node> = Vec::with_capacity(first + state.children.len());
    if has_marker {
        nodes.push(Node {
            size: Size {
                width: 2.0 * MARKER_RADIUS,
                height: 2.0 * MARKER_RADIUS,
            },
            pin: Pin::Free,
        });
    }
    nodes.extend(state.children.iter().map(|child| Node {
        size: footprint(&work.sizes, content, *child),
        pin: Pin::Free,
    }));
    let (mut links, mut owners) = free_links(machine, container, plans);
    // The lines that leave or enter here, or start or end at the container itself.
    for line in &plans.by_container[index] {
        let plan = &plans.lines[*line];
        let (pin, child, outward) = if plan.exits.contains(&container) {
            let child = child_towards(machine, container, plan.source);
            (plan.exit_side, child, true)
        } else if plan.entries.contains(&container) {
            let child = child_towards(machine, container, plan.target);
            (plan.entry_side, child, false)
        } else {
            match plan.shape {
                Shape::Inward { to } => (Side::Top, Some(to), false),
                Shape::Outward { from } => (Side::Top, Some(from), true),
                Shape::Siblings { .. } => continue,
            }
        };
        let Some(child) = child else { continue };
        let port = nodes.len();
        nodes.push(Node {
            size: PORT,
            pin: match pin {
                Side::Top => Pin::Top,
                Side::Bottom => Pin::Bottom,
            },
        });
        let child = first + plans.positions[child.index()];
        let label = (plan.common == container).then_some(plan.label).flatten();
        let (from, to) = if outward {
            (child, port)
        } else {
            (port, child)
        };
        links.push(Link { from, to, label });
        owners.push(*line);
    }
    let placement = place(&nodes, &links);
    let ends: Vec<(Attachment, Attachment)> = links
        .iter()
        .zip(&owners)
        .map(|(link, line)| {
            let plan = &plans.lines[*line];
            let attach = |node: usize, end: StateId| {
                if has_marker && node == 0 {
                    return circle(MARKER_RADIUS);
                }
                match state.children.get(node - first) {
                    Some(child) => {
                        let meet = attachment(machine, work, *line, *child, end);
                        meet.lowered(lift(&work.sizes, content, *child))
                    }
                    None => Attachment {
                        fixed: Some(PORT.width / 2.0),
                        ..Attachment::default()
                    },
                }
            };
            (attach(link.from, plan.source), attach(link.to, plan.target))
        })
        .collect();
    let routes = routes(&placement, &ends);
    let area = placement.size;
    let inner_width = area.width.max(header.width);
    // The area is centred under a header that may be wider.
    let origin = (
        PADDING + (inner_width - area.width) / 2.0,
        header.height + PADDING,
    );
    let height = if nodes.is_empty() {
        origin.1
    } else {
        origin.1 + area.height + PADDING
    };
    if has_marker {
        let (x, y) = placement.corners[0];
        work.markers[index] = Some((origin.0 + x + MARKER_RADIUS, origin.1 + y + MARKER_RADIUS));
    }
    for (position, child) in state.children.iter().enumerate() {
        let (x, y) = placement.corners[first + position];
        let lift = lift(&work.sizes, content, *child);
        work.offsets[child.index()] = (origin.0 + x, origin.1 + y + lift);
    }
    for (position, route) in routes.into_iter().enumerate() {
        let (link, line) = (links[position], owners[position]);
        let plan = &plans.lines[line];
        let mut points: Vec<(f64, f64)> = route
            .into_iter()
            .map(|(x, y)| (origin.0 + x, origin.1 + y))
            .collect();
        // A line leaving or entering goes on to the border.
        let port = [link.from, link.to]
            .into_iter()
            .find(|node| nodes[*node].pin != Pin::Free);
        if let Some(port) = port
            && plan.common != container
        {
            let (x, _) = placement.corners[port];
            let x = origin.0 + x + PORT.width / 2.0;
            let border = if nodes[port].pin == Pin::Top {
                0.0
            } else {
                height
            };
            if port == link.to {
                points.push((x, border));
            } else {
                points.insert(0, (x, border));
            }
            work.ports.insert((line, container), x);
        }
        if let Some(label) = placement.chains[position].label {
            let (x, y) = placement.corners[label];
            work.labels[line] = Some((container, origin.0 + x + LABEL_GAP, origin.1 + y));
        }
        work.pieces.insert((line, container), points);
    }
    Size {
        width: inner_width + 2.0 * PADDING,
        height,
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

/// How far a box sits below the top of its footprint: its self-loop's label, beside it, may be
/// taller than the box.
pub(super) fn lift(sizes: &[Size], content: &Content, state: StateId) -> f64 {
    (footprint(sizes, content, state).height - sizes[state.index()].height) / 2.0
}

/// A box with the room its self-loop and the loop's labels take on its right.
pub(super) fn footprint(sizes: &[Size], content: &Content, state: StateId) -> Size {
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

/// Where a line meets a child of the container it is drawn in: anywhere along the child's
/// edge when the child is the line's end, or where the line leaves or enters it.
pub(super) fn attachment(
    machine: &Machine,
    work: &Work,
    line: usize,
    child: StateId,
    end: StateId,
) -> Attachment {
    let size = work.sizes[child.index()];
    if child != end {
        let port = work.ports.get(&(line, child));
        let x = port.copied().unwrap_or(size.width / 2.0);
        return Attachment {
            fixed: Some(x),
            left: x,
            right: x,
            top: 0.0,
            bottom: size.height,
        };
    }
    if machine.state(child).is_history() {
        return circle(HISTORY_RADIUS);
    }
    // Clear of the rounded corners.
    let margin = CORNER_RADIUS.min(size.width / 2.0);
    Attachment {
        fixed: None,
        left: margin,
        right: size.width - margin,
        top: 0.0,
        bottom: size.height,
    }
}

/// A circle's lines meet it at its top and bottom.
fn circle(radius: f64) -> Attachment {
    Attachment {
        fixed: None,
        left: radius,
        right: radius,
        top: 0.0,
        bottom: 2.0 * radius,
    }
}
