//! A map's `tolerated_failures`: a count, a percentage of the items, or an expression giving either when the map starts.

use std::sync::Arc;

use super::Execution;
use crate::base::model::InputType;
use crate::base::model::map::Tolerance;
use crate::base::value::Value;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, ValueTemplate};

/// Failed items tolerated, as compiled.
#[derive(Debug)]
pub enum CompiledTolerance {
    Count(u32),
    /// Hundredths of a percent of the items.
    BasisPoints(u32),
    /// An expression (`max_failures`) or a template (`${max_failures}`, `${share}%`), as
    /// written, giving a count or a percentage when the map starts.
    Computed {
        text: Arc<str>,
        value: Box<ValueTemplate>,
    },
}

/// What every refusal says a tolerance may be.
const WHAT_IT_TAKES: &str =
    "a count (0 or more) or a percentage of the items from 0% to 100%, such as `2` or `25%`";

impl CompiledTolerance {
    /// Compiles `tolerated_failures` (`None`: 0), reporting at `pointer` what the load can
    /// tell is wrong: a literal that is no count or percentage, an input of another type.
    pub fn compile(
        written: Option<&Tolerance>,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<CompiledTolerance> {
        let text = match written {
            None => return Some(CompiledTolerance::Count(0)),
            Some(Tolerance::Count(count)) => return Some(CompiledTolerance::Count(*count)),
            Some(Tolerance::Text(text)) => text,
        };
        if let Some(basis_points) = parse_percentage(text) {
            return Some(CompiledTolerance::BasisPoints(basis_points));
        }
        // No expression ends in `%`: this is a percentage, misspelt or out of range.
        if text.trim_end().ends_with('%') && !text.contains("${") {
            compiler.value_error(
                pointer,
                format!("`{text}` is not a count or a percentage"),
                Some(format!("write {WHAT_IT_TAKES}")),
            );
            return None;
        }
        let refuse = |compiler: &mut dyn ActionCompiler, message: String| {
            compiler.value_error(
                pointer,
                message,
                Some(format!(
                    "write {WHAT_IT_TAKES}, or an expression giving one (`max_failures`, `${{max_failures}}`)"
                )),
            );
            None
        };
        let value = if text.contains("${") {
            compiler.value_template(&serde_json::Value::String(text.clone()), pointer)?
        } else {
            ValueTemplate::Expression(compiler.expression(text, pointer)?)
        };
        let read = match &value {
            ValueTemplate::Expression(expression) => expression.text.trim().to_string(),
            _ => String::new(),
        };
        // What is known at load: a literal's value, and the type of an input read alone.
        if let Some(known) = crate::pipeline::compile::context_types::constant_value(&read)
            && let Err(why) = tolerated(&Value::from_json(&known), 1)
        {
            return refuse(compiler, format!("`{text}` {why}"));
        }
        if let Some(kind @ (InputType::Boolean | InputType::List | InputType::Duration)) =
            compiler.input_type(&read)
        {
            return refuse(
                compiler,
                format!(
                    "`{read}` is an input of type {}, which is not a count of items",
                    kind.name()
                ),
            );
        }
        Some(CompiledTolerance::Computed {
            text: Arc::from(text.as_str()),
            value: Box::new(value),
        })
    }

    /// How many of `items` may fail, the expression (if any) evaluated now.
    pub fn resolve(
        &self,
        execution: &mut Execution,
        items: usize,
    ) -> Result<usize, EvaluationError> {
        match self {
            CompiledTolerance::Count(count) => Ok(*count as usize),
            CompiledTolerance::BasisPoints(basis_points) => {
                Ok(items * *basis_points as usize / 10_000)
            }
            CompiledTolerance::Computed { text, value } => {
                let given = execution.with_scope(|scope| value.render(scope))?;
                tolerated(&given, items).map_err(|why| EvaluationError {
                    expression: text.clone(),
                    message: format!("tolerated_failures: this {why}"),
                })
            }
        }
    }
}

/// How many of `items` the value `given` lets fail: a count (an int, a whole number, or its
/// text) or a percentage's text; otherwise why not.
fn tolerated(given: &Value, items: usize) -> Result<usize, String> {
    let count = match given {
        Value::Int(count) => usize::try_from(*count).ok(),
        Value::UInt(count) => usize::try_from(*count).ok(),
        Value::Float(count) if *count >= 0.0 && count.fract() == 0.0 => Some(*count as usize),
        Value::String(text) => match parse_percentage(text) {
            Some(basis_points) => return Ok(items * basis_points as usize / 10_000),
            None => text.trim().parse::<usize>().ok(),
        },
        _ => None,
    };
    count.ok_or_else(|| {
        format!(
            "gives {} `{given}`, which is not {WHAT_IT_TAKES}",
            given.type_name()
        )
    })
}

/// `25%`, `12.5%`: hundredths of a percent, from 0 to 100%.
fn parse_percentage(text: &str) -> Option<u32> {
    let number = text.trim().strip_suffix('%')?.trim();
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let percent: f64 = number.parse().ok()?;
    (0.0..=100.0)
        .contains(&percent)
        .then(|| (percent * 100.0).round() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_are_read_in_hundredths() {
        assert_eq!(parse_percentage("25%"), Some(2500));
        assert_eq!(parse_percentage("12.5%"), Some(1250));
        assert_eq!(parse_percentage("100%"), Some(10_000));
        assert_eq!(parse_percentage("0%"), Some(0));
        assert_eq!(parse_percentage("101%"), None);
        assert_eq!(parse_percentage("25"), None);
        assert_eq!(parse_percentage("-5%"), None);
        assert_eq!(parse_percentage("%"), None);
    }

    #[test]
    fn a_computed_tolerance_is_a_count_or_a_percentage() {
        assert_eq!(tolerated(&Value::Int(2), 8), Ok(2));
        assert_eq!(tolerated(&Value::Float(3.0), 8), Ok(3));
        assert_eq!(tolerated(&Value::string("50%"), 8), Ok(4));
        assert_eq!(tolerated(&Value::string(" 1 "), 8), Ok(1));
        for bad in [
            Value::Int(-1),
            Value::Float(1.5),
            Value::string("many"),
            Value::Bool(true),
            Value::Null,
        ] {
            let why = tolerated(&bad, 8).unwrap_err();
            assert!(why.contains("which is not a count"), "{why}");
        }
    }
}
