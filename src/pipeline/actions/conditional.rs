//! `if` / `elif` / `else`: runs the first branch whose condition holds.

use crate::base::model::action::IfAction;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Expression};

use super::{Action, Execution, execute_block};

#[derive(Debug)]
pub struct Conditional {
    branches: Vec<(Expression, Vec<Action>)>,
    otherwise: Vec<Action>,
}

impl Conditional {
    /// Every branch's actions, the `else` last, for diagrams.
    pub fn blocks(&self) -> impl Iterator<Item = &[Action]> {
        self.branches
            .iter()
            .map(|(_, actions)| actions.as_slice())
            .chain(std::iter::once(self.otherwise.as_slice()))
    }

    pub fn compile(
        action: &IfAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Conditional> {
        let mut ok = true;
        let mut branches = Vec::with_capacity(1 + action.elif.len());
        let first = (
            compiler.expression(&action.condition, &format!("{pointer}/if")),
            compiler.actions(&action.then, &format!("{pointer}/then")),
        );
        let others = action.elif.iter().enumerate().map(|(index, branch)| {
            let branch_pointer = format!("{pointer}/elif/{index}");
            (
                compiler.expression(&branch.condition, &format!("{branch_pointer}/if")),
                compiler.actions(&branch.then, &format!("{branch_pointer}/then")),
            )
        });
        for (condition, block) in std::iter::once(first).chain(others.collect::<Vec<_>>()) {
            match (condition, block) {
                (Some(condition), Some(block)) => branches.push((condition, block)),
                _ => ok = false,
            }
        }
        let otherwise = compiler.actions(&action.otherwise, &format!("{pointer}/else"));
        match (ok, otherwise) {
            (true, Some(otherwise)) => Some(Conditional {
                branches,
                otherwise,
            }),
            _ => None,
        }
    }

    /// Pure: which block runs. As SCXML requires, a condition that fails counts as false; its
    /// error is returned for `error.execution`, and the next branch is tried.
    pub fn resolve(&self, execution: &Execution) -> (&[Action], Vec<EvaluationError>) {
        let mut errors = Vec::new();
        for (condition, block) in &self.branches {
            match execution.with_scope(|scope| condition.evaluate_condition(scope)) {
                Ok(true) => return (block, errors),
                Ok(false) => {}
                Err(error) => errors.push(error),
            }
        }
        (&self.otherwise, errors)
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let (block, errors) = self.resolve(execution);
        for error in &errors {
            let event = crate::base::event::Event::execution_error(execution.machine, error);
            execution.internal_queue.push_back(event);
        }
        execute_block(block, execution)
    }
}
