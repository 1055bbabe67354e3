//! The fleet's side of the runs' durable inboxes: an event for an instance another host holds is stored in its inbox and acknowledged `queued`; the entries of the instances held here are taken now and again and applied once each, their outcomes relayed back to the host that queued them.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::time::Instant;

use super::Fleet;
use super::commit::write_line;
use crate::base::event::{Event, Origin};
use crate::base::value::Value;
use crate::runtime::run::admission::{EventOutcome, EventReport};
use crate::runtime::run::input::LineOrigin;
use crate::store::Write;
use crate::store::inbox::{EntryKind, InboxEntry, InboxScope, InboxState, set_aside_reason};

/// How many entries one look takes: the rest wait for the next look, due at once.
const TAKE_LIMIT: usize = 256;

/// How many queued events a host follows for their outcomes at once; past it, the oldest is
/// no longer followed (its outcome is still in the store: `status` of its run shows its step).
const MAX_RELAYED: usize = 10_000;

/// When a host looks at its runs' inboxes, and the events it queued for other hosts' runs.
pub(super) struct Inboxes {
    every: Duration,
    next: Instant,
    /// Events this host queued, followed until their outcome is known.
    relaying: std::collections::VecDeque<Relayed>,
    /// Woken by the store when an event is queued for an instance held here, or an event
    /// queued here has an outcome (PostgreSQL's `LISTEN`): the look is then due at once.
    wake: Option<std::sync::Arc<tokio::sync::Notify>>,
    /// The one run whose inbox is looked at (a fleet of one run, `mcp`), rather than those of
    /// every run of the protocol held here.
    run: Option<String>,
}

/// An event queued here for a run another host holds.
struct Relayed {
    run: String,
    entry: u64,
    name: Box<str>,
    event: Box<str>,
    origin: Option<LineOrigin>,
}

impl Inboxes {
    pub(super) fn next(&self) -> Instant {
        self.next
    }

    /// Resolves when the store says there is something to look at; never without a store
    /// that can say.
    pub(super) async fn woken(wake: Option<std::sync::Arc<tokio::sync::Notify>>) {
        match wake {
            Some(wake) => wake.notified().await,
            None => std::future::pending().await,
        }
    }

    pub(super) fn wake(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        self.wake.clone()
    }

    /// The next look: `every` from now, give or take a quarter, so that hosts started together
    /// do not all look at once.
    fn schedule(&mut self) {
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let quarter = self.every.as_micros() as u64 / 4;
        let spread = if quarter == 0 {
            0
        } else {
            random % (2 * quarter)
        };
        self.next = Instant::now() + self.every - Duration::from_micros(quarter)
            + Duration::from_micros(spread);
    }
}

impl Fleet {
    /// Looks every `every` (jittered) at the inboxes of the instances held here, and at the
    /// outcomes of the events this host queued for instances held elsewhere; at once when the
    /// store wakes it (a store that cannot is said on stderr, and only looked at).
    pub fn with_inboxes(mut self, every: Duration) -> Fleet {
        let wake = self.recording.as_mut().and_then(|recording| {
            let lease = recording.holder.host.clone()?;
            recording
                .store
                .wake_on_inbox(&lease)
                .map_err(|error| {
                    eprintln!("warning: {error}; the inboxes are looked at every {every:?}")
                })
                .ok()
                .flatten()
        });
        self.looking_at_inboxes(every, wake, None)
    }

    /// Looks every `every` (jittered), and when `wake` is notified, at the inbox of `run`
    /// alone: a fleet of one run among others its host holds, which wakes it for them all.
    pub fn with_run_inbox(
        self,
        run: String,
        every: Duration,
        wake: std::sync::Arc<tokio::sync::Notify>,
    ) -> Fleet {
        self.looking_at_inboxes(every, Some(wake), Some(run))
    }

    fn looking_at_inboxes(
        mut self,
        every: Duration,
        wake: Option<std::sync::Arc<tokio::sync::Notify>>,
        run: Option<String>,
    ) -> Fleet {
        let mut inboxes = Inboxes {
            every,
            next: Instant::now(),
            relaying: std::collections::VecDeque::new(),
            wake,
            run,
        };
        inboxes.schedule();
        self.inboxes = Some(inboxes);
        self
    }

    /// Stores the line's event in the inbox of its instance's run, held elsewhere, and says
    /// it is `queued` (with the entry's number) once the store has it.
    pub(super) fn queue_event(&mut self, name: &str, event: &str, data: &serde_json::Value) {
        let run = format!("{}{name}", self.prefix);
        let Some(recording) = &mut self.recording else {
            return;
        };
        let stored = recording.store.enqueue_event(
            &run,
            event,
            data,
            crate::base::clock::unix_milliseconds_now(),
        );
        let entry = match stored {
            Ok(entry) => entry,
            Err(error) => {
                crate::runtime::runs::lease::end_if_lost(&error);
                return self.line_problem(&format!(
                    "instance `{name}` is held by another host and its event could not be \
                     queued: {error}"
                ));
            }
        };
        let reason = "stored in the run's inbox: the host that holds the run applies it, and its \
                      outcome follows on this host's output";
        write_line(
            &mut self.output,
            &serde_json::json!({
                "instance": name, "event": event, "outcome": "queued", "entry": entry,
                "reason": reason,
            }),
        );
        if let (Some(origin), Some(reply)) = (self.line_origin, &mut self.outcome_reply) {
            reply(
                origin,
                &EventReport {
                    event: event.into(),
                    outcome: EventOutcome::Queued,
                    reason: Some(reason.into()),
                    ticket: Some(self.line_number as u64),
                    waited: false,
                },
            );
        }
        let Some(inboxes) = &mut self.inboxes else {
            return;
        };
        if inboxes.relaying.len() >= MAX_RELAYED {
            inboxes.relaying.pop_front();
        }
        inboxes.relaying.push_back(Relayed {
            run,
            entry,
            name: name.into(),
            event: event.into(),
            origin: self.line_origin,
        });
    }

    /// The look `with_inboxes` makes, due now: entries of the instances held here applied,
    /// the outcomes of events queued here relayed. A failure is said on stderr and the next
    /// look tries again.
    pub(super) fn look_at_inboxes(&mut self) {
        let Some(mut inboxes) = self.inboxes.take() else {
            return;
        };
        let mut full = false;
        if let Err(message) = self.apply_inboxes(inboxes.run.as_deref(), &mut full) {
            eprintln!("warning: taking events from the inboxes: {message}");
        }
        if let Err(message) = self.relay_outcomes(&mut inboxes) {
            eprintln!("warning: reading the outcomes of queued events: {message}");
        }
        inboxes.schedule();
        if full {
            // More were waiting than one look takes: the next look is due at once.
            inboxes.next = Instant::now();
        }
        self.inboxes = Some(inboxes);
        self.commit();
    }

    /// Takes the waiting entries of the instances held here (of `run` alone, when given) and
    /// applies each, in order.
    fn apply_inboxes(&mut self, run: Option<&str>, full: &mut bool) -> Result<(), String> {
        let Some(recording) = &mut self.recording else {
            return Ok(());
        };
        let scope = match run {
            Some(run) => InboxScope::Run(run),
            None => InboxScope::Protocol(&recording.protocol_path),
        };
        let taken = recording
            .store
            .take_inbox(&recording.holder, scope, TAKE_LIMIT)
            .map_err(|error| {
                crate::runtime::runs::lease::end_if_lost(&error);
                error.to_string()
            })?;
        *full = taken.entries.len() + taken.set_aside.len() >= TAKE_LIMIT;
        for entry in &taken.set_aside {
            let name = entry.run.strip_prefix(&self.prefix).unwrap_or(&entry.run);
            let reason = set_aside_reason(entry.tries.saturating_sub(1));
            eprintln!(
                "warning: instance `{name}`: inbox entry {} (`{}`) {reason}",
                entry.entry, entry.event
            );
            write_line(
                &mut self.output,
                &serde_json::json!({
                    "instance": name, "event": entry.event, "outcome": "set_aside",
                    "entry": entry.entry, "reason": reason,
                }),
            );
        }
        for entry in taken.entries {
            self.apply_entry(entry);
        }
        Ok(())
    }

    /// Applies one inbox entry to its instance, as a line's event is: its outcome, output
    /// and the step that consumed it join the batch with that step (`Write::ApplyInbox`), so
    /// that the entry is applied once whatever host holds the run.
    fn apply_entry(&mut self, entry: InboxEntry) {
        let Some(name) = entry.run.strip_prefix(&self.prefix).map(str::to_owned) else {
            return;
        };
        if entry.kind == EntryKind::Cancel {
            self.apply_cancel(entry, name);
            return;
        }
        let writes_before = self.pending.len();
        let output_before = self.output.len();
        // Not a client's line: nothing is answered to the client of the last line.
        self.line_origin = None;
        // The instance may run a pinned version, whose events are its own.
        let machine = self.machine_of(&name);
        let report = match self.by_name.get(name.as_str()).copied() {
            None => EventReport {
                event: entry.event.as_str().into(),
                outcome: EventOutcome::Discarded,
                reason: Some(crate::runtime::run::admission::AFTER_THE_END.into()),
                ticket: None,
                waited: false,
            },
            Some(slot) => match crate::runtime::run::admission::admit_json(
                &machine,
                &entry.event,
                &entry.data,
            ) {
                Err(refusal) => EventReport {
                    event: entry.event.as_str().into(),
                    outcome: EventOutcome::Refused,
                    reason: Some(refusal.to_string().into()),
                    ticket: None,
                    waited: false,
                },
                Ok(()) => {
                    let event = Event::named(
                        &machine,
                        &entry.event,
                        Value::from_json(&entry.data),
                        Origin::External,
                    );
                    self.keep_outcome = true;
                    self.step_as(slot, Some(&name), |session| {
                        session.offer(event, Some(entry.entry))
                    });
                    self.keep_outcome = false;
                    match self.kept_outcome.take() {
                        Some(report) => *report,
                        None => EventReport {
                            event: entry.event.as_str().into(),
                            outcome: EventOutcome::Taken,
                            reason: None,
                            ticket: None,
                            waited: false,
                        },
                    }
                }
            },
        };
        // The step of this event: a step of the instance's queue handled before it (a timer
        // that came due) may have been written first.
        let step = self.pending[writes_before..]
            .iter()
            .find_map(|write| match write {
                Write::Step {
                    run,
                    entry: journal,
                    ..
                } if *run == entry.run
                    && journal
                        .event
                        .as_ref()
                        .is_some_and(|event| event.name == entry.event) =>
                {
                    Some(journal.sequence)
                }
                _ => None,
            });
        let output = String::from_utf8_lossy(&self.output[output_before..]).into_owned();
        if self.recording.is_some() {
            self.pending.push(Write::ApplyInbox {
                run: entry.run,
                entry: entry.entry,
                step,
                outcome: report.to_json(),
                output,
            });
        }
    }

    /// Applies a cancel request to its instance: the instance is cancelled for good (its
    /// effects and children dropped, their processes stopped, its stop and finish in the batch)
    /// and the request applied in the same batch; the instance's output line says so.
    fn apply_cancel(&mut self, entry: InboxEntry, name: String) {
        let after_the_end = || {
            serde_json::json!({
                "event": entry.event, "outcome": "discarded",
                "reason": crate::runtime::run::admission::AFTER_THE_END,
            })
        };
        // An instance that reached its final state (its effects still finishing) keeps its end.
        let live = self.by_name.get(name.as_str()).copied().filter(|slot| {
            self.members[*slot]
                .as_deref()
                .is_some_and(|member| member.interpreter.outcome().is_none())
        });
        let outcome = match live {
            Some(slot) => {
                self.park_for_good(slot, crate::runtime::run::stop::Stop::Cancel);
                write_line(
                    &mut self.output,
                    &serde_json::json!({
                        "instance": name, "cancelled": {"entry": entry.entry},
                        "exit_code": crate::runtime::run::stop::CANCELLED_EXIT_CODE,
                    }),
                );
                crate::runtime::runs::cancel::request_outcome()
            }
            // Live but ended, or finished in the batch not committed yet.
            None if self.by_name.contains_key(name.as_str())
                || self.finished.contains(name.as_str()) =>
            {
                after_the_end()
            }
            // Not live here, yet held here (its entries are taken only by its holder): a batch
            // the store refused took it out of the fleet. It is recorded cancelled now.
            None => match self.held_here_unfinished(&entry.run) {
                true => {
                    if let Some(recording) = &mut self.recording
                        && let Ok(Some(stored)) = recording.store.latest_snapshot(&entry.run)
                    {
                        crate::runtime::run::session::stop_processes_left_by(&stored.snapshot);
                    }
                    self.pending.extend(
                        crate::runtime::run::stop::Stop::Cancel
                            .writes(&entry.run, crate::base::clock::unix_milliseconds_now()),
                    );
                    crate::runtime::runs::cancel::request_outcome()
                }
                false => after_the_end(),
            },
        };
        if self.recording.is_some() {
            self.pending.push(Write::ApplyInbox {
                run: entry.run,
                entry: entry.entry,
                step: None,
                outcome,
                output: String::new(),
            });
        }
    }

    /// Whether the store has `run` unfinished (this host took its entry, so it holds it).
    fn held_here_unfinished(&self, run: &str) -> bool {
        self.recording.as_ref().is_some_and(|recording| {
            matches!(
                recording.store.run_summary(run),
                Ok(Some(summary)) if summary.status != crate::store::RunStatus::Finished
            )
        })
    }

    /// Relays the outcomes now known of the events queued here: the holder's output lines for
    /// each, then the outcome to the client that sent it.
    fn relay_outcomes(&mut self, inboxes: &mut Inboxes) -> Result<(), String> {
        if inboxes.relaying.is_empty() {
            return Ok(());
        }
        let Some(recording) = &self.recording else {
            return Ok(());
        };
        let asked: Vec<(String, u64)> = inboxes
            .relaying
            .iter()
            .map(|relayed| (relayed.run.clone(), relayed.entry))
            .collect();
        let records = recording
            .store
            .inbox_states(&asked)
            .map_err(|error| error.to_string())?;
        let known: std::collections::HashMap<(String, u64), InboxState> = records
            .into_iter()
            .map(|record| ((record.run, record.entry), record.state))
            .collect();
        let mut still = std::collections::VecDeque::new();
        for relayed in inboxes.relaying.drain(..) {
            let state = known.get(&(relayed.run.clone(), relayed.entry));
            let report = match state {
                Some(InboxState::Pending) => {
                    still.push_back(relayed);
                    continue;
                }
                Some(InboxState::Applied {
                    outcome, output, ..
                }) => {
                    self.output.extend_from_slice(output.as_bytes());
                    report_of(&relayed.event, outcome)
                }
                Some(InboxState::SetAside) | None => {
                    let reason = match state {
                        None => "its run was pruned before the outcome was read".to_string(),
                        _ => set_aside_reason(crate::store::inbox::MAX_TRIES),
                    };
                    write_line(
                        &mut self.output,
                        &serde_json::json!({
                            "instance": &*relayed.name, "event": &*relayed.event,
                            "outcome": "set_aside", "entry": relayed.entry, "reason": reason,
                        }),
                    );
                    EventReport {
                        event: relayed.event.clone().into(),
                        outcome: EventOutcome::Refused,
                        reason: Some(reason.into()),
                        ticket: None,
                        waited: false,
                    }
                }
            };
            if let (Some(origin), Some(reply)) = (relayed.origin, &mut self.outcome_reply) {
                reply(origin, &report);
            }
        }
        inboxes.relaying = still;
        Ok(())
    }
}

/// An outcome as the holder stored it, for the client that sent the event.
fn report_of(event: &str, outcome: &serde_json::Value) -> EventReport {
    let outcome_name = outcome["outcome"].as_str().unwrap_or("taken");
    EventReport {
        event: event.into(),
        outcome: match outcome_name {
            "deferred" => EventOutcome::Deferred,
            "discarded" => EventOutcome::Discarded,
            "refused" => EventOutcome::Refused,
            _ => EventOutcome::Taken,
        },
        reason: outcome["reason"]
            .as_str()
            .map(|reason| reason.to_string().into()),
        ticket: None,
        waited: outcome["waited"].as_bool().unwrap_or(false),
    }
}
