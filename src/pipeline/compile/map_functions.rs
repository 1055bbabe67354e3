//! `merge(a, b)`: a map with `b`'s keys set over `a`'s, which CEL's `+` does not do for maps, its size checked before it is built.

use std::collections::HashMap;
use std::sync::Arc;

use cel::ExecutionError;
use cel::common::types;
use cel::common::value::{CowVal, Val};

use super::bounded::{about_to_build, argument_count, measure, measuring_limit};

/// Adds `merge` to the environment.
pub fn register(environment: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let any = || types::DYN_TYPE;
    environment.add_overload("merge", "merge_2", vec![any(), any()], merge)?;
    Ok(())
}

/// `merge(verdicts, {r.path: r.verdict})`: every key of `a`, then every key of `b`, whose
/// value wins where both have one (one level deep: a nested map is replaced, not merged). A
/// `null` is the empty map, so a variable declared `null` fills up key by key.
fn merge<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [base, changes] = arguments.as_slice() else {
        return Err(argument_count(2, &arguments));
    };
    let limit = measuring_limit();
    about_to_build(measure(base.as_ref(), limit).saturating_add(measure(changes.as_ref(), limit)))?;
    let mut merged = entries(base.as_ref(), "first")?;
    merged.extend(entries(changes.as_ref(), "second")?);
    let value = cel::Value::Map(cel::objects::Map {
        map: Arc::new(merged),
    });
    let boxed: Box<dyn Val> = value
        .try_into()
        .map_err(|_| ExecutionError::function_error("merge", "a map CEL cannot hold"))?;
    Ok(CowVal::Owned(boxed))
}

/// The entries of a map argument (none for `null`), or why it is not one.
fn entries(
    argument: &dyn Val,
    which: &str,
) -> Result<HashMap<cel::objects::Key, cel::Value>, ExecutionError> {
    match cel::Value::try_from(argument)? {
        cel::Value::Map(map) => Ok(Arc::unwrap_or_clone(map.map)),
        cel::Value::Null => Ok(HashMap::new()),
        other => Err(ExecutionError::function_error(
            "merge",
            format!(
                "takes two maps (or null), but its {which} argument is {} `{}`",
                other.type_of(),
                crate::base::value::Value::from_cel(&other)
                    .map_or_else(|| format!("{other:?}"), |value| value.to_string())
            ),
        )),
    }
}
