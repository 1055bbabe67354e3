//! The operator's narrowing of a protocol's permissions (`--allow-*`, `--no-shell`, `--sandbox`), shared by `run`, `resume`, `serve` and `test`.

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use super::exit_code;
use crate::base::model::permissions::Permissions;
use crate::effects::capabilities::Capabilities;
use crate::runtime::runs::start::Refusal;

/// Flags that narrow what a protocol may do; its own `permissions` still apply.
#[derive(Debug, Args, Default)]
pub struct Narrowing {
    /// Narrow the programs `exec` may run (comma-separated or repeated); the protocol's own
    /// `permissions` still apply.
    #[arg(long, value_delimiter = ',', value_name = "PROGRAM")]
    allow_exec: Vec<String>,
    /// Narrow the paths writes may reach (globs relative to the working directory).
    #[arg(long, value_delimiter = ',', value_name = "GLOB")]
    allow_write: Vec<String>,
    /// Narrow the paths reads may reach (globs).
    #[arg(long, value_delimiter = ',', value_name = "GLOB")]
    allow_read: Vec<String>,
    /// Narrow the environment variables processes inherit.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    allow_env: Vec<String>,
    /// Refuse `shell: true` (and shells as programs), whatever the protocol declares.
    #[arg(long)]
    no_shell: bool,
    /// `declared`: the protocol's `permissions`, narrowed by these flags. `strict`: nothing but
    /// what these flags grant (a kind without its flag is denied, and so is the shell); the
    /// protocol's `permissions` can only narrow that further.
    #[arg(long, value_enum, default_value = "declared")]
    sandbox: Sandbox,
}

/// Where a run's grants come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sandbox {
    /// The protocol's declared `permissions`, narrowed by the operator's flags.
    #[default]
    Declared,
    /// Only what the operator's flags grant.
    Strict,
}

/// What a run records of its grants: the operator's narrowing (applied again on resume), and
/// the grants the run started with, resolved, for `status`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
struct Recorded {
    #[serde(flatten)]
    narrowing: Permissions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sandbox: Option<Sandbox>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resolved: Option<String>,
}

impl Narrowing {
    /// The narrowing as permissions. Under `--sandbox strict` every kind is given (empty when
    /// its flag is not), so nothing else is granted, and the shell is refused.
    pub fn permissions(&self) -> Permissions {
        let strict = self.sandbox == Sandbox::Strict;
        let given = |list: &Vec<String>| (strict || !list.is_empty()).then(|| list.clone());
        Permissions {
            exec: given(&self.allow_exec),
            shell: (strict || self.no_shell).then_some(false),
            write: given(&self.allow_write),
            read: given(&self.allow_read),
            env: given(&self.allow_env),
        }
    }

    /// What a run records of it (`None` when nothing is narrowed), so a resume applies it again.
    pub fn recorded(&self) -> Option<serde_json::Value> {
        self.recorded_with(None)
    }

    /// `recorded`, with the grants the run starts with (`Capabilities::summary`) when
    /// restricted, so `status` shows them resolved.
    pub fn recorded_with(&self, capabilities: Option<&Capabilities>) -> Option<serde_json::Value> {
        let recorded = Recorded {
            narrowing: self.permissions(),
            sandbox: (self.sandbox == Sandbox::Strict).then_some(Sandbox::Strict),
            resolved: capabilities
                .filter(|capabilities| !capabilities.is_unrestricted())
                .map(Capabilities::summary),
        };
        (recorded != Recorded::default())
            .then(|| serde_json::to_value(recorded).unwrap_or_default())
    }

    /// Whether `--sandbox strict` was given.
    pub fn is_strict(&self) -> bool {
        self.sandbox == Sandbox::Strict
    }

    /// The limit on what the protocol may do: these flags, after the narrowing recorded when
    /// the run started (`recorded`, on resume), so a resume never forgets what the operator
    /// withheld.
    pub fn limit(&self, recorded: Option<&serde_json::Value>) -> Result<Capabilities, Refusal> {
        let base = std::env::current_dir().unwrap_or_default();
        let mut limit = Capabilities::unrestricted();
        if let Some(recorded) = recorded {
            let recorded: Recorded = serde_json::from_value(recorded.clone()).map_err(|error| {
                Refusal::error(
                    format!("the run's recorded grants cannot be read: {error}"),
                    exit_code::IO,
                )
            })?;
            limit = limit
                .narrowed(&recorded.narrowing, &base)
                .map_err(|message| {
                    Refusal::error(
                        format!("the run's recorded grants: {message}"),
                        exit_code::IO,
                    )
                })?;
        }
        limit
            .narrowed(&self.permissions(), &base)
            .map_err(|message| Refusal::error(message, exit_code::USAGE))
    }
}

impl crate::runtime::runs::start::Operator for Narrowing {
    fn limit(&self, recorded: Option<&serde_json::Value>) -> Result<Capabilities, Refusal> {
        Narrowing::limit(self, recorded)
    }

    fn recorded(&self, granted: &Capabilities) -> Option<serde_json::Value> {
        self.recorded_with(Some(granted))
    }

    fn is_strict(&self) -> bool {
        Narrowing::is_strict(self)
    }
}
