//! Imports: library files read relative to the importer, once each; cycles, clashes, missing and invalid files located; what they define checked in their own file.

use crate::support::{run_binary, temporary_directory};

const LIBRARY: &str = "# yaml-language-server: $schema=../schemas/library.schema.json
retry_policies:
  patient: [{ error_equals: [error.exec], max_attempts: 3, interval: 10ms }]
blocks:
  shout:
    parameters:
      text: {}
    do: [{ log: \"${text}!\" }]
";

fn protocol_importing(import: &str, extra: &str) -> String {
    format!(
        "id: importer
imports: [{import}]
{extra}states:
  a:
    entry:
      - use: shout
        with: {{ text: \"'hello'\" }}
    always: done
  done: {{ type: final }}
"
    )
}

#[test]
fn an_import_is_read_relative_to_the_importing_file() {
    let directory = temporary_directory("reuse", "relative");
    std::fs::create_dir_all(directory.join("flows/lib")).unwrap();
    std::fs::write(directory.join("flows/lib/common.yaml"), LIBRARY).unwrap();
    std::fs::write(
        directory.join("flows/main.yaml"),
        protocol_importing("lib/common.yaml", ""),
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&directory, &["run", "flows/main.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("hello!"), "{stderr}");
}

/// Writes `files` into a fresh directory and validates `main.yaml` there, which must fail with
/// exit 65: its stderr.
fn refused(name: &str, files: &[(&str, String)]) -> String {
    let directory = temporary_directory("reuse", name);
    for (file, text) in files {
        std::fs::write(directory.join(file), text).unwrap();
    }
    let (code, _, stderr) = run_binary(&directory, &["validate", "main.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    stderr
}

#[test]
fn a_missing_import_is_located_at_its_entry() {
    let stderr = refused(
        "missing",
        &[("main.yaml", protocol_importing("nowhere.yaml", ""))],
    );
    assert!(
        stderr.contains("cannot read nowhere.yaml: no such file")
            && stderr.contains("main.yaml:2:11"),
        "{stderr}"
    );
    // The block it would have defined is not reported as unknown as well.
    assert!(stderr.ends_with("1 error\n"), "{stderr}");
}

#[test]
fn an_import_cycle_is_refused_with_the_chain() {
    let stderr = refused(
        "cycle",
        &[
            ("a.yaml", format!("imports: [b.yaml]\n{LIBRARY}")),
            ("b.yaml", "imports: [a.yaml]\n".into()),
            ("main.yaml", protocol_importing("a.yaml", "")),
        ],
    );
    assert!(
        stderr.contains("error: import cycle: a.yaml → b.yaml → a.yaml")
            && stderr.contains("b.yaml:1:11"),
        "{stderr}"
    );
}

#[test]
fn a_name_defined_by_the_protocol_and_an_import_is_a_clash() {
    let own = "blocks:\n  shout: { do: [{ log: mine }] }\n";
    let stderr = refused(
        "clash",
        &[
            ("common.yaml", LIBRARY.into()),
            ("main.yaml", protocol_importing("common.yaml", own)),
        ],
    );
    assert!(
        stderr.contains("error: the block `shout` is defined twice")
            && stderr.contains("common.yaml:5:3")
            && stderr.contains("it is also defined at main.yaml:4:3"),
        "{stderr}"
    );
}

/// A problem in an imported block is located in the library, with a note naming the use.
#[test]
fn a_problem_in_an_imported_block_is_located_in_its_file() {
    let stderr = refused(
        "imported_problem",
        &[
            (
                "common.yaml",
                LIBRARY.replace("${text}!", "${text + missing}"),
            ),
            ("main.yaml", protocol_importing("common.yaml", "")),
        ],
    );
    assert!(
        stderr.contains("unknown name `missing`")
            && stderr.contains("common.yaml:8:")
            && stderr.contains("= note: in the block `shout` used at main.yaml:6:14"),
        "{stderr}"
    );
}

#[test]
fn an_invalid_library_is_located_in_its_file() {
    let stderr = refused(
        "invalid_library",
        &[
            (
                "common.yaml",
                "blocks:\n  shout: { do: [], extra: 1 }\n".into(),
            ),
            ("main.yaml", protocol_importing("common.yaml", "")),
        ],
    );
    assert!(
        stderr.contains("unknown key `extra`")
            && stderr.contains("common.yaml:2:20")
            && stderr.contains("the imported file `common.yaml` is invalid"),
        "{stderr}"
    );
}

/// What an imported block reads and raises counts as read and raised for `check`.
#[test]
fn check_counts_what_imported_blocks_read_and_raise() {
    let directory = temporary_directory("reuse", "imported_usage");
    std::fs::write(
        directory.join("common.yaml"),
        "blocks:\n  ping: { do: [{ raise: pinged }, { log: \"${counter}\" }] }\n",
    )
    .unwrap();
    std::fs::write(
        directory.join("main.yaml"),
        "id: main
permissions: { exec: [], write: [], read: [common.yaml], env: [] }
imports: [common.yaml]
context: { counter: 0 }
states:
  a:
    entry: [{ use: ping }]
    on: { pinged: b }
  b: { type: final }
",
    )
    .unwrap();
    let (code, stdout, stderr) = run_binary(&directory, &["check", "main.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("no warnings"), "{stdout}{stderr}");
}

/// Two libraries importing a third: it is read once, and its names do not clash with themselves.
#[test]
fn a_library_imported_twice_is_read_once() {
    let directory = temporary_directory("imports", "diamond");
    std::fs::write(directory.join("shared.yaml"), LIBRARY).unwrap();
    std::fs::write(directory.join("left.yaml"), "imports: [shared.yaml]\n").unwrap();
    std::fs::write(directory.join("right.yaml"), "imports: [shared.yaml]\n").unwrap();
    std::fs::write(
        directory.join("main.yaml"),
        protocol_importing("left.yaml, right.yaml", ""),
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&directory, &["run", "main.yaml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("hello!"), "{stderr}");
}

/// A chain of 70 libraries, each importing the next: the 65th is refused, naming the limit.
#[test]
fn the_files_imports_read_are_bounded() {
    let files: Vec<(String, String)> = (0..70)
        .map(|index| {
            (
                format!("l{index}.yaml"),
                format!("imports: [l{}.yaml]\n", index + 1),
            )
        })
        .chain([("l70.yaml".to_string(), LIBRARY.to_string())])
        .collect();
    let mut all: Vec<(&str, String)> = files
        .iter()
        .map(|(name, text)| (name.as_str(), text.clone()))
        .collect();
    all.push(("main.yaml", protocol_importing("l0.yaml", "")));
    let stderr = refused("bounded", &all);
    assert!(
        stderr.contains("error: the imports read more than the limit of 64 library files")
            && stderr.contains("l63.yaml:1:11")
            && stderr.ends_with("1 error\n"),
        "{stderr}"
    );
}
