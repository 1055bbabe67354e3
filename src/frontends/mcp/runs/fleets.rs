//! A run's fleet: `serve`'s engine for one run, its output read into the run's view, driven on the host's thread until the run ends, the server stops, or the run is cancelled.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::frontends::mcp::runs::host::{Host, Reply};
use crate::frontends::mcp::runs::report::{RunView, report};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::input::LineBatch;
use crate::runtime::run::stop::{CANCELLED_EXIT_CODE, Stop};
use crate::runtime::runs::fleet::{Fleet, Recording};

impl Host {
    /// A fleet for one run, its output read into `view`, its answers to the waiting requests.
    pub(in crate::frontends::mcp) fn fleet(
        &mut self,
        run_id: String,
        machine: Arc<Machine>,
        recording: Recording,
        view: Rc<RefCell<RunView>>,
    ) -> Fleet {
        let output_view = view.clone();
        let log_view = view.clone();
        let pending_view = view.clone();
        let notices = self.settings.notices.clone();
        let notice_run = run_id.clone();
        let problem_waiters = self.waiters.clone();
        let naming_waiters = self.waiters.clone();
        let outcome_waiters = self.waiters.clone();
        let await_waiters = self.waiters.clone();
        let outcome_machine = machine.clone();
        let outcome_view = view.clone();
        let answer_waiters = self.waiters.clone();
        let answer_machine = machine.clone();
        let answer_view = view;
        let inbox_run = run_id.clone();
        let fleet = Fleet::new(machine, Some(recording))
            .with_otlp(self.settings.otlp.clone())
            .with_limits(self.settings.limits)
            .with_max_instances(1)
            .ending_with_its_instances()
            .with_output(move |bytes| {
                let mut view = output_view.borrow_mut();
                for line in bytes.split(|byte| *byte == b'\n') {
                    if let Ok(line) = serde_json::from_slice::<Value>(line)
                        && let Some(directive) = view.observe(&line)
                    {
                        // No client listening is no error: the reports carry it too.
                        let _ = notices.send((notice_run.clone(), directive));
                    }
                }
            })
            .with_logs(move |line| log_view.borrow_mut().logs.keep(line))
            // One run per fleet: whatever instance the step was of, it is this run.
            .with_pending(move |_, pending| pending_view.borrow_mut().pending = pending)
            // A line is a tool call's: warnings name the call, not an input line.
            .with_line_names(move |origin| {
                naming_waiters
                    .borrow()
                    .get(&origin.client)
                    .map(|waiting| waiting.call.clone())
            })
            .with_problem_replies(move |origin, message| {
                if let Some(waiting) = problem_waiters.borrow_mut().get_mut(&origin.client) {
                    waiting.problems.push(message.to_string());
                }
            })
            // The sender is told what became of its event in the report, not as a tool error:
            // refused, discarded and deferred are answers an agent acts on.
            .with_outcome_replies(move |origin, outcome| {
                if let Some(waiting) = outcome_waiters.borrow_mut().get_mut(&origin.client) {
                    let mut told = outcome.to_json();
                    if let Some(fields) = told.as_object_mut() {
                        fields.remove("ticket");
                    }
                    // A discard is spelled out, but for a failed guard's, which says more.
                    if outcome.outcome == crate::runtime::run::admission::EventOutcome::Discarded
                        && outcome.reason.as_deref()
                            != Some(crate::runtime::run::admission::GUARD_FAILED)
                    {
                        let view = outcome_view.borrow();
                        let states: Vec<&str> = view.states.iter().map(String::as_str).collect();
                        told["reason"] = crate::runtime::run::admission::discarded_reason(
                            &outcome_machine,
                            &outcome.event,
                            &states,
                        )
                        .into();
                    }
                    outcome_view.borrow_mut().last_event = Some(told.clone());
                    waiting.outcome = Some(told);
                }
            })
            .with_await_replies(move |origin, end| {
                if let Some(waiting) = await_waiters.borrow_mut().get_mut(&origin.client) {
                    waiting.awaited = crate::runtime::run::awaiting::AwaitEnd::named(end);
                }
            })
            .with_answers(move |client| {
                let Some(waiting) = answer_waiters.borrow_mut().remove(&client) else {
                    return;
                };
                let answer = if waiting.problems.is_empty() {
                    let mut report = report(&answer_machine, &run_id, &answer_view.borrow());
                    if let Some(outcome) = waiting.outcome {
                        report["sent"] = outcome;
                    }
                    if let Some(end) = waiting.awaited {
                        report["awaited"] = end.into();
                    }
                    Ok(report)
                } else {
                    Err(waiting.problems.join("; "))
                };
                let _ = waiting.reply.send(answer);
            });
        // Other processes (another host, `protocol-run ui`) queue events in this run's inbox.
        fleet.with_run_inbox(inbox_run, self.settings.inbox_poll, self.new_wake())
    }

    /// Drives `fleet` on this thread until its run ends, the server
    /// stops (the run parked for the next server), or the run is cancelled: then its effects
    /// and children are dropped, which kills their process groups. Every event still queued
    /// for it is answered with why it was not taken, and the run is listed as ended for the
    /// host to forget.
    pub(in crate::frontends::mcp) fn drive(
        &mut self,
        mut fleet: Fleet,
        run_id: String,
        view: Rc<RefCell<RunView>>,
    ) -> (mpsc::Sender<LineBatch>, oneshot::Sender<Reply>) {
        let (sender, mut receiver) = mpsc::channel(16);
        let (cancel, cancelled) = oneshot::channel::<Reply>();
        let mut server_stop = self.stop.subscribe();
        let waiters = self.waiters.clone();
        let just_ended = self.just_ended.clone();
        let store = self.settings.store.clone();
        self.fleets.spawn_local(async move {
            let cancel_reply: RefCell<Option<Reply>> = RefCell::new(None);
            let stop = async {
                let mut cancelled = cancelled;
                let mut cancel_open = true;
                loop {
                    tokio::select! {
                        reply = &mut cancelled, if cancel_open => match reply {
                            Ok(reply) => {
                                *cancel_reply.borrow_mut() = Some(reply);
                                return Stop::Cancel;
                            }
                            Err(_) => cancel_open = false,
                        },
                        _ = server_stop.wait_for(|stopped| *stopped) => return Stop::Park,
                    }
                }
            };
            fleet.run(&mut receiver, stop).await;
            // Its store connection goes with it.
            drop(fleet);
            let cancel_reply = cancel_reply.into_inner();
            // A cancel may also come through the run's inbox (`protocol-run cancel`, the
            // inspector), which the fleet applied before it ended.
            if cancel_reply.is_some() || cancelled_through_inbox(&store, &run_id) {
                view.borrow_mut().cancelled = true;
            }
            let why = if cancel_reply.is_some() {
                format!("run `{run_id}` was cancelled before this event was taken")
            } else if *server_stop.borrow() {
                format!("the server stopped before run `{run_id}` took this event")
            } else {
                let status = view.borrow().status();
                format!("run `{run_id}` has ended ({status}) before this event was taken")
            };
            receiver.close();
            // A wait the run's end cut short is answered with why, as a queued line is.
            let cut_short: Vec<u64> = waiters
                .borrow()
                .iter()
                .filter(|(_, waiting)| waiting.run == run_id)
                .map(|(client, _)| *client)
                .collect();
            for client in cut_short {
                if let Some(waiting) = waiters.borrow_mut().remove(&client) {
                    let _ = waiting.reply.send(Err(why.clone()));
                }
            }
            while let Ok(batch) = receiver.try_recv() {
                let waiting = batch
                    .origin
                    .and_then(|origin| waiters.borrow_mut().remove(&origin.client));
                if let Some(waiting) = waiting {
                    let _ = waiting.reply.send(Err(why.clone()));
                }
            }
            if cancel_reply.is_some() {
                // The effects' tasks see their cancellation and kill their process groups
                // when next polled: let them run before answering.
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            }
            just_ended.borrow_mut().push(run_id.clone());
            if let Some(reply) = cancel_reply {
                // The stop and the finish were one batch: a store that refused it (full disk)
                // left the run as it was, and the client hears so rather than "cancelled".
                let _ = reply.send(recorded_cancelled(&store, &run_id));
            }
        });
        (sender, cancel)
    }
}

/// Whether `run` is recorded finished as a cancel ends it (`CANCELLED_EXIT_CODE`, no final
/// state).
fn cancelled_through_inbox(store: &crate::store::SharedStore, run: &str) -> bool {
    let Ok(Some(summary)) = store.lock().run_summary(run) else {
        return false;
    };
    summary.finish.is_some_and(|finish| {
        finish.final_state.is_none() && finish.exit_code == CANCELLED_EXIT_CODE
    })
}

/// `cancel_run`'s answer once the fleet has stopped a run: cancelled if the store recorded it
/// finished, else why not (its processes are gone either way).
fn recorded_cancelled(store: &crate::store::SharedStore, run: &str) -> Result<Value, String> {
    let summary = store.lock().run_summary(run).map_err(|error| {
        format!("run `{run}` was stopped, but its cancel was not recorded: {error}")
    })?;
    match summary.and_then(|summary| summary.finish) {
        Some(_) => Ok(cancelled_report(run)),
        None => Err(format!(
            "run `{run}` was stopped, its processes killed, but the store did not record its \
             cancel: it stays resumable from its last committed step"
        )),
    }
}

/// What `cancel_run` answers once a run is recorded cancelled.
pub(in crate::frontends::mcp) fn cancelled_report(run: &str) -> Value {
    serde_json::json!({"run": run, "status": "cancelled", "exit_code": CANCELLED_EXIT_CODE})
}
