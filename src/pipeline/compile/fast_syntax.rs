//! Reads the fast path's subset of CEL straight from text, so most expressions never go through CEL's parser.
//!
//! The subset: int, bool and simple string literals, names of context variables and inputs,
//! field paths below `event` (`event.data.stdout`), `now()`, parentheses, `! -` (unary), `* / %`, `+ -`, `< <= > >= == !=`, `&&`, `||` and `?:`, with
//! CEL's grammar (`../cel/src/parser/gen/CEL.g4`): the same precedence, left associativity
//! and the same reading of `-5` and of repeated `!` and `-`. Anything else, or anything that
//! could be read two ways, returns `None` and the expression is compiled by CEL as before: this
//! reader only ever says "this is that tree", never "this is an error".

use super::expression::{NameBinding, Names};
use super::fast::{Fast, Operator};
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

#[derive(Debug, Clone, PartialEq)]
enum Token<'t> {
    Int(&'t str),
    String(&'t str),
    Name(&'t str),
    /// Punctuation and operators, as written.
    Symbol(&'static str),
}

/// Symbols, longest first so `<=` is not read as `<` then `=`.
const SYMBOLS: &[&str] = &[
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "-", "+", "*", "/", "%", "?", ":", "(", ")",
    ".",
];

/// Splits `text` into tokens; `None` for anything outside the subset.
fn tokens(text: &str) -> Option<Vec<Token<'_>>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        let rest = &text[index..];
        if matches!(byte, b' ' | b'\t' | b'\r' | b'\n' | b'\x0c') {
            index += 1;
        } else if byte.is_ascii_digit() {
            let length = rest.bytes().take_while(u8::is_ascii_digit).count();
            // `0x…`, `1.5`, `1e3`, `1u`, `1abc`: hex, doubles, uints and worse are CEL's.
            if rest[length..]
                .bytes()
                .next()
                .is_some_and(|next| next.is_ascii_alphanumeric() || next == b'_' || next == b'.')
            {
                return None;
            }
            found.push(Token::Int(&rest[..length]));
            index += length;
        } else if byte.is_ascii_alphabetic() || byte == b'_' {
            let length = rest
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            // `r'…'`, `b"…"`: raw strings and bytes.
            if matches!(rest[length..].bytes().next(), Some(b'\'' | b'"')) {
                return None;
            }
            found.push(Token::Name(&rest[..length]));
            index += length;
        } else if byte == b'\'' || byte == b'"' {
            let quote = byte as char;
            let body = &rest[1..];
            let end = body.find(quote)?;
            let content = &body[..end];
            // Escapes, line breaks and triple-quoted strings are CEL's.
            if content.contains(['\\', '\n', '\r']) || body[end + 1..].starts_with(quote) {
                return None;
            }
            found.push(Token::String(content));
            index += end + 2;
        } else {
            // `//` comments, `.`, `[`, `{`, `,`, backticks, `=`, `&`, `|` alone, non-ASCII.
            if rest.starts_with("//") {
                return None;
            }
            let symbol = SYMBOLS.iter().find(|symbol| rest.starts_with(**symbol))?;
            found.push(Token::Symbol(symbol));
            index += symbol.len();
        }
    }
    Some(found)
}

/// The fast form of `text` read directly, if it is entirely within the subset and every name
/// in it is a context variable or an input.
pub fn parse(text: &str, names: &Names) -> Option<Fast> {
    let tokens = tokens(text)?;
    let mut reader = Reader {
        tokens: &tokens,
        position: 0,
        names,
        depth: 0,
    };
    let fast = reader.expression()?;
    (reader.position == tokens.len()).then_some(fast)
}

struct Reader<'a, 't> {
    tokens: &'a [Token<'t>],
    position: usize,
    names: &'a Names,
    depth: usize,
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

    /// Comparisons, left-associative (`a < b < c` is `(a < b) < c`, a type error CEL reports).
    fn relation(&mut self) -> Option<Fast> {
        self.left_associative(RELATIONS, Self::addition)
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
            _ => return self.primary(),
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
        let operand = self.primary()?;
        Some(match (operator, count % 2) {
            (_, 0) => operand,
            ("!", _) => Fast::Not(Box::new(operand)),
            _ => Fast::Negate(Box::new(operand)),
        })
    }

    /// `.field.key...` after `event`: plain identifiers, none of them a method call.
    fn event_path(&mut self) -> Option<Fast> {
        let mut path = Vec::new();
        while self.eat(".") {
            match self.peek()? {
                Token::Name(field)
                    if !RESERVED.contains(field) && !matches!(*field, "true" | "false") =>
                {
                    path.push(Box::from(*field));
                    self.position += 1;
                }
                _ => return None,
            }
            if self.symbol() == Some("(") {
                return None;
            }
        }
        Fast::event_field(path)
    }

    /// A literal, a name, or a parenthesized expression; never followed by `.`, `[` or `(`
    /// (those are not tokens of the subset, so the whole text goes to CEL).
    fn primary(&mut self) -> Option<Fast> {
        let token = self.peek()?.clone();
        self.position += 1;
        match token {
            Token::Int(digits) => Some(Fast::Literal(Value::Int(digits.parse().ok()?))),
            Token::String(text) => Some(Fast::Literal(Value::string(text))),
            Token::Name("true") => Some(Fast::Literal(Value::Bool(true))),
            Token::Name("false") => Some(Fast::Literal(Value::Bool(false))),
            // The engine's clock; no other call is read here (a host function may not be
            // named `now`, so this is always the engine's).
            Token::Name("now") if self.eat("(") => self.eat(")").then_some(Fast::Now),
            Token::Name(name) => {
                if RESERVED.contains(&name) || self.symbol() == Some("(") {
                    return None;
                }
                if self.symbol() == Some(".") {
                    // Only `event.<field>...` is read; other selections and calls are CEL's.
                    return match self.names.binding(name)? {
                        NameBinding::Event => self.event_path(),
                        _ => None,
                    };
                }
                match self.names.binding(name)? {
                    binding @ (NameBinding::Context(_) | NameBinding::Input(_)) => {
                        Some(Fast::Slot(binding))
                    }
                    NameBinding::Event => None,
                }
            }
            Token::Symbol("(") => {
                let inner = self.expression()?;
                self.eat(")").then_some(inner)
            }
            Token::Symbol(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::pipeline::compile::expression::{Expression, Scope};

    fn names() -> Names {
        Names::new(
            [
                "attempts".to_string(),
                "done".to_string(),
                "tool".to_string(),
            ],
            ["limit".to_string()],
            HashMap::from([("idle".to_string(), 1)]),
        )
    }

    #[test]
    fn reads_the_subset_and_defers_the_rest() {
        let names = names();
        for text in [
            "attempts < 3",
            "attempts + 1",
            "-1",
            "- 9223372036854775807",
            "-9223372036854775807 - 1",
            "!done && attempts * 2 <= limit",
            "tool == 'read_file' || tool == \"grep\"",
            "(attempts)",
            "done ? attempts : -attempts",
            "done ? 1 : done ? 2 : 3",
            "!!done",
            "--attempts",
            "attempts < 2 < 3",
            "'é' < 'z'",
            "''",
            "event.name",
            "event.data.stdout",
            "!event.data.truncated",
            "event.data.result.code == 0 && event.type == 'external'",
        ] {
            assert!(parse(text, &names).is_some(), "`{text}` should be read");
        }
        for text in [
            "-9223372036854775808",
            "--1",
            "0x10",
            "1.5",
            "1u",
            "1e3",
            "1abc",
            "tool.size()",
            "size(tool)",
            "tool[0]",
            "[1]",
            "{'a': 1}",
            "'a\\'b'",
            "'''a'''",
            "r'a'",
            "b'a'",
            "null",
            "in",
            "attempts in [1]",
            "nosuch < 1",
            "event",
            "event.nosuch",
            "event.data.size()",
            "event.data.in",
            "event.data.true",
            "event.data.?x",
            "event.data[0]",
            "event..data",
            "attempts.x",
            "(event).data",
            "In('idle')",
            "attempts // comment",
            "done ? done ? 1 : 2 : 3",
            "!-attempts",
            "attempts = 1",
            "attempts & 1",
            "é",
            "(attempts",
            "attempts)",
            "attempts 1",
            "`attempts`",
        ] {
            assert!(parse(text, &names).is_none(), "`{text}` should go to CEL");
        }
        let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        assert!(
            parse(&deep, &names).is_none(),
            "nesting past the limit goes to CEL"
        );
    }

    #[test]
    fn event_paths_evaluate_as_cel_reads_them() {
        let names = names();
        let mut result = indexmap::IndexMap::new();
        result.insert(std::sync::Arc::from("code"), Value::Int(0));
        let mut data = indexmap::IndexMap::new();
        data.insert(std::sync::Arc::from("stdout"), Value::string("ok\n"));
        data.insert(std::sync::Arc::from("truncated"), Value::Bool(false));
        data.insert(
            std::sync::Arc::from("result"),
            Value::Map(std::sync::Arc::new(result)),
        );
        let data = Value::Map(std::sync::Arc::new(data));
        let null = Value::Null;
        for (event_data, send_id) in [(&data, Some("s1")), (&null, None)] {
            let event = crate::base::event::Event {
                name: std::sync::Arc::from("done.invoke.x"),
                event_type: None,
                data: event_data.clone(),
                origin: crate::base::event::Origin::External,
                send_id: send_id.map(std::sync::Arc::from),
                invoke_id: None,
            };
            let scope = Scope {
                names: &names,
                context: &[],
                inputs: &[],
                event: Some(&event),
                is_active: &|_| false,
                clock: 0,
            };
            for text in [
                "event.data.stdout",
                "!event.data.truncated",
                "event.data.result.code == 0",
                "event.data.result",
                "event.data.nosuch",
                "event.data.stdout.deeper",
                "event.name",
                "event.type",
                "event.sendid",
                "event.name.x",
                "event.data",
            ] {
                assert_read_as_cel_reads(text, &scope);
            }
        }
    }

    #[test]
    fn what_is_read_evaluates_as_cel_reads_it() {
        let names = names();
        let context = [Value::Int(2), Value::Bool(false), Value::string("grep")];
        let inputs = [Value::Int(3)];
        let scope = Scope {
            names: &names,
            context: &context,
            inputs: &inputs,
            event: None,
            is_active: &|_| false,
            clock: 0,
        };
        for text in [
            "-9223372036854775807 - 1",
            "-9223372036854775807 - 2",
            "attempts - -1 * 3",
            "attempts - 1 - 1",
            "10 / attempts % 3",
            "!done == true",
            "--tool",
            "!!attempts",
            "done ? 1 : attempts > 1 ? 2 : 3",
            "attempts < 2 < 3",
            "tool < 'h' && attempts >= limit - 1",
        ] {
            assert_read_as_cel_reads(text, &scope);
        }
    }

    /// `text` is read directly, and evaluates in `scope` as CEL's parser and interpreter do.
    fn assert_read_as_cel_reads(text: &str, scope: &Scope) {
        let read = Expression::compile(text, scope.names).unwrap();
        assert!(read.is_read_directly(), "`{text}`");
        let through_cel = Expression::compile_with_cel(text, scope.names).unwrap();
        assert_eq!(
            read.evaluate(scope),
            through_cel.evaluate_with_cel(scope),
            "`{text}` with event {:?}",
            scope.event.map(|event| &event.data)
        );
    }
}
