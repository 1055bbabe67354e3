//! What `--detail` adds to a diagram: the actions of states and transitions, by kind and id.

use super::invoke_labels;
use crate::pipeline::compile::machine::{StateNode, TransitionNode};

/// What a diagram writes under a state's id besides its kind: its invokes, and with `detail`
/// its actions.
pub(super) fn state_notes(state: &StateNode, detail: bool) -> Vec<String> {
    let mut notes = invoke_labels(state);
    if detail {
        notes.extend(action_lines(state));
    }
    notes
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
