//! `if` / `elif` / `else`: runs the first branch whose condition holds.

use crate::compile::Compiler;
use crate::compile::expression::{EvaluationError, Expression};
use crate::model::action::IfAction;

use super::{Action, Execution, execute_block};

#[derive(Debug)]
pub struct Conditional {
    branches: Vec<(Expression, Vec<Action>)>,
    otherwise: Vec<Action>,
}

impl Conditional {
    pub fn compile(
        action: &IfAction,
        compiler: &mut Compiler,
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

    /// Pure: which block runs.
    pub fn resolve(&self, execution: &Execution) -> Result<&[Action], EvaluationError> {
        for (condition, block) in &self.branches {
            if execution.with_scope(|scope| condition.evaluate_condition(scope))? {
                return Ok(block);
            }
        }
        Ok(&self.otherwise)
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let block = self.resolve(execution)?;
        execute_block(block, execution)
    }
}
