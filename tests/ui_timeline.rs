//! The inspector's timeline through the real binary, on SQLite and PostgreSQL: a `map`'s items (effects and child protocols) nested under the state that owns the map, by index with their outcome, and a child protocol's own states and effects under the state that invokes it, linked to the child's run page; and the page draws them nested in a real browser.

use serde_json::{Value, json};

use crate::support;
use crate::ui_inspector::{api, chromium, drive_page, inspector, texts};

/// A map of two `test` effects (the second fails, tolerated), an invoked child, then a map of
/// two child protocols.
const PARENT: &str = r#"
id: parent
permissions: { exec: [printf, test], write: [], read: [], env: [] }
context: { shard: null, position: null }
states:
  checking:
    entry:
      - map: "['a', 'b']"
        id: check
        item: shard
        index: position
        exec: [test, "${shard}", "=", a]
        tolerated_failures: 1
    on:
      done.map.check: delegating
  delegating:
    invoke: [{ id: kid, protocol: child.yaml, inputs: { word: hello } }]
    on:
      done.invoke.kid: fanning
  fanning:
    entry:
      - map: "['p', 'q']"
        id: kids
        item: shard
        invoke: { protocol: child.yaml, inputs: { word: "${shard}" } }
    on:
      done.map.kids: done
  done: { type: final }
"#;

const CHILD: &str = r#"
id: child
permissions: { exec: [printf], write: [], read: [], env: [] }
inputs:
  word: { type: string, default: x }
states:
  working:
    entry:
      - exec: [printf, "%s", "${word}"]
        id: work
    on:
      done.exec.work: finished
  finished: { type: final, output: { word: "${word}" } }
"#;

/// A directory with the protocols and run `nested` of `parent.yaml` recorded in the store
/// `environment` selects (the state directory's SQLite when empty).
fn nested_run(name: &str, environment: &[(&str, &str)]) -> support::TemporaryDirectory {
    let directory = support::temporary_directory("ui-timeline", name);
    std::fs::write(directory.join("parent.yaml"), PARENT).unwrap();
    std::fs::write(directory.join("child.yaml"), CHILD).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_protocol-run"))
        .args([
            "run",
            "parent.yaml",
            "--state-dir",
            "state",
            "--run-id",
            "nested",
        ])
        .envs(environment.iter().copied())
        .current_dir(&*directory)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    directory
}

/// The `field` of each of `values`, in order.
fn each<'a>(values: &'a Value, field: &str) -> Vec<&'a Value> {
    values
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {values}"))
        .iter()
        .map(|value| &value[field])
        .collect()
}

/// A child's own timeline: its state `working` then its final state, and its effect `work`.
fn assert_child_timeline(child: &Value) {
    let timeline = &child["timeline"];
    assert_eq!(
        each(&timeline["states"], "state"),
        [&json!("working"), &json!("finished")],
        "{child}"
    );
    assert_eq!(
        each(&timeline["effects"], "id"),
        [&json!("work")],
        "{child}"
    );
    assert_eq!(timeline["effects"][0]["outcome"], "completed", "{child}");
    assert_eq!(child["final_state"], "finished", "{child}");
    assert_eq!(child["exit_code"], 0, "{child}");
    // Within its parent's time, ended when it finished.
    assert!(child["from"].as_i64() <= child["to"].as_i64(), "{child}");
}

fn nests_a_maps_items_and_children_under_their_states(name: &str, environment: &[(&str, &str)]) {
    let directory = nested_run(name, environment);
    let (_inspector, address) = inspector(&directory, &[], environment);
    let timeline = api(&address, "/api/timeline?id=nested");
    assert_eq!(
        each(&timeline["states"], "state"),
        [
            &json!("checking"),
            &json!("delegating"),
            &json!("fanning"),
            &json!("done")
        ],
        "{timeline}"
    );
    // A map's items are its, not the run's effects.
    assert_eq!(timeline["effects"], json!([]), "{timeline}");
    let maps = &timeline["maps"];
    assert_eq!(
        each(maps, "id"),
        [&json!("check"), &json!("kids")],
        "{timeline}"
    );
    assert_eq!(
        each(maps, "owner"),
        [&json!("checking"), &json!("fanning")],
        "{timeline}"
    );
    assert_eq!(
        each(maps, "outcome"),
        [&json!("completed"), &json!("completed")]
    );
    // The effect items by index, each with its outcome and its attempt.
    let check = &maps[0]["entries"];
    assert_eq!(each(check, "index"), [&json!(0), &json!(1)], "{check}");
    assert_eq!(
        each(check, "id"),
        [&json!("check[0]"), &json!("check[1]")],
        "{check}"
    );
    assert_eq!(
        each(check, "outcome"),
        [&json!("completed"), &json!("failed")],
        "{check}"
    );
    for item in check.as_array().unwrap() {
        assert_eq!(item["effect"]["attempts"][0]["attempt"], 1, "{item}");
        assert!(item["child"].is_null(), "{item}");
    }
    // The child items by index, each a child protocol drawn inside with its run's id.
    let kids = &maps[1]["entries"];
    assert_eq!(
        each(kids, "id"),
        [&json!("kids[0]"), &json!("kids[1]")],
        "{kids}"
    );
    assert_eq!(
        each(kids, "outcome"),
        [&json!("completed"), &json!("completed")],
        "{kids}"
    );
    for (index, item) in kids.as_array().unwrap().iter().enumerate() {
        assert_eq!(
            item["child"]["run"],
            format!("nested/kids[{index}]"),
            "{item}"
        );
        assert_child_timeline(&item["child"]);
    }
    // The invoked child under the state that invokes it.
    let children = &timeline["children"];
    assert_eq!(each(children, "id"), [&json!("kid")], "{timeline}");
    let kid = &children[0];
    assert_eq!(kid["owner"], "delegating", "{kid}");
    assert_eq!(kid["run"], "nested/kid", "{kid}");
    assert_child_timeline(kid);
    // The child's own page draws the same, from its root's telemetry.
    let own = api(&address, "/api/timeline?id=nested%2Fkid");
    assert_eq!(
        each(&own["states"], "state"),
        each(&kid["timeline"]["states"], "state"),
        "{own}"
    );
    assert_eq!(own["effects"], kid["timeline"]["effects"], "{own}");
    // Each child's `run` is a run the inspector shows.
    for run in [
        "nested%2Fkid",
        "nested%2Fkids%5B0%5D",
        "nested%2Fkids%5B1%5D",
    ] {
        let shown = api(&address, &format!("/api/run?id={run}"));
        assert_eq!(shown["status"], "finished", "{shown}");
    }
}

#[test]
fn sqlite_timeline_nests_a_maps_items_and_children_under_their_states() {
    nests_a_maps_items_and_children_under_their_states("sqlite", &[]);
}

#[test]
fn postgres_timeline_nests_a_maps_items_and_children_under_their_states() {
    let Some(database) = support::postgres::database(
        "ui_timeline::postgres_timeline_nests_a_maps_items_and_children_under_their_states",
    ) else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    nests_a_maps_items_and_children_under_their_states("postgres", &environment);
}

#[test]
fn the_page_draws_a_maps_items_and_a_child_nested_under_their_states() {
    let Some(chromium) = chromium("the_page_draws_a_maps_items_and_a_child_nested") else {
        return;
    };
    let directory = nested_run("page", &[]);
    let (_inspector, address) = inspector(&directory, &[], &[]);
    let url = format!("http://{address}/runs/nested");
    let (seen, screenshots) = drive_page(&chromium, "timeline.mjs", &[&url, "run-timeline-nested"]);
    let rows: Vec<(u64, &str, &str)> = seen["nested"]
        .as_array()
        .unwrap_or_else(|| panic!("{seen}"))
        .iter()
        .map(|row| {
            (
                row["depth"].as_u64().unwrap(),
                row["kind"].as_str().unwrap(),
                row["label"].as_str().unwrap(),
            )
        })
        .collect();
    // Under `checking`, its map and the map's items; under `delegating`, the child and its
    // own states and effect; under `fanning`, its map and each child item's own rows.
    let child_rows = |depth| {
        [
            (depth, "state", "working"),
            (depth, "state", "finished"),
            (depth, "effect", "work #0"),
        ]
    };
    let mut expected = vec![
        (1, "map", "map check · 2 items · completed"),
        (2, "item", "[0] check[0] · completed"),
        (2, "item", "[1] check[1] · failed"),
        (1, "child", "child kid → finished (exit 0)"),
    ];
    expected.extend(child_rows(2));
    expected.push((1, "map", "map kids · 2 items · completed"));
    expected.push((2, "item", "[0] kids[0] · completed → finished (exit 0)"));
    expected.extend(child_rows(3));
    expected.push((2, "item", "[1] kids[1] · completed → finished (exit 0)"));
    expected.extend(child_rows(3));
    assert_eq!(rows, expected, "{seen}");
    assert_eq!(
        texts(&seen["links"]),
        [
            "/runs/nested%2Fkid",
            "/runs/nested%2Fkids%5B0%5D",
            "/runs/nested%2Fkids%5B1%5D"
        ],
        "{seen}"
    );
    // The states of the run and of its children have their bars.
    let states = texts(&seen["states"]);
    for state in ["checking", "delegating", "fanning", "working", "finished"] {
        assert!(states.contains(&state), "{state}: {seen}");
    }
    assert!(screenshots.join("run-timeline-nested.png").exists());
}
