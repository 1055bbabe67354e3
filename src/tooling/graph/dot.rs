//! Graphviz DOT text for a compiled machine: compound and parallel states become clusters.

use std::collections::HashSet;
use std::fmt::Write;

use super::{arrows, exit_label, history_label, initial_targets, one_line, state_notes, within};
use crate::pipeline::compile::machine::{Machine, StateId, StateKind, StateNode};

const INDENT: &str = "    ";

/// `detail`: states' and transitions' actions too (`--detail`).
pub(super) fn render(machine: &Machine, detail: bool) -> String {
    let arrows = arrows(machine, detail);
    // Clusters some edge starts or ends at: they need a node to stand in for them.
    let mut anchored = vec![false; machine.states.len()];
    for arrow in &arrows {
        anchored[arrow.source.index()] = true;
        anchored[arrow.target.index()] = true;
    }
    for state in &machine.states {
        for target in initial_targets(machine, state) {
            anchored[target.index()] = true;
        }
    }
    let mut out = format!("digraph {} {{\n", quote(&machine.id));
    for setting in [
        "compound=true",
        "fontname=\"Helvetica\"",
        "node [shape=box, style=rounded, fontname=\"Helvetica\"]",
        "edge [fontname=\"Helvetica\", fontsize=10]",
    ] {
        line(&mut out, 1, &format!("{setting};"));
    }
    line(
        &mut out,
        1,
        &format!(
            "{} [shape=point, width=0.15];",
            initial_node(machine, StateId::ROOT)
        ),
    );
    // Open clusters, innermost last; the root (index 0) is the graph itself. A loop with a
    // stack rather than recursion, as deep documents are allowed.
    let mut open: Vec<StateId> = vec![StateId::ROOT];
    for (index, state) in machine.states.iter().enumerate().skip(1) {
        let id = StateId(index as u32);
        let parent = state.parent.unwrap_or(StateId::ROOT);
        while open.len() > 1 && open.last().is_some_and(|cluster| *cluster != parent) {
            open.pop();
            line(&mut out, open.len(), "}");
        }
        let depth = open.len();
        let region = machine.state(parent).kind == StateKind::Parallel && !state.is_history();
        if is_cluster(state) {
            let frame = Frame {
                region,
                anchored: anchored[index],
                detail,
            };
            open_cluster(machine, id, frame, depth, &mut out);
            open.push(id);
        } else if region {
            // A region that is a single state still gets its dashed frame, like the others.
            line(
                &mut out,
                depth,
                &format!(
                    "subgraph {} {{",
                    quote(&format!("cluster_region {}", state.id))
                ),
            );
            line(&mut out, depth + 1, "label=\"\";");
            line(&mut out, depth + 1, "style=\"dashed\";");
            node(state, depth + 1, detail, &mut out);
            line(&mut out, depth, "}");
        } else {
            node(state, depth, detail, &mut out);
        }
    }
    while open.len() > 1 {
        open.pop();
        line(&mut out, open.len(), "}");
    }
    // Edges last, at the top level: every node already sits in its cluster by then.
    for (index, state) in machine.states.iter().enumerate() {
        for target in initial_targets(machine, state) {
            let (head, head_cluster) = endpoint(machine, target);
            let attributes: Vec<String> = head_cluster
                .map(|cluster| format!("lhead={cluster}"))
                .into_iter()
                .collect();
            write_edge(
                &initial_node(machine, StateId(index as u32)),
                &head,
                &attributes,
                &mut out,
            );
        }
    }
    let pairs: HashSet<(StateId, StateId)> = arrows
        .iter()
        .map(|arrow| (arrow.source, arrow.target))
        .collect();
    for arrow in &arrows {
        let mut attributes = vec![format!("label={}", quote_lines(&arrow.labels))];
        if arrow.history_default {
            attributes.push("style=dashed".to_string());
        }
        // Graphviz fails to route a pair of opposite edges between a node and a cluster
        // ("triangulation failed"); drawn from the cluster with the arrowhead at the back,
        // the edge looks the same and routes.
        let reversed = arrow.source != arrow.target
            && is_cluster(machine.state(arrow.target))
            && pairs.contains(&(arrow.target, arrow.source));
        if reversed {
            attributes.push("dir=back".to_string());
            edge(machine, arrow.target, arrow.source, attributes, &mut out);
        } else {
            edge(machine, arrow.source, arrow.target, attributes, &mut out);
        }
    }
    // The graph's label goes last so clusters, declared before it, do not inherit it.
    let mut title = vec![machine.id.clone()];
    title.extend(machine.title.as_deref().map(one_line));
    line(&mut out, 1, &format!("label={};", quote_lines(&title)));
    line(&mut out, 1, "labelloc=t;");
    out.push_str("}\n");
    out
}

/// How a cluster is framed: dashed for a parallel region, with an anchor node when edges
/// attach to it, with its actions listed under `--detail`.
#[derive(Clone, Copy)]
struct Frame {
    region: bool,
    anchored: bool,
    detail: bool,
}

fn is_cluster(state: &StateNode) -> bool {
    matches!(state.kind, StateKind::Compound | StateKind::Parallel)
}

/// `subgraph "cluster_<id>" {` with its label, style, initial point and, when `anchored`,
/// the invisible node that edges to or from the state attach to (Graphviz has no edges to
/// clusters; `ltail` / `lhead` clip such an edge at the border). The initial point is not
/// reused for that, so no arrow looks like a second initial one.
fn open_cluster(machine: &Machine, id: StateId, frame: Frame, depth: usize, out: &mut String) {
    let state = machine.state(id);
    line(out, depth, &format!("subgraph {} {{", cluster_name(state)));
    let mut label = vec![state.id.to_string()];
    label.extend(state_notes(state, frame.detail));
    line(out, depth + 1, &format!("label={};", quote_lines(&label)));
    let style = if frame.region {
        "rounded,dashed"
    } else {
        "rounded"
    };
    line(out, depth + 1, &format!("style={};", quote(style)));
    if state.kind == StateKind::Compound && state.initial.is_some() {
        line(
            out,
            depth + 1,
            &format!("{} [shape=point, width=0.15];", initial_node(machine, id)),
        );
    }
    if frame.anchored {
        line(
            out,
            depth + 1,
            &format!(
                "{} [shape=point, style=invis, width=0.01, label=\"\"];",
                anchor_node(machine, id)
            ),
        );
    }
}

fn node(state: &StateNode, depth: usize, detail: bool, out: &mut String) {
    let name = quote(&state.id);
    let attributes = if let Some(marker) = history_label(state) {
        format!(
            "shape=circle, width=0.35, fixedsize=true, label={}, tooltip={}",
            quote(marker),
            quote(&format!("history {}", state.id))
        )
    } else {
        let mut label = vec![state.id.to_string()];
        label.extend(exit_label(state));
        label.extend(state_notes(state, detail));
        let shape = if state.kind == StateKind::Final {
            "shape=doublecircle, margin=0.02, "
        } else {
            ""
        };
        format!("{shape}label={}", quote_lines(&label))
    };
    line(out, depth, &format!("{name} [{attributes}];"));
}

/// The node an edge to or from `state` attaches to, and the cluster to clip it at.
fn endpoint(machine: &Machine, state: StateId) -> (String, Option<String>) {
    let node = machine.state(state);
    if is_cluster(node) {
        (anchor_node(machine, state), Some(cluster_name(node)))
    } else {
        (quote(&node.id), None)
    }
}

/// Node names that cannot clash with state ids, which have no spaces or parentheses.
fn initial_node(machine: &Machine, state: StateId) -> String {
    if state == StateId::ROOT {
        quote("(initial)")
    } else {
        quote(&format!("(initial) {}", machine.state(state).id))
    }
}

fn anchor_node(machine: &Machine, state: StateId) -> String {
    quote(&format!("(anchor) {}", machine.state(state).id))
}

fn cluster_name(state: &StateNode) -> String {
    quote(&format!("cluster_{}", state.id))
}

/// An edge between two states, clipped at the border of an end that is a cluster when the
/// other end is outside it (inside, clipping makes no sense and Graphviz ignores it).
fn edge(
    machine: &Machine,
    tail: StateId,
    head: StateId,
    mut attributes: Vec<String>,
    out: &mut String,
) {
    let (tail_node, tail_cluster) = endpoint(machine, tail);
    let (head_node, head_cluster) = endpoint(machine, head);
    if let Some(cluster) = tail_cluster
        && !within(machine, head, tail)
    {
        attributes.push(format!("ltail={cluster}"));
    }
    if let Some(cluster) = head_cluster
        && !within(machine, tail, head)
    {
        attributes.push(format!("lhead={cluster}"));
    }
    write_edge(&tail_node, &head_node, &attributes, out);
}

fn write_edge(tail: &str, head: &str, attributes: &[String], out: &mut String) {
    if attributes.is_empty() {
        line(out, 1, &format!("{tail} -> {head};"));
    } else {
        line(
            out,
            1,
            &format!("{tail} -> {head} [{}];", attributes.join(", ")),
        );
    }
}

fn line(out: &mut String, depth: usize, text: &str) {
    let _ = writeln!(out, "{}{text}", INDENT.repeat(depth));
}

/// A DOT string: `"` and `\` escaped (a backslash would otherwise start `\n`, `\N`, ...).
fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in one_line(text).chars() {
        if matches!(character, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(character);
    }
    quoted.push('"');
    quoted
}

/// Several label lines in one DOT string, joined with the `\n` escape.
fn quote_lines(lines: &[String]) -> String {
    let joined = lines
        .iter()
        .map(|text| {
            let quoted = quote(text);
            quoted[1..quoted.len() - 1].to_string()
        })
        .collect::<Vec<_>>()
        .join("\\n");
    format!("\"{joined}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tooling::graph::tests::{HISTORY, NESTING, PARALLEL, machine};

    fn dot(yaml: &str) -> String {
        render(&machine(yaml), false)
    }

    const HEADER: &str = r#"    compound=true;
    fontname="Helvetica";
    node [shape=box, style=rounded, fontname="Helvetica"];
    edge [fontname="Helvetica", fontsize=10];
    "(initial)" [shape=point, width=0.15];
"#;

    #[test]
    fn compound_states_are_clusters_with_an_initial_point() {
        let expected = format!(
            r#"digraph "nesting" {{
{HEADER}    subgraph "cluster_working" {{
        label="working";
        style="rounded";
        "(initial) working" [shape=point, width=0.15];
        "(anchor) working" [shape=point, style=invis, width=0.01, label=""];
        "fetching" [label="fetching"];
        "parsing" [label="parsing"];
        "done" [shape=doublecircle, margin=0.02, label="done"];
    }}
    "complete" [shape=doublecircle, margin=0.02, label="complete\nexit 0"];
    "cancelled" [shape=doublecircle, margin=0.02, label="cancelled\nexit 1"];
    "(initial)" -> "(anchor) working" [lhead="cluster_working"];
    "(initial) working" -> "fetching";
    "(anchor) working" -> "complete" [label="done.state.working", ltail="cluster_working"];
    "(anchor) working" -> "cancelled" [label="cancel", ltail="cluster_working"];
    "fetching" -> "parsing" [label="fetched"];
    "parsing" -> "fetching" [label="failed [attempts < 3]"];
    "parsing" -> "done" [label="after 30s"];
    label="nesting\nWork, then stop";
    labelloc=t;
}}
"#
        );
        assert_eq!(dot(NESTING), expected);
    }

    #[test]
    fn parallel_regions_are_dashed_clusters() {
        let expected = format!(
            r#"digraph "checks" {{
{HEADER}    subgraph "cluster_checks" {{
        label="checks";
        style="rounded";
        "(anchor) checks" [shape=point, style=invis, width=0.01, label=""];
        subgraph "cluster_disk" {{
            label="disk";
            style="rounded,dashed";
            "(initial) disk" [shape=point, width=0.15];
            "disk_pending" [label="disk_pending"];
            "disk_done" [shape=doublecircle, margin=0.02, label="disk_done"];
        }}
        subgraph "cluster_region network" {{
            label="";
            style="dashed";
            "network" [label="network"];
        }}
    }}
    "healthy" [shape=doublecircle, margin=0.02, label="healthy\nexit 0"];
    "(initial)" -> "(anchor) checks" [lhead="cluster_checks"];
    "(initial) disk" -> "disk_pending";
    "(anchor) checks" -> "healthy" [label="done.state.checks", ltail="cluster_checks"];
    "disk_pending" -> "disk_done" [label="disk_ok"];
    label="checks";
    labelloc=t;
}}
"#
        );
        assert_eq!(dot(PARALLEL), expected);
    }

    #[test]
    fn history_states_are_small_circles_with_a_dashed_default() {
        let expected = format!(
            r#"digraph "history" {{
{HEADER}    subgraph "cluster_task" {{
        label="task";
        style="rounded";
        "(initial) task" [shape=point, width=0.15];
        "(anchor) task" [shape=point, style=invis, width=0.01, label=""];
        "step_one" [label="step_one"];
        "step_two" [label="step_two"];
        "resume" [shape=circle, width=0.35, fixedsize=true, label="H*", tooltip="history resume"];
    }}
    "paused" [label="paused"];
    "(initial)" -> "(anchor) task" [lhead="cluster_task"];
    "(initial) task" -> "step_one";
    "(anchor) task" -> "paused" [label="interrupt", ltail="cluster_task"];
    "step_one" -> "step_two" [label="next"];
    "resume" -> "step_two" [label="default", style=dashed];
    "paused" -> "resume" [label="resume"];
    "(anchor) task" -> "paused" [label="timeout 15m", dir=back, ltail="cluster_task"];
    label="history";
    labelloc=t;
}}
"#
        );
        // The timeout runs from `paused` into `task`: drawn reversed, as `interrupt` runs the
        // other way between the same two.
        assert_eq!(dot(HISTORY), expected);
    }

    #[test]
    fn strings_escape_quotes_and_backslashes() {
        let yaml = r#"
id: quotes
title: 'say "hi" \n'
context: { name: "" }
states:
  a: { on: { go: { target: b, guard: "name == \"x\\\\y\"" } } }
  b: {}
"#;
        let text = dot(yaml);
        assert!(
            text.contains(r#"label="quotes\nsay \"hi\" \\n";"#),
            "{text}"
        );
        assert!(
            text.contains(r#""a" -> "b" [label="go [name == \"x\\\\y\"]"];"#),
            "{text}"
        );
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn several_transitions_between_two_states_share_an_edge() {
        let yaml = r#"
id: shared
states:
  calling:
    on: { fail: calling, ok: done }
    after: [{ delay: 2s, target: calling }]
  done: { type: final }
"#;
        assert!(dot(yaml).contains(r#""calling" -> "calling" [label="fail\nafter 2s"];"#));
    }
}
