//! What a protocol may do: programs it may run, paths it may read and write, environment it passes on.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The capabilities a protocol declares. Each kind left out is not restricted by the protocol
/// (the operator can still narrow it with `run --allow-...`); each kind given allows only what
/// it lists. Child protocols get at most their parent's capabilities. An entry may name an input
/// (`"${state_dir}/**"`, `"${command[0]}"`, `"${tools}"` for each item of a list), resolved when
/// the run starts; the value counts as a literal path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Programs `exec` may run: names looked up on `PATH` (`cat`) or absolute paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<Vec<String>>,
    /// Whether `exec` may use `shell: true`, which runs any command line. Default false when
    /// `exec` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<bool>,
    /// Paths `write`, `backup` and `restore` may write: globs relative to the working directory
    /// (`*` within a name, `**` across directories), matched after `..` and symlinks are resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<String>>,
    /// Paths the tools, `backup` and `restore` may read, as globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    /// Environment variables processes inherit; others are removed from their environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
}
