//! Grants that name inputs, checked against the protocol's inputs where they are written, and resolved from a run's bound inputs.

use std::sync::Arc;

use super::Compiler;
use super::machine::Machine;
use crate::base::diagnostic::{Diagnostic, did_you_mean};
use crate::base::model::{InputType, Permissions, Protocol};
use crate::base::value::Value;
use crate::effects::capabilities::Capabilities;
use crate::effects::grant_inputs::{GrantInputs, GrantKind, GrantPiece, Placeholder, grant_pieces};
use crate::pipeline::extensions::Extensions;
use crate::pipeline::load::Loaded;
use crate::pipeline::load::source::Part;

/// Reports every `${name}` of the protocol's grants that cannot be resolved when a run starts:
/// an unknown input, or one that is neither a string nor a list of strings.
pub(super) fn check(compiler: &mut Compiler, protocol: &Protocol) {
    for (kind, grants) in kinds(protocol.permissions.as_ref()) {
        for (index, grant) in grants.iter().enumerate() {
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
/// compiled again with its grants resolved from the bound `inputs`, before anything runs. A
/// value a grant refuses is reported at that grant.
pub fn resolve(
    loaded: &Loaded,
    extensions: &Arc<Extensions>,
    limit: &Capabilities,
    machine: Arc<Machine>,
    inputs: &[Value],
) -> Result<Arc<Machine>, Vec<Diagnostic>> {
    if machine.capabilities.is_resolved() {
        return Ok(machine);
    }
    let names = machine.inputs.iter().map(|input| input.name.as_str());
    let values = GrantInputs::new(names.zip(inputs));
    let refused = refused_values(loaded, &values, |_| true);
    if !refused.is_empty() {
        return Err(refused);
    }
    super::compile_limited(loaded, extensions, &limit.clone().with_grant_inputs(values))
        .map(Arc::new)
}

/// Each grant that `values` would widen (a path climbing with `..`, a variable that is not a
/// name) or that names an input without a value, located at the grant; only the grants
/// `applies` keeps are looked at.
pub fn refused_values(
    loaded: &Loaded,
    values: &GrantInputs,
    applies: impl Fn(&str) -> bool,
) -> Vec<Diagnostic> {
    kinds(loaded.protocol.permissions.as_ref())
        .flat_map(|(kind, grants)| {
            let grant_kind = if kind == "env" {
                GrantKind::Variable
            } else {
                GrantKind::Path
            };
            let applies = &applies;
            grants.iter().enumerate().filter_map(move |(index, grant)| {
                if !applies(grant) {
                    return None;
                }
                let message = values.expand(grant, grant_kind).err()?;
                let pointer = format!("/permissions/{kind}/{index}");
                Some(
                    Diagnostic::error(message)
                        .at(loaded.source.location(&pointer, Part::Value))
                        .with_help("give the input another value, or write the path in the grant"),
                )
            })
        })
        .collect()
}

/// The kinds of grants that may name inputs, by name, with their entries.
pub fn kinds(
    permissions: Option<&Permissions>,
) -> impl Iterator<Item = (&'static str, &Vec<String>)> {
    permissions.into_iter().flat_map(|permissions| {
        [
            ("exec", &permissions.exec),
            ("write", &permissions.write),
            ("read", &permissions.read),
            ("env", &permissions.env),
        ]
        .into_iter()
        .filter_map(|(kind, grants)| grants.as_ref().map(|grants| (kind, grants)))
    })
}
