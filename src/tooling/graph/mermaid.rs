//! Mermaid `stateDiagram-v2` text for a compiled machine, written to render on GitHub.

use std::collections::HashSet;
use std::fmt::Write;

use super::{arrows, exit_label, history_label, initial_targets, one_line, state_notes};
use crate::pipeline::compile::machine::{Machine, StateId, StateKind, StateNode};

const INDENT: &str = "    ";

/// Words the Mermaid state lexer reads as keywords (case-insensitively) before it reads an id.
const KEYWORDS: [&str; 20] = [
    "accdescr",
    "acctitle",
    "as",
    "class",
    "classdef",
    "click",
    "default",
    "direction",
    "end",
    "hide",
    "href",
    "left",
    "note",
    "of",
    "right",
    "root",
    "scale",
    "state",
    "statediagram",
    "style",
];

// Where a line goes matters to Mermaid: a state belongs to the block that last mentions it
// outside the top level. A state is declared in its parent's block first, so an arrow may be
// written there only when both ends are children of that block; any other arrow is written
// at the top level, which never moves a state.

/// `detail`: states' and transitions' actions too (`--detail`).
pub(super) fn render(machine: &Machine, detail: bool) -> String {
    let ids = mermaid_ids(machine);
    let mut block_lines = place_lines(machine, &ids, detail);
    let mut out = String::from("stateDiagram-v2\n");
    let heading = match &machine.title {
        Some(title) => format!("{}: {}", machine.id, title),
        None => machine.id.clone(),
    };
    // A comment, not front matter: the output starts with `stateDiagram-v2` so it can be
    // pasted as is into a ```mermaid block.
    let mut heading = one_line(&heading);
    // `%%{` anywhere, even in a comment, is read as a configuration directive.
    while heading.contains("%%") {
        heading = heading.replace("%%", "% %");
    }
    line(&mut out, 1, &format!("%% {heading}"));
    // Open `state x {` blocks, innermost last; the root (index 0) is the diagram itself. A
    // loop with a stack rather than recursion, as deep documents are allowed.
    let mut open: Vec<StateId> = vec![StateId::ROOT];
    let mut close_block = |block: StateId, depth: usize, out: &mut String| {
        close(machine, &ids, &mut block_lines, block, depth, detail, out);
    };
    for (index, state) in machine.states.iter().enumerate().skip(1) {
        let id = StateId(index as u32);
        let parent = state.parent.unwrap_or(StateId::ROOT);
        while open.len() > 1 && open.last().is_some_and(|block| *block != parent) {
            if let Some(block) = open.pop() {
                close_block(block, open.len(), &mut out);
            }
        }
        let depth = open.len();
        let in_parallel = machine.state(parent).kind == StateKind::Parallel;
        if in_parallel && is_later_region(machine, parent, id) {
            line(&mut out, depth, "--");
        }
        declare(machine, &ids, id, depth, detail, &mut out);
        if is_composite(state) {
            line(&mut out, depth, &format!("state {} {{", ids[index]));
            open.push(id);
        } else if in_parallel && state.kind == StateKind::Final {
            // Its `[*]` is its region's: the arrow must stay before the next `--`.
            line(&mut out, depth, &final_line(&ids, id, state));
        }
    }
    while let Some(block) = open.pop() {
        close_block(block, open.len(), &mut out);
    }
    out
}

fn is_composite(state: &StateNode) -> bool {
    matches!(state.kind, StateKind::Compound | StateKind::Parallel)
}

/// A region (non-history child) of `parallel` after its first one: `--` goes before it.
fn is_later_region(machine: &Machine, parallel: StateId, child: StateId) -> bool {
    let first_region = machine
        .state(parallel)
        .children
        .iter()
        .find(|sibling| !machine.state(**sibling).is_history());
    !machine.state(child).is_history() && first_region != Some(&child)
}

/// The arrow lines of each block (the root's being the whole diagram), written after every
/// state in the block is declared: start arrows, transitions, then final states' exits.
fn place_lines(machine: &Machine, ids: &[String], detail: bool) -> Vec<Vec<String>> {
    let mut block_lines: Vec<Vec<String>> = machine.states.iter().map(|_| Vec::new()).collect();
    for (index, state) in machine.states.iter().enumerate() {
        let block = StateId(index as u32);
        for target in initial_targets(machine, state) {
            // A start arrow into a grandchild would pull it into this block: it points at the
            // child holding the target instead, labelled with the target.
            let child = child_holding(machine, block, target);
            let line = if child == target || block == StateId::ROOT {
                format!("[*] --> {}", ids[target.index()])
            } else {
                format!(
                    "[*] --> {} : {}",
                    ids[child.index()],
                    text(&format!("initial {}", machine.state(target).id))
                )
            };
            block_lines[index].push(line);
        }
    }
    for arrow in arrows(machine, detail) {
        let source_parent = machine.state(arrow.source).parent.unwrap_or(StateId::ROOT);
        let target_parent = machine.state(arrow.target).parent.unwrap_or(StateId::ROOT);
        let block = if source_parent == target_parent
            && machine.state(source_parent).kind != StateKind::Parallel
        {
            source_parent
        } else {
            StateId::ROOT
        };
        let labels: Vec<String> = arrow.labels.iter().map(|label| text(label)).collect();
        block_lines[block.index()].push(format!(
            "{} --> {} : {}",
            ids[arrow.source.index()],
            ids[arrow.target.index()],
            labels.join("<br>")
        ));
    }
    for (index, state) in machine.states.iter().enumerate() {
        let parent = state.parent.unwrap_or(StateId::ROOT);
        if state.kind == StateKind::Final && machine.state(parent).kind != StateKind::Parallel {
            let line = final_line(ids, StateId(index as u32), state);
            block_lines[parent.index()].push(line);
        }
    }
    block_lines
}

/// `state --> [*]`, with the exit code for a top-level final state.
fn final_line(ids: &[String], id: StateId, state: &StateNode) -> String {
    match exit_label(state) {
        Some(exit) => format!("{} --> [*] : {}", ids[id.index()], text(&exit)),
        None => format!("{} --> [*]", ids[id.index()]),
    }
}

/// The child of `block` that is `state` or holds it.
fn child_holding(machine: &Machine, block: StateId, state: StateId) -> StateId {
    std::iter::once(state)
        .chain(machine.state(state).ancestors.iter().copied())
        .find(|candidate| machine.state(*candidate).parent == Some(block))
        .unwrap_or(state)
}

/// Writes a state's own lines: its label when its Mermaid id differs from its id, what it
/// invokes, and for a history state the `H` / `H*` marker with the id below it. (Mermaid has
/// no history state; a description stays inside the parent's box, where a note would not.)
fn declare(
    machine: &Machine,
    ids: &[String],
    id: StateId,
    depth: usize,
    detail: bool,
    out: &mut String,
) {
    let state = machine.state(id);
    let mermaid_id = &ids[id.index()];
    if let Some(marker) = history_label(state) {
        line(out, depth, &format!("state \"{marker}\" as {mermaid_id}"));
        line(out, depth, &format!("{mermaid_id} : {}", text(&state.id)));
        return;
    }
    if **mermaid_id != *state.id {
        line(
            out,
            depth,
            &format!("state \"{}\" as {mermaid_id}", text(&state.id)),
        );
    } else if !is_composite(state) {
        line(out, depth, mermaid_id);
    }
    // A composite state's box takes no description (Mermaid refuses it): its invokes become
    // notes, written after its block (see `close`).
    if !is_composite(state) {
        for note in state_notes(state, detail) {
            line(out, depth, &format!("{mermaid_id} : {}", text(&note)));
        }
    }
}

/// Ends a block: its arrows, then `}` and the notes of what the state invokes (and with
/// `detail`, runs); the root is the diagram itself: no brace, no note.
fn close(
    machine: &Machine,
    ids: &[String],
    block_lines: &mut [Vec<String>],
    block: StateId,
    depth: usize,
    detail: bool,
    out: &mut String,
) {
    for arrow in block_lines[block.index()].drain(..) {
        line(out, depth + 1, &arrow);
    }
    if block == StateId::ROOT {
        return;
    }
    line(out, depth, "}");
    let mermaid_id = &ids[block.index()];
    for note in state_notes(machine.state(block), detail) {
        line(
            out,
            depth,
            &format!("note right of {mermaid_id} : {}", text(&note)),
        );
    }
}

fn line(out: &mut String, depth: usize, text: &str) {
    let _ = writeln!(out, "{}{text}", INDENT.repeat(depth));
}

/// Mermaid ids: ASCII letters, digits and `_` (the lexer stops at `-`), never a keyword, never
/// ending like the ids Mermaid makes for `[*]` (`<block>_start`, `<block>_end`), and unique
/// after all that (a numeric suffix), in document order. Index 0 (the root) is `root`, which
/// is what Mermaid calls the diagram itself.
/// The lines that draw `active` states highlighted: a `classDef` and one `class` line (the
/// root has no box, so it is left out); nothing when none is active.
pub(super) fn active_classes(machine: &Machine, active: &[StateId]) -> String {
    let ids = mermaid_ids(machine);
    let names: Vec<&str> = active
        .iter()
        .filter(|state| state.index() != 0)
        .map(|state| ids[state.index()].as_str())
        .collect();
    if names.is_empty() {
        return String::new();
    }
    format!(
        "    classDef active fill:#fde68a,stroke:#b45309,stroke-width:2px\n    class {} active\n",
        names.join(",")
    )
}

fn mermaid_ids(machine: &Machine) -> Vec<String> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut ids = Vec::with_capacity(machine.states.len());
    for (index, state) in machine.states.iter().enumerate() {
        if index == 0 {
            ids.push("root".to_string());
            continue;
        }
        let base: String = state
            .id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let mut candidate = base.clone();
        let mut suffix = 1;
        while !usable(&candidate) || taken.contains(&candidate) {
            candidate = format!("{base}_{suffix}");
            suffix += 1;
        }
        taken.insert(candidate.clone());
        ids.push(candidate);
    }
    ids
}

fn usable(id: &str) -> bool {
    let lower = id.to_ascii_lowercase();
    !KEYWORDS.contains(&lower.as_str()) && !lower.ends_with("_start") && !lower.ends_with("_end")
}

/// Label text after a `:`. Mermaid decodes `#name;` / `#code;` entities when it renders, so
/// characters its lexer, HTML or Markdown would misread become entities: `;` and `:` end a
/// label, `#` starts a comment or an entity, `%%` a directive, `<` `>` `"` `&` are HTML, `*`
/// `_` `~` `\` are Markdown where they could emphasise or escape (`a_b` and `x * y` stay as
/// they are), and the word `direction` then a space makes the line a direction statement.
fn text(label: &str) -> String {
    let characters: Vec<char> = one_line(label).chars().collect();
    let mut escaped = String::with_capacity(label.len());
    for (index, character) in characters.iter().enumerate() {
        let before = index
            .checked_sub(1)
            .and_then(|previous| characters.get(previous));
        let after = characters.get(index + 1);
        let spaced = |neighbour: Option<&char>| neighbour.is_none_or(|c| c.is_whitespace());
        let word = |neighbour: Option<&char>| neighbour.is_some_and(|c| c.is_alphanumeric());
        match character {
            ';' => escaped.push_str("#59;"),
            ':' => escaped.push_str("#58;"),
            '#' => escaped.push_str("#35;"),
            '%' => escaped.push_str("#37;"),
            '<' => escaped.push_str("#lt;"),
            '>' => escaped.push_str("#gt;"),
            '"' => escaped.push_str("#quot;"),
            '&' => escaped.push_str("#amp;"),
            '\\' => escaped.push_str("#92;"),
            '~' => escaped.push_str("#126;"),
            '*' if !(spaced(before) && spaced(after)) => escaped.push_str("#42;"),
            '_' if !(word(before) && word(after)) => escaped.push_str("#95;"),
            ' ' if ends_with_direction(&escaped) => escaped.push_str("#32;"),
            other => escaped.push(*other),
        }
    }
    escaped
}

fn ends_with_direction(text: &str) -> bool {
    text.len()
        .checked_sub("direction".len())
        .and_then(|start| text.get(start..))
        .is_some_and(|tail| tail.eq_ignore_ascii_case("direction"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tooling::graph::tests::{HISTORY, NESTING, PARALLEL, machine};

    fn mermaid(yaml: &str) -> String {
        render(&machine(yaml), false)
    }

    #[test]
    fn compound_states_nest_with_their_start_and_exit_arrows() {
        assert_eq!(
            mermaid(NESTING),
            r#"stateDiagram-v2
    %% nesting: Work, then stop
    state working {
        fetching
        parsing
        done
        [*] --> fetching
        fetching --> parsing : fetched
        parsing --> fetching : failed [attempts #lt; 3]
        parsing --> done : after 30s
        done --> [*]
    }
    complete
    cancelled
    [*] --> working
    working --> complete : done.state.working
    working --> cancelled : cancel
    complete --> [*] : exit 0
    cancelled --> [*] : exit 1
"#
        );
    }

    #[test]
    fn parallel_regions_are_separated_by_dashes() {
        assert_eq!(
            mermaid(PARALLEL),
            r#"stateDiagram-v2
    %% checks
    state checks {
        state disk {
            disk_pending
            disk_done
            [*] --> disk_pending
            disk_pending --> disk_done : disk_ok
            disk_done --> [*]
        }
        --
        network
    }
    healthy
    [*] --> checks
    checks --> healthy : done.state.checks
    healthy --> [*] : exit 0
"#
        );
    }

    #[test]
    fn history_states_show_h_over_their_id_with_their_default() {
        assert_eq!(
            mermaid(HISTORY),
            r#"stateDiagram-v2
    %% history
    state task {
        step_one
        step_two
        state "H*" as resume
        resume : resume
        [*] --> step_one
        step_one --> step_two : next
        resume --> step_two : default
    }
    paused
    [*] --> task
    task --> paused : interrupt
    paused --> resume : resume
    paused --> task : timeout 15m
"#
        );
    }

    #[test]
    fn ids_are_sanitised_keep_their_label_and_never_collide() {
        let yaml = r#"
id: ids
states:
  a-b: { on: { go: a_b } }
  a_b: { on: { go: state } }
  state: { on: { go: wait_end } }
  wait_end: { on: { go: café } }
  café: { type: final, exit_code: 2 }
"#;
        assert_eq!(
            mermaid(yaml),
            r#"stateDiagram-v2
    %% ids
    state "a-b" as a_b
    state "a_b" as a_b_1
    state "state" as state_1
    state "wait_end" as wait_end_1
    state "café" as caf_
    [*] --> a_b
    a_b --> a_b_1 : go
    a_b_1 --> state_1 : go
    state_1 --> wait_end_1 : go
    wait_end_1 --> caf_ : go
    caf_ --> [*] : exit 2
"#
        );
    }

    #[test]
    fn arrows_between_blocks_are_written_at_the_top_level() {
        let yaml = r#"
id: blocks
states:
  outer:
    initial: leaf
    states:
      inner: { states: { leaf: { on: { out: other, up: sibling } } } }
      sibling: {}
  other: {}
"#;
        let text = mermaid(yaml);
        // Written inside `outer`, `[*] --> leaf` would move `leaf` out of `inner`.
        assert!(
            text.contains("        [*] --> inner : initial leaf\n"),
            "{text}"
        );
        assert!(text.contains("\n    leaf --> other : out\n"), "{text}");
        assert!(text.contains("\n    leaf --> sibling : up\n"), "{text}");
    }

    #[test]
    fn several_transitions_between_two_states_share_an_arrow() {
        let yaml = r#"
id: shared
states:
  calling:
    on: { fail: calling, ok: done }
    after: [{ delay: 2s, target: calling }]
  done: { type: final }
"#;
        assert!(mermaid(yaml).contains("    calling --> calling : fail<br>after 2s\n"));
    }

    #[test]
    fn invokes_are_descriptions_of_states_and_notes_of_composite_ones() {
        let child = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/features/wrapped-command.yaml"
        );
        let yaml = format!(
            r#"
id: invoking
states:
  single:
    invoke: [{{ protocol: "{child}", id: run, inputs: {{ command: "true" }} }}]
    on: {{ done.invoke.run: group }}
  group:
    invoke: [{{ protocol: "{child}", id: wrapped-command, inputs: {{ command: "true" }} }}]
    states: {{ inside: {{}} }}
"#
        );
        let text = mermaid(&yaml);
        assert!(
            text.contains("    single : invoke wrapped-command (run)\n"),
            "{text}"
        );
        assert!(
            text.contains("    }\n    note right of group : invoke wrapped-command\n"),
            "{text}"
        );
    }

    #[test]
    fn labels_escape_what_mermaid_would_misread() {
        assert_eq!(text("attempts < 3"), "attempts #lt; 3");
        assert_eq!(
            text(r#"a ? "x;y" : '#1' && 50% > b\c"#),
            "a ? #quot;x#59;y#quot; #58; '#35;1' #amp;#amp; 50#37; #gt; b#92;c"
        );
        // Markdown emphasis, but not a name with underscores or a spaced product.
        assert_eq!(text("max_attempts * 2"), "max_attempts * 2");
        assert_eq!(
            text("a*b _x_ ~~y~~"),
            "a#42;b #95;x#95; #126;#126;y#126;#126;"
        );
        assert_eq!(text("*"), "*");
        assert_eq!(text("turn direction LR"), "turn direction#32;LR");
        assert_eq!(text("two\n  lines"), "two lines");
    }

    #[test]
    fn a_title_cannot_smuggle_a_directive() {
        let text = mermaid("id: t\ntitle: \"%%{init: {}}%%\"\nstates: { a: {} }\n");
        assert!(text.contains("\n    %% t: % %{init: {}}% %\n"), "{text}");
        assert!(!text.contains("%%{"), "{text}");
    }
}
