//! `log`: a message with level, tags and fields, resolved from the scope and handed to the host.

use std::sync::Arc;

use crate::base::model::action::{LogAction, LogLevel};
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Template, ValueTemplate};

use super::Execution;
use crate::base::log_record::LogRecord;

#[derive(Debug)]
pub struct Log {
    level: LogLevel,
    message: Template,
    tags: Tags,
    fields: Vec<(Arc<str>, ValueTemplate)>,
}

/// Tags as written, or templates such as `${agent_type}_timeout` rendered on each log.
#[derive(Debug)]
enum Tags {
    Fixed(Arc<[Arc<str>]>),
    Rendered(Vec<Template>),
}

impl Log {
    pub fn compile(
        action: &LogAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Log> {
        let message = compiler.template(&action.log, &format!("{pointer}/log"));
        let mut fields = Vec::with_capacity(action.fields.len());
        let mut fields_ok = true;
        for (name, value) in &action.fields {
            let field_pointer = format!(
                "{pointer}/fields/{}",
                crate::pipeline::load::yaml::escape_pointer_token(name)
            );
            match compiler.value_template(value, &field_pointer) {
                Some(template) => fields.push((Arc::from(name.as_str()), template)),
                None => fields_ok = false,
            }
        }
        let tags = if action.tags.iter().any(|tag| tag.contains("${")) {
            let templates: Vec<Option<Template>> = action
                .tags
                .iter()
                .enumerate()
                .map(|(index, tag)| {
                    compiler.template(
                        tag.trim_start_matches('#'),
                        &format!("{pointer}/tags/{index}"),
                    )
                })
                .collect();
            Tags::Rendered(templates.into_iter().collect::<Option<_>>()?)
        } else {
            Tags::Fixed(
                action
                    .tags
                    .iter()
                    .map(|tag| Arc::from(tag.trim_start_matches('#')))
                    .collect(),
            )
        };
        Some(Log {
            level: action.level.unwrap_or(LogLevel::Info),
            message: message?,
            tags,
            fields: if fields_ok { fields } else { return None },
        })
    }

    /// Pure: renders the message and fields.
    pub fn resolve(&self, execution: &Execution) -> Result<LogRecord, EvaluationError> {
        execution.with_scope(|scope| {
            Ok(LogRecord {
                level: self.level,
                message: self.message.render(scope)?,
                tags: match &self.tags {
                    Tags::Fixed(tags) => tags.clone(),
                    Tags::Rendered(templates) => templates
                        .iter()
                        .map(|template| template.render(scope).map(Arc::from))
                        .collect::<Result<_, _>>()?,
                },
                fields: self
                    .fields
                    .iter()
                    .map(|(name, value)| Ok((name.clone(), value.render(scope)?)))
                    .collect::<Result<_, EvaluationError>>()?,
                from: None,
            })
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let record = self.resolve(execution)?;
        execution.host.log(record);
        Ok(())
    }
}
