//! An MCP server on a shared store beside other hosts: one wake from the database for all its runs' inboxes, events queued for runs another host holds (answered with their outcome once applied), and the runs of a dead host taken over.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::frontends::mcp::runs::host::Host;
use crate::frontends::mcp::runs::records;
use crate::store::inbox::{InboxState, set_aside_reason};
use crate::store::{RunStatus, Store};

/// How long `send_event` waits for the outcome of an event queued for a run another host holds
/// before it answers `queued` (the event stays in the run's inbox; `get_run` shows it later).
pub(in crate::frontends::mcp) const QUEUED_OUTCOME_WAIT: Duration = Duration::from_secs(30);

/// What waits to be woken when the database says an inbox changed: each live run's fleet, and
/// each `send_event` waiting for a queued event's outcome. Weak: one gone is dropped.
pub(in crate::frontends::mcp) type Wakes = std::rc::Rc<std::cell::RefCell<Vec<Weak<Notify>>>>;

impl Host {
    /// On a shared store: listens for the database's word that an event was queued for a run
    /// held here, or one queued here was applied, and passes it to everything that waits on
    /// one. A store that cannot listen is said once; the inboxes are then only polled.
    pub(in crate::frontends::mcp) fn listen_for_inboxes(&mut self) {
        if self.settings.shared.is_none() {
            return;
        }
        let Some(lease) = self.settings.holder.host.clone() else {
            return;
        };
        let woken = match self.settings.store.lock().wake_on_inbox(&lease) {
            Ok(Some(woken)) => woken,
            Ok(None) => return,
            Err(error) => {
                eprintln!(
                    "mcp: warning: {error}; the inboxes are looked at every {:?}",
                    self.settings.inbox_poll
                );
                return;
            }
        };
        let wakes = self.wakes.clone();
        // Not among the fleets, which the server waits for when it stops: this never ends.
        tokio::task::spawn_local(async move {
            loop {
                woken.notified().await;
                wakes.borrow_mut().retain(|wake| match wake.upgrade() {
                    Some(wake) => {
                        wake.notify_one();
                        true
                    }
                    None => false,
                });
            }
        });
    }

    /// A wake for one more waiter, passed on whenever the database wakes this server.
    pub(in crate::frontends::mcp) fn new_wake(&self) -> Arc<Notify> {
        let wake = Arc::new(Notify::new());
        self.wakes.borrow_mut().push(Arc::downgrade(&wake));
        wake
    }

    /// Whether an event for `run`, not live here, is queued in its inbox for the host that
    /// holds it: on a shared store, for an unfinished run of a protocol served here.
    pub(in crate::frontends::mcp) fn queues_for(&self, run: &str) -> bool {
        self.settings.shared.is_some()
            && !self.runs.contains_key(run)
            && records::served_summary(&**self.settings.store.lock(), &self.served_paths(), run)
                .ok()
                .flatten()
                .is_some_and(|summary| summary.status != RunStatus::Finished)
    }

    /// Stores `event` in `run`'s inbox for the host that holds it, and answers once that host
    /// applied it (the run's summary with what became of the event), or after
    /// `QUEUED_OUTCOME_WAIT` with `queued`: the event stays in the inbox.
    pub(in crate::frontends::mcp) fn queue_event(
        &mut self,
        run: &str,
        event: &str,
        data: Option<Value>,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        if self.settings.shared.is_none() {
            let _ = reply.send(Err(self.not_live(run)));
            return;
        }
        let poll = self.settings.inbox_poll;
        let data = data.unwrap_or(Value::Null);
        if let Err(message) = super::events::check_line_length(&data.to_string()) {
            let _ = reply.send(Err(message));
            return;
        }
        let queued = self.settings.store.lock().enqueue_event(
            run,
            event,
            &data,
            crate::base::clock::unix_milliseconds_now(),
        );
        let entry = match queued {
            Ok(entry) => entry,
            Err(error) => {
                crate::runtime::runs::lease::end_if_lost(&error);
                let _ = reply.send(Err(format!(
                    "run `{run}` is held by another host and the event could not be queued: \
                     {error}"
                )));
                return;
            }
        };
        let wake = self.new_wake();
        let store = self.settings.store.clone();
        let served: Vec<String> = self.served_paths().into_iter().map(String::from).collect();
        let (run, event) = (run.to_string(), event.to_string());
        // Not among the fleets: a server that stops does not wait for another host.
        tokio::task::spawn_local(async move {
            let deadline = Instant::now() + QUEUED_OUTCOME_WAIT;
            let answer = loop {
                let state = store
                    .inbox_states(&[(run.clone(), entry)])
                    .map(|mut states| states.pop().map(|record| record.state));
                let sent = match state {
                    Err(error) => break Err(format!("event queued as entry {entry}: {error}")),
                    Ok(Some(InboxState::Pending)) if Instant::now() < deadline => {
                        let _ = tokio::time::timeout(poll, wake.notified()).await;
                        continue;
                    }
                    Ok(Some(InboxState::Pending)) => json!({
                        "event": event, "outcome": "queued", "entry": entry,
                        "reason": format!(
                            "stored in the run's inbox; the host that holds it has not applied \
                             it within {}s: get_run shows the run once it has",
                            QUEUED_OUTCOME_WAIT.as_secs()
                        ),
                    }),
                    Ok(Some(InboxState::Applied { outcome, .. })) => {
                        let mut sent = outcome;
                        if let Some(fields) = sent.as_object_mut() {
                            fields.remove("ticket");
                            fields.insert("entry".into(), entry.into());
                        }
                        sent
                    }
                    Ok(Some(InboxState::SetAside) | None) => json!({
                        "event": event, "outcome": "refused", "entry": entry,
                        "reason": set_aside_reason(crate::store::inbox::MAX_TRIES),
                    }),
                };
                let served: Vec<&str> = served.iter().map(String::as_str).collect();
                break records::summary(&**store.lock(), &served, &run).map(|mut summary| {
                    summary["sent"] = sent;
                    summary
                });
            };
            let _ = reply.send(answer);
        });
    }

    /// When the next look for runs to take over is due: on a shared store, when runs left
    /// behind are resumed at all (not `--no-resume`).
    pub(in crate::frontends::mcp) fn next_takeover(&self) -> Option<Instant> {
        self.next_takeover
    }

    /// The look for runs whose host died, due now; the next is due half a lease later.
    pub(in crate::frontends::mcp) fn take_over_now(&mut self) {
        self.resume_left(false);
        self.take_over_later();
    }

    /// Schedules the next look for runs whose host died, half a lease from now.
    pub(in crate::frontends::mcp) fn take_over_later(&mut self) {
        self.next_takeover = self
            .settings
            .shared
            .filter(|_| self.settings.resume)
            .map(|shared| Instant::now() + shared.takeover_every);
    }
}
