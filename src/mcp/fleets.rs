//! A run's fleet: `serve`'s engine for one run, its output read into the run's view, driven on the host's thread until it ends, the server stops, or the run is cancelled.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::host::{CANCELLED_EXIT_CODE, Host, Reply};
use super::report::{RunView, report};
use crate::compile::machine::Machine;
use crate::run::fleet::{Fleet, Recording};
use crate::run::input::LineBatch;
use crate::store::{SqliteStore, Store};

impl Host {
    /// A fleet for one run, its output read into `view`, its answers to the waiting requests.
    pub(super) fn fleet(
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
        let answer_waiters = self.waiters.clone();
        let answer_machine = machine.clone();
        let answer_view = view;
        Fleet::new(machine, Some(recording))
            .with_limits(self.settings.limits)
            .with_max_instances(1)
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
            .with_problem_replies(move |origin, message| {
                if let Some(waiting) = problem_waiters.borrow_mut().get_mut(&origin.client) {
                    waiting.problems.push(message.to_string());
                }
            })
            .with_answers(move |client| {
                let Some(waiting) = answer_waiters.borrow_mut().remove(&client) else {
                    return;
                };
                let answer = if waiting.problems.is_empty() {
                    Ok(report(&answer_machine, &run_id, &answer_view.borrow()))
                } else {
                    Err(waiting.problems.join("; "))
                };
                let _ = waiting.reply.send(answer);
            })
    }

    /// Drives `fleet` on this thread until its input closes and its run is idle, the server
    /// stops (the run parked for the next server), or the run is cancelled: then its effects
    /// and children are dropped, which kills their process groups, and it is recorded finished.
    pub(super) fn drive(
        &mut self,
        mut fleet: Fleet,
        run_id: String,
        view: Rc<RefCell<RunView>>,
    ) -> (mpsc::Sender<LineBatch>, oneshot::Sender<Reply>) {
        let (sender, receiver) = mpsc::channel(16);
        let (cancel, cancelled) = oneshot::channel::<Reply>();
        let mut server_stop = self.stop.subscribe();
        let state_dir = self.settings.state_dir.clone();
        self.fleets.push(tokio::task::spawn_local(async move {
            let cancel_reply: RefCell<Option<Reply>> = RefCell::new(None);
            let stop = async {
                let mut cancelled = cancelled;
                let mut cancel_open = true;
                loop {
                    tokio::select! {
                        reply = &mut cancelled, if cancel_open => match reply {
                            Ok(reply) => {
                                *cancel_reply.borrow_mut() = Some(reply);
                                return;
                            }
                            Err(_) => cancel_open = false,
                        },
                        _ = server_stop.wait_for(|stopped| *stopped) => return,
                    }
                }
            };
            fleet.run(receiver, stop).await;
            let Some(reply) = cancel_reply.into_inner() else {
                return;
            };
            // The effects' tasks see their cancellation and kill their process groups when
            // next polled: let them run before answering.
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            let finish = crate::store::Finish {
                final_state: None,
                exit_code: CANCELLED_EXIT_CODE,
                output: Value::Null,
                unix_milliseconds: crate::clock::unix_milliseconds_now(),
            };
            let recorded = SqliteStore::open(&state_dir)
                .map_err(|error| error.to_string())
                .and_then(|mut store| {
                    store
                        .finish_run(&run_id, &finish)
                        .map_err(|error| error.to_string())
                });
            view.borrow_mut().cancelled = true;
            let _ = reply.send(recorded.map(|()| {
                serde_json::json!({"run": run_id, "status": "cancelled", "exit_code": CANCELLED_EXIT_CODE})
            }));
        }));
        (sender, cancel)
    }
}
