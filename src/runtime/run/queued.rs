//! The events other processes queued for a durable run (its inbox in the store: another host, `protocol-run ui`): taken now and again by the process that holds the run and applied as input, each entry's outcome committed with the step that applied it.

use super::algorithm::RunError;
use super::session::Session;
use crate::base::event::{Event, Origin};
use crate::base::value::Value;
use crate::runtime::run::admission::{EventOutcome, EventReport};

/// How many queued events one look takes: the rest wait for the next look, due at once.
const TAKE_LIMIT: usize = 256;

/// A cancel taken from the run's inbox: its entry, and the entries taken after it in the same
/// look (number, event), which the cancel discards.
#[derive(Debug, Clone, PartialEq)]
pub struct CancelRequest {
    pub entry: u64,
    pub later: Vec<(u64, String)>,
}

impl Session<'_> {
    /// Starts looking at the run's inbox as its checkpoint says (never on virtual time, whose
    /// clock a periodic look would move on).
    pub(super) fn look_at_queued_events(&mut self, virtual_time: bool) {
        let every = self
            .checkpoint
            .as_deref()
            .and_then(|checkpoint| checkpoint.queued_every())
            .filter(|_| !virtual_time);
        self.next_queued_look = every.map(|every| tokio::time::Instant::now() + every);
    }

    /// The look at the run's inbox, due now: each event taken is admitted as every sender's
    /// (declared, its data on its schema, never an engine event) and offered as input, in
    /// order; its outcome (taken, deferred, discarded, refused) is committed with the step that
    /// applied it. A failure to read the inbox is said on stderr and the next look tries again.
    pub fn take_queued(&mut self) -> Result<(), RunError> {
        let Some(checkpoint) = self.checkpoint.as_deref_mut() else {
            self.next_queued_look = None;
            return Ok(());
        };
        let Some(every) = checkpoint.queued_every() else {
            self.next_queued_look = None;
            return Ok(());
        };
        let taken = match checkpoint.take_queued(TAKE_LIMIT) {
            Ok(taken) => taken,
            Err(message) => {
                eprintln!("warning: taking the events queued for this run: {message}");
                self.next_queued_look = Some(tokio::time::Instant::now() + every);
                return Ok(());
            }
        };
        for why in &taken.set_aside {
            eprintln!("warning: {why}");
        }
        let full = taken.events.len() + taken.set_aside.len() >= TAKE_LIMIT;
        let mut events = taken.events.into_iter();
        while let Some(queued) = events.next() {
            if queued.cancel {
                // The run goes no further: what came after it is discarded with it.
                self.cancel_request = Some(CancelRequest {
                    entry: queued.entry,
                    later: events.map(|later| (later.entry, later.event)).collect(),
                });
                self.next_queued_look = None;
                return Ok(());
            }
            let step_before = self.host.state.step;
            let report = match crate::runtime::run::admission::admit_json(
                &self.host.machine,
                &queued.event,
                &queued.data,
            ) {
                Err(refusal) => EventReport {
                    event: queued.event.as_str().into(),
                    outcome: EventOutcome::Refused,
                    reason: Some(refusal.to_string().into()),
                    ticket: None,
                    waited: false,
                },
                Ok(()) => {
                    let event = Event::named(
                        &self.host.machine,
                        &queued.event,
                        Value::from_json(&queued.data),
                        Origin::External,
                    );
                    self.last_input_report = None;
                    self.offer(event, None)?;
                    self.last_input_report
                        .take()
                        .unwrap_or_else(|| EventReport {
                            event: queued.event.as_str().into(),
                            outcome: EventOutcome::Taken,
                            reason: None,
                            ticket: None,
                            waited: false,
                        })
                }
            };
            let step = (self.host.state.step > step_before).then_some(step_before);
            if let Some(checkpoint) = self.checkpoint.as_deref_mut() {
                checkpoint
                    .applied_queued(queued.entry, step, report.to_json())
                    .map_err(|message| RunError::Checkpoint { message })?;
            }
        }
        // More were waiting than one look takes: the next look is due at once.
        let next = if full {
            std::time::Duration::ZERO
        } else {
            every
        };
        self.next_queued_look = Some(tokio::time::Instant::now() + next);
        Ok(())
    }
}
