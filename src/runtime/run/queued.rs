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

    /// The look at the run's inbox, due now (`look_at_queued`), and the next one armed: at once
    /// when more were waiting than one look takes, none once a cancel was taken.
    pub fn take_queued(&mut self) -> Result<(), RunError> {
        let Some(every) = self
            .checkpoint
            .as_deref()
            .and_then(|checkpoint| checkpoint.queued_every())
        else {
            self.next_queued_look = None;
            return Ok(());
        };
        let looked = self.look_at_queued()?;
        self.next_queued_look = match looked {
            _ if self.cancel_request.is_some() => None,
            Looked::Full => Some(tokio::time::Instant::now()),
            Looked::Some | Looked::None => Some(tokio::time::Instant::now() + every),
        };
        Ok(())
    }

    /// One look at the run's inbox, whether or not looks are periodic (virtual time has none):
    /// a run about to stop for want of input takes what was queued meanwhile. Each event taken
    /// is admitted as every sender's (declared, its data on its schema, never an engine event)
    /// and offered as input, in order; its outcome (taken, deferred, discarded, refused) is
    /// committed with the step that applied it. A cancel stops the taking: the run goes no
    /// further (`cancel_request`), what came after it is discarded with it; a cancel that
    /// comes after the run's end is discarded, the end kept. A failure to read the inbox is
    /// said on stderr and the next look tries again.
    pub(super) fn look_at_queued(&mut self) -> Result<Looked, RunError> {
        let Some(checkpoint) = self.checkpoint.as_deref_mut() else {
            return Ok(Looked::None);
        };
        if checkpoint.queued_every().is_none() {
            return Ok(Looked::None);
        }
        let taken = match checkpoint.take_queued(TAKE_LIMIT) {
            Ok(taken) => taken,
            Err(message) => {
                eprintln!("warning: taking the events queued for this run: {message}");
                return Ok(Looked::None);
            }
        };
        for why in &taken.set_aside {
            eprintln!("warning: {why}");
        }
        let looked = match taken.events.len() + taken.set_aside.len() {
            0 => Looked::None,
            count if count >= TAKE_LIMIT => Looked::Full,
            _ => Looked::Some,
        };
        let mut events = taken.events.into_iter();
        while let Some(queued) = events.next() {
            if queued.cancel && self.interpreter.is_running() {
                self.cancel_request = Some(CancelRequest {
                    entry: queued.entry,
                    later: events.map(|later| (later.entry, later.event)).collect(),
                });
                return Ok(looked);
            }
            let step_before = self.host.state.step;
            let report = if queued.cancel {
                EventReport {
                    event: queued.event.as_str().into(),
                    outcome: EventOutcome::Discarded,
                    reason: Some(crate::runtime::run::admission::AFTER_THE_END.into()),
                    ticket: None,
                    waited: false,
                }
            } else {
                self.offer_queued(&queued)?
            };
            let step = (self.host.state.step > step_before).then_some(step_before);
            if let Some(checkpoint) = self.checkpoint.as_deref_mut() {
                checkpoint
                    .applied_queued(queued.entry, step, report.to_json())
                    .map_err(|message| RunError::Checkpoint { message })?;
            }
        }
        Ok(looked)
    }

    /// Offers one queued event as input, once admitted: what became of it.
    fn offer_queued(
        &mut self,
        queued: &crate::base::durable::QueuedEvent,
    ) -> Result<EventReport, RunError> {
        if let Err(refusal) = crate::runtime::run::admission::admit_json(
            &self.host.machine,
            &queued.event,
            &queued.data,
        ) {
            return Ok(EventReport {
                event: queued.event.as_str().into(),
                outcome: EventOutcome::Refused,
                reason: Some(refusal.to_string().into()),
                ticket: None,
                waited: false,
            });
        }
        let event = Event::named(
            &self.host.machine,
            &queued.event,
            Value::from_json(&queued.data),
            Origin::External,
        );
        self.last_input_report = None;
        self.offer(event, None)?;
        Ok(self
            .last_input_report
            .take()
            .unwrap_or_else(|| EventReport {
                event: queued.event.as_str().into(),
                outcome: EventOutcome::Taken,
                reason: None,
                ticket: None,
                waited: false,
            }))
    }
}

/// What one look at the inbox found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Looked {
    /// Nothing waited.
    None,
    /// Some entries, all taken.
    Some,
    /// As many as one look takes: more may wait.
    Full,
}
