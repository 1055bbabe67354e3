//! `protocol-run new NAME` scaffolds a protocol and its scenario; `completions SHELL` prints
//! shell completions.

use std::path::Path;

use super::exit_code;

/// Writes `NAME.yaml` and `NAME.scenario.yaml` into `directory`, refusing to overwrite.
pub fn new_protocol(name: &str, directory: &Path) -> u8 {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        eprintln!("error: `{name}` is not a valid protocol name; use letters, digits, `-` and `_`");
        return exit_code::USAGE;
    }
    let protocol_path = directory.join(format!("{name}.yaml"));
    let scenario_path = directory.join(format!("{name}.scenario.yaml"));
    for path in [&protocol_path, &scenario_path] {
        if path.exists() {
            eprintln!(
                "error: {} already exists; choose another name or directory",
                path.display()
            );
            return exit_code::USAGE;
        }
    }
    if let Err(error) = std::fs::create_dir_all(directory) {
        eprintln!("error: cannot create {}: {error}", directory.display());
        return exit_code::IO;
    }
    let schemas = match super::schema::schemas_seen_from(directory) {
        Ok(schemas) => schemas,
        Err(code) => return code,
    };
    let protocol = PROTOCOL_TEMPLATE
        .replace("{schemas}", &schemas)
        .replace("{name}", name)
        .replace("{tag}", &name.replace('-', "_"));
    let scenario = SCENARIO_TEMPLATE
        .replace("{schemas}", &schemas)
        .replace("{name}", name);
    for (path, text) in [(&protocol_path, protocol), (&scenario_path, scenario)] {
        if let Err(error) = crate::base::files::write_atomically(path, text.as_bytes()) {
            eprintln!("error: cannot write {}: {error}", path.display());
            return exit_code::IO;
        }
        println!("wrote {}", path.display());
    }
    0
}

const PROTOCOL_TEMPLATE: &str = r#"# yaml-language-server: $schema={schemas}/protocol.schema.json
id: {name}
version: "0.1"
title: What {name} does
inputs:
  timeout: { type: duration, default: 30s, minimum: 1s, maximum: 10m }
context:
  attempts: 0
states:
  working:
    entry:
      - assign: { attempts: "attempts + 1" }
      - log: "attempt ${attempts}"
        tags: [{tag}_attempt]
    on:
      succeed: finished
      fail:
        - { target: working, guard: attempts < 3 }
        - failed
    after:
      - { delay: timeout, target: failed }
  finished: { type: final, exit_code: 0, output: { attempts: "${attempts}" } }
  failed: { type: final, exit_code: 1 }
"#;

const SCENARIO_TEMPLATE: &str = r#"# yaml-language-server: $schema={schemas}/scenario.schema.json
protocol: {name}.yaml
scenarios:
  - name: finishes on the first attempt
    steps:
      - send: succeed
      - expect: { finished: { exit_code: 0, output: { attempts: 1 } } }
  - name: gives up after three failures
    steps:
      - send: fail
      - send: fail
      - send: fail
      - expect: { finished: { exit_code: 1 } }
  - name: times out
    steps:
      - after: 30s
      - expect: { finished: { exit_code: 1 } }
"#;

/// Prints completions for `shell` to stdout.
pub fn completions(shell: clap_complete::Shell, command: &mut clap::Command) -> u8 {
    // Generated into memory first: clap_complete panics on a write error such as a closed pipe.
    let mut script = Vec::new();
    clap_complete::generate(shell, command, "protocol-run", &mut script);
    use std::io::Write;
    match std::io::stdout().lock().write_all(&script) {
        Ok(()) => 0,
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(_) => exit_code::IO,
    }
}
