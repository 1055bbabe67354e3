//! What an embedding program adds to the engine: expression functions and actions written in Rust.

use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::base::value::Value;

/// A function protocols call in expressions: `risk(attempts, error)`. It gets the evaluated
/// arguments; an `Err` fails the expression, which raises `error.execution` like any other.
pub type FunctionHandler = dyn Fn(&[Value]) -> Result<Value, String> + Send + Sync;

/// An action protocols run with `call: NAME`, given its rendered `args` (null when omitted).
/// It may raise internal events; an `Err` raises `error.execution` and skips the rest of the
/// block, as a failing built-in action does.
pub type ActionHandler = dyn Fn(&Value, &mut CallContext) -> Result<(), String> + Send + Sync;

/// What a host action can do to the running instance.
pub struct CallContext {
    pub(crate) raised: Vec<(String, Value)>,
}

impl CallContext {
    /// Raises an internal event, handled after the current block like `raise`.
    pub fn raise(&mut self, event: &str, data: Value) {
        self.raised.push((event.to_string(), data));
    }
}

/// Functions and actions registered by the host program, checked by name when a protocol is
/// compiled with them (`compile::compile_with`).
#[derive(Clone, Default)]
pub struct Extensions {
    pub(crate) functions: IndexMap<String, Arc<FunctionHandler>>,
    pub(crate) actions: IndexMap<String, Arc<ActionHandler>>,
}

/// A name the host cannot register.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot register `{name}`: {reason}")]
pub struct ExtensionError {
    pub name: String,
    pub reason: String,
}

impl Extensions {
    pub fn new() -> Extensions {
        Extensions::default()
    }

    /// Registers an expression function. Its name is an identifier not already taken by CEL,
    /// its extensions or the engine.
    pub fn function(
        mut self,
        name: &str,
        handler: impl Fn(&[Value]) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Result<Extensions, ExtensionError> {
        check_name(name)?;
        if crate::pipeline::compile::expression::is_builtin_function(name) {
            return Err(ExtensionError {
                name: name.to_string(),
                reason: "expressions already have a function of that name".into(),
            });
        }
        self.functions.insert(name.to_string(), Arc::new(handler));
        Ok(self)
    }

    /// Registers an action, run from a protocol as `- call: NAME` with optional `args`.
    pub fn action(
        mut self,
        name: &str,
        handler: impl Fn(&Value, &mut CallContext) -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<Extensions, ExtensionError> {
        check_name(name)?;
        self.actions.insert(name.to_string(), Arc::new(handler));
        Ok(self)
    }

    pub fn function_names(&self) -> impl Iterator<Item = &str> {
        self.functions.keys().map(String::as_str)
    }

    pub fn action_names(&self) -> impl Iterator<Item = &str> {
        self.actions.keys().map(String::as_str)
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Extensions")
            .field("functions", &self.functions.keys().collect::<Vec<_>>())
            .field("actions", &self.actions.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn check_name(name: &str) -> Result<(), ExtensionError> {
    let mut characters = name.chars();
    let valid = characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && characters.all(|character| character.is_ascii_alphanumeric() || character == '_');
    if valid {
        Ok(())
    } else {
        Err(ExtensionError {
            name: name.to_string(),
            reason: "a name is letters, digits and `_`, not starting with a digit".into(),
        })
    }
}
