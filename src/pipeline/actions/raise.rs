//! `raise`: puts an event on the internal queue.

use crate::base::event::{Event, Origin};
use crate::base::model::action::RaiseAction;
use crate::base::value::Value;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, ValueTemplate};

use super::Execution;
use super::send::EventName;

#[derive(Debug)]
pub struct Raise {
    event: EventName,
    data: Option<ValueTemplate>,
}

impl Raise {
    pub fn compile(
        action: &RaiseAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Raise> {
        let event = EventName::compile(&action.raise, compiler, &format!("{pointer}/raise"));
        let data = match &action.data {
            Some(data) => Some(compiler.value_template(data, &format!("{pointer}/data"))?),
            None => None,
        };
        Some(Raise {
            event: event?,
            data,
        })
    }

    /// Pure: the event to raise.
    pub fn resolve(&self, execution: &Execution) -> Result<Event, EvaluationError> {
        let data = match &self.data {
            Some(data) => execution.with_scope(|scope| data.render(scope))?,
            None => Value::Null,
        };
        let event = self.event.resolve(execution, Origin::Internal)?;
        Ok(event.with_data(data))
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let event = self.resolve(execution)?;
        execution.internal_queue.push_back(event);
        Ok(())
    }
}
