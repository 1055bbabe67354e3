//! Log output: `log` actions become `tracing` events; this layer prints them for humans or as JSON.

use std::fmt::Write as _;
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use crate::base::log_record::LogRecord;
use crate::base::model::action::LogLevel;
use crate::base::text::escape_controls;

/// The `tracing` target of protocol log lines.
pub const LOG_TARGET: &str = "protocol_run::log";

/// How log lines are printed on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `TIME LEVEL message #tag key=value`.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

/// Emits a record as a `tracing` event; `time` is the (possibly virtual) RFC 3339 timestamp.
pub fn emit(record: &LogRecord, time: &str, run_id: &str) {
    let tags: Vec<&str> = record.tags.iter().map(|tag| &**tag).collect();
    let tags = serde_json::to_string(&tags).unwrap_or_default();
    let fields = serde_json::Value::Object(
        record
            .fields
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_json()))
            .collect(),
    )
    .to_string();
    let from = record.from.as_deref().unwrap_or_default();
    macro_rules! event_at {
        ($level:expr) => {
            tracing::event!(target: LOG_TARGET, $level, message = %record.message, tags = %tags, fields = %fields, time = %time, run = %run_id, from = %from)
        };
    }
    match record.level {
        LogLevel::Trace => event_at!(tracing::Level::TRACE),
        LogLevel::Debug => event_at!(tracing::Level::DEBUG),
        LogLevel::Info => event_at!(tracing::Level::INFO),
        LogLevel::Warn => event_at!(tracing::Level::WARN),
        LogLevel::Error => event_at!(tracing::Level::ERROR),
    }
}

/// Prints protocol log events on stderr in the chosen format.
pub struct LogLayer {
    pub format: LogFormat,
}

#[derive(Default)]
struct Collected {
    message: String,
    tags: Vec<String>,
    fields: serde_json::Map<String, serde_json::Value>,
    time: String,
    run: String,
    /// The child protocol the line comes from; empty for the run's own.
    from: String,
}

impl Visit for Collected {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        match field.name() {
            "message" => self.message = text,
            "tags" => self.tags = serde_json::from_str(&text).unwrap_or_default(),
            "fields" => {
                if let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(&text) {
                    self.fields = fields;
                }
            }
            "time" => self.time = text,
            "run" => self.run = text,
            "from" => self.from = text,
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for LogLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _context: Context<'_, S>) {
        if event.metadata().target() != LOG_TARGET {
            return;
        }
        let mut collected = Collected::default();
        event.record(&mut collected);
        // The one place every log line passes: secrets are masked here, in either format.
        collected.message = crate::base::secrets::mask(&collected.message).into_owned();
        for tag in &mut collected.tags {
            *tag = crate::base::secrets::mask(tag).into_owned();
        }
        if crate::base::secrets::active() {
            let mut fields = serde_json::Value::Object(std::mem::take(&mut collected.fields));
            crate::base::secrets::mask_json_in_place(&mut fields);
            if let serde_json::Value::Object(fields) = fields {
                collected.fields = fields;
            }
        }
        let level = event.metadata().level().as_str();
        let line = match self.format {
            LogFormat::Human => {
                // Text from event data must not forge a line or drive the terminal.
                let mut line = format!(
                    "{} {level:<5} {}{}",
                    collected.time,
                    from_prefix(&collected.from),
                    escape_controls(&collected.message)
                );
                for tag in &collected.tags {
                    let _ = write!(line, " #{}", escape_controls(tag));
                }
                for (name, value) in &collected.fields {
                    match value {
                        serde_json::Value::String(text) => {
                            let _ = write!(line, " {name}={text:?}");
                        }
                        other => {
                            let _ = write!(line, " {name}={other}");
                        }
                    }
                }
                line
            }
            LogFormat::Json => {
                let mut line = serde_json::json!({
                    "time": collected.time,
                    "level": level,
                    "run": collected.run,
                    "message": collected.message,
                    "tags": collected.tags,
                    "fields": collected.fields,
                });
                if !collected.from.is_empty() {
                    line["from"] = collected.from.into();
                }
                line.to_string()
            }
        };
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{line}");
    }
}

/// What a human log line says before its message of where it comes from: `review[3]: ` for a
/// child protocol's line (the invoke ids down to it), nothing for the run's own.
pub fn from_prefix(from: &str) -> String {
    if from.is_empty() {
        String::new()
    } else {
        format!("{}: ", escape_controls(from))
    }
}
