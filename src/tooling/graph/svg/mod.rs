//! A standalone SVG of a compiled machine, laid out here: nested boxes, straight arrows.

mod layers;
mod layout;
mod text;

use std::collections::HashSet;
use std::fmt::Write;

use self::layout::{HISTORY_RADIUS, LOOP_REACH, MARKER_RADIUS, PADDING, Rect, block_size};
use self::text::{FONT_SIZE, LINE_HEIGHT, escape, shortened};
use super::{
    Arrow, arrows, exit_label, history_label, initial_targets, one_line, state_notes, within,
};
use crate::pipeline::compile::machine::{Machine, StateId, StateKind, StateNode};

/// What the SVG shows besides states and transitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SvgOptions {
    /// Entry and exit actions inside each state's box (`entry / exec build`), and each
    /// transition's actions after its label (`go / write report`).
    pub detail: bool,
}

const STYLE: &str = "\
text { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; fill: #222; }
.state > rect, .state > circle { fill: #fff; stroke: #444; stroke-width: 1.2; }
.compound > rect, .parallel > rect { fill: #f6f8fa; }
.region > rect { stroke-dasharray: 5 3; }
.final > rect.inner { fill: none; }
.separator { stroke: #888; stroke-dasharray: 5 3; }
.transition > path { fill: none; stroke: #555; stroke-width: 1.2; }
.history-default > path { stroke-dasharray: 4 3; }
.initial > circle { fill: #222; }
.label { paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
.label tspan { stroke: inherit; }
";

pub(super) fn render(machine: &Machine, options: &SvgOptions) -> String {
    let arrows = arrows(machine, options.detail);
    let lines: Vec<Vec<String>> = machine
        .states
        .iter()
        .map(|state| state_lines(state, options))
        .collect();
    let mut loops: Vec<Vec<String>> = vec![Vec::new(); machine.states.len()];
    for arrow in arrows.iter().filter(|arrow| arrow.source == arrow.target) {
        loops[arrow.source.index()] = arrow.labels.clone();
    }
    let mut title = vec![machine.id.clone()];
    title.extend(machine.title.as_deref().map(one_line));
    let heading = block_size(&title);
    let content = layout::Content {
        lines: &lines,
        loops: &loops,
    };
    let geometry = layout::layout(machine, &arrows, &content, heading.height + PADDING);
    let root = geometry.boxes[0];
    let width = root.width.max(heading.width + 2.0 * PADDING);
    let height = root.y + root.height;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" class="protocol" data-protocol="{id}">"#,
        w = number(width),
        h = number(height),
        id = escape(&machine.id),
    );
    out.push_str("<style>\n");
    out.push_str(STYLE);
    out.push_str("</style>\n");
    out.push_str(
        "<defs><marker id=\"arrowhead\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" \
         markerWidth=\"8\" markerHeight=\"8\" orient=\"auto-start-reverse\">\
         <path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#555\"/></marker></defs>\n",
    );
    let _ = writeln!(
        out,
        r#"<g class="title">{}</g>"#,
        text_block(&title, PADDING, PADDING, false)
    );
    for (index, state) in machine.states.iter().enumerate().skip(1) {
        draw_state(
            machine,
            state,
            &geometry.boxes[index],
            &geometry.boxes,
            &lines[index],
            &mut out,
        );
    }
    for (index, state) in machine.states.iter().enumerate() {
        if let Some(marker) = geometry.markers[index] {
            draw_initial(
                machine,
                StateId(index as u32),
                state,
                marker,
                &geometry.boxes,
                &mut out,
            );
        }
    }
    let pairs: HashSet<(StateId, StateId)> = arrows
        .iter()
        .map(|arrow| (arrow.source, arrow.target))
        .collect();
    for (index, arrow) in arrows.iter().enumerate() {
        let drawn = Drawn {
            labels: &arrow.labels,
            label_corner: geometry.labels[index],
            route: &geometry.routes[index],
            opposite: pairs.contains(&(arrow.target, arrow.source)),
        };
        draw_arrow(machine, arrow, &drawn, &geometry.boxes, &mut out);
    }
    out.push_str("</svg>\n");
    out
}

/// What a state's box says: its id, exit code and invokes, and with `--detail` its actions.
fn state_lines(state: &StateNode, options: &SvgOptions) -> Vec<String> {
    if state.kind == StateKind::Root || state.is_history() {
        return Vec::new();
    }
    let mut lines = vec![state.id.to_string()];
    lines.extend(exit_label(state));
    lines.extend(state_notes(state, options.detail));
    lines
}

/// The classes of a state's group: its kind, and `region` for a parallel state's child.
fn state_classes(machine: &Machine, state: &StateNode) -> String {
    let kind = match state.kind {
        StateKind::Atomic => "atomic",
        StateKind::Final => "final",
        StateKind::Compound => "compound",
        StateKind::Parallel => "parallel",
        StateKind::History { deep: false } => "history",
        StateKind::History { deep: true } => "history deep",
        StateKind::Root => "root",
    };
    let parent = state.parent.map(|parent| machine.state(parent).kind);
    if parent == Some(StateKind::Parallel) && !state.is_history() {
        format!("state {kind} region")
    } else {
        format!("state {kind}")
    }
}

fn draw_state(
    machine: &Machine,
    state: &StateNode,
    area: &Rect,
    boxes: &[Rect],
    lines: &[String],
    out: &mut String,
) {
    let _ = writeln!(
        out,
        r#"<g id="state-{id}" class="{classes}" data-state="{id}">"#,
        id = escape(&state.id),
        classes = state_classes(machine, state),
    );
    if let Some(marker) = history_label(state) {
        let (x, y) = area.center();
        let _ = writeln!(
            out,
            r#"<circle cx="{}" cy="{}" r="{}"/><text x="{}" y="{}" text-anchor="middle">{marker}</text><title>history {}</title>"#,
            number(x),
            number(y),
            number(HISTORY_RADIUS),
            number(x),
            number(y + FONT_SIZE / 3.0),
            escape(&state.id),
        );
        out.push_str("</g>\n");
        return;
    }
    let _ = writeln!(out, "{}", rectangle(area, 8.0, ""));
    if state.kind == StateKind::Final {
        let inner = Rect {
            x: area.x + 3.0,
            y: area.y + 3.0,
            width: area.width - 6.0,
            height: area.height - 6.0,
        };
        let _ = writeln!(out, "{}", rectangle(&inner, 6.0, " class=\"inner\""));
    }
    let centred = state.is_atomic();
    let x = if centred {
        area.x + area.width / 2.0
    } else {
        area.x + PADDING
    };
    let _ = writeln!(
        out,
        "{}",
        text_block(lines, x, area.y + PADDING / 2.0, centred)
    );
    if lines.iter().any(|line| shortened(line).len() != line.len()) {
        let _ = writeln!(out, "<title>{}</title>", escape(&lines.join("\n")));
    }
    if state.kind == StateKind::Parallel {
        draw_separators(state, boxes, area, out);
    }
    out.push_str("</g>\n");
}

/// Dashed lines between a parallel state's regions, in the gap between their boxes.
fn draw_separators(state: &StateNode, boxes: &[Rect], area: &Rect, out: &mut String) {
    let regions: Vec<&Rect> = state
        .children
        .iter()
        .map(|child| &boxes[child.index()])
        .collect();
    for pair in regions.windows(2) {
        // Regions are `2 * PADDING` apart (beyond a self-loop's label, if any).
        let x = pair[1].x - PADDING;
        let top = pair[0].y.min(pair[1].y) - PADDING / 2.0;
        let _ = writeln!(
            out,
            r#"<line class="separator" x1="{x}" y1="{}" x2="{x}" y2="{}"/>"#,
            number(top),
            number(area.y + area.height - PADDING / 2.0),
            x = number(x),
        );
    }
}

/// The initial marker of a compound state (or the machine) and its arrow to the initial state.
fn draw_initial(
    machine: &Machine,
    container: StateId,
    state: &StateNode,
    marker: (f64, f64),
    boxes: &[Rect],
    out: &mut String,
) {
    let id = if container == StateId::ROOT {
        "initial".to_string()
    } else {
        format!("initial-{}", escape(&state.id))
    };
    let transition = state.initial.map_or(0, |initial| initial.index());
    let _ = writeln!(
        out,
        r#"<g id="{id}" class="initial transition transition-{transition}"><circle cx="{}" cy="{}" r="{}"/>"#,
        number(marker.0),
        number(marker.1),
        number(MARKER_RADIUS),
    );
    for target in initial_targets(machine, state) {
        let area = &boxes[target.index()];
        let start = clip_circle(marker, MARKER_RADIUS, area.center());
        let end = clip(machine, target, area, marker);
        let _ = writeln!(out, "{}", segment(start, end));
    }
    out.push_str("</g>\n");
}

/// How one arrow is drawn: its label lines, where the layout put them, and whether an arrow
/// goes the other way between the same states.
struct Drawn<'a> {
    labels: &'a [String],
    label_corner: Option<(f64, f64)>,
    /// The points the layout routed it through, its label's middle among them.
    route: &'a [(f64, f64)],
    opposite: bool,
}

fn draw_arrow(machine: &Machine, arrow: &Arrow, drawn: &Drawn, boxes: &[Rect], out: &mut String) {
    let labels = drawn.labels;
    let source = machine.state(arrow.source);
    let target = machine.state(arrow.target);
    let mut classes = String::from("transition");
    for transition in &arrow.transitions {
        let _ = write!(classes, " transition-{}", transition.index());
    }
    if arrow.history_default {
        classes.push_str(" history-default");
    }
    let _ = writeln!(
        out,
        r#"<g id="arrow-{source}.{target}" class="{classes}" data-source="{source}" data-target="{target}">"#,
        source = escape(&source.id),
        target = escape(&target.id),
    );
    let from = &boxes[arrow.source.index()];
    let to = &boxes[arrow.target.index()];
    let middle = if arrow.source == arrow.target {
        // A loop out of the right side, its label beyond it.
        let right = from.x + from.width;
        let (_, y) = from.center();
        let _ = writeln!(
            out,
            r#"<path d="M {} {} C {} {} {} {} {} {}" marker-end="url(#arrowhead)"/>"#,
            number(right),
            number(y - 6.0),
            number(right + LOOP_REACH),
            number(y - 6.0 - LOOP_REACH),
            number(right + LOOP_REACH),
            number(y + 6.0 + LOOP_REACH),
            number(right),
            number(y + 6.0),
        );
        let text_top = y - LINE_HEIGHT * labels.len() as f64 / 2.0;
        let _ = writeln!(
            out,
            "{}",
            label_block(labels, arrow, right + LOOP_REACH + 4.0, text_top, false)
        );
        None
    } else if let (Some((x, y)), Some(first), Some(last)) =
        (drawn.label_corner, drawn.route.first(), drawn.route.last())
    {
        // Through the points the layout left for it, its label among them.
        let size = block_size(labels);
        let start = clip(machine, arrow.source, from, *first);
        let end = clip(machine, arrow.target, to, *last);
        let mut path = format!("M {} {}", number(start.0), number(start.1));
        for (x, y) in drawn.route.iter().chain([&end]) {
            let _ = write!(path, " L {} {}", number(*x), number(*y));
        }
        let _ = writeln!(out, r#"<path d="{path}" marker-end="url(#arrowhead)"/>"#);
        Some((x + size.width / 2.0, y + size.height / 2.0))
    } else {
        let (mut start, mut end) = if within(machine, arrow.target, arrow.source) {
            let anchor = header_anchor(from);
            (anchor, clip(machine, arrow.target, to, anchor))
        } else if within(machine, arrow.source, arrow.target) {
            let anchor = header_anchor(to);
            (clip(machine, arrow.source, from, anchor), anchor)
        } else {
            (
                clip(machine, arrow.source, from, to.center()),
                clip(machine, arrow.target, to, from.center()),
            )
        };
        if drawn.opposite {
            // Two arrows in opposite directions: each moves to its own right, apart.
            let (dx, dy) = (end.0 - start.0, end.1 - start.1);
            let length = (dx * dx + dy * dy).sqrt().max(1.0);
            let (ox, oy) = (-dy / length * 5.0, dx / length * 5.0);
            start = (start.0 + ox, start.1 + oy);
            end = (end.0 + ox, end.1 + oy);
        }
        let _ = writeln!(out, "{}", segment(start, end));
        Some(((start.0 + end.0) / 2.0, (start.1 + end.1) / 2.0))
    };
    if let Some((x, y)) = middle {
        let text_top = y - LINE_HEIGHT * labels.len() as f64 / 2.0;
        let _ = writeln!(out, "{}", label_block(labels, arrow, x, text_top, true));
    }
    let _ = writeln!(out, "<title>{}</title>", escape(&labels.join("\n")));
    out.push_str("</g>\n");
}

/// A point inside a container's header, where arrows to and from its own descendants end.
fn header_anchor(area: &Rect) -> (f64, f64) {
    (area.x + PADDING / 2.0, area.y + PADDING / 2.0)
}

/// Where the line from the middle of `state`'s shape towards `toward` leaves it.
fn clip(machine: &Machine, state: StateId, area: &Rect, toward: (f64, f64)) -> (f64, f64) {
    let center = area.center();
    if machine.state(state).is_history() {
        return clip_circle(center, HISTORY_RADIUS, toward);
    }
    let (dx, dy) = (toward.0 - center.0, toward.1 - center.1);
    if dx == 0.0 && dy == 0.0 {
        return center;
    }
    let scale_x = if dx == 0.0 {
        f64::INFINITY
    } else {
        area.width / 2.0 / dx.abs()
    };
    let scale_y = if dy == 0.0 {
        f64::INFINITY
    } else {
        area.height / 2.0 / dy.abs()
    };
    let scale = scale_x.min(scale_y);
    (center.0 + dx * scale, center.1 + dy * scale)
}

fn clip_circle(center: (f64, f64), radius: f64, toward: (f64, f64)) -> (f64, f64) {
    let (dx, dy) = (toward.0 - center.0, toward.1 - center.1);
    let length = (dx * dx + dy * dy).sqrt();
    if length == 0.0 {
        return center;
    }
    (
        center.0 + dx / length * radius,
        center.1 + dy / length * radius,
    )
}

fn segment(start: (f64, f64), end: (f64, f64)) -> String {
    format!(
        r#"<path d="M {} {} L {} {}" marker-end="url(#arrowhead)"/>"#,
        number(start.0),
        number(start.1),
        number(end.0),
        number(end.1)
    )
}

fn rectangle(area: &Rect, radius: f64, attributes: &str) -> String {
    format!(
        r#"<rect{attributes} x="{}" y="{}" width="{}" height="{}" rx="{}"/>"#,
        number(area.x),
        number(area.y),
        number(area.width),
        number(area.height),
        number(radius)
    )
}

/// Lines of text from `top` down, left-aligned at `x` or centred on it.
fn text_block(lines: &[String], x: f64, top: f64, centred: bool) -> String {
    let anchor = if centred {
        r#" text-anchor="middle""#
    } else {
        ""
    };
    let mut text = format!("<text{anchor}>");
    for (number_of_line, line) in lines.iter().enumerate() {
        let baseline = top + LINE_HEIGHT * (number_of_line as f64 + 0.75);
        let _ = write!(
            text,
            r#"<tspan x="{}" y="{}">{}</tspan>"#,
            number(x),
            number(baseline),
            escape(&shortened(line))
        );
    }
    text.push_str("</text>");
    text
}

/// An arrow's label: one line per transition, each line classed with its transition.
fn label_block(lines: &[String], arrow: &Arrow, x: f64, top: f64, centred: bool) -> String {
    let anchor = if centred {
        r#" text-anchor="middle""#
    } else {
        ""
    };
    let mut text = format!(r#"<text class="label"{anchor}>"#);
    for (position, (line, transition)) in lines.iter().zip(&arrow.transitions).enumerate() {
        let baseline = top + LINE_HEIGHT * (position as f64 + 0.75);
        let _ = write!(
            text,
            r#"<tspan class="transition-{}" x="{}" y="{}">{}</tspan>"#,
            transition.index(),
            number(x),
            number(baseline),
            escape(&shortened(line))
        );
    }
    text.push_str("</text>");
    text
}

/// Coordinates with one decimal: enough for a screen, and the same bytes on every run.
fn number(value: f64) -> String {
    let rounded = (value * 10.0).round() / 10.0;
    // `-0.0` would print with its sign.
    if rounded == 0.0 {
        "0".to_string()
    } else if rounded.fract() == 0.0 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded:.1}")
    }
}
