//! `serve`'s `await` lines: the sender's later lines wait until an instance's state is active, the instance ends, or the wait times out; a line says which.

use tokio::time::Instant;

use super::Fleet;
use super::commit::write_line;
use crate::runtime::run::awaiting::AwaitEnd;
use crate::runtime::run::input::LineOrigin;
use crate::runtime::run::input::{DEFAULT_AWAIT_TIMEOUT, parse_await};

/// An `await` line still waiting.
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

    /// The client whose later lines the wait holds: `None` for stdin, one stream.
    pub(super) fn client(&self) -> Option<u64> {
        self.origin.map(|origin| origin.client)
    }
}

/// The most lines held behind `await` lines at once; past it input is not read until a wait
/// ends (the lines stay queued with their sender).
pub(super) const MAX_HELD_LINES: usize = 4_096;

impl Fleet {
    /// Whether an `await` of `client` (`None`: stdin) still waits, so its later lines wait too.
    pub(super) fn awaits_client(&self, client: Option<u64>) -> bool {
        self.awaiting
            .iter()
            .any(|awaiting| awaiting.client() == client)
    }

    /// Whether input is read now: not while stdin's `await` waits (stdin is one stream, read
    /// in order), nor while the lines held behind waits are at their bound.
    pub(super) fn reads_input(&self) -> bool {
        !self.awaits_client(None) && self.held.len() < MAX_HELD_LINES
    }

    /// The earliest deadline of the waits.
    pub(super) fn await_deadline(&self) -> Option<Instant> {
        self.awaiting.iter().map(Awaiting::deadline).min()
    }

    /// `{"instance": ID, "await": STATE, "timeout": "30s"}`: the sender's later lines wait
    /// until the live instance `ID` is in `STATE` (answered at once when it is already); other
    /// clients' lines go on.
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
        self.awaiting.push(Awaiting {
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

    /// Ends each wait whose instance is in the state awaited, or has ended; then the lines its
    /// client sent meanwhile are handled, up to that client's next `await`.
    pub(super) fn settle_await(&mut self) {
        let mut index = 0;
        while index < self.awaiting.len() {
            let awaiting = &self.awaiting[index];
            let end = match (awaiting.end, self.members[awaiting.slot].as_deref()) {
                (Some(end), _) => Some(end),
                (None, None) => Some(AwaitEnd::Ended),
                (None, Some(member)) if member.interpreter.is_active(&awaiting.state) => {
                    Some(AwaitEnd::Reached)
                }
                (None, Some(_)) => None,
            };
            match end {
                // Ending a wait may start others (held lines) and end them at once: look again
                // from the start.
                Some(end) => {
                    self.end_await(index, end);
                    index = 0;
                }
                None => index += 1,
            }
        }
    }

    /// The waits whose timeouts passed: a line says so for each, and their clients go on.
    pub(super) fn await_timed_out(&mut self) {
        let now = Instant::now();
        while let Some(index) = self
            .awaiting
            .iter()
            .position(|awaiting| awaiting.deadline <= now)
        {
            self.end_await(index, AwaitEnd::TimedOut);
        }
    }

    fn end_await(&mut self, index: usize, end: AwaitEnd) {
        let awaiting = self.awaiting.remove(index);
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
        let client = awaiting.client();
        while !self.awaits_client(client)
            && let Some(position) = self
                .held
                .iter()
                .position(|(_, origin)| origin.map(|origin| origin.client) == client)
        {
            let (line, origin) = self.held.remove(position).expect("a held line");
            self.line_number += 1;
            self.line_origin = origin;
            match line {
                Ok(line) => self.accept_line(&line),
                Err(message) => self.line_problem(&message),
            }
        }
    }
}

/// The instance in `slot` finished in `state`, before the fleet forgets it: each wait on it
/// ends `Reached` when it finished in the awaited state, else `Ended`.
pub(super) fn note_finished(awaiting: &mut [Awaiting], slot: usize, state: Option<&str>) {
    for awaiting in awaiting.iter_mut().filter(|awaiting| awaiting.slot == slot) {
        awaiting.end = Some(if state == Some(awaiting.state.as_str()) {
            AwaitEnd::Reached
        } else {
            AwaitEnd::Ended
        });
    }
}
