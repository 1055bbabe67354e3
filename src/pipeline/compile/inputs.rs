//! Inputs: declarations checked at compile time, and values from `--input` checked before a run.

use indexmap::IndexMap;

use super::Compiler;
use super::machine::{InputNode, Machine};
use crate::base::model::{Duration, Input, InputType};
use crate::base::value::Value;
use crate::pipeline::load::yaml::escape_pointer_token;

/// Compiles every input declaration, reporting inconsistent ones.
pub(super) fn compile(compiler: &mut Compiler, inputs: &IndexMap<String, Input>) -> Vec<InputNode> {
    inputs
        .iter()
        .map(|(name, input)| {
            let pointer = format!("/inputs/{}", escape_pointer_token(name));
            let mut node = InputNode {
                name: name.clone(),
                kind: input.kind,
                description: input.description.clone(),
                required: input.required,
                default: None,
                minimum: bound(
                    compiler,
                    input,
                    input.minimum.as_ref(),
                    &format!("{pointer}/minimum"),
                ),
                maximum: bound(
                    compiler,
                    input,
                    input.maximum.as_ref(),
                    &format!("{pointer}/maximum"),
                ),
                values: input.values.clone(),
                items: input.items,
                secret: input.secret,
            };
            check_secret(compiler, name, input, &pointer);
            if input.kind == InputType::Enum && input.values.is_empty() {
                compiler.key_error(
                    &pointer,
                    format!("enum input `{name}` lists no `values`"),
                    Some("add `values: [a, b]`".into()),
                );
            }
            if input.kind != InputType::Enum && !input.values.is_empty() {
                compiler.key_error(
                    &format!("{pointer}/values"),
                    "`values` belongs to `type: enum` inputs".into(),
                    None,
                );
            }
            if let Some(default) = &input.default {
                let default_pointer = format!("{pointer}/default");
                if input.required {
                    compiler.key_error(
                        &default_pointer,
                        format!("input `{name}` is required and has a default"),
                        Some("remove `required: true`, or remove the default".into()),
                    );
                }
                match node.check(default) {
                    Ok(value) => node.default = Some(value),
                    Err(message) => compiler.value_error(
                        &default_pointer,
                        format!("default of `{name}`: {message}"),
                        None,
                    ),
                }
            }
            node
        })
        .collect()
}

/// A secret is a `string` without a default: other types are not masked reliably (the digits
/// of a number appear in every step count), and a default is written in the protocol file.
fn check_secret(compiler: &mut Compiler, name: &str, input: &Input, pointer: &str) {
    if !input.secret {
        return;
    }
    if input.kind != InputType::String {
        compiler.key_error(
            &format!("{pointer}/secret"),
            format!(
                "`secret` applies to `type: string` inputs; `{name}` is of type {}, whose \
                 value cannot be masked reliably in output",
                input.kind.name()
            ),
            Some("make it `type: string`, or drop `secret: true`".into()),
        );
    }
    if input.default.is_some() {
        compiler.key_error(
            &format!("{pointer}/default"),
            format!("secret input `{name}` has a default, which the protocol file shows to anyone"),
            Some(format!(
                "remove the default and supply it at run time: --input {name}=VALUE"
            )),
        );
    }
}

/// A numeric bound: a number, or a duration literal for duration inputs (as milliseconds).
fn bound(
    compiler: &mut Compiler,
    input: &Input,
    value: Option<&serde_json::Value>,
    pointer: &str,
) -> Option<f64> {
    let value = value?;
    let parsed = match (input.kind, value) {
        (InputType::Duration, serde_json::Value::String(text)) => {
            Duration::parse(text).map(|d| d.milliseconds as f64)
        }
        (InputType::Integer | InputType::Number, serde_json::Value::Number(number)) => {
            number.as_f64()
        }
        (InputType::List | InputType::String, serde_json::Value::Number(number)) => number.as_f64(),
        _ => None,
    };
    if parsed.is_none() {
        let expected = match input.kind {
            InputType::Duration => "a duration such as `5s`",
            InputType::Integer | InputType::Number => "a number",
            InputType::List => "a number (the least or most items)",
            InputType::String => "a number (the least or most characters)",
            _ => "nothing: this type has no bounds",
        };
        compiler.value_error(pointer, format!("this bound must be {expected}"), None);
    }
    parsed
}

/// Why a value does not fit an input, and which item of a list input is at fault, if one is.
#[derive(Debug, Clone, PartialEq)]
pub struct InputMismatch {
    pub item: Option<usize>,
    pub message: String,
}

impl From<String> for InputMismatch {
    fn from(message: String) -> Self {
        InputMismatch {
            item: None,
            message,
        }
    }
}

impl std::fmt::Display for InputMismatch {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.item {
            Some(index) => write!(formatter, "item {index}: {}", self.message),
            None => formatter.write_str(&self.message),
        }
    }
}

/// A scalar in the form `kind` takes, when it reads as one: a number or a boolean is its text
/// for a `string` or an `enum` (`[true]` for a list of strings is `["true"]`), and a text is
/// read as an integer, a number or `true`/`false` for those types (`a,b` on the command line
/// gives texts). Anything else is left as it is, for `check` to refuse.
fn coerced(kind: InputType, value: &serde_json::Value) -> std::borrow::Cow<'_, serde_json::Value> {
    use serde_json::Value as Json;
    use std::borrow::Cow;
    let converted = match (kind, value) {
        (InputType::String | InputType::Enum, Json::Number(number)) => {
            Some(Json::String(number.to_string()))
        }
        (InputType::String | InputType::Enum, Json::Bool(flag)) => {
            Some(Json::String(flag.to_string()))
        }
        (InputType::Integer, Json::String(text)) => text.trim().parse::<i64>().ok().map(Json::from),
        (InputType::Number, Json::String(text)) => {
            serde_json::from_str::<serde_json::Number>(text.trim())
                .ok()
                .map(Json::Number)
        }
        (InputType::Boolean, Json::String(text)) => match text.trim() {
            "true" => Some(Json::Bool(true)),
            "false" => Some(Json::Bool(false)),
            _ => None,
        },
        _ => None,
    };
    converted.map_or(Cow::Borrowed(value), Cow::Owned)
}

/// The milliseconds a `duration` input takes from `value`: a literal (`30s`, `1h30m`), CEL's
/// spelling of a duration value (`1.5s`, as a parent's `duration()` writes it), or a whole
/// number of milliseconds (what a parent's own `duration` input holds).
fn duration_milliseconds(value: &serde_json::Value) -> Result<u64, InputMismatch> {
    let refused = |shown: &str, why: &str| {
        InputMismatch::from(format!(
            "`{shown}` {why}; write e.g. `30s`, `2m`, `1h30m`, or a whole number of milliseconds"
        ))
    };
    let nanoseconds: i128 = match value {
        serde_json::Value::Number(number) => match (number.as_i64(), number.as_f64()) {
            (Some(milliseconds), _) => i128::from(milliseconds) * 1_000_000,
            // A whole float (`1500.0`, as arithmetic on numbers may give) is its milliseconds.
            (None, Some(float)) if float.fract() == 0.0 && float.abs() < 9.0e15 => {
                float as i128 * 1_000_000
            }
            _ => {
                return Err(refused(
                    &number.to_string(),
                    "is not a whole number of milliseconds",
                ));
            }
        },
        serde_json::Value::String(text) => match Duration::parse(text) {
            Some(duration) => i128::from(duration.milliseconds) * 1_000_000,
            None => crate::base::time::parse_duration(text)
                .map(|parsed| crate::base::time::nanoseconds(&parsed))
                .map_err(|_| refused(text, "is not a duration"))?,
        },
        other => return Err(format!("expected duration, got {other}").into()),
    };
    let shown = match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if nanoseconds < 0 {
        return Err(refused(
            &shown,
            "is negative, and a duration input is a span of time",
        ));
    }
    if nanoseconds % 1_000_000 != 0 {
        return Err(refused(
            &shown,
            "is finer than a millisecond, which a duration input counts",
        ));
    }
    u64::try_from(nanoseconds / 1_000_000).map_err(|_| refused(&shown, "is too long"))
}

impl InputNode {
    /// Checks a value (from YAML or parsed from the command line) against the declaration,
    /// after reading a scalar as the declared type (`coerced`); a list's items are read as
    /// its item type.
    pub fn check(&self, value: &serde_json::Value) -> Result<Value, InputMismatch> {
        use serde_json::Value as Json;
        let value = coerced(self.kind, value);
        let value = value.as_ref();
        let (checked, measure) = match (self.kind, value) {
            (InputType::String, Json::String(text)) => (
                Value::string(text.as_str()),
                Some(text.chars().count() as f64),
            ),
            (InputType::Integer, Json::Number(number)) if number.is_i64() => {
                (Value::from_json(value), number.as_f64())
            }
            (InputType::Number, Json::Number(number)) => (Value::from_json(value), number.as_f64()),
            (InputType::Boolean, Json::Bool(flag)) => (Value::Bool(*flag), None),
            (InputType::Duration, Json::String(_) | Json::Number(_)) => {
                let milliseconds = duration_milliseconds(value)?;
                (
                    Value::Int(
                        i64::try_from(milliseconds)
                            .map_err(|_| InputMismatch::from("duration too long".to_string()))?,
                    ),
                    Some(milliseconds as f64),
                )
            }
            (InputType::List, Json::Array(items)) => {
                let checked_items = match self.items {
                    Some(item_type) => {
                        let item_node = InputNode {
                            kind: item_type,
                            items: None,
                            minimum: None,
                            maximum: None,
                            ..self.clone_shape()
                        };
                        items
                            .iter()
                            .enumerate()
                            .map(|(index, item)| {
                                item_node.check(item).map_err(|mismatch| InputMismatch {
                                    item: Some(index),
                                    message: mismatch.to_string(),
                                })
                            })
                            .collect::<Result<Vec<Value>, InputMismatch>>()?
                    }
                    None => items.iter().map(Value::from_json).collect(),
                };
                (
                    Value::List(std::sync::Arc::new(checked_items)),
                    Some(items.len() as f64),
                )
            }
            (InputType::Enum, Json::String(text)) => {
                if !self.values.contains(text) {
                    let help = crate::base::diagnostic::did_you_mean(
                        text,
                        self.values.iter().map(String::as_str),
                    )
                    .map(|hint| format!(" ({hint})"))
                    .unwrap_or_default();
                    return Err(
                        format!("`{text}` is not one of {}{help}", self.values.join(", ")).into(),
                    );
                }
                (Value::string(text.as_str()), None)
            }
            // A secret's value is never echoed, not even a mistyped one.
            (kind, _) if self.secret => return Err(format!("expected {}", kind.name()).into()),
            (kind, other) => {
                return Err(format!("expected {}, got {other}", kind.name()).into());
            }
        };
        if self.secret
            && let Value::String(text) = &checked
            && text.chars().count() < crate::base::secrets::MIN_SECRET_CHARACTERS
        {
            return Err(format!(
                "a secret has at least {} characters, so that masking it in output does not blank \
                 common text; this one has {}",
                crate::base::secrets::MIN_SECRET_CHARACTERS,
                text.chars().count()
            )
            .into());
        }
        if let Some(measure) = measure {
            let shown = |bound: f64| match self.kind {
                InputType::Duration => Duration::from_milliseconds(bound as u64).to_string(),
                _ => bound.to_string(),
            };
            if let Some(minimum) = self.minimum.filter(|minimum| measure < *minimum) {
                return Err(
                    format!("{} is below the minimum {}", shown(measure), shown(minimum)).into(),
                );
            }
            if let Some(maximum) = self.maximum.filter(|maximum| measure > *maximum) {
                return Err(
                    format!("{} is above the maximum {}", shown(measure), shown(maximum)).into(),
                );
            }
        }
        Ok(checked)
    }

    fn clone_shape(&self) -> InputNode {
        InputNode {
            name: self.name.clone(),
            kind: self.kind,
            description: None,
            required: false,
            default: None,
            minimum: None,
            maximum: None,
            values: self.values.clone(),
            items: None,
            secret: false,
        }
    }

    /// A supplied value: a string is read as on the command line (`30s`, `[a, b]`, `true`),
    /// anything else is checked as it is.
    pub fn accept(&self, given: &serde_json::Value) -> Result<Value, InputMismatch> {
        let accepted = match given {
            serde_json::Value::String(text) => self.parse_text(text),
            other => self.check(other),
        }?;
        // Every secret value is known from here on, whether a command line, a `serve` line
        // or a parent protocol's `invoke` gave it.
        if self.secret {
            crate::base::secrets::register_input(&self.name, accepted.as_str());
        }
        Ok(accepted)
    }

    /// Parses a command-line text for this input: strings stay as written, other types are
    /// read as YAML-ish scalars; a list is JSON or YAML flow (`[a, "b,c"]`), or else items
    /// separated by commas (`a,b`), each read as the item type.
    pub fn parse_text(&self, text: &str) -> Result<Value, InputMismatch> {
        let json = match self.kind {
            InputType::String | InputType::Enum | InputType::Duration => {
                serde_json::Value::String(text.to_string())
            }
            InputType::Integer | InputType::Number | InputType::Boolean => {
                serde_json::from_str(text.trim())
                    .map_err(|_| format!("expected {}, got `{text}`", self.kind.name()))?
            }
            // JSON, or YAML flow syntax so that `[cat, README.md]` needs no quoting.
            InputType::List if text.trim_start().starts_with(['[', '{']) => {
                match serde_json::from_str(text.trim()) {
                    Ok(json) => json,
                    Err(_) => {
                        crate::pipeline::load::yaml::parse(
                            text,
                            &crate::pipeline::load::yaml::YamlLimits::default(),
                        )
                        .map_err(|_| {
                            format!(
                                "expected a list such as `[a, b]` or `[\"a\", 1]`, got \
                                     `{text}`"
                            )
                        })?
                        .value
                    }
                }
            }
            InputType::List => comma_separated(text)?,
        };
        self.check(&json)
    }
}

/// `a, b` as the list `["a", "b"]` (each item trimmed, read as the item type by `check`); an
/// empty text is the empty list. An empty item is refused rather than read as `""`: it is
/// more often a stray comma, and JSON (`["a", ""]`) writes an empty text unambiguously.
fn comma_separated(text: &str) -> Result<serde_json::Value, InputMismatch> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Array(Vec::new()));
    }
    text.split(',')
        .enumerate()
        .map(|(index, item)| match item.trim() {
            "" => Err(InputMismatch {
                item: Some(index),
                message: format!(
                    "empty (a stray comma in `{text}`?); an empty text is written as JSON: \
                     `[\"a\", \"\"]`"
                ),
            }),
            item => Ok(serde_json::Value::String(item.to_string())),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(serde_json::Value::Array)
}

/// An input problem found before a run starts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("unknown input `{name}`{hint}")]
    Unknown { name: String, hint: String },
    #[error("missing required input `{name}`{description}; supply it with --input {name}=VALUE")]
    Missing { name: String, description: String },
    #[error("input `{name}`: {mismatch}")]
    Invalid {
        name: String,
        mismatch: InputMismatch,
    },
    #[error(
        "secret input `{name}` is not stored with the run; supply it again: --input {name}=VALUE"
    )]
    SecretNotStored { name: String },
    #[error(
        "--input {name}: a resumed run keeps the inputs it started with; only its secret inputs \
         are supplied again"
    )]
    NotSecret { name: String },
    #[error(
        "`{text}` is not KEY=VALUE, nor the name of a set environment variable to take the value \
         from; write e.g. --input path=README.md, or --input NAME with NAME set"
    )]
    Malformed { text: String },
}

impl Machine {
    /// Binds `--input` texts to input slots, applying defaults; reports every problem.
    pub fn bind_inputs(
        &self,
        supplied: &[(String, String)],
    ) -> Result<Vec<Value>, Vec<InputError>> {
        let values: Vec<(String, serde_json::Value)> = supplied
            .iter()
            .map(|(name, text)| (name.clone(), serde_json::Value::String(text.clone())))
            .collect();
        self.bind_input_values(&values)
    }

    /// Bound inputs by name, as `bind_input_values` reads them back (a duration as its
    /// literal, `1m30s`, not as milliseconds): what a durable run records. A secret input is
    /// recorded as its placeholder, never its value.
    pub fn recorded_inputs(&self, values: &[Value]) -> serde_json::Value {
        serde_json::Value::Object(
            self.inputs
                .iter()
                .zip(values)
                .map(|(input, value)| {
                    let json = match (input.kind, value) {
                        (_, Value::Null) => serde_json::Value::Null,
                        _ if input.secret => {
                            serde_json::Value::String(crate::base::secrets::placeholder(
                                &crate::base::secrets::input_label(&input.name),
                            ))
                        }
                        (InputType::Duration, duration) => duration_literal(duration),
                        (InputType::List, Value::List(items))
                            if input.items == Some(InputType::Duration) =>
                        {
                            items.iter().map(duration_literal).collect()
                        }
                        _ => value.to_json(),
                    };
                    (input.name.clone(), json)
                })
                .collect(),
        )
    }

    /// The names of the secret inputs of this protocol and of every child it invokes: what a
    /// resume may supply again (a running child's are in its parent's snapshot).
    pub fn secret_input_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        // Each protocol once, however often it is invoked (a shared child is one `Arc`).
        let mut seen: Vec<*const Machine> = vec![self];
        let mut pending: Vec<&Machine> = vec![self];
        while let Some(machine) = pending.pop() {
            for input in machine.inputs.iter().filter(|input| input.secret) {
                if !names.contains(&input.name.as_str()) {
                    names.push(&input.name);
                }
            }
            for invoke in machine.states.iter().flat_map(|state| &state.invokes) {
                let child: &Machine = &invoke.machine;
                if !seen.contains(&(child as *const Machine)) {
                    seen.push(child);
                    pending.push(child);
                }
            }
        }
        names
    }

    /// Binds the inputs a durable run recorded (`recorded_inputs`): an input recorded as
    /// `null` (optional, not given) is left to its default. Secret inputs were not recorded:
    /// they come from `secrets` (`--input` on resume), and only they may.
    pub fn bind_recorded_inputs(
        &self,
        recorded: &serde_json::Value,
        secrets: &[(String, String)],
    ) -> Result<Vec<Value>, Vec<InputError>> {
        let mut errors = Vec::new();
        let secret_names = self.secret_input_names();
        for (name, _) in secrets {
            if !secret_names.contains(&name.as_str()) {
                errors.push(InputError::NotSecret { name: name.clone() });
            }
        }
        let mut supplied: Vec<(String, serde_json::Value)> = Vec::new();
        for (name, value) in recorded.as_object().into_iter().flatten() {
            let secret = self
                .inputs
                .iter()
                .any(|input| input.secret && input.name == *name);
            if value.is_null() {
                continue;
            }
            if !secret {
                supplied.push((name.clone(), value.clone()));
                continue;
            }
            match secrets.iter().find(|(given, _)| given == name) {
                Some((_, text)) => supplied.push((name.clone(), text.clone().into())),
                None => errors.push(InputError::SecretNotStored { name: name.clone() }),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        self.bind_input_values(&supplied)
    }

    /// Binds values to input slots: a string is read as on the command line (`30s`, `[1, 2]`),
    /// anything else is checked as it is. Defaults apply; every problem is reported.
    pub fn bind_input_values(
        &self,
        supplied: &[(String, serde_json::Value)],
    ) -> Result<Vec<Value>, Vec<InputError>> {
        let mut values: Vec<Option<Value>> = vec![None; self.inputs.len()];
        let mut errors = Vec::new();
        for (name, given) in supplied {
            match self.inputs.iter().position(|input| &input.name == name) {
                Some(slot) => {
                    let input = &self.inputs[slot];
                    let checked = input.accept(given);
                    match checked {
                        Ok(value) => values[slot] = Some(value),
                        Err(mismatch) => errors.push(InputError::Invalid {
                            name: name.clone(),
                            mismatch,
                        }),
                    }
                }
                None => {
                    let names = self.inputs.iter().map(|input| input.name.as_str());
                    let hint = crate::base::diagnostic::did_you_mean(name, names)
                        .map(|hint| format!("; {hint}"))
                        .unwrap_or_else(|| {
                            let all: Vec<&str> = self
                                .inputs
                                .iter()
                                .map(|input| input.name.as_str())
                                .collect();
                            if all.is_empty() {
                                "; this protocol takes no inputs".into()
                            } else {
                                format!("; its inputs are {}", all.join(", "))
                            }
                        });
                    errors.push(InputError::Unknown {
                        name: name.clone(),
                        hint,
                    });
                }
            }
        }
        let bound = values
            .into_iter()
            .zip(&self.inputs)
            .map(
                |(value, input)| match value.or_else(|| input.default.clone()) {
                    Some(value) => value,
                    None => {
                        let rejected = errors.iter().any(|error| {
                            matches!(error, InputError::Invalid { name, .. } if *name == input.name)
                        });
                        if input.required && !rejected {
                            errors.push(InputError::Missing {
                                name: input.name.clone(),
                                description: input
                                    .description
                                    .as_ref()
                                    .map(|d| format!(" ({d})"))
                                    .unwrap_or_default(),
                            });
                        }
                        Value::Null
                    }
                },
            )
            .collect::<Vec<Value>>();
        // A secret input not supplied still reserves its placeholder (`crate::base::secrets`).
        for (input, value) in self.inputs.iter().zip(&bound) {
            if input.secret && matches!(value, Value::Null) {
                crate::base::secrets::register_input(&input.name, None);
            }
        }
        if errors.is_empty() {
            Ok(bound)
        } else {
            Err(errors)
        }
    }
}

/// A duration input's value (milliseconds) as its literal, `1m30s`, which binding reads back.
fn duration_literal(value: &Value) -> serde_json::Value {
    match value {
        Value::Int(milliseconds) => serde_json::Value::String(
            Duration::from_milliseconds(u64::try_from(*milliseconds).unwrap_or(0)).to_string(),
        ),
        other => other.to_json(),
    }
}

/// Splits `KEY=VALUE`. A bare `KEY` takes its value from the environment variable `KEY` (as
/// `docker run -e KEY` does), so that a secret need not appear in the process's arguments,
/// which other users of the host can read.
pub fn split_assignment(text: &str) -> Result<(String, String), InputError> {
    let malformed = || InputError::Malformed {
        text: text.to_string(),
    };
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        None if !text.trim().is_empty() => std::env::var(text.trim())
            .map(|value| (text.trim().to_string(), value))
            .map_err(|_| malformed()),
        _ => Err(malformed()),
    }
}
