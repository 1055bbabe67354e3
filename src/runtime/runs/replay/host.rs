//! The host a replayed run steps under: it starts nothing (effects, children, timers and sends are the journal's to answer, their outcomes being its events) and keeps the transitions each step takes.

use crate::effects::EffectRequest;
use crate::pipeline::actions::map::MapRequest;
use crate::pipeline::actions::{Directive, Host, InvokeRequest, LogRecord, SendRequest};
use crate::pipeline::compile::machine::TransitionId;

/// What a replayed step asked of the world, kept only as far as the comparison needs it.
#[derive(Debug, Default)]
pub struct QuietHost {
    /// The transitions taken since the last `take_transitions`, in order.
    taken: Vec<TransitionId>,
}

impl QuietHost {
    /// The transitions the step just replayed took; the next step starts with none.
    pub fn take_transitions(&mut self) -> Vec<TransitionId> {
        std::mem::take(&mut self.taken)
    }
}

impl Host for QuietHost {
    fn log(&mut self, _record: LogRecord) {}

    // A send to the run itself comes back as a journaled event of its own, and a timer as
    // the event it fired: the journal offers both in their turn.
    fn send(&mut self, _request: SendRequest) {}

    fn cancel(&mut self, _send_id: &str) {}

    // No effect runs in a replay: its outcome is the journal's next event for it.
    fn start_effect(&mut self, _request: EffectRequest) {}

    fn start_map(&mut self, _request: MapRequest) {}

    fn start_invoke(&mut self, _request: InvokeRequest) {}

    fn cancel_invoke(&mut self, _id: &str) {}

    fn emit(&mut self, _directive: Directive) {}

    fn transition_taken(&mut self, transition: TransitionId) {
        self.taken.push(transition);
    }
}
