//! What an instance has running: effects, each an invocation owned by a state, and child protocols.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::base::event::Event;
use crate::base::snapshot::ChildSnapshot;
use crate::effects::{Cancellation, EffectRequest, EffectScope};
use crate::pipeline::compile::declared_events::DeclaredEvents;
use crate::pipeline::compile::machine::StateId;

/// One start of an effect: cancelled when its owner exits, its outcome delivered at most once.
pub(crate) struct RunningEffect {
    /// Unique within the run (it goes on counting across a resume).
    pub invocation: u64,
    pub request: EffectRequest,
    /// When it started, on the run's clock (Unix milliseconds).
    pub started_unix_milliseconds: u64,
    /// How far its retry plan got (its last attempt begun), when it retries.
    pub progress: Option<crate::effects::PlanProgress>,
    /// Its outcome is on the external queue, not yet handled: it is still the owner's, and
    /// leaving the owner takes the outcome off the queue.
    pub arrived: bool,
    /// Dropping it, or sending `true`, cancels the effect.
    cancel: watch::Sender<bool>,
}

impl RunningEffect {
    pub(crate) fn cancel(self) -> RunningEffect {
        let _ = self.cancel.send(true);
        self
    }
}

/// A child protocol running for an `invoke` of a state.
struct RunningChild {
    id: Arc<str>,
    task: tokio::task::JoinHandle<()>,
    /// Its external queue, when it takes events (`InvokeNode::takes_events`).
    inbox: Option<mpsc::UnboundedSender<Event>>,
    autoforward: bool,
    /// The events it declares, if it does: others are not forwarded to it.
    declared_events: Option<Arc<DeclaredEvents>>,
    /// Its inputs, and its last committed step (durable parents only), for the parent's
    /// snapshot.
    inputs: Vec<serde_json::Value>,
    last_step: Option<ChildSnapshot>,
    /// Its place in its tree's count of live children, given back when it is dropped.
    _slot: super::tree::ChildSlot,
}

/// What the parent keeps of a child it starts: its queue, whether it gets the parent's
/// external events, its inputs, and (resumed) the step it continues from.
pub(crate) struct ChildQueue {
    pub inbox: Option<mpsc::UnboundedSender<Event>>,
    pub autoforward: bool,
    pub declared_events: Option<Arc<DeclaredEvents>>,
    pub inputs: Vec<serde_json::Value>,
    pub last_step: Option<ChildSnapshot>,
    /// Its place among its tree's live children.
    pub slot: super::tree::ChildSlot,
}

/// The effects and children an instance has running. Small: most instances have none.
#[derive(Default)]
pub(crate) struct Running {
    effects: Vec<RunningEffect>,
    children: Vec<RunningChild>,
    /// Maps started whose completion has not been handled; their items are among `effects`.
    pub(crate) maps: Vec<super::fan_out::RunningMap>,
    /// The invocation number the next start gets.
    next_invocation: u64,
}

impl Running {
    pub fn is_empty(&self) -> bool {
        self.effects.is_empty() && self.children.is_empty() && self.maps.is_empty()
    }

    /// Takes the next invocation number for something other than an effect (a map).
    pub fn allocate_invocation(&mut self) -> u64 {
        let invocation = self.next_invocation;
        self.next_invocation += 1;
        invocation
    }

    pub fn effects(&self) -> &[RunningEffect] {
        &self.effects
    }

    /// Invocations started so far (the next one's number).
    pub fn invocations(&self) -> u64 {
        self.next_invocation
    }

    /// Numbers invocations on from `next` (a resumed run's count).
    pub fn continue_from(&mut self, next: u64) {
        self.next_invocation = self.next_invocation.max(next);
    }

    /// The invocation number the next effect started gets.
    pub fn next_invocation(&self) -> u64 {
        self.next_invocation
    }

    /// Records a start: its invocation number and the cancellation its task watches.
    pub fn start(
        &mut self,
        request: EffectRequest,
        started_unix_milliseconds: u64,
        progress: Option<crate::effects::PlanProgress>,
    ) -> (u64, Cancellation) {
        let invocation = self.next_invocation;
        self.next_invocation += 1;
        let (cancel, cancellation) = Cancellation::new();
        self.effects.push(RunningEffect {
            invocation,
            request,
            started_unix_milliseconds,
            progress,
            arrived: false,
            cancel,
        });
        (invocation, cancellation)
    }

    /// Records that `invocation`'s retry plan began another attempt; false when it no longer
    /// runs.
    pub fn progressed(&mut self, invocation: u64, progress: crate::effects::PlanProgress) -> bool {
        let Some(effect) = self
            .effects
            .iter_mut()
            .find(|effect| effect.invocation == invocation)
        else {
            return false;
        };
        effect.progress = Some(progress);
        true
    }

    /// Marks the outcome of `invocation` as queued for delivery; false when the effect no
    /// longer runs (a cancelled one's outcome is dropped) or its outcome already arrived.
    pub fn arrive(&mut self, invocation: u64) -> bool {
        let Some(effect) = self
            .effects
            .iter_mut()
            .find(|effect| effect.invocation == invocation && !effect.arrived)
        else {
            return false;
        };
        effect.arrived = true;
        true
    }

    /// Takes the effect of `invocation` out: its outcome is being handled, or recorded after
    /// the run's end.
    pub fn finish(&mut self, invocation: u64) -> Option<RunningEffect> {
        let position = self
            .effects
            .iter()
            .position(|effect| effect.invocation == invocation)?;
        Some(self.effects.remove(position))
    }

    /// Cancels the effects `state` owns (not those scoped to the run) and returns them, in the
    /// order they started.
    pub fn cancel_owned_by(&mut self, state: StateId) -> Vec<RunningEffect> {
        let owned = |effect: &RunningEffect| {
            effect.request.owner == state && effect.request.scope == EffectScope::State
        };
        if !self.effects.iter().any(owned) {
            return Vec::new();
        }
        let (cancelled, kept) = std::mem::take(&mut self.effects)
            .into_iter()
            .partition(|effect| owned(effect));
        self.effects = kept;
        cancelled.into_iter().map(RunningEffect::cancel).collect()
    }

    /// Records a child protocol's task; a child of the same invoke id still running is
    /// superseded (stopped) and returned true.
    pub fn start_child(
        &mut self,
        id: Arc<str>,
        task: tokio::task::JoinHandle<()>,
        queue: ChildQueue,
    ) -> bool {
        let superseded = self.stop_child(&id);
        self.children.push(RunningChild {
            id,
            task,
            inbox: queue.inbox,
            autoforward: queue.autoforward,
            declared_events: queue.declared_events,
            inputs: queue.inputs,
            last_step: queue.last_step,
            _slot: queue.slot,
        });
        superseded
    }

    /// Records a running child's committed step (its state is its own row's, not kept here);
    /// false when no such child runs.
    pub fn child_stepped(
        &mut self,
        id: &str,
        sequence: u64,
        committed_unix_milliseconds: u64,
    ) -> bool {
        let Some(child) = self.children.iter_mut().find(|child| &*child.id == id) else {
            return false;
        };
        child.last_step = Some(ChildSnapshot {
            id: id.to_string(),
            inputs: child.inputs.clone(),
            sequence,
            committed_unix_milliseconds,
            snapshot: None,
        });
        true
    }

    /// The children's last committed steps, for the parent's snapshot: each named without its
    /// state, which its own row keeps.
    pub fn child_snapshots(&self) -> Vec<ChildSnapshot> {
        self.children
            .iter()
            .filter_map(|child| child.last_step.as_ref())
            .map(|step| ChildSnapshot {
                id: step.id.clone(),
                inputs: step.inputs.clone(),
                sequence: step.sequence,
                committed_unix_milliseconds: step.committed_unix_milliseconds,
                snapshot: None,
            })
            .collect()
    }

    pub fn has_children(&self) -> bool {
        !self.children.is_empty()
    }

    /// Whether the child of invoke `id` is running.
    pub fn has_child(&self, id: &str) -> bool {
        self.children.iter().any(|child| &*child.id == id)
    }

    /// Puts `event` on the queue of the child of invoke `id`; false when no such child runs or
    /// it takes no events.
    pub fn send_to_child(&self, id: &str, event: Event) -> bool {
        self.children
            .iter()
            .find(|child| &*child.id == id)
            .and_then(|child| child.inbox.as_ref())
            .is_some_and(|inbox| inbox.send(event).is_ok())
    }

    /// Gives every child with `autoforward` a copy of an external event its parent takes,
    /// unless the child declares its events and not this one: forwarding is the parent's
    /// choice of all its input, not a message the child was meant to understand.
    pub fn autoforward(&self, event: &Event) {
        let takes = |child: &&RunningChild| {
            child.autoforward
                && child
                    .declared_events
                    .as_ref()
                    .is_none_or(|declared| declared.schema(&event.name).is_some())
        };
        for child in self.children.iter().filter(takes) {
            if let Some(inbox) = &child.inbox {
                let _ = inbox.send(event.clone());
            }
        }
    }

    /// Stops a child protocol: its task is dropped, and with it its own running effects, whose
    /// cancellations fire. False when no such child runs.
    pub fn stop_child(&mut self, id: &str) -> bool {
        let Some(position) = self.children.iter().position(|child| &*child.id == id) else {
            return false;
        };
        // Dropped: `RunningChild`'s drop aborts its task.
        self.children.remove(position);
        true
    }

    /// Takes a child's outcome: true when the child was still running (so the outcome is due).
    pub fn child_finished(&mut self, id: &str) -> bool {
        match self.children.iter().position(|child| &*child.id == id) {
            Some(position) => {
                self.children.remove(position);
                true
            }
            None => false,
        }
    }
}

impl Drop for RunningChild {
    fn drop(&mut self) {
        // A child outlives nothing: when its parent's host goes, so does it.
        self.task.abort();
    }
}
