//! The files a run's protocol was loaded from, with their hashes and texts: a resume tells one that changed, and the run keeps their texts.

use std::collections::HashSet;
use std::sync::Arc;

use crate::pipeline::compile::machine::Machine;

pub use crate::base::read_file::ReadFile;
use crate::base::read_file::content_hash;

/// A file a run was loaded from that is not as it was: where, and its hash then and now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    pub path: String,
    pub recorded: String,
    /// The hash now, or why the file cannot be read.
    pub now: String,
}

/// The hash recorded for a run of `machine`: its protocol's own hash, then a line `HASH PATH`
/// for each other file its load read (its libraries, its child protocols and theirs), each
/// once. A protocol that reads no other file records its own hash alone, as runs always did.
pub fn recorded_hash(machine: &Machine) -> String {
    let files = recorded_files(machine);
    let mut recorded = files
        .first()
        .map(|own| own.hash.clone())
        .unwrap_or_default();
    for file in files.iter().skip(1) {
        recorded.push('\n');
        recorded.push_str(&file.hash);
        recorded.push(' ');
        recorded.push_str(&file.path);
    }
    recorded
}

/// The texts of the files `recorded_hash` lists after the protocol's own, in its order: what
/// a run of `machine` keeps besides its protocol's text, so that it is pinned to them all.
pub fn read_texts(machine: &Machine) -> Vec<Arc<str>> {
    recorded_files(machine)
        .into_iter()
        .skip(1)
        .map(|file| file.text)
        .collect()
}

/// The other files a run recorded as `recorded` read (`recorded_hash`'s lines after the
/// first), each as its hash and its path.
pub fn other_files(recorded: &str) -> impl Iterator<Item = (&str, &str)> {
    recorded
        .split('\n')
        .skip(1)
        .filter_map(|line| line.split_once(' '))
}

/// The files `machine`'s load read, its own first, each once; a path with a line break, which
/// cannot be written on one line of the record, is left out.
fn recorded_files(machine: &Machine) -> Vec<ReadFile> {
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    collect(machine, &mut files, &mut seen);
    let mut index = 0;
    files.retain(|file| {
        index += 1;
        index == 1 || !file.path.contains('\n')
    });
    files
}

/// The files `machine` and the children it invokes were read from, each once: a child
/// invoked from many places is walked once.
fn collect(machine: &Machine, files: &mut Vec<ReadFile>, seen: &mut HashSet<String>) {
    let Some(own) = machine.read_files.first() else {
        return;
    };
    if !seen.insert(own.path.clone()) {
        return;
    }
    for file in &machine.read_files {
        if !files.iter().any(|known| known.path == file.path) {
            files.push(file.clone());
        }
    }
    for invoke in machine.states.iter().flat_map(|state| &state.invokes) {
        collect(&invoke.machine, files, seen);
    }
    for (_, child) in &machine.map_children {
        collect(child, files, seen);
    }
}

/// The first file of a run recorded as `recorded` that changed: the protocol at
/// `protocol_path` (whose text is now `protocol_text`), then each other file read again from
/// disk. A record of the protocol's hash alone (the protocol read no other file, or the run
/// was recorded before other files were) compares the protocol only: a file it reads now
/// that it did not then can only come from a change to a file that is compared.
pub fn changed_file(
    protocol_path: &str,
    recorded: &str,
    protocol_text: &str,
) -> Option<ChangedFile> {
    let own = recorded.split('\n').next().unwrap_or_default();
    let now = content_hash(protocol_text);
    if now != own {
        return Some(ChangedFile {
            path: protocol_path.to_string(),
            recorded: own.to_string(),
            now,
        });
    }
    other_files(recorded).find_map(|(hash, path)| {
        let now = match crate::pipeline::load::read_text(std::path::Path::new(path)) {
            Ok(text) => content_hash(&text),
            Err(crate::pipeline::load::LoadError::NotFound { .. }) => "no such file".to_string(),
            Err(_) => "unreadable".to_string(),
        };
        (now != hash).then(|| ChangedFile {
            path: path.to_string(),
            recorded: hash.to_string(),
            now,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_of_the_protocol_alone_compares_the_protocol_alone() {
        let recorded = content_hash("id: p\n");
        assert_eq!(changed_file("p.yaml", &recorded, "id: p\n"), None);
        let changed = changed_file("p.yaml", &recorded, "id: q\n").unwrap();
        assert_eq!(
            (changed.path.as_str(), changed.recorded.as_str()),
            ("p.yaml", recorded.as_str())
        );
    }

    #[test]
    fn each_other_file_is_read_again() {
        let recorded = format!(
            "{}\n{} /nonexistent/protocol-run/lib.library.yaml",
            content_hash("id: p\n"),
            content_hash("blocks: {}\n")
        );
        let changed = changed_file("p.yaml", &recorded, "id: p\n").unwrap();
        assert_eq!(changed.path, "/nonexistent/protocol-run/lib.library.yaml");
        assert_eq!(changed.now, "no such file");
    }
}
