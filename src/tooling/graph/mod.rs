//! Diagrams of a compiled protocol: Mermaid `stateDiagram-v2`, Graphviz DOT, and SVG.

mod detail;
mod dot;
mod mermaid;
mod svg;

use detail::{actions_suffix, state_notes};

pub use svg::SvgOptions;

use std::collections::HashMap;

use crate::pipeline::compile::machine::{
    Delay, EventDescriptor, Machine, StateId, StateKind, StateNode, Timer, TransitionId,
    TransitionNode,
};

/// A Mermaid `stateDiagram-v2` of the machine, in document order, ready for a fenced block.
pub fn mermaid(machine: &Machine) -> String {
    mermaid::render(machine, false)
}

/// `mermaid` with each state's entry and exit actions and each transition's actions (see
/// `action_lines`).
pub fn mermaid_with_detail(machine: &Machine) -> String {
    mermaid::render(machine, true)
}

/// `mermaid`, with the states in `active` (a run's configuration) drawn in the `active` class.
pub fn mermaid_with_active(machine: &Machine, active: &[StateId]) -> String {
    let mut diagram = mermaid::render(machine, false);
    diagram.push_str(&mermaid::active_classes(machine, active));
    diagram
}

/// A Graphviz DOT `digraph` of the machine, in document order, for `dot -Tsvg`.
pub fn dot(machine: &Machine) -> String {
    dot::render(machine, false)
}

/// `dot` with each state's entry and exit actions and each transition's actions.
pub fn dot_with_detail(machine: &Machine) -> String {
    dot::render(machine, true)
}

/// A standalone SVG of the machine, laid out here (no Graphviz): compound and parallel
/// states are nested boxes, and every state and arrow has a stable `id` and `class` (see
/// `docs/protocol-format.md`, "Diagrams") so a viewer can highlight the active ones.
pub fn svg(machine: &Machine, options: &SvgOptions) -> String {
    svg::render(machine, options)
}

/// One arrow of the diagram: the transitions from one state to another. A transition with
/// several targets gives several arrows, a targetless one a self-loop; transitions sharing
/// both ends share an arrow with one label line each, since both renderers draw parallel
/// arrows (self-loops above all) with their labels on top of each other.
struct Arrow {
    source: StateId,
    target: StateId,
    /// Plain text, one line per transition, escaped by each format.
    labels: Vec<String>,
    /// The transition each label line is for.
    transitions: Vec<TransitionId>,
    /// The default transition of a history state, drawn apart from real transitions.
    history_default: bool,
}

/// Every arrow except the initial transitions of compound states (drawn from a start marker),
/// in document order of their first transition; with `detail`, labels end with what their
/// transition runs.
fn arrows(machine: &Machine, detail: bool) -> Vec<Arrow> {
    let mut arrows: Vec<Arrow> = Vec::new();
    let mut positions: HashMap<(StateId, StateId, bool), usize> = HashMap::new();
    let timeouts = state_timeouts(machine);
    for (index, transition) in machine.transitions.iter().enumerate() {
        let id = TransitionId(index as u32);
        let source = machine.state(transition.source);
        let is_default = source.initial == Some(id);
        if is_default && source.is_compound() {
            continue;
        }
        let history_default = is_default && source.is_history();
        let label = if history_default {
            "default".to_string()
        } else if detail {
            let label = transition_label(machine, &timeouts, transition);
            format!("{label}{}", actions_suffix(transition))
        } else {
            transition_label(machine, &timeouts, transition)
        };
        let targets = if transition.targets.is_empty() {
            std::slice::from_ref(&transition.source)
        } else {
            &transition.targets[..]
        };
        for target in targets {
            let key = (transition.source, *target, history_default);
            match positions.get(&key) {
                Some(position) => {
                    arrows[*position].labels.push(label.clone());
                    arrows[*position].transitions.push(id);
                }
                None => {
                    positions.insert(key, arrows.len());
                    arrows.push(Arrow {
                        source: transition.source,
                        target: *target,
                        labels: vec![label.clone()],
                        transitions: vec![id],
                        history_default,
                    });
                }
            }
        }
    }
    arrows
}

/// The targets of a compound state's (or the root's) initial transition.
fn initial_targets(machine: &Machine, state: &StateNode) -> Vec<StateId> {
    match state.initial {
        Some(initial) if state.is_compound() => machine.transition(initial).targets.clone(),
        _ => Vec::new(),
    }
}

/// `events [guard]`, with timer events renamed to what the author wrote (`after 30s`,
/// `timeout 15m`), `always` for eventless transitions and `(internal)` for those that leave
/// the source state active.
fn transition_label(
    machine: &Machine,
    timeouts: &[(StateId, &Timer)],
    transition: &TransitionNode,
) -> String {
    let mut label = if transition.events.is_empty() {
        "always".to_string()
    } else {
        transition
            .events
            .iter()
            .map(|descriptor| event_label(machine, timeouts, transition.source, descriptor))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if let Some(guard) = &transition.guard {
        label.push_str(&format!(" [{}]", one_line(&guard.text)));
    }
    if transition.targets.is_empty() || transition.internal {
        label.push_str(" (internal)");
    }
    label
}

/// How one event descriptor reads on an arrow.
fn event_label(
    machine: &Machine,
    timeouts: &[(StateId, &Timer)],
    source: StateId,
    descriptor: &EventDescriptor,
) -> String {
    let name = match descriptor {
        EventDescriptor::Any => return "*".to_string(),
        EventDescriptor::Prefix(name) => name,
    };
    let state = machine.state(source);
    // An `after` transition's event is an internal name (`after.<state>.<i>`) nobody wrote.
    if let Some(timer) = state
        .timers
        .iter()
        .find(|timer| timer.private && *timer.event == **name)
    {
        // A deadline reads `until <timestamp>`; a span `after <delay>`.
        return match &timer.delay {
            Delay::Until(_) => delay_text(&timer.delay),
            delay => format!("after {}", delay_text(delay)),
        };
    }
    match caught_timeout(machine, timeouts, source, descriptor) {
        Some((owner, timer)) if owner == source => format!("timeout {}", delay_text(&timer.delay)),
        Some((owner, timer)) => format!(
            "timeout {} ({})",
            delay_text(&timer.delay),
            machine.state(owner).id
        ),
        None => name.to_string(),
    }
}

/// Every state `timeout` (a public timer), in document order.
fn state_timeouts(machine: &Machine) -> Vec<(StateId, &Timer)> {
    machine
        .states
        .iter()
        .enumerate()
        .flat_map(|(index, state)| {
            state
                .timers
                .iter()
                .filter(|timer| !timer.private)
                .map(move |timer| (StateId(index as u32), timer))
        })
        .collect()
}

/// The one state `timeout` this descriptor catches when written on `source`: a timeout event
/// is only sent while its state (inside `source`, or `source` itself) is active. `None` when
/// it catches none, or several (then the event name says more than one delay would).
fn caught_timeout<'m>(
    machine: &Machine,
    timeouts: &[(StateId, &'m Timer)],
    source: StateId,
    descriptor: &EventDescriptor,
) -> Option<(StateId, &'m Timer)> {
    // `source` and its descendants are one range in document order.
    let end = machine.state(source).descendants_end;
    let start = timeouts.partition_point(|(state, _)| *state < source);
    let mut caught = timeouts[start..]
        .iter()
        .take_while(|(state, _)| *state < end)
        .filter(|(_, timer)| descriptor.matches(&timer.event));
    let first = *caught.next()?;
    caught.next().is_none().then_some(first)
}

fn delay_text(delay: &Delay) -> String {
    match delay {
        Delay::Fixed(duration) => duration.to_string(),
        Delay::Computed(expression) => one_line(&expression.text),
        Delay::Until(expression) => format!("until {}", one_line(&expression.text)),
    }
}

/// `invoke <child protocol>`, naming the invoke id too when it differs (events use it:
/// `done.invoke.<id>`).
fn invoke_labels(state: &StateNode) -> Vec<String> {
    state
        .invokes
        .iter()
        .map(|invoke| {
            if *invoke.id == *invoke.machine.id {
                format!("invoke {}", invoke.machine.id)
            } else {
                format!("invoke {} ({})", invoke.machine.id, invoke.id)
            }
        })
        .collect()
}

/// A final state's exit code matters only at the top level, where reaching it ends the run.
fn exit_label(state: &StateNode) -> Option<String> {
    (state.kind == StateKind::Final && state.parent == Some(StateId::ROOT))
        .then(|| format!("exit {}", state.exit_code))
}

fn history_label(state: &StateNode) -> Option<&'static str> {
    match state.kind {
        StateKind::History { deep: false } => Some("H"),
        StateKind::History { deep: true } => Some("H*"),
        _ => None,
    }
}

/// Expressions may span lines in YAML; both formats want one line per label.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `descendant` is `ancestor` or inside it.
fn within(machine: &Machine, descendant: StateId, ancestor: StateId) -> bool {
    descendant == ancestor || machine.is_descendant(descendant, ancestor)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compound state with a guarded and a timed transition, and final states.
    pub(super) const NESTING: &str = r#"
id: nesting
title: Work, then stop
context: { attempts: 0 }
states:
  working:
    initial: fetching
    states:
      fetching: { on: { fetched: parsing } }
      parsing:
        on: { failed: { target: fetching, guard: attempts < 3 } }
        after: [{ delay: 30s, target: done }]
      done: { type: final }
    on:
      done.state.working: complete
      cancel: cancelled
  complete: { type: final, exit_code: 0 }
  cancelled: { type: final, exit_code: 1 }
"#;

    /// A parallel state with a compound region and an atomic one.
    pub(super) const PARALLEL: &str = r#"
id: checks
states:
  checks:
    type: parallel
    states:
      disk:
        states:
          disk_pending: { on: { disk_ok: disk_done } }
          disk_done: { type: final }
      network: {}
    on:
      done.state.checks: healthy
  healthy: { type: final }
"#;

    /// A deep history state with a default, and a state timeout back into the compound.
    pub(super) const HISTORY: &str = r#"
id: history
states:
  task:
    states:
      step_one: { on: { next: step_two } }
      step_two: {}
      resume: { type: history, history: deep, target: step_two }
    on: { interrupt: paused }
  paused:
    timeout: 15m
    on: { resume: resume, timeout: task }
"#;

    pub(super) fn machine(yaml: &str) -> Machine {
        let loaded = crate::pipeline::load::load_text("test.yaml", yaml.to_string())
            .unwrap_or_else(|diagnostics| panic!("{diagnostics:?}"));
        crate::pipeline::compile::compile(&loaded)
            .unwrap_or_else(|diagnostics| panic!("{diagnostics:?}"))
    }

    /// (source, target, label) for each transition line, arrow by arrow.
    fn labels(yaml: &str) -> Vec<(String, String, String)> {
        let machine = machine(yaml);
        arrows(&machine, false)
            .into_iter()
            .flat_map(|arrow| {
                let source = machine.state(arrow.source).id.to_string();
                let target = machine.state(arrow.target).id.to_string();
                arrow
                    .labels
                    .into_iter()
                    .map(move |label| (source.clone(), target.clone(), label))
            })
            .collect()
    }

    fn triple(source: &str, target: &str, label: &str) -> (String, String, String) {
        (source.into(), target.into(), label.into())
    }

    #[test]
    fn labels_name_events_guards_timers_and_timeouts() {
        let yaml = r#"
id: labels
context: { attempts: 0 }
inputs:
  wait: { type: duration, default: 2s }
states:
  a:
    timeout: 15m
    on:
      "go start": b
      fail: { target: b, guard: "attempts <\n 3" }
      timeout: c
      "*": { actions: [{ log: any }] }
      ping: { type: internal, actions: [{ log: pong }] }
    after:
      - { delay: 30s, target: c }
      - { delay: wait, target: c, guard: attempts > 1 }
      - { until: "timestamp('2026-01-01T09:00:00Z')", target: c }
    always: { target: c, guard: attempts > 5 }
  b:
    initial: b1
    timeout: wait
    states:
      b1: { timeout: 1m }
    on:
      timeout.b1: c
      timeout: c
  c: { type: final, exit_code: 4 }
"#;
        assert_eq!(
            labels(yaml),
            vec![
                triple("a", "b", "go start"),
                triple("a", "b", "fail [attempts < 3]"),
                triple("a", "c", "timeout 15m"),
                triple("a", "c", "after 30s"),
                triple("a", "c", "after wait [attempts > 1]"),
                triple("a", "c", "until timestamp('2026-01-01T09:00:00Z')"),
                triple("a", "c", "always [attempts > 5]"),
                triple("a", "a", "* (internal)"),
                triple("a", "a", "ping (internal)"),
                triple("b", "c", "timeout 1m (b1)"),
                // Two timeouts can reach `b`'s handler: the event name says more than a delay.
                triple("b", "c", "timeout"),
            ]
        );
    }

    #[test]
    fn several_targets_give_one_arrow_each() {
        let yaml = r#"
id: forks
states:
  start: { on: { go: [left_done, right_done] } }
  both:
    type: parallel
    states:
      left: { states: { left_idle: {}, left_done: {} } }
      right: { states: { right_idle: {}, right_done: {} } }
"#;
        let go: Vec<_> = labels(yaml).into_iter().map(|(_, t, _)| t).collect();
        // The YAML list is one transition with two targets.
        assert_eq!(go, ["left_done", "right_done"]);
    }

    #[test]
    fn invokes_name_the_child_protocol() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/features/invoke.yaml");
        let loaded = crate::pipeline::load::load_file(std::path::Path::new(path)).expect("loads");
        let machine = crate::pipeline::compile::compile(&loaded).expect("compiles");
        let counting = machine.state(machine.state_id("counting").expect("state"));
        assert_eq!(invoke_labels(counting), ["invoke wrapped-command (count)"]);
    }
}
