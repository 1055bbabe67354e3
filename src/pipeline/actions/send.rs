//! `send`: an event for the external queue, now or after a delay, cancellable by id.

use std::sync::Arc;

use crate::base::event::{Event, Origin};
use crate::base::model::action::SendAction;
use crate::base::value::Value;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Template, ValueTemplate};
use crate::pipeline::compile::machine::{Delay, EventType};

use super::Execution;

#[derive(Debug)]
pub struct Send {
    event: EventName,
    data: Option<ValueTemplate>,
    delay: Option<Delay>,
    id: Option<Template>,
    to: Option<Arc<str>>,
}

/// A resolved send, for the host to deliver.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    pub event: Event,
    pub delay_milliseconds: u64,
    /// The deadline (Unix milliseconds) the delay came from, if it came from a timestamp: a
    /// resumed run keeps that instant, and a host arms the timer for it exactly.
    pub deadline: Option<u64>,
    pub id: Option<Arc<str>>,
    /// `None`: this run's own external queue; `parent`, or a child's invoke id.
    pub to: Option<Arc<str>>,
}

/// The `to` of a send that goes to the protocol that invoked this one.
pub const PARENT: &str = "parent";

/// An event name that is either fixed (and so known to the machine) or a template.
#[derive(Debug)]
pub enum EventName {
    Known(EventType),
    Template(Template),
}

impl EventName {
    pub fn compile(
        text: &str,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<EventName> {
        let template = compiler.template(text, pointer)?;
        compiler.produced_event(text, template.is_literal());
        if template.is_literal() {
            compiler.check_event_name(text, pointer);
            Some(EventName::Known(compiler.intern_event(text)))
        } else {
            Some(EventName::Template(template))
        }
    }

    pub fn resolve(&self, execution: &Execution, origin: Origin) -> Result<Event, EvaluationError> {
        Ok(match self {
            EventName::Known(event_type) => Event::of_type(execution.machine, *event_type, origin),
            EventName::Template(template) => {
                let name = execution.with_scope(|scope| template.render(scope))?;
                Event::named(execution.machine, &name, Value::Null, origin)
            }
        })
    }
}

impl Send {
    pub fn compile(
        action: &SendAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Send> {
        let event = EventName::compile(&action.send, compiler, &format!("{pointer}/send"));
        let data = action
            .data
            .as_ref()
            .map(|data| compiler.value_template(data, &format!("{pointer}/data")));
        let delay = action
            .delay
            .as_ref()
            .map(|delay| compiler.delay(delay, &format!("{pointer}/delay")));
        let id = action
            .id
            .as_ref()
            .map(|id| compiler.template(id, &format!("{pointer}/id")));
        if let Some(to) = &action.to {
            compiler.send_target(to, &format!("{pointer}/to"));
            if action.delay.is_some() {
                compiler.key_error(
                    &format!("{pointer}/delay"),
                    "a `send` with `to` is delivered at once and takes no `delay`".into(),
                    Some("send it with a delay to this run, and forward it when it arrives".into()),
                );
                return None;
            }
        }
        Some(Send {
            event: event?,
            data: crate::pipeline::compile::optional(data)?,
            delay: crate::pipeline::compile::optional(delay)?,
            id: crate::pipeline::compile::optional(id)?,
            to: action.to.as_deref().map(Arc::from),
        })
    }

    /// Pure: the event, its delay and its id.
    pub fn resolve(&self, execution: &Execution) -> Result<SendRequest, EvaluationError> {
        let mut event = self.event.resolve(execution, Origin::External)?;
        if let Some(data) = &self.data {
            event.data = execution.with_scope(|scope| data.render(scope))?;
        }
        let wait = match &self.delay {
            Some(delay) => execution.with_scope(|scope| delay.wait(scope))?,
            None => crate::pipeline::compile::machine::Wait {
                milliseconds: 0,
                deadline: None,
            },
        };
        let id = match &self.id {
            Some(id) => Some(Arc::from(execution.with_scope(|scope| id.render(scope))?)),
            None => None,
        };
        event.send_id = id.clone();
        Ok(SendRequest {
            event,
            delay_milliseconds: wait.milliseconds,
            deadline: wait.deadline,
            id,
            to: self.to.clone(),
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let request = self.resolve(execution)?;
        if let Some(message) = execution.host.refuse_send(&request) {
            return Err(EvaluationError {
                expression: Arc::from(request.event.name.as_ref()),
                message,
            });
        }
        execution.host.send(request);
        Ok(())
    }
}
