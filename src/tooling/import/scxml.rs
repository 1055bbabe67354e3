//! SCXML documents converted into protocol values, element by element, every problem located.

mod invoke;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use roxmltree::{Document, Node, NodeId};
use serde_json::{Map, Value};

use super::ImportError;
use super::ecmascript::{self, LiteralError, Scope};
use super::finalize::{self, Finalizer};
use crate::base::model::Duration;

/// The SCXML namespace. Elements without a namespace are read as SCXML too; elements and
/// attributes of other namespaces (editor metadata and the like) carry no semantics and are
/// skipped.
const SCXML_NAMESPACE: &str = "http://www.w3.org/2005/07/scxml";

/// How deeply elements may nest: the conversion recurses per level, and the protocol format
/// allows 64 levels of YAML nesting anyway.
const MAX_DEPTH: usize = 64;

/// The most XML nodes read, so a huge document fails early instead of exhausting memory.
const MAX_NODES: u32 = 1_000_000;

/// The most problems reported for one document: past them the rest are counted, not located,
/// so a document of 20,000 bad attributes costs neither 20,000 scans for a position nor
/// 20,000 copies of its longest line.
const MAX_ERRORS: usize = 100;

/// The most attributes one element may have: the XML parser compares each attribute with every
/// earlier one of its element (for duplicates), so 150,000 attributes on one element would take
/// minutes. SCXML elements have at most a handful, editor metadata a few more.
const MAX_ATTRIBUTES: usize = 256;

/// The protocol id when `<scxml>` has no `name`.
const DEFAULT_ID: &str = "imported";

/// `type` values of `<send>` that mean SCXML's own event processor.
const SCXML_EVENT_PROCESSOR: [&str; 2] =
    ["http://www.w3.org/TR/scxml/#SCXMLEventProcessor", "scxml"];

/// Every element of the SCXML vocabulary, to tell a misplaced element from an unknown one.
const SCXML_ELEMENTS: [&str; 24] = [
    "scxml",
    "state",
    "parallel",
    "transition",
    "initial",
    "final",
    "onentry",
    "onexit",
    "history",
    "raise",
    "if",
    "elseif",
    "else",
    "foreach",
    "log",
    "datamodel",
    "data",
    "assign",
    "donedata",
    "content",
    "param",
    "script",
    "send",
    "cancel",
];

/// Names a context variable cannot take (besides CEL's reserved words): the engine's own, and
/// SCXML's system variables, which expressions read specially.
const RESERVED_DATA_NAMES: [&str; 9] = [
    "event",
    "In",
    "int",
    "string",
    "_event",
    "_sessionid",
    "_name",
    "_ioprocessors",
    "_x",
];

/// A converted document together with the child documents its `<invoke>`s run.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The parent's file name: the imported file's stem with `.yaml`.
    pub file_name: String,
    pub protocol: Value,
    /// Each child protocol as (file name, protocol): `<stem>.<invoke id>.yaml`, the stem being
    /// the invoking file's; a child's own children follow it.
    pub children: Vec<(String, Value)>,
}

/// Where a document comes from: it names the files of its children and resolves their `src`.
#[derive(Debug, Clone)]
pub(super) struct Source {
    /// The output file name without `.yaml`; children are `<stem>.<invoke id>.yaml`.
    stem: String,
    /// The directory `<invoke src>` paths are relative to; `None` when the text has no file.
    directory: Option<PathBuf>,
    /// The file of this document when it is not the imported one (it was read through `src`).
    file: Option<String>,
    /// The `src` files being converted above this document, to refuse a cycle.
    ancestry: Vec<PathBuf>,
    /// How many invocations deep this document is.
    level: usize,
}

/// What converting one document gives, besides its protocol.
struct Conversion {
    protocol: Value,
    children: Vec<(String, Value)>,
    /// The events the document sends to its parent (`#_parent`); `None` when one is computed.
    parent_events: Option<Vec<String>>,
    data_ids: HashSet<String>,
    errors: Vec<ImportError>,
}

/// Converts an SCXML document into a protocol (as JSON, keys in the protocol's usual order), or
/// returns every problem found, each naming its element and place. Child documents of
/// `<invoke>` are converted and checked but not returned, and `src` is refused: `import_file`
/// gives them.
pub fn scxml_to_protocol(text: &str) -> Result<Value, Vec<ImportError>> {
    let source = Source {
        stem: DEFAULT_ID.to_string(),
        directory: None,
        file: None,
        ancestry: Vec::new(),
        level: 0,
    };
    let conversion = convert_text(text, &source, &HashSet::new());
    if conversion.errors.is_empty() {
        Ok(conversion.protocol)
    } else {
        Err(conversion.errors)
    }
}

/// Converts the SCXML document `text` read from `path`, with the child documents its
/// `<invoke>`s run (inline, or from `src` files relative to `path`).
pub fn import_file(text: &str, path: &Path) -> Result<Imported, Vec<ImportError>> {
    let stem = path.file_stem().map_or_else(
        || DEFAULT_ID.to_string(),
        |stem| stem.to_string_lossy().into_owned(),
    );
    let source = Source {
        stem,
        directory: Some(path.parent().unwrap_or(Path::new("")).to_path_buf()),
        file: None,
        ancestry: vec![path.canonicalize().unwrap_or_else(|_| path.to_path_buf())],
        level: 0,
    };
    let conversion = convert_text(text, &source, &HashSet::new());
    if conversion.errors.is_empty() {
        Ok(Imported {
            file_name: format!("{}.yaml", source.stem),
            protocol: conversion.protocol,
            children: conversion.children,
        })
    } else {
        Err(conversion.errors)
    }
}

/// Parses and converts one document; `inputs` are the data ids its invoker sets.
fn convert_text(text: &str, source: &Source, inputs: &HashSet<String>) -> Conversion {
    let options = roxmltree::ParsingOptions {
        allow_dtd: false,
        nodes_limit: MAX_NODES,
        entity_resolver: None,
    };
    let parsed = match crowded_element(text) {
        Some(offset) => Err(ImportError {
            message: format!(
                "an element has more than {MAX_ATTRIBUTES} attributes, the most one may have"
            ),
            line: line_at(text, offset),
            column: column_at(text, offset),
            element: String::new(),
            file: source.file.clone(),
        }),
        None => Document::parse_with_options(text, options).map_err(|error| ImportError {
            message: format!("the document is not well-formed XML: {error}"),
            line: error.pos().row,
            column: error.pos().col,
            element: String::new(),
            file: source.file.clone(),
        }),
    };
    match parsed {
        Ok(document) => convert_element(&document, document.root_element(), source, inputs),
        Err(error) => Conversion {
            protocol: Value::Null,
            children: Vec::new(),
            parent_events: Some(Vec::new()),
            data_ids: HashSet::new(),
            errors: vec![error],
        },
    }
}

/// The offset of the first start tag with more than `MAX_ATTRIBUTES` attributes, found in one
/// pass before parsing: each `=` outside quotes inside a tag is an attribute. Comments, CDATA,
/// processing instructions and declarations are skipped; a malformed document is left for the
/// parser to report.
fn crowded_element(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let find = |from: usize, needle: &str| {
        text.get(from..)
            .and_then(|rest| rest.find(needle))
            .map(|found| from + found + needle.len())
    };
    let mut index = 0;
    while let Some(start) = text.get(index..).and_then(|rest| rest.find('<')) {
        let start = index + start;
        let rest = &text[start..];
        let skip_to = if rest.starts_with("<!--") {
            find(start, "-->")
        } else if rest.starts_with("<![CDATA[") {
            find(start, "]]>")
        } else if rest.starts_with("<?") {
            find(start, "?>")
        } else if rest.starts_with("<!") || rest.starts_with("</") {
            find(start, ">")
        } else {
            let mut attributes = 0;
            let mut quote = None;
            let mut end = None;
            for (offset, byte) in bytes[start..].iter().enumerate() {
                match (quote, byte) {
                    (Some(open), _) if open == *byte => quote = None,
                    (Some(_), _) => {}
                    (None, b'"' | b'\'') => quote = Some(*byte),
                    (None, b'=') => attributes += 1,
                    (None, b'>') => {
                        end = Some(start + offset + 1);
                        break;
                    }
                    _ => {}
                }
                if attributes > MAX_ATTRIBUTES {
                    return Some(start);
                }
            }
            end
        };
        index = skip_to?;
    }
    None
}

/// The 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> u32 {
    let newlines = text.as_bytes()[..offset]
        .iter()
        .filter(|byte| **byte == b'\n')
        .count();
    u32::try_from(newlines + 1).unwrap_or(u32::MAX)
}

/// The 1-based column (in characters) of a byte offset.
fn column_at(text: &str, offset: usize) -> u32 {
    let line_start = text[..offset].rfind('\n').map_or(0, |newline| newline + 1);
    u32::try_from(text[line_start..offset].chars().count() + 1).unwrap_or(u32::MAX)
}

/// Converts the document whose `<scxml>` is `root` (the whole document's, or one inline in an
/// `<invoke>`); `inputs` are the data ids its invoker sets.
fn convert_element<'a, 'input>(
    document: &'a Document<'input>,
    root: Node<'a, 'input>,
    source: &Source,
    inputs: &HashSet<String>,
) -> Conversion {
    let mut converter = Converter {
        document,
        root,
        source: source.clone(),
        inputs: inputs.clone(),
        errors: Vec::new(),
        unreported_errors: 0,
        state_ids: HashMap::new(),
        state_nodes: HashMap::new(),
        state_names: HashSet::new(),
        data_ids: HashSet::new(),
        loop_variables: Vec::new(),
        nested_data: None,
        invoke_ids: HashSet::new(),
        children: Vec::new(),
        parent_events: Some(Vec::new()),
        finalizers: Vec::new(),
        autoforwards: Vec::new(),
        child_events: Some(Vec::new()),
        input_declarations: Map::new(),
    };
    let protocol = converter.convert();
    if converter.unreported_errors > 0 {
        let (line, column) = converter.position(root.range().start);
        converter.errors.push(ImportError {
            message: format!(
                "{} more problems are not shown: only the first {MAX_ERRORS} are; fix these and import again",
                converter.unreported_errors
            ),
            line,
            column,
            element: String::new(),
            file: None,
        });
    }
    let mut errors = converter.errors;
    for error in &mut errors {
        if error.file.is_none() {
            error.file.clone_from(&source.file);
        }
    }
    Conversion {
        protocol,
        children: converter.children,
        parent_events: converter.parent_events,
        data_ids: converter.data_ids,
        errors,
    }
}

/// The local name of an SCXML element; `None` for text, comments, and foreign elements.
fn scxml_name<'input>(node: Node<'_, 'input>) -> Option<&'input str> {
    if !node.is_element() {
        return None;
    }
    let name = node.tag_name();
    match name.namespace() {
        None | Some(SCXML_NAMESPACE) => Some(name.name()),
        Some(_) => None,
    }
}

/// Whether a state id is one the protocol format accepts (the compiler's rule).
fn is_valid_state_id(id: &str) -> bool {
    id.chars()
        .next()
        .is_some_and(|first| first.is_alphabetic() || first == '_')
        && id
            .chars()
            .all(|character| character.is_alphanumeric() || character == '_' || character == '-')
}

/// Whether a data id can be a context variable that CEL reads by bare name.
fn data_name_problem(id: &str) -> Option<String> {
    let valid = id
        .chars()
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && id
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || character == '_');
    if !valid {
        return Some(format!(
            "the data id `{id}` cannot be a context variable: use ASCII letters, digits and `_`, starting with a letter or `_`"
        ));
    }
    if RESERVED_DATA_NAMES.contains(&id) || ecmascript::CEL_RESERVED.contains(&id) {
        return Some(format!(
            "the data id `{id}` is reserved in protocol expressions; rename it"
        ));
    }
    None
}

/// One event name token, as the compiler accepts it: dot-separated words of letters, digits,
/// `_` and `-`.
fn is_valid_event_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|token| {
            !token.is_empty()
                && token.chars().all(|character| {
                    character.is_alphanumeric() || character == '_' || character == '-'
                })
        })
}

/// An event descriptor: `*`, or an event name optionally ending in `.*`.
fn is_valid_descriptor(descriptor: &str) -> bool {
    descriptor == "*" || is_valid_event_name(descriptor.strip_suffix(".*").unwrap_or(descriptor))
}

/// Whether two descriptors can match one event: `*` matches everything, and a descriptor
/// matches its name and every name below it (`error` matches `error.exec`).
fn descriptors_overlap(left: &str, right: &str) -> bool {
    let normalize = |descriptor: &str| -> String {
        descriptor
            .strip_suffix(".*")
            .unwrap_or(descriptor)
            .to_string()
    };
    let (left, right) = (normalize(left), normalize(right));
    left == "*"
        || right == "*"
        || left == right
        || right.starts_with(&format!("{left}."))
        || left.starts_with(&format!("{right}."))
}

/// An SCXML delay (CSS2 time: `2s`, `500ms`, `2.5s`) in whole milliseconds.
fn parse_delay(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let (number, scale) = if let Some(number) = trimmed.strip_suffix("ms") {
        (number, 1u64)
    } else if let Some(number) = trimmed.strip_suffix('s') {
        (number, 1_000u64)
    } else {
        return Err(format!(
            "`{text}` is not a delay such as `2s`, `500ms` or `2.5s`"
        ));
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_only = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits_only(whole) || !digits_only(fraction) {
        return Err(format!(
            "`{text}` is not a delay such as `2s`, `500ms` or `2.5s`"
        ));
    }
    let too_long = || format!("the delay `{text}` is too long");
    let whole_value: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_long())?
    };
    let fraction = fraction.trim_end_matches('0');
    let denominator = u32::try_from(fraction.len())
        .ok()
        .and_then(|length| 10u64.checked_pow(length))
        .ok_or_else(|| format!("the delay `{text}` has too many decimals"))?;
    let fraction_value: u64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().map_err(|_| too_long())?
    };
    let fraction_scaled = fraction_value
        .checked_mul(scale)
        .ok_or_else(|| format!("the delay `{text}` has too many decimals"))?;
    if fraction_scaled % denominator != 0 {
        return Err(format!(
            "the delay `{text}` is not a whole number of milliseconds"
        ));
    }
    whole_value
        .checked_mul(scale)
        .and_then(|milliseconds| milliseconds.checked_add(fraction_scaled / denominator))
        .ok_or_else(too_long)
}

/// A literal value used where the protocol expects a template: `${` is written `$${` so it
/// stays text.
fn escape_templates(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(escape_template_text(&text)),
        Value::Array(items) => Value::Array(items.into_iter().map(escape_templates).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| (key, escape_templates(value)))
                .collect(),
        ),
        other => other,
    }
}

fn escape_template_text(text: &str) -> String {
    text.replace("${", "$${")
}

/// A template that is exactly one expression, so it keeps the value's type.
fn template(cel: &str) -> Value {
    Value::String(format!("${{{cel}}}"))
}

/// The value of inline content: a literal (JSON or ECMAScript) when it reads as one, otherwise
/// the text with its whitespace collapsed, as SCXML's ECMAScript data model does.
fn content_value(text: &str) -> Value {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Value::Null;
    }
    match ecmascript::to_literal(trimmed) {
        Ok(value) => value,
        Err(_) => Value::String(trimmed.split_whitespace().collect::<Vec<_>>().join(" ")),
    }
}

/// Whether an action evaluates anything that could fail at run time (and so skip the rest of
/// its block).
fn may_fail(action: &Value) -> bool {
    fn has_template(value: &Value) -> bool {
        match value {
            Value::String(text) => text.contains("${"),
            Value::Array(items) => items.iter().any(has_template),
            Value::Object(map) => map.values().any(has_template),
            _ => false,
        }
    }
    let Some(object) = action.as_object() else {
        return true;
    };
    let computed_delay = object
        .get("delay")
        .and_then(Value::as_str)
        .is_some_and(|delay| Duration::parse(delay).is_none());
    object.contains_key("assign")
        || object.contains_key("if")
        || object.contains_key("foreach")
        || computed_delay
        || has_template(action)
}

/// One targets value: a string for one id, a list for several.
fn targets_value(targets: Vec<String>) -> Value {
    match <[String; 1]>::try_from(targets) {
        Ok([one]) => Value::String(one),
        Err(many) => Value::Array(many.into_iter().map(Value::String).collect()),
    }
}

/// One value for a list of transitions: the transition itself when there is one.
fn transitions_value(mut transitions: Vec<Value>) -> Value {
    if transitions.len() == 1 {
        transitions.remove(0)
    } else {
        Value::Array(transitions)
    }
}

/// An `<transition>` with an event, converted.
struct EventTransition<'a, 'input> {
    node: Node<'a, 'input>,
    descriptors: Vec<String>,
    value: Value,
}

/// The actions of a state's `<onentry>` (or `<onexit>`) elements, concatenated.
#[derive(Default)]
struct Handlers {
    actions: Vec<Value>,
    /// The line of an earlier handler whose block may fail: a failure skips the rest of its
    /// block, so a later handler cannot be appended to it.
    fallible_line: Option<u32>,
}

struct Converter<'a, 'input> {
    document: &'a Document<'input>,
    /// The `<scxml>` element being converted.
    root: Node<'a, 'input>,
    source: Source,
    /// The data ids the invoking document sets (`<param>`, `namelist`): they become inputs.
    inputs: HashSet<String>,
    errors: Vec<ImportError>,
    /// Problems found past `MAX_ERRORS`, not reported one by one.
    unreported_errors: usize,
    /// The protocol id of every state element, as written or generated.
    state_ids: HashMap<NodeId, String>,
    state_nodes: HashMap<String, NodeId>,
    /// The keys of `state_nodes`, for `In('id')` checks.
    state_names: HashSet<String>,
    data_ids: HashSet<String>,
    /// A `<data>` inside a state (the first one), which late binding would initialise on entry.
    nested_data: Option<Node<'a, 'input>>,
    /// The ids of the document's `<invoke>`s, written or generated: `#_<id>` targets.
    invoke_ids: HashSet<String>,
    /// The child protocols converted so far, as (file name, protocol).
    children: Vec<(String, Value)>,
    /// The events sent to `#_parent`; `None` once one is computed (`eventexpr`).
    parent_events: Option<Vec<String>>,
    finalizers: Vec<Finalizer>,
    /// Invokes with `autoforward`, checked once every child is known.
    autoforwards: Vec<invoke::Autoforward>,
    /// The events the children send to this document; `None` once one computes its events.
    child_events: Option<Vec<String>>,
    /// The `inputs` section: the data the invoker sets, declared with their types.
    input_declarations: Map<String, Value>,
    /// The `item` and `index` variables of `<foreach>` that no `<data>` declares: SCXML
    /// declares them, the import makes them context variables, initially null.
    loop_variables: Vec<String>,
}

impl<'a, 'input> Converter<'a, 'input> {
    fn position(&self, offset: usize) -> (u32, u32) {
        let position = self.document.text_pos_at(offset);
        (position.row, position.col)
    }

    /// Whether the report is full: then the problem is counted instead of located.
    fn errors_full(&mut self) -> bool {
        let full = self.errors.len() >= MAX_ERRORS;
        self.unreported_errors += usize::from(full);
        full
    }

    fn error(&mut self, node: Node, message: impl Into<String>) {
        if self.errors_full() {
            return;
        }
        let (line, column) = self.position(node.range().start);
        self.errors.push(ImportError {
            message: message.into(),
            line,
            column,
            element: node.tag_name().name().to_string(),
            file: None,
        });
    }

    /// An error located at an attribute of `node` (at the element when it has no such
    /// attribute).
    fn attribute_error(&mut self, node: Node, attribute: &str, message: impl Into<String>) {
        if self.errors_full() {
            return;
        }
        let offset = node
            .attributes()
            .find(|candidate| candidate.namespace().is_none() && candidate.name() == attribute)
            .map_or(node.range().start, |found| found.range().start);
        let (line, column) = self.position(offset);
        self.errors.push(ImportError {
            message: message.into(),
            line,
            column,
            element: node.tag_name().name().to_string(),
            file: None,
        });
    }

    /// Refuses attributes outside `allowed` (attributes of other namespaces are skipped).
    fn check_attributes(&mut self, node: Node, allowed: &[&str]) {
        let element = node.tag_name().name();
        let refused: Vec<&str> = node
            .attributes()
            .filter(|attribute| attribute.namespace().is_none())
            .map(|attribute| attribute.name())
            .filter(|name| !allowed.contains(name))
            .collect();
        for name in refused {
            let message = match name {
                "src" => format!(
                    "`src` cannot be imported: a protocol does not load content from URLs; write the value in the <{element}> itself"
                ),
                _ => format!("the attribute `{name}` of <{element}> is not supported"),
            };
            self.attribute_error(node, name, message);
        }
    }

    /// The SCXML element children of `node`; stray text is reported.
    fn children(&mut self, node: Node<'a, 'input>) -> Vec<Node<'a, 'input>> {
        let mut elements = Vec::new();
        for child in node.children() {
            if child.is_text() {
                if child.text().is_some_and(|text| !text.trim().is_empty()) && !self.errors_full() {
                    let element = node.tag_name().name();
                    let (line, column) = self.position(child.range().start);
                    self.errors.push(ImportError {
                        message: format!("unexpected text inside <{element}>"),
                        line,
                        column,
                        element: element.to_string(),
                        file: None,
                    });
                }
            } else if scxml_name(child).is_some() {
                elements.push(child);
            }
        }
        elements
    }

    /// An element that takes no children.
    fn leaf(&mut self, node: Node<'a, 'input>) {
        let parent = node.tag_name().name();
        for child in self.children(node) {
            self.unexpected(child, parent);
        }
    }

    /// Reports an element where it cannot be imported, saying why.
    fn unexpected(&mut self, node: Node, parent: &str) {
        let name = node.tag_name().name();
        let message = match name {
            "script" => "<script> cannot be imported: a protocol runs no scripts; write the logic with actions (assign, if, raise, send)".to_string(),
            "invoke" => format!("<invoke> cannot appear inside <{parent}>: only a <state> or <parallel> runs child documents"),
            "finalize" => format!("<finalize> cannot appear inside <{parent}>: it belongs inside an <invoke>"),
            known if SCXML_ELEMENTS.contains(&known) => {
                format!("<{known}> cannot appear inside <{parent}>")
            }
            other => format!("unknown element <{other}>"),
        };
        self.error(node, message);
    }

    fn too_deep(&mut self, node: Node, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            self.error(
                node,
                format!("elements nest more than {MAX_DEPTH} levels deep here"),
            );
            return true;
        }
        false
    }

    fn convert(&mut self) -> Value {
        let root = self.root;
        if scxml_name(root) != Some("scxml") {
            self.error(root, "the root element must be <scxml>");
            return Value::Null;
        }
        self.collect_ids(root);
        self.check_attributes(
            root,
            &["initial", "name", "version", "datamodel", "binding"],
        );
        match root.attribute("datamodel") {
            None | Some("ecmascript" | "null") => {}
            Some(other) => self.attribute_error(
                root,
                "datamodel",
                format!(
                    "the `{other}` data model cannot be imported; only ECMAScript expressions are converted"
                ),
            ),
        }
        let mut protocol = Map::new();
        let name = root.attribute("name").unwrap_or("").trim();
        let id: String = name
            .chars()
            .map(|character| {
                if character.is_alphanumeric() || matches!(character, '_' | '-' | '.') {
                    character
                } else {
                    '_'
                }
            })
            .collect();
        protocol.insert(
            "id".into(),
            Value::String(if id.is_empty() {
                DEFAULT_ID.into()
            } else {
                id.clone()
            }),
        );
        if !name.is_empty() && id != name {
            protocol.insert("title".into(), Value::String(name.to_string()));
        }
        let mut context = Map::new();
        let mut states = Map::new();
        for child in self.children(root) {
            match scxml_name(child) {
                Some("state" | "parallel" | "final") => {
                    self.state(child, 1, &mut states, &mut context)
                }
                Some("datamodel") => self.datamodel(child, &mut context),
                _ => self.unexpected(child, "scxml"),
            }
        }
        if root.attribute("binding") == Some("late")
            && let Some(data) = self.nested_data
        {
            self.error(
                data,
                "late binding cannot be imported for data inside a state: protocol context is initialised when the run starts",
            );
        }
        if !self.input_declarations.is_empty() {
            let declarations = std::mem::take(&mut self.input_declarations);
            protocol.insert("inputs".into(), Value::Object(declarations));
        }
        for name in &self.loop_variables {
            if !context.contains_key(name) && !self.inputs.contains(name) {
                context.insert(name.clone(), Value::Null);
            }
        }
        if !context.is_empty() {
            protocol.insert("context".into(), Value::Object(context));
        }
        // SCXML documents rely on W3C's order of errors and its leniency, not on ours.
        protocol.insert("errors".into(), Value::String("scxml".into()));
        if let Some(targets) = self.initial_attribute(root) {
            protocol.insert("initial".into(), targets);
        }
        if states.is_empty() {
            self.error(root, "the document has no <state>, <parallel> or <final>");
        }
        self.check_autoforwards();
        for finalizer in std::mem::take(&mut self.finalizers) {
            if let Err(message) = finalize::apply(&finalizer, &mut states, &self.data_ids) {
                self.errors.push(ImportError {
                    message,
                    line: finalizer.line,
                    column: finalizer.column,
                    element: "finalize".to_string(),
                    file: None,
                });
            }
        }
        protocol.insert("states".into(), Value::Object(states));
        Value::Object(protocol)
    }

    /// Gives every state element its protocol id, and records data ids, before converting, so
    /// targets, `In('id')` and variables can be checked wherever they appear.
    fn collect_ids(&mut self, root: Node<'a, 'input>) {
        let mut anonymous = Vec::new();
        let mut loop_variables = Vec::new();
        // An explicit stack keeps a deep document from overflowing the call stack.
        let mut pending = vec![(root, 0usize)];
        while let Some((node, depth)) = pending.pop() {
            for child in node.children().rev() {
                match scxml_name(child) {
                    Some("state" | "parallel" | "final" | "history") if depth < MAX_DEPTH => {
                        pending.push((child, depth + 1));
                    }
                    Some("datamodel") => pending.push((child, depth + 1)),
                    _ => {}
                }
            }
            match scxml_name(node) {
                Some("state" | "parallel" | "final" | "history") => {
                    match node.attribute("id") {
                        Some(id) => self.register_state(node, id),
                        None => anonymous.push(node),
                    }
                    for invoke in node
                        .children()
                        .filter(|child| scxml_name(*child) == Some("invoke"))
                    {
                        if let Some(id) = invoke.attribute("id") {
                            self.invoke_ids.insert(id.to_string());
                        }
                    }
                    collect_loop_variables(node, &mut loop_variables);
                }
                Some("datamodel") => {
                    for data in node
                        .children()
                        .filter(|child| scxml_name(*child) == Some("data"))
                    {
                        self.register_data(data, depth > 1);
                    }
                }
                _ => {}
            }
        }
        // After every `<data>`, wherever it is: a loop over a declared variable declares nothing.
        for name in loop_variables {
            if data_name_problem(name).is_none() && self.data_ids.insert(name.to_string()) {
                self.loop_variables.push(name.to_string());
            }
        }
        // Ids are generated after every written id is known, so none is taken twice.
        let mut counters: HashMap<&str, usize> = HashMap::new();
        for node in anonymous {
            let kind = node.tag_name().name();
            let counter = counters.entry(kind).or_insert(0);
            let id = loop {
                *counter += 1;
                let candidate = format!("{kind}_{counter}");
                if !self.state_nodes.contains_key(&candidate) {
                    break candidate;
                }
            };
            self.state_nodes.insert(id.clone(), node.id());
            self.state_ids.insert(node.id(), id);
        }
        self.state_names = self.state_nodes.keys().cloned().collect();
    }

    fn register_state(&mut self, node: Node<'a, 'input>, id: &str) {
        if !is_valid_state_id(id) {
            self.attribute_error(
                node,
                "id",
                format!(
                    "the id `{id}` cannot be a protocol state id: use letters, digits, `_` and `-`, starting with a letter or `_`"
                ),
            );
            return;
        }
        if let Some(first) = self.state_nodes.get(id).copied() {
            let line = self
                .document
                .get_node(first)
                .map_or(0, |first| self.position(first.range().start).0);
            self.attribute_error(
                node,
                "id",
                format!("duplicate state id `{id}`; the first is on line {line}"),
            );
            return;
        }
        self.state_nodes.insert(id.to_string(), node.id());
        self.state_ids.insert(node.id(), id.to_string());
    }

    fn register_data(&mut self, node: Node<'a, 'input>, nested: bool) {
        let Some(id) = node.attribute("id") else {
            self.error(node, "<data> needs an `id`");
            return;
        };
        if let Some(problem) = data_name_problem(id) {
            self.attribute_error(node, "id", problem);
            return;
        }
        if !self.data_ids.insert(id.to_string()) {
            self.attribute_error(node, "id", format!("duplicate data id `{id}`"));
            return;
        }
        if nested && self.nested_data.is_none() {
            self.nested_data = Some(node);
        }
    }

    /// Converts an ECMAScript expression to CEL, reporting a failure at the attribute.
    fn cel(&mut self, node: Node, attribute: &str, text: &str) -> Option<String> {
        let scope = Scope {
            data: &self.data_ids,
            states: &self.state_names,
        };
        match ecmascript::to_cel(text, &scope) {
            Ok(cel) => Some(cel),
            Err(reason) => {
                let what = if attribute == "cond" {
                    "condition"
                } else {
                    "expression"
                };
                self.attribute_error(
                    node,
                    attribute,
                    format!("cannot convert the {what} `{text}` to CEL: {reason}"),
                );
                None
            }
        }
    }

    /// An expression whose value goes into a template value (event data, output): a literal is
    /// written as itself, anything else as `"${cel}"`, which keeps the value's type.
    fn value_expression(&mut self, node: Node, attribute: &str, text: &str) -> Option<Value> {
        match ecmascript::to_literal(text) {
            Ok(value) => Some(escape_templates(value)),
            Err(_) => self.cel(node, attribute, text).map(|cel| template(&cel)),
        }
    }

    /// A required attribute's value, reporting its absence.
    fn required<'n>(&mut self, node: Node<'n, 'input>, attribute: &str) -> Option<&'n str> {
        let value = node.attribute(attribute);
        if value.is_none() {
            let element = node.tag_name().name();
            self.error(node, format!("<{element}> needs a `{attribute}` attribute"));
        }
        value
    }

    /// Checks a list of target ids; each must name a state, inside `container` when given.
    fn targets(
        &mut self,
        node: Node<'a, 'input>,
        attribute: &str,
        text: &str,
        container: Option<Node<'a, 'input>>,
    ) -> Option<Vec<String>> {
        let ids: Vec<String> = text.split_whitespace().map(String::from).collect();
        if ids.is_empty() {
            self.attribute_error(node, attribute, format!("`{attribute}` names no state"));
            return None;
        }
        let mut ok = true;
        for id in &ids {
            let Some(target) = self.state_nodes.get(id).copied() else {
                self.attribute_error(node, attribute, format!("unknown state `{id}`"));
                ok = false;
                continue;
            };
            if let Some(container) = container {
                let inside = self.document.get_node(target).is_some_and(|target| {
                    target
                        .ancestors()
                        .skip(1)
                        .any(|ancestor| ancestor == container)
                });
                if !inside {
                    let element = container.tag_name().name();
                    self.attribute_error(
                        node,
                        attribute,
                        format!(
                            "`{id}` is outside this <{element}>: a default or initial target must be one of its descendants"
                        ),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(ids)
    }

    /// The `initial` attribute of `<scxml>` or `<state>`.
    fn initial_attribute(&mut self, node: Node<'a, 'input>) -> Option<Value> {
        let text = node.attribute("initial")?;
        let container = (scxml_name(node) == Some("state")).then_some(node);
        self.targets(node, "initial", text, container)
            .map(targets_value)
    }

    fn datamodel(&mut self, node: Node<'a, 'input>, context: &mut Map<String, Value>) {
        self.check_attributes(node, &[]);
        for child in self.children(node) {
            if scxml_name(child) == Some("data") {
                self.data(child, context);
            } else {
                self.unexpected(child, "datamodel");
            }
        }
    }

    fn data(&mut self, node: Node<'a, 'input>, context: &mut Map<String, Value>) {
        self.check_attributes(node, &["id", "expr"]);
        let Some(id) = node.attribute("id") else {
            return;
        };
        if !self.data_ids.contains(id) || context.contains_key(id) {
            // Already reported when the ids were collected.
            return;
        }
        let text = content_text(node);
        if let Some(element) = node.children().find(|child| child.is_element()) {
            self.error(
                element,
                "XML content in <data> cannot be imported; write the value as JSON",
            );
            return;
        }
        let value = match node.attribute("expr") {
            Some(_) if !text.trim().is_empty() => {
                self.error(node, "<data> has both `expr` and content; keep one");
                return;
            }
            Some(expr) => match ecmascript::to_literal(expr) {
                Ok(value) => value,
                Err(LiteralError::NotLiteral) => {
                    self.attribute_error(
                        node,
                        "expr",
                        format!(
                            "only literal data values can be imported: `{expr}` computes a value (write it as a literal, or assign it on entry)"
                        ),
                    );
                    return;
                }
                Err(LiteralError::Syntax(reason)) => {
                    self.attribute_error(
                        node,
                        "expr",
                        format!("cannot read the data value `{expr}`: {reason}"),
                    );
                    return;
                }
            },
            // ECMAScript's `undefined` has no JSON form; `null` is the nearest.
            None => content_value(&text),
        };
        if self.inputs.contains(id) {
            self.declare_input(node, id, value);
        } else {
            context.insert(id.to_string(), value);
        }
    }

    fn state(
        &mut self,
        node: Node<'a, 'input>,
        depth: usize,
        siblings: &mut Map<String, Value>,
        context: &mut Map<String, Value>,
    ) {
        if self.too_deep(node, depth) {
            return;
        }
        let Some(id) = self.state_ids.get(&node.id()).cloned() else {
            // Its id was refused when the ids were collected.
            return;
        };
        let kind = node.tag_name().name();
        match kind {
            "state" => self.check_attributes(node, &["id", "initial"]),
            _ => self.check_attributes(node, &["id"]),
        }
        let mut entry = Handlers::default();
        let mut exit = Handlers::default();
        let mut event_transitions = Vec::new();
        let mut eventless = Vec::new();
        let mut children = Map::new();
        let mut initial_element: Option<(Node, Option<Value>)> = None;
        let mut output: Option<Value> = None;
        let mut donedata_seen = false;
        let mut invokes = Vec::new();
        for child in self.children(node) {
            let name = scxml_name(child).unwrap_or_default();
            match (kind, name) {
                (_, "onentry") => self.handler(child, depth, &mut entry),
                (_, "onexit") => self.handler(child, depth, &mut exit),
                ("state" | "parallel", "transition") => match self.transition(child, depth) {
                    Some((Some(descriptors), value)) => event_transitions.push(EventTransition {
                        node: child,
                        descriptors,
                        value,
                    }),
                    Some((None, value)) => eventless.push(value),
                    None => {}
                },
                ("state", "initial") => {
                    if initial_element.is_some() {
                        self.error(child, "a state has at most one <initial>");
                    } else {
                        let targets = self.initial_element(child, node);
                        initial_element = Some((child, targets));
                    }
                }
                ("state" | "parallel", "state" | "parallel") | ("state", "final") => {
                    self.state(child, depth + 1, &mut children, context)
                }
                ("state" | "parallel", "history") => self.history(child, node, &mut children),
                ("state" | "parallel", "datamodel") => self.datamodel(child, context),
                ("state" | "parallel", "invoke") => {
                    if let Some(invoke) = self.invoke(child, &id, depth) {
                        invokes.push(invoke);
                    }
                }
                ("final", "donedata") => {
                    if donedata_seen {
                        self.error(child, "a final state has at most one <donedata>");
                    } else {
                        donedata_seen = true;
                        output = self.donedata(child);
                    }
                }
                _ => self.unexpected(child, kind),
            }
        }
        let has_child_states = children
            .values()
            .any(|child| child.get("type").and_then(Value::as_str) != Some("history"));
        let mut state = Map::new();
        match kind {
            "parallel" => {
                state.insert("type".into(), "parallel".into());
                if !has_child_states {
                    self.error(node, "a <parallel> needs child states (its regions)");
                }
            }
            "final" => {
                state.insert("type".into(), "final".into());
            }
            _ => {}
        }
        let initial = match (node.attribute("initial"), initial_element) {
            (Some(_), Some((element, _))) => {
                self.error(
                    element,
                    "a state has either an `initial` attribute or an <initial> element, not both",
                );
                None
            }
            (Some(_), None) => self.initial_attribute(node),
            (None, Some((_, targets))) => targets,
            (None, None) => None,
        };
        if let Some(initial) = initial {
            if has_child_states {
                state.insert("initial".into(), initial);
            } else {
                self.error(
                    node,
                    "an initial state is given, but the state has no child states",
                );
            }
        }
        if !entry.actions.is_empty() {
            state.insert("entry".into(), Value::Array(entry.actions));
        }
        if !exit.actions.is_empty() {
            state.insert("exit".into(), Value::Array(exit.actions));
        }
        if !children.is_empty() {
            state.insert("states".into(), Value::Object(children));
        }
        let on = self.event_transitions(event_transitions);
        if !on.is_empty() {
            state.insert("on".into(), Value::Object(on));
        }
        if !eventless.is_empty() {
            state.insert("always".into(), transitions_value(eventless));
        }
        if !invokes.is_empty() {
            state.insert("invoke".into(), Value::Array(invokes));
        }
        if let Some(output) = output {
            state.insert("output".into(), output);
        }
        siblings.insert(id, Value::Object(state));
    }

    /// Groups event transitions under `on` by their event attribute, refusing any document
    /// whose selection order the grouping would change.
    ///
    /// SCXML tries a state's transitions in document order; `on` is a mapping, so transitions
    /// with the same descriptors form one list, and the lists come in the order their first
    /// transition appears. A transition therefore moves ahead of every earlier transition of a
    /// later-starting group. That is harmless unless both can match one event: then the
    /// protocol would take a different transition, so the import fails instead.
    fn event_transitions(
        &mut self,
        transitions: Vec<EventTransition<'a, 'input>>,
    ) -> Map<String, Value> {
        let mut groups: IndexMap<String, Vec<usize>> = IndexMap::new();
        for (index, transition) in transitions.iter().enumerate() {
            groups
                .entry(transition.descriptors.join(" "))
                .or_default()
                .push(index);
        }
        let mut order = vec![0usize; transitions.len()];
        for (position, index) in groups.values().flatten().enumerate() {
            order[*index] = position;
        }
        for later in 0..transitions.len() {
            let overtaken = (0..later).find(|earlier| {
                order[*earlier] > order[later]
                    && transitions[*earlier].descriptors.iter().any(|left| {
                        transitions[later]
                            .descriptors
                            .iter()
                            .any(|right| descriptors_overlap(left, right))
                    })
            });
            if let Some(earlier) = overtaken {
                let earlier_line = self.position(transitions[earlier].node.range().start).0;
                let message = format!(
                    "transition order cannot be preserved: the protocol groups transitions by event under `on`, so this one (`{}`) would be tried before the one on line {earlier_line} (`{}`), and both can match the same event; reorder the transitions so those with the same `event` are adjacent",
                    transitions[later].descriptors.join(" "),
                    transitions[earlier].descriptors.join(" "),
                );
                self.error(transitions[later].node, message);
            }
        }
        let mut values: Vec<Option<Value>> = transitions
            .into_iter()
            .map(|transition| Some(transition.value))
            .collect();
        let mut on = Map::new();
        for (key, indices) in groups {
            let list = indices
                .iter()
                .filter_map(|index| values.get_mut(*index).and_then(Option::take))
                .collect();
            on.insert(key, transitions_value(list));
        }
        on
    }

    /// A `<transition>`: its descriptors (`None` when eventless) and its protocol form.
    fn transition(
        &mut self,
        node: Node<'a, 'input>,
        depth: usize,
    ) -> Option<(Option<Vec<String>>, Value)> {
        self.check_attributes(node, &["event", "cond", "target", "type"]);
        let mut ok = true;
        let descriptors = match node.attribute("event") {
            None => None,
            Some(event) => {
                let descriptors: Vec<String> = event.split_whitespace().map(String::from).collect();
                if descriptors.is_empty() {
                    self.attribute_error(
                        node,
                        "event",
                        "the `event` attribute is empty; remove it for an eventless transition",
                    );
                    ok = false;
                }
                for descriptor in descriptors
                    .iter()
                    .filter(|descriptor| !is_valid_descriptor(descriptor))
                {
                    self.attribute_error(
                        node,
                        "event",
                        format!(
                            "the event descriptor `{descriptor}` cannot be imported: use dot-separated words of letters, digits, `_` and `-`, `*`, or a name ending in `.*`"
                        ),
                    );
                    ok = false;
                }
                Some(descriptors)
            }
        };
        let guard = match node.attribute("cond") {
            Some(cond) => {
                let converted = self.cel(node, "cond", cond);
                ok &= converted.is_some();
                converted
            }
            None => None,
        };
        let targets = match node.attribute("target") {
            Some(text) => {
                let targets = self.targets(node, "target", text, None);
                ok &= targets.is_some();
                targets
            }
            None => None,
        };
        let internal = match node.attribute("type") {
            None | Some("external") => false,
            Some("internal") => true,
            Some(other) => {
                self.attribute_error(
                    node,
                    "type",
                    format!("`{other}` is not a transition type: use `internal` or `external`"),
                );
                ok = false;
                false
            }
        };
        let actions = self.block(node, depth + 1);
        if !ok {
            return None;
        }
        let value = match (&targets, &guard, internal, actions.is_empty()) {
            (Some(targets), None, false, true) if targets.len() == 1 => {
                Value::String(targets[0].clone())
            }
            _ => {
                let mut transition = Map::new();
                if let Some(targets) = targets {
                    transition.insert("target".into(), targets_value(targets));
                }
                if let Some(guard) = guard {
                    transition.insert("guard".into(), Value::String(guard));
                }
                if internal {
                    transition.insert("type".into(), "internal".into());
                }
                if !actions.is_empty() {
                    transition.insert("actions".into(), Value::Array(actions));
                }
                Value::Object(transition)
            }
        };
        Some((descriptors, value))
    }

    /// The one `<transition>` of an `<initial>` or `<history>`: targets only, inside `container`.
    fn default_transition(
        &mut self,
        node: Node<'a, 'input>,
        container: Node<'a, 'input>,
    ) -> Option<Vec<String>> {
        let parent = node.tag_name().name();
        let mut targets = None;
        let mut seen = false;
        for child in self.children(node) {
            if scxml_name(child) != Some("transition") {
                self.unexpected(child, parent);
                continue;
            }
            if seen {
                self.error(child, format!("<{parent}> has exactly one <transition>"));
                continue;
            }
            seen = true;
            self.check_attributes(child, &["target"]);
            if !self.children(child).is_empty() {
                self.error(
                    child,
                    format!(
                        "actions in the <transition> of <{parent}> cannot be imported: the protocol format has no place for them; move them into the target's <onentry>"
                    ),
                );
            }
            if let Some(text) = self.required(child, "target") {
                targets = self.targets(child, "target", text, Some(container));
            }
        }
        if !seen {
            self.error(node, format!("<{parent}> needs a <transition>"));
        }
        targets
    }

    fn initial_element(
        &mut self,
        node: Node<'a, 'input>,
        state: Node<'a, 'input>,
    ) -> Option<Value> {
        self.check_attributes(node, &[]);
        self.default_transition(node, state).map(targets_value)
    }

    fn history(
        &mut self,
        node: Node<'a, 'input>,
        parent: Node<'a, 'input>,
        siblings: &mut Map<String, Value>,
    ) {
        self.check_attributes(node, &["id", "type"]);
        let Some(id) = self.state_ids.get(&node.id()).cloned() else {
            return;
        };
        let depth = match node.attribute("type") {
            None | Some("shallow") => "shallow",
            Some("deep") => "deep",
            Some(other) => {
                self.attribute_error(
                    node,
                    "type",
                    format!("`{other}` is not a history type: use `shallow` or `deep`"),
                );
                "shallow"
            }
        };
        let mut history = Map::new();
        history.insert("type".into(), "history".into());
        history.insert("history".into(), depth.into());
        // SCXML requires the default transition; the protocol would otherwise fall back to the
        // parent's first child, which `default_transition` reports as missing.
        if let Some(targets) = self.default_transition(node, parent) {
            history.insert("target".into(), targets_value(targets));
        }
        siblings.insert(id, Value::Object(history));
    }

    /// The `output` of a final state.
    fn donedata(&mut self, node: Node<'a, 'input>) -> Option<Value> {
        self.check_attributes(node, &[]);
        let children = self.children(node);
        let (contents, params): (Vec<_>, Vec<_>) = children
            .into_iter()
            .partition(|child| scxml_name(*child) == Some("content"));
        if !contents.is_empty() && !params.is_empty() {
            self.error(
                node,
                "<donedata> has either one <content> or <param>s, not both",
            );
            return None;
        }
        if let Some(content) = contents.first() {
            for extra in contents.iter().skip(1) {
                self.error(*extra, "<donedata> has at most one <content>");
            }
            return self.content(*content);
        }
        self.params(&params, "donedata").map(Value::Object)
    }

    /// `<param>` elements as a mapping of templates.
    fn params(&mut self, params: &[Node<'a, 'input>], parent: &str) -> Option<Map<String, Value>> {
        let mut data = Map::new();
        let mut ok = true;
        for param in params {
            if scxml_name(*param) != Some("param") {
                self.unexpected(*param, parent);
                ok = false;
                continue;
            }
            self.check_attributes(*param, &["name", "expr", "location"]);
            self.leaf(*param);
            let Some(name) = self.required(*param, "name") else {
                ok = false;
                continue;
            };
            let value = match (param.attribute("expr"), param.attribute("location")) {
                (Some(expr), None) => self.value_expression(*param, "expr", expr),
                (None, Some(location)) => self
                    .cel(*param, "location", location)
                    .map(|cel| template(&cel)),
                _ => {
                    self.error(*param, "<param> needs exactly one of `expr` and `location`");
                    None
                }
            };
            let Some(value) = value else {
                ok = false;
                continue;
            };
            if data.contains_key(name) {
                self.attribute_error(
                    *param,
                    "name",
                    format!("the name `{name}` is given twice; protocol event data is a mapping"),
                );
                ok = false;
                continue;
            }
            data.insert(name.to_string(), value);
        }
        ok.then_some(data)
    }

    /// A `<content>`: an expression's value, or inline text read as a literal.
    fn content(&mut self, node: Node<'a, 'input>) -> Option<Value> {
        self.check_attributes(node, &["expr"]);
        if let Some(element) = node.children().find(|child| child.is_element()) {
            self.error(
                element,
                "XML content cannot be imported; write the value as JSON",
            );
            return None;
        }
        let text = content_text(node);
        match node.attribute("expr") {
            Some(_) if !text.trim().is_empty() => {
                self.error(node, "<content> has both `expr` and content; keep one");
                None
            }
            Some(expr) => self.value_expression(node, "expr", expr),
            None => Some(escape_templates(content_value(&text))),
        }
    }

    /// An `<onentry>` or `<onexit>`, appended to the state's handlers.
    fn handler(&mut self, node: Node<'a, 'input>, depth: usize, handlers: &mut Handlers) {
        self.check_attributes(node, &[]);
        let actions = self.block(node, depth + 1);
        if !actions.is_empty()
            && let Some(line) = handlers.fallible_line
        {
            let element = node.tag_name().name();
            self.error(
                node,
                format!(
                    "this <{element}> cannot be merged with the one on line {line}: SCXML runs each as its own block, so a failing action there does not stop this one, but the protocol has a single block; merge them in one <{element}>"
                ),
            );
        }
        if actions.iter().any(may_fail) {
            let (line, _) = self.position(node.range().start);
            handlers.fallible_line = Some(line);
        }
        handlers.actions.extend(actions);
    }

    /// The executable content inside `parent`, converted to actions.
    fn block(&mut self, parent: Node<'a, 'input>, depth: usize) -> Vec<Value> {
        let mut actions = Vec::new();
        for child in self.children(parent) {
            if let Some(action) = self.action(child, depth) {
                actions.push(action);
            }
        }
        actions
    }

    fn action(&mut self, node: Node<'a, 'input>, depth: usize) -> Option<Value> {
        if self.too_deep(node, depth) {
            return None;
        }
        let parent = node
            .parent_element()
            .map_or("scxml", |parent| parent.tag_name().name());
        match scxml_name(node) {
            Some("raise") => self.raise(node),
            Some("send") => self.send(node),
            Some("cancel") => self.cancel(node),
            Some("assign") => self.assign(node),
            Some("log") => self.log(node),
            Some("if") => self.conditional(node, depth),
            Some("foreach") => self.foreach(node, depth),
            _ => {
                self.unexpected(node, parent);
                None
            }
        }
    }

    /// An event name attribute: one name, no wildcard.
    fn event_name(&mut self, node: Node, attribute: &str, name: &str) -> bool {
        if is_valid_event_name(name) {
            return true;
        }
        self.attribute_error(
            node,
            attribute,
            format!(
                "`{name}` is not an event name the protocol accepts: use dot-separated words of letters, digits, `_` and `-`"
            ),
        );
        false
    }

    fn raise(&mut self, node: Node<'a, 'input>) -> Option<Value> {
        self.check_attributes(node, &["event"]);
        self.leaf(node);
        let event = self.required(node, "event")?;
        if !self.event_name(node, "event", event) {
            return None;
        }
        let mut action = Map::new();
        action.insert("raise".into(), event.into());
        Some(Value::Object(action))
    }

    fn send(&mut self, node: Node<'a, 'input>) -> Option<Value> {
        self.check_attributes(
            node,
            &[
                "event",
                "eventexpr",
                "target",
                "type",
                "id",
                "delay",
                "delayexpr",
                "namelist",
            ],
        );
        let mut ok = true;
        let mut internal = false;
        // `to`: a child's invoke id, or `parent`.
        let mut to: Option<String> = None;
        match node.attribute("target") {
            None => {}
            Some("#_internal") => internal = true,
            Some("#_parent") => to = Some("parent".to_string()),
            Some(other) => match other.strip_prefix("#_") {
                Some(id) if self.invoke_ids.contains(id) => to = Some(id.to_string()),
                _ => {
                    self.attribute_error(
                        node,
                        "target",
                        format!(
                            "the target `{other}` cannot be imported: a protocol sends to itself (no target), to `#_internal`, to `#_parent`, or to `#_<id>` naming an <invoke> of this document"
                        ),
                    );
                    ok = false;
                }
            },
        }
        if let Some(kind) = node.attribute("type")
            && !SCXML_EVENT_PROCESSOR.contains(&kind)
        {
            self.attribute_error(
                node,
                "type",
                format!(
                    "the event processor `{kind}` cannot be imported: only SCXML's own is supported"
                ),
            );
            ok = false;
        }
        let event = match (node.attribute("event"), node.attribute("eventexpr")) {
            (Some(event), None) => {
                ok &= self.event_name(node, "event", event);
                Some(Value::String(event.to_string()))
            }
            (None, Some(expr)) => self.cel(node, "eventexpr", expr).map(|cel| template(&cel)),
            _ => {
                self.error(node, "<send> needs exactly one of `event` and `eventexpr`");
                None
            }
        };
        let delay = match (node.attribute("delay"), node.attribute("delayexpr")) {
            (None, None) => None,
            // A zero delay is an immediate send, written without `delay`.
            (Some(delay), None) => match parse_delay(delay) {
                Ok(0) => None,
                Ok(milliseconds) => Some(Value::String(
                    Duration::from_milliseconds(milliseconds).to_string(),
                )),
                Err(reason) => {
                    self.attribute_error(node, "delay", reason);
                    ok = false;
                    None
                }
            },
            (None, Some(expr)) => match self.delay_expression(node, expr) {
                Some(delay) => delay,
                None => {
                    ok = false;
                    None
                }
            },
            (Some(_), Some(_)) => {
                self.error(node, "<send> has both `delay` and `delayexpr`; keep one");
                ok = false;
                None
            }
        };
        if internal && (node.attribute("delay").is_some() || node.attribute("delayexpr").is_some())
        {
            self.error(
                node,
                "a delayed send to `#_internal` cannot be imported: internal events are raised at once",
            );
            ok = false;
        }
        if to.is_some()
            && (node.attribute("delay").is_some() || node.attribute("delayexpr").is_some())
        {
            self.error(
                node,
                "a delayed send to a child or the parent cannot be imported: the engine delivers those at once; send the event to this document with the delay and forward it when it arrives",
            );
            ok = false;
        }
        if to.as_deref() == Some("parent") {
            match (node.attribute("event"), &mut self.parent_events) {
                (Some(event), Some(events)) => events.push(event.to_string()),
                (Some(_), None) => {}
                (None, _) => self.parent_events = None,
            }
        }
        let id = node.attribute("id");
        if internal && id.is_some() {
            self.attribute_error(
                node,
                "id",
                "an `id` on a send to `#_internal` cannot be imported: raised events carry no send id",
            );
            ok = false;
        }
        let data = self.send_data(node);
        let (Some(event), Some(data), true) = (event, data, ok) else {
            return None;
        };
        let mut action = Map::new();
        action.insert((if internal { "raise" } else { "send" }).into(), event);
        if let Some(data) = data {
            action.insert("data".into(), data);
        }
        if let Some(delay) = delay {
            action.insert("delay".into(), delay);
        }
        if let Some(id) = id {
            action.insert("id".into(), Value::String(escape_template_text(id)));
        }
        if let Some(to) = to {
            action.insert("to".into(), Value::String(to));
        }
        Some(Value::Object(action))
    }

    /// `delayexpr`: a string literal becomes a duration literal; a variable (or a member of
    /// one) is written as CEL, which the engine evaluates to milliseconds or a duration string
    /// such as `500ms` or `2s` (a fractional `2.5s` fails there with `error.execution`).
    /// Computed delays are refused: ECMAScript builds them with implicit conversions
    /// (`n * 100 + 'ms'`) that CEL does not make. `None` when it cannot be converted;
    /// `Some(None)` for a zero delay.
    fn delay_expression(&mut self, node: Node<'a, 'input>, expr: &str) -> Option<Option<Value>> {
        if let Ok(Value::String(text)) = ecmascript::to_literal(expr) {
            return match parse_delay(&text) {
                Ok(0) => Some(None),
                Ok(milliseconds) => Some(Some(Value::String(
                    Duration::from_milliseconds(milliseconds).to_string(),
                ))),
                Err(reason) => {
                    self.attribute_error(node, "delayexpr", reason);
                    None
                }
            };
        }
        if !ecmascript::is_path(expr) {
            self.attribute_error(
                node,
                "delayexpr",
                format!(
                    "the delay expression `{expr}` cannot be imported: only a string literal such as '2s' or a variable holding a duration string can be"
                ),
            );
            return None;
        }
        self.cel(node, "delayexpr", expr)
            .map(|cel| Some(Value::String(cel)))
    }

    /// The data of a `<send>`: `namelist` and `<param>`s as a mapping, or one `<content>`.
    /// `None` when something failed; `Some(None)` when there is no data.
    fn send_data(&mut self, node: Node<'a, 'input>) -> Option<Option<Value>> {
        let children = self.children(node);
        let (contents, params): (Vec<_>, Vec<_>) = children
            .into_iter()
            .partition(|child| scxml_name(*child) == Some("content"));
        let namelist: Vec<&str> = node
            .attribute("namelist")
            .map(|names| names.split_whitespace().collect())
            .unwrap_or_default();
        if let Some(content) = contents.first() {
            if !params.is_empty() || !namelist.is_empty() {
                self.error(
                    *content,
                    "<send> has either <content> or `namelist`/<param>, not both",
                );
                return None;
            }
            for extra in contents.iter().skip(1) {
                self.error(*extra, "<send> has at most one <content>");
            }
            return self.content(*content).map(Some);
        }
        let mut data = Map::new();
        let mut ok = true;
        for name in namelist {
            if !self.data_ids.contains(name) {
                self.attribute_error(
                    node,
                    "namelist",
                    format!("`{name}` in `namelist` is not the id of a <data> element"),
                );
                ok = false;
                continue;
            }
            data.insert(name.to_string(), template(name));
        }
        let params = self.params(&params, "send");
        let params = params?;
        for (name, value) in params {
            if data.contains_key(&name) {
                self.error(
                    node,
                    format!("`{name}` is given twice (in `namelist` and a <param>)"),
                );
                ok = false;
                continue;
            }
            data.insert(name, value);
        }
        if !ok {
            return None;
        }
        Some((!data.is_empty()).then_some(Value::Object(data)))
    }

    fn cancel(&mut self, node: Node<'a, 'input>) -> Option<Value> {
        self.check_attributes(node, &["sendid", "sendidexpr"]);
        self.leaf(node);
        let id = match (node.attribute("sendid"), node.attribute("sendidexpr")) {
            (Some(id), None) => Value::String(escape_template_text(id)),
            (None, Some(expr)) => template(&self.cel(node, "sendidexpr", expr)?),
            _ => {
                self.error(
                    node,
                    "<cancel> needs exactly one of `sendid` and `sendidexpr`",
                );
                return None;
            }
        };
        let mut action = Map::new();
        action.insert("cancel".into(), id);
        Some(Value::Object(action))
    }

    fn assign(&mut self, node: Node<'a, 'input>) -> Option<Value> {
        self.check_attributes(node, &["location", "expr"]);
        let location = self.required(node, "location")?.trim();
        // `a.b.c` is a path assignment: the variable `a`, then map keys.
        let variable = location.split('.').next().unwrap_or_default();
        let mut ok = true;
        if location.contains('[') {
            self.attribute_error(
                node,
                "location",
                format!(
                    "`{location}` indexes an array, and a protocol's path assignment names only map keys (`a.b`): assign the whole variable a new value built from the old one"
                ),
            );
            ok = false;
        } else if !self.data_ids.contains(variable) {
            self.attribute_error(
                node,
                "location",
                format!("`{variable}` is not the id of a <data> element"),
            );
            ok = false;
        } else if self.inputs.contains(variable) {
            self.attribute_error(
                node,
                "location",
                format!(
                    "`{variable}` is set by the invoking document (a <param> or `namelist` of its <invoke>), so it becomes a read-only input of this protocol and cannot be assigned; keep the value in another <data> and assign that"
                ),
            );
            ok = false;
        }
        if let Some(element) = node.children().find(|child| child.is_element()) {
            self.error(element, "XML content in <assign> cannot be imported");
            return None;
        }
        let text = content_text(node);
        let value = match node.attribute("expr") {
            Some(_) if !text.trim().is_empty() => {
                self.error(node, "<assign> has both `expr` and content; keep one");
                return None;
            }
            Some(expr) => self.cel(node, "expr", expr)?,
            None if text.trim().is_empty() => {
                self.error(node, "<assign> needs an `expr` or content");
                return None;
            }
            None => ecmascript::literal_to_cel(&content_value(&text)),
        };
        if !ok {
            return None;
        }
        let mut assignment = Map::new();
        assignment.insert(location.to_string(), Value::String(value));
        let mut action = Map::new();
        action.insert("assign".into(), Value::Object(assignment));
        Some(Value::Object(action))
    }

    fn log(&mut self, node: Node<'a, 'input>) -> Option<Value> {
        self.check_attributes(node, &["label", "expr"]);
        self.leaf(node);
        let label = node.attribute("label").map(escape_template_text);
        // A string literal is logged as its text; anything else through a template.
        let expression = match node.attribute("expr") {
            Some(expr) => Some(match ecmascript::to_literal(expr) {
                Ok(Value::String(text)) => escape_template_text(&text),
                _ => format!("${{{}}}", self.cel(node, "expr", expr)?),
            }),
            None => None,
        };
        let message = match (label, expression) {
            (Some(label), Some(text)) => format!("{label}: {text}"),
            (Some(label), None) => label,
            (None, Some(text)) => text,
            (None, None) => String::new(),
        };
        let mut action = Map::new();
        action.insert("log".into(), Value::String(message));
        Some(Value::Object(action))
    }

    /// `<foreach array item index>`: `foreach`, with the body under `do`.
    fn foreach(&mut self, node: Node<'a, 'input>, depth: usize) -> Option<Value> {
        self.check_attributes(node, &["array", "item", "index"]);
        let array = match self.required(node, "array") {
            Some(array) => self.cel(node, "array", array),
            None => None,
        };
        let item = self
            .required(node, "item")
            .and_then(|item| self.loop_variable(node, "item", item));
        let index = match node.attribute("index") {
            None => Some(None),
            Some(index) if Some(index) == node.attribute("item") => {
                self.attribute_error(
                    node,
                    "index",
                    format!("`{index}` is already the item: give the index a variable of its own"),
                );
                None
            }
            Some(index) => self.loop_variable(node, "index", index).map(Some),
        };
        let mut body = Vec::new();
        let mut ok = true;
        for child in self.children(node) {
            match self.action(child, depth + 1) {
                Some(action) => body.push(action),
                None => ok = false,
            }
        }
        let (array, item, index) = (array?, item?, index?);
        if !ok {
            return None;
        }
        let mut action = Map::new();
        action.insert("foreach".into(), Value::String(array));
        action.insert("item".into(), Value::String(item.to_string()));
        if let Some(index) = index {
            action.insert("index".into(), Value::String(index.to_string()));
        }
        if !body.is_empty() {
            action.insert("do".into(), Value::Array(body));
        }
        Some(Value::Object(action))
    }

    /// A `<foreach>` variable: a name a context variable can have, not set by the invoker.
    fn loop_variable<'n>(
        &mut self,
        node: Node<'a, 'input>,
        attribute: &str,
        name: &'n str,
    ) -> Option<&'n str> {
        if let Some(problem) = data_name_problem(name) {
            self.attribute_error(node, attribute, problem);
            return None;
        }
        if self.inputs.contains(name) {
            self.attribute_error(
                node,
                attribute,
                format!(
                    "`{name}` is set by the invoking document (a <param> or `namelist` of its <invoke>), so it becomes a read-only input of this protocol; loop over another variable"
                ),
            );
            return None;
        }
        Some(name)
    }

    /// `<if>` with its flat `<elseif/>` and `<else/>` markers split into branches.
    fn conditional(&mut self, node: Node<'a, 'input>, depth: usize) -> Option<Value> {
        self.check_attributes(node, &["cond"]);
        let mut ok = true;
        let first = match self.required(node, "cond") {
            Some(cond) => self.cel(node, "cond", cond),
            None => None,
        };
        ok &= first.is_some();
        // (condition, actions); the condition is `None` for `<else>`.
        let mut branches: Vec<(Option<String>, Vec<Value>)> =
            vec![(Some(first.unwrap_or_default()), Vec::new())];
        let mut seen_else = false;
        for child in self.children(node) {
            match scxml_name(child) {
                Some("elseif") => {
                    self.check_attributes(child, &["cond"]);
                    self.leaf(child);
                    if seen_else {
                        self.error(child, "<elseif> cannot follow <else>");
                        ok = false;
                    }
                    let condition = match self.required(child, "cond") {
                        Some(cond) => self.cel(child, "cond", cond),
                        None => None,
                    };
                    ok &= condition.is_some();
                    branches.push((Some(condition.unwrap_or_default()), Vec::new()));
                }
                Some("else") => {
                    self.check_attributes(child, &[]);
                    self.leaf(child);
                    if seen_else {
                        self.error(child, "<if> has at most one <else>");
                        ok = false;
                    }
                    seen_else = true;
                    branches.push((None, Vec::new()));
                }
                _ => match self.action(child, depth + 1) {
                    Some(action) => {
                        if let Some((_, actions)) = branches.last_mut() {
                            actions.push(action);
                        }
                    }
                    None => ok = false,
                },
            }
        }
        if !ok {
            return None;
        }
        let mut branches = branches.into_iter();
        let (condition, then) = branches.next()?;
        let mut action = Map::new();
        action.insert("if".into(), Value::String(condition.unwrap_or_default()));
        if !then.is_empty() {
            action.insert("then".into(), Value::Array(then));
        }
        let mut elif = Vec::new();
        let mut otherwise = Vec::new();
        for (condition, actions) in branches {
            match condition {
                Some(condition) => {
                    let mut branch = Map::new();
                    branch.insert("if".into(), Value::String(condition));
                    if !actions.is_empty() {
                        branch.insert("then".into(), Value::Array(actions));
                    }
                    elif.push(Value::Object(branch));
                }
                None => otherwise = actions,
            }
        }
        if !elif.is_empty() {
            action.insert("elif".into(), Value::Array(elif));
        }
        if !otherwise.is_empty() {
            action.insert("else".into(), Value::Array(otherwise));
        }
        Some(Value::Object(action))
    }
}

/// The `item` and `index` names of the `<foreach>` elements in the executable content of
/// `state` (not in its child states, which are visited on their own, nor in the documents of its
/// `<invoke>`s), so the whole walk stays linear.
fn collect_loop_variables<'a>(state: Node<'a, '_>, names: &mut Vec<&'a str>) {
    let is_content = |node: &Node| {
        !matches!(
            scxml_name(*node),
            Some("state" | "parallel" | "final" | "history" | "datamodel" | "invoke" | "content")
        )
    };
    let mut pending: Vec<Node> = state.children().filter(is_content).collect();
    while let Some(node) = pending.pop() {
        if scxml_name(node) == Some("foreach") {
            names.extend(node.attribute("item"));
            names.extend(node.attribute("index"));
        }
        pending.extend(node.children().filter(is_content));
    }
}

/// The text directly inside an element (comments skipped).
fn content_text(node: Node) -> String {
    node.children()
        .filter(|child| child.is_text())
        .filter_map(|child| child.text())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_scxml_delays() {
        assert_eq!(parse_delay("2s"), Ok(2_000));
        assert_eq!(parse_delay("500ms"), Ok(500));
        assert_eq!(parse_delay("2.5s"), Ok(2_500));
        assert_eq!(parse_delay(".5s"), Ok(500));
        assert_eq!(parse_delay("1.500s"), Ok(1_500));
        assert_eq!(parse_delay("0s"), Ok(0));
        assert_eq!(parse_delay(" 3s "), Ok(3_000));
        for wrong in [
            "",
            "s",
            "2",
            "2m",
            "1.5ms",
            "0.0001s",
            "-1s",
            "1e3ms",
            "a s",
            "99999999999999999999s",
        ] {
            assert!(parse_delay(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn finds_overlapping_descriptors() {
        assert!(descriptors_overlap("*", "a"));
        assert!(descriptors_overlap("a", "a.*"));
        assert!(descriptors_overlap("error", "error.exec"));
        assert!(descriptors_overlap("error.exec.*", "error"));
        assert!(!descriptors_overlap("error", "errors"));
        assert!(!descriptors_overlap("a.b", "a.c"));
    }
}
