//! Load-time checks of time arithmetic where the types are known: `now() + 5` is refused with what to write instead, and a `duration` input beside a time value is read as a duration.

use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};

use super::expression::{ExpressionProblem, NameBinding, Names};
use crate::base::model::InputType;

/// What the checker knows of a sub-expression's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Known {
    Timestamp,
    Duration,
    Number,
    Text,
    Bool,
    /// A `duration` input: milliseconds (an int), read as a duration beside a time value
    /// (`now() - window`), as a number anywhere else (`base_timeout * attempt`).
    DurationInput,
    /// A variable, a field, a call whose result depends on its arguments: not checked.
    Unknown,
}

impl Known {
    pub(super) fn is_time(self) -> bool {
        matches!(self, Known::Timestamp | Known::Duration)
    }

    fn article(self) -> &'static str {
        match self {
            Known::Timestamp => "a timestamp",
            Known::Duration => "a duration",
            Known::Number => "a number",
            Known::Text => "a text",
            Known::Bool => "a bool",
            Known::DurationInput => "a duration input",
            Known::Unknown => "a value",
        }
    }
}

/// The operators whose operands are checked: arithmetic and comparison. (A host function of
/// two arguments, `in`, `&&` and indexing are not time arithmetic.)
const ARITHMETIC: [&str; 5] = [
    operators::ADD,
    operators::SUBSTRACT,
    operators::MULTIPLY,
    operators::DIVIDE,
    operators::MODULO,
];
const COMPARISONS: [&str; 6] = [
    operators::LESS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::GREATER_EQUALS,
    operators::EQUALS,
    operators::NOT_EQUALS,
];

/// What the check found: the problems, and the nodes that read a `duration` input as a
/// duration where they are evaluated: its bare name beside a known time value, or a `+`, `-`
/// or comparison of it whose other side only the run can tell (`started + window`).
#[derive(Debug, Default)]
pub struct TimeCheck {
    pub problems: Vec<ExpressionProblem>,
    pub read_as_durations: Vec<u64>,
}

/// The problems of time arithmetic in `expression`; `offset` locates a node in the text, and
/// `names` tells the declared type of each input.
pub fn check(
    expression: &IdedExpr,
    offset: &dyn Fn(&IdedExpr) -> usize,
    names: &Names,
) -> TimeCheck {
    let mut checker = Checker {
        offset,
        names,
        bound: Vec::new(),
        found: TimeCheck::default(),
    };
    checker.infer(expression);
    checker.found
}

struct Checker<'a> {
    offset: &'a dyn Fn(&IdedExpr) -> usize,
    names: &'a Names,
    /// The variables of the comprehensions around the node: they hide inputs of their name.
    bound: Vec<String>,
    found: TimeCheck,
}

impl Checker<'_> {
    fn infer(&mut self, expression: &IdedExpr) -> Known {
        match &expression.expr {
            Expr::Literal(literal) => match literal {
                LiteralValue::Int(_) | LiteralValue::UInt(_) | LiteralValue::Double(_) => {
                    Known::Number
                }
                LiteralValue::String(_) => Known::Text,
                LiteralValue::Boolean(_) => Known::Bool,
                _ => Known::Unknown,
            },
            Expr::Ident(name) if !self.bound.contains(name) => self
                .names
                .binding(name)
                .map_or(Known::Unknown, |binding| known_input(self.names, binding)),
            Expr::Call(call) => {
                let arguments: Vec<Known> = call
                    .args
                    .iter()
                    .map(|argument| self.infer(argument))
                    .collect();
                if let Some(target) = &call.target {
                    let target = self.infer(target);
                    return match (self.as_number(target), call.func_name.as_str()) {
                        (Known::Timestamp | Known::Duration, name) if name.starts_with("get") => {
                            Known::Number
                        }
                        _ => Known::Unknown,
                    };
                }
                match (call.func_name.as_str(), arguments.as_slice()) {
                    ("now" | "timestamp", _) => Known::Timestamp,
                    ("duration", _) => Known::Duration,
                    ("now_ms" | "int" | "uint" | "double" | "size", _) => Known::Number,
                    ("string", _) => Known::Text,
                    (operator, [left, right])
                        if ARITHMETIC.contains(&operator) || COMPARISONS.contains(&operator) =>
                    {
                        self.binary(operator, *left, *right, &call.args, expression)
                    }
                    _ => Known::Unknown,
                }
            }
            Expr::List(list) => {
                list.elements.iter().for_each(|element| {
                    self.infer(element);
                });
                Known::Unknown
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(entry) = &entry.expr {
                        self.infer(&entry.key);
                        self.infer(&entry.value);
                    }
                }
                Known::Unknown
            }
            Expr::Comprehension(comprehension) => {
                self.infer(&comprehension.iter_range);
                let outer = self.bound.len();
                self.bound.push(comprehension.iter_var.clone());
                self.bound.push(comprehension.accu_var.clone());
                self.infer(&comprehension.accu_init);
                self.infer(&comprehension.loop_cond);
                self.infer(&comprehension.loop_step);
                self.infer(&comprehension.result);
                self.bound.truncate(outer);
                Known::Unknown
            }
            Expr::Select(select) => {
                self.infer(&select.operand);
                Known::Unknown
            }
            _ => Known::Unknown,
        }
    }

    /// The type of `left <operator> right`, reporting a combination that always fails.
    fn binary(
        &mut self,
        operator: &str,
        left: Known,
        right: Known,
        arguments: &[IdedExpr],
        expression: &IdedExpr,
    ) -> Known {
        use Known::*;
        let comparison = COMPARISONS.contains(&operator);
        let (left, right) = self.read_duration_inputs(operator, left, right, arguments, expression);
        if !(left.is_time() || right.is_time()) || left == Unknown || right == Unknown {
            // Numbers give a number (`wait * 2`), which a time value beside it then refuses.
            return match (left, right) {
                _ if comparison => Bool,
                (Number, Number) => Number,
                _ => Unknown,
            };
        }
        let outcome = match operator {
            operators::ADD => match (left, right) {
                (Timestamp, Duration) | (Duration, Timestamp) => Ok(Timestamp),
                // Joined as text: `'report-' + now()`.
                (Text, _) | (_, Text) => Ok(Text),
                (Duration, Duration) => Ok(Duration),
                (Timestamp, Timestamp) => Err(
                    "two timestamps do not add up: subtract them for the duration between (`t2 - t1`), or add a duration to one"
                        .to_string(),
                ),
                _ => Err(number_help(left, right, arguments, "+")),
            },
            operators::SUBSTRACT => match (left, right) {
                (Timestamp, Timestamp) | (Duration, Duration) => Ok(Duration),
                (Timestamp, Duration) => Ok(Timestamp),
                (Duration, Timestamp) => Err(
                    "a duration minus a timestamp means nothing: write `timestamp - duration`"
                        .to_string(),
                ),
                _ => Err(number_help(left, right, arguments, "-")),
            },
            operators::MULTIPLY => match (left, right) {
                (Duration, Number) | (Number, Duration) => Ok(Duration),
                _ => Err(
                    "only a duration and a number multiply: `duration('5m') * 3`".to_string(),
                ),
            },
            _ if comparison => {
                if left == right {
                    Ok(Bool)
                } else {
                    Err(format!(
                        "{} and {} never compare: compare a timestamp with a timestamp (`now() > timestamp('2026-01-01T09:00:00Z')`) and a duration with a duration (`now() - started < duration('5m')`)",
                        left.article(),
                        right.article()
                    ))
                }
            }
            _ => Err(format!(
                "{} and {} have no `{}`: time values add, subtract, multiply (a duration by a number) and compare",
                left.article(),
                right.article(),
                operator.trim_matches('_')
            )),
        };
        match outcome {
            Ok(known) => known,
            Err(help) => {
                self.found.problems.push(ExpressionProblem {
                    offset: (self.offset)(expression),
                    message: format!(
                        "`{}` between {} and {} fails when it runs",
                        operator.trim_matches('_'),
                        left.article(),
                        right.article()
                    ),
                    help: Some(help),
                });
                Unknown
            }
        }
    }
}

impl Checker<'_> {
    /// A `duration` input where it is not beside a time value: the number it holds.
    fn as_number(&self, known: Known) -> Known {
        if known == Known::DurationInput {
            Known::Number
        } else {
            known
        }
    }

    /// The operands of `left <operator> right` with each `duration` input read: as a duration
    /// (recorded, to be converted where it is evaluated) when the operator adds, subtracts or
    /// compares it with a time value, as its milliseconds otherwise (`duration('1ms') * wait`).
    /// Added to, subtracted from or compared with a value of unknown type, it is read as the
    /// run finds that value: the operation is recorded, to decide when it is evaluated.
    fn read_duration_inputs(
        &mut self,
        operator: &str,
        left: Known,
        right: Known,
        arguments: &[IdedExpr],
        operation: &IdedExpr,
    ) -> (Known, Known) {
        let with_time = operator == operators::ADD
            || operator == operators::SUBSTRACT
            || COMPARISONS.contains(&operator);
        let mut read = |known: Known, other: Known, argument: Option<&IdedExpr>| {
            if known != Known::DurationInput {
                return known;
            }
            match argument {
                Some(argument) if with_time && other.is_time() => {
                    self.found.read_as_durations.push(argument.id);
                    Known::Duration
                }
                _ if with_time && other == Known::Unknown => {
                    self.found.read_as_durations.push(operation.id);
                    Known::Unknown
                }
                _ => Known::Number,
            }
        };
        let read_left = read(left, right, arguments.first());
        let read_right = read(right, left, arguments.get(1));
        (read_left, read_right)
    }
}

/// What `Checker::infer` knows of a bare name's type.
pub(super) fn known_input(names: &Names, binding: NameBinding) -> Known {
    match names.bound_input_type(binding) {
        Some(InputType::Duration) => Known::DurationInput,
        Some(InputType::Integer | InputType::Number) => Known::Number,
        Some(InputType::String | InputType::Enum) => Known::Text,
        Some(InputType::Boolean) => Known::Bool,
        _ => Known::Unknown,
    }
}

/// What to write for a number or a text beside a time value.
fn number_help(left: Known, right: Known, arguments: &[IdedExpr], operator: &str) -> String {
    let number = match (left, right) {
        (_, Known::Number) => arguments.get(1),
        (Known::Number, _) => arguments.first(),
        _ => {
            return "turn the text into a time value first: `timestamp('2026-01-01T09:00:00Z')`, `duration('90s')`".into();
        }
    };
    let amount = match number.map(|argument| &argument.expr) {
        Some(Expr::Literal(LiteralValue::Int(amount))) => amount.to_string(),
        _ => "5".into(),
    };
    format!(
        "a number has no unit, so it is not a duration: write `duration('{amount}s')` for {amount} seconds (e.g. `now() {operator} duration('{amount}s')`), or `duration('1s') * n` for a number of seconds `n` (a `duration` input is milliseconds: `duration('1ms') * n`)"
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::pipeline::compile::expression::{Expression, Names};

    fn problems(text: &str) -> Vec<String> {
        let names = Names::new(["x".to_string()], [], HashMap::new());
        match Expression::compile(text, &names) {
            Ok(_) => Vec::new(),
            Err(problems) => problems
                .into_iter()
                .map(|problem| format!("{}: {}", problem.offset, problem.message))
                .collect(),
        }
    }

    #[test]
    fn refuses_only_what_always_fails() {
        for fine in [
            "now() + duration('5s')",
            "duration('5s') + now()",
            "now() - now() < duration('1s')",
            "duration('1s') * 2.5 == 2 * duration('1s')",
            "'at ' + now()",
            "now() in [now()]",
            "now() + x",
            "x * 5 + now()",
            "now().getHours() + 1",
            "matches(string(now()), '2026')",
        ] {
            assert_eq!(problems(fine), Vec::<String>::new(), "{fine}");
        }
        for (bad, says) in [
            ("now() + 5", "6: `+` between a timestamp and a number"),
            (
                "5 - duration('1s')",
                "2: `-` between a number and a duration",
            ),
            (
                "now() + now()",
                "6: `+` between a timestamp and a timestamp",
            ),
            (
                "duration('1s') - now()",
                "15: `-` between a duration and a timestamp",
            ),
            ("now() * 2", "6: `*` between a timestamp and a number"),
            (
                "duration('1m') / 2",
                "15: `/` between a duration and a number",
            ),
            (
                "now() == duration('1s')",
                "6: `==` between a timestamp and a duration",
            ),
            (
                "(now() + 1).getHours()",
                "7: `+` between a timestamp and a number",
            ),
        ] {
            let found = problems(bad);
            assert!(
                found.iter().any(|problem| problem.starts_with(says)),
                "{bad}: {found:?}"
            );
        }
    }
}
