//! A library file given to `validate` or `check` is checked as a library: schema, imports, blocks and policies.

use crate::support::{assert_located, run_binary, temporary_directory};

const LIBRARY: &str = "# yaml-language-server: $schema=../schemas/library.schema.json
imports: [more.library.yaml]
retry_policies:
  patient: [{ error_equals: [error.exec], max_attempts: 3, interval: 10ms }]
blocks:
  shout:
    parameters:
      text: {}
    do: [{ log: \"${text}!\" }, { use: whisper, with: { text: text } }]
";

const MORE: &str =
    "blocks:\n  whisper:\n    parameters: { text: {} }\n    do: [{ assign: { said: text } }]\n";

/// A library, by its name or by what it holds, is valid on its own; `check` agrees.
#[test]
fn a_library_validates_as_a_library() {
    let directory = temporary_directory("library_files", "valid");
    std::fs::write(directory.join("common.library.yaml"), LIBRARY).unwrap();
    std::fs::write(directory.join("more.library.yaml"), MORE).unwrap();
    std::fs::write(directory.join("unnamed.yaml"), MORE).unwrap();
    let (code, stdout, stderr) = run_binary(
        &directory,
        &["validate", "common.library.yaml", "unnamed.yaml"],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "ok: common.library.yaml (library, 1 block, 1 retry policy, 1 imported file)"
        ) && stdout.contains("ok: unnamed.yaml (library, 1 block, 0 retry policies"),
        "{stdout}"
    );
    let (code, stdout, stderr) = run_binary(&directory, &["check", "common.library.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("ok: common.library.yaml (library"),
        "{stdout}"
    );
}

/// Each kind of problem in a library is located in the file that has it, all at once.
#[test]
fn a_library_s_problems_are_located_in_its_files() {
    let directory = temporary_directory("library_files", "invalid");
    std::fs::write(
        directory.join("common.library.yaml"),
        LIBRARY
            .replace("max_attempts: 3", "max_attempts: 0")
            .replace("${text}!", "${text +}!"),
    )
    .unwrap();
    std::fs::write(
        directory.join("more.library.yaml"),
        MORE.replace("do:", "do: [{ use: nowhere }]\n    extra:"),
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&directory, &["validate", "common.library.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("unknown key `extra`")
            && stderr.contains("more.library.yaml:5:5")
            && stderr.contains("the imported file `more.library.yaml` is invalid")
            && stderr.contains("common.library.yaml:2:11"),
        "{stderr}"
    );
    std::fs::write(directory.join("more.library.yaml"), MORE).unwrap();
    let (code, _, stderr) = run_binary(&directory, &["check", "common.library.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    for (message, location) in [
        (
            "max_attempts counts the first attempt too",
            "common.library.yaml:4:57",
        ),
        (
            "invalid expression: the expression ends too early",
            "common.library.yaml:9:26",
        ),
    ] {
        assert_located(&stderr, message, location);
    }
    assert!(stderr.contains("2 errors"), "{stderr}");
    std::fs::write(directory.join("broken.library.yaml"), "blocks: [1, 2]\n").unwrap();
    let (code, _, stderr) = run_binary(&directory, &["validate", "broken.library.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(stderr.contains("broken.library.yaml:1:9"), "{stderr}");
    let (code, _, stderr) = run_binary(&directory, &["validate", "absent.library.yaml"]);
    assert_eq!(code, 66, "{stderr}");
    assert!(
        stderr.contains("cannot read absent.library.yaml: no such file"),
        "{stderr}"
    );
}

/// The repository's libraries validate, as `validate protocols/*.yaml examples/**/*.yaml` does.
#[test]
fn the_repository_s_libraries_validate() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut libraries = 0;
    for directory in ["examples/features", "protocols"] {
        for entry in std::fs::read_dir(root.join(directory)).unwrap() {
            let path = entry.unwrap().path();
            if protocol_run::pipeline::load::is_library_file(&path) {
                protocol_run::pipeline::compile::library::check_library(&path)
                    .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
                libraries += 1;
            }
        }
    }
    assert!(libraries > 0, "no library files found");
}

/// `check` warns of a block parameter nothing in the block reads, in a library and in a
/// protocol alike; a parameter read only as an effect's id counts as read.
#[test]
fn check_warns_of_a_parameter_never_read() {
    let directory = temporary_directory("library_files", "unread");
    let block = "  call:
    parameters:
      tool: {}
      unused: { default: 1 }
    do:
      - read_file: x
        id: \"${tool}\"
";
    std::fs::write(
        directory.join("common.library.yaml"),
        format!("blocks:\n{block}"),
    )
    .unwrap();
    std::fs::write(
        directory.join("main.yaml"),
        format!(
            "id: main
permissions: {{ exec: [], write: [], read: [], env: [] }}
blocks:
{block}states:
  a:
    entry: [{{ use: call, with: {{ tool: \"'reader'\" }} }}]
    on: {{ done.exec.reader: b, error.exec.reader: b }}
  b: {{ type: final }}
"
        ),
    )
    .unwrap();
    for (file, location) in [
        ("common.library.yaml", "common.library.yaml:5:7"),
        ("main.yaml", "main.yaml:7:7"),
    ] {
        let (code, stdout, stderr) = run_binary(&directory, &["check", file]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert_located(
            &stderr,
            "warning: the parameter `unused` of the block `call` is never read",
            location,
        );
        assert!(
            !stderr.contains("`tool`") && stderr.contains("1 warning"),
            "{stderr}"
        );
        let (code, _, _) = run_binary(&directory, &["check", "--deny-warnings", file]);
        assert_eq!(code, 65);
    }
}

/// Run, or invoked as a child, a library is refused as what it is, not as a protocol missing
/// its `id` and `states`.
#[test]
fn a_library_is_not_run() {
    let directory = temporary_directory("library_files", "not_run");
    std::fs::write(directory.join("more.library.yaml"), MORE).unwrap();
    std::fs::write(
        directory.join("main.yaml"),
        "id: main
states:
  a:
    invoke: [{ id: helper, protocol: more.library.yaml }]
",
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&directory, &["run", "more.library.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains(
            "error: more.library.yaml: a library file (`*.library.yaml`), not a protocol"
        ) && stderr.contains("`protocol-run validate FILE` checks it on its own")
            && !stderr.contains("missing required key"),
        "{stderr}"
    );
    let (code, _, stderr) = run_binary(&directory, &["validate", "main.yaml"]);
    assert_eq!(code, 65, "{stderr}");
    assert!(
        stderr.contains("the child protocol `more.library.yaml` is invalid")
            && stderr.contains("main.yaml:4:38")
            && stderr.contains("a library file (`*.library.yaml`), not a protocol"),
        "{stderr}"
    );
}
