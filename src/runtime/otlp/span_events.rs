//! A run's logs and directives as span events: of the span of the child protocol they came from, else of the innermost state visit open, else of the root; secrets masked.

use super::spans::RunTrace;
use opentelemetry::KeyValue;
use opentelemetry::trace::Event;
use serde_json::Value;
use std::time::SystemTime;

impl RunTrace {
    /// A log record as an event of the innermost state visit (of its child's span, for a child
    /// protocol's): its level, message and tags, its fields as JSON, secrets masked.
    pub fn log(&mut self, record: &crate::pipeline::actions::LogRecord) {
        let fields: serde_json::Map<String, Value> = record
            .fields
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_json()))
            .collect();
        let tags: Vec<opentelemetry::StringValue> = record
            .tags
            .iter()
            .map(|tag| opentelemetry::StringValue::from(tag.to_string()))
            .collect();
        let mut attributes = vec![
            KeyValue::new("log.level", format!("{:?}", record.level).to_lowercase()),
            KeyValue::new(
                "log.message",
                crate::base::secrets::mask(&record.message).into_owned(),
            ),
            KeyValue::new(
                "protocol_run.tags",
                opentelemetry::Value::Array(tags.into()),
            ),
        ];
        if !fields.is_empty() {
            let fields = Value::Object(fields);
            attributes.push(KeyValue::new(
                "protocol_run.fields",
                crate::base::secrets::mask_json(&fields).to_string(),
            ));
        }
        self.event(record.from.as_deref(), "log", attributes);
    }

    /// A directive as an event of the innermost state visit (of its child's span, for a child
    /// protocol's), secrets masked.
    pub fn directive(&mut self, directive: &Value) {
        let attributes = vec![
            KeyValue::new(
                "protocol_run.directive",
                directive["type"].as_str().unwrap_or_default().to_string(),
            ),
            KeyValue::new(
                "protocol_run.body",
                crate::base::secrets::mask_json(directive).to_string(),
            ),
        ];
        self.event(directive["from"].as_str(), "directive", attributes);
    }

    /// An event of the span of the child protocol it came `from` (`kid`, or `kid/grandkid`
    /// for one of that child's own), else of the innermost state visit.
    fn event(&mut self, from: Option<&str>, name: &'static str, attributes: Vec<KeyValue>) {
        let event = Event::new(name, SystemTime::now(), attributes, 0);
        // The innermost child whose span is open: `kid/grandkid`'s, else `kid`'s.
        let mut path = from;
        while let Some(child) = path {
            if let Some(index) = self.position(&super::nesting::child_key(child)) {
                self.open[index].events.push(event);
                return;
            }
            path = child.rsplit_once('/').map(|(parent, _)| parent);
        }
        match self.current_state() {
            Some(span) => span.events.push(event),
            None => self.root_events.push(event),
        }
    }
}
