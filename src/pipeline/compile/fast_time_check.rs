//! The time check followed over a fast form: whether an expression the fast reader read needs CEL's parse for `time_check` to refuse or convert it.

use super::expression::Names;
use super::fast::{Fast, Operator};
use super::time_check::{Known, known_input};
use crate::base::value::Value;

/// Whether `time_check::check` would find nothing in the expression the fast reader read as `fast`: no
/// problem, and no `duration` input to read as a duration, so the fast form evaluates the
/// text's own meaning. It follows `Checker::infer` node by node over the fast reader's
/// subset, and answers no (CEL's parse then checks the text) for any operation on a time
/// value whose other side's type is known: those are what the checker refuses or converts.
pub fn leaves_unchanged(fast: &Fast, names: &Names) -> bool {
    infer_fast(fast, names).is_some()
}

/// `Checker::infer` over a fast form; `None` where `check` could report or convert.
fn infer_fast(fast: &Fast, names: &Names) -> Option<Known> {
    Some(match fast {
        Fast::Literal(Value::Int(_)) => Known::Number,
        Fast::Literal(Value::String(_)) => Known::Text,
        Fast::Literal(Value::Bool(_)) => Known::Bool,
        Fast::Literal(_) | Fast::EventField(_) => Known::Unknown,
        Fast::Slot(binding) => known_input(names, *binding),
        Fast::Now => Known::Timestamp,
        Fast::Not(operand)
        | Fast::Negate(operand)
        | Fast::Field(operand, _)
        | Fast::Has(operand) => {
            infer_fast(operand, names)?;
            Known::Unknown
        }
        Fast::Call((name, _), arguments) => {
            for argument in arguments {
                infer_fast(argument, names)?;
            }
            match *name {
                "size" | "now_ms" => Known::Number,
                "string" => Known::Text,
                _ => Known::Unknown,
            }
        }
        Fast::List(elements) => {
            for element in elements {
                infer_fast(element, names)?;
            }
            Known::Unknown
        }
        // A macro's expansion adds no time arithmetic; its variable is of unknown type.
        Fast::Macro(method) => {
            infer_fast(&method.target, names)?;
            for argument in &method.arguments {
                infer_fast(argument, names)?;
            }
            Known::Unknown
        }
        Fast::Bound | Fast::InState(_) => Known::Unknown,
        Fast::Map(entries) => {
            for (key, value) in entries {
                infer_fast(key, names)?;
                infer_fast(value, names)?;
            }
            Known::Unknown
        }
        Fast::In(left, right) => {
            infer_fast(left, names)?;
            infer_fast(right, names)?;
            Known::Unknown
        }
        Fast::Method(method) => {
            for argument in &method.arguments {
                infer_fast(argument, names)?;
            }
            match infer_fast(&method.target, names)? {
                Known::Timestamp | Known::Duration if method.name.starts_with("get") => {
                    Known::Number
                }
                _ => Known::Unknown,
            }
        }
        Fast::And(left, right) | Fast::Or(left, right) | Fast::Index(left, right) => {
            infer_fast(left, names)?;
            infer_fast(right, names)?;
            Known::Unknown
        }
        Fast::Conditional(condition, then, otherwise) => {
            infer_fast(condition, names)?;
            infer_fast(then, names)?;
            infer_fast(otherwise, names)?;
            Known::Unknown
        }
        Fast::Binary(operator, left, right) => binary_fast(
            *operator,
            infer_fast(left, names)?,
            infer_fast(right, names)?,
        )?,
        Fast::SlotWithInt(operator, binding, _) => {
            binary_fast(*operator, known_input(names, *binding), Known::Number)?
        }
    })
}

/// `Checker::binary` over known operand types; `None` where it would record a `duration`
/// input to convert, or decide about a time value (refuse it, or give a time type).
fn binary_fast(operator: Operator, left: Known, right: Known) -> Option<Known> {
    let comparison = matches!(
        operator,
        Operator::Equal
            | Operator::NotEqual
            | Operator::Less
            | Operator::LessOrEqual
            | Operator::Greater
            | Operator::GreaterOrEqual
    );
    let with_time = comparison || matches!(operator, Operator::Add | Operator::Subtract);
    let read = |known: Known, other: Known| -> Option<Known> {
        if known != Known::DurationInput {
            return Some(known);
        }
        if with_time && (other.is_time() || other == Known::Unknown) {
            return None;
        }
        Some(Known::Number)
    };
    let (left, right) = (read(left, right)?, read(right, left)?);
    if !(left.is_time() || right.is_time()) || left == Known::Unknown || right == Known::Unknown {
        return Some(match (left, right) {
            _ if comparison => Known::Bool,
            (Known::Number, Known::Number) => Known::Number,
            _ => Known::Unknown,
        });
    }
    None
}
