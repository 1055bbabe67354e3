//! The ECMAScript subset of SCXML `cond` and `expr` attributes, parsed and rewritten as CEL or JSON.

use std::collections::HashSet;

/// The longest expression converted, in bytes, as the engine's own limit on CEL expressions.
pub const MAX_EXPRESSION_BYTES: usize = 4096;

/// How deeply brackets and unary operators may nest while parsing: bounds the parser's recursion.
const MAX_NESTING: usize = 64;

/// How deep the syntax tree may grow (long operator chains included): bounds the recursion of
/// the printers.
const MAX_TREE_DEPTH: usize = 256;

/// CEL's reserved words, which cannot be read as names or written after `.`.
pub const CEL_RESERVED: [&str; 21] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "false",
    "for",
    "function",
    "if",
    "import",
    "in",
    "let",
    "loop",
    "null",
    "package",
    "namespace",
    "return",
    "true",
    "var",
    "void",
    "while",
];

/// The names an expression may read.
pub struct Scope<'a> {
    /// Ids of `<data>` elements: the protocol's context variables.
    pub data: &'a HashSet<String>,
    /// State ids, for `In('id')`.
    pub states: &'a HashSet<String>,
}

/// A parsed expression node, with the depth of the tree below it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expression {
    kind: Kind,
    depth: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Null,
    Bool(bool),
    /// A non-negative integer literal (at most `i64::MAX`); negative ones are `Negate`.
    Int(u64),
    Double(f64),
    String(String),
    /// A bare name as written (`_event` included).
    Variable(String),
    Member(Box<Expression>, String),
    Index(Box<Expression>, Box<Expression>),
    /// `x.length`, written `size(x)`.
    Length(Box<Expression>),
    In(String),
    Not(Box<Expression>),
    Negate(Box<Expression>),
    Binary(Operator, Box<Expression>, Box<Expression>),
    Conditional(Box<Expression>, Box<Expression>, Box<Expression>),
    Array(Vec<Expression>),
    Object(Vec<(String, Expression)>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Or,
    And,
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    Add,
    Subtract,
    Multiply,
    Divide,
    Remainder,
}

impl Operator {
    fn cel(self) -> &'static str {
        match self {
            Operator::Or => "||",
            Operator::And => "&&",
            Operator::Equal => "==",
            Operator::NotEqual => "!=",
            Operator::Less => "<",
            Operator::LessOrEqual => "<=",
            Operator::Greater => ">",
            Operator::GreaterOrEqual => ">=",
            Operator::Add => "+",
            Operator::Subtract => "-",
            Operator::Multiply => "*",
            Operator::Divide => "/",
            Operator::Remainder => "%",
        }
    }

    /// CEL's binding strength: `||` 1, `&&` 2, comparisons 3, `+ -` 4, `* / %` 5.
    fn precedence(self) -> u8 {
        match self {
            Operator::Or => 1,
            Operator::And => 2,
            Operator::Equal
            | Operator::NotEqual
            | Operator::Less
            | Operator::LessOrEqual
            | Operator::Greater
            | Operator::GreaterOrEqual => 3,
            Operator::Add | Operator::Subtract => 4,
            Operator::Multiply | Operator::Divide | Operator::Remainder => 5,
        }
    }
}

impl Expression {
    fn new(kind: Kind) -> Result<Expression, String> {
        let below = match &kind {
            Kind::Member(inner, _)
            | Kind::Length(inner)
            | Kind::Not(inner)
            | Kind::Negate(inner) => inner.depth,
            Kind::Index(left, right) | Kind::Binary(_, left, right) => left.depth.max(right.depth),
            Kind::Conditional(condition, then, otherwise) => {
                condition.depth.max(then.depth).max(otherwise.depth)
            }
            Kind::Array(items) => items.iter().map(|item| item.depth).max().unwrap_or(0),
            Kind::Object(entries) => entries
                .iter()
                .map(|(_, value)| value.depth)
                .max()
                .unwrap_or(0),
            _ => 0,
        };
        let depth = below + 1;
        if depth > MAX_TREE_DEPTH {
            return Err(format!(
                "it nests more than {MAX_TREE_DEPTH} levels deep; split it into several steps"
            ));
        }
        Ok(Expression { kind, depth })
    }

    /// The CEL binding strength of this node; 6 for unary operators, 7 for primaries.
    fn precedence(&self) -> u8 {
        match &self.kind {
            Kind::Conditional(..) => 0,
            Kind::Binary(operator, ..) => operator.precedence(),
            Kind::Not(_) => 6,
            // A negative number literal is one token to a reader, but `-` still binds looser
            // than `.`, so `(-1).x` keeps its parentheses.
            Kind::Negate(inner) if inner.is_number_literal() => 6,
            // Written `0 - x`, a subtraction (see `write_cel`).
            Kind::Negate(_) => 4,
            _ => 7,
        }
    }

    /// Whether CEL sees a double here without knowing any variable's type.
    fn is_double(&self) -> bool {
        match &self.kind {
            Kind::Double(_) => true,
            Kind::Negate(inner) => inner.is_double(),
            Kind::Binary(Operator::Divide, ..) => true,
            Kind::Binary(
                Operator::Add | Operator::Subtract | Operator::Multiply | Operator::Remainder,
                left,
                right,
            ) => left.is_double() || right.is_double(),
            Kind::Conditional(_, then, otherwise) => then.is_double() && otherwise.is_double(),
            _ => false,
        }
    }

    fn is_number_literal(&self) -> bool {
        matches!(self.kind, Kind::Int(_) | Kind::Double(_))
    }

    /// An int literal, possibly negated.
    fn is_int_literal(&self) -> bool {
        match &self.kind {
            Kind::Int(_) => true,
            Kind::Negate(inner) => inner.is_int_literal(),
            _ => false,
        }
    }
}

/// Parses an expression of the supported subset.
pub fn parse(text: &str) -> Result<Expression, String> {
    if text.len() > MAX_EXPRESSION_BYTES {
        return Err(format!(
            "it is {} bytes long, more than the limit of {MAX_EXPRESSION_BYTES}",
            text.len()
        ));
    }
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        tokens,
        position: 0,
        nesting: 0,
    };
    let expression = parser.expression()?;
    match parser.peek() {
        Token::End => Ok(expression),
        other => Err(format!(
            "unexpected {} after the expression",
            other.describe()
        )),
    }
}

/// Converts an ECMAScript expression into CEL text.
///
/// Supported: number, string, boolean and `null` literals, array and object literals, data
/// variables, `_event` (read as `event`), member access `a.b` and `a[i]`, `.length` (as
/// `size(a)`), `+ - * / %`, comparisons, `==`/`===` and `!=`/`!==`, `&&`, `||`, `!`, unary
/// minus, `c ? a : b`, parentheses and `In('state')`. Everything else is refused with a reason.
///
/// Differences from ECMAScript that remain, by design:
/// - Integer literals stay CEL ints, so `+ - * %` on them are exact integer operations (an
///   overflow is an error) where ECMAScript computes in floating point. Literals with a `.` or an
///   exponent are doubles.
/// - `/` is written `double(a) / double(b)`: ECMAScript division never truncates, and CEL's int
///   division would (`5 / 2` is `2.5`, not `2`). An int literal combined with a division result
///   (or a double literal) by `+ - * %` is written as a double (`x / y * 100` gives
///   `double(x) / double(y) * 100.0`), because CEL refuses to mix ints and doubles in arithmetic.
///   Mixing them through variables still fails loudly at run time (`error.execution`), never
///   silently.
/// - Unary minus on anything but a number literal is written `0 - x` (`0.0 - x` for a known
///   double): the same value, in a form the engine's expression checker accepts.
/// - There is no implicit conversion: `'n=' + 1`, `!0` or `1 == '1'` do not coerce, and a
///   missing key is an error rather than `undefined`.
pub fn to_cel(text: &str, scope: &Scope) -> Result<String, String> {
    let expression = parse(text)?;
    let mut output = String::with_capacity(text.len() + 16);
    write_cel(&expression, scope, &mut output)?;
    Ok(output)
}

/// Whether the expression only reads a value: a variable, or members and indexes of one.
pub fn is_path(text: &str) -> bool {
    fn path(expression: &Expression) -> bool {
        match &expression.kind {
            Kind::Variable(_) => true,
            Kind::Member(object, _) => path(object),
            Kind::Index(object, index) => path(object) && literal_value(index).is_some(),
            _ => false,
        }
    }
    parse(text).is_ok_and(|expression| path(&expression))
}

/// Why an expression gives no JSON literal.
#[derive(Debug, Clone, PartialEq)]
pub enum LiteralError {
    /// It does not parse.
    Syntax(String),
    /// It parses, but reads variables or computes.
    NotLiteral,
}

/// The JSON value of a literal expression: numbers, strings, booleans, `null`, and arrays and
/// objects of those.
pub fn to_literal(text: &str) -> Result<serde_json::Value, LiteralError> {
    let expression = parse(text).map_err(LiteralError::Syntax)?;
    literal_value(&expression).ok_or(LiteralError::NotLiteral)
}

/// The CEL text of a literal JSON value (for `<assign>` content).
pub fn literal_to_cel(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(flag) => flag.to_string(),
        serde_json::Value::Number(number) => match (number.as_i64(), number.as_f64()) {
            (Some(integer), _) => integer.to_string(),
            (None, Some(float)) if number.is_f64() => double_text(float),
            // A u64 beyond i64: CEL's uint literal keeps it exact.
            _ => format!("{number}u"),
        },
        serde_json::Value::String(text) => cel_string(text),
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(literal_to_cel).collect();
            format!("[{}]", items.join(", "))
        }
        serde_json::Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("{}: {}", cel_string(key), literal_to_cel(value)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

fn literal_value(expression: &Expression) -> Option<serde_json::Value> {
    use serde_json::Value;
    Some(match &expression.kind {
        Kind::Null => Value::Null,
        Kind::Bool(flag) => Value::Bool(*flag),
        Kind::Int(magnitude) => Value::from(*magnitude),
        Kind::Double(value) => Value::Number(serde_json::Number::from_f64(*value)?),
        Kind::String(text) => Value::String(text.clone()),
        Kind::Negate(inner) => match &inner.kind {
            Kind::Int(magnitude) => Value::from(0i64.checked_sub_unsigned(*magnitude)?),
            Kind::Double(value) => Value::Number(serde_json::Number::from_f64(-*value)?),
            _ => return None,
        },
        Kind::Array(items) => Value::Array(items.iter().map(literal_value).collect::<Option<_>>()?),
        Kind::Object(entries) => {
            let mut map = serde_json::Map::new();
            for (key, value) in entries {
                // As in ECMAScript, a repeated key keeps its first place and its last value.
                map.insert(key.clone(), literal_value(value)?);
            }
            Value::Object(map)
        }
        _ => return None,
    })
}

/// Writes `expression` as CEL, with parentheses wherever CEL's precedence differs or a reader
/// might hesitate.
fn write_cel(expression: &Expression, scope: &Scope, output: &mut String) -> Result<(), String> {
    match &expression.kind {
        Kind::Null => output.push_str("null"),
        Kind::Bool(flag) => output.push_str(if *flag { "true" } else { "false" }),
        Kind::Int(magnitude) => output.push_str(&magnitude.to_string()),
        Kind::Double(value) => output.push_str(&double_text(*value)),
        Kind::String(text) => output.push_str(&cel_string(text)),
        Kind::Variable(name) => output.push_str(&variable(name, scope)?),
        Kind::Member(object, field) => {
            if let Kind::Variable(name) = &object.kind
                && name == "_event"
            {
                event_field(field)?;
            }
            write_operand(object, 7, scope, output)?;
            if is_cel_identifier(field) {
                output.push('.');
                output.push_str(field);
            } else {
                output.push('[');
                output.push_str(&cel_string(field));
                output.push(']');
            }
        }
        Kind::Index(object, index) => {
            if matches!(&object.kind, Kind::Variable(name) if name == "_event") {
                return Err("`_event` fields are read with `.`, e.g. `_event.data`".into());
            }
            write_operand(object, 7, scope, output)?;
            output.push('[');
            write_cel(index, scope, output)?;
            output.push(']');
        }
        Kind::Length(object) => {
            output.push_str("size(");
            write_cel(object, scope, output)?;
            output.push(')');
        }
        Kind::In(state) => {
            if !scope.states.contains(state) {
                return Err(format!("`In('{state}')` names no state of the document"));
            }
            output.push_str("In(");
            output.push_str(&cel_string(state));
            output.push(')');
        }
        Kind::Not(operand) => {
            output.push('!');
            write_operand(operand, 7, scope, output)?;
        }
        Kind::Negate(operand) if operand.is_number_literal() => {
            output.push('-');
            write_cel(operand, scope, output)?;
        }
        // The engine's name check does not accept CEL's unary minus on an expression (only in
        // a negative literal), so `-x` is written as the subtraction it equals.
        Kind::Negate(operand) => {
            output.push_str(if operand.is_double() {
                "0.0 - "
            } else {
                "0 - "
            });
            write_operand(operand, 5, scope, output)?;
        }
        Kind::Binary(Operator::Divide, left, right) => {
            output.push_str("double(");
            write_cel(left, scope, output)?;
            output.push_str(") / double(");
            write_cel(right, scope, output)?;
            output.push(')');
        }
        Kind::Binary(operator, left, right) => {
            let level = operator.precedence();
            // Comparisons never chain in ECMAScript's sense (`a < b == c` compares a boolean),
            // and CEL puts `==` and `<` on one level, so a comparison operand is always
            // bracketed. Otherwise the left operand may share the level (left associative),
            // the right one must bind tighter.
            let (left_minimum, right_minimum) = if level == 3 {
                (4, 4)
            } else {
                (level, level + 1)
            };
            let arithmetic = matches!(
                operator,
                Operator::Add | Operator::Subtract | Operator::Multiply | Operator::Remainder
            );
            let left_as_double = arithmetic && right.is_double() && left.is_int_literal();
            let right_as_double = arithmetic && left.is_double() && right.is_int_literal();
            write_number_operand(left, left_minimum, left_as_double, scope, output)?;
            output.push(' ');
            output.push_str(operator.cel());
            output.push(' ');
            write_number_operand(right, right_minimum, right_as_double, scope, output)?;
        }
        Kind::Conditional(condition, then, otherwise) => {
            write_operand(condition, 1, scope, output)?;
            output.push_str(" ? ");
            write_operand(then, 1, scope, output)?;
            output.push_str(" : ");
            write_operand(otherwise, 0, scope, output)?;
        }
        Kind::Array(items) => {
            output.push('[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    output.push_str(", ");
                }
                write_cel(item, scope, output)?;
            }
            output.push(']');
        }
        Kind::Object(entries) => {
            output.push('{');
            for (position, (key, value)) in entries.iter().enumerate() {
                if position > 0 {
                    output.push_str(", ");
                }
                output.push_str(&cel_string(key));
                output.push_str(": ");
                write_cel(value, scope, output)?;
            }
            output.push('}');
        }
    }
    Ok(())
}

/// Writes an operand, bracketed when it binds looser than `minimum`.
fn write_operand(
    operand: &Expression,
    minimum: u8,
    scope: &Scope,
    output: &mut String,
) -> Result<(), String> {
    let bracket = operand.precedence() < minimum
        // `--x` or `-(-1)`: keep nested unary operators visibly apart.
        || (minimum == 7 && matches!(operand.kind, Kind::Not(_) | Kind::Negate(_)));
    if bracket {
        output.push('(');
    }
    write_cel(operand, scope, output)?;
    if bracket {
        output.push(')');
    }
    Ok(())
}

/// Writes an arithmetic operand, turning an int literal into a double when the other side is one.
fn write_number_operand(
    operand: &Expression,
    minimum: u8,
    as_double: bool,
    scope: &Scope,
    output: &mut String,
) -> Result<(), String> {
    if !as_double {
        return write_operand(operand, minimum, scope, output);
    }
    let (negative, magnitude) = match &operand.kind {
        Kind::Int(magnitude) => (false, *magnitude),
        Kind::Negate(inner) => match inner.kind {
            Kind::Int(magnitude) => (true, magnitude),
            _ => return write_operand(operand, minimum, scope, output),
        },
        _ => return write_operand(operand, minimum, scope, output),
    };
    let text = format!("{}{magnitude}.0", if negative { "-" } else { "" });
    if negative && minimum > 6 {
        output.push('(');
        output.push_str(&text);
        output.push(')');
    } else {
        output.push_str(&text);
    }
    Ok(())
}

/// A bare name: `_event` becomes `event`; other names must be data ids.
fn variable(name: &str, scope: &Scope) -> Result<String, String> {
    if name == "_event" {
        return Ok("event".into());
    }
    if scope.data.contains(name) {
        return Ok(name.to_string());
    }
    Err(match name {
        "undefined" => "`undefined` has no CEL equivalent; compare with `null`".into(),
        "_sessionid" | "_name" | "_ioprocessors" | "_x" => {
            format!("`{name}` is not available in protocols")
        }
        "NaN" | "Infinity" => format!("`{name}` has no CEL equivalent"),
        "Math" | "JSON" | "Date" | "String" | "Number" | "Object" | "Array" | "console" => {
            format!("`{name}` (ECMAScript's built-in objects) cannot be imported")
        }
        _ => format!("unknown variable `{name}`: it is not the id of a <data> element"),
    })
}

/// The `_event` fields a protocol's `event` has.
fn event_field(field: &str) -> Result<(), String> {
    match field {
        "name" | "data" | "type" | "sendid" | "invokeid" => Ok(()),
        _ => Err(format!(
            "`_event.{field}` is not available: protocol events have `name`, `data`, `type`, `sendid` and `invokeid`"
        )),
    }
}

fn is_cel_identifier(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && name
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || character == '_')
        && !CEL_RESERVED.contains(&name)
}

/// A double's CEL text: always with a `.` or an exponent, so CEL does not read an int.
fn double_text(value: f64) -> String {
    let text = format!("{value:?}");
    if text.contains(['.', 'e', 'E']) {
        text
    } else {
        format!("{text}.0")
    }
}

/// A CEL single-quoted string literal.
pub fn cel_string(text: &str) -> String {
    let mut output = String::with_capacity(text.len() + 2);
    output.push('\'');
    for character in text.chars() {
        match character {
            '\\' => output.push_str("\\\\"),
            '\'' => output.push_str("\\'"),
            '\n' => output.push_str("\\n"),
            '\r' => output.push_str("\\r"),
            '\t' => output.push_str("\\t"),
            control if control.is_control() => {
                output.push_str(&format!("\\u{:04x}", u32::from(control)));
            }
            other => output.push(other),
        }
    }
    output.push('\'');
    output
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(NumberToken),
    String(String),
    Identifier(String),
    Punctuator(&'static str),
    End,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum NumberToken {
    Int(u64),
    Double(f64),
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Number(_) => "a number".into(),
            Token::String(_) => "a string".into(),
            Token::Identifier(name) => format!("`{name}`"),
            Token::Punctuator(text) => format!("`{text}`"),
            Token::End => "the end of the expression".into(),
        }
    }
}

/// Operators that are understood (longest first, so `===` wins over `==`).
const PUNCTUATORS: [&str; 27] = [
    "===", "!==", "==", "!=", "<=", ">=", "&&", "||", "<", ">", "+", "-", "*", "/", "%", "!", "(",
    ")", "[", "]", "{", "}", ".", ",", ":", "?", ";",
];

/// ECMAScript operators that have no place in the subset, recognised to name them in errors.
const UNSUPPORTED_OPERATORS: [&str; 24] = [
    ">>>=", "**=", "<<=", ">>=", "...", ">>>", "&&=", "||=", "??=", "++", "--", "+=", "-=", "*=",
    "/=", "%=", "=>", "**", "<<", ">>", "??", "?.", "&=", "|=",
];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let characters: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < characters.len() {
        let character = characters[index];
        if character.is_whitespace() {
            index += 1;
            continue;
        }
        if character.is_ascii_digit()
            || (character == '.' && characters.get(index + 1).is_some_and(char::is_ascii_digit))
        {
            let (number, next) = number(&characters, index)?;
            tokens.push(Token::Number(number));
            index = next;
            continue;
        }
        if character == '\'' || character == '"' {
            let (string, next) = string(&characters, index)?;
            tokens.push(Token::String(string));
            index = next;
            continue;
        }
        if character.is_alphabetic() || character == '_' || character == '$' {
            let start = index;
            while index < characters.len()
                && (characters[index].is_alphanumeric()
                    || characters[index] == '_'
                    || characters[index] == '$')
            {
                index += 1;
            }
            tokens.push(Token::Identifier(characters[start..index].iter().collect()));
            continue;
        }
        let rest: String = characters[index..characters.len().min(index + 4)]
            .iter()
            .collect();
        // `a?.5:1` is a conditional with `.5`, not optional chaining.
        let optional_chaining =
            rest.starts_with("?.") && !characters.get(index + 2).is_some_and(char::is_ascii_digit);
        if let Some(operator) = UNSUPPORTED_OPERATORS
            .iter()
            .find(|operator| rest.starts_with(**operator))
            .filter(|operator| **operator != "?." || optional_chaining)
        {
            return Err(format!("the operator `{operator}` is not supported"));
        }
        if let Some(punctuator) = PUNCTUATORS
            .iter()
            .find(|punctuator| rest.starts_with(**punctuator))
        {
            if *punctuator == ";" {
                return Err("statements (`;`) are not supported: write one expression".into());
            }
            tokens.push(Token::Punctuator(punctuator));
            index += punctuator.len();
            continue;
        }
        return Err(match character {
            '=' => "assignment (`=`) is not supported in an expression".into(),
            '&' | '|' | '^' | '~' => format!("the bitwise operator `{character}` is not supported"),
            '`' => "template literals are not supported".into(),
            other => format!("unexpected character `{other}`"),
        });
    }
    tokens.push(Token::End);
    Ok(tokens)
}

/// A number literal starting at `start`: decimal (with fraction and exponent) or hexadecimal.
fn number(characters: &[char], start: usize) -> Result<(NumberToken, usize), String> {
    let mut index = start;
    let hexadecimal = characters[index] == '0'
        && characters
            .get(index + 1)
            .is_some_and(|next| *next == 'x' || *next == 'X');
    let token = if hexadecimal {
        index += 2;
        let digits_start = index;
        while index < characters.len() && characters[index].is_ascii_hexdigit() {
            index += 1;
        }
        let digits: String = characters[digits_start..index].iter().collect();
        let value = u64::from_str_radix(&digits, 16)
            .map_err(|_| format!("`0x{digits}` is not a valid number (or is too large)"))?;
        NumberToken::Int(value)
    } else {
        let mut is_double = false;
        while index < characters.len() && characters[index].is_ascii_digit() {
            index += 1;
        }
        if characters.get(index) == Some(&'.') {
            is_double = true;
            index += 1;
            while index < characters.len() && characters[index].is_ascii_digit() {
                index += 1;
            }
        }
        if characters
            .get(index)
            .is_some_and(|next| *next == 'e' || *next == 'E')
        {
            is_double = true;
            index += 1;
            if characters
                .get(index)
                .is_some_and(|sign| *sign == '+' || *sign == '-')
            {
                index += 1;
            }
            let exponent_start = index;
            while index < characters.len() && characters[index].is_ascii_digit() {
                index += 1;
            }
            if index == exponent_start {
                return Err("a number's exponent has no digits".into());
            }
        }
        let text: String = characters[start..index].iter().collect();
        let leading_zero = text.len() > 1
            && text.starts_with('0')
            && text[1..].starts_with(|next: char| next.is_ascii_digit());
        if leading_zero {
            return Err(format!(
                "`{text}`: numbers with a leading zero (octal in old ECMAScript) are not supported"
            ));
        }
        if is_double {
            let value: f64 = text
                .parse()
                .map_err(|_| format!("`{text}` is not a valid number"))?;
            if !value.is_finite() {
                return Err(format!("`{text}` is too large"));
            }
            NumberToken::Double(value)
        } else {
            NumberToken::Int(text.parse().map_err(|_| format!("`{text}` is too large"))?)
        }
    };
    if let NumberToken::Int(value) = token
        && i64::try_from(value).is_err()
    {
        return Err(format!(
            "the integer {value} is too large: CEL ints are 64-bit signed"
        ));
    }
    if characters
        .get(index)
        .is_some_and(|next| next.is_alphanumeric() || *next == '_')
    {
        return Err("a number runs into a name (e.g. `1px` or `1_000`)".into());
    }
    Ok((token, index))
}

/// A string literal starting at the quote at `start`; returns its value and the index after it.
fn string(characters: &[char], start: usize) -> Result<(String, usize), String> {
    let quote = characters[start];
    let mut value = String::new();
    let mut index = start + 1;
    loop {
        let Some(&character) = characters.get(index) else {
            return Err("a string is not closed".into());
        };
        index += 1;
        match character {
            _ if character == quote => return Ok((value, index)),
            '\n' | '\r' => return Err("a string runs past the end of the line".into()),
            '\\' => {
                let Some(&escaped) = characters.get(index) else {
                    return Err("a string is not closed".into());
                };
                index += 1;
                match escaped {
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    'r' => value.push('\r'),
                    'b' => value.push('\u{8}'),
                    'f' => value.push('\u{c}'),
                    'v' => value.push('\u{b}'),
                    '0' if !characters.get(index).is_some_and(char::is_ascii_digit) => {
                        value.push('\0')
                    }
                    'x' => {
                        let code = hex_code(characters, index, 2)?;
                        index += 2;
                        value.push(code);
                    }
                    'u' if characters.get(index) == Some(&'{') => {
                        let close = characters[index..]
                            .iter()
                            .position(|character| *character == '}')
                            .ok_or("a `\\u{...}` escape is not closed")?;
                        let digits: String = characters[index + 1..index + close].iter().collect();
                        let code = u32::from_str_radix(&digits, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or_else(|| format!("`\\u{{{digits}}}` is not a character"))?;
                        value.push(code);
                        index += close + 1;
                    }
                    'u' => {
                        let code = hex_code(characters, index, 4)?;
                        index += 4;
                        value.push(code);
                    }
                    '1'..='9' | '0' => {
                        return Err("octal escapes in strings are not supported".into());
                    }
                    // A backslash before a line break continues the string on the next line.
                    '\n' => {}
                    other => value.push(other),
                }
            }
            other => value.push(other),
        }
    }
}

/// The character of `length` hex digits at `index` (a `\x` or `\u` escape).
fn hex_code(characters: &[char], index: usize, length: usize) -> Result<char, String> {
    let digits: String = characters
        .get(index..index + length)
        .ok_or("an escape in a string is cut short")?
        .iter()
        .collect();
    u32::from_str_radix(&digits, 16)
        .ok()
        .and_then(char::from_u32)
        .ok_or_else(|| {
            format!("`{digits}` in a string escape is not a character (surrogate pairs are not supported)")
        })
}

struct Parser {
    tokens: Vec<Token>,
    position: usize,
    /// Brackets and unary operators open right now.
    nesting: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        self.tokens.get(self.position).unwrap_or(&Token::End)
    }

    fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if self.position < self.tokens.len() {
            self.position += 1;
        }
        token
    }

    fn eat(&mut self, punctuator: &str) -> bool {
        if matches!(self.peek(), Token::Punctuator(text) if *text == punctuator) {
            self.position += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, punctuator: &str) -> Result<(), String> {
        if self.eat(punctuator) {
            Ok(())
        } else {
            Err(format!(
                "expected `{punctuator}`, found {}",
                self.peek().describe()
            ))
        }
    }

    fn enter(&mut self) -> Result<(), String> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(format!(
                "it nests more than {MAX_NESTING} levels deep; split it into several steps"
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting -= 1;
    }

    fn expression(&mut self) -> Result<Expression, String> {
        self.enter()?;
        let result = self.conditional();
        self.leave();
        result
    }

    fn conditional(&mut self) -> Result<Expression, String> {
        let condition = self.binary(1)?;
        if !self.eat("?") {
            return Ok(condition);
        }
        let then = self.expression()?;
        self.expect(":")?;
        let otherwise = self.expression()?;
        Expression::new(Kind::Conditional(
            Box::new(condition),
            Box::new(then),
            Box::new(otherwise),
        ))
    }

    /// Binary operators by ECMAScript precedence: 1 `||`, 2 `&&`, 3 equality, 4 relational,
    /// 5 additive, 6 multiplicative, all left associative.
    fn binary(&mut self, level: u8) -> Result<Expression, String> {
        if level > 6 {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        loop {
            let operator = match (level, self.peek()) {
                (1, Token::Punctuator("||")) => Operator::Or,
                (2, Token::Punctuator("&&")) => Operator::And,
                (3, Token::Punctuator("==" | "===")) => Operator::Equal,
                (3, Token::Punctuator("!=" | "!==")) => Operator::NotEqual,
                (4, Token::Punctuator("<")) => Operator::Less,
                (4, Token::Punctuator("<=")) => Operator::LessOrEqual,
                (4, Token::Punctuator(">")) => Operator::Greater,
                (4, Token::Punctuator(">=")) => Operator::GreaterOrEqual,
                (4, Token::Identifier(word)) if word == "in" || word == "instanceof" => {
                    return Err(format!("the operator `{word}` is not supported"));
                }
                (5, Token::Punctuator("+")) => Operator::Add,
                (5, Token::Punctuator("-")) => Operator::Subtract,
                (6, Token::Punctuator("*")) => Operator::Multiply,
                (6, Token::Punctuator("/")) => Operator::Divide,
                (6, Token::Punctuator("%")) => Operator::Remainder,
                _ => return Ok(left),
            };
            self.advance();
            let right = self.binary(level + 1)?;
            left = Expression::new(Kind::Binary(operator, Box::new(left), Box::new(right)))?;
        }
    }

    fn unary(&mut self) -> Result<Expression, String> {
        let make: fn(Box<Expression>) -> Kind = match self.peek() {
            Token::Punctuator("!") => Kind::Not,
            Token::Punctuator("-") => Kind::Negate,
            Token::Punctuator("+") => {
                return Err("unary `+` (conversion to a number) is not supported".into());
            }
            Token::Identifier(word)
                if matches!(
                    word.as_str(),
                    "typeof" | "void" | "delete" | "new" | "await"
                ) =>
            {
                return Err(format!("`{word}` is not supported"));
            }
            _ => return self.postfix(),
        };
        self.advance();
        self.enter()?;
        let operand = self.unary();
        self.leave();
        Expression::new(make(Box::new(operand?)))
    }

    fn postfix(&mut self) -> Result<Expression, String> {
        let mut expression = self.primary()?;
        loop {
            if self.eat(".") {
                let field = match self.advance() {
                    Token::Identifier(field) => field,
                    other => {
                        return Err(format!(
                            "expected a name after `.`, found {}",
                            other.describe()
                        ));
                    }
                };
                if matches!(self.peek(), Token::Punctuator("(")) {
                    return Err(format!("method calls (`.{field}(...)`) are not supported"));
                }
                let is_event = matches!(&expression.kind, Kind::Variable(name) if name == "_event");
                expression = if field == "length" && !is_event {
                    Expression::new(Kind::Length(Box::new(expression)))?
                } else {
                    Expression::new(Kind::Member(Box::new(expression), field))?
                };
            } else if self.eat("[") {
                let index = self.expression()?;
                self.expect("]")?;
                expression = Expression::new(Kind::Index(Box::new(expression), Box::new(index)))?;
            } else if matches!(self.peek(), Token::Punctuator("(")) {
                return Err("function calls are not supported, except `In('state')`".into());
            } else {
                return Ok(expression);
            }
        }
    }

    fn primary(&mut self) -> Result<Expression, String> {
        match self.advance() {
            Token::Number(NumberToken::Int(value)) => Expression::new(Kind::Int(value)),
            Token::Number(NumberToken::Double(value)) => Expression::new(Kind::Double(value)),
            Token::String(text) => Expression::new(Kind::String(text)),
            Token::Identifier(word) => self.word(word),
            Token::Punctuator("(") => {
                let inner = self.expression()?;
                self.expect(")")?;
                Ok(inner)
            }
            Token::Punctuator("[") => {
                self.enter()?;
                let items = self.array();
                self.leave();
                Expression::new(Kind::Array(items?))
            }
            Token::Punctuator("{") => {
                self.enter()?;
                let entries = self.object();
                self.leave();
                Expression::new(Kind::Object(entries?))
            }
            Token::Punctuator("/") => Err("regular expressions are not supported".into()),
            Token::End => Err("the expression is empty or ends too early".into()),
            other => Err(format!("unexpected {}", other.describe())),
        }
    }

    fn word(&mut self, word: String) -> Result<Expression, String> {
        match word.as_str() {
            "true" => Expression::new(Kind::Bool(true)),
            "false" => Expression::new(Kind::Bool(false)),
            "null" => Expression::new(Kind::Null),
            "In" => {
                self.expect("(")?;
                let state = match self.advance() {
                    Token::String(state) => state,
                    _ => return Err("`In` takes one state id as a string literal".into()),
                };
                self.expect(")")
                    .map_err(|_| "`In` takes one state id as a string literal".to_string())?;
                Expression::new(Kind::In(state))
            }
            "function" | "this" | "var" | "let" | "const" | "class" | "yield" | "async"
            | "super" | "import" => Err(format!("`{word}` is not supported")),
            _ => {
                if matches!(self.peek(), Token::Punctuator("(")) {
                    return Err(format!(
                        "function calls (`{word}(...)`) are not supported, except `In('state')`"
                    ));
                }
                Expression::new(Kind::Variable(word))
            }
        }
    }

    fn array(&mut self) -> Result<Vec<Expression>, String> {
        let mut items = Vec::new();
        loop {
            if self.eat("]") {
                return Ok(items);
            }
            if matches!(self.peek(), Token::Punctuator(",")) {
                return Err("arrays with holes (`[1,,2]`) are not supported".into());
            }
            items.push(self.expression()?);
            if !self.eat(",") {
                self.expect("]")?;
                return Ok(items);
            }
        }
    }

    fn object(&mut self) -> Result<Vec<(String, Expression)>, String> {
        let mut entries = Vec::new();
        loop {
            if self.eat("}") {
                return Ok(entries);
            }
            let key = match self.advance() {
                Token::Identifier(name) => name,
                Token::String(text) => text,
                Token::Number(NumberToken::Int(value)) => value.to_string(),
                other => {
                    return Err(format!(
                        "an object key must be a name, a string or an integer, not {}",
                        other.describe()
                    ));
                }
            };
            if !self.eat(":") {
                return Err(format!(
                    "expected `:` after the key `{key}` (shorthand properties are not supported)"
                ));
            }
            entries.push((key, self.expression()?));
            if !self.eat(",") {
                self.expect("}")?;
                return Ok(entries);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn convert(text: &str) -> Result<String, String> {
        let data: HashSet<String> = ["count", "limit", "items", "name", "total", "flag"]
            .iter()
            .map(|name| name.to_string())
            .collect();
        let states: HashSet<String> = ["idle", "busy"]
            .iter()
            .map(|state| state.to_string())
            .collect();
        to_cel(
            text,
            &Scope {
                data: &data,
                states: &states,
            },
        )
    }

    /// The engine's CEL compiler accepts the text, with the same names in scope.
    fn assert_compiles(cel: &str) {
        let names = crate::pipeline::compile::expression::Names::new(
            ["count", "limit", "items", "name", "total", "flag"]
                .iter()
                .map(|name| name.to_string()),
            std::iter::empty(),
            [("idle".to_string(), 1), ("busy".to_string(), 2)]
                .into_iter()
                .collect(),
        );
        if let Err(problems) =
            crate::pipeline::compile::expression::Expression::compile(cel, &names)
        {
            panic!("`{cel}` does not compile: {problems:?}");
        }
    }

    #[test]
    fn converts_the_supported_subset() {
        let cases = [
            ("count < 3", "count < 3"),
            ("count === 3", "count == 3"),
            ("count !== 3", "count != 3"),
            ("count != 3 && flag", "count != 3 && flag"),
            ("!flag || count >= limit", "!flag || count >= limit"),
            ("_event.data.value > 2", "event.data.value > 2"),
            ("_event.name == 'go'", "event.name == 'go'"),
            ("\"double\" + 'single'", "'double' + 'single'"),
            ("'it\\'s'", "'it\\'s'"),
            ("In('idle') && !In(\"busy\")", "In('idle') && !In('busy')"),
            ("(count + 1) * 2", "(count + 1) * 2"),
            ("count + 1 * 2", "count + 1 * 2"),
            ("count - (limit - 1)", "count - (limit - 1)"),
            ("count - limit - 1", "count - limit - 1"),
            ("-count", "0 - count"),
            ("- -count", "0 - (0 - count)"),
            ("count * -limit", "count * (0 - limit)"),
            ("-(count / 2)", "0.0 - double(count) / double(2)"),
            ("!!flag", "!(!flag)"),
            ("-1", "-1"),
            ("2.5", "2.5"),
            ("1e3", "1000.0"),
            ("0x1F", "31"),
            ("null", "null"),
            ("items[0].name", "items[0].name"),
            ("items['a b']", "items['a b']"),
            ("name.length", "size(name)"),
            ("flag ? 'yes' : 'no'", "flag ? 'yes' : 'no'"),
            (
                "flag ? count : limit ? 1 : 2",
                "flag ? count : limit ? 1 : 2",
            ),
            ("(flag ? count : limit) + 1", "(flag ? count : limit) + 1"),
            ("[1, 'a', [true]]", "[1, 'a', [true]]"),
            ("{a: 1, 'b c': 2, 3: 4}", "{'a': 1, 'b c': 2, '3': 4}"),
            (
                "count < limit == total < flag",
                "(count < limit) == (total < flag)",
            ),
            ("count == 1 == flag", "(count == 1) == flag"),
            (
                "flag && (count > 1 || limit > 1)",
                "flag && (count > 1 || limit > 1)",
            ),
            ("items.if", "items['if']"),
        ];
        for (input, expected) in cases {
            assert_eq!(convert(input).as_deref(), Ok(expected), "{input}");
            assert_compiles(expected);
        }
    }

    #[test]
    fn division_is_floating_point() {
        let cases = [
            ("count / 2", "double(count) / double(2)"),
            (
                "count / limit * 100",
                "double(count) / double(limit) * 100.0",
            ),
            ("1 + total / 2", "1.0 + double(total) / double(2)"),
            ("count / 2 > 1", "double(count) / double(2) > 1"),
            (
                "count / limit / 2",
                "double(double(count) / double(limit)) / double(2)",
            ),
            ("2.5 * -2", "2.5 * -2.0"),
            ("count % 2 == 0", "count % 2 == 0"),
            ("count - -1", "count - -1"),
        ];
        for (input, expected) in cases {
            assert_eq!(convert(input).as_deref(), Ok(expected), "{input}");
            assert_compiles(expected);
        }
    }

    #[test]
    fn refuses_what_has_no_equivalent() {
        let cases = [
            ("count++", "`++`"),
            ("count = 1", "assignment"),
            ("count += 1", "`+=`"),
            ("typeof count", "`typeof`"),
            ("Math.max(count, 1)", "method calls"),
            ("foo(1)", "function calls"),
            ("items.push(1)", "method calls"),
            ("unknown > 1", "unknown variable `unknown`"),
            ("undefined", "`undefined`"),
            ("_event.origin", "`_event.origin`"),
            ("_sessionid", "`_sessionid`"),
            ("In(count)", "`In` takes"),
            ("In('nowhere')", "names no state"),
            ("count & 1", "bitwise"),
            ("count ** 2", "`**`"),
            ("'open", "not closed"),
            ("count <", "ends too early"),
            ("count; flag", "statements"),
            ("`t`", "template literals"),
            ("'a' in items", "`in`"),
            ("01", "leading zero"),
            ("99999999999999999999", "too large"),
            ("count ?? 1", "`??`"),
            ("items?.a", "`?.`"),
            ("new Date()", "`new`"),
            ("+count", "unary `+`"),
            ("[1,,2]", "holes"),
            ("{a}", "shorthand"),
            ("", "empty"),
        ];
        for (input, expected) in cases {
            match convert(input) {
                Err(message) => assert!(
                    message.contains(expected),
                    "{input}: `{message}` does not mention {expected}"
                ),
                Ok(cel) => panic!("{input} converted to {cel}"),
            }
        }
    }

    #[test]
    fn limits_nesting() {
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(convert(&deep).unwrap_err().contains("nests"));
        let negations = format!("{}flag", "!".repeat(100));
        assert!(convert(&negations).unwrap_err().contains("nests"));
        let chain = vec!["count"; 400].join(" + ");
        assert!(convert(&chain).unwrap_err().contains("nests"));
        let long = format!("count{}", " ".repeat(MAX_EXPRESSION_BYTES));
        assert!(convert(&long).unwrap_err().contains("bytes"));
    }

    #[test]
    fn reads_literals_as_json() {
        assert_eq!(to_literal("0"), Ok(json!(0)));
        assert_eq!(to_literal("-12"), Ok(json!(-12)));
        assert_eq!(to_literal("2.5"), Ok(json!(2.5)));
        assert_eq!(to_literal("-0.5"), Ok(json!(-0.5)));
        assert_eq!(to_literal("'text'"), Ok(json!("text")));
        assert_eq!(to_literal("\"a\\nb\\u0041\""), Ok(json!("a\nbA")));
        assert_eq!(to_literal("true"), Ok(json!(true)));
        assert_eq!(to_literal("null"), Ok(json!(null)));
        assert_eq!(
            to_literal("{\"a\": [1, {b: 'c'}], d: null}"),
            Ok(json!({"a": [1, {"b": "c"}], "d": null}))
        );
        assert_eq!(to_literal("[]"), Ok(json!([])));
        assert_eq!(to_literal("count + 1"), Err(LiteralError::NotLiteral));
        assert_eq!(to_literal("[count]"), Err(LiteralError::NotLiteral));
        assert_eq!(to_literal("-'a'"), Err(LiteralError::NotLiteral));
        assert!(matches!(to_literal("1 +"), Err(LiteralError::Syntax(_))));
    }

    #[test]
    fn tells_paths_from_computations() {
        assert!(is_path("pause"));
        assert!(is_path("_event.data.delay"));
        assert!(is_path("delays[0]"));
        assert!(!is_path("base * 2"));
        assert!(!is_path("'2s'"));
        assert!(!is_path("delays[index]"));
    }

    #[test]
    fn writes_literals_as_cel() {
        let value = json!({"a": [1, -2, 2.5, "it's", null, true], "b": {}});
        assert_eq!(
            literal_to_cel(&value),
            "{'a': [1, -2, 2.5, 'it\\'s', null, true], 'b': {}}"
        );
    }
}
