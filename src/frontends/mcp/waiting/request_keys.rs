//! The keys of a waiting run's input requests, `EVENT@STEP`: the same while the request stands (timer and effect steps between), new once the run took an event it asked for or what it asks changed.

use serde_json::Value;

use crate::frontends::mcp::runs::host::Host;
use crate::frontends::mcp::runs::report::{RunView, events_now};

/// What a run asked for when its requests were last keyed, and from which step: the request
/// for each event is keyed `EVENT@since` while the run asks for the same events, quoting the
/// same directives.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The events asked for, in the order of the report's `events`.
    events: Vec<String>,
    /// How many directives the run had emitted: a request quotes the latest of them.
    directives: usize,
    /// The run's latest committed step when these requests were first keyed.
    since: u64,
}

/// The key of the request for `event` (an entry of a report's `events`) made at step `since`.
pub fn request_key(event: &Value, since: u64) -> String {
    format!("{}@{since}", event["name"].as_str().unwrap_or_default())
}

/// The names in a report's `events`.
fn event_names(events: &Value) -> Vec<String> {
    events
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|event| event["name"].as_str().map(String::from))
        .collect()
}

impl RunView {
    /// The step the run's current requests are keyed by, given its `events` now and its latest
    /// committed step `step`: the step at which the same request was first keyed, or `step`
    /// when it asks anew (an event it asked for was taken, or its events or the directives a
    /// request quotes changed). So a key is never reused for another request.
    pub fn request_step(&mut self, events: &Value, step: u64) -> u64 {
        let events = event_names(events);
        let directives = self.directives_emitted();
        match &self.asked {
            Some(asked) if asked.events == events && asked.directives == directives => asked.since,
            _ => {
                self.asked = Some(Asked {
                    events,
                    directives,
                    since: step,
                });
                step
            }
        }
    }

    /// A step took `event`: a request for it is answered, so the run asks anew.
    pub(in crate::frontends::mcp) fn took(&mut self, event: &str) {
        if self
            .asked
            .as_ref()
            .is_some_and(|asked| asked.events.iter().any(|asked| asked == event))
        {
            self.asked = None;
        }
    }

    /// Every directive the run emitted, those dropped from the view included.
    fn directives_emitted(&self) -> usize {
        self.directives.len() + self.dropped_directives
    }
}

impl Host {
    /// Refuses `event` as the answer to the request keyed `EVENT@since` unless that request
    /// still stands on `run` (a live run that has not ended) now, on the host's thread: no
    /// event sent to the run waits to be committed, and the run asks for the same events,
    /// quoting the same directives, as when the key was made.
    pub(in crate::frontends::mcp) fn check_request_stands(
        &self,
        run: &str,
        event: &str,
        since: u64,
    ) -> Result<(), String> {
        let key = format!("{event}@{since}");
        let stale = |why: &str| {
            Err(format!(
                "the request `{key}` of run `{run}` is no longer outstanding: {why}; read the \
                 run again and answer what it asks now"
            ))
        };
        if self
            .waiters
            .borrow()
            .values()
            .any(|waiting| waiting.run == run)
        {
            return stale("an event sent to the run is being delivered");
        }
        let Some(live) = self.runs.get(run) else {
            return stale("the run is not live in this server");
        };
        let view = live.view.borrow();
        if view.status() != "running" {
            return stale(&format!("the run has ended ({})", view.status()));
        }
        let events = event_names(&events_now(&live.machine, &view.states));
        let stands = view.asked.as_ref().is_some_and(|asked| {
            asked.since == since
                && asked.events == events
                && asked.directives == view.directives_emitted()
                && asked.events.iter().any(|asked| asked == event)
        });
        if !stands {
            return stale("the run took an event it asked for, or what it asks changed");
        }
        Ok(())
    }
}
