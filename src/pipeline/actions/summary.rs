//! One short line per action (its key, and its id or name when it has one), for diagrams.

use super::Action;

impl Action {
    /// `exec tool_call (curl)`, `read_file check`, `call notify`, `emit use_tool`, `log`,
    /// `map check (exec check (printf))`; an `if` or `foreach` lists what it runs in
    /// parentheses, as what matters in a diagram is the effects a state starts.
    pub fn summary(&self) -> String {
        match self {
            Action::Log(_) => "log".to_string(),
            Action::Assign(_) => "assign".to_string(),
            Action::Raise(_) => "raise".to_string(),
            Action::Send(_) => "send".to_string(),
            Action::Cancel(_) => "cancel".to_string(),
            Action::Emit(emit) => format!("emit {}", emit.name_text()),
            Action::Exec(exec) => format!("exec {} ({})", exec.id(), exec.program()),
            Action::Tool(tool) => pair(tool.kind_and_id()),
            Action::File(file) => pair(file.kind_and_id()),
            Action::Call(call) => format!("call {}", call.name()),
            Action::If(conditional) => nested("if", conditional.blocks()),
            Action::Foreach(foreach) => nested("foreach", std::iter::once(foreach.body())),
            Action::Map(map) => format!("map {} ({})", map.id(), map.body_summary()),
        }
    }
}

fn pair((kind, id): (&str, &str)) -> String {
    format!("{kind} {id}")
}

fn nested<'a>(kind: &str, blocks: impl Iterator<Item = &'a [Action]>) -> String {
    let inner: Vec<String> = blocks.flatten().map(Action::summary).collect();
    if inner.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} ({})", inner.join(", "))
    }
}
