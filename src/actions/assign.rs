//! `assign`: evaluates each new value and stores it in its context slot, in order.

use crate::compile::Compiler;
use crate::compile::expression::{EvaluationError, Expression, NameBinding};
use crate::diagnostic::did_you_mean;
use crate::model::action::AssignAction;
use crate::value::Value;

use super::Execution;

#[derive(Debug)]
pub struct Assign {
    assignments: Vec<Assignment>,
}

#[derive(Debug)]
struct Assignment {
    slot: usize,
    value: NewValue,
}

#[derive(Debug)]
enum NewValue {
    Literal(Value),
    Expression(Expression),
}

impl Assign {
    pub fn compile(
        action: &AssignAction,
        compiler: &mut Compiler,
        pointer: &str,
    ) -> Option<Assign> {
        let mut assignments = Vec::with_capacity(action.assign.len());
        let mut ok = true;
        for (name, value) in &action.assign {
            let entry = format!(
                "{pointer}/assign/{}",
                crate::load::yaml::escape_pointer_token(name)
            );
            let slot = match compiler.names().binding(name) {
                Some(NameBinding::Context(slot)) => Some(slot),
                Some(NameBinding::Input(_)) => {
                    compiler.key_error(&entry, format!("`{name}` is an input, and inputs are read-only"), Some(format!("declare a context variable, e.g. `context: {{ {name}_value: null }}`, and assign that")));
                    None
                }
                _ => {
                    let help = did_you_mean(name, compiler.context_names()).or_else(|| {
                        Some(format!(
                            "declare it under `context:` first, e.g. `{name}: null`"
                        ))
                    });
                    compiler.key_error(&entry, format!("unknown context variable `{name}`"), help);
                    None
                }
            };
            let value = match value {
                serde_json::Value::String(text) => {
                    compiler.expression(text, &entry).map(NewValue::Expression)
                }
                literal => Some(NewValue::Literal(Value::from_json(literal))),
            };
            match (slot, value) {
                (Some(slot), Some(value)) => assignments.push(Assignment { slot, value }),
                _ => ok = false,
            }
        }
        ok.then_some(Assign { assignments })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        for assignment in &self.assignments {
            // Resolve against the current data (pure), then store: the next assignment sees it.
            let value = match &assignment.value {
                NewValue::Literal(value) => value.clone(),
                NewValue::Expression(expression) => {
                    execution.with_scope(|scope| expression.evaluate(scope))?
                }
            };
            execution.context[assignment.slot] = value;
        }
        Ok(())
    }
}
