//! `foreach`: runs a block once for each element of a list, in order (SCXML's `<foreach>`).

use std::sync::Arc;

use crate::base::model::action::{ForeachAction, LoopArray};
use crate::base::value::Value;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::budget::LoopBudget;
use crate::pipeline::compile::expression::{EvaluationError, Expression};
use crate::pipeline::load::source::Part;

use super::{Action, Execution, execute_block};

#[derive(Debug)]
pub struct Foreach {
    array: Array,
    item: usize,
    index: Option<usize>,
    body: Vec<Action>,
}

/// The list as written, or the expression that gives it (a `foreach`'s or a `map`'s).
#[derive(Debug)]
pub(crate) enum Array {
    Listed(Arc<Vec<Value>>),
    Computed(Expression),
}

impl Array {
    /// Compiles the list at `pointer`.
    pub(crate) fn compile(
        array: &LoopArray,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Array> {
        match array {
            LoopArray::Listed(items) => Some(Array::Listed(Arc::new(
                items.iter().map(Value::from_json).collect(),
            ))),
            LoopArray::Computed(text) => compiler.expression(text, pointer).map(Array::Computed),
        }
    }

    /// What an error names as the list's expression.
    pub(crate) fn text(&self) -> Arc<str> {
        match self {
            Array::Listed(_) => Arc::from("a literal list"),
            Array::Computed(expression) => expression.text.clone(),
        }
    }

    /// Pure: the list, evaluated once, for the action `action` (named in the error when it is
    /// not a list). A shallow copy: assigning the variable it came from later changes nothing.
    pub(crate) fn evaluate(
        &self,
        execution: &Execution,
        action: &str,
    ) -> Result<Arc<Vec<Value>>, EvaluationError> {
        let expression = match self {
            Array::Listed(items) => return Ok(items.clone()),
            Array::Computed(expression) => expression,
        };
        match execution.with_scope(|scope| expression.evaluate(scope))? {
            Value::List(items) => Ok(items),
            other => Err(EvaluationError {
                expression: expression.text.clone(),
                message: format!("{action} needs a list, and this is a {}", other.type_name()),
            }),
        }
    }
}

impl Foreach {
    /// The actions run for each item, for diagrams.
    pub fn body(&self) -> &[Action] {
        &self.body
    }

    pub fn compile(
        action: &ForeachAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Foreach> {
        let array = Array::compile(&action.foreach, compiler, &format!("{pointer}/foreach"));
        let item_pointer = format!("{pointer}/item");
        let item = compiler.writable_context_slot(&action.item, &item_pointer, Part::Value);
        let index = match &action.index {
            None => Some(None),
            Some(name) => {
                let index_pointer = format!("{pointer}/index");
                if *name == action.item {
                    compiler.value_error(
                        &index_pointer,
                        format!("`{name}` is already the item"),
                        Some(
                            "the index needs a context variable of its own, e.g. `position`".into(),
                        ),
                    );
                    None
                } else {
                    compiler
                        .writable_context_slot(name, &index_pointer, Part::Value)
                        .map(Some)
                }
            }
        };
        let body = compiler.actions(&action.body, &format!("{pointer}/do"));
        Some(Foreach {
            array: array?,
            item: item?,
            index: index?,
            body: body?,
        })
    }

    /// Pure: the list to walk, evaluated once. It is a shallow copy (a shared reference to the
    /// list as it is now), so the body assigning the variable it came from changes nothing.
    pub fn resolve(&self, execution: &Execution) -> Result<Arc<Vec<Value>>, EvaluationError> {
        self.array.evaluate(execution, "foreach")
    }

    /// Binds the item (and index) and runs the body for each element. As SCXML requires, an
    /// error in the body stops the loop, and the block around it, for `error.execution`.
    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let items = self.resolve(execution)?;
        let budget = LoopBudget::enter();
        for (position, item) in items.iter().enumerate() {
            budget.spend().map_err(|why| EvaluationError {
                expression: self.array.text(),
                message: why.to_string(),
            })?;
            // The item is a part of a list that was built within the value bound: storing it
            // is not measured again, which would walk the whole context on every iteration.
            let position = Value::Int(position as i64);
            // A typed item or index is checked like an assignment: the loop stops on a misfit.
            let types = &execution.machine.context_types;
            let bindings = std::iter::once((self.item, item))
                .chain(self.index.map(|index| (index, &position)));
            for (slot, value) in bindings {
                if types.get(slot).is_some_and(Option::is_some) {
                    let name = &execution.machine.context[slot].0;
                    crate::pipeline::compile::context_types::check_assignment(
                        types, slot, name, value,
                    )
                    .map_err(|message| EvaluationError {
                        expression: self.array.text(),
                        message,
                    })?;
                }
            }
            execution.context[self.item] = item.clone();
            if let Some(index) = self.index {
                execution.context[index] = position;
            }
            execute_block(&self.body, execution)?;
        }
        Ok(())
    }
}
