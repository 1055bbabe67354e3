//! The effects a machine can start and the outcomes each can have, for the tools that mock them.

use super::Action;
use crate::pipeline::compile::machine::Machine;

/// One effectful action: which outcomes a mock of it may script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectShape {
    pub id: String,
    /// An `exec`: it has an exit code and output an incompleteness check reads.
    pub runs_a_program: bool,
    /// A built-in tool (`read_file`, `list_dir`, `grep_search`): output that may be cut.
    pub is_tool: bool,
    /// It has a `timeout`, so an attempt can time out.
    pub can_time_out: bool,
}

/// Every effectful action of `machine` (in entry and exit actions and transitions, inside `if`,
/// `foreach` and a map's body), each id once.
pub fn effect_shapes(machine: &Machine) -> Vec<EffectShape> {
    let mut shapes = Vec::new();
    let blocks = machine
        .states
        .iter()
        .flat_map(|state| [&state.entry, &state.exit])
        .chain(
            machine
                .transitions
                .iter()
                .map(|transition| &transition.actions),
        );
    for block in blocks {
        collect(block, &mut shapes);
    }
    shapes
}

fn collect(actions: &[Action], shapes: &mut Vec<EffectShape>) {
    for action in actions {
        let (policy, runs_a_program, is_tool) = match action {
            Action::Exec(exec) => (exec.policy(), true, false),
            Action::Tool(tool) => (tool.policy(), false, true),
            Action::File(file) => (file.policy(), false, false),
            Action::If(conditional) => {
                conditional
                    .blocks()
                    .for_each(|block| collect(block, shapes));
                continue;
            }
            Action::Foreach(foreach) => {
                collect(foreach.body(), shapes);
                continue;
            }
            Action::Map(map) => {
                if let Some(body) = map.effect_body() {
                    collect(std::slice::from_ref(body), shapes);
                }
                continue;
            }
            _ => continue,
        };
        if !shapes.iter().any(|shape| *shape.id == *policy.id) {
            shapes.push(EffectShape {
                id: policy.id.to_string(),
                runs_a_program,
                is_tool,
                can_time_out: policy.can_time_out(),
            });
        }
    }
}
