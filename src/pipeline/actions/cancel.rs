//! `cancel`: withdraws a delayed send by its id.

use crate::base::model::action::CancelAction;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Template};

use super::Execution;

#[derive(Debug)]
pub struct Cancel {
    send_id: Template,
}

impl Cancel {
    pub fn compile(
        action: &CancelAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Cancel> {
        Some(Cancel {
            send_id: compiler.template(&action.cancel, &format!("{pointer}/cancel"))?,
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let send_id = execution.with_scope(|scope| self.send_id.render(scope))?;
        execution.host.cancel(&send_id);
        Ok(())
    }
}
