//! What a page may do to a run: send it an event, checked as every sender's is (declared, its data on its schema, never an engine event) and stored in the run's inbox, which the process that holds the run applies; or cancel it, through its holder or at once when none drives it.

use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Inspector;
use super::read::{Answer, Failure, RunQuery};
use crate::store::RunStatus;

/// The body of `POST /api/event?id=RUN`.
#[derive(Deserialize)]
pub struct SentEvent {
    event: String,
    #[serde(default)]
    data: Value,
}

/// Queues `event` in run `id`'s inbox once it is admitted under the protocol the run was
/// recorded with: `{"outcome": "queued", "entry", "reason"}`. What became of it (taken,
/// deferred, discarded, refused) comes with the run's next live update, its inbox entry
/// applied by the run's holder.
pub async fn event(
    State(inspector): State<Inspector>,
    Query(query): Query<RunQuery>,
    axum::Json(sent): axum::Json<SentEvent>,
) -> Answer {
    let line = json!({"event": sent.event, "data": sent.data}).to_string();
    if line.len() > crate::runtime::run::input::MAX_EVENT_LINE_BYTES {
        return Err(Failure::refused(format!(
            "the event with its data is {} bytes as JSON, more than the limit of {} \
             (MAX_EVENT_LINE_BYTES)",
            line.len(),
            crate::runtime::run::input::MAX_EVENT_LINE_BYTES
        )));
    }
    let mut store = inspector.store.lock();
    let run = &query.id;
    let record = store
        .run(run)?
        .ok_or_else(|| Failure::not_found(format!("no run `{run}`")))?;
    if record.summary.status == RunStatus::Finished {
        return Err(Failure::refused(format!(
            "run `{run}` has finished: it takes no more events"
        )));
    }
    if let Some(parent) = &record.summary.parent {
        return Err(Failure::refused(format!(
            "run `{run}` is a child protocol of `{parent}`: its events come from its parent"
        )));
    }
    let machine =
        crate::runtime::runs::resume::recorded_machine(&**store, &record).ok_or_else(|| {
            Failure::refused(format!(
                "the protocol run `{run}` was recorded with is not kept, or no longer compiles: \
                 its events cannot be checked"
            ))
        })?;
    crate::runtime::run::admission::admit_json(&machine, &sent.event, &sent.data)
        .map_err(|refusal| Failure::refused(refusal.to_string()))?;
    let entry = store.enqueue_event(
        run,
        &sent.event,
        &sent.data,
        crate::base::clock::unix_milliseconds_now(),
    )?;
    let reason = if record.summary.holder.is_some() {
        "stored in the run's inbox: the process that holds the run applies it"
    } else {
        "stored in the run's inbox: no process holds the run now, and the one that resumes it \
         applies it"
    };
    Ok(axum::Json(json!({
        "event": sent.event,
        "outcome": "queued",
        "entry": entry,
        "reason": reason,
    })))
}

/// `POST /api/cancel?id=RUN`: cancels the run as `protocol-run cancel` does (`runs::cancel`):
/// `{"outcome": "queued", "entry", "reason"}` when a process holds it (it cancels it on taking
/// the request), `{"outcome": "cancelled", "reason"}` when none did.
pub async fn cancel(State(inspector): State<Inspector>, Query(query): Query<RunQuery>) -> Answer {
    let run = query.id;
    // Stopping the processes a dead holder left may wait for them to die: off the server's
    // thread, through a connection of its own, so that other pages need not wait meanwhile.
    let place = inspector.place.clone();
    let cancelled = tokio::task::spawn_blocking(move || {
        let mut store = match place.store.open(&place.state_dir) {
            Ok(Some(store)) => store,
            Ok(None) => {
                return Err(crate::runtime::runs::start::Refusal::error(
                    "this store keeps no runs",
                    crate::base::exit_code::USAGE,
                ));
            }
            Err(error) => {
                return Err(crate::runtime::runs::start::Refusal::error(
                    error,
                    crate::base::exit_code::IO,
                ));
            }
        };
        crate::runtime::runs::cancel::cancel(&mut *store, &place.state_dir, &run).map(|cancelled| {
            let reason = cancelled.description(&run);
            (cancelled, reason)
        })
    })
    .await
    .map_err(|error| Failure::refused(format!("the cancel stopped: {error}")))?;
    match cancelled {
        Ok((crate::runtime::runs::cancel::Cancelled::Queued { entry }, reason)) => Ok(axum::Json(
            json!({"outcome": "queued", "entry": entry, "reason": reason}),
        )),
        Ok((crate::runtime::runs::cancel::Cancelled::Recorded, reason)) => Ok(axum::Json(
            json!({"outcome": "cancelled", "reason": reason}),
        )),
        Err(refusal) => Err(Failure::refused(super::drive::refused_text(&refusal.text))),
    }
}
