//! The lifecycle of a run (loading → validating → running → finished | failed | aborted), as a
//! statig machine: its states really are fixed at compile time, so invalid moves are refused.

use statig::prelude::*;

/// What happens to a run, as the CLI reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleEvent {
    Loaded,
    Validated,
    Pause,
    Resume,
    Checkpoint,
    CheckpointWritten,
    Finished,
    Failed,
    Abort,
}

/// A move the lifecycle does not allow from its current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid lifecycle move: {event:?} while {state}")]
pub struct InvalidMove {
    pub event: LifecycleEvent,
    pub state: &'static str,
}

/// Shared storage of the lifecycle machine: remembers a refused move.
#[derive(Debug, Default)]
pub struct Lifecycle {
    /// A `Cell`, so the refusal can be read back through statig's shared `inner()` view.
    refused: std::cell::Cell<Option<LifecycleEvent>>,
}

#[state_machine(
    initial = "State::loading()",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl Lifecycle {
    #[state]
    fn loading(&mut self, event: &LifecycleEvent) -> Outcome<State> {
        match event {
            LifecycleEvent::Loaded => Transition(State::validating()),
            LifecycleEvent::Failed => Transition(State::failed()),
            other => self.refuse(*other),
        }
    }

    #[state]
    fn validating(&mut self, event: &LifecycleEvent) -> Outcome<State> {
        match event {
            LifecycleEvent::Validated => Transition(State::running()),
            LifecycleEvent::Failed => Transition(State::failed()),
            other => self.refuse(*other),
        }
    }

    #[state]
    fn running(&mut self, event: &LifecycleEvent) -> Outcome<State> {
        match event {
            LifecycleEvent::Pause => Transition(State::paused()),
            LifecycleEvent::Checkpoint => Transition(State::checkpointing()),
            LifecycleEvent::Finished => Transition(State::finished()),
            LifecycleEvent::Failed => Transition(State::failed()),
            LifecycleEvent::Abort => Transition(State::aborted()),
            other => self.refuse(*other),
        }
    }

    #[state]
    fn paused(&mut self, event: &LifecycleEvent) -> Outcome<State> {
        match event {
            LifecycleEvent::Resume => Transition(State::running()),
            LifecycleEvent::Checkpoint => Transition(State::checkpointing()),
            LifecycleEvent::Abort => Transition(State::aborted()),
            other => self.refuse(*other),
        }
    }

    #[state]
    fn checkpointing(&mut self, event: &LifecycleEvent) -> Outcome<State> {
        match event {
            LifecycleEvent::CheckpointWritten => Transition(State::running()),
            LifecycleEvent::Failed => Transition(State::failed()),
            LifecycleEvent::Abort => Transition(State::aborted()),
            other => self.refuse(*other),
        }
    }

    #[state]
    fn finished(&mut self, event: &LifecycleEvent) -> Outcome<State> {
        self.refuse(*event)
    }

    #[state]
    fn failed(&mut self, event: &LifecycleEvent) -> Outcome<State> {
        self.refuse(*event)
    }

    #[state]
    fn aborted(&mut self, event: &LifecycleEvent) -> Outcome<State> {
        self.refuse(*event)
    }
}

impl Lifecycle {
    fn refuse(&mut self, event: LifecycleEvent) -> Outcome<State> {
        self.refused.set(Some(event));
        Handled
    }
}

/// A run's lifecycle: each move is checked.
pub struct RunLifecycle {
    machine: statig::blocking::InitializedStateMachine<Lifecycle>,
}

impl Default for RunLifecycle {
    fn default() -> Self {
        RunLifecycle {
            machine: Lifecycle::default().uninitialized_state_machine().init(),
        }
    }
}

impl RunLifecycle {
    /// Applies a move, or refuses it without changing state.
    pub fn advance(&mut self, event: LifecycleEvent) -> Result<(), InvalidMove> {
        let state = self.state_name();
        self.machine.handle(&event);
        match self.machine.inner().refused.take() {
            Some(event) => Err(InvalidMove { event, state }),
            None => Ok(()),
        }
    }

    pub fn state_name(&self) -> &'static str {
        match self.machine.state() {
            State::Loading {} => "loading",
            State::Validating {} => "validating",
            State::Running {} => "running",
            State::Paused {} => "paused",
            State::Checkpointing {} => "checkpointing",
            State::Finished {} => "finished",
            State::Failed {} => "failed",
            State::Aborted {} => "aborted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_moves_through_its_lifecycle() {
        let mut lifecycle = RunLifecycle::default();
        assert_eq!(lifecycle.state_name(), "loading");
        lifecycle.advance(LifecycleEvent::Loaded).unwrap();
        lifecycle.advance(LifecycleEvent::Validated).unwrap();
        lifecycle.advance(LifecycleEvent::Pause).unwrap();
        lifecycle.advance(LifecycleEvent::Resume).unwrap();
        lifecycle.advance(LifecycleEvent::Finished).unwrap();
        assert_eq!(lifecycle.state_name(), "finished");
    }

    #[test]
    fn invalid_moves_are_refused() {
        let mut lifecycle = RunLifecycle::default();
        let refused = lifecycle.advance(LifecycleEvent::Finished).unwrap_err();
        assert_eq!(refused.state, "loading");
        assert_eq!(lifecycle.state_name(), "loading");
        lifecycle.advance(LifecycleEvent::Failed).unwrap();
        assert!(lifecycle.advance(LifecycleEvent::Resume).is_err());
        assert_eq!(lifecycle.state_name(), "failed");
    }
}
