//! `emit`: a directive for the program driving the protocol, resolved here, printed by the host.

use std::sync::Arc;

use crate::base::model::action::EmitAction;
use crate::base::value::Value;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Template, ValueTemplate};

use super::Execution;

#[derive(Debug)]
pub struct Emit {
    name: Template,
    data: Vec<(Arc<str>, ValueTemplate)>,
}

/// A resolved directive: `{"directive": name, ...data}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Directive {
    pub name: String,
    pub data: Vec<(Arc<str>, Value)>,
    /// The child protocol it comes from (invoke ids down to it, `kid/grandkid`); `None` for
    /// the run's own.
    pub from: Option<Arc<str>>,
}

impl Directive {
    /// The JSON object printed for the driving program; `directive` comes first.
    pub fn to_json(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        object.insert(
            "directive".into(),
            serde_json::Value::String(self.name.clone()),
        );
        for (key, value) in &self.data {
            object.insert(key.to_string(), value.to_json());
        }
        // Last, so that no data field can claim another origin.
        if let Some(from) = &self.from {
            object.insert("from".into(), serde_json::Value::String(from.to_string()));
        }
        serde_json::Value::Object(object)
    }
}

impl Emit {
    /// The directive's name as written, for diagrams.
    pub fn name_text(&self) -> String {
        self.name.source_text()
    }

    pub fn compile(
        action: &EmitAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Emit> {
        let name = compiler.template(&action.emit, &format!("{pointer}/emit"));
        let mut data = Vec::with_capacity(action.data.len());
        let mut ok = true;
        for (key, value) in &action.data {
            if key == "directive" {
                compiler.key_error(
                    &format!("{pointer}/data/directive"),
                    "`directive` is the directive's name, set by `emit`".into(),
                    Some("rename this field".into()),
                );
                ok = false;
                continue;
            }
            let value_pointer = format!(
                "{pointer}/data/{}",
                crate::pipeline::load::yaml::escape_pointer_token(key)
            );
            match compiler.value_template(value, &value_pointer) {
                Some(template) => data.push((Arc::from(key.as_str()), template)),
                None => ok = false,
            }
        }
        let name = name?;
        ok.then_some(Emit { name, data })
    }

    /// Pure: the directive with every template rendered.
    pub fn resolve(&self, execution: &Execution) -> Result<Directive, EvaluationError> {
        execution.with_scope(|scope| {
            Ok(Directive {
                name: self.name.render(scope)?,
                data: self
                    .data
                    .iter()
                    .map(|(key, value)| Ok((key.clone(), value.render(scope)?)))
                    .collect::<Result<_, EvaluationError>>()?,
                from: None,
            })
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let directive = self.resolve(execution)?;
        execution.host.emit(directive);
        Ok(())
    }
}
