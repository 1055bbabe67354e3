//! Reads the fast path's subset of CEL straight from text, so most expressions never go through CEL's parser.
//!
//! The subset: int, bool and simple string literals, names of context variables and inputs,
//! field paths below `event` (`event.data.stdout`), fields and indexes of a name's value
//! (`diagnostics.parent_exists`, `errors[0]`), their known methods (`file.endsWith('/')`) and
//! comprehension macros (`list.map(e, e.name)`), `in`, `null`, list and map literals, `now()`,
//! `has(…)`,
//! `size(…)`, `string(…)` and the engine's file functions (`CALLS`), parentheses, `! -` (unary), `* / %`, `+ -`, `< <= > >= == !=`, `&&`, `||` and `?:`, with
//! CEL's grammar (`../cel/src/parser/gen/CEL.g4`): the same precedence, left associativity
//! and the same reading of `-5` and of repeated `!` and `-`. Anything else, or anything that
//! could be read two ways, returns `None` and the expression is compiled by CEL as before: this
//! reader only ever says "this is that tree", never "this is an error".

mod tokens;

use self::tokens::{Token, tokens};
use super::expression::{NameBinding, Names};
use super::fast::{CALLS, Fast, MACROS, Method, Operator};
use crate::base::value::Value;

/// Nesting (parentheses and `?:` branches) beyond which CEL's own parser decides: it has a
/// recursion limit of its own (96) that this reader must never accept past.
const MAX_DEPTH: usize = 32;

/// Words CEL reserves: never names here.
const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "in",
    "let",
    "loop",
    "package",
    "namespace",
    "null",
    "return",
    "var",
    "void",
    "while",
];

/// The binary operators of each precedence level, tightest last.
const RELATIONS: &[(&str, Operator)] = &[
    ("<", Operator::Less),
    ("<=", Operator::LessOrEqual),
    (">", Operator::Greater),
    (">=", Operator::GreaterOrEqual),
    ("==", Operator::Equal),
    ("!=", Operator::NotEqual),
];
const ADDITIONS: &[(&str, Operator)] = &[("+", Operator::Add), ("-", Operator::Subtract)];
const MULTIPLICATIONS: &[(&str, Operator)] = &[
    ("*", Operator::Multiply),
    ("/", Operator::Divide),
    ("%", Operator::Remainder),
];

/// The fast form of `text` read directly, if it is entirely within the subset and every name
/// in it is a context variable or an input.
pub fn parse(text: &str, names: &Names) -> Option<Fast> {
    let tokens = tokens(text)?;
    let mut reader = Reader {
        tokens: &tokens,
        position: 0,
        names,
        depth: 0,
        bound: Vec::new(),
    };
    let fast = reader.expression()?;
    (reader.position == tokens.len()).then_some(fast)
}

struct Reader<'a, 't> {
    tokens: &'a [Token<'t>],
    position: usize,
    names: &'a Names,
    depth: usize,
    /// The variables of the macros around the position (innermost last): they hide names.
    bound: Vec<&'t str>,
}

impl<'a, 't> Reader<'a, 't> {
    fn peek(&self) -> Option<&'a Token<'t>> {
        self.tokens.get(self.position)
    }

    fn symbol(&self) -> Option<&'static str> {
        match self.peek() {
            Some(Token::Symbol(symbol)) => Some(symbol),
            _ => None,
        }
    }

    fn eat(&mut self, symbol: &str) -> bool {
        if self.symbol() == Some(symbol) {
            self.position += 1;
            true
        } else {
            false
        }
    }

    /// `expr: conditionalOr ('?' conditionalOr ':' expr)?` — the then-branch is not itself a
    /// conditional without parentheses, as in CEL.
    fn expression(&mut self) -> Option<Fast> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let condition = self.or()?;
        let result = if self.eat("?") {
            let then = self.or()?;
            if !self.eat(":") {
                return None;
            }
            let otherwise = self.expression()?;
            Fast::Conditional(Box::new(condition), Box::new(then), Box::new(otherwise))
        } else {
            condition
        };
        self.depth -= 1;
        Some(result)
    }

    /// `||` chains. CEL balances them into a tree; evaluated left to right with every non-bool
    /// deferring to CEL, every shape gives the same result.
    fn or(&mut self) -> Option<Fast> {
        let mut left = self.and()?;
        while self.eat("||") {
            left = Fast::Or(Box::new(left), Box::new(self.and()?));
        }
        Some(left)
    }

    fn and(&mut self) -> Option<Fast> {
        let mut left = self.relation()?;
        while self.eat("&&") {
            left = Fast::And(Box::new(left), Box::new(self.relation()?));
        }
        Some(left)
    }

    /// Comparisons and `in`, left-associative (`a < b < c` is `(a < b) < c`, a type error CEL
    /// reports).
    fn relation(&mut self) -> Option<Fast> {
        let mut left = self.addition()?;
        loop {
            if self.peek() == Some(&Token::Name("in")) {
                self.position += 1;
                left = Fast::In(Box::new(left), Box::new(self.addition()?));
            } else if let Some(&(_, operator)) = RELATIONS
                .iter()
                .find(|(symbol, _)| self.symbol() == Some(*symbol))
            {
                self.position += 1;
                left = Fast::binary(operator, left, self.addition()?);
            } else {
                return Some(left);
            }
        }
    }

    fn addition(&mut self) -> Option<Fast> {
        self.left_associative(ADDITIONS, Self::multiplication)
    }

    fn multiplication(&mut self) -> Option<Fast> {
        self.left_associative(MULTIPLICATIONS, Self::unary)
    }

    /// One precedence level of binary operators: `operand (operator operand)*`, grouped to the
    /// left as CEL's left-recursive rules group them.
    fn left_associative(
        &mut self,
        operators: &[(&str, Operator)],
        mut operand: impl FnMut(&mut Self) -> Option<Fast>,
    ) -> Option<Fast> {
        let mut left = operand(self)?;
        while let Some(&(_, operator)) = operators
            .iter()
            .find(|(symbol, _)| self.symbol() == Some(*symbol))
        {
            self.position += 1;
            left = Fast::binary(operator, left, operand(self)?);
        }
        Some(left)
    }

    /// `unary: member | '!'+ member | '-'+ member`. An even run of either operator cancels out
    /// (CEL keeps the operand as it is); `-` directly before an int is CEL's signed literal.
    fn unary(&mut self) -> Option<Fast> {
        let operator = match self.symbol() {
            Some(operator @ ("!" | "-")) => operator,
            _ => return self.member(),
        };
        let mut count = 0;
        while self.eat(operator) {
            count += 1;
        }
        if operator == "-"
            && let Some(Token::Int(digits)) = self.peek()
        {
            // One sign before an int is a literal; more could be read two ways. Past
            // `i64::MAX` the two readings differ, so that is CEL's as well.
            if count != 1 {
                return None;
            }
            let value: i64 = digits.parse().ok()?;
            self.position += 1;
            return Some(Fast::Literal(Value::Int(-value)));
        }
        let operand = self.member()?;
        Some(match (operator, count % 2) {
            (_, 0) => operand,
            ("!", _) => Fast::Not(Box::new(operand)),
            _ => Fast::Negate(Box::new(operand)),
        })
    }

    /// `.field.key...` after `event`: plain identifiers, up to a method call (`member` reads it).
    fn event_path(&mut self) -> Option<Fast> {
        let mut path = Vec::new();
        while self.symbol() == Some(".") && !self.calls_method() {
            path.push(self.field()?);
        }
        Fast::event_field(path)
    }

    /// Whether the next tokens are `.name(`, a method call.
    fn calls_method(&self) -> bool {
        self.tokens.get(self.position + 2) == Some(&Token::Symbol("("))
    }

    /// `.name(arguments)` on `target`, for a method the load-time check knows (not a macro:
    /// `map`, `filter`, `exists`... are CEL's).
    fn method(&mut self, target: Fast) -> Option<Fast> {
        self.eat(".");
        let Some(Token::Name(name)) = self.peek() else {
            return None;
        };
        if let Some(name) = MACROS.iter().find(|known| **known == *name) {
            self.position += 1;
            return self.comprehension(name, target);
        }
        let name = super::expression::KNOWN_METHODS
            .iter()
            .find(|known| **known == *name)?;
        self.position += 1;
        if !self.eat("(") {
            return None;
        }
        let arguments = self.separated(")")?;
        Some(Fast::Method(Box::new(Method {
            name,
            target,
            arguments,
        })))
    }

    /// `(variable, body)` after a macro's name: the variable a plain name (CEL's macros refuse
    /// anything else), bound while the body is read.
    fn comprehension(&mut self, name: &'static str, target: Fast) -> Option<Fast> {
        if !self.eat("(") {
            return None;
        }
        let variable = self.plain_name()?;
        if !self.eat(",") {
            return None;
        }
        self.bound.push(variable);
        let body = self.expression();
        self.bound.pop();
        let body = body?;
        self.eat(")").then(|| {
            Fast::Macro(Box::new(Method {
                name,
                target,
                arguments: Box::new([body]),
            }))
        })
    }

    /// `{'key': value, ...}` after its `{`: text keys only, none optional, no trailing `,`.
    fn map(&mut self) -> Option<Fast> {
        let mut entries = Vec::new();
        if !self.eat("}") {
            loop {
                let Some(Token::String(key)) = self.peek() else {
                    return None;
                };
                self.position += 1;
                if !self.eat(":") {
                    return None;
                }
                entries.push((Fast::Literal(Value::string(&**key)), self.expression()?));
                if self.eat("}") {
                    break;
                }
                if !self.eat(",") {
                    return None;
                }
            }
        }
        Some(Fast::Map(entries.into_boxed_slice()))
    }

    /// `'.' IDENT` not followed by `(` (a method call is CEL's), and no reserved word.
    fn field(&mut self) -> Option<Box<str>> {
        if !self.eat(".") {
            return None;
        }
        let field = self.plain_name()?;
        (self.symbol() != Some("(")).then(|| Box::from(field))
    }

    /// An identifier that is neither reserved nor `true` or `false`, read.
    fn plain_name(&mut self) -> Option<&'t str> {
        match self.peek()? {
            Token::Name(name) if !RESERVED.contains(name) && !matches!(*name, "true" | "false") => {
                self.position += 1;
                Some(name)
            }
            _ => None,
        }
    }

    /// `member: primary ('.' IDENT | '[' expr ']')*`, read only after a name's value (a context
    /// variable, an input, `event`'s path, a macro's variable), a list or map literal or
    /// parentheses: after any other literal or a call the `.` or `[` is left unread, so the
    /// whole text goes to CEL.
    fn member(&mut self) -> Option<Fast> {
        let parenthesized = self.symbol() == Some("(");
        let mut value = self.primary()?;
        if !parenthesized
            && !matches!(
                value,
                Fast::Slot(_) | Fast::EventField(_) | Fast::Bound | Fast::List(_) | Fast::Map(_)
            )
        {
            return Some(value);
        }
        loop {
            value = if self.eat("[") {
                let index = self.expression()?;
                if !self.eat("]") {
                    return None;
                }
                Fast::Index(Box::new(value), Box::new(index))
            } else if self.symbol() == Some(".") {
                if self.calls_method() {
                    self.method(value)?
                } else {
                    Fast::Field(Box::new(value), self.field()?)
                }
            } else {
                return Some(value);
            };
        }
    }

    /// `[a, b, ...]` after its `[`: elements separated by `,` (a trailing `,` and `[?x]` are
    /// CEL's).
    fn list(&mut self) -> Option<Fast> {
        Some(Fast::List(self.separated("]")?))
    }

    /// Expressions separated by `,` up to `close` (after the opening bracket), none trailing.
    fn separated(&mut self, close: &str) -> Option<Box<[Fast]>> {
        let mut elements = Vec::new();
        if !self.eat(close) {
            loop {
                elements.push(self.expression()?);
                if self.eat(close) {
                    break;
                }
                if !self.eat(",") {
                    return None;
                }
            }
        }
        Some(elements.into_boxed_slice())
    }

    /// `name(arguments)` for a function of `CALLS`, with its number of arguments.
    fn call(&mut self, name: &str) -> Option<Fast> {
        let function = CALLS.iter().find(|(known, _)| *known == name)?;
        let arguments = self.separated(")")?;
        if let [argument] = &*arguments
            && function.0 == "env"
        {
            let variable = match argument {
                Fast::Literal(Value::String(variable)) => Some(&**variable),
                _ => None,
            };
            if !self.names.may_read_environment(variable) {
                return None;
            }
        }
        (arguments.len() == function.1).then(|| Fast::Call(function, arguments))
    }

    /// A literal, a name, a call, or a parenthesized expression.
    fn primary(&mut self) -> Option<Fast> {
        let token = self.peek()?.clone();
        self.position += 1;
        match token {
            Token::Int(digits) => Some(Fast::Literal(Value::Int(digits.parse().ok()?))),
            Token::String(text) => Some(Fast::Literal(Value::string(&*text))),
            Token::Name("true") => Some(Fast::Literal(Value::Bool(true))),
            Token::Name("false") => Some(Fast::Literal(Value::Bool(false))),
            // The engine's clock; no other call is read here (a host function may not be
            // named `now`, so this is always the engine's).
            Token::Name("now") if self.eat("(") => self.eat(")").then_some(Fast::Now),
            // `has()`'s argument must be a selection, as CEL's macro requires.
            Token::Name("has") if self.eat("(") => match self.member()? {
                selected @ (Fast::Field(..) | Fast::EventField(_)) => {
                    self.eat(")").then(|| Fast::Has(Box::new(selected)))
                }
                _ => None,
            },
            // `In('state')` of a state the machine has (an unknown one is refused by the
            // load-time check, with the ids it has).
            Token::Name("In") if self.eat("(") => {
                let Some(Token::String(state)) = self.peek() else {
                    return None;
                };
                let state = self.names.state(state)?;
                self.position += 1;
                self.eat(")").then_some(Fast::InState(state))
            }
            Token::Name(name) if self.eat("(") => self.call(name),
            Token::Name("null") => Some(Fast::Literal(Value::Null)),
            Token::Name(name) if self.bound.contains(&name) => Some(Fast::Bound),
            Token::Name(name) => {
                if RESERVED.contains(&name) {
                    return None;
                }
                // A block's parameter, or any name of a library, checked on its own: accepted
                // as a name of unknown value, as the load-time check accepts it.
                if self.names.binding(name).is_none()
                    && (self.names.is_open() || self.names.is_unbound_parameter(name))
                {
                    return Some(Fast::Bound);
                }
                match self.names.binding(name)? {
                    binding @ (NameBinding::Context(_) | NameBinding::Input(_)) => {
                        Some(Fast::Slot(binding))
                    }
                    // `event` alone is CEL's; its fields are read in place.
                    NameBinding::Event if self.symbol() == Some(".") => self.event_path(),
                    NameBinding::Event => None,
                }
            }
            Token::Symbol("[") => self.list(),
            Token::Symbol("{") => self.map(),
            Token::Symbol("(") => {
                let inner = self.expression()?;
                self.eat(")").then_some(inner)
            }
            Token::Symbol(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
