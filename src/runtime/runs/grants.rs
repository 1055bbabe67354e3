//! Which grants a run's inputs may choose: any when the operator starts the run (`run`, `resume`), only the inputs the operator pinned when a host's client does (`serve`, `mcp`).

use std::sync::Arc;

use crate::base::diagnostic::{Diagnostic, render_all};
use crate::base::model::Permissions;
use crate::base::value::Value;
use crate::effects::capabilities::Capabilities;
use crate::effects::grant_inputs::{GrantInputs, named_inputs};
use crate::pipeline::compile::inputs::InputError;
use crate::pipeline::compile::machine::Machine;
use crate::pipeline::load::Loaded;

/// Inputs the operator pinned on a host (`--input NAME=VALUE`): every run the host starts takes
/// them, no client may give them, and only they may choose what the host grants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PinnedInputs(Vec<(String, serde_json::Value)>);

impl PinnedInputs {
    /// Pins each input to its value (a later one of the same name replaces an earlier one).
    pub fn new(values: Vec<(String, serde_json::Value)>) -> PinnedInputs {
        let mut pinned: Vec<(String, serde_json::Value)> = Vec::new();
        for (name, value) in values {
            pinned.retain(|(given, _)| *given != name);
            pinned.push((name, value));
        }
        PinnedInputs(pinned)
    }

    /// Whether `name` is pinned.
    pub fn is_pinned(&self, name: &str) -> bool {
        self.0.iter().any(|(given, _)| given == name)
    }

    /// The pinned names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(name, _)| name.as_str())
    }

    /// The pins `machine` takes: its own inputs, and the secret inputs of the children it
    /// invokes (supplied again when a run is resumed).
    pub fn taken_by(&self, machine: &Machine) -> PinnedInputs {
        let secret_names = machine.secret_input_names();
        PinnedInputs(
            self.0
                .iter()
                .filter(|(name, _)| {
                    machine.inputs.iter().any(|input| input.name == *name)
                        || secret_names.contains(&name.as_str())
                })
                .cloned()
                .collect(),
        )
    }

    /// A client's inputs with the pinned ones added; a client's value for a pinned input is
    /// refused rather than either silently winning.
    pub fn with_client_inputs(
        &self,
        supplied: &[(String, serde_json::Value)],
    ) -> Result<Vec<(String, serde_json::Value)>, String> {
        if let Some((name, _)) = supplied.iter().find(|(name, _)| self.is_pinned(name)) {
            return Err(format!(
                "input `{name}` is pinned by the operator (--input {name}=...): every run takes \
                 the pinned value; leave `{name}` out"
            ));
        }
        Ok(supplied.iter().chain(&self.0).cloned().collect())
    }

    /// The pinned values among `names` as texts: what a resumed run's secret inputs (strings,
    /// never stored) are supplied with.
    pub fn texts_of(&self, names: &[&str]) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter(|(name, _)| names.contains(&name.as_str()))
            .map(|(name, value)| (name.clone(), input_text(value)))
            .collect()
    }
}

/// An input's value as the text a secret input takes: a string as it is, any other value as
/// JSON (a number written unquoted is read as its text).
pub fn input_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A kind of grant naming an input that a host's client would choose.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientChosenGrant {
    /// `exec`, `write`, `read` or `env`.
    pub kind: &'static str,
    pub input: String,
}

impl std::fmt::Display for ClientChosenGrant {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ClientChosenGrant { kind, input } = self;
        write!(
            formatter,
            "`permissions.{kind}` names the input `{input}`, which each client would choose; pin \
             it with --input {input}=VALUE, or narrow `{kind}` with --allow-{kind} (or \
             --sandbox strict)"
        )
    }
}

/// Why a host does not serve a protocol.
#[derive(Debug)]
pub enum NotServed {
    /// Its grants name inputs a client would choose.
    ClientChosen(Vec<ClientChosenGrant>),
    /// The protocol, or a pinned value, is invalid: located errors.
    Invalid(Vec<Diagnostic>),
    /// A pinned value does not fit its input.
    Pinned(Vec<InputError>),
}

impl NotServed {
    /// Every reason, one per line, each starting `error: FILE: not served:` (located errors as
    /// the renderer shows them).
    pub fn render(&self, file: &str) -> String {
        match self {
            NotServed::ClientChosen(grants) => grants
                .iter()
                .map(|grant| format!("error: {file}: not served: {grant}\n"))
                .collect(),
            NotServed::Invalid(diagnostics) => render_all(diagnostics),
            NotServed::Pinned(errors) => errors
                .iter()
                .map(|error| format!("error: {file}: not served: the pinned {error}\n"))
                .collect(),
        }
    }
}

/// The machine a run the operator starts (`run`, `resume`: the command line is the operator)
/// drives: its grants that name inputs resolved from the run's bound `inputs`.
pub fn for_operator(
    loaded: &Loaded,
    limit: &Capabilities,
    machine: Arc<Machine>,
    inputs: &[Value],
) -> Result<Arc<Machine>, Vec<Diagnostic>> {
    crate::pipeline::compile::grants::resolve(loaded, &Arc::default(), limit, machine, inputs)
}

/// The machine a host (`serve`, `mcp`) runs every instance of `loaded` with, from `machine`
/// (`loaded` compiled under the operator's `limit`, its `narrowing` as flags gave it): a grant
/// naming inputs is resolved
/// from `pinned` when each of them is pinned; a kind of grant that names an input not pinned is
/// bounded by the operator's narrowing alone, and refused when the operator did not narrow it,
/// since a client would then choose what the host grants.
pub fn for_host(
    loaded: &Loaded,
    limit: &Capabilities,
    narrowing: &Permissions,
    machine: Machine,
    pinned: &PinnedInputs,
) -> Result<Machine, NotServed> {
    let chosen = client_chosen(loaded.protocol.permissions.as_ref(), narrowing, pinned);
    if !chosen.is_empty() {
        return Err(NotServed::ClientChosen(chosen));
    }
    let mut values = Vec::new();
    let mut errors = Vec::new();
    for (name, given) in &pinned.0 {
        // A child's secret input is taken when a resumed run supplies it, not here.
        let Some(input) = machine.inputs.iter().find(|input| input.name == *name) else {
            continue;
        };
        match input.accept(given) {
            Ok(value) => values.push((name.as_str(), value)),
            Err(mismatch) => errors.push(InputError::Invalid {
                name: name.clone(),
                mismatch,
            }),
        }
    }
    if !errors.is_empty() {
        return Err(NotServed::Pinned(errors));
    }
    if machine.capabilities.is_resolved() {
        return Ok(machine);
    }
    let values = GrantInputs::new(values.iter().map(|(name, value)| (*name, value)));
    let refused = crate::pipeline::compile::grants::refused_values(loaded, &values, |grant| {
        named_inputs(grant)
            .iter()
            .all(|name| pinned.is_pinned(name))
    });
    if !refused.is_empty() {
        return Err(NotServed::Invalid(refused));
    }
    crate::pipeline::compile::compile_limited(
        loaded,
        &Arc::default(),
        &limit
            .clone()
            .with_grant_inputs(values)
            .bounding_unbound_grants(),
    )
    .map_err(NotServed::Invalid)
}

/// Each kind of grant naming an input that is not pinned, where the operator did not narrow
/// that kind: what a client would choose.
fn client_chosen(
    permissions: Option<&Permissions>,
    narrowing: &Permissions,
    pinned: &PinnedInputs,
) -> Vec<ClientChosenGrant> {
    let mut chosen: Vec<ClientChosenGrant> = Vec::new();
    for (kind, grants) in crate::pipeline::compile::grants::kinds(permissions) {
        let narrowed = match kind {
            "exec" => &narrowing.exec,
            "write" => &narrowing.write,
            "read" => &narrowing.read,
            _ => &narrowing.env,
        };
        if narrowed.is_some() {
            continue;
        }
        for input in grants.iter().flat_map(|grant| named_inputs(grant)) {
            let grant = ClientChosenGrant {
                kind,
                input: input.to_string(),
            };
            if !pinned.is_pinned(input) && !chosen.contains(&grant) {
                chosen.push(grant);
            }
        }
    }
    chosen
}
