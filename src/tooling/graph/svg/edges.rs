//! Drawing the lines: arrows along the points the layout routed, their labels, self-loops.

use std::fmt::Write;

use super::layout::{LOOP_REACH, MARKER_RADIUS, Rect};
use super::number;
use super::text::{LINE_HEIGHT, escape, shortened};
use crate::pipeline::compile::machine::{Machine, StateId, StateNode};
use crate::tooling::graph::Arrow;

/// Where an arrow goes: along a routed line with its label's corner, or round its state.
pub(super) enum Drawn<'a> {
    Line {
        route: &'a [(f64, f64)],
        label: Option<(f64, f64)>,
    },
    Loop(Rect),
}

/// The initial marker of a compound state (or the machine) and its lines to the initial
/// states.
pub(super) fn draw_initial(
    container: StateId,
    state: &StateNode,
    marker: (f64, f64),
    routes: &[&[(f64, f64)]],
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
    for route in routes {
        let _ = writeln!(out, "{}", path(route));
    }
    out.push_str("</g>\n");
}

pub(super) fn draw_arrow(machine: &Machine, arrow: &Arrow, drawn: &Drawn, out: &mut String) {
    let labels = &arrow.labels;
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
    let height = LINE_HEIGHT * labels.len() as f64;
    let corner = match drawn {
        Drawn::Loop(area) => {
            // Out of the right side and back, as tall as its label, which stands beside it.
            let right = area.x + area.width;
            let (_, middle) = area.center();
            let reach = (height / 2.0 - 4.0).max(6.0);
            let points = [
                (right, middle - reach),
                (right + LOOP_REACH, middle - reach),
                (right + LOOP_REACH, middle + reach),
                (right, middle + reach),
            ];
            let _ = writeln!(out, "{}", path(&points));
            Some((right + LOOP_REACH + 4.0, middle - height / 2.0))
        }
        Drawn::Line { route, label } => {
            let _ = writeln!(out, "{}", path(route));
            *label
        }
    };
    if let Some((x, top)) = corner {
        let _ = writeln!(out, "{}", label_block(labels, arrow, x, top));
    }
    let _ = writeln!(out, "<title>{}</title>", escape(&labels.join("\n")));
    out.push_str("</g>\n");
}

/// A line through `points` with an arrowhead at the last.
fn path(points: &[(f64, f64)]) -> String {
    let mut data = String::new();
    for (position, (x, y)) in points.iter().enumerate() {
        let command = if position == 0 { "M" } else { " L" };
        let _ = write!(data, "{command} {} {}", number(*x), number(*y));
    }
    format!(r#"<path d="{data}" marker-end="url(#arrowhead)"/>"#)
}

/// An arrow's label from its top-left corner: one line per transition, each line classed with
/// its transition.
fn label_block(lines: &[String], arrow: &Arrow, x: f64, top: f64) -> String {
    let mut text = String::from(r#"<text class="label">"#);
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
