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
    /// The child protocol the line comes from, as the invoke ids down to it (`review[3]`,
    /// `kid/grandkid`); `None` for the run's own: several children of one map log the same
    /// words, and only this tells them apart.
    pub from: Option<Arc<str>>,
}
