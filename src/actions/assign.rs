//! `assign`: evaluates each new value and stores it in its context slot, in order.

use crate::compile::Compiler;
use crate::compile::expression::{EvaluationError, Expression};
use crate::load::source::Part;
use crate::model::action::AssignAction;
use crate::value::Value;

use super::{Execution, StepView};

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
            let slot = compiler.writable_context_slot(name, &entry, Part::Key);
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
        let mut next = self.apply_integers(execution.context, 0);
        while let Some(index) = next {
            let view = StepView {
                machine: execution.machine,
                configuration: execution.configuration,
                inputs: execution.inputs,
                event: execution.event,
                clock: execution.clock,
            };
            self.apply_evaluated(index, execution.context, view)?;
            next = self.apply_integers(execution.context, index + 1);
        }
        Ok(())
    }

    /// Applies the assignments from `first` on while each has a raw int form (an int literal,
    /// or `attempts + 1` over an int), storing the `i64` in place: no `Value` is built or
    /// moved, and an int slot needs nothing dropped. Returns the index of the first assignment
    /// that needs evaluating, for `apply_evaluated`, or None when all are done.
    #[inline(always)]
    pub fn apply_integers(&self, context: &mut [Value], first: usize) -> Option<usize> {
        for (index, assignment) in self.assignments.iter().enumerate().skip(first) {
            let integer = match &assignment.value {
                NewValue::Literal(Value::Int(integer)) => Some(*integer),
                NewValue::Literal(_) => None,
                NewValue::Expression(expression) => expression.integer_over(context),
            };
            let Some(integer) = integer else {
                return Some(index);
            };
            match &mut context[assignment.slot] {
                Value::Int(slot) => *slot = integer,
                other => *other = Value::Int(integer),
            }
        }
        None
    }

    /// Applies assignment `index` in full, its expression evaluated over `view` and the context
    /// as the assignments before it left it.
    pub fn apply_evaluated(
        &self,
        index: usize,
        context: &mut [Value],
        view: StepView,
    ) -> Result<(), EvaluationError> {
        let assignment = &self.assignments[index];
        let value = match &assignment.value {
            NewValue::Literal(value) => value.clone(),
            NewValue::Expression(expression) => {
                view.with_scope(context, |scope| expression.evaluate(scope))?
            }
        };
        if matches!(value, Value::String(_) | Value::List(_) | Value::Map(_)) {
            check_context_size(context, assignment.slot, &value).map_err(|message| {
                EvaluationError {
                    expression: match &assignment.value {
                        NewValue::Expression(expression) => expression.text.clone(),
                        NewValue::Literal(_) => std::sync::Arc::from("a literal"),
                    },
                    message,
                }
            })?;
        }
        context[assignment.slot] = value;
        Ok(())
    }
}

/// Whether the context, with `value` in `slot`, stays within its bound (16 times
/// `--max-value-bytes`). Only an assignment of a string, list or map is checked: the rest
/// cannot grow it much.
fn check_context_size(context: &[Value], slot: usize, value: &Value) -> Result<(), String> {
    let budgets = crate::compile::budget::current();
    let limit = budgets.max_context_bytes();
    let others: usize = context
        .iter()
        .enumerate()
        .filter(|(index, _)| *index != slot)
        .map(|(_, other)| other.size_in_bytes())
        .fold(0, usize::saturating_add);
    let total = others.saturating_add(value.size_in_bytes());
    if total > limit {
        return Err(format!(
            "the context would hold {total} bytes, more than its limit of {limit} bytes \
             ({} times --max-value-bytes); raise it with --max-value-bytes",
            crate::compile::budget::CONTEXT_VALUES
        ));
    }
    Ok(())
}
