//! The fast path of expressions agrees with full CEL: random expressions, well- and ill-typed.
//!
//! Every generated expression is evaluated with `Expression::evaluate` (the fast path when it
//! has one, CEL when the fast path defers) and with `Expression::evaluate_with_cel`, in several
//! scopes whose integer slots lean on the edges of `i64`. The results must be the same value or
//! the same error. A third evaluation, in a scope whose names CEL cannot resolve, tells when the
//! fast path itself produced the value, so the test can prove it exercised the fast path.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use protocol_run::base::value::Value;
use protocol_run::pipeline::compile::expression::{EvaluationError, Expression, Names, Scope};

/// Generated cases, each evaluated in `SCOPES` scopes: under a second in a debug build, most
/// of it in CEL's parser (compiling is dear, evaluating cheap, hence several scopes per case).
const CASES: u32 = 250;
const SCOPES: usize = 8;
/// Nesting depth of generated expressions.
const DEPTH: u32 = 4;

/// The three types the fast path computes with.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Bool,
    Text,
}

/// Integer slots: three context variables and one input.
const INT_SLOTS: [&str; 4] = ["i0", "i1", "i2", "limit"];
const BOOL_SLOTS: [&str; 2] = ["b0", "b1"];
/// Text slots: two context variables and one input.
const TEXT_SLOTS: [&str; 3] = ["s0", "s1", "tool"];
/// Slots and literals of types the fast path leaves to CEL (double, uint, null, list, map).
const OTHER_OPERANDS: [&str; 12] = [
    "f0", "u0", "z", "l", "m", "1.5", "2u", "null", "[1, 2]", "{'k': 1}", "t0", "d0",
];
/// Time slots: two timestamps and two durations, which the fast path compares in place and
/// leaves the arithmetic of to CEL.
const TIME_OPERANDS: [&str; 6] = ["t0", "t1", "d0", "d1", "(t0 - t1)", "(t1 + d0)"];
const INPUTS: [&str; 2] = ["limit", "tool"];

/// Context variables in slot order: the per-scope ones, then the fixed odd-typed ones.
fn context_names() -> Vec<String> {
    [
        "i0", "i1", "i2", "b0", "b1", "s0", "s1", "f0", "u0", "z", "l", "m", "t0", "t1", "d0", "d1",
    ]
    .map(String::from)
    .to_vec()
}

/// The values of one scope.
#[derive(Debug, Clone)]
struct Slots {
    integers: [i64; 4],
    flags: [bool; 2],
    texts: [String; 3],
    /// Timestamps and durations, in milliseconds: few values, so they are often equal.
    instants: [i64; 2],
    spans: [i64; 2],
}

impl Slots {
    fn context(&self) -> Vec<Value> {
        let [i0, i1, i2, _] = self.integers;
        let [s0, s1, _] = &self.texts;
        let mut map = indexmap::IndexMap::new();
        // Not in key order: CEL's maps are unordered, the engine's keep insertion order.
        map.insert(Arc::from("b"), Value::Int(1));
        map.insert(Arc::from("a"), Value::Int(2));
        vec![
            Value::Int(i0),
            Value::Int(i1),
            Value::Int(i2),
            Value::Bool(self.flags[0]),
            Value::Bool(self.flags[1]),
            Value::string(s0.as_str()),
            Value::string(s1.as_str()),
            Value::Float(1.5),
            Value::UInt(u64::MAX),
            Value::Null,
            Value::List(Arc::new(vec![Value::Int(1), Value::string("x")])),
            Value::Map(Arc::new(map)),
            Value::Timestamp(chrono::DateTime::from_timestamp_millis(self.instants[0]).unwrap()),
            Value::Timestamp(chrono::DateTime::from_timestamp_millis(self.instants[1]).unwrap()),
            Value::Duration(chrono::TimeDelta::milliseconds(self.spans[0])),
            Value::Duration(chrono::TimeDelta::milliseconds(self.spans[1])),
        ]
    }

    fn inputs(&self) -> Vec<Value> {
        vec![
            Value::Int(self.integers[3]),
            Value::string(self.texts[2].as_str()),
        ]
    }
}

/// A generated expression and the scopes it is evaluated in.
#[derive(Debug, Clone)]
struct Case {
    text: String,
    scopes: Vec<Slots>,
}

/// Integers, mostly small, often at the edges where `+ - * / %` and unary minus overflow.
fn integer() -> impl Strategy<Value = i64> {
    prop_oneof![
        5 => -3i64..=3,
        3 => select(vec![
            i64::MAX,
            i64::MIN,
            i64::MAX - 1,
            i64::MIN + 1,
            // The square root of i64::MAX, about: products of these overflow or just fit.
            3_037_000_499,
            -3_037_000_500,
            1 << 32,
            i64::MAX / 2,
            i64::MIN / 2,
        ]),
        1 => any::<i64>(),
    ]
}

/// An integer literal as CEL source: decimal, or hexadecimal for non-negative values.
fn integer_literal() -> impl Strategy<Value = String> {
    (integer(), any::<bool>()).prop_map(|(integer, hexadecimal)| match integer {
        // The literal 9223372036854775808 does not exist, so neither does `-` applied to it.
        i64::MIN => "-9223372036854775807 - 1".to_string(),
        integer if hexadecimal && integer >= 0 => format!("0x{integer:x}"),
        integer => integer.to_string(),
    })
}

fn text() -> impl Strategy<Value = String> {
    select(vec!["", "a", "ab", "B", "timeout", "é", "日本", "a\u{0}"]).prop_map(String::from)
}

fn text_literal() -> impl Strategy<Value = String> {
    select(vec![
        "''",
        "'a'",
        "\"ab\"",
        "'B'",
        "'timeout'",
        "'\\u00e9'",
        "'日本'",
        "'a\\x00'",
        "r'a\\n'",
    ])
    .prop_map(String::from)
}

fn leaf(kind: Kind) -> BoxedStrategy<String> {
    let slot = |names: &[&'static str]| select(names.to_vec()).prop_map(String::from);
    match kind {
        Kind::Int => prop_oneof![integer_literal(), slot(&INT_SLOTS)].boxed(),
        Kind::Bool => prop_oneof![slot(&["true", "false"]), slot(&BOOL_SLOTS)].boxed(),
        Kind::Text => prop_oneof![text_literal(), slot(&TEXT_SLOTS)].boxed(),
    }
}

/// An operand in parentheses unless it is a name or a plain literal.
fn group(operand: &str) -> String {
    let plain = operand
        .chars()
        .all(|character| character.is_alphanumeric() || character == '_');
    if plain {
        operand.to_string()
    } else {
        format!("({operand})")
    }
}

fn binary(
    left: BoxedStrategy<String>,
    operators: &[&'static str],
    right: BoxedStrategy<String>,
) -> BoxedStrategy<String> {
    (left, select(operators.to_vec()), right)
        .prop_map(|(left, operator, right)| {
            format!("{} {operator} {}", group(&left), group(&right))
        })
        .boxed()
}

const ARITHMETIC: [&str; 5] = ["+", "-", "*", "/", "%"];
const COMPARISONS: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];

/// An expression meant to have type `kind`; about one subexpression in twelve has another
/// type, or a type only CEL handles.
fn expression(kind: Kind, depth: u32) -> BoxedStrategy<String> {
    if depth == 0 {
        return leaf(kind);
    }
    let sub = move |kind: Kind| expression(kind, depth - 1);
    // `prop_flat_map` builds the chosen branch's strategy only when it is drawn, so the
    // strategy tree grows with the expression, not exponentially with the depth.
    (0u8..100)
        .prop_flat_map(move |roll| -> BoxedStrategy<String> {
            match (kind, roll) {
                (_, 0..=24) => leaf(kind),
                (_, 25..=32) => prop_oneof![
                    select(OTHER_OPERANDS.to_vec()).prop_map(String::from),
                    select(vec![Kind::Int, Kind::Bool, Kind::Text]).prop_flat_map(sub),
                ]
                .boxed(),
                (Kind::Int, 33..=79) => binary(sub(Kind::Int), &ARITHMETIC, sub(Kind::Int)),
                (Kind::Int, 80..=89) => sub(Kind::Int)
                    .prop_map(|operand| format!("-{}", group(&operand)))
                    .boxed(),
                (Kind::Bool, 33..=52) => binary(sub(Kind::Int), &COMPARISONS, sub(Kind::Int)),
                (Kind::Bool, 53..=60) => binary(sub(Kind::Text), &COMPARISONS, sub(Kind::Text)),
                (Kind::Bool, 61..=64) => binary(sub(Kind::Bool), &COMPARISONS, sub(Kind::Bool)),
                (Kind::Bool, 65..=82) => binary(sub(Kind::Bool), &["&&", "||"], sub(Kind::Bool)),
                (Kind::Bool, 83..=89) => sub(Kind::Bool)
                    .prop_map(|operand| format!("!{}", group(&operand)))
                    .boxed(),
                (Kind::Bool, 90..=94) => {
                    let time = || {
                        select(TIME_OPERANDS.to_vec())
                            .prop_map(String::from)
                            .boxed()
                    };
                    binary(time(), &COMPARISONS, time())
                }
                (Kind::Text, 33..=49) => binary(sub(Kind::Text), &["+"], sub(Kind::Text)),
                (Kind::Text, 50..=89) => (sub(Kind::Bool), sub(Kind::Text), sub(Kind::Text))
                    .prop_map(|(condition, then, otherwise)| {
                        format!(
                            "{} ? {} : {}",
                            group(&condition),
                            group(&then),
                            group(&otherwise)
                        )
                    })
                    .boxed(),
                _ => (sub(Kind::Bool), sub(kind), sub(kind))
                    .prop_map(|(condition, then, otherwise)| {
                        format!(
                            "{} ? {} : {}",
                            group(&condition),
                            group(&then),
                            group(&otherwise)
                        )
                    })
                    .boxed(),
            }
        })
        .boxed()
}

fn slots() -> impl Strategy<Value = Slots> {
    (
        [integer(), integer(), integer(), integer()],
        any::<[bool; 2]>(),
        [text(), text(), text()],
        [instant(), instant()],
        [span(), span()],
    )
        .prop_map(|(integers, flags, texts, instants, spans)| Slots {
            integers,
            flags,
            texts,
            instants,
            spans,
        })
}

/// Unix milliseconds: the epoch, a day in 2026, a millisecond later, year 9999.
fn instant() -> impl Strategy<Value = i64> {
    select(vec![
        0,
        1_767_258_000_000,
        1_767_258_000_001,
        253_402_300_799_999,
    ])
}

/// Milliseconds of a duration, negative ones among them.
fn span() -> impl Strategy<Value = i64> {
    select(vec![0, 1, -1, 90_000, 86_400_000])
}

fn case() -> impl Strategy<Value = Case> {
    let kind = prop_oneof![5 => Just(Kind::Bool), 4 => Just(Kind::Int), 1 => Just(Kind::Text)];
    (
        kind.prop_flat_map(|kind| expression(kind, DEPTH)),
        proptest::collection::vec(slots(), SCOPES),
    )
        .prop_map(|(text, scopes)| Case { text, scopes })
}

/// What CEL reported, as far as the message tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ErrorKind {
    Overflow,
    DivisionByZero,
    TypeMismatch,
    Other,
}

fn error_kind(error: &EvaluationError) -> ErrorKind {
    let message = error.message.to_lowercase();
    if message.contains("overflow") {
        ErrorKind::Overflow
    } else if message.contains("by zero") {
        ErrorKind::DivisionByZero
    } else if message.contains("overload")
        || message.contains("unsupported")
        || message.contains("compared")
        || message.contains("unexpected type")
    {
        ErrorKind::TypeMismatch
    } else {
        ErrorKind::Other
    }
}

/// Equal values, with NaN equal to itself (CEL arithmetic on the double slot can make one).
fn same_value(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Float(left), Value::Float(right)) => {
            left == right || (left.is_nan() && right.is_nan())
        }
        (Value::List(left), Value::List(right)) => {
            left.len() == right.len()
                && left.iter().zip(right.iter()).all(|(l, r)| same_value(l, r))
        }
        // Maps compare as maps, regardless of key order (see `Statistics::map_order_differs`).
        (Value::Map(left), Value::Map(right)) => {
            left.len() == right.len()
                && left.iter().all(|(key, value)| {
                    right.get(key).is_some_and(|other| same_value(value, other))
                })
        }
        _ => left == right,
    }
}

/// `list + m` appends the map's keys, and CEL's maps iterate in a hash order that differs from
/// one map to the next, even within a process: such a result is the same list of keys in some
/// order. Only expressions that add the map slot `m` are judged so.
fn same_keys_of_a_map(
    text: &str,
    left: &Result<Value, EvaluationError>,
    right: &Result<Value, EvaluationError>,
) -> bool {
    let adds_the_map = text.contains("+ m") || text.contains("m +");
    let (Ok(Value::List(left)), Ok(Value::List(right))) = (left, right) else {
        return false;
    };
    let sorted = |list: &[Value]| {
        let mut shown: Vec<String> = list.iter().map(|value| format!("{value:?}")).collect();
        shown.sort();
        shown
    };
    adds_the_map && sorted(left) == sorted(right)
}

fn same_result(
    left: &Result<Value, EvaluationError>,
    right: &Result<Value, EvaluationError>,
) -> bool {
    match (left, right) {
        (Ok(left), Ok(right)) => same_value(left, right),
        // A message that prints a map is not reproducible (CEL's maps are hash maps): only
        // the kind of error is compared then.
        (Err(left), Err(right)) if left.message.contains("Map {") => {
            error_kind(left) == error_kind(right)
        }
        (Err(left), Err(right)) => left == right,
        _ => false,
    }
}

#[derive(Debug, Default)]
struct Statistics {
    cases: u32,
    not_compiled: Vec<String>,
    with_fast_path: u32,
    evaluations: u32,
    /// Evaluations whose value the fast path produced (it did not defer to CEL).
    decided_by_fast_path: u32,
    values: u32,
    errors: HashMap<ErrorKind, u32>,
    /// Expressions the fast reader read (CEL's parser not needed at compile time).
    read_directly: u32,
    /// Evaluations the interpreter's raw forms decided: an `i64` for an assignment, a `bool`
    /// for a guard (`Expression::integer_over`, `condition_over`).
    raw_integers: u32,
    raw_conditions: u32,
    /// Equal maps whose keys came out in another order (the fast path keeps the context's
    /// insertion order; CEL's results are sorted by key).
    map_order_differs: std::collections::BTreeSet<String>,
}

fn check(
    case: &Case,
    names: &Names,
    blind: &Names,
    statistics: &RefCell<Statistics>,
) -> Result<(), TestCaseError> {
    let mut statistics = statistics.borrow_mut();
    statistics.cases += 1;
    let expression = match Expression::compile(&case.text, names) {
        Ok(expression) => expression,
        Err(problems) => {
            statistics
                .not_compiled
                .push(format!("`{}`: {}", case.text, problems[0].message));
            return Ok(());
        }
    };
    statistics.with_fast_path += u32::from(expression.has_fast_path());
    // What the fast reader reads, CEL's parser must read too, with a fast form of its own.
    let read_directly = expression.is_read_directly();
    statistics.read_directly += u32::from(read_directly);
    let through_cel = Expression::compile_with_cel(&case.text, names);
    prop_assert!(
        through_cel.as_ref().is_ok_and(Expression::has_fast_path) || !read_directly,
        "`{}` was read directly, but through CEL: {:?}",
        case.text,
        through_cel
            .as_ref()
            .map(Expression::has_fast_path)
            .map_err(|p| &p[0].message)
    );
    for slots in &case.scopes {
        let context = slots.context();
        let inputs = slots.inputs();
        let scope = Scope {
            names,
            context: &context,
            inputs: &inputs,
            event: None,
            is_active: &|_| false,
            clock: 0,
        };
        let fast = expression.evaluate(&scope);
        if let Ok(through_cel) = &through_cel {
            let other = through_cel.evaluate(&scope);
            prop_assert!(
                same_result(&fast, &other) || same_keys_of_a_map(&case.text, &fast, &other),
                "`{}` in {slots:?}: read directly {fast:?}, read by CEL {other:?}",
                case.text
            );
        }
        let full = expression.evaluate_with_cel(&scope);
        prop_assert!(
            same_result(&fast, &full) || same_keys_of_a_map(&case.text, &fast, &full),
            "`{}` in {slots:?}:\n  evaluate:          {fast:?}\n  evaluate_with_cel: {full:?}",
            case.text
        );
        statistics.evaluations += 1;
        // The raw forms the interpreter stores and branches on without a `Value` agree too.
        if let Some(integer) = expression.integer_over(&context) {
            prop_assert!(
                matches!(&full, Ok(Value::Int(value)) if *value == integer),
                "`{}` in {slots:?}: raw int {integer}, CEL {full:?}",
                case.text
            );
            statistics.raw_integers += 1;
        }
        if let Some(holds) = expression.condition_over(&context) {
            prop_assert!(
                matches!(&full, Ok(Value::Bool(value)) if *value == holds),
                "`{}` in {slots:?}: raw condition {holds}, CEL {full:?}",
                case.text
            );
            statistics.raw_conditions += 1;
        }
        match &full {
            Ok(full) => {
                statistics.values += 1;
                // Equal as values (checked above), yet printed differently: key order.
                if let Ok(fast) = &fast
                    && format!("{fast:?}") != format!("{full:?}")
                {
                    statistics.map_order_differs.insert(case.text.clone());
                }
            }
            Err(error) => *statistics.errors.entry(error_kind(error)).or_default() += 1,
        }
        // CEL resolves no name in this scope, while the fast path reads its slots directly:
        // a value equal to CEL's, from an expression that reads a name, is the fast path's.
        if expression.has_fast_path() && mentions_a_name(&case.text) {
            let blind_scope = Scope {
                names: blind,
                ..scope
            };
            if let (Ok(probed), Ok(full)) = (expression.evaluate(&blind_scope), &full)
                && same_value(&probed, full)
            {
                statistics.decided_by_fast_path += 1;
            }
        }
    }
    Ok(())
}

/// Whether the expression reads an int, bool or text slot (string literals hold no names).
fn mentions_a_name(text: &str) -> bool {
    text.split(|character: char| !character.is_alphanumeric() && character != '_')
        .any(|word| {
            INT_SLOTS
                .iter()
                .chain(&BOOL_SLOTS)
                .chain(&TEXT_SLOTS)
                .any(|name| word == *name)
        })
}

#[test]
fn fast_path_agrees_with_cel_on_random_expressions() {
    let names = Names::new(context_names(), INPUTS.map(String::from), HashMap::new());
    let blind = Names::new([], [], HashMap::new());
    let statistics = RefCell::new(Statistics::default());
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&case(), |case| check(&case, &names, &blind, &statistics));
    if let Err(error) = result {
        panic!("{error}");
    }
    let statistics = statistics.into_inner();
    eprintln!("{statistics:#?}");
    let compiled = statistics.cases - statistics.not_compiled.len() as u32;
    assert!(
        statistics.not_compiled.len() * 100 <= statistics.cases as usize,
        "too many generated expressions do not compile: {:?}",
        statistics.not_compiled
    );
    // Not vacuous: most expressions have a fast form, and it decides a large share of the
    // evaluations, values and errors alike being produced.
    assert!(
        statistics.read_directly * 100 >= compiled * 40,
        "only {} of {compiled} expressions were read without CEL's parser",
        statistics.read_directly
    );
    assert!(
        statistics.with_fast_path * 100 >= compiled * 50,
        "only {} of {compiled} expressions have a fast path",
        statistics.with_fast_path
    );
    assert!(
        statistics.decided_by_fast_path * 100 >= statistics.evaluations * 20,
        "the fast path produced only {} of {} values",
        statistics.decided_by_fast_path,
        statistics.evaluations
    );
    assert!(
        statistics.raw_integers > 0,
        "the raw int form decided nothing in {} evaluations",
        statistics.evaluations
    );
    for kind in [
        ErrorKind::Overflow,
        ErrorKind::DivisionByZero,
        ErrorKind::TypeMismatch,
    ] {
        assert!(
            statistics.errors.get(&kind).copied().unwrap_or(0) > 0,
            "no {kind:?} error in {} evaluations",
            statistics.evaluations
        );
    }
}

/// The edges the random cases reach only by chance, each checked every run.
#[test]
fn fast_path_agrees_with_cel_on_edge_cases() {
    let names = Names::new(context_names(), INPUTS.map(String::from), HashMap::new());
    let slots = Slots {
        integers: [i64::MAX, i64::MIN, -1, 0],
        flags: [true, false],
        texts: ["é".into(), "z".into(), "".into()],
        instants: [0, 253_402_300_799_999],
        spans: [-1, 1],
    };
    let (context, inputs) = (slots.context(), slots.inputs());
    let scope = Scope {
        names: &names,
        context: &context,
        inputs: &inputs,
        event: None,
        is_active: &|_| false,
        clock: 0,
    };
    let cases = [
        ("i0 + 1", "overflow"),
        ("i1 - 1", "overflow"),
        ("i0 * 2", "overflow"),
        ("-i1", "overflow"),
        ("i1 / i2", "overflow"),
        ("i1 % i2", "overflow"),
        ("i0 / limit", "by zero"),
        ("i0 % limit", "by zero"),
        ("i0 + i1", "-1"),
        ("-7 / 2", "-3"),
        ("-7 % 2", "-1"),
        ("7 % -2", "1"),
        ("false && 1 == 'a'", "false"),
        ("true || i0 + 1 > 0", "true"),
        ("i0 + 1 > 0 || true", "true"),
        ("b1 && i0 + 1 > 0", "false"),
        ("true && 1", "no matching overload"),
        ("s0 > s1", "true"),
        ("s1 < s0 && tool < s1 && tool == ''", "true"),
        ("b0 ? i0 : i0 + 1", "9223372036854775807"),
        ("b1 ? i0 + 1 : 0x10", "16"),
        ("1 == true", "false"),
        ("i2 < u0", "true"),
        ("t0 < t1 && d0 < d1 && t0 != t1", "true"),
        ("t0 == d0", "false"),
        ("t1 + d1", "overflow"),
        ("t0 - t1 < d0", "overflow"),
        ("t1 - t1 < d1", "true"),
    ];
    for (text, expected) in cases {
        let expression = Expression::compile(text, &names).expect(text);
        let fast = expression.evaluate(&scope);
        let full = expression.evaluate_with_cel(&scope);
        assert!(
            same_result(&fast, &full),
            "`{text}`: {fast:?} but CEL {full:?}"
        );
        let shown = match &full {
            Ok(value) => value.to_string(),
            Err(error) => error.message.to_lowercase(),
        };
        assert!(
            shown.contains(expected),
            "`{text}` gave {shown}, not {expected}"
        );
    }
}

/// The raw forms the interpreter uses for `slot <operator> int` (an `i64` stored in place, a
/// `bool` branched on), for every operator over every edge, against CEL: they decide exactly
/// when CEL gives an int or a bool, and give the same one; otherwise they defer.
#[test]
fn raw_forms_agree_with_cel_on_every_operator_and_edge() {
    let names = Names::new(context_names(), INPUTS.map(String::from), HashMap::new());
    let edges = [
        i64::MAX,
        i64::MIN,
        i64::MAX - 1,
        -3,
        -1,
        0,
        1,
        2,
        3_037_000_500,
    ];
    let (mut integers, mut conditions, mut deferred) = (0, 0, 0);
    for (operator, left, right) in ARITHMETIC
        .iter()
        .chain(&COMPARISONS)
        .flat_map(|operator| edges.map(move |left| (operator, left)))
        .flat_map(|(operator, left)| {
            [-3, -1, 0, 1, 2, 3, i64::MAX].map(|right| (operator, left, right))
        })
    {
        let (context, inputs) = (plain_slots(left).context(), plain_slots(left).inputs());
        let scope = Scope {
            context: &context,
            inputs: &inputs,
            ..scope_over_nothing(&names)
        };
        // A text slot and an input take the general path, whatever the operator.
        for other in [
            format!("s0 {operator} {right}"),
            format!("limit {operator} {right}"),
        ] {
            let expression = Expression::compile(&other, &names).expect(&other);
            assert_eq!(expression.integer_over(&context), None, "`{other}`");
            assert_eq!(expression.condition_over(&context), None, "`{other}`");
        }
        let text = format!("i0 {operator} {right}");
        let expression = Expression::compile(&text, &names).expect(&text);
        let full = expression.evaluate_with_cel(&scope);
        match (
            expression.integer_over(&context),
            expression.condition_over(&context),
            &full,
        ) {
            (Some(raw), None, Ok(Value::Int(value))) if raw == *value => integers += 1,
            (None, Some(raw), Ok(Value::Bool(value))) if raw == *value => conditions += 1,
            // Overflow and division by zero: CEL's error, reported in its words.
            (None, None, Err(_)) => deferred += 1,
            (integer, condition, full) => {
                panic!("`{text}` with i0 = {left}: raw {integer:?} / {condition:?}, CEL {full:?}")
            }
        }
    }
    assert!(integers > 0 && conditions > 0 && deferred > 0);
    // An int literal is stored raw; other literals are not ints.
    let context = plain_slots(0).context();
    for (text, raw) in [
        ("7", Some(7)),
        ("-7", Some(-7)),
        ("'7'", None),
        ("true", None),
    ] {
        let expression = Expression::compile(text, &names).expect(text);
        assert_eq!(expression.integer_over(&context), raw, "`{text}`");
    }
}

/// Slots with `i0` set to `integer`, the other ints 0, and plain flags and texts.
fn plain_slots(integer: i64) -> Slots {
    Slots {
        integers: [integer, 0, 0, 0],
        flags: [true, false],
        texts: ["a".into(), "b".into(), "".into()],
        instants: [0, 0],
        spans: [0, 0],
    }
}

/// A scope with no data, no event, no active state and the clock at 0.
fn scope_over_nothing(names: &Names) -> Scope<'_> {
    Scope {
        names,
        context: &[],
        inputs: &[],
        event: None,
        is_active: &|_| false,
        clock: 0,
    }
}
