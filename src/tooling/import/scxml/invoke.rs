//! `<invoke>` of an SCXML document: the child document converted into a protocol file of its own.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use roxmltree::Node;
use serde_json::{Map, Value};

use super::{Converter, Source, convert_element, convert_text, scxml_name, template};
use crate::tooling::import::finalize::Finalizer;

/// `type` values of `<invoke>` that mean an SCXML document (the short name and the spec's URI).
const SCXML_INVOKE_TYPES: [&str; 3] = [
    "scxml",
    "http://www.w3.org/TR/scxml/",
    "http://www.w3.org/TR/scxml",
];

/// How many invocations deep child documents may nest, inline or through `src`: each level is
/// converted by a call of its own.
const MAX_INVOKE_LEVELS: usize = 16;

/// The actions `<finalize>` may hold when imported: the protocol runs them with the
/// transition's actions, after the exited states' `exit` actions, so only data updates whose
/// order nothing else observes can move there (`finalize::apply` checks the rest).
const FINALIZE_ELEMENTS: [&str; 4] = ["assign", "if", "elseif", "else"];

/// An invoke with `autoforward`, whose child must not be able to take an event SCXML would
/// forward and the engine does not.
pub(super) struct Autoforward {
    invoke: String,
    /// The event descriptors of every transition of the child.
    descriptors: Vec<String>,
    line: u32,
    column: u32,
}

/// Where the child document of an `<invoke>` is.
enum ChildDocument<'a, 'input> {
    /// An `<scxml>` inside `<content>`.
    Inline(Node<'a, 'input>),
    /// A file named by `src`, resolved against the invoking file's directory.
    File(PathBuf),
}

/// Whether an id can name an invoke: the engine's rule for action ids.
fn is_invoke_id(id: &str) -> bool {
    id.chars()
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && id
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || matches!(character, '_' | '-'))
}

impl<'a, 'input> Converter<'a, 'input> {
    /// An `<invoke>` of the state `state_id`: the protocol's `invoke` entry. The child protocol
    /// goes into `children`, its `<finalize>` into `finalizers`.
    pub(super) fn invoke(
        &mut self,
        node: Node<'a, 'input>,
        state_id: &str,
        depth: usize,
    ) -> Option<Value> {
        self.check_attributes(
            node,
            &[
                "type",
                "id",
                "src",
                "autoforward",
                "namelist",
                "idlocation",
                "typeexpr",
                "srcexpr",
            ],
        );
        let mut ok = true;
        for (attribute, why) in [
            (
                "idlocation",
                "a protocol's invoke ids are written in the protocol, and no variable receives a generated one; give the <invoke> an `id`",
            ),
            (
                "typeexpr",
                "the kind of child must be known when importing; write `type=\"scxml\"` or leave `type` out",
            ),
            (
                "srcexpr",
                "the child document must be known when importing; write its path in `src`, or the document in <content>",
            ),
        ] {
            if node.attribute(attribute).is_some() {
                self.attribute_error(
                    node,
                    attribute,
                    format!("`{attribute}` cannot be imported: {why}"),
                );
                ok = false;
            }
        }
        if let Some(kind) = node.attribute("type")
            && !SCXML_INVOKE_TYPES.contains(&kind)
        {
            self.attribute_error(
                node,
                "type",
                format!(
                    "the invocation type `{kind}` cannot be imported: only SCXML documents (`type=\"scxml\"`) become child protocols"
                ),
            );
            ok = false;
        }
        let id = self.invoke_id(node, state_id)?;
        let autoforward = match node.attribute("autoforward") {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                self.attribute_error(
                    node,
                    "autoforward",
                    format!("`{other}` is not a value of `autoforward`: use `true` or `false`"),
                );
                ok = false;
                false
            }
        };
        let mut params = Vec::new();
        let mut contents = Vec::new();
        let mut finalizes = Vec::new();
        for child in self.children(node) {
            match scxml_name(child) {
                Some("param") => params.push(child),
                Some("content") => contents.push(child),
                Some("finalize") => finalizes.push(child),
                _ => {
                    self.unexpected(child, "invoke");
                    ok = false;
                }
            }
        }
        let inputs = self.invoke_inputs(node, &params);
        ok &= inputs.is_some();
        let document = self.child_document(node, &contents);
        let finalize_actions = match finalizes.as_slice() {
            [] => Vec::new(),
            [finalize, rest @ ..] => {
                for extra in rest {
                    self.error(*extra, "an <invoke> has at most one <finalize>");
                    ok = false;
                }
                self.finalize_actions(*finalize, depth)?
            }
        };
        let (Some(inputs), Some(document), true) = (inputs, document, ok) else {
            return None;
        };
        if self.source.level + 1 > MAX_INVOKE_LEVELS {
            self.error(
                node,
                format!("child documents nest more than {MAX_INVOKE_LEVELS} invocations deep here"),
            );
            return None;
        }
        let names: HashSet<String> = inputs.keys().cloned().collect();
        let mut source = Source {
            stem: format!("{}.{id}", self.source.stem),
            directory: self.source.directory.clone(),
            file: self.source.file.clone(),
            ancestry: self.source.ancestry.clone(),
            level: self.source.level + 1,
        };
        let conversion = match document {
            ChildDocument::Inline(root) => convert_element(self.document, root, &source, &names),
            ChildDocument::File(path) => {
                let text = self.read_child(node, &path)?;
                source.directory = Some(path.parent().unwrap_or(Path::new("")).to_path_buf());
                source.file = Some(path.display().to_string());
                source.ancestry.push(path);
                convert_text(&text, &source, &names)
            }
        };
        if !conversion.errors.is_empty() {
            self.errors.extend(conversion.errors);
            return None;
        }
        // SCXML drops a value for which the child has no <data>; the engine refuses an unknown
        // input, so the import asks for it to be removed rather than drop it unseen.
        for name in names
            .iter()
            .filter(|name| !conversion.data_ids.contains(*name))
        {
            let param = params
                .iter()
                .find(|param| param.attribute("name") == Some(name.as_str()));
            let message = format!(
                "the child document has no <data id=\"{name}\"> for this value: SCXML would ignore it; remove it"
            );
            match param {
                Some(param) => self.attribute_error(*param, "name", message),
                None => self.attribute_error(node, "namelist", message),
            }
        }
        if names.iter().any(|name| !conversion.data_ids.contains(name)) {
            return None;
        }
        if !finalize_actions.is_empty() {
            let (line, column) = self.position(finalizes[0].range().start);
            self.finalizers.push(Finalizer {
                state: state_id.to_string(),
                invoke: id.clone(),
                actions: finalize_actions,
                child_events: conversion.parent_events.clone(),
                line,
                column,
            });
        }
        match (&mut self.child_events, conversion.parent_events) {
            (Some(known), Some(events)) => known.extend(events),
            (known, _) => *known = None,
        }
        if autoforward {
            let mut descriptors = Vec::new();
            if let Some(states) = conversion.protocol.get("states") {
                collect_descriptors(states, &mut descriptors);
            }
            let (line, column) = self.position(node.range().start);
            self.autoforwards.push(Autoforward {
                invoke: id.clone(),
                descriptors,
                line,
                column,
            });
        }
        let file_name = format!("{}.yaml", source.stem);
        self.children.push((file_name.clone(), conversion.protocol));
        self.children.extend(conversion.children);
        let mut invoke = Map::new();
        invoke.insert("id".into(), Value::String(id));
        invoke.insert("protocol".into(), Value::String(file_name));
        if !inputs.is_empty() {
            invoke.insert("inputs".into(), Value::Object(inputs));
        }
        if autoforward {
            invoke.insert("autoforward".into(), Value::Bool(true));
        }
        Some(Value::Object(invoke))
    }

    /// The invoke's id: written, or generated when absent (SCXML generates one too, in a form
    /// of the platform's choosing, so no document depends on it).
    fn invoke_id(&mut self, node: Node<'a, 'input>, state_id: &str) -> Option<String> {
        let Some(id) = node.attribute("id") else {
            if node.attribute("idlocation").is_some() {
                return None;
            }
            let mut counter = 0;
            let id = loop {
                counter += 1;
                let candidate = format!("{}_invoke_{counter}", state_id.replace('-', "_"));
                let candidate = if is_invoke_id(&candidate) {
                    candidate
                } else {
                    format!("invoke_{counter}")
                };
                if !self.invoke_ids.contains(&candidate) {
                    break candidate;
                }
            };
            self.invoke_ids.insert(id.clone());
            return Some(id);
        };
        if !is_invoke_id(id) {
            self.attribute_error(
                node,
                "id",
                format!(
                    "the id `{id}` cannot be a protocol invoke id: use ASCII letters, digits, `_` and `-`, starting with a letter or `_`"
                ),
            );
            return None;
        }
        let file_name = format!("{}.{id}.yaml", self.source.stem);
        if self.children.iter().any(|(name, _)| *name == file_name) {
            self.attribute_error(node, "id", format!("duplicate invoke id `{id}`"));
            return None;
        }
        Some(id.to_string())
    }

    /// The child's inputs: `namelist` names and `<param>`s, each a data id of the child.
    fn invoke_inputs(
        &mut self,
        node: Node<'a, 'input>,
        params: &[Node<'a, 'input>],
    ) -> Option<Map<String, Value>> {
        let mut inputs = Map::new();
        let mut ok = true;
        for name in node
            .attribute("namelist")
            .map(|names| names.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            if self.data_ids.contains(name) {
                inputs.insert(name.to_string(), template(name));
            } else {
                self.attribute_error(
                    node,
                    "namelist",
                    format!("`{name}` in `namelist` is not the id of a <data> element"),
                );
                ok = false;
            }
        }
        for (name, value) in self.params(params, "invoke")? {
            if inputs.contains_key(&name) {
                self.error(
                    node,
                    format!("`{name}` is given twice (in `namelist` and a <param>)"),
                );
                ok = false;
                continue;
            }
            inputs.insert(name, value);
        }
        ok.then_some(inputs)
    }

    /// The child document: the `<scxml>` inside the one `<content>`, or the `src` file.
    fn child_document(
        &mut self,
        node: Node<'a, 'input>,
        contents: &[Node<'a, 'input>],
    ) -> Option<ChildDocument<'a, 'input>> {
        match (node.attribute("src"), contents) {
            (Some(_), [content, ..]) => {
                self.error(
                    *content,
                    "an <invoke> has either `src` or <content>, not both",
                );
                None
            }
            (None, []) => {
                self.error(
                    node,
                    "an <invoke> needs its child document: a `src` path, or a <content> holding an <scxml>",
                );
                None
            }
            (None, [content, rest @ ..]) => {
                for extra in rest {
                    self.error(*extra, "an <invoke> has at most one <content>");
                }
                self.inline_document(*content)
                    .filter(|_| rest.is_empty())
                    .map(ChildDocument::Inline)
            }
            (Some(src), []) => self.src_path(node, src).map(ChildDocument::File),
        }
    }

    /// The `<scxml>` element of an invoke's `<content>`.
    fn inline_document(&mut self, content: Node<'a, 'input>) -> Option<Node<'a, 'input>> {
        self.check_attributes(content, &[]);
        if content.attribute("expr").is_some() {
            self.attribute_error(
                content,
                "expr",
                "a computed child document cannot be imported: it must be known when importing; write the <scxml> inside <content>",
            );
            return None;
        }
        let elements: Vec<Node> = content
            .children()
            .filter(|child| child.is_element())
            .collect();
        let text = super::content_text(content);
        match elements.as_slice() {
            [root] if scxml_name(*root) == Some("scxml") && text.trim().is_empty() => Some(*root),
            _ => {
                self.error(
                    content,
                    "the <content> of an <invoke> must hold exactly one <scxml> document, and nothing else",
                );
                None
            }
        }
    }

    /// The file an `src` names, relative to the invoking document's directory.
    fn src_path(&mut self, node: Node<'a, 'input>, src: &str) -> Option<PathBuf> {
        let Some(directory) = self.source.directory.clone() else {
            self.attribute_error(
                node,
                "src",
                "`src` can only be imported from a file, whose directory the path is relative to",
            );
            return None;
        };
        let relative = src.strip_prefix("file:").unwrap_or(src);
        if relative.is_empty() || relative.contains("://") {
            self.attribute_error(
                node,
                "src",
                format!(
                    "`{src}` cannot be imported: `src` must be a file path relative to this document"
                ),
            );
            return None;
        }
        let path = directory.join(relative);
        let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
        if self.source.ancestry.contains(&canonical) {
            self.attribute_error(
                node,
                "src",
                format!(
                    "`{src}` is already being invoked above this document: a document cannot invoke itself, directly or through others"
                ),
            );
            return None;
        }
        Some(path)
    }

    fn read_child(&mut self, node: Node<'a, 'input>, path: &Path) -> Option<String> {
        match std::fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(error) => {
                self.attribute_error(
                    node,
                    "src",
                    format!("cannot read `{}`: {error}", path.display()),
                );
                None
            }
        }
    }

    /// The actions of a `<finalize>`, refusing any element but data updates.
    fn finalize_actions(&mut self, node: Node<'a, 'input>, depth: usize) -> Option<Vec<Value>> {
        self.check_attributes(node, &[]);
        let mut ok = true;
        for element in node.descendants().skip(1) {
            let Some(name) = scxml_name(element) else {
                continue;
            };
            if !FINALIZE_ELEMENTS.contains(&name) {
                self.error(
                    element,
                    format!(
                        "<{name}> in <finalize> cannot be imported: SCXML runs <finalize> before the states exit, but the protocol runs it with the transition's actions, after their `exit` actions; only <assign> and <if> can move there unchanged"
                    ),
                );
                ok = false;
            }
        }
        if !ok {
            return None;
        }
        let actions = self.block(node, depth + 1);
        Some(actions)
    }

    /// Refuses `autoforward` where the child could take an event SCXML forwards but the engine
    /// does not: the engine forwards the events from input and `send`, SCXML every external
    /// event, including the children's events and their `done.invoke.<id>`.
    pub(super) fn check_autoforwards(&mut self) {
        let mut unforwarded: Vec<String> = self
            .invoke_ids
            .iter()
            .map(|id| format!("done.invoke.{id}"))
            .collect();
        unforwarded.sort();
        let computed = self.child_events.is_none();
        unforwarded.extend(self.child_events.iter().flatten().cloned());
        for check in std::mem::take(&mut self.autoforwards) {
            let clash = check.descriptors.iter().find_map(|descriptor| {
                if computed {
                    return Some(format!(
                        "`{descriptor}` (a child computes the names of its events)"
                    ));
                }
                unforwarded
                    .iter()
                    .find(|event| crate::tooling::import::finalize::matches(descriptor, event))
                    .map(|event| format!("`{descriptor}`, which matches `{event}`"))
            });
            if let Some(clash) = clash {
                self.errors.push(crate::tooling::import::ImportError {
                    message: format!(
                        "`autoforward` of `{}` cannot be imported: SCXML forwards every external event, the engine only those from input and `send`, not those from children or their `done.invoke.<id>`, and the child has a transition on {clash}",
                        check.invoke
                    ),
                    line: check.line,
                    column: check.column,
                    element: "invoke".to_string(),
                    file: None,
                });
            }
        }
    }

    /// Declares a `<data>` the invoker sets as an input, typed by its initial value.
    pub(super) fn declare_input(&mut self, node: Node<'a, 'input>, id: &str, value: Value) {
        let kind = match &value {
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Array(_) => "list",
            Value::Null | Value::Object(_) => {
                self.error(
                    node,
                    format!(
                        "`{id}` is set by the invoking document, so it becomes an input, and inputs are typed: give the <data> an initial string, number, boolean or list so its type is known"
                    ),
                );
                return;
            }
        };
        let mut declaration = Map::new();
        declaration.insert("type".into(), Value::String(kind.into()));
        declaration.insert("default".into(), value);
        self.input_declarations
            .insert(id.to_string(), Value::Object(declaration));
    }
}

/// The event descriptors of every transition in a protocol's states.
fn collect_descriptors(states: &Value, descriptors: &mut Vec<String>) {
    for state in states
        .as_object()
        .into_iter()
        .flat_map(|states| states.values())
    {
        if let Some(on) = state.get("on").and_then(Value::as_object) {
            descriptors.extend(
                on.keys()
                    .flat_map(|key| key.split_whitespace().map(String::from)),
            );
        }
        if let Some(children) = state.get("states") {
            collect_descriptors(children, descriptors);
        }
    }
}
