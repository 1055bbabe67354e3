//! A `log` action's record, as the engine hands it to whatever prints or keeps it.

use std::sync::Arc;

use crate::base::model::action::LogLevel;
use crate::base::value::Value;

/// A resolved log line.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    pub level: LogLevel,
    pub message: String,
    pub tags: Arc<[Arc<str>]>,
    pub fields: Vec<(Arc<str>, Value)>,
}
