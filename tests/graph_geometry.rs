//! `graph --format svg` as geometry: edges around boxes, labels beside their edges and apart.

use protocol_run::pipeline::compile::machine::{Machine, StateId};

use crate::support::{compiled_file, run_binary, shipped_protocols, temporary_directory};

/// The SVG's own estimate of its monospaced 12px font (`text.rs`): a character's advance and
/// a line's height.
const CHARACTER_WIDTH: f64 = 7.3;
const LINE_HEIGHT: f64 = 15.0;

#[derive(Debug, Clone, Copy)]
struct Area {
    left: f64,
    top: f64,
    right: f64,
    bottom: f64,
}

impl Area {
    /// The area without a margin on every side: touching a border is not being inside.
    fn inset(&self, margin: f64) -> Area {
        Area {
            left: self.left + margin,
            top: self.top + margin,
            right: self.right - margin,
            bottom: self.bottom - margin,
        }
    }

    fn overlaps(&self, other: &Area) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }

    fn contains(&self, (x, y): (f64, f64)) -> bool {
        self.left < x && x < self.right && self.top < y && y < self.bottom
    }

    /// Whether the segment passes through the open area (Liang–Barsky clipping).
    fn crossed_by(&self, start: (f64, f64), end: (f64, f64)) -> bool {
        let (dx, dy) = (end.0 - start.0, end.1 - start.1);
        let (mut low, mut high) = (0.0f64, 1.0f64);
        for (p, q) in [
            (-dx, start.0 - self.left),
            (dx, self.right - start.0),
            (-dy, start.1 - self.top),
            (dy, self.bottom - start.1),
        ] {
            if p == 0.0 {
                if q <= 0.0 {
                    return false;
                }
            } else {
                let t = q / p;
                if p < 0.0 {
                    low = low.max(t);
                } else {
                    high = high.min(t);
                }
            }
        }
        low < high
    }

    /// The distance from the segment to the area (0 when it crosses it).
    fn distance_to(&self, start: (f64, f64), end: (f64, f64)) -> f64 {
        if self.crossed_by(start, end) || self.contains(start) {
            return 0.0;
        }
        let corners = [
            (self.left, self.top),
            (self.right, self.top),
            (self.left, self.bottom),
            (self.right, self.bottom),
        ];
        let from_ends = [start, end].map(|point| {
            let x = point.0.clamp(self.left, self.right) - point.0;
            let y = point.1.clamp(self.top, self.bottom) - point.1;
            (x * x + y * y).sqrt()
        });
        corners
            .iter()
            .map(|corner| point_to_segment(*corner, start, end))
            .chain(from_ends)
            .fold(f64::INFINITY, f64::min)
    }
}

fn point_to_segment(point: (f64, f64), start: (f64, f64), end: (f64, f64)) -> f64 {
    let (dx, dy) = (end.0 - start.0, end.1 - start.1);
    let length = dx * dx + dy * dy;
    let t = if length == 0.0 {
        0.0
    } else {
        (((point.0 - start.0) * dx + (point.1 - start.1) * dy) / length).clamp(0.0, 1.0)
    };
    let (x, y) = (start.0 + t * dx - point.0, start.1 + t * dy - point.1);
    (x * x + y * y).sqrt()
}

/// One drawn arrow: its states (`None` for an initial marker), its polyline's segments, and
/// its label's area.
struct Edge {
    name: String,
    ends: Vec<StateId>,
    segments: Vec<((f64, f64), (f64, f64))>,
    label: Option<Area>,
}

fn number(node: roxmltree::Node, name: &str) -> f64 {
    node.attribute(name)
        .unwrap_or_else(|| panic!("no {name} on {node:?}"))
        .parse()
        .expect("a number")
}

fn has_class(node: roxmltree::Node, class: &str) -> bool {
    node.attribute("class")
        .is_some_and(|classes| classes.split(' ').any(|name| name == class))
}

/// A path's segments: only `M` and `L` are drawn, so a reader can check every line.
fn segments(data: &str) -> Vec<((f64, f64), (f64, f64))> {
    let tokens: Vec<&str> = data.split_whitespace().collect();
    let mut points = Vec::new();
    for command in tokens.chunks(3) {
        assert!(
            matches!(command[0], "M" | "L") && command.len() == 3,
            "unexpected path data {data}"
        );
        let x: f64 = command[1].parse().expect("x");
        let y: f64 = command[2].parse().expect("y");
        points.push((x, y));
    }
    points.windows(2).map(|pair| (pair[0], pair[1])).collect()
}

/// The area of a `<text>`'s lines, as the SVG estimates them.
fn text_area(text: roxmltree::Node) -> Area {
    let centred = text.attribute("text-anchor") == Some("middle");
    let mut area: Option<Area> = None;
    for line in text.children().filter(|node| node.has_tag_name("tspan")) {
        let characters = line.text().unwrap_or_default().chars().count() as f64;
        let width = characters * CHARACTER_WIDTH;
        let x = number(line, "x");
        let left = if centred { x - width / 2.0 } else { x };
        let top = number(line, "y") - 0.75 * LINE_HEIGHT;
        let next = Area {
            left,
            top,
            right: left + width,
            bottom: top + LINE_HEIGHT,
        };
        area = Some(match area {
            None => next,
            Some(area) => Area {
                left: area.left.min(next.left),
                top: area.top.min(next.top),
                right: area.right.max(next.right),
                bottom: area.bottom.max(next.bottom),
            },
        });
    }
    area.expect("a label has a line")
}

/// Each state's drawn area, by index.
fn state_areas(machine: &Machine, document: &roxmltree::Document) -> Vec<Option<Area>> {
    let mut areas = vec![None; machine.states.len()];
    for group in document
        .descendants()
        .filter(|node| has_class(*node, "state"))
    {
        let id = group.attribute("data-state").expect("data-state");
        let state = machine.state_id(id).expect("a state of the machine");
        let shape = group.first_element_child().expect("a shape");
        let (left, top, width, height) = if shape.has_tag_name("circle") {
            let radius = number(shape, "r");
            let (x, y) = (number(shape, "cx"), number(shape, "cy"));
            (x - radius, y - radius, 2.0 * radius, 2.0 * radius)
        } else {
            let (x, y) = (number(shape, "x"), number(shape, "y"));
            (x, y, number(shape, "width"), number(shape, "height"))
        };
        areas[state.index()] = Some(Area {
            left,
            top,
            right: left + width,
            bottom: top + height,
        });
    }
    areas
}

fn edges(machine: &Machine, document: &roxmltree::Document) -> Vec<Edge> {
    let mut edges = Vec::new();
    for group in document
        .descendants()
        .filter(|node| node.has_tag_name("g") && has_class(*node, "transition"))
    {
        let name = group.attribute("id").unwrap_or_default().to_string();
        let ends: Vec<StateId> = if has_class(group, "initial") {
            // The container whose initial transition it is, and that transition's targets.
            let container = name
                .strip_prefix("initial-")
                .map_or(StateId::ROOT, |id| machine.state_id(id).expect("a state"));
            let transition = machine.state(container).initial.expect("an initial");
            std::iter::once(container)
                .chain(machine.transition(transition).targets.iter().copied())
                .collect()
        } else {
            ["data-source", "data-target"]
                .map(|name| {
                    let id = group.attribute(name).expect(name);
                    machine.state_id(id).expect("a state")
                })
                .to_vec()
        };
        let segments = group
            .children()
            .filter(|node| node.has_tag_name("path"))
            .flat_map(|path| segments(path.attribute("d").expect("d")))
            .collect();
        let label = group
            .children()
            .find(|node| node.has_tag_name("text") && has_class(*node, "label"))
            .map(text_area);
        edges.push(Edge {
            name,
            ends,
            segments,
            label,
        });
    }
    edges
}

/// A state is related to an edge when it is one of its ends or holds one: the edge may be
/// drawn inside it.
fn related(machine: &Machine, edge: &Edge, state: StateId) -> bool {
    edge.ends
        .iter()
        .any(|end| *end == state || machine.is_descendant(*end, state))
}

/// Holds every end of the edge (or is the one state of a self-loop): its label may lie
/// inside it.
fn holds_all(machine: &Machine, edge: &Edge, state: StateId) -> bool {
    edge.ends
        .iter()
        .all(|end| *end == state || machine.is_descendant(*end, state))
}

/// What is wrong with a drawing's geometry, one line per fault.
pub(crate) fn faults(machine: &Machine, text: &str) -> Vec<String> {
    let document = roxmltree::Document::parse(text).expect("XML");
    let areas = state_areas(machine, &document);
    let edges = edges(machine, &document);
    let mut faults = Vec::new();
    let name = |index: usize| machine.states[index].id.to_string();
    for edge in &edges {
        assert!(!edge.segments.is_empty(), "{} has no line", edge.name);
        for (index, area) in areas.iter().enumerate() {
            let Some(area) = area else { continue };
            let state = StateId(index as u32);
            if !related(machine, edge, state) {
                let inside = area.inset(1.0);
                if edge.segments.iter().any(|(a, b)| inside.crossed_by(*a, *b)) {
                    faults.push(format!("{} crosses state {}", edge.name, name(index)));
                }
            }
            if let Some(label) = edge.label
                && !holds_all(machine, edge, state)
                && label.inset(1.0).overlaps(area)
            {
                faults.push(format!(
                    "{}'s label covers state {}",
                    edge.name,
                    name(index)
                ));
            }
        }
        if let Some(label) = edge.label {
            let distance = edge
                .segments
                .iter()
                .map(|(a, b)| label.distance_to(*a, *b))
                .fold(f64::INFINITY, f64::min);
            if distance > LINE_HEIGHT {
                faults.push(format!("{}'s label is {distance:.0} from it", edge.name));
            }
        }
        for other in &edges {
            let Some(label) = other.label else { continue };
            let inside = label.inset(1.0);
            if edge.segments.iter().any(|(a, b)| inside.crossed_by(*a, *b)) {
                faults.push(format!("{} crosses the label of {}", edge.name, other.name));
            }
        }
    }
    for (position, edge) in edges.iter().enumerate() {
        for other in &edges[position + 1..] {
            if let (Some(label), Some(other_label)) = (edge.label, other.label)
                && label.inset(0.5).overlaps(&other_label)
            {
                faults.push(format!(
                    "labels of {} and {} overlap",
                    edge.name, other.name
                ));
            }
        }
    }
    faults
}

/// The SVG the real binary draws of `path`.
pub(crate) fn drawn(directory: &std::path::Path, path: &std::path::Path, detail: bool) -> String {
    let path = path.to_string_lossy();
    let mut arguments = vec!["graph", &*path, "--format", "svg"];
    if detail {
        arguments.push("--detail");
    }
    let (code, stdout, stderr) = run_binary(directory, &arguments);
    assert_eq!(code, 0, "{path}: {stderr}");
    stdout
}

#[test]
fn every_shipped_diagram_keeps_edges_off_boxes_and_labels_beside_their_edges() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let paths = shipped_protocols();
    let mut all = Vec::new();
    for path in paths {
        let machine = compiled_file(&path);
        for detail in [false, true] {
            let text = drawn(root, &path, detail);
            let relative = path.strip_prefix(root).expect("under the root").display();
            let flag = if detail { " --detail" } else { "" };
            all.extend(
                faults(&machine, &text)
                    .into_iter()
                    .map(|fault| format!("{relative}{flag}: {fault}")),
            );
        }
    }
    assert!(all.is_empty(), "{} faults:\n{}", all.len(), all.join("\n"));
}

/// The two faults the issue names: escalation's lines through `user_intervention`,
/// `publishing_report`, `recording` and `recording_checkpoint`.
#[test]
fn escalation_lines_go_around_the_boxes_they_used_to_cross() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("protocols/escalation.yaml");
    let faults = faults(&compiled_file(&path), &drawn(root, &path, false));
    let crossings: Vec<&String> = faults
        .iter()
        .filter(|fault| fault.contains(" crosses state "))
        .collect();
    assert!(crossings.is_empty(), "{crossings:#?}");
}

/// Transitions across parallel regions, into a container's own children and out to it,
/// between nested containers both ways, and a state with many guarded ways to one target.
const TANGLED: &str = r#"
id: tangled
context: { n: 0 }
states:
  outer:
    initial: left
    on: { reset: left_inner, give_up: done }
    states:
      left:
        initial: left_inner
        states:
          left_inner:
            on:
              go: { target: right_inner, guard: n > 1 }
              back: outer
              "up": start
          left_other: { on: { again: left_inner } }
      right:
        initial: right_inner
        states:
          right_inner:
            on:
              fan: [region_a_one, region_b_one]
              one: { target: left_other, guard: n == 1 }
              two: { target: left_other, guard: n == 2 }
              three: { target: left_other, guard: n == 3 }
  both:
    type: parallel
    on: { stop: region_a_two, leave: done }
    states:
      region_a:
        initial: region_a_one
        states:
          region_a_one: { on: { across: region_b_two, finish: done } }
          region_a_two: { on: { upward: both } }
      region_b:
        initial: region_b_one
        states:
          region_b_one: { on: { across_back: region_a_two } }
          region_b_two: {}
  start: { on: { begin: outer, deep: right_inner } }
  done: { type: final }
"#;

#[test]
fn tangled_protocols_are_drawn_without_crossings() {
    let everything = crate::graph_svg::EVERYTHING;
    for (name, yaml) in [("tangled", TANGLED), ("everything", everything)] {
        let directory = temporary_directory("graph-geometry", name);
        let path = directory.join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).expect("written");
        let machine = compiled_file(&path);
        for detail in [false, true] {
            let faults = faults(&machine, &drawn(&directory, &path, detail));
            assert!(faults.is_empty(), "{name}: {faults:#?}");
        }
    }
}
