//! Where a run's child protocols and its maps' items go in its span tree: an invoke's child under the visit of the state that declares it, a map's item (a child protocol or an effect) under its map.

use super::spans::RunTrace;
use crate::runtime::run::driver::ChildNote;
use opentelemetry::trace::Status;
use opentelemetry_sdk::trace::IdGenerator;
use serde_json::Value;

impl RunTrace {
    /// The open span of the map whose item `id` is (`MAP[i]`), if `id` names one.
    pub(super) fn map_of_item(&self, id: &str) -> Option<String> {
        let map = id.strip_suffix(']')?.rsplit_once('[')?.0;
        self.open
            .iter()
            .rev()
            .find(|span| {
                span.key.starts_with(&self.scoped("map:"))
                    && span.attributes["protocol_run.map"] == map
            })
            .map(|span| span.span.clone())
    }

    /// Child protocol `id` started: an invoke of the state `owner` (its span `invoke ID`
    /// under that state's visit), or a map's item (`item MAP[i]` under its map).
    pub fn child_started(&mut self, id: &str, owner: Option<&str>) {
        let (name, parent) = match owner {
            Some(owner) => (
                format!("invoke {id}"),
                self.span_of(&self.scoped(&format!("state:{owner}"))),
            ),
            None => (format!("item {id}"), self.map_of_item(id)),
        };
        let mut attributes = serde_json::Map::new();
        attributes.insert("protocol_run.invoke".into(), id.into());
        let span = self.ids.new_span_id();
        let key = self.scoped(&format!("child:{id}"));
        self.begin_span(key, span, parent, name, attributes);
    }

    /// An `invoke` telemetry entry: the child ended, with the event its parent takes (`done.`
    /// for a success), a map item's status (`ok` for a success), or how it was stopped
    /// (`cancelled`, `superseded`).
    pub fn child_ended(&mut self, fields: &Value) {
        let Some(id) = fields["id"].as_str() else {
            return;
        };
        let (outcome, succeeded) = if let Some(event) = fields["event"].as_str() {
            (event, event.starts_with("done."))
        } else if let Some(status) = fields["map_item"].as_str() {
            (status, status == "ok")
        } else {
            (fields["outcome"].as_str().unwrap_or("ended"), false)
        };
        let status = if succeeded {
            Status::Ok
        } else {
            Status::error(outcome.to_string())
        };
        let more = [("protocol_run.outcome", Value::from(outcome))];
        // What is still open inside it (its final state's visit) ends with it.
        let path = self.scoped(id);
        let inside: Vec<String> = self
            .open
            .iter()
            .filter(|span| span.key.starts_with(&format!("{path}/")))
            .map(|span| span.key.clone())
            .collect();
        for key in inside.iter().rev() {
            self.end_span(key, Status::Unset, &[]);
        }
        self.end_span(&self.scoped(&format!("child:{id}")), status, &more);
    }

    /// `key` as the spans of the child being told (`scope`) are keyed: `kid/state:working`.
    pub(super) fn scoped(&self, key: &str) -> String {
        match &self.scope {
            Some(scope) => format!("{scope}/{key}"),
            None => key.to_string(),
        }
    }

    /// What child protocol `path` did inside: its state visits under its own span, its
    /// effects, attempts, maps and children under them, as the run's own are.
    pub fn child_note(&mut self, path: &str, note: ChildNote) {
        self.scope = Some(path.to_string());
        match note {
            ChildNote::StateEntered(state) => self.state_entered(&state),
            ChildNote::StateExited(state) => self.state_exited(&state),
            ChildNote::StatesRestored(states) => {
                let states: Vec<&str> = states.iter().map(String::as_str).collect();
                self.states_restored(&states);
            }
            ChildNote::Record(kind, fields) => match kind.as_str() {
                "effect_started" => self.effect_started(&fields),
                "effect" => self.effect_ended(&fields),
                "map_started" => self.map_started(&fields),
                "map" => self.map_ended(&fields),
                "invoke" => self.child_ended(&fields),
                _ => {}
            },
            ChildNote::Attempt {
                invocation,
                attempt,
                timeout_ms,
            } => self.effect_attempt(invocation, attempt, timeout_ms),
            ChildNote::ChildStarted { id, owner } => self.child_started(&id, owner.as_deref()),
            // The child's telemetry, kept by the run's observer: its spans come from the notes
            // above.
            ChildNote::Telemetry { .. } => {}
        }
        self.scope = None;
    }
}

/// The key of the span of child protocol `path`: `child:kid`, `kid/child:grandkid`.
pub(super) fn child_key(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((parent, id)) => format!("{parent}/child:{id}"),
        None => format!("child:{path}"),
    }
}
