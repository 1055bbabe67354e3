//! Every protocol and example in the repository validates, compiles and carries the schema modeline.

use std::path::{Path, PathBuf};

fn yaml_files(directory: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(directory);
    let mut pending = vec![root];
    let mut files = Vec::new();
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "yaml")
                && !path.to_string_lossy().ends_with(".scenario.yaml")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn check_directory(directory: &str) {
    let files = yaml_files(directory);
    assert!(!files.is_empty(), "no protocols in {directory}/");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let first_line = text.lines().next().unwrap_or_default();
        assert!(
            first_line.starts_with("# yaml-language-server: $schema=")
                && first_line.ends_with("schemas/protocol.schema.json"),
            "{} does not start with the schema modeline",
            path.display()
        );
        let schema_reference = first_line.trim_start_matches("# yaml-language-server: $schema=");
        let schema_path = path.parent().unwrap().join(schema_reference);
        assert!(
            schema_path.exists(),
            "{}: modeline points at {}",
            path.display(),
            schema_path.display()
        );
        let loaded = protocol_run::load::load_file(&path).unwrap_or_else(|error| panic!("{error}"));
        if let Err(diagnostics) = protocol_run::compile::compile(&loaded) {
            panic!("{}", protocol_run::diagnostic::render_all(&diagnostics));
        }
    }
}

#[test]
fn protocols_validate() {
    check_directory("protocols");
}

#[test]
fn examples_validate() {
    check_directory("examples");
}

/// Each `<!-- example: PATH -->` block in the format guide shows that file exactly.
#[test]
fn format_guide_shows_the_examples_as_they_are() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/protocol-format.md")).unwrap();
    let mut checked = 0;
    for block in guide.split("<!-- example: ").skip(1) {
        let (path, rest) = block
            .split_once(" -->\n```yaml\n")
            .expect("example marker followed by a yaml block");
        let shown = rest.split("```\n").next().unwrap();
        let file = std::fs::read_to_string(root.join(path)).unwrap();
        assert_eq!(
            shown, file,
            "docs/protocol-format.md shows a stale copy of {path}"
        );
        checked += 1;
    }
    assert_eq!(
        checked,
        yaml_files("examples/features").len(),
        "every feature example appears in the guide"
    );
}
