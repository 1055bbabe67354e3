//! A child protocol's inputs rendered in its parent's scope: a state's invoke and a map's items share this.

use std::sync::Arc;

use crate::base::value::Value;
use crate::pipeline::compile::expression::{EvaluationError, Scope, ValueTemplate};
use crate::pipeline::compile::machine::Machine;

/// Every input of `child`: its default, or the value `given` renders for it now, checked
/// against the input's declaration. `invoked` names the invoke (or map item) in an error.
pub fn render(
    child: &Machine,
    given: &[(usize, ValueTemplate)],
    scope: &Scope,
    invoked: &str,
) -> Result<Vec<Value>, EvaluationError> {
    let mut inputs: Vec<Value> = child
        .inputs
        .iter()
        .map(|input| input.default.clone().unwrap_or_default())
        .collect();
    for (slot, template) in given {
        let value = template.render(scope)?;
        let input = &child.inputs[*slot];
        inputs[*slot] = input
            .accept(&value.to_json())
            .map_err(|mismatch| EvaluationError {
                expression: Arc::from(format!("invoke {invoked} input {}", input.name)),
                message: mismatch.to_string(),
            })?;
    }
    Ok(inputs)
}
