//! The operator's narrowing of a protocol's permissions (`--allow-*`, `--no-shell`), shared by `run`, `resume` and `serve`.

use clap::Args;

use super::exit_code;
use crate::capabilities::Capabilities;
use crate::model::permissions::Permissions;

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
}

impl Narrowing {
    /// The narrowing as permissions.
    pub fn permissions(&self) -> Permissions {
        let given = |list: &Vec<String>| (!list.is_empty()).then(|| list.clone());
        Permissions {
            exec: given(&self.allow_exec),
            shell: self.no_shell.then_some(false),
            write: given(&self.allow_write),
            read: given(&self.allow_read),
            env: given(&self.allow_env),
        }
    }

    /// What a run records of it (`None` when nothing is narrowed), so a resume applies it again.
    pub fn recorded(&self) -> Option<serde_json::Value> {
        Some(self.permissions())
            .filter(|permissions| *permissions != Permissions::default())
            .map(|permissions| serde_json::to_value(permissions).unwrap_or_default())
    }

    /// The limit on what the protocol may do: these flags, after the narrowing recorded when
    /// the run started (`recorded`, on resume), so a resume never forgets what the operator
    /// withheld.
    pub fn limit(&self, recorded: Option<&serde_json::Value>) -> Result<Capabilities, u8> {
        let base = std::env::current_dir().unwrap_or_default();
        let mut limit = Capabilities::unrestricted();
        if let Some(recorded) = recorded {
            let permissions: Permissions =
                serde_json::from_value(recorded.clone()).map_err(|error| {
                    eprintln!("error: the run's recorded grants cannot be read: {error}");
                    exit_code::IO
                })?;
            limit = limit.narrowed(&permissions, &base).map_err(|message| {
                eprintln!("error: the run's recorded grants: {message}");
                exit_code::IO
            })?;
        }
        limit
            .narrowed(&self.permissions(), &base)
            .map_err(|message| {
                eprintln!("error: {message}");
                exit_code::USAGE
            })
    }
}
