//! What a replayed run starts from besides its journal: its recorded inputs bound in the new version (its secret ones supplied again), and the new version's machine under the grants the run was recorded with.

use std::sync::Arc;

use super::Version;
use crate::base::value::Value;
use crate::pipeline::compile::inputs::InputError;
use crate::pipeline::compile::machine::Machine;
use crate::runtime::runs::start::Operator;
use crate::store::RunRecord;

/// Why a run cannot start in the new version.
pub enum Unbound {
    /// Not as the command was given: a secret input, never stored, was not supplied (or the
    /// run's recorded grants do not read): the command line's, or the store's, to fix.
    NotReplayable(String),
    /// The new version refuses what the run started with: its inputs (one it requires that
    /// the run had not, one it no longer declares, another type), kind `inputs`, or its grants
    /// (`grants`). That is a divergence at the start.
    Refused { kind: &'static str, message: String },
}

/// The run's recorded inputs bound in the new version, its secret ones from `secrets`.
pub fn bind_inputs(
    machine: &Machine,
    record: &RunRecord,
    secrets: &[(String, String)],
) -> Result<Vec<Value>, Unbound> {
    // Only the secrets this version declares: one given for another run's protocol is no
    // concern of this one.
    let declared = machine.secret_input_names();
    let secrets: Vec<(String, String)> = secrets
        .iter()
        .filter(|(name, _)| declared.contains(&name.as_str()))
        .cloned()
        .collect();
    machine
        .bind_recorded_inputs(&record.inputs, &secrets)
        .map_err(|errors| {
            let missing: Vec<&str> = errors
                .iter()
                .filter_map(|error| match error {
                    InputError::SecretNotStored { name } => Some(name.as_str()),
                    _ => None,
                })
                .collect();
            if let Some(first) = missing.first() {
                return Unbound::NotReplayable(format!(
                    "its secret input{} {} {} not stored with it: pass --input {first}=VALUE \
                     (or --input {first} to read the variable {first})",
                    if missing.len() == 1 { "" } else { "s" },
                    missing
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if missing.len() == 1 { "is" } else { "are" },
                ));
            }
            let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
            Unbound::Refused {
                kind: "inputs",
                message: format!(
                    "the new version cannot take the run's inputs: {}",
                    messages.join("; ")
                ),
            }
        })
}

/// The new version's machine for one run: compiled under the run's recorded narrowing of its
/// grants (what `operator` makes of it, as a resume would), its grants that name inputs
/// resolved from the run's `inputs`. What is granted matters to a replay though no effect
/// runs: an expression that reads a file reads it under the grants.
pub fn run_machine(
    version: &Version,
    record: &RunRecord,
    inputs: &[Value],
    operator: &dyn Operator,
) -> Result<Arc<Machine>, Unbound> {
    let limit = operator.limit(record.grants.as_ref()).map_err(|refusal| {
        let text = refusal.text.trim();
        Unbound::NotReplayable(text.strip_prefix("error: ").unwrap_or(text).to_string())
    })?;
    let refused = |diagnostics: Vec<crate::base::diagnostic::Diagnostic>| {
        let messages: Vec<String> = diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.is_error())
            .map(|diagnostic| diagnostic.message.clone())
            .collect();
        Unbound::Refused {
            kind: "grants",
            message: format!(
                "the new version cannot run under the run's grants: {}",
                messages.join("; ")
            ),
        }
    };
    let machine = if limit.is_unrestricted() {
        version.machine.clone()
    } else {
        let compiled =
            crate::pipeline::compile::compile_limited(&version.loaded, &Arc::default(), &limit)
                .map_err(refused)?;
        Arc::new(compiled)
    };
    crate::runtime::runs::grants::for_operator(&version.loaded, &limit, machine, inputs)
        .map_err(refused)
}
