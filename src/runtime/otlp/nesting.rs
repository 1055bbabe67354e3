//! Where a run's child protocols and its maps' items go in its span tree: an invoke's child under the visit of the state that declares it, a map's item (a child protocol or an effect) under its map.

use super::spans::RunTrace;
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
            .find(|span| span.key.starts_with("map:") && span.attributes["protocol_run.map"] == map)
            .map(|span| span.span.clone())
    }

    /// Child protocol `id` started: an invoke of the state `owner` (its span `invoke ID`
    /// under that state's visit), or a map's item (`item MAP[i]` under its map).
    pub fn child_started(&mut self, id: &str, owner: Option<&str>) {
        let (name, parent) = match owner {
            Some(owner) => (
                format!("invoke {id}"),
                self.span_of(&format!("state:{owner}")),
            ),
            None => (format!("item {id}"), self.map_of_item(id)),
        };
        let mut attributes = serde_json::Map::new();
        attributes.insert("protocol_run.invoke".into(), id.into());
        let span = self.ids.new_span_id();
        self.begin_span(format!("child:{id}"), span, parent, name, attributes);
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
        self.end_span(&format!("child:{id}"), status, &more);
    }
}
