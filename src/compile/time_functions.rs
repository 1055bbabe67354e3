//! `duration()`, `timestamp()` and `duration * number` in CEL: the protocol's spellings and clear errors on top of CEL's time values.

use cel::ExecutionError;
use cel::common::ast::{CallExpr, Expr, operators};
use cel::common::types::{self, CelDouble, CelDuration, CelInt, CelString, CelTimestamp, CelUInt};
use cel::common::value::{CowVal, Val};

use crate::time;

/// The engine's forms of CEL's functions, called in their place (see `rewritten`).
const DURATION: &str = "@duration";
const TIMESTAMP: &str = "@timestamp";
const MULTIPLY: &str = "@multiply";

/// Adds the engine's time functions to the environment.
pub fn register(environment: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let any = || types::DYN_TYPE;
    environment.add_overload(DURATION, "@duration_1", vec![any()], duration)?;
    environment.add_overload(TIMESTAMP, "@timestamp_1", vec![any()], timestamp)?;
    environment.add_overload(MULTIPLY, "@multiply_2", vec![any(), any()], multiply)?;
    Ok(())
}

/// The function a call runs instead, if it is one of CEL's time functions: `duration(text)`
/// reads the protocol's literals too (`1d`, `1h30m`), `timestamp(text)` says what it expects,
/// and `a * b` also scales a duration. A product of two literals stays CEL's own.
pub fn rewritten(call: &CallExpr) -> Option<&'static str> {
    if call.target.is_some() {
        return None;
    }
    match (call.func_name.as_str(), call.args.len()) {
        ("duration", 1) => Some(DURATION),
        ("timestamp", 1) => Some(TIMESTAMP),
        (operators::MULTIPLY, 2)
            if !call
                .args
                .iter()
                .all(|argument| matches!(argument.expr, Expr::Literal(_))) =>
        {
            Some(MULTIPLY)
        }
        _ => None,
    }
}

fn one<'b, 'v>(
    function: &str,
    mut arguments: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match (arguments.pop(), arguments.is_empty()) {
        (Some(argument), true) => Ok(argument),
        _ => Err(ExecutionError::function_error(
            function,
            "takes one argument",
        )),
    }
}

/// A value's type as the engine's messages name it (`timestamp`, not `google.protobuf.Timestamp`).
fn type_name(value: &dyn Val) -> String {
    if value.downcast_ref::<CelTimestamp>().is_some() {
        return "timestamp".into();
    }
    if value.downcast_ref::<CelDuration>().is_some() {
        return "duration".into();
    }
    value.get_type().name().to_string()
}

/// `duration('90s')`, `duration('1h30m')`, `duration('-1.5h')`; a duration is itself.
fn duration<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let argument = one("duration", arguments)?;
    if argument.downcast_ref::<CelDuration>().is_some() {
        return Ok(argument);
    }
    let Some(text) = argument.downcast_ref::<CelString>() else {
        return Err(ExecutionError::function_error(
            "duration",
            format!(
                "takes a text such as '90s' or '1h30m', not {}",
                type_name(argument.as_ref())
            ),
        ));
    };
    let parsed = time::parse_duration(text.inner())
        .map_err(|message| ExecutionError::function_error("duration", message))?;
    Ok(CowVal::Owned(Box::new(CelDuration::from(parsed))))
}

/// `timestamp('2026-01-01T09:00:00Z')`, `timestamp(unix_seconds)`; a timestamp is itself.
fn timestamp<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let argument = one("timestamp", arguments)?;
    if argument.downcast_ref::<CelTimestamp>().is_some() {
        return Ok(argument);
    }
    let parsed = if let Some(text) = argument.downcast_ref::<CelString>() {
        time::parse_timestamp(text.inner())
    } else if let Some(seconds) = argument.downcast_ref::<CelInt>() {
        chrono::DateTime::from_timestamp(*seconds.inner(), 0)
            .filter(time::in_range)
            .ok_or_else(|| {
                time::out_of_range_message(&format!("{} seconds after 1970", seconds.inner()))
            })
    } else {
        Err(format!(
            "takes an RFC 3339 text such as '2026-01-01T09:00:00Z' or Unix seconds, not {}",
            type_name(argument.as_ref())
        ))
    };
    let parsed = parsed.map_err(|message| ExecutionError::function_error("timestamp", message))?;
    Ok(CowVal::Owned(Box::new(CelTimestamp::from(
        parsed.fixed_offset(),
    ))))
}

/// `'text' + t` or `t + 'text'` for a timestamp or duration `t`: the text joined with the time
/// value's (`2026-01-01T09:00:00.000Z`, `1h30m`), as a template writes it. CEL has no such `+`;
/// `now()` was text before it was a timestamp, and paths are built this way.
pub fn joined_with_text(left: &dyn Val, right: &dyn Val) -> Option<String> {
    let time_text = |value: &dyn Val| {
        if let Some(timestamp) = value.downcast_ref::<CelTimestamp>() {
            Some(time::format_timestamp(&timestamp.inner().to_utc()))
        } else {
            value
                .downcast_ref::<CelDuration>()
                .map(|duration| time::format_duration(duration.inner()))
        }
    };
    if let Some(text) = left.downcast_ref::<CelString>() {
        return time_text(right).map(|time| format!("{}{time}", text.inner()));
    }
    let text = right.downcast_ref::<CelString>()?;
    time_text(left).map(|time| format!("{time}{}", text.inner()))
}

/// Why `t + n` fails for a time value `t` and a number `n`, saying what to write: a number has
/// no unit (a `duration` input, or `now_ms()`, is milliseconds).
pub fn number_beside_time(left: &dyn Val, right: &dyn Val) -> Option<ExecutionError> {
    let is_time = |value: &dyn Val| {
        value.downcast_ref::<CelTimestamp>().is_some()
            || value.downcast_ref::<CelDuration>().is_some()
    };
    let is_number = |value: &dyn Val| factor(value).is_some();
    ((is_time(left) && is_number(right)) || (is_number(left) && is_time(right))).then(|| {
        ExecutionError::function_error(
            "_+_",
            format!(
                "{} + {} is not defined: a number has no unit; write `duration('1ms') * n` for `n` milliseconds (a `duration` input is milliseconds), `duration('1s') * n` for seconds",
                type_name(left),
                type_name(right)
            ),
        )
    })
}

/// A number as a multiplier of a duration: exact for ints, rounded to the nanosecond for doubles.
enum Factor {
    Whole(i128),
    Fraction(f64),
}

fn factor(value: &dyn Val) -> Option<Factor> {
    if let Some(integer) = value.downcast_ref::<CelInt>() {
        return Some(Factor::Whole(i128::from(*integer.inner())));
    }
    if let Some(unsigned) = value.downcast_ref::<CelUInt>() {
        return Some(Factor::Whole(i128::from(*unsigned.inner())));
    }
    value
        .downcast_ref::<CelDouble>()
        .map(|double| Factor::Fraction(*double.inner()))
}

/// `a * b`: a duration times a number (either way round) is a duration; anything else is
/// CEL's own product.
fn multiply<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [left, right] = arguments.as_slice() else {
        return Err(super::bounded::argument_count(2, &arguments));
    };
    let scaled = match (
        left.downcast_ref::<CelDuration>(),
        right.downcast_ref::<CelDuration>(),
    ) {
        (Some(duration), None) => factor(right.as_ref()).map(|factor| (duration, factor)),
        (None, Some(duration)) => factor(left.as_ref()).map(|factor| (duration, factor)),
        _ => None,
    };
    if let Some((duration, factor)) = scaled {
        let product = scale(duration.inner(), factor).ok_or_else(|| {
            ExecutionError::function_error(
                "_*_",
                time::duration_out_of_range_message(&format!(
                    "`{} * {}`",
                    time::format_duration(duration.inner()),
                    describe(left.as_ref(), right.as_ref())
                )),
            )
        })?;
        return Ok(CowVal::Owned(Box::new(CelDuration::from(product))));
    }
    let multiplier = left.as_multiplier().ok_or_else(|| {
        ExecutionError::no_such_overload(
            operators::MULTIPLY,
            vec![type_name(left.as_ref()), type_name(right.as_ref())],
        )
    })?;
    Ok(CowVal::Owned(multiplier.mul(right.as_ref())?.into_owned()))
}

/// The number of a duration's product, for its error.
fn describe(left: &dyn Val, right: &dyn Val) -> String {
    let number = if left.downcast_ref::<CelDuration>().is_some() {
        right
    } else {
        left
    };
    match factor(number) {
        Some(Factor::Whole(whole)) => whole.to_string(),
        Some(Factor::Fraction(fraction)) => fraction.to_string(),
        None => type_name(number),
    }
}

fn scale(duration: &time::Duration, factor: Factor) -> Option<time::Duration> {
    let nanoseconds = time::nanoseconds(duration);
    match factor {
        Factor::Whole(whole) => time::from_nanoseconds(nanoseconds.checked_mul(whole)?),
        Factor::Fraction(fraction) => {
            let product = (nanoseconds as f64 * fraction).round();
            // Past ±2^63 the cast would saturate: refused instead, like any overflow.
            (product.is_finite() && product.abs() < 9.2e18)
                .then(|| time::from_nanoseconds(product as i128))
                .flatten()
        }
    }
}
