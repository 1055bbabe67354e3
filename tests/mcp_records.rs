//! What `protocol-run mcp` shows of recorded runs: a run of a protocol it does not serve is refused by `get_run`, `tasks/get` and its resource as its telemetry is; `list_runs` answers a page at a time; a read refused by the in-flight limit is not "resource not found".

use serde_json::{Value, json};

use protocol_run::store::{NewRun, RunOrigin, SqliteStore, Write};

use crate::mcp_limits::{probe_past_the_limit, waiter_server};
use crate::support::mcp_raw::{RawMcp, reported_run};

/// A run `id` of the protocol at `path`, recorded by `run` (so no server resumes it).
fn recorded(id: &str, path: &str, started: u64) -> Write {
    Write::CreateRun(NewRun {
        id: id.into(),
        protocol_path: path.into(),
        protocol_hash: "h".into(),
        protocol_text: None,
        read_texts: Vec::new(),
        inputs: json!({}),
        started_unix_milliseconds: started,
        grants: None,
        origin: RunOrigin::Run,
        holder: None,
        forked_from: None,
    })
}

/// The store of a server started with `waiter_server`.
fn store(server: &RawMcp) -> SqliteStore {
    SqliteStore::open(server.directory().join("state")).unwrap()
}

#[test]
fn runs_of_a_protocol_not_served_are_refused_everywhere_naming_status() {
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let mut server = waiter_server("records-unserved", tasks);
    let other = server.directory().join("other.yaml").display().to_string();
    let mut writes = store(&server);
    use protocol_run::store::Store;
    writes
        .commit_batch(&[recorded("other:r-1", &other, 1)])
        .unwrap();
    let refusal = format!(
        "run `other:r-1` runs {other}, which this server does not serve; `protocol-run status \
         other:r-1` reads it"
    );
    let result = server.call(1, "get_run", json!({"run": "other:r-1"}));
    assert_eq!(result["isError"], json!(true), "{result}");
    assert_eq!(result["content"][0]["text"], json!(refusal));
    let read = server.request(
        2,
        "resources/read",
        json!({"uri": "protocol-run://run/other:r-1"}),
    );
    assert_eq!(read["error"]["code"], json!(-32002), "{read}");
    assert_eq!(read["error"]["message"], json!(refusal));
    let task = server.request(3, "tasks/get", json!({"taskId": "other:r-1"}));
    assert_eq!(task["error"]["code"], json!(-32602), "{task}");
    assert_eq!(task["error"]["message"], json!(refusal));
    let listed = server.call(4, "list_runs", json!({}));
    assert_eq!(
        listed["structuredContent"],
        json!({"runs": [], "truncated": false})
    );
    server.finish();
}

#[test]
fn list_runs_answers_a_page_at_a_time_newest_first() {
    let mut server = waiter_server("records-pages", json!({}));
    let waiter = std::fs::canonicalize(server.directory().join("waiter.yaml")).unwrap();
    let waiter = waiter.display().to_string();
    let other = server.directory().join("other.yaml").display().to_string();
    let mut writes: Vec<Write> = (0..1_005_u64)
        .map(|index| recorded(&format!("waiter:r-{index:04}"), &waiter, 1_000 + index))
        .collect();
    writes.push(recorded("other:r-1", &other, 5_000));
    use protocol_run::store::Store;
    store(&server).commit_batch(&writes).unwrap();
    let first = server.call(1, "list_runs", json!({}))["structuredContent"].clone();
    let runs = first["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1_000);
    assert_eq!(runs[0]["run"], json!("waiter:r-1004"));
    assert_eq!(runs[999]["run"], json!("waiter:r-0005"));
    assert_eq!(first["truncated"], json!(true));
    assert_eq!(first["next"], json!("waiter:r-0005"));
    let second = server.call(2, "list_runs", json!({"after": "waiter:r-0005"}));
    let second = &second["structuredContent"];
    let names: Vec<&Value> = second["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| &run["run"])
        .collect();
    assert_eq!(
        names,
        [
            "waiter:r-0004",
            "waiter:r-0003",
            "waiter:r-0002",
            "waiter:r-0001",
            "waiter:r-0000"
        ]
        .map(|name| json!(name))
        .iter()
        .collect::<Vec<_>>()
    );
    assert_eq!(second["truncated"], json!(false));
    assert!(second.get("next").is_none(), "{second}");
    let unknown = server.call(3, "list_runs", json!({"after": "waiter:nope"}));
    assert_eq!(
        unknown["content"][0]["text"],
        json!("no run `waiter:nope` to list after; `next` of the previous page names one")
    );
    let listed = server.request(4, "resources/list", json!({}));
    let resources = listed["result"]["resources"].as_array().unwrap();
    assert_eq!(
        resources.len(),
        1 + 100,
        "the protocol and the 100 newest runs"
    );
    server.finish();
}

#[test]
fn a_resource_read_past_the_limit_in_flight_is_an_invalid_request_naming_it() {
    let mut server = waiter_server("records-in-flight", json!({}));
    let (refusal, answered) = probe_past_the_limit(
        &mut server,
        "resources/read",
        json!({"uri": "protocol-run://run/waiter:nope"}),
        |response| response["error"]["code"] == json!(-32600),
    );
    assert_eq!(
        refusal["error"]["message"],
        json!(
            "32 requests of this session are in flight, the limit \
             (MAX_REQUESTS_IN_FLIGHT); wait for their answers"
        )
    );
    let not_found = server.request(
        2,
        "resources/read",
        json!({"uri": "protocol-run://run/waiter:nope"}),
    );
    for error in answered
        .iter()
        .chain([&not_found])
        .map(|read| &read["error"])
    {
        assert_eq!(error["code"], json!(-32002), "{error}");
        assert_eq!(
            error["message"],
            json!("no run `waiter:nope`; list_runs lists them")
        );
    }
    server.finish();
}

#[test]
fn runs_started_at_once_get_names_of_their_own() {
    let mut server = waiter_server("records-burst", json!({}));
    // Thirty starts in one write: most in the same millisecond, none recorded yet when the
    // next is named.
    server.send_at_once(
        30,
        "tools/call",
        &json!({"name": "waiter", "arguments": {}}),
    );
    let mut runs = std::collections::BTreeSet::new();
    for _ in 1..=30 {
        let result = server.next_response()["result"].clone();
        assert_eq!(result["isError"], json!(false), "{result}");
        runs.insert(reported_run(&result));
    }
    assert_eq!(runs.len(), 30, "{runs:?}");
    server.finish();
}
