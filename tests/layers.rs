//! The layers of `src/` point down: every `crate::` path a module names is checked against a table of layers.
//!
//! Each unit of the table has a rank; a module may name a unit of a lower rank, or one of its
//! own unit. Two units of the same rank may not name each other, so there is no import circle
//! across stages; a circle inside one unit (the compiler and the actions it compiles, the engine
//! and its session) is the unit's own business. Test modules (`#[cfg(test)] mod tests`, files
//! called `tests.rs`) are not counted: a unit test may build what it needs from anywhere.

use std::collections::BTreeSet;
use std::path::Path;

/// The units, lowest first, with their ranks. A module belongs to the longest unit its path
/// starts with.
const LAYERS: &[(&str, u32)] = &[
    // The types every stage shares: values, time, diagnostics, the document model, events,
    // state sets, snapshots, journal steps, log records, secrets.
    ("base", 0),
    // Effects and the sandbox: requests, processes, files, tools, grants, Landlock.
    ("effects", 1),
    // The pipeline: text to document, then document to machine (with the actions it holds).
    ("pipeline::load", 2),
    ("pipeline::compile", 3),
    // The store keeps runs: it may read machines, never the runtime.
    ("store", 4),
    // The engine: the SCXML algorithm, sessions, the single-run loop (with its log output and
    // lifecycle, `SAME_UNIT`).
    ("runtime::run", 5),
    // The runs service every front end drives runs through (with the records it keeps).
    ("runtime::runs", 6),
    // Tooling over protocols.
    ("tooling::graph", 7),
    ("tooling::import", 7),
    ("tooling::lint", 7),
    ("tooling::scenario", 7),
    ("tooling::lsp", 8),
    // The front ends.
    ("frontends", 9),
];

/// Units that are one unit of the table, though they are separate modules: the actions are
/// compiled into the machine and read it while they run; the engine prints through its output
/// layer; the service's records (telemetry, statistics, the OpenTelemetry trace) are written by
/// it.
const SAME_UNIT: &[(&str, &str)] = &[
    ("pipeline::actions", "pipeline::compile"),
    ("pipeline::extensions", "pipeline::compile"),
    ("runtime::output", "runtime::run"),
    ("runtime::lifecycle", "runtime::run"),
    ("runtime::telemetry", "runtime::runs"),
    ("runtime::otlp", "runtime::runs"),
    ("runtime::statistics", "runtime::runs"),
];

/// The unit a module path belongs to, and its rank.
fn unit_of(path: &str) -> Option<(&'static str, u32)> {
    let unit = SAME_UNIT
        .iter()
        .find(|(module, _)| within(path, module))
        .map_or(path, |(_, unit)| *unit);
    LAYERS
        .iter()
        .filter(|(name, _)| within(unit, name))
        .max_by_key(|(name, _)| name.len())
        .copied()
}

fn within(path: &str, module: &str) -> bool {
    path == module
        || path
            .strip_prefix(module)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// The module path of a file under `src/` (`runtime/run/session.rs` → `runtime::run::session`).
fn module_of(relative: &Path) -> String {
    let text = relative.with_extension("").display().to_string();
    let text = text.strip_suffix("/mod").unwrap_or(&text);
    text.replace('/', "::")
}

/// The code of a file without its comments and its test module.
fn code_of(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |start| &text[..start]);
    text.lines()
        .map(|line| match line.find("//") {
            // A `//` inside a string (a URL) cuts a line short: it can only hide a path, and
            // the paths checked are in `use` lines and code, not in strings.
            Some(start) => &line[..start],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module path named after `crate::`, the items of `crate::{a::b, c::{d, e}}` groups
/// each on its own.
fn named_paths(code: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut rest = code;
    while let Some(start) = rest.find("crate::") {
        let preceded = rest[..start]
            .chars()
            .next_back()
            .is_some_and(|character| character.is_alphanumeric() || character == '_');
        rest = &rest[start + "crate::".len()..];
        if !preceded {
            let length = path_length(rest);
            expand("", &rest[..length], &mut paths);
            rest = &rest[length..];
        }
    }
    paths.retain(|path| !path.is_empty());
    paths
}

/// How long the path at the start of `text` is: names, `::` and brace groups.
fn path_length(text: &str) -> usize {
    let mut depth = 0;
    for (index, character) in text.char_indices() {
        match character {
            '{' => depth += 1,
            '}' if depth == 0 => return index,
            '}' => depth -= 1,
            _ if depth > 0 => {}
            ':' => {}
            _ if character.is_alphanumeric() || character == '_' => {}
            _ => return index,
        }
    }
    text.len()
}

/// Adds each path of `text` (`a::b`, `a::{b, c::d}`) to `paths`, below `prefix`.
fn expand(prefix: &str, text: &str, paths: &mut BTreeSet<String>) {
    for item in split_top_level(text) {
        let item = item.trim();
        let (head, group) = match (item.find('{'), item.rfind('}')) {
            (Some(open), Some(close)) if open < close => {
                (&item[..open], Some(&item[open + 1..close]))
            }
            _ => (item, None),
        };
        let head = head.trim_end_matches("::");
        let joined = match (prefix.is_empty(), head.is_empty() || head == "self") {
            (_, true) => prefix.to_string(),
            (true, false) => head.to_string(),
            (false, false) => format!("{prefix}::{head}"),
        };
        match group {
            Some(group) => expand(&joined, group, paths),
            None => {
                paths.insert(joined);
            }
        }
    }
}

/// The items of a group, split at its top-level commas.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (index, character) in text.char_indices() {
        match character {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

fn rust_files(directory: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(directory).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// Every edge that points up or across, as `file: module -> named path`.
fn violations(source: &Path) -> (Vec<String>, usize) {
    let mut files = Vec::new();
    rust_files(source, &mut files);
    files.sort();
    let (mut found, mut edges) = (Vec::new(), 0);
    for file in files {
        let relative = file.strip_prefix(source).unwrap();
        if relative.file_name().is_some_and(|name| name == "tests.rs") {
            continue;
        }
        let module = module_of(relative);
        let Some((unit, rank)) = unit_of(&module) else {
            continue;
        };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for named in named_paths(&code) {
            let Some((target, target_rank)) = unit_of(&named) else {
                continue;
            };
            if target == unit {
                continue;
            }
            edges += 1;
            if target_rank >= rank {
                found.push(format!(
                    "src/{}: {unit} (rank {rank}) names crate::{named}, in {target} (rank {target_rank})",
                    relative.display()
                ));
            }
        }
    }
    (found, edges)
}

#[test]
fn every_module_names_only_layers_below_its_own() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (found, edges) = violations(&source);
    // Not vacuous: the crate's stages name each other hundreds of times.
    assert!(edges > 200, "only {edges} edges across units were read");
    assert!(
        found.is_empty(),
        "{} imports point up or across the layers (see tests/layers.rs):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn every_module_of_src_is_in_the_table() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&source, &mut files);
    let outside: Vec<String> = files
        .iter()
        .map(|file| module_of(file.strip_prefix(&source).unwrap()))
        // The crate root, the binaries, and the stage roots that only declare their units.
        .filter(|module| {
            !matches!(
                module.as_str(),
                "lib" | "main" | "pipeline" | "runtime" | "tooling"
            ) && !module.starts_with("bin::")
        })
        .filter(|module| unit_of(module).is_none())
        .collect();
    assert!(outside.is_empty(), "modules in no layer: {outside:?}");
}

#[test]
fn the_check_finds_an_edge_that_points_up() {
    let store = "use crate::runtime::run::session::Session;\n\
                 use crate::{base::value::Value, pipeline::{compile, load}};\n\
                 // crate::frontends::cli in a comment is not an edge\n";
    let named = named_paths(&code_of(store));
    assert_eq!(
        named.into_iter().collect::<Vec<_>>(),
        [
            "base::value::Value",
            "pipeline::compile",
            "pipeline::load",
            "runtime::run::session::Session"
        ]
    );
    assert_eq!(unit_of("runtime::run::session"), Some(("runtime::run", 5)));
    assert_eq!(
        unit_of("pipeline::actions::send"),
        Some(("pipeline::compile", 3))
    );
    assert_eq!(unit_of("store::sqlite"), Some(("store", 4)));
}

/// Actions and the compiler are one unit (each action's compiled form is part of the machine),
/// but an action compiles itself through `ActionCompiler`, the narrow view of the compiler it
/// needs, never the whole `Compiler`.
#[test]
fn actions_compile_through_the_narrow_trait() {
    let actions = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pipeline/actions");
    let mut files = Vec::new();
    rust_files(&actions, &mut files);
    let mut through_the_trait = 0;
    let mut whole = Vec::new();
    for file in &files {
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        through_the_trait += code.matches("&mut dyn ActionCompiler").count();
        if named_paths(&code)
            .iter()
            .any(|named| named == "pipeline::compile::Compiler")
        {
            whole.push(file.display().to_string());
        }
    }
    // Not vacuous: every action's `compile` takes the trait.
    assert!(through_the_trait > 20, "{through_the_trait}");
    assert!(
        whole.is_empty(),
        "actions naming the whole Compiler: {whole:?}"
    );
}
