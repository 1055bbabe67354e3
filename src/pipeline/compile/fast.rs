//! The fast path for common expressions: int, bool and string operations over context and input
//! slots, evaluated with no allocation. Anything unusual defers to full CEL, so results agree.

use super::expression::{NameBinding, Scope};
use crate::base::value::Value;

/// A compiled fast-path expression tree.
#[derive(Debug)]
pub enum Fast {
    Literal(Value),
    /// A context variable or input, by slot.
    Slot(NameBinding),
    Not(Box<Fast>),
    Negate(Box<Fast>),
    And(Box<Fast>, Box<Fast>),
    Or(Box<Fast>, Box<Fast>),
    Conditional(Box<Fast>, Box<Fast>, Box<Fast>),
    Binary(Operator, Box<Fast>, Box<Fast>),
    /// `slot <operator> literal int` (`attempts < 3`, `attempts + 1`): the commonest guard and
    /// assignment, read in place without cloning or recursing.
    SlotWithInt(Operator, NameBinding, i64),
    /// `event.<field>.<key>...` (`event.data.stdout`): read in place, without building the
    /// event's map; a path that does not lead to a value defers, so CEL reports it.
    EventField(Box<[Box<str>]>),
    /// `now()`: the scope's clock as a timestamp; a clock out of range defers, so CEL's
    /// function reports it.
    Now,
    /// `value.field` (`diagnostics.parent_exists`): a map's entry; anything else defers.
    Field(Box<Fast>, Box<str>),
    /// `value[index]` (`errors[0]`, `tools[tool_index]`): a list's element at an int in range,
    /// or a map's entry at a text key it has; anything else defers.
    Index(Box<Fast>, Box<Fast>),
    /// A call of one of `CALLS` (`size(tools)`, `json_valid(file)`): read without CEL's
    /// parser, so that loading needs none, and always evaluated by CEL.
    Call(&'static (&'static str, usize), Box<[Fast]>),
    /// `has(value.field)`: read without CEL's parser, always evaluated by CEL.
    Has(Box<Fast>),
    /// `value.method(arguments)` (`file.endsWith('/')`): read without CEL's parser, always
    /// evaluated by CEL.
    Method(Box<Method>),
    /// `value.map(name, body)` and the other comprehension macros of `MACROS`: read without
    /// CEL's parser, always evaluated by CEL.
    Macro(Box<Method>),
    /// A name whose value no fast form reads, always evaluated by CEL: the variable a macro
    /// binds (`e` in `list.map(e, e + 1)`) inside its body, a block's parameter or a library's
    /// name checked on its own.
    Bound,
    /// `{'key': value, ...}`: read without CEL's parser, always evaluated by CEL.
    Map(Box<[(Fast, Fast)]>),
    /// `value in list`: read without CEL's parser, always evaluated by CEL.
    In(Box<Fast>, Box<Fast>),
    /// `In('state')` for a state the machine has, by index: whether it is active.
    InState(usize),
    /// `[a, b]`: read without CEL's parser, always evaluated by CEL (which bounds what a list
    /// built from it may grow to).
    List(Box<[Fast]>),
}

/// The comprehension macros CEL expands, each with a variable and a body: `list.map(e, e + 1)`.
/// (`map`'s three-argument form and the extensions' macros are CEL's.)
pub const MACROS: [&str; 6] = ["all", "exists", "exists_one", "existsOne", "map", "filter"];

/// A method call: one of the methods the load-time check knows (`KNOWN_METHODS`); for a
/// macro (`MACROS`), its body is the one argument.
#[derive(Debug)]
pub struct Method {
    pub name: &'static str,
    pub target: Fast,
    pub arguments: Box<[Fast]>,
}

/// The global functions the fast reader reads calls of, with their number of arguments:
/// `size`, `string` and the engine's functions but `In` (whose state is checked); `env` only
/// where its variable passes the grant (`Names::may_read_environment`).
pub const CALLS: [(&str, usize); 9] = [
    ("size", 1),
    ("string", 1),
    ("exists", 1),
    ("is_dir", 1),
    ("json_valid", 1),
    ("file_size", 1),
    ("command_exists", 1),
    ("now_ms", 0),
    ("env", 1),
];

/// The fields `event` has (`Scope::event_value`); a path must start with one of them.
pub const EVENT_FIELDS: [&str; 6] = ["name", "type", "origin", "invokeid", "sendid", "data"];

/// The forms of `Fast::integer`, apart from the tree: an int literal, or `context_slot
/// <arithmetic> int`. Small and copied, so a plan can hold an assignment's form itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IntegerForm {
    Literal(i64),
    SlotWithInt(Operator, usize, i64),
}

impl IntegerForm {
    /// The int over `context`; None when the slot holds no int or the arithmetic fails: then
    /// the expression is evaluated as usual.
    #[inline(always)]
    pub fn integer(self, context: &[Value]) -> Option<i64> {
        match self {
            IntegerForm::Literal(integer) => Some(integer),
            IntegerForm::SlotWithInt(operator, slot, literal) => match context.get(slot) {
                Some(Value::Int(integer)) => int_arithmetic(operator, *integer, literal),
                _ => None,
            },
        }
    }
}

/// Binary operators the fast path evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Add,
    Subtract,
    Multiply,
    Divide,
    Remainder,
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Fast {
    /// A path below `event`, if it starts with one of the event's fields.
    pub fn event_field(path: Vec<Box<str>>) -> Option<Fast> {
        let first = path.first()?;
        EVENT_FIELDS
            .contains(&&**first)
            .then(|| Fast::EventField(path.into_boxed_slice()))
    }

    /// Whether evaluating it with CEL calls one of the engine's functions (`now()`), which
    /// CEL's context then has to be given.
    pub fn uses_engine_functions(&self) -> bool {
        match self {
            Fast::Now => true,
            Fast::Call((name, _), arguments) => {
                super::functions::ENGINE_FUNCTIONS.contains(name)
                    || arguments.iter().any(Fast::uses_engine_functions)
            }
            Fast::List(elements) => elements.iter().any(Fast::uses_engine_functions),
            Fast::Method(method) | Fast::Macro(method) => {
                method.target.uses_engine_functions()
                    || method.arguments.iter().any(Fast::uses_engine_functions)
            }
            Fast::Bound => false,
            Fast::InState(_) => true,
            Fast::Map(entries) => entries
                .iter()
                .any(|(key, value)| key.uses_engine_functions() || value.uses_engine_functions()),
            Fast::In(left, right) => left.uses_engine_functions() || right.uses_engine_functions(),
            Fast::Has(operand) => operand.uses_engine_functions(),
            Fast::Literal(_) | Fast::Slot(_) | Fast::SlotWithInt(..) | Fast::EventField(_) => false,
            Fast::Not(operand) | Fast::Negate(operand) | Fast::Field(operand, _) => {
                operand.uses_engine_functions()
            }
            Fast::And(left, right)
            | Fast::Or(left, right)
            | Fast::Binary(_, left, right)
            | Fast::Index(left, right) => {
                left.uses_engine_functions() || right.uses_engine_functions()
            }
            Fast::Conditional(condition, then, otherwise) => {
                condition.uses_engine_functions()
                    || then.uses_engine_functions()
                    || otherwise.uses_engine_functions()
            }
        }
    }

    /// A binary operation, as one node when it is `slot <operator> int`.
    pub fn binary(operator: Operator, left: Fast, right: Fast) -> Fast {
        match (left, right) {
            (Fast::Slot(binding), Fast::Literal(Value::Int(literal)))
                if !matches!(binding, NameBinding::Event) =>
            {
                Fast::SlotWithInt(operator, binding, literal)
            }
            (left, right) => Fast::Binary(operator, Box::new(left), Box::new(right)),
        }
    }

    /// The value, or None when full CEL must decide (a type it does not handle, or an error
    /// such as overflow, which CEL then reports in its own words).
    #[inline(always)]
    pub fn evaluate(&self, scope: &Scope) -> Option<Value> {
        // The commonest form, `context_slot <operator> int` on an int, is worked out where the
        // expression is evaluated, so that the caller's scope need not even be built for it.
        if let Fast::SlotWithInt(operator, NameBinding::Context(slot), literal) = self
            && let Some(Value::Int(integer)) = scope.context.get(*slot)
        {
            return int_binary(*operator, *integer, *literal);
        }
        self.evaluate_node(scope)
    }

    /// The int an expression of the commonest assignment form gives over the context alone (an
    /// int literal, or `context_slot <arithmetic> int` on an int), as a raw `i64`: the caller
    /// stores it without a `Value` passing through. None means: evaluate it as usual.
    #[inline(always)]
    pub fn integer(&self, context: &[Value]) -> Option<i64> {
        self.integer_form()?.integer(context)
    }

    /// This expression's raw int form, if it has one (see `integer`).
    #[inline(always)]
    pub fn integer_form(&self) -> Option<IntegerForm> {
        match self {
            Fast::Literal(Value::Int(integer)) => Some(IntegerForm::Literal(*integer)),
            Fast::SlotWithInt(operator, NameBinding::Context(slot), literal) => {
                Some(IntegerForm::SlotWithInt(*operator, *slot, *literal))
            }
            _ => None,
        }
    }

    /// The outcome of the commonest guard form (`context_slot <comparison> int` on an int), as
    /// a raw `bool`. None means: evaluate it as usual.
    #[inline(always)]
    pub fn condition(&self, context: &[Value]) -> Option<bool> {
        match self {
            Fast::SlotWithInt(operator, NameBinding::Context(slot), literal) => {
                match context.get(*slot) {
                    Some(Value::Int(integer)) => int_comparison(*operator, *integer, *literal),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Every form but the commonest, out of line: the event loop inlines the guard's fast
    /// path (`condition_holds`), which must stay small however many forms there are.
    #[inline(never)]
    fn evaluate_node(&self, scope: &Scope) -> Option<Value> {
        match self {
            Fast::Literal(value) => Some(value.clone()),
            Fast::Slot(binding) => Some(scope.read(*binding)),
            Fast::Not(operand) => match operand.evaluate(scope)? {
                Value::Bool(flag) => Some(Value::Bool(!flag)),
                _ => None,
            },
            Fast::Negate(operand) => match operand.evaluate(scope)? {
                Value::Int(integer) => integer.checked_neg().map(Value::Int),
                _ => None,
            },
            // CEL's `&&` and `||` are commutative about errors; on the fast path the left side
            // is evaluated first and anything but a bool defers, which gives the same results.
            Fast::And(left, right) => match left.evaluate(scope)? {
                Value::Bool(false) => Some(Value::Bool(false)),
                Value::Bool(true) => match right.evaluate(scope)? {
                    Value::Bool(flag) => Some(Value::Bool(flag)),
                    _ => None,
                },
                _ => None,
            },
            Fast::Or(left, right) => match left.evaluate(scope)? {
                Value::Bool(true) => Some(Value::Bool(true)),
                Value::Bool(false) => match right.evaluate(scope)? {
                    Value::Bool(flag) => Some(Value::Bool(flag)),
                    _ => None,
                },
                _ => None,
            },
            Fast::Conditional(condition, then, otherwise) => match condition.evaluate(scope)? {
                Value::Bool(true) => then.evaluate(scope),
                Value::Bool(false) => otherwise.evaluate(scope),
                _ => None,
            },
            Fast::Binary(operator, left, right) => {
                binary(*operator, &left.evaluate(scope)?, &right.evaluate(scope)?)
            }
            Fast::EventField(path) => {
                let event = scope.event?;
                let (first, rest) = path.split_first()?;
                let mut value = match &**first {
                    "name" => return rest.is_empty().then(|| Value::String(event.name.clone())),
                    "type" => return rest.is_empty().then(|| Value::string(event.origin.name())),
                    "origin" => return rest.is_empty().then(|| event.origin_value()),
                    "invokeid" => {
                        return rest
                            .is_empty()
                            .then(|| event.invoke_id.clone().map_or(Value::Null, Value::String));
                    }
                    "sendid" => {
                        return rest
                            .is_empty()
                            .then(|| event.send_id.clone().map_or(Value::Null, Value::String));
                    }
                    _ => &event.data,
                };
                for key in rest {
                    let Value::Map(map) = value else { return None };
                    value = map.get(&**key)?;
                }
                Some(value.clone())
            }
            Fast::Now => {
                crate::base::time::from_unix_milliseconds(scope.clock).map(Value::Timestamp)
            }
            Fast::InState(state) => Some(Value::Bool((scope.is_active)(*state))),
            Fast::Field(operand, field) => match operand.evaluate(scope)? {
                Value::Map(map) => map.get(&**field).cloned(),
                _ => None,
            },
            Fast::Index(operand, index) => match (operand.evaluate(scope)?, index.evaluate(scope)?)
            {
                (Value::List(list), Value::Int(position)) => {
                    list.get(usize::try_from(position).ok()?).cloned()
                }
                (Value::Map(map), Value::String(key)) => map.get(&*key).cloned(),
                _ => None,
            },
            Fast::Call(..)
            | Fast::Has(_)
            | Fast::List(_)
            | Fast::Method(_)
            | Fast::Macro(_)
            | Fast::Bound
            | Fast::Map(_)
            | Fast::In(..) => None,
            Fast::SlotWithInt(operator, binding, literal) => {
                let slots = match binding {
                    NameBinding::Context(_) => scope.context,
                    _ => scope.inputs,
                };
                let (NameBinding::Context(slot) | NameBinding::Input(slot)) = *binding else {
                    return None;
                };
                match slots.get(slot) {
                    Some(Value::Int(integer)) => int_binary(*operator, *integer, *literal),
                    other => binary(
                        *operator,
                        other.unwrap_or(&Value::Null),
                        &Value::Int(*literal),
                    ),
                }
            }
        }
    }
}

fn binary(operator: Operator, left: &Value, right: &Value) -> Option<Value> {
    use Operator::*;
    match (left, right) {
        (Value::Int(left), Value::Int(right)) => int_binary(operator, *left, *right),
        (Value::Bool(left), Value::Bool(right)) => match operator {
            Equal => Some(Value::Bool(left == right)),
            NotEqual => Some(Value::Bool(left != right)),
            _ => None,
        },
        (Value::String(left), Value::String(right)) => match operator {
            Equal => Some(Value::Bool(left == right)),
            NotEqual => Some(Value::Bool(left != right)),
            // Byte order of UTF-8 is code point order, which is how CEL orders strings.
            Less => Some(Value::Bool(left < right)),
            LessOrEqual => Some(Value::Bool(left <= right)),
            Greater => Some(Value::Bool(left > right)),
            GreaterOrEqual => Some(Value::Bool(left >= right)),
            _ => None,
        },
        // Time values read from context compare in place; their arithmetic is CEL's.
        (Value::Timestamp(left), Value::Timestamp(right)) => ordering(operator, left.cmp(right)),
        (Value::Duration(left), Value::Duration(right)) => ordering(operator, left.cmp(right)),
        _ => None,
    }
}

/// A comparison's outcome from an ordering; None for an arithmetic operator.
fn ordering(operator: Operator, order: std::cmp::Ordering) -> Option<Value> {
    let holds = match operator {
        Operator::Equal => order.is_eq(),
        Operator::NotEqual => order.is_ne(),
        Operator::Less => order.is_lt(),
        Operator::LessOrEqual => order.is_le(),
        Operator::Greater => order.is_gt(),
        Operator::GreaterOrEqual => order.is_ge(),
        _ => return None,
    };
    Some(Value::Bool(holds))
}

/// Integer arithmetic and comparison; overflow and division by zero defer to CEL's error.
#[inline(always)]
fn int_binary(operator: Operator, left: i64, right: i64) -> Option<Value> {
    match int_comparison(operator, left, right) {
        Some(holds) => Some(Value::Bool(holds)),
        None => int_arithmetic(operator, left, right).map(Value::Int),
    }
}

/// An arithmetic operator over two ints; None for overflow, division by zero, or a comparison.
#[inline(always)]
fn int_arithmetic(operator: Operator, left: i64, right: i64) -> Option<i64> {
    use Operator::*;
    match operator {
        Add => left.checked_add(right),
        Subtract => left.checked_sub(right),
        Multiply => left.checked_mul(right),
        Divide => left.checked_div(right),
        Remainder => left.checked_rem(right),
        Equal | NotEqual | Less | LessOrEqual | Greater | GreaterOrEqual => None,
    }
}

/// A comparison operator over two ints; None for an arithmetic one.
#[inline(always)]
fn int_comparison(operator: Operator, left: i64, right: i64) -> Option<bool> {
    use Operator::*;
    match operator {
        Equal => Some(left == right),
        NotEqual => Some(left != right),
        Less => Some(left < right),
        LessOrEqual => Some(left <= right),
        Greater => Some(left > right),
        GreaterOrEqual => Some(left >= right),
        Add | Subtract | Multiply | Divide | Remainder => None,
    }
}
