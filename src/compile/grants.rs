//! Grants that name inputs (`write: ["${state_dir}/**"]`): each name checked against the protocol's inputs where it is written.

use super::Compiler;
use crate::capabilities::{GrantPiece, grant_pieces};
use crate::diagnostic::did_you_mean;
use crate::model::{InputType, Protocol};

/// Reports every `${name}` of the protocol's grants that cannot be resolved when a run starts:
/// an unknown input, an input that is not a string, a placeholder among `env` names, or any
/// placeholder in a protocol another invokes (its inputs are bound after its grants are fixed).
pub(super) fn check(compiler: &mut Compiler, protocol: &Protocol, invoked: bool) {
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
                if let GrantPiece::Input(name) = piece {
                    if let Some((message, help)) = problem(protocol, kind, name, invoked) {
                        compiler.value_error(&pointer, message, Some(help));
                    }
                }
            }
        }
    }
}

/// Why `${name}` in a grant of `kind` cannot be resolved, and how to fix it.
fn problem(protocol: &Protocol, kind: &str, name: &str, invoked: bool) -> Option<(String, String)> {
    if kind == "env" {
        return Some((
            format!("`permissions.env` names variables, not inputs: `${{{name}}}` cannot be resolved"),
            "write the variable's name".into(),
        ));
    }
    if invoked {
        return Some((
            format!(
                "this protocol is invoked by another, and its grant names the input `{name}`: a \
                 child's inputs are bound after its grants are fixed"
            ),
            "grant the path in the parent (a child gets at most its parent's grants), or write \
             it here"
                .into(),
        ));
    }
    let Some(input) = protocol.inputs.get(name) else {
        let hint = did_you_mean(name, protocol.inputs.keys().map(String::as_str))
            .unwrap_or_else(|| format!("declare `{name}` under `inputs:` (type: string)"));
        return Some((format!("the grant names `{name}`, which is not an input"), hint));
    };
    (!matches!(input.kind, InputType::String | InputType::Enum)).then(|| {
        (
            format!(
                "the grant names the input `{name}`, a {}; only a string (a path or a program) \
                 can be granted",
                input.kind.name()
            ),
            format!("declare `{name}` with `type: string`"),
        )
    })
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
    let values = crate::capabilities::GrantInputs::new(names.zip(inputs));
    super::compile_limited(loaded, extensions, &limit.clone().with_grant_inputs(values))
        .map(std::sync::Arc::new)
}
