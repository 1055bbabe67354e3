//! One run's span tree: the run's root span (its own trace or a child of `TRACEPARENT`'s), the state visits, effects and their attempts and maps under it, logs and directives as span events; the spans still open kept with the run's telemetry, so a resumed run ends them as interrupted.

use super::Export;
use crate::base::trace_context::{EffectTrace, TraceParent, from_hex, to_hex};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{KeyValue, trace::Event};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The telemetry entry kind that lists the spans open when the steps it goes with committed.
pub const OPEN_SPANS_KIND: &str = "trace";

/// The root span's key: it is never listed open, a resumed run sends it when it finishes.
const ROOT_KEY: &str = "run";

/// The trace kept with a run (`Store::save_trace`): a resumed or taken-over run goes on in it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TraceRecord {
    pub trace_id: String,
    /// The run's root span.
    pub span_id: String,
    /// The span of the `TRACEPARENT` the run started under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// When the run's root span started, in Unix milliseconds.
    pub started: u64,
}

/// A span begun and not ended yet, as kept with the run's telemetry.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct OpenSpan {
    /// What it stands for: `state:ID`, `effect:INVOCATION`, `attempt:INVOCATION`, `map:INVOCATION`.
    pub(super) key: String,
    pub(super) span: String,
    parent: String,
    name: String,
    /// Unix milliseconds.
    start: u64,
    #[serde(default)]
    pub(super) attributes: serde_json::Map<String, Value>,
    #[serde(skip)]
    pub(super) events: Vec<Event>,
}

/// How a run's session ended, for the spans still open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// The run finished: its root span ends, with an error status unless `succeeded`.
    Finished { succeeded: bool },
    /// The run stopped and may be resumed: the open spans end `stopped`, the root goes on.
    Stopped,
}

/// One run's spans, sent to `export` as each ends.
pub struct RunTrace {
    export: Arc<Export>,
    run_id: String,
    protocol: String,
    trace_id: TraceId,
    root: SpanId,
    parent: SpanId,
    started: SystemTime,
    /// The seed of this session's effect attempt span ids (`attempt_span_id`).
    seed: u64,
    pub(super) open: Vec<OpenSpan>,
    pub(super) root_events: Vec<Event>,
    /// Whether `open` changed since `take_open_line` last said it.
    changed: bool,
    pub(super) ids: RandomIdGenerator,
    /// The child protocol (its path) whose note is being told (`child_note`): its spans' keys
    /// are under it, and its state visits under its own span.
    pub(super) scope: Option<String>,
}

fn unix_milliseconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

fn from_unix_milliseconds(milliseconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(milliseconds)
}

fn span_hex(id: SpanId) -> String {
    to_hex(&id.to_bytes())
}

fn parse_span(text: &str) -> SpanId {
    from_hex::<8>(text).map_or(SpanId::INVALID, SpanId::from_bytes)
}

/// A JSON value as an attribute value: strings and numbers as themselves, the rest as JSON text.
fn attribute(key: &str, value: &Value) -> KeyValue {
    let key = key.to_string();
    match value {
        Value::String(text) => KeyValue::new(key, text.clone()),
        Value::Bool(flag) => KeyValue::new(key, *flag),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => KeyValue::new(key, integer),
            None => KeyValue::new(key, number.as_f64().unwrap_or_default()),
        },
        other => KeyValue::new(key, other.to_string()),
    }
}

impl RunTrace {
    /// Starts tracing `run_id`: a new trace (a child of `parent` when given) recorded with the
    /// run, or, when `stored` is the trace it already has, that trace again, with the spans the
    /// last session left open (`open_at_stop`) ended `interrupted`.
    pub fn begin(
        export: Arc<Export>,
        run_id: &str,
        protocol: &str,
        stored: Option<TraceRecord>,
        parent: Option<TraceParent>,
        open_at_stop: Option<&str>,
    ) -> (RunTrace, TraceRecord) {
        let ids = RandomIdGenerator::default();
        let record = stored.unwrap_or_else(|| TraceRecord {
            trace_id: match parent {
                Some(parent) => to_hex(&parent.trace_id),
                None => to_hex(&ids.new_trace_id().to_bytes()),
            },
            span_id: span_hex(ids.new_span_id()),
            parent_span_id: parent.map(|parent| to_hex(&parent.span_id)),
            started: unix_milliseconds(SystemTime::now()),
        });
        let seed = u64::from_be_bytes(ids.new_span_id().to_bytes());
        let mut trace = RunTrace {
            export,
            run_id: run_id.to_string(),
            protocol: protocol.to_string(),
            trace_id: from_hex::<16>(&record.trace_id)
                .map_or(TraceId::INVALID, TraceId::from_bytes),
            root: parse_span(&record.span_id),
            parent: record
                .parent_span_id
                .as_deref()
                .map_or(SpanId::INVALID, parse_span),
            started: from_unix_milliseconds(record.started),
            seed,
            open: Vec::new(),
            root_events: Vec::new(),
            changed: false,
            ids,
            scope: None,
        };
        if let Some(line) = open_at_stop {
            trace.end_interrupted(line);
        }
        (trace, record)
    }

    /// Ends, `interrupted`, the spans an `OPEN_SPANS_KIND` entry lists.
    fn end_interrupted(&mut self, line: &str) {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let Ok(spans) = serde_json::from_value::<Vec<OpenSpan>>(entry["open"].clone()) else {
            return;
        };
        let now = SystemTime::now();
        for span in spans {
            self.send(span, now, Status::error("interrupted"));
        }
    }

    /// Sends what is queued and waits for it: a process that ends with its run does so
    /// before it exits; a host of many runs leaves sending to the exporter's thread.
    pub fn flush(&self) {
        self.export.flush();
    }

    /// The trace child protocol `id` of the run joins (`Observer::child_trace_context`).
    pub fn child_trace_context(&self, id: &str) -> crate::base::trace_context::ChildTrace {
        crate::base::trace_context::ChildTrace {
            trace_id: self.trace_id.to_bytes(),
            seed: crate::base::trace_context::child_seed(self.seed, id),
        }
    }

    /// The seed of the attempt span ids of the run, or of the child being told (`scope`).
    fn scope_seed(&self) -> u64 {
        self.scope.as_deref().map_or(self.seed, |path| {
            path.split('/')
                .fold(self.seed, crate::base::trace_context::child_seed)
        })
    }

    /// The run traced.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// What an effect's process needs to name its attempts' spans.
    pub fn effect_trace(&self, invocation: u64) -> EffectTrace {
        EffectTrace {
            trace_id: self.trace_id.to_bytes(),
            seed: self.seed,
            invocation,
            attempt: 1,
        }
    }

    pub(super) fn position(&self, key: &str) -> Option<usize> {
        self.open.iter().rposition(|span| span.key == key)
    }

    pub(super) fn span_of(&self, key: &str) -> Option<String> {
        self.position(key)
            .map(|index| self.open[index].span.clone())
    }

    pub(super) fn begin_span(
        &mut self,
        key: String,
        span: SpanId,
        parent: Option<String>,
        name: String,
        attributes: serde_json::Map<String, Value>,
    ) {
        self.open.push(OpenSpan {
            key,
            span: span_hex(span),
            parent: parent
                .or_else(|| {
                    let scope = self.scope.as_deref()?;
                    self.span_of(&super::nesting::child_key(scope))
                })
                .unwrap_or_else(|| span_hex(self.root)),
            name,
            start: unix_milliseconds(SystemTime::now()),
            attributes,
            events: Vec::new(),
        });
        self.changed = true;
    }

    pub(super) fn end_span(&mut self, key: &str, status: Status, more: &[(&str, Value)]) {
        let Some(index) = self.position(key) else {
            return;
        };
        let mut span = self.open.remove(index);
        for (name, value) in more {
            span.attributes.insert((*name).to_string(), value.clone());
        }
        self.changed = true;
        self.send(span, SystemTime::now(), status);
    }

    fn send(&self, span: OpenSpan, end: SystemTime, status: Status) {
        let mut attributes = vec![KeyValue::new("protocol_run.run_id", self.run_id.clone())];
        attributes.extend(
            span.attributes
                .iter()
                .map(|(key, value)| attribute(key, value)),
        );
        let parent = parse_span(&span.parent);
        self.export.send(SpanData {
            span_context: self.context(parse_span(&span.span)),
            parent_span_id: parent,
            // The root's parent, when there is one, is another process's span.
            parent_span_is_remote: span.key == ROOT_KEY && parent != SpanId::INVALID,
            span_kind: SpanKind::Internal,
            name: span.name.into(),
            start_time: from_unix_milliseconds(span.start),
            end_time: end,
            attributes,
            dropped_attributes_count: 0,
            events: events(span.events),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.export.scope.clone(),
        });
    }

    fn context(&self, span: SpanId) -> SpanContext {
        SpanContext::new(
            self.trace_id,
            span,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        )
    }

    /// The innermost open state visit, where a log or a directive is told; `None`: the root.
    pub(super) fn current_state(&mut self) -> Option<&mut OpenSpan> {
        self.open
            .iter_mut()
            .rev()
            .find(|span| span.key.starts_with("state:"))
    }

    /// A restored run's active states: their visits go on in this session, as new spans
    /// marked `protocol_run.resumed`.
    pub fn states_restored(&mut self, states: &[&str]) {
        for state in states {
            self.state_entered(state);
            if let Some(span) = self.open.last_mut() {
                span.attributes
                    .insert("protocol_run.resumed".into(), true.into());
            }
        }
    }

    pub fn state_entered(&mut self, state: &str) {
        let span = self.ids.new_span_id();
        let mut attributes = serde_json::Map::new();
        attributes.insert("protocol_run.state".into(), state.into());
        self.begin_span(
            self.scoped(&format!("state:{state}")),
            span,
            None,
            format!("state {state}"),
            attributes,
        );
    }

    pub fn state_exited(&mut self, state: &str) {
        self.end_span(&self.scoped(&format!("state:{state}")), Status::Unset, &[]);
    }

    /// An `effect_started` telemetry entry: the effect's span, under its owner state's visit.
    pub fn effect_started(&mut self, fields: &Value) {
        let more = [
            ("protocol_run.kind", fields["kind"].clone()),
            ("protocol_run.owner", fields["owner"].clone()),
        ];
        self.begin_owned("effect", fields, &more);
    }

    /// A `map_started` entry: the map's span, under its owner state's visit.
    pub fn map_started(&mut self, fields: &Value) {
        self.begin_owned("map", fields, &[]);
    }

    /// The span of an effect or a map (`what`) its telemetry entry started, keyed by its
    /// invocation, under the visit of its owner state.
    fn begin_owned(&mut self, what: &str, fields: &Value, more: &[(&str, Value)]) {
        let Some(invocation) = fields["invocation"].as_u64() else {
            return;
        };
        let id = fields["id"].as_str().unwrap_or_default();
        let owner = fields["owner"].as_str().unwrap_or_default();
        // A map's item is under its map; anything else under its owner's visit.
        let parent = self
            .map_of_item(id)
            .or_else(|| self.span_of(&self.scoped(&format!("state:{owner}"))));
        let mut attributes = serde_json::Map::new();
        attributes.insert(format!("protocol_run.{what}"), id.into());
        attributes.insert("protocol_run.invocation".into(), invocation.into());
        for (key, value) in more {
            attributes.insert((*key).to_string(), value.clone());
        }
        let span = self.ids.new_span_id();
        self.begin_span(
            self.scoped(&format!("{what}:{invocation}")),
            span,
            parent,
            format!("{what} {id}"),
            attributes,
        );
    }

    /// An attempt of an effect begins (its first, or the next of its retry plan); the one
    /// before it, if any, ended in a failure the plan retried.
    pub fn effect_attempt(&mut self, invocation: u64, attempt: u32, timeout_ms: Option<u64>) {
        let key = self.scoped(&format!("attempt:{invocation}"));
        let Some(effect) = self.span_of(&self.scoped(&format!("effect:{invocation}"))) else {
            return;
        };
        if let Some(index) = self.position(&key) {
            if self.open[index].attributes["protocol_run.attempt"] == attempt {
                return;
            }
            self.end_span(
                &key,
                Status::error("retried"),
                &[("protocol_run.outcome", "retried".into())],
            );
        }
        let mut attributes = serde_json::Map::new();
        attributes.insert("protocol_run.invocation".into(), invocation.into());
        attributes.insert("protocol_run.attempt".into(), attempt.into());
        if let Some(timeout) = timeout_ms {
            attributes.insert("protocol_run.timeout_ms".into(), timeout.into());
        }
        // A child protocol's effects are numbered apart: their ids come from the child's seed,
        // as its effects' `TRACEPARENT` does.
        let span = SpanId::from_bytes(crate::base::trace_context::attempt_span_id(
            self.scope_seed(),
            invocation,
            attempt,
        ));
        self.begin_span(
            key,
            span,
            Some(effect),
            format!("attempt {attempt}"),
            attributes,
        );
    }

    /// An `effect` telemetry entry: its last attempt and the effect end with its outcome.
    pub fn effect_ended(&mut self, fields: &Value) {
        self.end_owned(&["attempt", "effect"], fields);
    }

    /// A `map` entry: the map ended.
    pub fn map_ended(&mut self, fields: &Value) {
        self.end_owned(&["map"], fields);
    }

    /// Ends the spans `keys` of the invocation a telemetry entry names, with its outcome:
    /// status Ok when `completed`, an error named by the outcome otherwise.
    fn end_owned(&mut self, keys: &[&str], fields: &Value) {
        let Some(invocation) = fields["invocation"].as_u64() else {
            return;
        };
        let outcome = fields["outcome"].as_str().unwrap_or("ended").to_string();
        let status = if outcome == "completed" {
            Status::Ok
        } else {
            Status::error(outcome.clone())
        };
        let more = [("protocol_run.outcome", Value::from(outcome))];
        for key in keys {
            self.end_span(
                &self.scoped(&format!("{key}:{invocation}")),
                status.clone(),
                &more,
            );
        }
    }

    /// The `OPEN_SPANS_KIND` entry's fields when the open spans changed since the last call.
    pub fn take_open_spans(&mut self) -> Option<Value> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        Some(json!({"open": self.open}))
    }

    /// Ends the spans still open and, when the run finished, its root span (queued for the
    /// exporter, which sends them from its own thread). The entry returned lists no open span: committed with the run, it tells a later
    /// resume that nothing was left open.
    pub fn end(&mut self, end: SessionEnd, attributes: &[(&str, Value)]) -> Value {
        let now = SystemTime::now();
        let status = match end {
            SessionEnd::Finished { .. } => Status::Unset,
            SessionEnd::Stopped => Status::error("stopped"),
        };
        while let Some(span) = self.open.pop() {
            self.send(span, now, status.clone());
        }
        if let SessionEnd::Finished { succeeded } = end {
            let root = OpenSpan {
                key: ROOT_KEY.into(),
                span: span_hex(self.root),
                parent: span_hex(self.parent),
                name: format!("run {}", self.protocol),
                start: unix_milliseconds(self.started),
                attributes: attributes
                    .iter()
                    .map(|(key, value)| ((*key).to_string(), value.clone()))
                    .chain([(
                        "protocol_run.protocol".to_string(),
                        Value::from(&*self.protocol),
                    )])
                    .collect(),
                events: std::mem::take(&mut self.root_events),
            };
            let status = if succeeded {
                Status::Ok
            } else {
                Status::error("failed")
            };
            self.send(root, now, status);
        }
        self.changed = false;
        json!({"open": []})
    }
}

fn events(events: Vec<Event>) -> SpanEvents {
    let mut span_events = SpanEvents::default();
    span_events.events = events;
    span_events
}
