//! `duration()`, `timestamp()` and `duration * number` in CEL: the protocol's spellings and clear errors on top of CEL's time values.

use cel::ExecutionError;
use cel::common::ast::{CallExpr, Expr, operators};
use cel::common::types::{self, CelDouble, CelDuration, CelInt, CelString, CelTimestamp, CelUInt};
use cel::common::value::{CowVal, Val};

use crate::base::time;

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

pub(super) fn one<'b, 'v>(
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
pub(super) fn type_name(value: &dyn Val) -> String {
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
        ExecutionError::function_error("_+_", no_unit(&type_name(left), "+", &type_name(right)))
    })
}

/// Why `left - right` (CEL's `sub`) failed, when it is a time value and a number: the same
/// words as `number_beside_time` for `+`. `None` for any other failure.
pub fn number_subtracted(operator: &str, left: &cel::Value, right: &cel::Value) -> Option<String> {
    let kind = |value: &cel::Value| match value {
        cel::Value::Timestamp(_) => Some(("timestamp", true)),
        cel::Value::Duration(_) => Some(("duration", true)),
        cel::Value::Int(_) => Some(("int", false)),
        cel::Value::UInt(_) => Some(("uint", false)),
        cel::Value::Float(_) => Some(("double", false)),
        _ => None,
    };
    let ((left_name, left_time), (right_name, right_time)) = (kind(left)?, kind(right)?);
    (operator == "sub" && left_time != right_time).then(|| no_unit(left_name, "-", right_name))
}

/// `timestamp + int is not defined: ...`, with what to write instead.
fn no_unit(left: &str, operator: &str, right: &str) -> String {
    format!(
        "{left} {operator} {right} is not defined: a number has no unit; write `duration('1ms') * n` for `n` milliseconds (a `duration` input is milliseconds), `duration('1s') * n` for seconds"
    )
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::pipeline::compile::expression::{Expression, Names, Scope};

    fn names() -> Names {
        Names::new(["attempts".to_string()], [], HashMap::new())
    }

    fn scope_with<'a>(names: &'a Names, context: &'a [crate::base::value::Value]) -> Scope<'a> {
        Scope {
            names,
            context,
            inputs: &[],
            event: None,
            is_active: &|_| false,
            clock: 0,
        }
    }

    /// The time functions, methods and operators the checker accepts, evaluated for real.
    #[test]
    fn time_values_evaluate() {
        let names = names();
        let mut scope = scope_with(&names, &[]);
        // 2026-01-01T09:00:00.250Z on the scope's clock.
        scope.clock = 1_767_258_000_250;
        let cases = [
            ("now()", "2026-01-01T09:00:00.250Z"),
            // CEL's own text: the fraction trimmed.
            ("string(now())", "2026-01-01T09:00:00.25Z"),
            ("now() + duration('1h30m')", "2026-01-01T10:30:00.250Z"),
            ("duration('90s') + duration('1d')", "1d1m30s"),
            ("duration('1h') - duration('90m')", "-30m"),
            ("duration('1m') * 3", "3m"),
            ("2 * duration('1m')", "2m"),
            ("duration('1s') * 1.5", "1.5s"),
            ("timestamp('2026-01-01T10:00:00Z') - now()", "59m59.75s"),
            ("now() - duration('250ms')", "2026-01-01T09:00:00.000Z"),
            ("now() < timestamp('2026-01-01T10:00:00+01:00')", "false"),
            ("duration('1h') > duration('59m')", "true"),
            ("now() == timestamp('2026-01-01T09:00:00.250Z')", "true"),
            ("now().getHours()", "9"),
            ("now().getHours('Europe/Paris')", "10"),
            ("now().getFullYear()", "2026"),
            ("duration('1h30m').getMinutes()", "90"),
            ("duration('1h30m').getSeconds()", "5400"),
            ("duration('1500ms').getMilliseconds()", "1500"),
            ("int(timestamp('1970-01-01T00:01:00Z'))", "60"),
            ("timestamp(60) == timestamp('1970-01-01T00:01:00Z')", "true"),
            ("duration(duration('5s'))", "5s"),
            ("string(duration('1h'))", "3600s"),
            // Joined with text as a template writes them (CEL has no such `+`).
            ("'at ' + now()", "at 2026-01-01T09:00:00.250Z"),
            ("duration('90s') + ' left'", "1m30s left"),
            ("'a' + 'b'", "ab"),
            ("3 * 4", "12"),
            ("[1, 2] == [1, 2] ? 2.0 * 1.5 : 0.0", "3.0"),
        ];
        let mut wrong = Vec::new();
        for (text, expected) in cases {
            let result = Expression::compile(text, &names)
                .map_err(|problems| format!("{problems:?}"))
                .and_then(|expression| {
                    expression
                        .evaluate(&scope)
                        .map_err(|error| error.to_string())
                });
            match result {
                Ok(value) if value.to_string() == expected => {}
                other => wrong.push(format!("{text}: {other:?}, expected {expected}")),
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn time_errors_at_run_time_say_what_is_wrong() {
        let names = names();
        let scope = scope_with(&names, &[]);
        for (text, says) in [
            (
                "timestamp('2026-13-01T00:00:00Z')",
                "not an RFC 3339 timestamp",
            ),
            (
                "timestamp('10000-01-01T00:00:00Z')",
                "not an RFC 3339 timestamp",
            ),
            (
                "timestamp('9999-12-31T23:59:59Z') + duration('1s')",
                "overflows",
            ),
            (
                "timestamp(300000000000)",
                "outside the timestamps there are",
            ),
            ("duration('1x')", "not a duration such as"),
            ("duration('300000d')", "292 years"),
            ("duration('2000000h') * 2", "292 years"),
            ("duration('1s') * 1e300", "292 years"),
            ("duration(5)", "takes a text"),
            ("timestamp('')", "not an RFC 3339 timestamp"),
            ("timestamp(1.5)", "takes an RFC 3339 text"),
            ("duration('-')", "not a duration such as"),
            ("now().getHours('Nowhere/Bogus')", "Nowhere/Bogus"),
        ] {
            let expression = Expression::compile(text, &names).unwrap();
            let error = expression.evaluate(&scope).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
