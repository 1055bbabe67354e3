//! The protocols an MCP server serves: each file or directory given, loaded and compiled under the operator's grants; an invalid one, or one whose grants a client would choose, is reported and left out.

use std::path::{Path, PathBuf};

use crate::base::model::Permissions;
use crate::effects::capabilities::Capabilities;
use crate::runtime::runs::grants::PinnedInputs;
use crate::runtime::runs::served::HostOperator;
pub use crate::runtime::runs::served::Served;

/// The most protocols one server serves: each is a tool every client lists.
pub const MAX_SERVED_PROTOCOLS: usize = 1_000;

/// The names of the management tools, which no protocol may take.
pub const MANAGEMENT_TOOLS: &[&str] = &[
    "send_event",
    "get_run",
    "list_runs",
    "cancel_run",
    "resume_run",
    "redrive_run",
    "get_logs",
    "get_diagram",
];

/// What the operator serves protocols under: its narrowing, as capabilities and as the flags
/// gave it, and its pinned inputs.
pub struct Operator<'a> {
    pub limit: &'a Capabilities,
    pub narrowing: &'a Permissions,
    pub pinned: &'a PinnedInputs,
}

/// Loads every protocol under `paths` (files, or directories searched for `*.yaml` other than
/// scenario and library files). Returns the valid ones and whether any was refused; each
/// refusal is on stderr with its location, or with the flag that would serve it. A pinned input
/// no served protocol takes is said on stderr too.
pub fn load_all(paths: &[PathBuf], operator: &Operator) -> (Vec<Served>, bool) {
    let mut files = Vec::new();
    let mut refused = false;
    for path in paths {
        if path.is_dir() {
            match crate::pipeline::load::protocol_files(path) {
                Ok(found) => files.extend(found),
                Err(message) => {
                    eprintln!("error: {}: {message}", path.display());
                    refused = true;
                }
            }
        } else {
            files.push(path.clone());
        }
    }
    let mut served: Vec<Served> = Vec::new();
    for file in files {
        if served.len() == MAX_SERVED_PROTOCOLS {
            eprintln!(
                "error: {}: not served: a server serves at most {MAX_SERVED_PROTOCOLS} protocols \
                 (MAX_SERVED_PROTOCOLS); start another server for the rest",
                file.display()
            );
            refused = true;
            continue;
        }
        match load_one(&file, operator) {
            Ok(protocol) => {
                let id = &protocol.machine.id;
                if MANAGEMENT_TOOLS.contains(&id.as_str()) {
                    eprintln!(
                        "error: {}: not served: its id `{id}` is the name of a management tool; \
                         rename the protocol",
                        file.display()
                    );
                    refused = true;
                } else if let Some(other) = served.iter().find(|other| &other.machine.id == id) {
                    eprintln!(
                        "error: {}: not served: {} has the same id `{id}`, and a tool has one \
                         name; give one of them another id",
                        file.display(),
                        other.path
                    );
                    refused = true;
                } else {
                    served.push(protocol);
                }
            }
            Err(message) => {
                eprint!("{message}");
                refused = true;
            }
        }
    }
    for name in operator.pinned.names() {
        if !served.iter().any(|served| served.pinned.is_pinned(name)) {
            eprintln!(
                "error: --input {name}: no protocol served here takes an input `{name}`; check \
                 its name"
            );
            refused = true;
        }
    }
    (served, refused)
}

/// One protocol, or its rendered errors.
fn load_one(file: &Path, operator: &Operator) -> Result<Served, String> {
    let host = HostOperator {
        limit: operator.limit,
        narrowing: operator.narrowing,
    };
    crate::runtime::runs::served::serve(file, &host, &mut |machine| {
        Ok(operator.pinned.taken_by(machine))
    })
    .map_err(|refusal| refusal.text)
}
