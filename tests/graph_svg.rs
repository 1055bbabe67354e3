//! `graph --format svg`: the SVG laid out by protocol-run, checked as XML and as geometry.

use std::collections::BTreeMap;

use protocol_run::pipeline::compile::machine::Machine;
use protocol_run::tooling::graph::{SvgOptions, svg};

use crate::support::machine;

/// Compound, parallel, both histories, finals, a guard, a timer, a self-loop, two targets.
pub(crate) const EVERYTHING: &str = r#"
id: everything
title: All "kinds" <of> states & arrows
context: { attempts: 0 }
states:
  working:
    initial: fetching
    entry: [{ log: started }]
    exit: [{ assign: { attempts: 0 } }]
    states:
      fetching:
        on:
          fetched: parsing
          ping: { type: internal, actions: [{ raise: pong }] }
      parsing:
        on: { failed: { target: fetching, guard: attempts < 3, actions: [{ log: again }] } }
        after: [{ delay: 30s, target: done }]
      done: { type: final }
      back: { type: history, target: fetching }
      deep_back: { type: history, history: deep, target: parsing }
    on:
      done.state.working: checks
      cancel: cancelled
  checks:
    type: parallel
    states:
      volume:
        states:
          volume_pending: { on: { volume_ok: volume_done } }
          volume_done: { type: final }
      uplink: {}
    on:
      done.state.checks: complete
      retry: [back]
  complete: { type: final, exit_code: 0 }
  cancelled: { type: final, exit_code: 1 }
"#;

/// A state's drawn shape: its bounding box, and the group's classes.
#[derive(Debug, Clone)]
struct Shape {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    classes: String,
}

fn number(node: roxmltree::Node, name: &str) -> f64 {
    node.attribute(name)
        .unwrap_or_else(|| panic!("no {name} on {node:?}"))
        .parse()
        .expect("a number")
}

/// Every state group's shape, by state id; panics on a state drawn twice.
fn shapes(document: &roxmltree::Document) -> BTreeMap<String, Shape> {
    let mut shapes = BTreeMap::new();
    for group in document
        .descendants()
        .filter(|node| has_class(*node, "state"))
    {
        let id = group
            .attribute("data-state")
            .expect("data-state")
            .to_string();
        assert_eq!(group.attribute("id"), Some(format!("state-{id}").as_str()));
        let shape = group
            .children()
            .find(|node| node.is_element())
            .expect("a shape");
        let bounds = match shape.tag_name().name() {
            "rect" => (
                number(shape, "x"),
                number(shape, "y"),
                number(shape, "width"),
                number(shape, "height"),
            ),
            "circle" => {
                let radius = number(shape, "r");
                let (x, y) = (number(shape, "cx"), number(shape, "cy"));
                (x - radius, y - radius, 2.0 * radius, 2.0 * radius)
            }
            other => panic!("unexpected shape {other}"),
        };
        let classes = group.attribute("class").unwrap_or_default().to_string();
        let shape = Shape {
            x: bounds.0,
            y: bounds.1,
            width: bounds.2,
            height: bounds.3,
            classes,
        };
        assert!(
            shapes.insert(id.clone(), shape).is_none(),
            "{id} drawn twice"
        );
    }
    shapes
}

fn has_class(node: roxmltree::Node, class: &str) -> bool {
    node.attribute("class")
        .is_some_and(|classes| classes.split(' ').any(|name| name == class))
}

fn inside(inner: &Shape, outer: &Shape) -> bool {
    inner.x >= outer.x
        && inner.y >= outer.y
        && inner.x + inner.width <= outer.x + outer.width
        && inner.y + inner.height <= outer.y + outer.height
}

fn overlap(left: &Shape, right: &Shape) -> bool {
    left.x < right.x + right.width
        && right.x < left.x + left.width
        && left.y < right.y + right.height
        && right.y < left.y + left.height
}

/// The checks every drawing passes: well-formed, every state once, children inside their
/// parents, siblings apart, every transition drawn.
fn check_drawing(machine: &Machine, text: &str) -> BTreeMap<String, Shape> {
    let document = roxmltree::Document::parse(text)
        .unwrap_or_else(|error| panic!("{}: not XML: {error}", machine.id));
    let shapes = shapes(&document);
    assert_eq!(shapes.len(), machine.states.len() - 1, "{}", machine.id);
    for state in machine.states.iter().skip(1) {
        let shape = &shapes[&*state.id];
        let parent = machine.state(state.parent.expect("a parent"));
        if let Some(outer) = shapes.get(&*parent.id) {
            assert!(inside(shape, outer), "{} outside {}", state.id, parent.id);
        }
        for sibling in &parent.children {
            let other = machine.state(*sibling);
            if other.id != state.id {
                let name = format!("{} and {} overlap", state.id, other.id);
                assert!(!overlap(shape, &shapes[&*other.id]), "{name}");
            }
        }
    }
    for (index, transition) in machine.transitions.iter().enumerate() {
        let class = format!("transition-{index}");
        let drawn = document
            .descendants()
            .any(|node| node.tag_name().name() == "g" && has_class(node, &class));
        let source = machine.state(transition.source);
        // Only a compound state's initial transition without a marker would be missing.
        assert!(
            drawn,
            "{}: transition {index} from {}",
            machine.id, source.id
        );
    }
    shapes
}

fn text_of(document: &roxmltree::Document, class: &str) -> Vec<String> {
    document
        .descendants()
        .filter(|node| has_class(*node, class))
        .map(|node| {
            node.descendants()
                .filter(|node| node.is_text())
                .filter_map(|node| node.text())
                .filter(|text| !text.trim().is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

#[test]
fn every_state_is_drawn_once_nested_and_apart() {
    let machine = machine(EVERYTHING);
    let text = svg(&machine, &SvgOptions::default());
    let shapes = check_drawing(&machine, &text);
    assert!(shapes["volume"].classes.contains("region"));
    assert!(shapes["uplink"].classes.contains("region"));
    assert!(shapes["checks"].classes.contains("parallel"));
    assert!(shapes["working"].classes.contains("compound"));
    assert!(shapes["fetching"].classes.contains("atomic"));
}

#[test]
fn labels_carry_events_guards_and_timers() {
    let machine = machine(EVERYTHING);
    let text = svg(&machine, &SvgOptions::default());
    let document = roxmltree::Document::parse(&text).expect("XML");
    let labels = text_of(&document, "label").join("\n");
    for expected in [
        "fetched",
        "failed [attempts < 3]",
        "after 30s",
        "ping (internal)",
        "done.state.working",
        "cancel",
    ] {
        assert!(
            labels.contains(expected),
            "{expected} missing from {labels}"
        );
    }
    // The self-loop and the default of a history state.
    let loops = document
        .descendants()
        .find(|node| node.attribute("id") == Some("arrow-fetching.fetching"))
        .expect("self-loop");
    assert!(has_class(loops, "transition"));
    let default = document
        .descendants()
        .find(|node| node.attribute("id") == Some("arrow-deep_back.parsing"))
        .expect("history default");
    assert!(has_class(default, "history-default"));
    // Markup in the title is escaped, not interpreted.
    assert!(text.contains("All &quot;kinds&quot; &lt;of&gt; states &amp; arrows"));
}

#[test]
fn final_history_and_parallel_are_drawn_as_documented() {
    let machine = machine(EVERYTHING);
    let text = svg(&machine, &SvgOptions::default());
    let document = roxmltree::Document::parse(&text).expect("XML");
    let group = |id: &str| {
        document
            .descendants()
            .find(|node| node.attribute("id") == Some(id))
            .unwrap_or_else(|| panic!("no {id}"))
    };
    // A final state has a double border: two rectangles.
    let rectangles = group("state-complete")
        .children()
        .filter(|node| node.tag_name().name() == "rect")
        .count();
    assert_eq!(rectangles, 2);
    assert_eq!(text_of(&document, "final").len(), 4);
    // History states are circles reading H and H*.
    assert_eq!(
        group("state-back")
            .first_element_child()
            .map(|n| n.tag_name().name()),
        Some("circle")
    );
    assert!(text_of(&document, "history").contains(&"H\nhistory back".to_string()));
    assert!(text_of(&document, "deep").contains(&"H*\nhistory deep_back".to_string()));
    // A parallel state's two regions are split by one dashed separator.
    let separators = group("state-checks")
        .children()
        .filter(|node| has_class(*node, "separator"))
        .count();
    assert_eq!(separators, 1);
    // Initial markers: the machine's and each compound state's.
    for id in ["initial", "initial-working", "initial-volume"] {
        assert!(has_class(group(id), "initial"), "{id}");
    }
}

#[test]
fn detail_adds_entry_exit_and_transition_actions() {
    let machine = machine(EVERYTHING);
    let plain = svg(&machine, &SvgOptions::default());
    assert!(!plain.contains("entry / log"));
    let text = svg(&machine, &SvgOptions { detail: true });
    check_drawing(&machine, &text);
    let document = roxmltree::Document::parse(&text).expect("XML");
    let working = text_of(&document, "compound").join("\n");
    assert!(working.contains("entry / log"), "{working}");
    assert!(working.contains("exit / assign"), "{working}");
    let labels = text_of(&document, "label").join("\n");
    assert!(labels.contains("failed [attempts < 3] / log"), "{labels}");
    assert!(labels.contains("ping (internal) / raise"), "{labels}");
}

#[test]
fn detail_names_effects_by_kind_and_id() {
    let root = env!("CARGO_MANIFEST_DIR");
    let path = std::path::Path::new(root).join("examples/features/files.yaml");
    let loaded = protocol_run::pipeline::load::load_file(&path).expect("loads");
    let machine = protocol_run::pipeline::compile::compile(&loaded).expect("compiles");
    let text = svg(&machine, &SvgOptions { detail: true });
    for expected in [
        "entry / write report",
        "entry / backup backup",
        "entry / restore restore",
    ] {
        assert!(text.contains(expected), "{expected} missing");
    }
}

#[test]
fn the_same_machine_gives_the_same_bytes() {
    let first = svg(&machine(EVERYTHING), &SvgOptions { detail: true });
    let second = svg(&machine(EVERYTHING), &SvgOptions { detail: true });
    assert_eq!(first, second);
}

#[test]
fn every_shipped_protocol_renders() {
    for path in crate::support::shipped_protocols() {
        let machine = crate::support::compiled_file(&path);
        for detail in [false, true] {
            check_drawing(&machine, &svg(&machine, &SvgOptions { detail }));
        }
    }
}

#[test]
fn the_cli_draws_svg_without_graphviz() {
    // No PATH: Graphviz's `dot` cannot be found, and is not needed.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "graph",
            "protocols/ittw.yaml",
            "--format",
            "svg",
            "--detail",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", "")
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(text.starts_with("<svg "), "{text}");
    assert!(text.contains("id=\"state-calling\""));
    assert!(text.contains("entry / exec health_check"));
}

#[test]
fn mermaid_and_dot_take_detail_too() {
    let machine = machine(EVERYTHING);
    let mermaid = protocol_run::tooling::graph::mermaid_with_detail(&machine);
    assert!(
        mermaid.contains("note right of working : entry / log"),
        "{mermaid}"
    );
    assert!(
        mermaid.contains("failed [attempts #lt; 3] / log"),
        "{mermaid}"
    );
    assert!(!protocol_run::tooling::graph::mermaid(&machine).contains("entry / log"));
    let dot = protocol_run::tooling::graph::dot_with_detail(&machine);
    assert!(
        dot.contains("working\\nentry / log\\nexit / assign"),
        "{dot}"
    );
    assert!(!protocol_run::tooling::graph::dot(&machine).contains("entry / log"));
}

/// The guide shows `docs/diagrams/ittw.svg`: it is what `graph --format svg` draws today.
#[test]
fn the_diagram_in_the_guide_is_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let loaded =
        protocol_run::pipeline::load::load_file(&root.join("protocols/ittw.yaml")).expect("loads");
    let machine = protocol_run::pipeline::compile::compile(&loaded).expect("compiles");
    let committed =
        std::fs::read_to_string(root.join("docs/diagrams/ittw.svg")).expect("committed diagram");
    assert!(
        committed == svg(&machine, &SvgOptions::default()),
        "docs/diagrams/ittw.svg is stale: protocol-run graph protocols/ittw.yaml --format svg > docs/diagrams/ittw.svg"
    );
}

/// The SVG the binary draws of a shipped protocol, with `--detail` or not.
fn drawn_by_the_binary(path: &str, detail: bool) -> String {
    let mut arguments = vec!["graph", path, "--format", "svg"];
    if detail {
        arguments.push("--detail");
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (code, stdout, stderr) = crate::support::run_binary(root, &arguments);
    assert_eq!(code, 0, "{stderr}");
    stdout
}

/// The text drawn in one state's box.
fn state_text(text: &str, state: &str) -> String {
    let document = roxmltree::Document::parse(text).expect("XML");
    let id = format!("state-{state}");
    let group = document
        .descendants()
        .find(|node| node.attribute("id") == Some(id.as_str()))
        .unwrap_or_else(|| panic!("no {id}"));
    group
        .descendants()
        .filter(|node| node.has_tag_name("tspan"))
        .filter_map(|node| node.text())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_map_of_child_protocols_is_named_without_detail() {
    let text = drawn_by_the_binary("examples/features/map-invoke.yaml", false);
    let reviewing = state_text(&text, "reviewing");
    assert!(
        reviewing.contains("map review (invoke map-review)"),
        "{reviewing}"
    );
    // A map of effects is an action like any other: only `--detail` shows it.
    let text = drawn_by_the_binary("examples/features/map.yaml", false);
    assert_eq!(state_text(&text, "checking"), "checking");
}

#[test]
fn detail_names_what_an_emit_emits_and_the_program_an_exec_runs() {
    for (path, state, expected) in [
        (
            "examples/features/emit.yaml",
            "asking",
            "entry / emit use_alternative_tool",
        ),
        (
            "examples/features/exec.yaml",
            "reading",
            "entry / exec head (head)",
        ),
        (
            "examples/features/map.yaml",
            "checking",
            "entry / map check (exec check (printf))",
        ),
    ] {
        let text = state_text(&drawn_by_the_binary(path, true), state);
        assert!(text.contains(expected), "{path}: {text}");
    }
}

#[test]
fn every_shipped_protocol_renders_as_mermaid_and_dot() {
    use protocol_run::tooling::graph::{dot, mermaid};
    for path in crate::support::shipped_protocols() {
        let machine = crate::support::compiled_file(&path);
        let name = path.display();
        let diagram = mermaid(&machine);
        assert!(
            diagram.starts_with("stateDiagram-v2\n"),
            "{name}:\n{diagram}"
        );
        let opened = diagram.lines().filter(|line| line.ends_with(" {")).count();
        let closed = diagram.lines().filter(|line| line.trim() == "}").count();
        assert_eq!(opened, closed, "{name}:\n{diagram}");
        let graph = dot(&machine);
        assert!(graph.starts_with("digraph "), "{name}:\n{graph}");
        assert!(balanced_braces(&graph), "{name}:\n{graph}");
        // Deterministic: a second rendering is the same text.
        assert_eq!(diagram, mermaid(&machine), "{name}");
        assert_eq!(graph, dot(&machine), "{name}");
    }
}

/// Braces outside quoted strings open and close in order.
fn balanced_braces(dot: &str) -> bool {
    let mut depth = 0i64;
    let mut quoted = false;
    let mut escaped = false;
    for character in dot.chars() {
        match character {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '{' if !quoted => depth += 1,
            '}' if !quoted => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0 && !quoted
}
