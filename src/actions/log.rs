//! `log`: a message with level, tags and fields, resolved from the scope and handed to the host.

use std::sync::Arc;

use crate::compile::Compiler;
use crate::compile::expression::{EvaluationError, Template, ValueTemplate};
use crate::model::action::{LogAction, LogLevel};
use crate::value::Value;

use super::Execution;

#[derive(Debug)]
pub struct Log {
    level: LogLevel,
    message: Template,
    tags: Arc<[Arc<str>]>,
    fields: Vec<(Arc<str>, ValueTemplate)>,
}

/// A resolved log line.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    pub level: LogLevel,
    pub message: String,
    pub tags: Arc<[Arc<str>]>,
    pub fields: Vec<(Arc<str>, Value)>,
}

impl Log {
    pub fn compile(action: &LogAction, compiler: &mut Compiler, pointer: &str) -> Option<Log> {
        let message = compiler.template(&action.log, &format!("{pointer}/log"));
        let mut fields = Vec::with_capacity(action.fields.len());
        let mut fields_ok = true;
        for (name, value) in &action.fields {
            let field_pointer = format!(
                "{pointer}/fields/{}",
                crate::load::yaml::escape_pointer_token(name)
            );
            match compiler.value_template(value, &field_pointer) {
                Some(template) => fields.push((Arc::from(name.as_str()), template)),
                None => fields_ok = false,
            }
        }
        Some(Log {
            level: action.level.unwrap_or(LogLevel::Info),
            message: message?,
            tags: action
                .tags
                .iter()
                .map(|tag| Arc::from(tag.trim_start_matches('#')))
                .collect(),
            fields: if fields_ok { fields } else { return None },
        })
    }

    /// Pure: renders the message and fields.
    pub fn resolve(&self, execution: &Execution) -> Result<LogRecord, EvaluationError> {
        execution.with_scope(|scope| {
            Ok(LogRecord {
                level: self.level,
                message: self.message.render(scope)?,
                tags: self.tags.clone(),
                fields: self
                    .fields
                    .iter()
                    .map(|(name, value)| Ok((name.clone(), value.render(scope)?)))
                    .collect::<Result<_, EvaluationError>>()?,
            })
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let record = self.resolve(execution)?;
        execution.host.log(record);
        Ok(())
    }
}
