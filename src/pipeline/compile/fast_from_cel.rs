//! The fast form of an expression CEL's parser read: the same nodes the fast reader builds from text.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};

use super::expression::{NameBinding, Names};
use super::fast::{CALLS, Fast, Method, Operator};
use crate::base::value::Value;

impl Fast {
    /// The fast form of an expression, if every part of it has one.
    pub fn compile(expression: &IdedExpr, names: &Names) -> Option<Fast> {
        match &expression.expr {
            Expr::Literal(literal) => Some(Fast::Literal(match literal {
                LiteralValue::Int(integer) => Value::Int(*integer.inner()),
                LiteralValue::Boolean(flag) => Value::Bool(*flag.inner()),
                LiteralValue::String(text) => Value::string(text.inner()),
                LiteralValue::Null => Value::Null,
                _ => return None,
            })),
            Expr::Ident(name) => match names.binding(name)? {
                binding @ (NameBinding::Context(_) | NameBinding::Input(_)) => {
                    Some(Fast::Slot(binding))
                }
                NameBinding::Event => None,
            },
            Expr::Select(select) => {
                // A path below `event` is one node, read in place (as `fast_syntax` reads it).
                let mut path = Vec::new();
                let mut current = expression;
                while let Expr::Select(inner) = &current.expr {
                    // Only the outermost selection may be `has()`'s test.
                    if inner.test && !std::ptr::eq(current, expression) {
                        return None;
                    }
                    path.push(inner.field.clone().into_boxed_str());
                    current = &inner.operand;
                }
                let selected = match &current.expr {
                    Expr::Ident(name) if names.binding(name) == Some(NameBinding::Event) => {
                        path.reverse();
                        Fast::event_field(path)?
                    }
                    _ => Fast::Field(
                        Box::new(Fast::compile(&select.operand, names)?),
                        select.field.clone().into_boxed_str(),
                    ),
                };
                Some(if select.test {
                    Fast::Has(Box::new(selected))
                } else {
                    selected
                })
            }
            Expr::Map(map) => Some(Fast::Map(
                map.entries
                    .iter()
                    .map(|entry| match &entry.expr {
                        EntryExpr::MapEntry(entry) if !entry.optional => Some((
                            Fast::compile(&entry.key, names)?,
                            Fast::compile(&entry.value, names)?,
                        )),
                        _ => None,
                    })
                    .collect::<Option<Box<[(Fast, Fast)]>>>()?,
            )),
            Expr::List(list) if list.optional_indices.is_empty() => Some(Fast::List(
                list.elements
                    .iter()
                    .map(|element| Fast::compile(element, names))
                    .collect::<Option<Box<[Fast]>>>()?,
            )),
            Expr::Call(call) if call.target.is_some() => {
                let target = call.target.as_deref()?;
                // A namespace's function (`math.abs(x)`) has no value as its target.
                let name = super::expression::KNOWN_METHODS
                    .iter()
                    .find(|known| **known == call.func_name)?;
                Some(Fast::Method(Box::new(Method {
                    name,
                    target: Fast::compile(target, names)?,
                    arguments: call
                        .args
                        .iter()
                        .map(|argument| Fast::compile(argument, names))
                        .collect::<Option<Box<[Fast]>>>()?,
                })))
            }
            Expr::Call(call) if call.target.is_none() => {
                let argument = |index: usize| -> Option<Box<Fast>> {
                    Some(Box::new(Fast::compile(call.args.get(index)?, names)?))
                };
                match (call.func_name.as_str(), call.args.len()) {
                    (operators::LOGICAL_NOT, 1) => Some(Fast::Not(argument(0)?)),
                    (operators::NEGATE, 1) => Some(Fast::Negate(argument(0)?)),
                    (operators::LOGICAL_AND, 2) => Some(Fast::And(argument(0)?, argument(1)?)),
                    (operators::LOGICAL_OR, 2) => Some(Fast::Or(argument(0)?, argument(1)?)),
                    (operators::CONDITIONAL, 3) => {
                        Some(Fast::Conditional(argument(0)?, argument(1)?, argument(2)?))
                    }
                    ("now", 0) => Some(Fast::Now),
                    (operators::INDEX, 2) => Some(Fast::Index(argument(0)?, argument(1)?)),
                    (operators::IN, 2) => Some(Fast::In(argument(0)?, argument(1)?)),
                    (name, count) if CALLS.contains(&(name, count)) => {
                        let function = CALLS.iter().find(|(known, _)| *known == name)?;
                        let arguments = (0..count)
                            .map(|index| argument(index).map(|argument| *argument))
                            .collect::<Option<Box<[Fast]>>>()?;
                        Some(Fast::Call(function, arguments))
                    }
                    (name, 2) => Some(Fast::binary(
                        Operator::from_function(name)?,
                        *argument(0)?,
                        *argument(1)?,
                    )),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

impl Operator {
    fn from_function(name: &str) -> Option<Operator> {
        Some(match name {
            operators::ADD => Operator::Add,
            operators::SUBSTRACT => Operator::Subtract,
            operators::MULTIPLY => Operator::Multiply,
            operators::DIVIDE => Operator::Divide,
            operators::MODULO => Operator::Remainder,
            operators::EQUALS => Operator::Equal,
            operators::NOT_EQUALS => Operator::NotEqual,
            operators::LESS => Operator::Less,
            operators::LESS_EQUALS => Operator::LessOrEqual,
            operators::GREATER => Operator::Greater,
            operators::GREATER_EQUALS => Operator::GreaterOrEqual,
            _ => return None,
        })
    }
}
