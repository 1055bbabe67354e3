//! The inspector's timeline (`/api/timeline`): a run's state visits and effects' attempts on a time axis, its maps' items and its child protocols nested under what owns them, from its telemetry.

use axum::extract::{Query, State};
use serde_json::{Value, json};

use super::Inspector;
use super::read::{Answer, Failure, RunQuery, strings};
use crate::store::Store;

/// `/api/timeline?id=`: the run's timeline, from its telemetry. A child protocol keeps no
/// telemetry of its own (its parent keeps its entries as `child` entries), so a child's run is
/// drawn from its root's. The answer (`TIMELINE`), times in Unix milliseconds:
///
/// ```text
/// TIMELINE = {"from", "to",            the first and last entry's time; null without telemetry
///   "states": [{"state", "from", "to"}],       each visit; `to` null while it lasts
///   "effects": [EFFECT],                        in the order they started, a map's items left out
///   "maps": [{"id", "invocation", "owner", "items", "from", "to", "outcome",
///             "entries": [ITEM]}],              `items` the count, `entries` those that started
///   "children": [CHILD]}                        invokes, in the order they started
/// EFFECT = {"id", "invocation", "from", "to", "outcome", "timed_out",
///           "attempts": [{"attempt", "from", "to", "timeout_ms"}]}
/// ITEM   = {"index", "id", "from", "to", "outcome", "effect": EFFECT?, "child": CHILD?}
///                                               by index; `outcome` completed, failed, ...
/// CHILD  = {"id", "run", "owner", "from", "to", "final_state", "exit_code",
///           "timeline": TIMELINE}               `run` its own run's id, `owner` the state that
///                                               invokes it (null when unknown or a map's item);
///                                               an invoke started again is a CHILD of its own
/// ```
pub async fn timeline(State(inspector): State<Inspector>, Query(query): Query<RunQuery>) -> Answer {
    let store = inspector.store.lock();
    let (root, path) = root_of(&**store, &query.id)?;
    let parts = store.telemetry(&root)?;
    let mut entries = crate::runtime::telemetry::read_stored(&parts, &root)
        .map(|read| read.entries)
        .unwrap_or_default();
    if let Some(path) = path {
        entries = below(&entries, &path);
    }
    let owners = |run: &str, invoke: &str| invoke_owner(&**store, run, invoke);
    Ok(axum::Json(timeline_of(&entries, &query.id, &owners)))
}

/// The run whose telemetry holds run `id`'s, and the child's path below it (`None` for a run
/// that is no child): its parents followed up to the first that has none.
fn root_of(store: &dyn Store, id: &str) -> Result<(String, Option<String>), Failure> {
    let mut root = id.to_string();
    // A run tree is finite; a damaged store must not send this round for good.
    for _ in 0..64 {
        let Some(record) = store.run(&root)? else {
            break;
        };
        match record.summary.parent {
            Some(parent) if id.starts_with(&format!("{parent}/")) => root = parent,
            _ => break,
        }
    }
    let path = id.strip_prefix(&format!("{root}/")).map(String::from);
    Ok((root, path))
}

/// The state of run `run`'s protocol that declares invoke `invoke`, if the store keeps the
/// protocol it was recorded with.
fn invoke_owner(store: &dyn Store, run: &str, invoke: &str) -> Option<String> {
    let record = store.run(run).ok()??;
    let machine = crate::runtime::runs::resume::recorded_machine(store, &record)?;
    crate::runtime::run::driver::invoke_owner(&machine, invoke).map(String::from)
}

/// The entries of the child at `path` among a run's `entries`: its own, unwrapped, and its
/// children's, with their paths below it.
fn below(entries: &[Value], path: &str) -> Vec<Value> {
    let nested = format!("{path}/");
    entries
        .iter()
        .filter(|entry| entry["kind"] == "child")
        .filter_map(|entry| {
            let child = entry["child"].as_str()?;
            if child == path {
                return Some(unwrapped(entry));
            }
            let rest = child.strip_prefix(&nested)?;
            let mut entry = entry.clone();
            entry["child"] = rest.into();
            Some(entry)
        })
        .collect()
}

/// A `child` entry's own entry, with the time it was kept at.
fn unwrapped(entry: &Value) -> Value {
    let mut inner = entry["entry"].clone();
    if let Value::Object(fields) = &mut inner {
        fields.insert("time".into(), entry["time"].clone());
    }
    inner
}

/// An entry's time in Unix milliseconds.
fn milliseconds(entry: &Value) -> Option<i64> {
    entry["time"]
        .as_str()
        .and_then(|time| chrono::DateTime::parse_from_rfc3339(time).ok())
        .map(|time| time.timestamp_millis())
}

/// The timeline of run `run`'s telemetry `entries`, in their order; `owners` names the state
/// of a run (by its id) that declares an invoke.
pub(super) fn timeline_of(
    entries: &[Value],
    run: &str,
    owners: &dyn Fn(&str, &str) -> Option<String>,
) -> Value {
    let mut drawn = Drawn::default();
    // Each child's entries, in the order its first one came.
    let mut children: Vec<(String, Vec<Value>)> = Vec::new();
    for entry in entries {
        let Some(at) = milliseconds(entry) else {
            continue;
        };
        drawn.first = Some(drawn.first.map_or(at, |first| first.min(at)));
        drawn.last = Some(drawn.last.map_or(at, |last| last.max(at)));
        if entry["kind"] == "child" {
            let Some(path) = entry["child"].as_str() else {
                continue;
            };
            let (id, rest) = match path.split_once('/') {
                Some((id, rest)) => (id, Some(rest)),
                None => (path, None),
            };
            let inner = match rest {
                None => unwrapped(entry),
                Some(rest) => {
                    let mut entry = entry.clone();
                    entry["child"] = rest.into();
                    entry
                }
            };
            // An invoke started again (its state entered again) is a child of its own.
            let again = |list: &Vec<Value>| {
                rest.is_none()
                    && inner["kind"] == "start"
                    && list.iter().any(|entry| entry["kind"] == "start")
            };
            match children.iter_mut().rev().find(|(known, _)| known == id) {
                Some((_, list)) if !again(list) => list.push(inner),
                _ => children.push((id.to_string(), vec![inner])),
            }
            continue;
        }
        drawn.add(entry, at);
    }
    drawn.close_visits();
    let mut nested: Vec<Value> = Vec::new();
    for (id, list) in children {
        let child_run = format!("{run}/{id}");
        let mut inner = timeline_of(&list, &child_run, owners);
        let finish = list.iter().rev().find(|entry| entry["kind"] == "finish");
        // A child that ended left its states then, not at its parent's end.
        if let Some(ended) = finish.and(inner["to"].as_i64())
            && let Some(visits) = inner["states"].as_array_mut()
        {
            for visit in visits.iter_mut().filter(|visit| visit["to"].is_null()) {
                visit["to"] = ended.into();
            }
        }
        let mut child = json!({
            "id": id,
            "run": child_run,
            "owner": Value::Null,
            "from": inner["from"],
            "to": finish.and(inner["to"].as_i64()),
            "final_state": finish.map_or(Value::Null, |finish| finish["state"].clone()),
            "exit_code": finish.map_or(Value::Null, |finish| finish["exit_code"].clone()),
            "timeline": inner,
        });
        if let Some(item) = drawn.map_item(&id, child["from"].as_i64()) {
            item["from"] = child["from"].clone();
            item["to"] = child["to"].clone();
            item["outcome"] = match child["exit_code"].as_i64() {
                Some(0) => "completed".into(),
                Some(_) => "failed".into(),
                None => Value::Null,
            };
            item["child"] = child;
            continue;
        }
        child["owner"] = owners(run, &id).map_or(Value::Null, Value::from);
        nested.push(child);
    }
    // A map's effect items move under their map.
    let mut effects = Vec::new();
    for effect in std::mem::take(&mut drawn.effects) {
        let id = effect["id"].as_str().unwrap_or_default().to_string();
        match drawn.map_item(&id, effect["from"].as_i64()) {
            Some(item) => {
                item["from"] = effect["from"].clone();
                item["to"] = effect["to"].clone();
                item["outcome"] = effect["outcome"].clone();
                item["effect"] = effect;
            }
            None => effects.push(effect),
        }
    }
    for map in &mut drawn.maps {
        if let Some(items) = map["entries"].as_array_mut() {
            items.sort_by_key(|item| item["index"].as_u64());
        }
    }
    json!({
        "from": drawn.first,
        "to": drawn.last,
        "states": drawn.visits,
        "effects": effects,
        "maps": drawn.maps,
        "children": nested,
    })
}

/// What one run's own entries draw, as they are read.
#[derive(Default)]
struct Drawn {
    first: Option<i64>,
    last: Option<i64>,
    visits: Vec<Value>,
    /// The states visited now, each since when.
    open: Vec<(String, i64)>,
    effects: Vec<Value>,
    maps: Vec<Value>,
}

impl Drawn {
    fn add(&mut self, entry: &Value, at: i64) {
        match entry["kind"].as_str() {
            Some("start" | "step" | "resume" | "finish") => self.states(entry, at),
            Some("attempt") => self.attempt(entry, at),
            Some("effect") => self.effect_ended(entry, at),
            Some("map_started") => self.maps.push(json!({
                "id": entry["id"],
                "invocation": entry["invocation"],
                "owner": entry["owner"],
                "items": entry["items"],
                "from": at,
                "to": Value::Null,
                "outcome": Value::Null,
                "entries": [],
            })),
            Some("map") => {
                let invocation = &entry["invocation"];
                if let Some(map) = self
                    .maps
                    .iter_mut()
                    .rev()
                    .find(|map| map["invocation"] == *invocation && map["to"].is_null())
                {
                    map["to"] = at.into();
                    map["outcome"] = entry["outcome"].clone();
                }
            }
            _ => {}
        }
    }

    /// Each atomic state from the entry whose configuration first holds it to the one that no
    /// longer does.
    fn states(&mut self, entry: &Value, at: i64) {
        let now = strings(&entry["configuration"]);
        // A state exited and entered again in one step ends one visit and starts the next.
        let entered: Vec<&str> = entry["entered"]
            .as_array()
            .map(|states| states.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let visits = &mut self.visits;
        self.open.retain(|(state, from)| {
            let stays = now.contains(state) && !entered.contains(&state.as_str());
            if !stays {
                visits.push(json!({"state": state, "from": from, "to": at}));
            }
            stays
        });
        for state in now {
            if !self.open.iter().any(|(open, _)| *open == state) {
                self.open.push((state, at));
            }
        }
        // A final state reached is a visit of its own, to the end.
        if let Some(state) = entry["state"].as_str() {
            self.visits
                .push(json!({"state": state, "from": at, "to": Value::Null}));
        }
    }

    /// An effect's attempt begins: the previous one ends then.
    fn attempt(&mut self, entry: &Value, at: i64) {
        let invocation = entry["invocation"].clone();
        let attempt = json!({
            "attempt": entry["attempt"],
            "from": at,
            "timeout_ms": entry["timeout_ms"],
        });
        match self
            .effects
            .iter_mut()
            .find(|effect| effect["invocation"] == invocation && effect["to"].is_null())
        {
            Some(effect) => {
                if let Some(attempts) = effect["attempts"].as_array_mut() {
                    if let Some(previous) = attempts.last_mut() {
                        previous["to"] = at.into();
                    }
                    attempts.push(attempt);
                }
            }
            None => self.effects.push(json!({
                "id": entry["id"],
                "invocation": invocation,
                "from": at,
                "to": Value::Null,
                "attempts": [attempt],
            })),
        }
    }

    /// An effect ended: it and its last attempt end then, and how is said.
    fn effect_ended(&mut self, entry: &Value, at: i64) {
        let invocation = &entry["invocation"];
        if let Some(effect) = self
            .effects
            .iter_mut()
            .find(|effect| effect["invocation"] == *invocation && effect["to"].is_null())
        {
            effect["to"] = at.into();
            effect["outcome"] = entry["outcome"].clone();
            effect["timed_out"] = entry["timed_out"].clone();
            if let Some(attempt) = effect["attempts"]
                .as_array_mut()
                .and_then(|attempts| attempts.last_mut())
            {
                attempt["to"] = at.into();
            }
        }
    }

    /// The states still visited at the end of the entries: visits to the end.
    fn close_visits(&mut self) {
        for (state, from) in std::mem::take(&mut self.open) {
            self.visits
                .push(json!({"state": state, "from": from, "to": Value::Null}));
        }
    }

    /// The item `id` (`MAP[INDEX]`) of the latest map of that id started by `from`, made
    /// when first asked for; `None` when `id` is no map's item.
    fn map_item(&mut self, id: &str, from: Option<i64>) -> Option<&mut Value> {
        let (map_id, index) = id.strip_suffix(']')?.rsplit_once('[')?;
        let index: u64 = index.parse().ok()?;
        let map = self.maps.iter_mut().rev().find(|map| {
            map["id"] == map_id
                && map["from"]
                    .as_i64()
                    .zip(from)
                    .is_none_or(|(started, from)| started <= from)
        })?;
        let items = map["entries"].as_array_mut()?;
        let position = match items.iter().position(|item| item["index"] == index) {
            Some(position) => position,
            None => {
                items.push(json!({"index": index, "id": id, "from": Value::Null, "to": Value::Null,
                                  "outcome": Value::Null, "effect": Value::Null, "child": Value::Null}));
                items.len() - 1
            }
        };
        items.get_mut(position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: u32) -> String {
        format!("2026-01-01T00:00:{second:02}.000Z")
    }

    #[test]
    fn a_maps_items_and_a_child_nest_under_their_owners() {
        let mut entries = vec![
            json!({"kind": "start", "time": at(0), "configuration": ["checking"]}),
            json!({"kind": "map_started", "time": at(1), "id": "check", "invocation": 1, "items": 2, "owner": "checking"}),
            json!({"kind": "attempt", "time": at(1), "id": "check[1]", "invocation": 3, "attempt": 1}),
            json!({"kind": "attempt", "time": at(1), "id": "check[0]", "invocation": 2, "attempt": 1}),
            json!({"kind": "effect", "time": at(2), "id": "check[1]", "invocation": 3, "outcome": "failed"}),
            json!({"kind": "effect", "time": at(3), "id": "check[0]", "invocation": 2, "outcome": "completed"}),
            json!({"kind": "map", "time": at(3), "id": "check", "invocation": 1, "outcome": "completed"}),
            json!({"kind": "child", "time": at(4), "child": "kid", "entry": {"kind": "start", "configuration": ["waiting"]}}),
            json!({"kind": "child", "time": at(5), "child": "kid/grand", "entry": {"kind": "start", "configuration": ["w"]}}),
            json!({"kind": "child", "time": at(6), "child": "kid", "entry": {"kind": "finish", "configuration": [], "state": "done", "exit_code": 0}}),
        ];
        // The child started again: a second child, after the first.
        entries.push(json!({"kind": "child", "time": at(7), "child": "kid", "entry": {"kind": "start", "configuration": ["again"]}}));
        let owners = |run: &str, invoke: &str| Some(format!("{run}:{invoke}"));
        let timeline = timeline_of(&entries, "run", &owners);
        assert_eq!(timeline["effects"], json!([]));
        let items = &timeline["maps"][0]["entries"];
        assert_eq!(items[0]["id"], "check[0]");
        assert_eq!(items[0]["outcome"], "completed");
        assert_eq!(items[1]["outcome"], "failed");
        assert_eq!(items[1]["effect"]["attempts"][0]["from"], items[1]["from"]);
        let kid = &timeline["children"][0];
        assert_eq!(kid["run"], "run/kid");
        assert_eq!(kid["owner"], "run:kid");
        assert_eq!(kid["final_state"], "done");
        assert_eq!(kid["timeline"]["children"][0]["run"], "run/kid/grand");
        assert_eq!(kid["timeline"]["states"][0]["state"], "waiting");
        let again = &timeline["children"][1];
        assert_eq!(again["timeline"]["states"][0]["state"], "again");
        assert_eq!(again["final_state"], Value::Null);
    }
}
