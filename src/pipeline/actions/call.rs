//! `call`: runs an action the embedding program registered, with its rendered arguments.

use std::sync::Arc;

use crate::base::event::{Event, Origin};
use crate::base::model::action::CallAction;
use crate::base::value::Value;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, ValueTemplate};
use crate::pipeline::extensions::{ActionHandler, CallContext};

use super::Execution;

pub struct Call {
    name: Arc<str>,
    handler: Arc<ActionHandler>,
    arguments: Option<ValueTemplate>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Call")
            .field("name", &self.name)
            .finish()
    }
}

impl Call {
    /// The registered action it calls, for diagrams.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn compile(
        action: &CallAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Call> {
        let arguments = match &action.args {
            Some(arguments) => {
                Some(compiler.value_template(arguments, &format!("{pointer}/args"))?)
            }
            None => None,
        };
        let Some(handler) = compiler.extensions().actions.get(&action.call).cloned() else {
            let registered: Vec<&str> = compiler.extensions().action_names().collect();
            let help = crate::base::diagnostic::did_you_mean(
                &action.call,
                registered.iter().copied(),
            )
            .unwrap_or_else(|| {
                if registered.is_empty() {
                    "`call` runs actions a Rust program registers when it embeds the engine; \
                         the command line registers none"
                        .into()
                } else {
                    format!("the registered actions are {}", registered.join(", "))
                }
            });
            compiler.value_error(
                &format!("{pointer}/call"),
                format!("no action `{}` is registered", action.call),
                Some(help),
            );
            return None;
        };
        Some(Call {
            name: Arc::from(action.call.as_str()),
            handler,
            arguments,
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let arguments = match &self.arguments {
            Some(arguments) => execution.with_scope(|scope| arguments.render(scope))?,
            None => Value::Null,
        };
        let mut context = CallContext { raised: Vec::new() };
        (self.handler)(&arguments, &mut context).map_err(|message| EvaluationError {
            expression: Arc::from(format!("call {}", self.name)),
            message,
        })?;
        for (name, data) in context.raised {
            let event = Event::named(execution.machine, &name, data, Origin::Internal);
            execution.internal_queue.push_back(event);
        }
        Ok(())
    }
}
