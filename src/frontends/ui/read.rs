//! The inspector's reads, each a JSON answer from the store: the runs, a run, a page of its steps, its state at a step, its statechart, its log lines and its statistics (its timeline is `timeline`'s).

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Inspector;
use crate::base::clock::format_rfc3339;
use crate::runtime::runs::view::{self, TransitionNames};
use crate::store::run_filter::{RunFilter, ShownStatus};
use crate::store::{RunStatus, RunSummary, Store, StoreError};

/// The most runs one answer lists; the page asks for the next with `before`.
pub const MAX_RUNS_LISTED: usize = 1_000;

/// The most steps one answer holds; older ones come a page at a time.
pub const MAX_STEPS_LISTED: usize = 1_000;

/// An answer that could not be given: its status and why, as `{"error"}`.
pub struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, axum::Json(json!({"error": self.1}))).into_response()
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Failure {
        Failure(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
    }
}

impl Failure {
    /// Why, for a live page.
    pub fn message(self) -> String {
        self.1
    }

    pub fn not_found(what: String) -> Failure {
        Failure(StatusCode::NOT_FOUND, what)
    }

    pub fn refused(why: String) -> Failure {
        Failure(StatusCode::UNPROCESSABLE_ENTITY, why)
    }
}

pub type Answer = Result<axum::Json<Value>, Failure>;

/// `?id=RUN`: a run named by its id, which may hold `:` and `/` (a child's run).
#[derive(Deserialize)]
pub struct RunQuery {
    pub id: String,
}

/// `/api/runs?status=&protocol=`: filters of the run list.
#[derive(Deserialize)]
pub struct RunsQuery {
    status: Option<String>,
    protocol: Option<String>,
}

/// The runs the store holds (not the child protocols' runs, shown with their parents), newest
/// first, at most `MAX_RUNS_LISTED`, filtered as `runs --protocol --status` filters them: id,
/// protocol, status, current states, start, duration, exit code, origin.
pub async fn runs(State(inspector): State<Inspector>, Query(query): Query<RunsQuery>) -> Answer {
    let status = match query.status.as_deref().filter(|status| !status.is_empty()) {
        None => None,
        Some(status) => Some(
            <ShownStatus as clap::ValueEnum>::from_str(status, false).map_err(|_| {
                Failure::refused(format!(
                    "no status `{status}`: running, stopped, finished or failed"
                ))
            })?,
        ),
    };
    let filter = RunFilter {
        protocol: query.protocol.filter(|protocol| !protocol.is_empty()),
        status,
        since_unix_milliseconds: None,
    };
    let store = inspector.store.lock();
    let mut runs: Vec<RunSummary> = filter
        .runs(&**store)?
        .into_iter()
        .filter(|run| run.parent.is_none())
        .collect();
    let truncated = runs.len() > MAX_RUNS_LISTED;
    runs.truncate(MAX_RUNS_LISTED);
    let mut rows = Vec::with_capacity(runs.len());
    for run in &runs {
        rows.push(run_row(&**store, run)?);
    }
    Ok(axum::Json(json!({"runs": rows, "truncated": truncated})))
}

/// One row of the run list.
fn run_row(store: &dyn Store, run: &RunSummary) -> Result<Value, StoreError> {
    let states: Vec<String> = match &run.finish {
        Some(finish) => finish.final_state.iter().cloned().collect(),
        None => store
            .latest_snapshot(&run.id)?
            .map(|stored| stored.snapshot.configuration)
            .unwrap_or_default(),
    };
    let ended = run
        .finish
        .as_ref()
        .and(run.last_step_unix_milliseconds)
        .unwrap_or_else(crate::base::clock::unix_milliseconds_now);
    Ok(json!({
        "id": run.id,
        "protocol": run.protocol_path,
        // The name `runs --protocol` (and the statistics page) takes: a hosted run's id starts
        // with its protocol's id, another's file is named after it.
        "protocol_id": run.id.split_once(':').map(|(protocol, _)| protocol.to_string()).or_else(|| {
            std::path::Path::new(&run.protocol_path)
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
        }),
        "status": ShownStatus::of(run).as_str(),
        "states": states,
        "started": format_rfc3339(run.started_unix_milliseconds),
        "duration_ms": ended.saturating_sub(run.started_unix_milliseconds),
        "exit_code": run.finish.as_ref().map(|finish| finish.exit_code),
        "origin": run.origin.map(crate::store::RunOrigin::as_str),
        "steps": run.last_sequence.map_or(0, |last| last + 1),
        "redrives": run.redrives,
        "forked_from": run.forked_from,
    }))
}

/// A run as `status --json` describes it, with the events it can take now (each with its
/// declared data schema) and its child protocols' runs.
pub async fn run(State(inspector): State<Inspector>, Query(query): Query<RunQuery>) -> Answer {
    run_json(&**inspector.store.lock(), &query.id).map(axum::Json)
}

/// What `run` answers, also sent live as the run moves on: the run's record is read once, and
/// everything else after it, so its status and its end agree.
pub fn run_json(store: &dyn Store, id: &str) -> Result<Value, Failure> {
    let record = store
        .run(id)?
        .ok_or_else(|| Failure::not_found(format!("no run `{id}` in {}", store.location())))?;
    let mut described = view::describe_record(store, &record, 0)?;
    let machine = crate::runtime::runs::resume::recorded_machine(store, &record);
    let configuration = strings(&described["state"]["configuration"]);
    described["events_now"] = match &machine {
        Some(machine) if record.summary.status != RunStatus::Finished => {
            crate::runtime::run::admission::events_now(machine, &configuration)
        }
        _ => json!([]),
    };
    described["protocol_id"] = machine
        .as_ref()
        .map_or(Value::Null, |machine| machine.id.clone().into());
    described["status"] = ShownStatus::of(&record.summary).as_str().into();
    described["steps"] = record
        .summary
        .last_sequence
        .map_or(0, |last| last + 1)
        .into();
    described["holder"] = record.summary.holder.as_ref().map_or(
        Value::Null,
        |holder| json!({"process": holder.process, "pid": holder.pid, "lease": holder.host}),
    );
    Ok(described)
}

/// `/api/steps?id=&before=`: a page of a run's steps, newest last, the `MAX_STEPS_LISTED`
/// before step `before` (the newest when absent).
#[derive(Deserialize)]
pub struct StepsQuery {
    id: String,
    before: Option<u64>,
}

pub async fn steps(State(inspector): State<Inspector>, Query(query): Query<StepsQuery>) -> Answer {
    let store = inspector.store.lock();
    let record = store
        .run(&query.id)?
        .ok_or_else(|| Failure::not_found(format!("no run `{}`", query.id)))?;
    let names = TransitionNames::of_recorded(&**store, &record);
    let journal = match query.before {
        Some(before) => store.journal_before(&query.id, before, MAX_STEPS_LISTED)?,
        None => store.journal_tail(&query.id, MAX_STEPS_LISTED)?,
    };
    let first = journal.first().map(|entry| entry.sequence);
    let steps: Vec<Value> = journal
        .iter()
        .map(|entry| step_row(entry, &names))
        .collect();
    Ok(axum::Json(json!({
        "steps": steps,
        "more_before": first.is_some_and(|first| first > 0),
    })))
}

/// One step as the page shows it: `status`'s, with its time in milliseconds, its actions and
/// its event's data.
pub fn step_row(entry: &crate::store::JournalEntry, names: &TransitionNames) -> Value {
    let mut step = view::step_json(entry, names);
    step["unix_ms"] = entry.unix_milliseconds.into();
    step["actions"] = entry.actions.clone();
    step["data"] = entry
        .event
        .as_ref()
        .map_or(Value::Null, |event| event.data.clone());
    step
}

/// `/api/state?id=&step=`: the run's state after step `step`.
#[derive(Deserialize)]
pub struct StateQuery {
    id: String,
    step: u64,
}

pub async fn state(State(inspector): State<Inspector>, Query(query): Query<StateQuery>) -> Answer {
    let store = inspector.store.lock();
    let stored = store.snapshot_at(&query.id, query.step)?.ok_or_else(|| {
        Failure::not_found(format!("run `{}` has no step {}", query.id, query.step))
    })?;
    Ok(axum::Json(view::state_json(&stored)))
}

/// `/api/diagram?id=`: the statechart of the protocol the run was recorded with, as `graph
/// --format svg` draws it, and each transition's index by the pointer the journal records, so
/// a page can mark the transitions a step took.
pub async fn diagram(State(inspector): State<Inspector>, Query(query): Query<RunQuery>) -> Answer {
    let store = inspector.store.lock();
    let record = store
        .run(&query.id)?
        .ok_or_else(|| Failure::not_found(format!("no run `{}`", query.id)))?;
    let machine =
        crate::runtime::runs::resume::recorded_machine(&**store, &record).ok_or_else(|| {
            Failure::not_found(format!(
                "the protocol run `{}` was recorded with is not kept, or no longer compiles",
                query.id
            ))
        })?;
    let svg = crate::tooling::graph::svg(
        &machine,
        &crate::tooling::graph::SvgOptions { detail: false },
    );
    let transitions: serde_json::Map<String, Value> = machine
        .transitions
        .iter()
        .enumerate()
        .map(|(index, transition)| (transition.pointer.clone(), index.into()))
        .collect();
    Ok(axum::Json(json!({"svg": svg, "transitions": transitions})))
}

/// `/api/logs?id=`: the run's log lines (its telemetry's `log` entries; for a run whose host
/// kept none, its journal's), oldest first.
pub async fn logs(State(inspector): State<Inspector>, Query(query): Query<RunQuery>) -> Answer {
    let store = inspector.store.lock();
    let parts = store.telemetry(&query.id)?;
    let entries = crate::runtime::telemetry::read_stored(&parts, &query.id)
        .map(|read| read.entries)
        .unwrap_or_default();
    let logs: Vec<Value> = entries
        .into_iter()
        .filter(|entry| entry["kind"] == "log")
        .collect();
    Ok(axum::Json(json!({"logs": logs})))
}

/// `/api/stats?protocol=`: the statistics `stats --protocol` sums, of the protocol's newest runs
/// with telemetry (at most `MAX_RUNS_SUMMED`).
#[derive(Deserialize)]
pub struct StatsQuery {
    protocol: String,
}

pub async fn stats(State(inspector): State<Inspector>, Query(query): Query<StatsQuery>) -> Answer {
    let store = inspector.store.lock();
    let (statistics, summed, more) = crate::runtime::statistics::of_protocol(
        &**store,
        &query.protocol,
        crate::runtime::statistics::MAX_RUNS_SUMMED,
    )?;
    let mut answer = statistics.to_json();
    answer["protocol"] = query.protocol.into();
    answer["summed"] = summed.into();
    answer["older_left_out"] = more.into();
    Ok(axum::Json(answer))
}

/// The strings of a JSON array (a configuration); none for anything else.
pub(super) fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
