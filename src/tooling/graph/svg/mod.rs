//! A standalone SVG of a compiled machine, laid out here: nested boxes, arrows routed around them.

mod edges;
mod layers;
mod layout;
mod parallel;
mod plan;
mod routes;
mod text;

use std::fmt::Write;

use self::layout::{CORNER_RADIUS, HISTORY_RADIUS, PADDING, Rect, block_size};
use self::text::{FONT_SIZE, LINE_HEIGHT, escape, shortened};
use super::{arrows, exit_label, history_label, one_line, state_notes};
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
    let plans = plan::plans(machine, &arrows);
    let geometry = layout::layout(machine, &plans, &content, heading.height + PADDING);
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
    let mut line_of_arrow = vec![None; arrows.len()];
    let mut marker_lines: Vec<Vec<usize>> = vec![Vec::new(); machine.states.len()];
    for (line, plan) in plans.lines.iter().enumerate() {
        match plan.arrow {
            Some(arrow) => line_of_arrow[arrow] = Some(line),
            None => marker_lines[plan.common.index()].push(line),
        }
    }
    for (index, state) in machine.states.iter().enumerate() {
        if let Some(marker) = geometry.markers[index] {
            let routes: Vec<&[(f64, f64)]> = marker_lines[index]
                .iter()
                .map(|line| &geometry.lines[*line][..])
                .collect();
            let container = StateId(index as u32);
            edges::draw_initial(container, state, marker, &routes, &mut out);
        }
    }
    for (index, arrow) in arrows.iter().enumerate() {
        let drawn = match line_of_arrow[index] {
            Some(line) => edges::Drawn::Line {
                route: &geometry.lines[line],
                label: geometry.labels[line],
            },
            None => edges::Drawn::Loop(geometry.boxes[arrow.source.index()]),
        };
        edges::draw_arrow(machine, arrow, &drawn, &mut out);
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
    let _ = writeln!(out, "{}", rectangle(area, CORNER_RADIUS, ""));
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
        draw_separators(state, boxes, out);
    }
    out.push_str("</g>\n");
}

/// Dashed lines between a parallel state's regions, in the gap between their boxes.
fn draw_separators(state: &StateNode, boxes: &[Rect], out: &mut String) {
    let regions: Vec<&Rect> = state
        .children
        .iter()
        .map(|child| &boxes[child.index()])
        .collect();
    // Down to the lowest region: the bands under the regions hold lines between them.
    let lowest = regions
        .iter()
        .map(|region| region.y + region.height)
        .fold(f64::NEG_INFINITY, f64::max);
    for pair in regions.windows(2) {
        // Regions are `2 * PADDING` apart (beyond a self-loop's label, if any).
        let x = pair[1].x - PADDING;
        let top = pair[0].y.min(pair[1].y) - PADDING / 2.0;
        let _ = writeln!(
            out,
            r#"<line class="separator" x1="{x}" y1="{}" x2="{x}" y2="{}"/>"#,
            number(top),
            number(lowest + PADDING / 2.0),
            x = number(x),
        );
    }
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

/// Coordinates with one decimal: enough for a screen, and the same bytes on every run.
pub(super) fn number(value: f64) -> String {
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
