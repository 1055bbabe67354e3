//! `assign`: evaluates each new value and stores it in its context slot (or one key of a map in it, by path, the keys fixed or computed), in order, checking the variable's declared type.

use std::sync::Arc;

use crate::base::model::action::AssignAction;
use crate::base::value::Value;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::context_types;
use crate::pipeline::compile::expression::{EvaluationError, Expression};
use crate::pipeline::compile::machine::IntegerForm;
use crate::pipeline::load::source::Part;

use super::assign_target::{self, WrittenKey};
use super::{Execution, StepView};

#[derive(Debug)]
pub struct Assign {
    assignments: Vec<Assignment>,
}

#[derive(Debug)]
struct Assignment {
    slot: usize,
    /// The keys below the variable a path assignment sets (`verdicts.critic`: `[critic]`,
    /// `verdicts[r.path]`: the key `r.path` gives); empty when it sets the whole variable.
    path: Vec<PathKey>,
    /// Whether the new value is checked when it is stored (a path, or a typed variable): such
    /// an assignment never takes the raw int shortcut.
    checked: bool,
    /// As written (`verdicts.critic`), for messages.
    target: Arc<str>,
    value: NewValue,
}

/// Stores a raw int in a context slot in place: an int slot needs nothing dropped.
#[inline(always)]
pub fn store_integer(context: &mut [Value], slot: usize, integer: i64) {
    match &mut context[slot] {
        Value::Int(stored) => *stored = integer,
        other => *other = Value::Int(integer),
    }
}

/// A map key of a path: as written, or computed when the assignment runs.
#[derive(Debug)]
enum PathKey {
    Fixed(Arc<str>),
    Computed(Expression),
}

#[derive(Debug)]
enum NewValue {
    Literal(Value),
    Expression(Expression),
}

impl Assign {
    pub fn compile(
        action: &AssignAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Assign> {
        let mut assignments = Vec::with_capacity(action.assign.len());
        let mut ok = true;
        for (target, value) in &action.assign {
            let entry = format!(
                "{pointer}/assign/{}",
                crate::pipeline::load::yaml::escape_pointer_token(target)
            );
            let place = compile_target(target, compiler, &entry);
            let raw = value;
            let value = match value {
                serde_json::Value::String(text) => {
                    compiler.expression(text, &entry).map(NewValue::Expression)
                }
                literal => Some(NewValue::Literal(Value::from_json(literal))),
            };
            match (place, value) {
                (Some((slot, path)), Some(value)) => {
                    let typed = compiler.context_type(slot).is_some();
                    check_known_value(compiler, slot, &path, raw, target, &entry);
                    assignments.push(Assignment {
                        slot,
                        checked: typed || !path.is_empty(),
                        path,
                        target: Arc::from(target.as_str()),
                        value,
                    })
                }
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
            if assignment.checked {
                return Some(index);
            }
            let integer = match &assignment.value {
                NewValue::Literal(Value::Int(integer)) => Some(*integer),
                NewValue::Literal(_) => None,
                NewValue::Expression(expression) => expression.integer_over(context),
            };
            let Some(integer) = integer else {
                return Some(index);
            };
            store_integer(context, assignment.slot, integer);
        }
        None
    }

    /// Each assignment's slot and raw int form, in order, as `apply_integers` would find them
    /// before looking at the context; None for one that never takes the shortcut (checked, or
    /// with no int form).
    pub fn integer_forms(&self) -> impl Iterator<Item = Option<(usize, IntegerForm)>> + '_ {
        self.assignments.iter().map(|assignment| {
            let form = match &assignment.value {
                _ if assignment.checked => None,
                NewValue::Literal(Value::Int(integer)) => Some(IntegerForm::Literal(*integer)),
                NewValue::Literal(_) => None,
                NewValue::Expression(expression) => expression.integer_form(),
            };
            form.map(|form| (assignment.slot, form))
        })
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
        let failure = |message: String| EvaluationError {
            expression: match &assignment.value {
                NewValue::Expression(expression) => expression.text.clone(),
                NewValue::Literal(_) => Arc::from("a literal"),
            },
            message,
        };
        let value = if assignment.path.is_empty() {
            value
        } else {
            let keys = assignment
                .path
                .iter()
                .map(|key| match key {
                    PathKey::Fixed(key) => Ok(key.clone()),
                    PathKey::Computed(expression) => {
                        computed_key(expression, &assignment.target, context, view)
                    }
                })
                .collect::<Result<Vec<Arc<str>>, EvaluationError>>()?;
            let variable = &view.machine.context[assignment.slot].0;
            set_path(&context[assignment.slot], variable, &keys, value).map_err(|problem| {
                failure(format!("cannot set `{}`: {problem}", assignment.target))
            })?
        };
        if assignment.checked {
            let name = &view.machine.context[assignment.slot].0;
            context_types::check_assignment(
                &view.machine.context_types,
                assignment.slot,
                name,
                &value,
            )
            .map_err(failure)?;
        }
        if matches!(value, Value::String(_) | Value::List(_) | Value::Map(_)) {
            check_context_size(context, assignment.slot, &value).map_err(failure)?;
        }
        context[assignment.slot] = value;
        Ok(())
    }
}

/// The key a computed path key (`r.path` of `verdicts[r.path]`) gives now: a text.
fn computed_key(
    expression: &Expression,
    target: &str,
    context: &[Value],
    view: StepView,
) -> Result<Arc<str>, EvaluationError> {
    match view.with_scope(context, |scope| expression.evaluate(scope))? {
        Value::String(key) => Ok(key),
        other => Err(EvaluationError {
            expression: expression.text.clone(),
            message: format!(
                "cannot set `{target}`: a map key is a text, and `{}` gave {} `{other}`; \
                 write `string({})` for its text",
                expression.text,
                other.type_name(),
                expression.text
            ),
        }),
    }
}

/// The slot of the variable an assignment's key names and the map keys below it
/// (`verdicts.critic`, `verdicts[r.path]`), or a located error saying why the key cannot be
/// assigned.
fn compile_target(
    target: &str,
    compiler: &mut dyn ActionCompiler,
    pointer: &str,
) -> Option<(usize, Vec<PathKey>)> {
    let written = match assign_target::parse(target) {
        Ok(written) => written,
        Err(malformed) => {
            compiler.key_error(pointer, malformed.message, Some(malformed.help));
            return None;
        }
    };
    let slot = compiler.writable_context_slot(written.variable, pointer, Part::Key)?;
    let mut path = Vec::with_capacity(written.keys.len());
    for key in written.keys {
        path.push(match key {
            WrittenKey::Fixed(key) => PathKey::Fixed(Arc::from(key)),
            WrittenKey::Computed { text, offset } => {
                match context_types::constant_value(text) {
                    // A text written in brackets is a fixed key (`['src/a.rs']`).
                    Some(serde_json::Value::String(key)) => PathKey::Fixed(Arc::from(key)),
                    Some(serde_json::Value::Number(_)) => {
                        compiler.key_error(
                            pointer,
                            format!("`{target}` indexes a list, and a path names only map keys"),
                            Some(
                                "to change one element, assign the whole list (e.g. with `map` \
                                 or a list literal); `verdicts[r.path]` sets the key that \
                                 `r.path` gives"
                                    .into(),
                            ),
                        );
                        return None;
                    }
                    Some(other) => {
                        compiler.key_error(
                            pointer,
                            format!("`{target}`: `{other}` is not a map key"),
                            Some("a map key is a text: `verdicts['critic']`".into()),
                        );
                        return None;
                    }
                    None => PathKey::Computed(compiler.key_expression(text, offset, pointer)?),
                }
            }
        });
    }
    Some((slot, path))
}

/// When the variable has a type and the new value is known at load (a YAML literal, or an
/// expression that is a literal), checks it now: the whole value against the type, or a
/// path's value against what the type says of that key.
fn check_known_value(
    compiler: &mut dyn ActionCompiler,
    slot: usize,
    path: &[PathKey],
    raw: &serde_json::Value,
    target: &str,
    pointer: &str,
) {
    let Some(schema) = compiler.context_type(slot).cloned() else {
        return;
    };
    let known = match raw {
        serde_json::Value::String(text) => context_types::constant_value(text),
        literal => Some(literal.clone()),
    };
    let Some(known) = known else { return };
    let keys: Vec<Option<String>> = path
        .iter()
        .map(|key| match key {
            PathKey::Fixed(key) => Some(key.to_string()),
            PathKey::Computed(_) => None,
        })
        .collect();
    let Some(expected) = context_types::schema_at(&schema.schema, &keys) else {
        return;
    };
    let Ok(expected) = crate::pipeline::compile::data_schema::DataSchema::compile(expected) else {
        return;
    };
    if let Err(problem) = expected.check(&known) {
        let variable = target.split(['.', '[']).next().unwrap_or_default();
        compiler.value_error(
            pointer,
            format!("`{target}` cannot hold this value: {problem}"),
            Some(format!(
                "the type of `{variable}` is declared under `types:`; assign a value of that type"
            )),
        );
    }
}

/// `current` (the value at `walked`, e.g. `verdicts`) with the value at `path` (map keys
/// below it) replaced by `value`. A missing key or a `null` on the way becomes an empty map;
/// any other value that is not a map is an error naming where it is.
fn set_path(
    current: &Value,
    walked: &str,
    path: &[Arc<str>],
    value: Value,
) -> Result<Value, String> {
    let Some((key, rest)) = path.split_first() else {
        return Ok(value);
    };
    let mut map = match current {
        Value::Map(map) => map.as_ref().clone(),
        Value::Null => indexmap::IndexMap::new(),
        other => return Err(format!("`{walked}` is a {}, not a map", other.type_name())),
    };
    let inner = map.get(key).cloned().unwrap_or(Value::Null);
    let walked = if assign_target::is_plain_key(key) {
        format!("{walked}.{key}")
    } else {
        format!("{walked}[{}]", serde_json::Value::String(key.to_string()))
    };
    map.insert(key.clone(), set_path(&inner, &walked, rest, value)?);
    Ok(Value::Map(Arc::new(map)))
}

/// Whether the context, with `value` in `slot`, stays within its bound (16 times
/// `--max-value-bytes`). Only an assignment of a string, list or map is checked: the rest
/// cannot grow it much.
fn check_context_size(context: &[Value], slot: usize, value: &Value) -> Result<(), String> {
    let budgets = crate::pipeline::compile::budget::current();
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
            crate::pipeline::compile::budget::CONTEXT_VALUES
        ));
    }
    Ok(())
}
