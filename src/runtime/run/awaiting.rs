//! `await` lines: an events stream stops reading until a state is active, the run has ended, or the wait times out.

use super::algorithm::RunError;
use super::driver::StopSignals;
use super::input::Await;
use super::session::{Session, Waited};

/// How an `await` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AwaitEnd {
    /// The state is active (or is the final state the run ended in).
    Reached,
    /// The run ended elsewhere.
    Ended,
    /// The timeout passed; under virtual time, the run could make no more progress without
    /// input.
    TimedOut,
    /// A signal stopped the run meanwhile.
    Stopped,
    /// A cancel taken from the run's inbox stopped it meanwhile.
    Cancelled,
}

impl AwaitEnd {
    /// The end `name` names, as `name` spells it.
    pub fn named(name: &str) -> Option<&'static str> {
        [
            AwaitEnd::Reached,
            AwaitEnd::Ended,
            AwaitEnd::TimedOut,
            AwaitEnd::Stopped,
            AwaitEnd::Cancelled,
        ]
        .into_iter()
        .map(AwaitEnd::name)
        .find(|known| *known == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            AwaitEnd::Reached => "reached",
            AwaitEnd::Ended => "ended",
            AwaitEnd::TimedOut => "timed_out",
            AwaitEnd::Stopped => "stopped",
            AwaitEnd::Cancelled => "cancelled",
        }
    }
}

/// Lets the run go on (effects, timers, a parent's events) without reading input until
/// `awaited.state` is active. Under virtual time timers fire meanwhile (time is what the run
/// waits on), and the wait ends as soon as nothing is pending: only input could move it then.
pub(super) async fn await_state(
    session: &mut Session<'_>,
    awaited: &Await,
    virtual_time: bool,
    mut signals: Option<&mut StopSignals>,
) -> Result<AwaitEnd, RunError> {
    let deadline = tokio::time::Instant::now() + awaited.timeout;
    let held = session.timers_held;
    session.timers_held = false;
    let end = loop {
        session.handle_queued()?;
        if is_at(session, &awaited.state) {
            break AwaitEnd::Reached;
        }
        if !session.interpreter.is_running() {
            break AwaitEnd::Ended;
        }
        let idle = session.next_deadline().is_none() && !session.effects_running();
        if virtual_time && idle {
            break AwaitEnd::TimedOut;
        }
        let until = (!virtual_time).then_some(deadline);
        let waited = match signals.as_deref_mut() {
            Some(signals) => tokio::select! {
                waited = session.wait(until, None) => waited,
                () = signals.next() => break AwaitEnd::Stopped,
            },
            None => session.wait(until, None).await,
        };
        match waited {
            Waited::Deadline => break AwaitEnd::TimedOut,
            // The inbox is looked at meanwhile too: its events may be what the await waits for.
            Waited::Queued => match session.take_queued() {
                Err(RunError::Interrupted { .. }) => break AwaitEnd::Stopped,
                taken => taken?,
            },
            _ => {}
        }
        if session.cancel_request.is_some() {
            break AwaitEnd::Cancelled;
        }
        session.commit_between_steps()?;
    };
    session.timers_held = held;
    Ok(end)
}

/// Whether `state` is active, or is the final state the run ended in.
fn is_at(session: &Session<'_>, state: &str) -> bool {
    let interpreter = &*session.interpreter;
    interpreter.is_active(state)
        || interpreter
            .outcome()
            .and_then(|outcome| outcome.state_name(interpreter.machine()))
            .is_some_and(|final_state| **final_state == *state)
}
