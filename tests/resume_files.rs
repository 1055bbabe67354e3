//! A resume compares every file the run's protocol was loaded from: a changed library or child protocol is named, and the run goes on with the texts it started with (refused for a run recorded before they were kept).

use crate::support::{run_binary_with_state, temporary_directory};

const LIBRARY: &str = "blocks:\n  greet: { do: [{ log: hello }] }\n";

const CHILD: &str = "id: child\nstates:\n  a: { type: final }\n";

/// Waits for an event nobody sends: the run stops unfinished (exit 75), kept for a resume.
const MAIN: &str = "id: main
imports: [common.library.yaml]
states:
  waiting:
    entry: [{ use: greet }]
    on: { go: asking }
  asking:
    invoke: [{ id: helper, protocol: child.yaml }]
    on: { done.invoke.helper: done }
  done: { type: final }
";

fn stopped_run(name: &str) -> crate::support::TemporaryDirectory {
    let directory = temporary_directory("resume_files", name);
    std::fs::write(directory.join("common.library.yaml"), LIBRARY).unwrap();
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    std::fs::write(directory.join("main.yaml"), MAIN).unwrap();
    let (code, output) = run_binary_with_state(&directory, &["run", "main.yaml"]);
    assert_eq!(code, 75, "{output}");
    directory
}

/// Adds a comment to the library, which changes its hash and nothing else; its canonical path.
fn edit_library(directory: &std::path::Path) -> std::path::PathBuf {
    let path = directory.join("common.library.yaml");
    std::fs::write(&path, format!("# edited\n{LIBRARY}")).unwrap();
    path.canonicalize().unwrap()
}

#[test]
fn an_unchanged_run_resumes() {
    let directory = stopped_run("unchanged");
    let (code, output) = run_binary_with_state(&directory, &["run", "main.yaml", "--resume"]);
    assert_eq!(code, 75, "{output}");
    assert!(!output.contains("changed since"), "{output}");
}

/// A run recorded before the texts of its libraries were kept (its row holds its protocol's
/// text, the store no other): a changed library is refused, naming it; `--upgrade` (or
/// `--force`, its old name) goes on.
#[test]
fn a_changed_library_of_a_run_kept_before_libraries_were_is_refused_naming_it() {
    let directory = stopped_run("library");
    // The shape such a run has in the store: its own copy of its protocol's text, no other.
    let database = rusqlite::Connection::open(directory.join("state/state.db")).unwrap();
    database
        .execute_batch(&format!(
            "UPDATE runs SET protocol_text = '{MAIN}', protocol_text_hash = NULL; \
             DELETE FROM protocol_texts;"
        ))
        .unwrap();
    drop(database);
    let library = edit_library(&directory);
    let (code, output) = run_binary_with_state(&directory, &["run", "main.yaml", "--resume"]);
    assert_eq!(code, 65, "{output}");
    assert!(
        output.contains(&format!("error: {} changed since run `", library.display()))
            && output.contains("resuming would mix two protocols")
            && output.contains("The texts it started with are not all kept")
            && output.contains("--upgrade"),
        "{output}"
    );
    let (code, output) =
        run_binary_with_state(&directory, &["run", "main.yaml", "--resume", "--force"]);
    assert_eq!(code, 75, "{output}");
}

/// A changed child protocol, a library gone, and the protocol's own file gone, are named by
/// `resume RUN` too; the run goes on with the texts it started with.
#[test]
fn a_changed_child_protocol_is_named_and_the_run_goes_on_pinned() {
    let directory = stopped_run("child");
    std::fs::write(directory.join("child.yaml"), format!("# edited\n{CHILD}")).unwrap();
    let child = directory.join("child.yaml").canonicalize().unwrap();
    let (code, output) = run_binary_with_state(&directory, &["runs"]);
    assert_eq!(code, 0, "{output}");
    // `runs` lists `ID STATUS ...`, newest first.
    let run_id = output
        .split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("{output}"))
        .to_string();
    let (code, output) = run_binary_with_state(&directory, &["resume", &run_id]);
    assert_eq!(code, 75, "{output}");
    assert!(
        output.contains(&format!(
            "run `{run_id}`: {} changed since the run started; it goes on with the text it \
             started with",
            child.display()
        )),
        "{output}"
    );
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    let library = directory
        .join("common.library.yaml")
        .canonicalize()
        .unwrap();
    std::fs::remove_file(&library).unwrap();
    let (code, output) = run_binary_with_state(&directory, &["resume", &run_id]);
    assert_eq!(code, 75, "{output}");
    assert!(
        output.contains(&format!(
            "{} changed since the run started; it goes on with the text it started with",
            library.display()
        )),
        "{output}"
    );
    // The protocol's own file gone too: the run goes on with its text; `--upgrade` has no file
    // to move it to.
    let main = directory.join("main.yaml").canonicalize().unwrap();
    std::fs::remove_file(&main).unwrap();
    let (code, output) = run_binary_with_state(&directory, &["resume", &run_id]);
    assert_eq!(code, 75, "{output}");
    assert!(
        output.contains(&format!(
            "run `{run_id}`: {} is gone since the run started; it goes on with the text it \
             started with",
            main.display()
        )),
        "{output}"
    );
    let (code, output) = run_binary_with_state(&directory, &["resume", &run_id, "--upgrade"]);
    assert_eq!(code, 66, "{output}");
    assert!(output.contains("no such file"), "{output}");
}

/// `serve` with `line` as its whole input, in `directory`: (exit code, stdout then stderr).
fn serve(directory: &std::path::Path, line: &str) -> (i32, String) {
    use std::io::Write;
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args(["serve", "waiter.yaml", "--state-dir", "state"])
        .current_dir(directory)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    host.stdin
        .take()
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    let output = host.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// `serve` resuming its instances refuses a changed library whose text the store does not keep
/// (an instance recorded before libraries were kept); with it kept, the instance goes on with
/// it (tests/pinned_versions.rs).
#[test]
fn serve_refuses_to_resume_over_a_changed_library_not_kept() {
    let directory = temporary_directory("resume_files", "serve");
    std::fs::write(directory.join("common.library.yaml"), LIBRARY).unwrap();
    std::fs::write(
        directory.join("waiter.yaml"),
        "id: waiter
imports: [common.library.yaml]
states:
  waiting:
    entry: [{ use: greet }]
    on: { go: done }
  done: { type: final }
",
    )
    .unwrap();
    let (code, output) = serve(&directory, "{\"instance\": \"x\", \"event\": \"poke\"}\n");
    assert_eq!(code, 0, "{output}");
    let (code, output) = serve(&directory, "");
    assert_eq!(code, 0, "{output}");
    // The library's text, as a store from before libraries were kept lacks it.
    rusqlite::Connection::open(directory.join("state/state.db"))
        .unwrap()
        .execute("DELETE FROM protocol_texts WHERE text LIKE 'blocks:%'", [])
        .unwrap();
    let library = edit_library(&directory);
    let (code, output) = serve(&directory, "");
    assert_eq!(code, 65, "{output}");
    assert!(
        output.contains("The texts they started with are not all kept"),
        "{output}"
    );
    assert!(
        output.contains(&format!(
            "error: {} changed since instance `x` started",
            library.display()
        )),
        "{output}"
    );
}
