//! The host a replayed run steps under: it starts nothing (effects, children, timers and sends are the journal's to answer, their outcomes being its events) and keeps what each step took and would have started, for the comparison.

use std::sync::Arc;

use super::steps::Started;
use crate::effects::EffectRequest;
use crate::pipeline::actions::map::MapRequest;
use crate::pipeline::actions::{Directive, Host, InvokeRequest, LogRecord, SendRequest};
use crate::pipeline::compile::machine::{Machine, TransitionId};

/// What a replayed step asked of the world, kept only as far as the comparison needs it.
pub struct QuietHost {
    machine: Arc<Machine>,
    /// The transitions taken since the last `take_step`, in order.
    taken: Vec<TransitionId>,
    /// The effects, maps and child protocols it would have started since then.
    started: Vec<Started>,
}

impl QuietHost {
    pub fn new(machine: Arc<Machine>) -> QuietHost {
        QuietHost {
            machine,
            taken: Vec::new(),
            started: Vec::new(),
        }
    }

    /// The transitions the step just replayed took, and what it would have started; the next
    /// step starts with none.
    pub fn take_step(&mut self) -> (Vec<TransitionId>, Vec<Started>) {
        (
            std::mem::take(&mut self.taken),
            std::mem::take(&mut self.started),
        )
    }

    fn start(&mut self, kind: &str, id: &str, owner: crate::pipeline::compile::machine::StateId) {
        self.started.push(Started {
            name: format!("{kind} `{id}`"),
            owner: self.machine.state(owner).id.to_string(),
        });
    }
}

impl Host for QuietHost {
    fn log(&mut self, _record: LogRecord) {}

    // A send to the run itself comes back as a journaled event of its own, and a timer as
    // the event it fired: the journal offers both in their turn.
    fn send(&mut self, _request: SendRequest) {}

    fn cancel(&mut self, _send_id: &str) {}

    // No effect runs in a replay: its outcome is the journal's next event for it. One the
    // run's grants refuse would not have started (its `error.permission.*` is journaled).
    fn start_effect(&mut self, mut request: EffectRequest) {
        if self.machine.capabilities.admit(&mut request).is_ok() {
            self.start("effect", &request.id, request.owner);
        }
    }

    // Its items start as the host lets them, in whichever step: only the map is compared.
    fn start_map(&mut self, request: MapRequest) {
        self.start("map", &request.id, request.owner);
    }

    fn start_invoke(&mut self, request: InvokeRequest) {
        // The state that invokes it, to point at.
        let machine = &*self.machine;
        let owner = machine
            .states
            .iter()
            .find(|state| state.invokes.iter().any(|invoke| invoke.id == request.id))
            .map(|state| state.id.to_string())
            .unwrap_or_default();
        self.started.push(Started {
            name: format!("child `{}`", request.id),
            owner,
        });
    }

    fn cancel_invoke(&mut self, _id: &str) {}

    fn emit(&mut self, _directive: Directive) {}

    fn transition_taken(&mut self, transition: TransitionId) {
        self.taken.push(transition);
    }
}
