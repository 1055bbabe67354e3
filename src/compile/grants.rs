//! Grants that name inputs, checked against the protocol's inputs where they are written, and resolved from a run's bound inputs.

use super::Compiler;
use crate::diagnostic::did_you_mean;
use crate::grants::{GrantPiece, Placeholder, grant_pieces};
use crate::model::{InputType, Protocol};

/// Reports every `${name}` of the protocol's grants that cannot be resolved when a run starts:
/// an unknown input, or one that is neither a string nor a list of strings.
pub(super) fn check(compiler: &mut Compiler, protocol: &Protocol) {
    let Some(permissions) = &protocol.permissions else {
        return;
    };
    let kinds = [
        ("exec", &permissions.exec),
        ("write", &permissions.write),
        ("read", &permissions.read),
        ("env", &permissions.env),
    ];
    for (kind, grants) in kinds {
        for (index, grant) in grants.iter().flatten().enumerate() {
            let pointer = format!("/permissions/{kind}/{index}");
            let pieces = match grant_pieces(grant) {
                Ok(pieces) => pieces,
                Err(message) => {
                    compiler.value_error(&pointer, message, None);
                    continue;
                }
            };
            for piece in pieces {
                if let GrantPiece::Input(placeholder) = piece
                    && let Some((message, help)) = problem(protocol, placeholder)
                {
                    compiler.value_error(&pointer, message, Some(help));
                }
            }
        }
    }
}

/// Why a placeholder cannot be resolved when a run starts, and how to fix it.
fn problem(protocol: &Protocol, placeholder: Placeholder) -> Option<(String, String)> {
    let name = placeholder.name;
    let Some(input) = protocol.inputs.get(name) else {
        let hint = did_you_mean(name, protocol.inputs.keys().map(String::as_str))
            .unwrap_or_else(|| format!("declare `{name}` under `inputs:` (type: string)"));
        return Some((
            format!("the grant names `{name}`, which is not an input"),
            hint,
        ));
    };
    let textual = |kind: Option<InputType>| {
        matches!(kind, None | Some(InputType::String) | Some(InputType::Enum))
    };
    match (input.kind, placeholder.index) {
        (InputType::String | InputType::Enum, None) => None,
        (InputType::List, _) if textual(input.items) => None,
        (InputType::List, _) => Some((
            format!("the grant names the list input `{name}`, whose items are not strings"),
            format!("declare `{name}` with `items: string`"),
        )),
        (_, Some(index)) => Some((
            format!("the grant names item {index} of `{name}`, which is not a list"),
            format!("write `${{{name}}}`"),
        )),
        (kind, None) => Some((
            format!(
                "the grant names the input `{name}`, a {}; only strings (paths, programs, \
                 variable names) and lists of them can be granted",
                kind.name()
            ),
            format!("declare `{name}` with `type: string`"),
        )),
    }
}

/// The machine a run drives: `machine` itself when its grants name no input, else the protocol
/// compiled again with its grants resolved from the bound `inputs`, before anything runs.
pub fn resolve(
    loaded: &crate::load::Loaded,
    extensions: &std::sync::Arc<crate::extensions::Extensions>,
    limit: &crate::capabilities::Capabilities,
    machine: std::sync::Arc<super::machine::Machine>,
    inputs: &[crate::value::Value],
) -> Result<std::sync::Arc<super::machine::Machine>, Vec<crate::diagnostic::Diagnostic>> {
    if machine.capabilities.is_resolved() {
        return Ok(machine);
    }
    let names = machine.inputs.iter().map(|input| input.name.as_str());
    let values = crate::grants::GrantInputs::new(names.zip(inputs));
    super::compile_limited(loaded, extensions, &limit.clone().with_grant_inputs(values))
        .map(std::sync::Arc::new)
}
