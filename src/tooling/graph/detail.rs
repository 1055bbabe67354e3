//! What a diagram writes in a state besides its id, and what `--detail` adds: the actions of
//! states and transitions, by kind and id.

use super::invoke_labels;
use crate::pipeline::actions::Action;
use crate::pipeline::compile::machine::{StateNode, TransitionNode};

/// What a diagram writes under a state's id besides its kind: the child protocols it starts
/// (its invokes, and the maps on its entry that run a child per item), and with `detail` all
/// its actions (which name those maps too).
pub(super) fn state_notes(state: &StateNode, detail: bool) -> Vec<String> {
    let mut notes = invoke_labels(state);
    if detail {
        notes.extend(action_lines(state));
    } else {
        notes.extend(child_maps(&state.entry));
    }
    notes
}

/// `map review (invoke map-review)`: each map among `actions` (within `if` and `foreach` too)
/// whose items run a child protocol, a fan-out a reader should see without `--detail`.
fn child_maps(actions: &[Action]) -> Vec<String> {
    let mut found = Vec::new();
    // A stack rather than recursion: blocks may nest as deep as the document does.
    let mut pending: Vec<&[Action]> = vec![actions];
    while let Some(block) = pending.pop() {
        for action in block {
            match action {
                Action::Map(map) if map.child_protocol().is_some() => {
                    found.push(action.summary());
                }
                Action::If(conditional) => pending.extend(conditional.blocks()),
                Action::Foreach(foreach) => pending.push(foreach.body()),
                _ => {}
            }
        }
    }
    found
}

/// `entry / exec build`, `exit / log`: a state's actions, one line each, for `--detail`.
fn action_lines(state: &StateNode) -> Vec<String> {
    let entry = state
        .entry
        .iter()
        .map(|action| format!("entry / {}", action.summary()));
    let exit = state
        .exit
        .iter()
        .map(|action| format!("exit / {}", action.summary()));
    entry.chain(exit).collect()
}

/// ` / exec build, log`: what a transition runs, appended to its label for `--detail`.
pub(super) fn actions_suffix(transition: &TransitionNode) -> String {
    if transition.actions.is_empty() {
        return String::new();
    }
    let summaries: Vec<String> = transition
        .actions
        .iter()
        .map(|action| action.summary())
        .collect();
    format!(" / {}", summaries.join(", "))
}
