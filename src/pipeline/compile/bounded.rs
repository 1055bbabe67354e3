//! CEL under budgets: the parsed expression rewritten so every operation that can grow a value checks its size first, and every comprehension spends a step per iteration.

use std::sync::{Arc, OnceLock};

use cel::common::ast::{CallExpr, Expr, IdedExpr, operators};
use cel::common::types::{self, CelBytes, CelInt, CelList, CelMap, CelString, Type};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, Program};

use super::budget::{self, Exceeded};
use crate::base::value::SCALAR_BYTES;

/// The size of a CEL value, counted as `Value::size_in_bytes` counts ours (the bytes of its
/// strings and keys, `SCALAR_BYTES` for the rest); stops counting past `limit`.
pub fn measure(value: &dyn Val, limit: usize) -> usize {
    use cel::common::types::Kind;
    // Most values are scalars: one look at the kind spares them the downcasts below.
    if !matches!(
        value.get_type().kind(),
        Kind::String | Kind::Bytes | Kind::List | Kind::Map
    ) {
        return SCALAR_BYTES;
    }
    if let Some(text) = value.downcast_ref::<CelString>() {
        return text.inner().len();
    }
    if let Some(bytes) = value.downcast_ref::<CelBytes>() {
        return bytes.inner().len();
    }
    if let Some(list) = value.downcast_ref::<CelList>() {
        let mut total = 0usize;
        for item in list.inner() {
            total = total.saturating_add(SCALAR_BYTES + measure(item.as_ref(), limit));
            if total > limit {
                break;
            }
        }
        return total;
    }
    if let Some(map) = value.downcast_ref::<CelMap>() {
        let mut total = 0usize;
        for (key, item) in map.inner() {
            let key = match key {
                cel::common::types::CelMapKey::String(text) => text.inner().len(),
                _ => SCALAR_BYTES,
            };
            total = total.saturating_add(SCALAR_BYTES + key + measure(item.as_ref(), limit));
            if total > limit {
                break;
            }
        }
        return total;
    }
    SCALAR_BYTES
}

pub(super) fn refuse(why: Exceeded) -> ExecutionError {
    ExecutionError::function_error("budget", why)
}

/// Checks, before it is built, a value of about `bytes`, and spends one step on building it.
pub(super) fn about_to_build(bytes: usize) -> Result<(), ExecutionError> {
    budget::spend(1).map_err(refuse)?;
    budget::build(bytes).map_err(refuse)
}

/// The size a value may have, and a little more: what `measure` needs to tell it is too large.
pub(super) fn measuring_limit() -> usize {
    budget::current().max_context_bytes().saturating_add(1)
}

/// Names of the bounded functions the rewritten expressions call; `@` keeps them out of what
/// a protocol can write.
const ADD: &str = "@add";
const ELEMENT: &str = "@element";
const ITERATE: &str = "@iterate";
const REPLACE: &str = "@replace";
const JOIN: &str = "@join";
const FORMAT: &str = "@format";
const SPLIT: &str = "@split";
const QUOTE: &str = "@quote";
const MATCHES: &str = "@matches";

/// Member functions that can return more than they are given, and what each becomes.
/// `matches` is among them for its time, not its size: it compiles and runs a regex, which
/// costs the pattern's size times the text's in one call no clock can interrupt.
const GROWING_METHODS: [(&str, &str); 5] = [
    ("replace", REPLACE),
    ("join", JOIN),
    ("format", FORMAT),
    ("split", SPLIT),
    ("matches", MATCHES),
];

/// Adds the bounded functions to the expression environment.
pub fn register(environment: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let any = || types::DYN_TYPE;
    environment.add_overload(ADD, "@add_dyn_dyn", vec![any(), any()], add)?;
    environment.add_overload(ELEMENT, "@element_dyn", vec![any()], element)?;
    environment.add_overload(ITERATE, "@iterate_dyn", vec![any()], iterate)?;
    environment.add_overload(REPLACE, "@replace_3", vec![any(), any(), any()], replace)?;
    environment.add_overload(
        REPLACE,
        "@replace_4",
        vec![any(), any(), any(), any()],
        replace,
    )?;
    environment.add_overload(JOIN, "@join_1", vec![any()], join)?;
    environment.add_overload(JOIN, "@join_2", vec![any(), any()], join)?;
    environment.add_overload(FORMAT, "@format_2", vec![any(), any()], format)?;
    environment.add_overload(SPLIT, "@split_2", vec![any(), any()], split)?;
    environment.add_overload(SPLIT, "@split_3", vec![any(), any(), any()], split)?;
    environment.add_overload(QUOTE, "@quote_1", vec![any()], quote)?;
    environment.add_overload(
        MATCHES,
        "@matches_2",
        vec![any(), any()],
        super::matching::matches,
    )?;
    Ok(())
}

/// The expression as it is evaluated under budgets: `a + b` and the growing string and list
/// functions call their bounded forms, the elements of list and map literals are counted
/// as they are built, and each comprehension iterates through `@iterate`.
pub fn rewrite(expression: &IdedExpr) -> IdedExpr {
    let mut rewritten = expression.clone();
    rewrite_in_place(&mut rewritten, None);
    rewritten
}

fn call(id: u64, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: function.to_string(),
            target: None,
            args,
        }),
    }
}

fn wrap(expression: &mut IdedExpr, function: &str) {
    let inner = std::mem::take(expression);
    *expression = call(inner.id, function, vec![inner]);
}

/// `accumulator` is the accumulator of the comprehension whose loop step this is: its
/// `@result + [x]` is how `map` and `filter` append, which CEL runs in place, so it stays.
fn rewrite_in_place(expression: &mut IdedExpr, accumulator: Option<&str>) {
    match &mut expression.expr {
        Expr::Call(call_expression) => {
            let appends_to_accumulator = call_expression.func_name == operators::ADD
                && matches!(call_expression.args.first().map(|first| &first.expr),
                    Some(Expr::Ident(name)) if Some(name.as_str()) == accumulator);
            if let Some(target) = call_expression.target.as_deref_mut() {
                rewrite_in_place(target, None);
            }
            for argument in &mut call_expression.args {
                // The branches of `cond ? @result + [x] : @result` are still the loop step.
                let inner = (call_expression.func_name == operators::CONDITIONAL)
                    .then_some(accumulator)
                    .flatten();
                rewrite_in_place(argument, inner);
            }
            // A literal beside `+` grows the other side by at most its own length (an
            // expression is at most 4 KiB), and a number makes it no concatenation at all: CEL's
            // own `+` is cheaper than a call, and the result is still checked where it is kept.
            // A text literal still goes through `@add` when the other side is not a literal:
            // that side may be a time value, which `@add` writes as text.
            let adds_a_literal = call_expression.args.iter().any(|argument| {
                matches!(&argument.expr, Expr::Literal(literal)
                    if !matches!(literal, cel::common::ast::LiteralValue::String(_)))
            }) || call_expression
                .args
                .iter()
                .all(|argument| matches!(argument.expr, Expr::Literal(_)));
            if call_expression.func_name == operators::ADD
                && !appends_to_accumulator
                && !adds_a_literal
            {
                call_expression.func_name = ADD.to_string();
            } else if call_expression.func_name == "quote"
                && matches!(call_expression.target.as_deref().map(|target| &target.expr),
                    Some(Expr::Ident(namespace)) if namespace == "strings")
            {
                // `strings.quote(s)` is parsed as a method of `strings`.
                call_expression.func_name = QUOTE.to_string();
                call_expression.target = None;
            } else if let Some(engine_form) = super::time_functions::rewritten(call_expression) {
                call_expression.func_name = engine_form.to_string();
            } else if call_expression.func_name == "matches" && call_expression.target.is_none() {
                // The global form, `matches(text, pattern)`.
                call_expression.func_name = MATCHES.to_string();
            } else if let Some(target) = call_expression.target.take() {
                match GROWING_METHODS
                    .iter()
                    .find(|(method, _)| *method == call_expression.func_name)
                {
                    Some((_, bounded)) => {
                        call_expression.func_name = bounded.to_string();
                        call_expression.args.insert(0, *target);
                    }
                    None => call_expression.target = Some(target),
                }
            }
        }
        Expr::List(list) => {
            for element in &mut list.elements {
                rewrite_in_place(element, None);
                if may_be_large(element) {
                    wrap(element, ELEMENT);
                }
            }
        }
        Expr::Map(map) => {
            for entry in &mut map.entries {
                if let cel::common::ast::EntryExpr::MapEntry(entry) = &mut entry.expr {
                    rewrite_in_place(&mut entry.key, None);
                    rewrite_in_place(&mut entry.value, None);
                    if may_be_large(&entry.value) {
                        wrap(&mut entry.value, ELEMENT);
                    }
                }
            }
        }
        Expr::Comprehension(comprehension) => {
            rewrite_in_place(&mut comprehension.iter_range, None);
            wrap(&mut comprehension.iter_range, ITERATE);
            rewrite_in_place(&mut comprehension.accu_init, None);
            rewrite_in_place(&mut comprehension.loop_cond, None);
            let accumulator = comprehension.accu_var.clone();
            rewrite_in_place(&mut comprehension.loop_step, Some(&accumulator));
            rewrite_in_place(&mut comprehension.result, None);
        }
        Expr::Select(select) => rewrite_in_place(&mut select.operand, None),
        Expr::Struct(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Whether an element may be a large value: not a literal, and not an operator that only ever
/// gives a number or a bool.
fn may_be_large(expression: &IdedExpr) -> bool {
    const SCALAR_OPERATORS: [&str; 14] = [
        operators::SUBSTRACT,
        operators::MULTIPLY,
        operators::DIVIDE,
        operators::MODULO,
        operators::NEGATE,
        operators::LOGICAL_NOT,
        operators::LOGICAL_AND,
        operators::LOGICAL_OR,
        operators::EQUALS,
        operators::NOT_EQUALS,
        operators::LESS,
        operators::LESS_EQUALS,
        operators::GREATER,
        operators::GREATER_EQUALS,
    ];
    match &expression.expr {
        Expr::Literal(_) => false,
        Expr::Call(call) => !SCALAR_OPERATORS.contains(&call.func_name.as_str()),
        _ => true,
    }
}

pub(super) fn argument_count(expected: usize, arguments: &[CowVal]) -> ExecutionError {
    ExecutionError::invalid_argument_count(expected, arguments.len())
}

pub(super) fn string_argument<'a>(
    function: &str,
    value: &'a (dyn Val + '_),
) -> Result<&'a str, ExecutionError> {
    value
        .downcast_ref::<CelString>()
        .map(|text| text.inner())
        .ok_or_else(|| {
            ExecutionError::function_error(
                function,
                format!("expects a string, got {}", value.get_type().name()),
            )
        })
}

/// `a + b`: strings and lists are checked before they are joined; numbers add as CEL adds them.
pub(super) fn add<'b, 'v>(
    arguments: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [left, right] = arguments.as_slice() else {
        return Err(argument_count(2, &arguments));
    };
    let growing = left.downcast_ref::<CelString>().is_some()
        || left.downcast_ref::<CelList>().is_some()
        || left.downcast_ref::<CelBytes>().is_some();
    if growing {
        let limit = measuring_limit();
        about_to_build(
            measure(left.as_ref(), limit).saturating_add(measure(right.as_ref(), limit)),
        )?;
    }
    if let Some(joined) = super::time_functions::joined_with_text(left.as_ref(), right.as_ref()) {
        about_to_build(joined.len())?;
        return Ok(CowVal::Owned(Box::new(CelString::from(joined))));
    }
    if let Some(refused) = super::time_functions::number_beside_time(left.as_ref(), right.as_ref())
    {
        return Err(refused);
    }
    let adder = left.as_adder().ok_or_else(|| {
        ExecutionError::no_such_overload(
            "_+_",
            vec![
                left.get_type().name().to_string(),
                right.get_type().name().to_string(),
            ],
        )
    })?;
    Ok(CowVal::Owned(adder.add(right.as_ref())?.into_owned()))
}

/// An element of a list or map literal, counted as it is copied into it.
fn element<'b, 'v>(mut arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Some(value) = arguments.pop() else {
        return Err(argument_count(1, &arguments));
    };
    let limit = measuring_limit();
    budget::build(measure(value.as_ref(), limit).saturating_add(SCALAR_BYTES)).map_err(refuse)?;
    Ok(value)
}

/// A comprehension's range, iterated a step at a time.
fn iterate<'b, 'v>(mut arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Some(range) = arguments.pop() else {
        return Err(argument_count(1, &arguments));
    };
    budget::spend(1).map_err(refuse)?;
    Ok(CowVal::Owned(Box::new(Metered {
        inner: range.into_owned(),
    })))
}

/// `s.replace(old, new)` and `s.replace(old, new, n)`: the result's length is known from the
/// number of matches before it is built.
fn replace<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, old, new, count) = match arguments.as_slice() {
        [text, old, new] => (text, old, new, None),
        [text, old, new, count] => (text, old, new, Some(count)),
        _ => return Err(argument_count(3, &arguments)),
    };
    let text = string_argument("replace", text.as_ref())?;
    let old = string_argument("replace", old.as_ref())?;
    let new = string_argument("replace", new.as_ref())?;
    let count = match count {
        None => None,
        Some(count) => {
            let count = count
                .downcast_ref::<CelInt>()
                .ok_or_else(|| ExecutionError::function_error("replace", "expects an int count"))?;
            usize::try_from(*count.inner()).ok()
        }
    };
    // An empty pattern matches before every character and at the end.
    let matches = if old.is_empty() {
        text.chars().count() + 1
    } else {
        text.matches(old).count()
    };
    let matches = count.map_or(matches, |count| count.min(matches));
    let bytes = text.len() - matches * old.len() + matches.saturating_mul(new.len());
    about_to_build(bytes)?;
    let replaced = match count {
        Some(count) => text.replacen(old, new, count),
        None => text.replace(old, new),
    };
    Ok(CowVal::owned(CelString::from(replaced)))
}

/// `list.join()` and `list.join(separator)`.
fn join<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (list, separator) = match arguments.as_slice() {
        [list] => (list, ""),
        [list, separator] => (list, string_argument("join", separator.as_ref())?),
        _ => return Err(argument_count(1, &arguments)),
    };
    let list = list
        .downcast_ref::<CelList>()
        .ok_or_else(|| ExecutionError::function_error("join", "expects a list of strings"))?;
    let mut parts = Vec::with_capacity(list.inner().len());
    for item in list.inner() {
        parts.push(string_argument("join", item.as_ref())?);
    }
    let bytes = parts.iter().map(|part| part.len()).sum::<usize>()
        + separator.len() * parts.len().saturating_sub(1);
    about_to_build(bytes)?;
    Ok(CowVal::owned(CelString::from(parts.join(separator))))
}

/// `strings.quote(s)`: each character becomes at most a six-byte escape.
fn quote<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text] = arguments.as_slice() else {
        return Err(argument_count(1, &arguments));
    };
    let length = string_argument("strings.quote", text.as_ref())?.len();
    about_to_build(length.saturating_mul(6).saturating_add(2))?;
    delegate(&QUOTE_PROGRAM, "strings.quote(a0)", arguments)
}

/// `template.format(arguments)`: each argument is written at most about twice its size.
fn format<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [template, values] = arguments.as_slice() else {
        return Err(argument_count(2, &arguments));
    };
    let limit = measuring_limit();
    let template = string_argument("format", template.as_ref())?.len();
    about_to_build(template.saturating_add(measure(values.as_ref(), limit).saturating_mul(2)))?;
    delegate(&FORMAT_PROGRAM, "a0.format(a1)", arguments)
}

/// `s.split(separator)` and `s.split(separator, n)`: each part is a string of its own.
fn split<'b, 'v>(arguments: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, separator) = match arguments.as_slice() {
        [text, separator] | [text, separator, _] => (text, separator),
        _ => return Err(argument_count(2, &arguments)),
    };
    let text = string_argument("split", text.as_ref())?;
    let separator = string_argument("split", separator.as_ref())?;
    let parts = if separator.is_empty() {
        text.chars().count()
    } else {
        text.matches(separator).count() + 1
    };
    about_to_build(
        text.len()
            .saturating_add(parts.saturating_mul(SCALAR_BYTES)),
    )?;
    if arguments.len() == 3 {
        delegate(&SPLIT_COUNT_PROGRAM, "a0.split(a1, a2)", arguments)
    } else {
        delegate(&SPLIT_PROGRAM, "a0.split(a1)", arguments)
    }
}

static QUOTE_PROGRAM: OnceLock<Program> = OnceLock::new();
static FORMAT_PROGRAM: OnceLock<Program> = OnceLock::new();
static SPLIT_PROGRAM: OnceLock<Program> = OnceLock::new();
static SPLIT_COUNT_PROGRAM: OnceLock<Program> = OnceLock::new();

/// CEL's standard library with the strings extension, as shipped: what the checked functions
/// hand their work to once the size is known to fit.
fn shipped_environment() -> &'static Arc<cel::Env> {
    static ENVIRONMENT: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENVIRONMENT.get_or_init(|| {
        let mut environment = cel::Env::stdlib();
        let _ = cel::extensions::strings(&mut environment);
        Arc::new(environment)
    })
}

/// Runs CEL's own function through `source`, a call over the variables `a0`, `a1`, ...
fn delegate<'b, 'v>(
    program: &'static OnceLock<Program>,
    source: &str,
    arguments: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let program = match program.get() {
        Some(program) => program,
        None => {
            let parsed = shipped_environment()
                .compile(source)
                .map_err(|error| ExecutionError::function_error(source, error))?;
            program.get_or_init(|| parsed)
        }
    };
    let mut context = Context::with_env(shipped_environment().clone());
    for (index, argument) in arguments.into_iter().enumerate() {
        context.add_variable_as_val(format!("a{index}"), argument.into_owned());
    }
    let result = program.execute(&context)?;
    let boxed: Box<dyn Val> = result
        .try_into()
        .map_err(|_| ExecutionError::function_error(source, "a result CEL cannot hold"))?;
    Ok(CowVal::Owned(boxed))
}

/// A comprehension's range: iterating it spends a step per element, and stops early, leaving
/// the evaluation's budget marked exhausted, when the steps or the step's time run out or a
/// stop is requested. The evaluation then fails with that reason whatever it computed.
#[derive(Debug)]
struct Metered<'v> {
    inner: Box<dyn Val + 'v>,
}

static DYNAMIC: Type = types::DYN_TYPE;

impl<'v> Val for Metered<'v> {
    fn get_type(&self) -> &Type {
        self.inner.get_type()
    }

    fn cel_type() -> &'static Type
    where
        Self: Sized,
    {
        &DYNAMIC
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn cel::common::traits::Iterable + 'w)>
    where
        Self: 'w,
    {
        self.inner.as_iterable().map(|_| self as _)
    }

    fn as_sizer(&self) -> Option<&dyn cel::common::traits::Sizer> {
        self.inner.as_sizer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.inner.equals(other)
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(Metered {
            inner: self.inner.clone_as_boxed(),
        })
    }
}

impl<'v> cel::common::traits::Iterable for Metered<'v> {
    fn iter<'b, 'w>(&'b self) -> Box<dyn cel::common::traits::Iterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        let inner: Option<Box<dyn cel::common::traits::Iterator<'b, 'v> + 'b>> =
            self.inner.as_iterable().map(|iterable| iterable.iter());
        Box::new(MeteredIterator { inner })
    }
}

/// Iterates the range while the budget lasts (`inner` is None for a range that is not
/// iterable, which `as_iterable` never offers).
struct MeteredIterator<'b, 'v> {
    inner: Option<Box<dyn cel::common::traits::Iterator<'b, 'v> + 'b>>,
}

impl<'b, 'v: 'w, 'w> cel::common::traits::Iterator<'b, 'w> for MeteredIterator<'b, 'v> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'w)> {
        budget::spend(1).ok()?;
        let item: &'b (dyn Val + 'v) = self.inner.as_mut()?.next()?;
        Some(item)
    }
}
