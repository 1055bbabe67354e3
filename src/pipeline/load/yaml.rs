//! YAML text → JSON value plus a JSON-pointer → source-position map, with hard limits.

use std::ops::ControlFlow;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, ScanError, Tag};
use serde_json::{Map, Number, Value};

pub use super::positions::{NodePosition, Positions};
use super::positions::{PointerSpan, START_OF_FILE};
pub use crate::base::diagnostic::Position;

#[derive(Debug, Clone, Copy)]
pub struct YamlLimits {
    pub max_depth: usize,
    pub max_bytes: usize,
    pub max_nodes: usize,
    /// Total bytes of the JSON pointers kept for positions: each is as long as the keys above
    /// its node, so long keys over many nested values would otherwise take memory and time
    /// quadratic in the file size.
    pub max_path_bytes: usize,
}

impl Default for YamlLimits {
    fn default() -> Self {
        YamlLimits {
            max_depth: 64,
            max_bytes: 1024 * 1024,
            max_nodes: 200_000,
            max_path_bytes: 64 * 1024 * 1024,
        }
    }
}

/// One problem found while reading YAML.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    pub message: String,
    pub position: Position,
    pub help: Option<String>,
}

pub struct Document {
    pub value: serde_json::Value,
    pub positions: Positions,
}

/// Parse one YAML document. Any problem makes the whole parse fail; all problems found before
/// reading had to stop are returned, in source order.
pub fn parse(text: &str, limits: &YamlLimits) -> Result<Document, Vec<YamlError>> {
    if text.len() > limits.max_bytes {
        return Err(vec![YamlError {
            message: format!(
                "file is {} bytes, larger than the limit of {} bytes",
                text.len(),
                limits.max_bytes
            ),
            position: START_OF_FILE,
            help: Some("split the content into smaller files".to_string()),
        }]);
    }
    Reader::new(text, *limits).run()
}

/// Escape one JSON-pointer reference token (`~` → `~0`, `/` → `~1`).
pub fn escape_pointer_token(token: &str) -> std::borrow::Cow<'_, str> {
    if !token.contains(['~', '/']) {
        // Nearly every key: no copy.
        return std::borrow::Cow::Borrowed(token);
    }
    // `~` first, so the `~` introduced by `~1` is not escaped again.
    std::borrow::Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
}

/// saphyr's scanner counts flow nesting (`[`, `{`) in a `u8` and fails beyond it, before it
/// emits any event for the nested collections; that failure is reported as a depth error.
const SCANNER_FLOW_NESTING_LIMIT: usize = 255;

/// A message and optional help, before a position is attached.
struct Problem {
    message: String,
    help: Option<String>,
}

impl Problem {
    fn new(message: impl Into<String>, help: impl Into<String>) -> Self {
        Problem {
            message: message.into(),
            help: Some(help.into()),
        }
    }
}

/// A mapping key read but whose value has not arrived yet. `text` is `None` for an invalid
/// (non-scalar) key, whose value is then read but dropped.
struct PendingKey {
    text: Option<String>,
    position: Position,
}

enum Content {
    Sequence(Vec<Value>),
    Mapping {
        entries: Map<String, Value>,
        pending_key: Option<PendingKey>,
    },
}

/// An open sequence or mapping. `pointer` is `None` inside an invalid key, which is not recorded.
struct Frame {
    pointer: Option<PointerSpan>,
    content: Content,
}

impl Frame {
    fn expects_key(&self) -> bool {
        matches!(
            self.content,
            Content::Mapping {
                pending_key: None,
                ..
            }
        )
    }
}

struct Reader<'text> {
    limits: YamlLimits,
    locator: Locator<'text>,
    parser: Parser<'text, saphyr_parser::StrInput<'text>>,
    // An explicit stack instead of recursion, so deep input cannot overflow the call stack.
    stack: Vec<Frame>,
    positions: Positions,
    errors: Vec<YamlError>,
    root: Option<Value>,
    node_count: usize,
    path_bytes: usize,
    document_count: usize,
}

impl<'text> Reader<'text> {
    fn new(text: &'text str, limits: YamlLimits) -> Self {
        let locator = Locator::new(text);
        // About one node per line, and pointers about as long in total as the text: room for
        // those, so that reading rarely grows the table or the text of pointers.
        let positions = Positions::with_capacity(
            locator.line_starts.len(),
            text.len().min(limits.max_path_bytes),
        );
        Reader {
            limits,
            locator,
            parser: Parser::new_from_str(text),
            stack: Vec::new(),
            positions,
            errors: Vec::new(),
            root: None,
            node_count: 0,
            path_bytes: 0,
            document_count: 0,
        }
    }

    fn run(mut self) -> Result<Document, Vec<YamlError>> {
        while let Some(next) = self.parser.next_event() {
            let flow = match next {
                Ok((event, span)) => {
                    let start = self.locator.locate(span.start);
                    self.handle(event, start)
                }
                Err(scan_error) => {
                    let position = self.locator.locate(*scan_error.marker());
                    let problem = self.scan_problem(&scan_error, position);
                    self.report(position, problem);
                    ControlFlow::Break(())
                }
            };
            if flow.is_break() {
                break;
            }
        }
        if self.document_count == 0 && self.errors.is_empty() {
            self.report(
                START_OF_FILE,
                Problem::new(
                    "the file is empty",
                    "write the document's content; only whitespace and comments were found",
                ),
            );
        }
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        Ok(Document {
            value: self.root.unwrap_or(Value::Null),
            positions: self.positions,
        })
    }

    fn handle(&mut self, event: Event<'_>, start: Position) -> ControlFlow<()> {
        match event {
            Event::DocumentStart(_) => {
                self.document_count += 1;
                if self.document_count > 1 {
                    let help =
                        "remove the second `---` line, or move that document to its own file";
                    self.report(start, Problem::new("only one YAML document per file", help));
                    return ControlFlow::Break(());
                }
            }
            Event::Alias(_) => {
                self.count_node(start)?;
                self.report(start, alias_problem());
                // Carry on with a null so later problems are reported too.
                self.record_position(start);
                self.attach(Value::Null, start);
            }
            Event::Scalar(text, style, anchor, tag) => {
                self.count_node(start)?;
                self.check_anchor(anchor, start);
                self.scalar(&text, style, tag.as_deref(), start);
            }
            Event::SequenceStart(anchor, tag) => {
                self.open_collection(false, anchor, tag.as_deref(), start)?;
            }
            Event::MappingStart(anchor, tag) => {
                self.open_collection(true, anchor, tag.as_deref(), start)?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(frame) = self.stack.pop() {
                    let value = match frame.content {
                        Content::Sequence(items) => Value::Array(items),
                        Content::Mapping { entries, .. } => Value::Object(entries),
                    };
                    self.attach(value, start);
                }
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
        ControlFlow::Continue(())
    }

    fn scalar(&mut self, text: &str, style: ScalarStyle, tag: Option<&Tag>, start: Position) {
        let Some(Frame {
            pointer,
            content:
                Content::Mapping {
                    entries,
                    pending_key: pending_key @ None,
                },
        }) = self.stack.last_mut()
        else {
            let value = scalar_value(text, style, tag).unwrap_or_else(|problem| {
                self.report(start, problem);
                Value::Null
            });
            self.record_position(start);
            self.attach(value, start);
            return;
        };
        // A key: its source text is the JSON key, whatever type it would have as a value.
        *pending_key = Some(PendingKey {
            text: Some(text.to_string()),
            position: start,
        });
        // A key seen before has its value in `entries` already: a value comes between two keys.
        if entries.contains_key(text) {
            let first = pointer.and_then(|parent| {
                let parent = self.positions.pointer(parent);
                let pointer = format!("{parent}/{}", escape_pointer_token(text));
                self.positions
                    .get(&pointer)
                    .and_then(|position| position.key)
            });
            let help = match first {
                Some(first) => format!(
                    "the first `{text}` is at line {}:{}; remove one of them or merge them",
                    first.line, first.column
                ),
                None => "remove one of them or merge them".to_string(),
            };
            self.report(start, Problem::new(format!("duplicate key `{text}`"), help));
        }
        // Only an explicit tag can make a key invalid; `.inf: x` is a fine string key.
        if let Some(Err(problem)) = tag.map(|tag| scalar_value(text, style, Some(tag))) {
            self.report(start, problem);
        }
    }

    fn open_collection(
        &mut self,
        is_mapping: bool,
        anchor: usize,
        tag: Option<&Tag>,
        start: Position,
    ) -> ControlFlow<()> {
        self.count_node(start)?;
        self.check_anchor(anchor, start);
        self.check_collection_tag(tag, is_mapping, start);
        if self.stack.len() >= self.limits.max_depth {
            self.report(start, depth_problem(self.limits.max_depth));
            return ControlFlow::Break(());
        }
        if self.stack.last().is_some_and(Frame::expects_key) {
            let kind = if is_mapping { "mapping" } else { "sequence" };
            let message = format!("a mapping key must be a single value, not a {kind}");
            self.report(
                start,
                Problem::new(message, "write the key as a plain string"),
            );
        }
        let pointer = self.record_position(start);
        let content = if is_mapping {
            Content::Mapping {
                entries: Map::new(),
                pending_key: None,
            }
        } else {
            Content::Sequence(Vec::new())
        };
        self.stack.push(Frame { pointer, content });
        ControlFlow::Continue(())
    }

    /// Record where the node about to be attached starts; returns its pointer, if it has one.
    fn record_position(&mut self, value: Position) -> Option<PointerSpan> {
        let positions = &mut self.positions;
        let (pointer, key) = match self.stack.last() {
            None => (Some(positions.root_pointer()), None),
            Some(frame) => match &frame.content {
                Content::Sequence(items) => (
                    frame
                        .pointer
                        .map(|parent| positions.item_pointer(parent, items.len())),
                    None,
                ),
                Content::Mapping {
                    pending_key: Some(key),
                    ..
                } => {
                    let pointer = frame
                        .pointer
                        .zip(key.text.as_deref())
                        .map(|(parent, text)| positions.entry_pointer(parent, text));
                    (pointer, Some(key.position))
                }
                // The node is a (non-scalar) key; it has no pointer of its own.
                Content::Mapping { .. } => (None, None),
            },
        };
        let pointer = pointer?;
        // On a duplicate key the first occurrence keeps its positions.
        positions.insert(pointer, NodePosition { value, key });
        Some(pointer)
    }

    /// Put a finished node into its parent, or make it the root.
    fn attach(&mut self, value: Value, start: Position) {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(value);
            return;
        };
        match &mut frame.content {
            Content::Sequence(items) => items.push(value),
            Content::Mapping {
                entries,
                pending_key,
                ..
            } => match pending_key.take() {
                Some(PendingKey {
                    text: Some(text), ..
                }) => {
                    entries.entry(text).or_insert(value);
                }
                Some(PendingKey { text: None, .. }) => {}
                // A non-scalar node finished in key position (already reported at its start).
                None => {
                    *pending_key = Some(PendingKey {
                        text: None,
                        position: start,
                    });
                }
            },
        }
    }

    fn count_node(&mut self, start: Position) -> ControlFlow<()> {
        self.node_count += 1;
        if self.node_count > self.limits.max_nodes {
            let limit = self.limits.max_nodes;
            let message = format!("more than {limit} values in one file");
            let help = format!("keys, values and list items are limited to {limit} per file");
            self.report(start, Problem::new(message, help));
            return ControlFlow::Break(());
        }
        // The node's pointer extends its parent's, so charging the parent's length per node
        // bounds the bytes of all pointers (up to the keys themselves, which are in the text).
        self.path_bytes += self
            .stack
            .last()
            .and_then(|frame| frame.pointer)
            .map_or(0, PointerSpan::len);
        if self.path_bytes > self.limits.max_path_bytes {
            let limit = self.limits.max_path_bytes;
            let message = format!(
                "the paths to this file's values (the keys above each) total more than {limit} bytes"
            );
            let help = "shorten the long keys above this value, or nest fewer values under them";
            self.report(start, Problem::new(message, help));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn check_anchor(&mut self, anchor: usize, start: Position) {
        // saphyr numbers anchors from 1; 0 means the node has none.
        if anchor != 0 {
            let help = "remove the `&` anchor and write repeated values out in full";
            self.report(start, Problem::new("YAML anchors are not supported", help));
        }
    }

    fn check_collection_tag(&mut self, tag: Option<&Tag>, is_mapping: bool, start: Position) {
        let expected = if is_mapping { "map" } else { "seq" };
        match tag {
            Some(tag) if !(tag.is_yaml_core_schema() && tag.suffix == expected) => {
                let message = format!("unsupported tag `{}`", tag_name(tag));
                self.report(start, Problem::new(message, "remove the tag"));
            }
            _ => {}
        }
    }

    fn scan_problem(&self, error: &ScanError, position: Position) -> Problem {
        let info = error.info();
        match info {
            // saphyr reports an alias to an anchor it never saw this way.
            "while parsing node, found unknown anchor" => alias_problem(),
            "recursion limit exceeded" => {
                depth_problem(self.limits.max_depth.min(SCANNER_FLOW_NESTING_LIMIT))
            }
            _ => {
                let at_end = position.offset >= self.locator.text.len();
                let cut_off = at_end || info.contains("end of stream") || info.contains("eof");
                Problem {
                    message: capitalize(info),
                    help: cut_off.then(|| {
                        "the file seems to end too early; look for an unclosed bracket, brace or \
                         quote"
                            .to_string()
                    }),
                }
            }
        }
    }

    fn report(&mut self, position: Position, problem: Problem) {
        self.errors.push(YamlError {
            message: problem.message,
            position,
            help: problem.help,
        });
    }
}

fn depth_problem(limit: usize) -> Problem {
    Problem::new(
        format!("nesting deeper than {limit} levels"),
        format!("mappings and sequences may be nested at most {limit} levels deep"),
    )
}

fn alias_problem() -> Problem {
    Problem::new(
        "YAML aliases are not supported",
        "write the value out in full",
    )
}

fn capitalize(text: &str) -> String {
    let mut characters = text.chars();
    match characters.next() {
        Some(first) => first.to_uppercase().chain(characters).collect(),
        None => String::new(),
    }
}

/// How a tag is shown to the user: `!!int`, `!local`, or the full name.
fn tag_name(tag: &Tag) -> String {
    if tag.is_yaml_core_schema() {
        format!("!!{}", tag.suffix)
    } else if tag.handle == "!" {
        format!("!{}", tag.suffix)
    } else {
        format!("{}{}", tag.handle, tag.suffix)
    }
}

/// The JSON value of a scalar under the YAML 1.2 core schema, honouring an explicit tag.
fn scalar_value(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, Problem> {
    let Some(tag) = tag else {
        return match style {
            ScalarStyle::Plain => plain_value(text),
            _ => Ok(Value::String(text.to_string())),
        };
    };
    let name = tag_name(tag);
    let invalid = || {
        Problem::new(
            format!("`{text}` is not a valid {name} value"),
            "fix the value or remove the tag",
        )
    };
    let suffix = if tag.is_yaml_core_schema() {
        tag.suffix.as_str()
    } else {
        ""
    };
    match suffix {
        "str" => Ok(Value::String(text.to_string())),
        "null" if is_null(text) => Ok(Value::Null),
        "bool" => parse_bool(text).map(Value::Bool).ok_or_else(invalid),
        "int" => parse_integer(text).unwrap_or_else(|| Err(invalid())),
        "float" if is_float_syntax(text) || is_special_float(text) => parse_float(text),
        "null" | "float" => Err(invalid()),
        _ => Err(Problem::new(
            format!("unsupported tag `{name}`"),
            "only !!str, !!int, !!float, !!bool and !!null are supported",
        )),
    }
}

fn plain_value(text: &str) -> Result<Value, Problem> {
    if is_null(text) {
        return Ok(Value::Null);
    }
    if let Some(boolean) = parse_bool(text) {
        return Ok(Value::Bool(boolean));
    }
    if let Some(integer) = parse_integer(text) {
        return integer;
    }
    if is_float_syntax(text) || is_special_float(text) {
        return parse_float(text);
    }
    Ok(Value::String(text.to_string()))
}

fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// `None` if the text is not integer syntax; otherwise the number or an out-of-range problem.
fn parse_integer(text: &str) -> Option<Result<Value, Problem>> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (radix, digits) = if let Some(hex) = unsigned.strip_prefix("0x") {
        (16, hex)
    } else if let Some(octal) = unsigned.strip_prefix("0o") {
        (8, octal)
    } else {
        (10, unsigned)
    };
    if digits.is_empty() || !digits.chars().all(|digit| digit.is_digit(radix)) {
        return None;
    }
    let out_of_range = || {
        Problem::new(
            format!("integer `{text}` out of range"),
            "integers must lie between -2^63 and 2^64-1; quote the value to keep it as a string",
        )
    };
    // The digits are valid, so the only possible failure is overflow.
    let Ok(magnitude) = u64::from_str_radix(digits, radix) else {
        return Some(Err(out_of_range()));
    };
    Some(if negative {
        0i64.checked_sub_unsigned(magnitude)
            .map(Value::from)
            .ok_or_else(out_of_range)
    } else {
        Ok(Value::from(magnitude))
    })
}

/// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?` from the core schema.
/// Checked by hand because Rust's float parser also accepts `inf`, `NaN` and `infinity`.
fn is_float_syntax(text: &str) -> bool {
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (unsigned, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((whole, fraction)) => {
            all_digits(whole) && all_digits(fraction) && !(whole.is_empty() && fraction.is_empty())
        }
        None => !mantissa.is_empty() && all_digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|exponent| {
        let digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
        !digits.is_empty() && all_digits(digits)
    });
    mantissa_ok && exponent_ok
}

fn is_special_float(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN")
}

fn parse_float(text: &str) -> Result<Value, Problem> {
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
        .ok_or_else(|| {
            Problem::new(
                format!("`{text}` is not representable in JSON"),
                "use a finite number, or quote the value to keep it as a string",
            )
        })
}

/// Turns saphyr markers into positions. saphyr's `line` is 1-based and its `col` 0-based in
/// characters; its `index` counts characters, not bytes, so the byte offset is computed here.
struct Locator<'text> {
    text: &'text str,
    /// Byte offset of the start of each line, with `\n`, `\r\n` and `\r` as breaks like saphyr.
    line_starts: Vec<usize>,
    /// The last located place as `(line, column, byte offset)`. Events arrive mostly in source
    /// order, so walking on from here keeps long single-line documents linear.
    cursor: (usize, usize, usize),
}

impl<'text> Locator<'text> {
    fn new(text: &'text str) -> Self {
        let bytes = text.as_bytes();
        let mut line_starts = vec![0];
        for (index, byte) in bytes.iter().enumerate() {
            let is_break = match byte {
                b'\n' => true,
                b'\r' => bytes.get(index + 1) != Some(&b'\n'),
                _ => false,
            };
            if is_break {
                line_starts.push(index + 1);
            }
        }
        Locator {
            text,
            line_starts,
            // Line 0 never matches, so the first walk starts from a line start.
            cursor: (0, 0, 0),
        }
    }

    /// The byte offset where the line's break (or the text) ends the line.
    fn line_end(&self, line: usize) -> usize {
        let bytes = self.text.as_bytes();
        match self.line_starts.get(line) {
            Some(&next_start) if bytes[..next_start].ends_with(b"\r\n") => next_start - 2,
            Some(&next_start) => next_start - 1,
            None => bytes.len(),
        }
    }

    fn locate(&mut self, marker: Marker) -> Position {
        let line = marker.line().max(1);
        if let Some(&line_start) = self.line_starts.get(line - 1) {
            let (offset, _) = self.walk_to(line, line_start, marker.col());
            return Position {
                line,
                column: marker.col() + 1,
                offset,
            };
        }
        // saphyr places some end-of-file errors on a line after the last one; use the real end.
        let last_line = self.line_starts.len();
        let last_start = self.line_starts.last().copied().unwrap_or(0);
        let (offset, walked) = self.walk_to(last_line, last_start, usize::MAX);
        Position {
            line: last_line,
            column: walked + 1,
            offset,
        }
    }

    /// The byte offset `column` characters into the line (or of its end, if it is shorter), and
    /// the number of characters actually walked.
    fn walk_to(&mut self, line: usize, line_start: usize, column: usize) -> (usize, usize) {
        let (cursor_line, cursor_column, cursor_offset) = self.cursor;
        let (mut walked, mut offset) = if cursor_line == line && cursor_column <= column {
            (cursor_column, cursor_offset)
        } else {
            // saphyr does not count byte order marks at the start of a line as columns.
            let rest = self.text.get(line_start..).unwrap_or("");
            let marks = rest.len() - rest.trim_start_matches('\u{feff}').len();
            (0, line_start + marks)
        };
        // Where the rest up to the column is ASCII, a character is a byte: the column is found
        // by arithmetic (clamped to the line's end, where the walk stops at the break) instead
        // of character by character, which was a twentieth of reading ITTW.
        let end = offset
            .saturating_add(column - walked)
            .min(self.line_end(line));
        if self
            .text
            .as_bytes()
            .get(offset..end)
            .is_some_and(<[u8]>::is_ascii)
        {
            (walked, offset) = (walked + (end - offset), end);
        } else {
            (offset, walked) = walk_characters(self.text, offset, walked, column);
        }
        self.cursor = (line, walked, offset);
        (offset, walked)
    }
}

/// From `offset` (`walked` characters into its line), the offset `column` characters into the
/// line, or of its end if it is shorter, and the number of characters walked.
fn walk_characters(
    text: &str,
    mut offset: usize,
    mut walked: usize,
    column: usize,
) -> (usize, usize) {
    for character in text.get(offset..).unwrap_or("").chars() {
        if walked == column || character == '\n' || character == '\r' {
            break;
        }
        offset += character.len_utf8();
        walked += 1;
    }
    (offset, walked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::{Duration, Instant};

    fn read(text: &str) -> Document {
        match parse(text, &YamlLimits::default()) {
            Ok(document) => document,
            Err(errors) => panic!("unexpected errors for {text:?}: {errors:#?}"),
        }
    }

    fn value(text: &str) -> Value {
        read(text).value
    }

    fn errors(text: &str) -> Vec<YamlError> {
        errors_with(text, &YamlLimits::default())
    }

    fn errors_with(text: &str, limits: &YamlLimits) -> Vec<YamlError> {
        match parse(text, limits) {
            Ok(document) => panic!("expected errors for {text:?}, got {:?}", document.value),
            Err(errors) => errors,
        }
    }

    fn at(line: usize, column: usize, offset: usize) -> Position {
        Position {
            line,
            column,
            offset,
        }
    }

    #[test]
    fn scalars_follow_the_yaml_1_2_core_schema() {
        let text = "[on, yes, no, off, y, true, True, TRUE, false, FALSE, null, ~, Null, NULL, '',\
                    42, -7, +3, 0x1F, 0o17, -0x10, 18446744073709551615, 1.5, 1e3, -.5, hello]";
        let expected = json!([
            "on",
            "yes",
            "no",
            "off",
            "y",
            true,
            true,
            true,
            false,
            false,
            null,
            null,
            null,
            null,
            "",
            42,
            -7,
            3,
            31,
            15,
            -16,
            18_446_744_073_709_551_615_u64,
            1.5,
            1000.0,
            -0.5,
            "hello"
        ]);
        assert_eq!(value(text), expected);
        assert_eq!(value("key:\n"), json!({"key": null}));
    }

    #[test]
    fn quoted_and_block_scalars_are_always_strings() {
        let text = "a: 'true'\nb: \"1\"\nc: ''\nd: |\n  null\ne: >\n  7\n";
        let expected = json!({"a": "true", "b": "1", "c": "", "d": "null\n", "e": "7\n"});
        assert_eq!(value(text), expected);
    }

    #[test]
    fn unrepresentable_numbers_are_errors() {
        for text in [".inf", "-.inf", ".nan", "1e999"] {
            let found = errors(&format!("a: {text}"));
            assert_eq!(found.len(), 1, "{text}");
            assert!(
                found[0].message.contains("not representable in JSON"),
                "{text}"
            );
            assert_eq!(found[0].position, at(1, 4, 3));
        }
        for text in [
            "18446744073709551616",
            "-9223372036854775809",
            "0x1ffffffffffffffff",
        ] {
            assert!(errors(text)[0].message.contains("out of range"), "{text}");
        }
        assert_eq!(value("-9223372036854775808"), json!(i64::MIN));
    }

    #[test]
    fn explicit_tags_force_the_type_or_fail() {
        let text = "[!!str 1, !!str true, !!int '7', !!float 3, !!bool 'false', !!null '']";
        assert_eq!(value(text), json!(["1", "true", 7, 3.0, false, null]));
        let found = errors("a: !!int abc\nb: !!bool yes\nc: !foo x\nd: !!binary x\ne: !!seq {}");
        let messages: Vec<&str> = found.iter().map(|error| error.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "`abc` is not a valid !!int value",
                "`yes` is not a valid !!bool value",
                "unsupported tag `!foo`",
                "unsupported tag `!!binary`",
                "unsupported tag `!!seq`",
            ]
        );
        assert_eq!(found[2].position, at(3, 4, 30));
    }

    #[test]
    fn keys_are_the_source_text_of_scalars() {
        let text = "1: a\ntrue: b\nnull: c\n~: d\n'x y': e\n";
        let expected = json!({"1": "a", "true": "b", "null": "c", "~": "d", "x y": "e"});
        assert_eq!(value(text), expected);
    }

    #[test]
    fn collection_keys_are_errors_at_the_key() {
        let found = errors("ok: 1\n? [a, b]\n: 2\n{c: d}: 3\n");
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].message,
            "a mapping key must be a single value, not a sequence"
        );
        assert_eq!(found[0].position, at(2, 3, 8));
        assert_eq!(
            found[1].message,
            "a mapping key must be a single value, not a mapping"
        );
        assert_eq!(found[1].position.line, 4);
    }

    #[test]
    fn duplicate_keys_are_reported_at_the_second_key_and_parsing_continues() {
        let text = "on: 1\noff: 2\nstates:\n  on: a\n  on: b\non: 3\n";
        let found = errors(text);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].message, "duplicate key `on`");
        assert_eq!(found[0].position, at(5, 3, 31));
        let help = "the first `on` is at line 4:3; remove one of them or merge them";
        assert_eq!(found[0].help.as_deref(), Some(help));
        assert_eq!(found[1].position, at(6, 1, 37));
    }

    #[test]
    fn anchors_and_aliases_are_rejected_but_reading_goes_on() {
        let found = errors("a: &x 1\nb: *x\nc: *missing\n");
        let messages: Vec<&str> = found.iter().map(|error| error.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "YAML anchors are not supported",
                "YAML aliases are not supported",
                "YAML aliases are not supported",
            ]
        );
        assert_eq!(found[1].position, at(2, 4, 11));
        assert_eq!(
            found[1].help.as_deref(),
            Some("write the value out in full")
        );
        assert_eq!(found[2].position, at(3, 4, 17));
    }

    #[test]
    fn nesting_at_the_limit_is_fine_and_one_deeper_is_an_error() {
        let limits = YamlLimits {
            max_depth: 3,
            ..YamlLimits::default()
        };
        assert!(parse("[[[1]]]", &limits).is_ok());
        let found = errors_with("a:\n  b:\n    - [x]\n", &limits);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].message, "nesting deeper than 3 levels");
        assert_eq!(found[0].position, at(3, 7, 14));
        assert!(
            found[0]
                .help
                .as_deref()
                .is_some_and(|help| help.contains('3'))
        );
    }

    #[test]
    fn hostile_nesting_is_rejected_quickly_without_overflowing_the_stack() {
        let depth = 100_000;
        for text in [
            "[".repeat(depth),
            "- ".repeat(depth) + "x",
            "{a: ".repeat(depth),
        ] {
            let started = Instant::now();
            let found = errors(&text);
            assert!(
                started.elapsed() < Duration::from_millis(100),
                "{:?}",
                started.elapsed()
            );
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].message, "nesting deeper than 64 levels");
            assert_eq!(found[0].position.line, 1);
        }
    }

    #[test]
    fn size_and_node_limits() {
        let limits = YamlLimits {
            max_bytes: 10,
            ..YamlLimits::default()
        };
        let found = errors_with("a: 1\nb: 2\nc: 3\n", &limits);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].message,
            "file is 15 bytes, larger than the limit of 10 bytes"
        );
        assert_eq!(found[0].position, at(1, 1, 0));
        let limits = YamlLimits {
            max_nodes: 4,
            ..YamlLimits::default()
        };
        let found = errors_with("[1, 2, 3, 4]", &limits);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].message, "more than 4 values in one file");
        assert_eq!(found[0].position, at(1, 11, 10));
    }

    #[test]
    fn values_nested_under_long_keys_hit_the_path_limit_quickly() {
        // Found by review while fuzzing: 200,000 values under a 400 KB key made 80 GB of paths.
        let text = format!("? {}\n: [{}0]\n", "k".repeat(400_000), "0,".repeat(290_000));
        let started = Instant::now();
        let found = errors(&text);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].message,
            "the paths to this file's values (the keys above each) total more than 67108864 bytes"
        );
        assert_eq!(found[0].position.line, 2);
        let limits = YamlLimits {
            max_path_bytes: 20,
            ..YamlLimits::default()
        };
        assert!(parse("abcdefgh: [1, 2]", &limits).is_ok());
        let found = errors_with("abcdefgh: [1, 2, 3]", &limits);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].position, at(1, 18, 17));
    }

    #[test]
    fn syntax_errors_and_truncated_files_are_located() {
        let found = errors("states:\n  idle:\n    on: {call: [a,");
        assert_eq!(found.len(), 1);
        assert!(found[0].message.starts_with("While parsing"), "{found:?}");
        // saphyr reports this on a line past the end; it is moved to the real end of the file.
        assert_eq!(found[0].position, at(3, 19, 34));
        assert!(found[0].help.is_some());

        let found = errors("a: 'unclosed");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].position, at(1, 4, 3));
        assert!(found[0].message.contains("end of stream"), "{found:?}");
        assert!(found[0].help.is_some());

        let found = errors("a: b: c\n");
        assert_eq!(
            found[0].message,
            "Mapping values are not allowed in this context"
        );
        assert_eq!(found[0].position, at(1, 5, 4));
    }

    #[test]
    fn only_one_document_and_not_an_empty_file() {
        let found = errors("a: 1\n---\nb: 2\n");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].message, "only one YAML document per file");
        assert_eq!(found[0].position, at(2, 1, 5));
        assert_eq!(value("---\na: 1\n"), json!({"a": 1}));

        for text in ["", "\n  \n", "# just a comment\n"] {
            let found = errors(text);
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].message, "the file is empty");
            assert_eq!(found[0].position, at(1, 1, 0));
            assert!(found[0].help.is_some());
        }
    }

    #[test]
    fn positions_of_entries_items_and_the_root() {
        let text = "states:\n  idle:\n    on:\n      call: [a, b]\n    empty:\n";
        let document = read(text);
        let positions = &document.positions;
        assert_eq!(
            positions.get(""),
            Some(NodePosition {
                value: at(1, 1, 0),
                key: None
            })
        );
        let idle = positions.get("/states/idle").unwrap();
        assert_eq!(idle.key, Some(at(2, 3, 10)));
        assert_eq!(idle.value.line, 3);
        let call = positions.get("/states/idle/on/call").unwrap();
        assert_eq!(call.key, Some(at(4, 7, 30)));
        assert_eq!(call.value, at(4, 13, 36));
        let item = positions.get("/states/idle/on/call/1").unwrap();
        assert_eq!(
            item,
            NodePosition {
                value: at(4, 17, 40),
                key: None
            }
        );
        // A missing value is null; its position is just after the key's colon.
        let empty = positions.get("/states/idle/empty").unwrap();
        assert_eq!(empty.key, Some(at(5, 5, 47)));
        assert_eq!(empty.value.line, 5);
    }

    #[test]
    fn positions_count_characters_and_bytes_separately() {
        let text = "title: \"é → ü\"\nlist: [é→, target]\r\nnext: 1\r\n";
        let document = read(text);
        let target = document.positions.get("/list/1").unwrap().value;
        assert_eq!(target, at(2, 12, 33));
        assert_eq!(text.get(target.offset..target.offset + 6), Some("target"));
        let next = document.positions.get("/next").unwrap();
        assert_eq!(next.key, Some(at(3, 1, 42)));
        assert_eq!(
            text.get(next.value.offset..next.value.offset + 1),
            Some("1")
        );

        // A byte order mark is not a column, but it does take three bytes.
        let document = read("\u{feff}a: 1\n");
        let entry = document.positions.get("/a").unwrap();
        assert_eq!(entry.key, Some(at(1, 1, 3)));
        assert_eq!(entry.value, at(1, 4, 6));
    }

    #[test]
    fn columns_found_by_arithmetic_are_where_the_character_walk_finds_them() {
        let text =
            "a: 1\r\nbb: [x, y]\rccc:\n\n  - dddd\r\n\r\n  - \u{e9}e\n\u{feff}f: \u{2192}\nx";
        let mut locator = Locator::new(text);
        let lines = locator.line_starts.clone();
        for (index, &line_start) in lines.iter().enumerate() {
            let marks = if text[line_start..].starts_with('\u{feff}') {
                3
            } else {
                0
            };
            // Columns in order (the cursor carries on) and back to each from the start.
            for column in (0..12).chain((0..12).rev()) {
                assert_eq!(
                    locator.walk_to(index + 1, line_start, column),
                    walk_characters(text, line_start + marks, 0, column),
                    "line {}, column {column}",
                    index + 1
                );
            }
        }
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(escape_pointer_token("a/b~c"), "a~1b~0c");
        let document = read("a/b:\n  m~n: 1\n");
        assert_eq!(document.value, json!({"a/b": {"m~n": 1}}));
        assert!(document.positions.get("/a~1b/m~0n").is_some());
    }

    #[test]
    fn nearest_walks_up_to_an_ancestor_or_the_start() {
        let document = read("a:\n  b: 1\n");
        let b = document.positions.get("/a/b").unwrap();
        assert_eq!(document.positions.nearest("/a/b/c/d"), b);
        assert_eq!(document.positions.nearest("/zzz").value, at(1, 1, 0));
        let empty = Positions::default();
        assert_eq!(empty.nearest("/x").value, at(1, 1, 0));
        assert_eq!(empty.nearest("x").key, None);
    }

    #[test]
    fn random_and_truncated_input_never_panics() {
        let valid = "states:\n  idle:\n    on: {call: [a, 'b', \"c\\n\"], é: →}\n    - x\n\
                     list:\n  - &a 1\n  - *a\n  - !!int 3\n  - |\n    text\n";
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet: Vec<char> = "[]{}:-,?&*!|>'\"#%@`\\ \t\n\r\u{feff}a1.~é→"
            .chars()
            .collect();
        let limits = YamlLimits::default();
        for cut in (0..=valid.len()).filter(|&cut| valid.is_char_boundary(cut)) {
            let _ = parse(&valid[..cut], &limits);
        }
        for _ in 0..300 {
            let length = (next() % 40) as usize;
            let bytes: Vec<u8> = (0..length).map(|_| next() as u8).collect();
            let _ = parse(&String::from_utf8_lossy(&bytes), &limits);
            let text: String = (0..length)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let _ = parse(&text, &limits);
        }
    }
}
