//! `serve`'s `await` lines: input waits until an instance's state is active, the instance ends, or the wait times out; a line says which.

use tokio::time::Instant;

use super::{Fleet, write_line};
use crate::runtime::run::awaiting::AwaitEnd;
use crate::runtime::run::input::LineOrigin;
use crate::runtime::run::input::{DEFAULT_AWAIT_TIMEOUT, parse_await};

/// The `await` line input waits on.
pub(super) struct Awaiting {
    slot: usize,
    instance: Box<str>,
    state: String,
    timeout: std::time::Duration,
    deadline: Instant,
    /// Set when the instance finished: `Reached` if it finished in the awaited state.
    end: Option<AwaitEnd>,
    /// The client the line came from, answered when the wait ends.
    origin: Option<LineOrigin>,
}

impl Awaiting {
    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the wait is `client`'s, which is answered only when it ends.
    pub(super) fn is_from(&self, client: u64) -> bool {
        self.origin.is_some_and(|origin| origin.client == client)
    }
}

impl Fleet {
    /// `{"instance": ID, "await": STATE, "timeout": "30s"}`: input waits until the live
    /// instance `ID` is in `STATE` (answered at once when it is already).
    pub(super) fn accept_await(&mut self, instance: &str, state: &str, timeout: Option<&str>) {
        let mut fields = serde_json::Map::new();
        fields.insert("await".into(), state.into());
        if let Some(timeout) = timeout {
            fields.insert("timeout".into(), timeout.into());
        }
        let awaited = match parse_await(&self.machine_of(instance), &fields) {
            Ok(awaited) => awaited,
            Err(message) => return self.line_problem(&message),
        };
        let Some(slot) = self.by_name.get(instance).copied() else {
            return self.line_problem(&format!(
                "`await` names instance `{instance}`, which is not live in this host"
            ));
        };
        let timeout = if timeout.is_some() {
            awaited.timeout
        } else {
            DEFAULT_AWAIT_TIMEOUT
        };
        self.awaiting = Some(Awaiting {
            slot,
            instance: instance.into(),
            state: awaited.state,
            timeout,
            deadline: Instant::now() + timeout,
            end: None,
            origin: self.line_origin,
        });
        self.settle_await();
    }

    /// Ends the wait when its instance is in the state awaited, or has ended; then the lines
    /// held meanwhile are handled, up to the next `await`.
    pub(super) fn settle_await(&mut self) {
        let Some(awaiting) = &self.awaiting else {
            return;
        };
        let end = match (awaiting.end, self.members[awaiting.slot].as_deref()) {
            (Some(end), _) => end,
            (None, None) => AwaitEnd::Ended,
            (None, Some(member)) if member.interpreter.is_active(&awaiting.state) => {
                AwaitEnd::Reached
            }
            (None, Some(_)) => return,
        };
        self.end_await(end);
    }

    /// The wait's timeout passed: a line says so, and input goes on.
    pub(super) fn await_timed_out(&mut self) {
        self.end_await(AwaitEnd::TimedOut);
    }

    fn end_await(&mut self, end: AwaitEnd) {
        let Some(awaiting) = self.awaiting.take() else {
            return;
        };
        let mut line = serde_json::json!({
            "instance": &*awaiting.instance,
            "await": awaiting.state,
            "outcome": end.name(),
        });
        if end == AwaitEnd::TimedOut {
            line["timeout_ms"] = (awaiting.timeout.as_millis() as u64).into();
        }
        write_line(&mut self.output, &line);
        if let Some(origin) = awaiting.origin {
            if let Some(reply) = &mut self.await_reply {
                reply(origin, end.name());
            }
            self.handled_clients.push(origin.client);
        }
        while self.awaiting.is_none()
            && let Some((line, origin)) = self.held.pop_front()
        {
            self.line_number += 1;
            self.line_origin = origin;
            match line {
                Ok(line) => self.accept_line(&line),
                Err(message) => self.line_problem(&message),
            }
        }
    }
}

/// The instance in `slot` finished in `state`, before the fleet forgets it: the wait on it, if
/// any, ends `Reached` when it finished in the awaited state, else `Ended`.
pub(super) fn note_finished(awaiting: Option<&mut Awaiting>, slot: usize, state: Option<&str>) {
    if let Some(awaiting) = awaiting.filter(|awaiting| awaiting.slot == slot) {
        awaiting.end = Some(if state == Some(awaiting.state.as_str()) {
            AwaitEnd::Reached
        } else {
            AwaitEnd::Ended
        });
    }
}
