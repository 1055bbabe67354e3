//! A `duration` input (milliseconds, an int) read as a duration where it meets a time value: the nodes `time_check` finds are rewritten, and the functions they then call.

use cel::ExecutionError;
use cel::common::ast::{Expr, IdedExpr, operators};
use cel::common::types::{self, CelDuration, CelInt, CelTimestamp};
use cel::common::value::{CowVal, Val};

use super::time_functions::{one, type_name};
use crate::base::time;

/// A `duration` input read as a duration where it meets a time value (`time_check`).
const MILLISECONDS: &str = "@milliseconds";
/// `a + wait`, `a - wait`, `a < wait`, ... for a `duration` input `wait` beside a value whose
/// type only the run tells: `wait` is a duration if `a` is a time value, a number otherwise.
const ADD_DURATION_INPUT: &str = "@add_duration_input";
const SUBTRACT_DURATION_INPUT: &str = "@subtract_duration_input";
/// Each comparison's form, by operator.
const COMPARED_WITH_DURATION_INPUT: [(&str, &str); 6] = [
    (operators::LESS, "@less_duration_input"),
    (operators::LESS_EQUALS, "@less_equals_duration_input"),
    (operators::GREATER, "@greater_duration_input"),
    (operators::GREATER_EQUALS, "@greater_equals_duration_input"),
    (operators::EQUALS, "@equals_duration_input"),
    (operators::NOT_EQUALS, "@not_equals_duration_input"),
];

/// Adds the functions a rewritten expression calls to the environment.
pub fn register(environment: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let any = || types::DYN_TYPE;
    environment.add_overload(MILLISECONDS, "@milliseconds_1", vec![any()], milliseconds)?;
    environment.add_overload(
        ADD_DURATION_INPUT,
        "@add_duration_input_2",
        vec![any(), any()],
        add_duration_input,
    )?;
    environment.add_overload(
        SUBTRACT_DURATION_INPUT,
        "@subtract_duration_input_2",
        vec![any(), any()],
        subtract_duration_input,
    )?;
    let forms: [cel::common::functions::Function; 6] = [
        |arguments| compare_duration_input(arguments, std::cmp::Ordering::is_lt),
        |arguments| compare_duration_input(arguments, std::cmp::Ordering::is_le),
        |arguments| compare_duration_input(arguments, std::cmp::Ordering::is_gt),
        |arguments| compare_duration_input(arguments, std::cmp::Ordering::is_ge),
        |arguments| equal_duration_input(arguments, true),
        |arguments| equal_duration_input(arguments, false),
    ];
    for ((_, name), form) in COMPARED_WITH_DURATION_INPUT.iter().zip(forms) {
        environment.add_overload(name, &format!("{name}_2"), vec![any(), any()], form)?;
    }
    Ok(())
}

/// The expression with each node `ids` names read as `TimeCheck::read_as_durations` says: a
/// `duration` input's bare name as the duration of its milliseconds, a `+`, `-` or comparison
/// through the function below that decides when it runs.
pub fn read_as_durations(expression: &IdedExpr, ids: &[u64]) -> IdedExpr {
    fn visit(expression: &mut IdedExpr, ids: &[u64]) {
        if let Expr::Call(call) = &mut expression.expr
            && ids.contains(&expression.id)
            && let Some(decided) = with_duration_input(&call.func_name)
        {
            call.func_name = decided.to_string();
        }
        if ids.contains(&expression.id) && matches!(expression.expr, Expr::Ident(_)) {
            let inner = std::mem::take(expression);
            *expression = IdedExpr {
                id: inner.id,
                expr: Expr::Call(cel::common::ast::CallExpr {
                    func_name: MILLISECONDS.to_string(),
                    target: None,
                    args: vec![inner],
                }),
            };
            return;
        }
        match &mut expression.expr {
            Expr::Call(call) => {
                if let Some(target) = call.target.as_deref_mut() {
                    visit(target, ids);
                }
                call.args
                    .iter_mut()
                    .for_each(|argument| visit(argument, ids));
            }
            Expr::List(list) => list
                .elements
                .iter_mut()
                .for_each(|element| visit(element, ids)),
            Expr::Map(map) => {
                for entry in &mut map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(entry) = &mut entry.expr {
                        visit(&mut entry.key, ids);
                        visit(&mut entry.value, ids);
                    }
                }
            }
            Expr::Comprehension(comprehension) => {
                visit(&mut comprehension.iter_range, ids);
                visit(&mut comprehension.accu_init, ids);
                visit(&mut comprehension.loop_cond, ids);
                visit(&mut comprehension.loop_step, ids);
                visit(&mut comprehension.result, ids);
            }
            Expr::Select(select) => visit(&mut select.operand, ids),
            _ => {}
        }
    }
    let mut converted = expression.clone();
    visit(&mut converted, ids);
    converted
}

/// A `duration` input's milliseconds as a duration (`now() - window`); a duration is itself.
fn milliseconds<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let argument = one("duration", arguments)?;
    if argument.downcast_ref::<CelDuration>().is_some() {
        return Ok(argument);
    }
    let Some(milliseconds) = argument.downcast_ref::<CelInt>() else {
        return Err(ExecutionError::function_error(
            "duration",
            format!(
                "a `duration` input holds milliseconds, but this one holds {}: is it given?",
                type_name(argument.as_ref())
            ),
        ));
    };
    let nanoseconds = i128::from(*milliseconds.inner()) * 1_000_000;
    let duration = time::from_nanoseconds(nanoseconds).ok_or_else(|| {
        ExecutionError::function_error(
            "duration",
            time::duration_out_of_range_message(&format!("{} ms", milliseconds.inner())),
        )
    })?;
    Ok(CowVal::Owned(Box::new(CelDuration::from(duration))))
}

/// The function a `+` or `-` (`operator`) of a `duration` input calls when the type of its
/// other side is known only when it runs.
pub fn with_duration_input(operator: &str) -> Option<&'static str> {
    match operator {
        operators::ADD => Some(ADD_DURATION_INPUT),
        operators::SUBSTRACT => Some(SUBTRACT_DURATION_INPUT),
        _ => COMPARED_WITH_DURATION_INPUT
            .iter()
            .find(|(compared, _)| *compared == operator)
            .map(|(_, name)| *name),
    }
}

/// `elapsed < wait`, as `add_duration_input` reads it; `holds` tells whether the ordering
/// found is the one asked.
fn compare_duration_input<'b, 'v>(
    mut arguments: Vec<CowVal<'b, 'v>>,
    holds: fn(std::cmp::Ordering) -> bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    read_beside_time(&mut arguments)?;
    let [left, right] = arguments.as_slice() else {
        return Err(super::bounded::argument_count(2, &arguments));
    };
    let ordering = left
        .as_comparer()
        .ok_or_else(|| {
            ExecutionError::function_error(
                "compare",
                format!(
                    "{} and {} do not compare",
                    type_name(left.as_ref()),
                    type_name(right.as_ref())
                ),
            )
        })?
        .compare(right.as_ref())?;
    Ok(CowVal::Owned(Box::new(cel::common::types::CelBool::from(
        holds(ordering),
    ))))
}

/// `elapsed == wait` (`equal`) or `elapsed != wait`, as `add_duration_input` reads it.
fn equal_duration_input<'b, 'v>(
    mut arguments: Vec<CowVal<'b, 'v>>,
    equal: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    read_beside_time(&mut arguments)?;
    let [left, right] = arguments.as_slice() else {
        return Err(super::bounded::argument_count(2, &arguments));
    };
    Ok(CowVal::Owned(Box::new(cel::common::types::CelBool::from(
        left.equals(right.as_ref()) == equal,
    ))))
}

/// `started + wait`: a duration input (an int) beside a time value is its milliseconds as a
/// duration; beside anything else, `+` as ever.
fn add_duration_input<'b, 'v>(
    mut arguments: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    read_beside_time(&mut arguments)?;
    super::bounded::add(arguments)
}

/// `started - wait`, as `add_duration_input` reads it.
fn subtract_duration_input<'b, 'v>(
    mut arguments: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    read_beside_time(&mut arguments)?;
    let [left, right] = arguments.as_slice() else {
        return Err(super::bounded::argument_count(2, &arguments));
    };
    let subtractor = left.as_subtractor().ok_or_else(|| {
        ExecutionError::function_error(
            "_-_",
            format!(
                "{} - {} is not defined",
                type_name(left.as_ref()),
                type_name(right.as_ref())
            ),
        )
    })?;
    Ok(CowVal::Owned(subtractor.sub(right.as_ref())?.into_owned()))
}

/// Replaces the int of the two `arguments` by its milliseconds as a duration when the other
/// is a timestamp or a duration.
fn read_beside_time(arguments: &mut [CowVal<'_, '_>]) -> Result<(), ExecutionError> {
    let is_time = |value: &dyn Val| {
        value.downcast_ref::<CelTimestamp>().is_some()
            || value.downcast_ref::<CelDuration>().is_some()
    };
    let [left, right] = arguments else {
        return Ok(());
    };
    let input = if is_time(left.as_ref()) {
        right
    } else if is_time(right.as_ref()) {
        left
    } else {
        return Ok(());
    };
    if input.downcast_ref::<CelInt>().is_some() {
        let owned = std::mem::replace(input, CowVal::Owned(Box::new(CelInt::from(0))));
        *input = milliseconds(vec![owned])?;
    }
    Ok(())
}
