//! A run's page kept live: server-sent events, one `update` each time the run's last committed step or status changes (read from the store when it tells of a commit to the run, PostgreSQL's notifications, else every `poll`), carrying the run and the steps since the page's last.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;

use super::Inspector;
use super::read::{run_json, step_row};
use crate::runtime::runs::view::TransitionNames;
use crate::store::{RunChanges, RunFollower};

/// The most steps one update carries; a page that fell further behind reads the rest.
const MAX_STEPS_PER_UPDATE: usize = 500;

/// How long a page woken by the store's word of commits waits at most (or `poll`, if longer)
/// before it looks all the same: word is lost when the store's connection is cut.
const UNWOKEN_LOOK: Duration = Duration::from_secs(5);

/// `/api/live?id=&after=`: updates of run `id` once it has steps after `after` (the last step
/// the page shows), and on every change of its status.
#[derive(Deserialize)]
pub struct LiveQuery {
    id: String,
    after: Option<u64>,
}

/// The events a page is sent, from the task that reads the store for it.
pub struct Updates(mpsc::Receiver<Result<Event, Infallible>>);

impl futures_core::Stream for Updates {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(context)
    }
}

pub async fn live(
    State(inspector): State<Inspector>,
    Query(query): Query<LiveQuery>,
) -> impl axum::response::IntoResponse {
    let (sender, receiver) = mpsc::channel(4);
    // Followed before the first look, so that no commit after it goes unheard.
    let mut follower = inspector.changes.as_ref().map(RunChanges::follow);
    tokio::spawn(async move {
        let mut shown = (query.after, None::<String>);
        let mut look = Look::First;
        loop {
            let update = {
                let store = inspector.store.lock();
                next_update(&**store, &query.id, &mut shown, look)
            };
            match update {
                Ok(Some((event, finished))) => {
                    if sender.send(Ok(event)).await.is_err() || finished {
                        return;
                    }
                }
                Ok(None) => {}
                Err(message) => {
                    let event = Event::default().event("failure").data(message);
                    let _ = sender.send(Ok(event)).await;
                    return;
                }
            }
            // A page whose feed was dropped ends its task without waiting for the next look.
            tokio::select! {
                () = sender.closed() => return,
                next = next_look(&mut follower, &query.id, inspector.poll) => look = next,
            }
        }
    });
    Sse::new(Updates(receiver)).keep_alive(KeepAlive::default())
}

/// Why the page's task looked at the store, as each update says (`woken_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// The page's first look, as the feed opens.
    First,
    /// The store's word that the run was committed to (PostgreSQL's notifications).
    Notification,
    /// The poll came due.
    Poll,
}

impl Look {
    fn name(self) -> &'static str {
        match self {
            Look::First => "first",
            Look::Notification => "notification",
            Look::Poll => "poll",
        }
    }
}

/// Waits until run `run` is worth looking at again: word that it was committed to, or
/// `UNWOKEN_LOOK` (`poll` if longer) without any; `poll` where the store gives no word, or
/// its word ended.
async fn next_look(follower: &mut Option<RunFollower>, run: &str, poll: Duration) -> Look {
    let Some(following) = follower else {
        tokio::time::sleep(poll).await;
        return Look::Poll;
    };
    match tokio::time::timeout(poll.max(UNWOKEN_LOOK), following.changed(run)).await {
        Ok(true) => Look::Notification,
        Ok(false) => {
            *follower = None;
            tokio::time::sleep(poll).await;
            Look::Poll
        }
        Err(_) => Look::Poll,
    }
}

/// The update due when the run's last step or status is not what the page was shown
/// (`shown`, moved on), and whether the run has finished (the last update); `None` when
/// nothing changed.
fn next_update(
    store: &dyn crate::store::Store,
    run: &str,
    shown: &mut (Option<u64>, Option<String>),
    look: Look,
) -> Result<Option<(Event, bool)>, String> {
    let summary = store
        .run_summary(run)
        .map_err(|error| error.to_string())?
        .ok_or_else(|| format!("no run `{run}`"))?;
    let status = summary.status.as_str().to_string();
    if summary.last_sequence == shown.0 && shown.1.as_deref() == Some(status.as_str()) {
        return Ok(None);
    }
    let described = run_json(store, run).map_err(|failure| failure.message())?;
    let record = store
        .run(run)
        .map_err(|error| error.to_string())?
        .ok_or_else(|| format!("no run `{run}`"))?;
    let names = TransitionNames::of_recorded(store, &record);
    let new_steps = match (summary.last_sequence, shown.0) {
        (Some(last), Some(after)) if last > after => {
            let count = ((last - after) as usize).min(MAX_STEPS_PER_UPDATE);
            store
                .journal_tail(run, count)
                .map_err(|error| error.to_string())?
        }
        (Some(_), None) => store
            .journal_tail(run, MAX_STEPS_PER_UPDATE)
            .map_err(|error| error.to_string())?,
        _ => Vec::new(),
    };
    let steps: Vec<serde_json::Value> = new_steps
        .iter()
        .filter(|entry| shown.0.is_none_or(|after| entry.sequence > after))
        .map(|entry| step_row(entry, &names))
        .collect();
    *shown = (summary.last_sequence, Some(status));
    let finished = summary.status == crate::store::RunStatus::Finished;
    let data = json!({"run": described, "steps": steps, "woken_by": look.name()});
    Ok(Some((
        Event::default().event("update").data(data.to_string()),
        finished,
    )))
}
