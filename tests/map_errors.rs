//! `map` misuse is a located load error (a zero or too high concurrency, a bad tolerance, no effect or two, an index that is the item, an undeclared variable, an id another action has), and what its items return is bounded.

use crate::support::{errors, run_binary, temporary_directory};

fn load_errors(entry: &str) -> String {
    errors(&format!(
        "id: bad\ncontext: {{ word: null, other: null }}\nstates:\n  a:\n    entry:\n{entry}"
    ))
}

#[test]
fn misuse_is_a_located_load_error() {
    let rendered = load_errors(
        "      - map: [a]\n        id: check\n        item: word\n        max_concurrency: 0\n        exec: [echo]\n",
    );
    assert!(
        rendered.contains("max_concurrency: 0 would never run an item")
            && rendered.contains("test.yaml:9:26"),
        "{rendered}"
    );
    let rendered = load_errors(
        "      - map: [a]\n        id: check\n        item: word\n        tolerated_failures: 120%\n        exec: [echo]\n",
    );
    assert!(
        rendered.contains("`120%` is not a count or a percentage")
            && rendered.contains("test.yaml:9:29")
            && rendered.contains("from 0% to 100%"),
        "{rendered}"
    );
    let rendered = load_errors(
        "      - map: [a]\n        id: check\n        item: word\n        max_concurrency: 1000\n        exec: [echo]\n",
    );
    assert!(
        rendered.contains("max_concurrency 1000 is more than the limit on items running at once (64, map concurrency)")
            && rendered.contains("test.yaml:9:26"),
        "{rendered}"
    );
    let rendered = load_errors("      - map: [a]\n        id: check\n        item: word\n");
    assert!(
        rendered.contains("a map action needs one of the keys that name its kind (exec, read_file")
            && rendered.contains("test.yaml:6:9"),
        "{rendered}"
    );
    let rendered = load_errors(
        "      - map: [a]\n        id: check\n        item: word\n        exec: [echo]\n        read_file: x\n",
    );
    assert!(
        rendered.contains("test.yaml:10:9") && rendered.contains("read_file"),
        "{rendered}"
    );
    let rendered = load_errors(
        "      - map: [a]\n        id: check\n        item: word\n        index: word\n        exec: [echo]\n",
    );
    assert!(
        rendered.contains("`word` is already the item") && rendered.contains("test.yaml:9:16"),
        "{rendered}"
    );
    let rendered = load_errors(
        "      - map: [a]\n        id: check\n        item: commit\n        exec: [echo]\n",
    );
    assert!(
        rendered.contains("unknown context variable `commit`")
            && rendered.contains("test.yaml:8:15"),
        "{rendered}"
    );
}

#[test]
fn a_maps_id_belongs_to_it_alone() {
    let map = "      - map: [a]\n        id: check\n        item: word\n        exec: [echo]\n";
    let exec = "      - exec: [echo]\n        id: check\n";
    for (entry, line) in [
        (format!("{map}{map}"), "test.yaml:11:13"),
        (format!("{exec}{map}"), "test.yaml:9:13"),
        (format!("{map}{exec}"), "test.yaml:11:13"),
    ] {
        let rendered = load_errors(&entry);
        assert!(
            rendered.contains("`check` is already the id of a map") && rendered.contains(line),
            "{line}: {rendered}"
        );
        assert_eq!(rendered.matches("error:").count(), 1, "{rendered}");
    }
}

/// Every item's outcome travels in one event: together they are bounded like the context
/// (16 times `--max-value-bytes`), and the map fails naming the bound when they pass it.
#[test]
fn the_outcomes_of_a_maps_items_are_bounded() {
    let directory = temporary_directory("map", "bytes");
    std::fs::write(
        directory.join("protocol.yaml"),
        r#"
id: chatty
context: { number: null }
states:
  checking:
    entry:
      - map: [1, 2, 3, 4]
        id: check
        item: number
        max_concurrency: 1
        exec: [sh, -c, "head -c 6000 /dev/zero | tr '\\0' x"]
    on:
      done.map.check: { target: done }
      error.map.check:
        target: failed
        actions: [{ log: "${event.data.message} ${event.data.outcomes.map(o, o.status)}" }]
  done: { type: final }
  failed: { type: final, exit_code: 1 }
"#,
    )
    .unwrap();
    let state = directory.join("state");
    let arguments = ["protocol.yaml", "--state-dir", state.to_str().unwrap()];
    let (code, _, stderr) = run_binary(&directory, &arguments);
    assert_eq!(code, 0, "{stderr}");
    let mut limited = arguments.to_vec();
    limited.extend(["--max-value-bytes", "1000"]);
    let (code, _, stderr) = run_binary(&directory, &limited);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(
            "more than 16000 (16 times --max-value-bytes); raise it with --max-value-bytes"
        ) && stderr.contains(r#"["ok","ok","ok","cancelled"]"#),
        "{stderr}"
    );
}
