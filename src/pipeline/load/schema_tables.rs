//! A JSON Schema compiled into tables of plain numbers: `build.rs` compiles the committed schemas (this file is included there too) and `schema_check` walks the tables.
//!
//! Reading the schema's JSON at run time cost more than the rest of `validate` (issue 29); the
//! tables are statics in the binary, with no pointers to relocate at start but the slices'.
//! Only the Draft 7 keywords the generated schemas use are compiled; any other keyword is
//! listed in `unread`, and a schema with one is left to the real validator.

use std::collections::HashMap;

use serde_json::Value;

/// No node: an absent `additionalProperties`, `items`, `if`, `then`, `else` or `$ref`.
pub const NONE: u32 = u32::MAX;

/// The JSON types, as bits of `Node::types`.
pub mod types {
    pub const NULL: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const OBJECT: u8 = 4;
    pub const ARRAY: u8 = 8;
    pub const STRING: u8 = 16;
    pub const NUMBER: u8 = 32;
    /// A number with no fractional part (Draft 7 counts `1.0`).
    pub const INTEGER: u8 = 64;
    pub const ANY: u8 = NULL | BOOLEAN | OBJECT | ARRAY | STRING | NUMBER | INTEGER;
}

/// A run of entries in one of the tables (or of bytes in the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: u32,
    pub length: u32,
}

impl Span {
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.length) as usize
    }
}

/// One schema. Its `Debug` form is the Rust expression `build.rs` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// A definition: the node it stands for (`$ref`, whose siblings Draft 7 ignores).
    pub reference: u32,
    /// The `false` schema.
    pub accepts_nothing: bool,
    pub types: u8,
    /// `const` or `enum` (strings only): a span of `strings`.
    pub values: Option<Span>,
    pub minimum: Option<i64>,
    pub maximum: Option<i64>,
    /// A span of `members`.
    pub properties: Span,
    pub additional: u32,
    /// A span of `strings`.
    pub required: Span,
    pub items: u32,
    /// Spans of `lists`.
    pub all_of: Span,
    pub any_of: Span,
    pub one_of: Span,
    pub condition: u32,
    pub then: u32,
    pub otherwise: u32,
}

const ANYTHING: Node = Node {
    reference: NONE,
    accepts_nothing: false,
    types: types::ANY,
    values: None,
    minimum: None,
    maximum: None,
    properties: Span {
        start: 0,
        length: 0,
    },
    additional: NONE,
    required: Span {
        start: 0,
        length: 0,
    },
    items: NONE,
    all_of: Span {
        start: 0,
        length: 0,
    },
    any_of: Span {
        start: 0,
        length: 0,
    },
    one_of: Span {
        start: 0,
        length: 0,
    },
    condition: NONE,
    then: NONE,
    otherwise: NONE,
};

/// A property's name (a span of the text) and its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub name: Span,
    pub node: u32,
}

/// The compiled schema, borrowed: from the binary's statics or from a `Compiled`.
#[derive(Debug, Clone, Copy)]
pub struct Tables<'a> {
    pub root: u32,
    pub nodes: &'a [Node],
    pub members: &'a [Member],
    /// Node numbers of `allOf`, `anyOf` and `oneOf`.
    pub lists: &'a [u32],
    /// Spans of the text: property names that are required, allowed values.
    pub strings: &'a [Span],
    pub text: &'a str,
    /// Where the schema has a keyword the tables do not hold.
    pub unread: &'a [&'a str],
}

/// A schema compiled, owned.
#[derive(Debug, Default)]
pub struct Compiled {
    root: u32,
    nodes: Vec<Node>,
    members: Vec<Member>,
    lists: Vec<u32>,
    strings: Vec<Span>,
    text: String,
    unread: Vec<String>,
    interned: HashMap<String, Span>,
    definitions: HashMap<String, u32>,
}

/// Keywords that say nothing about validity.
pub const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$comment",
    "title",
    "description",
    "markdownDescription",
    "default",
    "examples",
    "doNotSuggest",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Formats schemars writes for Rust's numbers: Draft 7 defines none of them, so a validator
/// ignores them (as `jsonschema` does). A format Draft 7 defines is checked there, and is
/// not compiled here.
const IGNORED_FORMATS: &[&str] = &[
    "uint8", "uint16", "uint32", "uint64", "uint", "int8", "int16", "int32", "int64", "int",
    "float", "double",
];

/// Compiles a draft-07 schema whose references are all `#/definitions/NAME`.
pub fn compile(schema: &Value) -> Compiled {
    let mut compiled = Compiled::default();
    let definitions = match schema.get("definitions") {
        Some(Value::Object(definitions)) => sorted(definitions),
        _ => Vec::new(),
    };
    // Each definition gets its number first, so a reference can be compiled before its target.
    for (name, _) in &definitions {
        let number = compiled.push(ANYTHING);
        compiled.definitions.insert(name.to_string(), number);
    }
    compiled.root = compiled.node(schema, "#");
    for (name, definition) in definitions {
        let body = compiled.node(definition, &format!("#/definitions/{name}"));
        let number = compiled.definitions[name.as_str()];
        compiled.nodes[number as usize] = Node {
            reference: body,
            ..ANYTHING
        };
    }
    compiled
}

impl Compiled {
    pub fn tables<'a>(&'a self, unread: &'a [&'a str]) -> Tables<'a> {
        Tables {
            root: self.root,
            nodes: &self.nodes,
            members: &self.members,
            lists: &self.lists,
            strings: &self.strings,
            text: &self.text,
            unread,
        }
    }

    pub fn unread(&self) -> &[String] {
        &self.unread
    }

    /// The tables as a Rust expression of type `Tables<'static>`.
    pub fn to_rust(&self) -> String {
        let rows = |items: Vec<String>| items.join(",\n");
        format!(
            "Tables {{\n root: {},\n nodes: &[\n{}\n ],\n members: &[\n{}\n ],\n lists: &{:?},\n \
             strings: &[\n{}\n ],\n text: {:?},\n unread: &{:?},\n}}\n",
            self.root,
            rows(self.nodes.iter().map(|node| format!("{node:?}")).collect()),
            rows(
                self.members
                    .iter()
                    .map(|member| format!("{member:?}"))
                    .collect()
            ),
            self.lists,
            rows(
                self.strings
                    .iter()
                    .map(|span| format!("{span:?}"))
                    .collect()
            ),
            self.text,
            self.unread,
        )
    }

    fn push(&mut self, node: Node) -> u32 {
        self.nodes.push(node);
        (self.nodes.len() - 1) as u32
    }

    fn intern(&mut self, text: &str) -> Span {
        if let Some(span) = self.interned.get(text) {
            return *span;
        }
        let span = Span {
            start: self.text.len() as u32,
            length: text.len() as u32,
        };
        self.text.push_str(text);
        self.interned.insert(text.to_string(), span);
        span
    }

    /// Interned strings, as a span of `strings`; `None` when one of them is not a string.
    fn string_list(&mut self, values: &[Value]) -> Option<Span> {
        let spans: Option<Vec<Span>> = values
            .iter()
            .map(|value| value.as_str().map(|text| self.intern(text)))
            .collect();
        let spans = spans?;
        let start = self.strings.len() as u32;
        self.strings.extend(spans);
        Some(Span {
            start,
            length: self.strings.len() as u32 - start,
        })
    }

    fn node_list(&mut self, branches: &Value, at: &str) -> Span {
        let Some(branches) = branches.as_array().filter(|branches| !branches.is_empty()) else {
            self.unread.push(format!("{at}: not a list of schemas"));
            return Span::default();
        };
        let numbers: Vec<u32> = branches
            .iter()
            .enumerate()
            .map(|(index, branch)| self.node(branch, &format!("{at}/{index}")))
            .collect();
        let start = self.lists.len() as u32;
        self.lists.extend(numbers);
        Span {
            start,
            length: branches.len() as u32,
        }
    }

    fn node(&mut self, schema: &Value, at: &str) -> u32 {
        let object = match schema {
            Value::Bool(true) => return self.push(ANYTHING),
            Value::Bool(false) => {
                return self.push(Node {
                    accepts_nothing: true,
                    ..ANYTHING
                });
            }
            Value::Object(object) => object,
            _ => {
                self.unread
                    .push(format!("{at}: neither an object nor a boolean"));
                return self.push(ANYTHING);
            }
        };
        if let Some(reference) = object.get("$ref") {
            // Draft 7 ignores every keyword beside `$ref`.
            let target = reference
                .as_str()
                .and_then(|reference| reference.strip_prefix("#/definitions/"))
                .and_then(|name| self.definitions.get(name).copied());
            return target.unwrap_or_else(|| {
                self.unread
                    .push(format!("{at}/$ref: not a known `#/definitions/NAME`"));
                self.push(ANYTHING)
            });
        }
        let mut node = ANYTHING;
        for (keyword, argument) in sorted(object) {
            let here = format!("{at}/{keyword}");
            match keyword.as_str() {
                "type" => match type_bits(argument) {
                    Some(bits) => node.types = bits,
                    None => self.unread.push(format!("{here}: {argument}")),
                },
                "enum" | "const" => {
                    let values = match argument {
                        Value::Array(values) if keyword == "enum" => values.as_slice(),
                        _ if keyword == "const" => std::slice::from_ref(argument),
                        _ => &[],
                    };
                    match self.string_list(values) {
                        Some(span) if node.values.is_none() => node.values = Some(span),
                        _ => self.unread.push(format!("{here}: not strings only")),
                    }
                }
                "minimum" | "maximum" => match argument.as_i64() {
                    Some(limit) if keyword == "minimum" => node.minimum = Some(limit),
                    Some(limit) => node.maximum = Some(limit),
                    None => self.unread.push(format!("{here}: not an integer")),
                },
                "format" => {
                    if !argument
                        .as_str()
                        .is_some_and(|format| IGNORED_FORMATS.contains(&format))
                    {
                        self.unread.push(format!("{here}: {argument}"));
                    }
                }
                "required" => match argument
                    .as_array()
                    .and_then(|names| self.string_list(names))
                {
                    Some(span) => node.required = span,
                    None => self.unread.push(format!("{here}: not a list of names")),
                },
                "properties" => {
                    let Value::Object(properties) = argument else {
                        self.unread.push(format!("{here}: not a mapping"));
                        continue;
                    };
                    let members: Vec<Member> = sorted(properties)
                        .into_iter()
                        .map(|(name, property)| Member {
                            node: self.node(property, &format!("{here}/{name}")),
                            name: self.intern(name),
                        })
                        .collect();
                    let start = self.members.len() as u32;
                    self.members.extend(members);
                    node.properties = Span {
                        start,
                        length: properties.len() as u32,
                    };
                }
                "additionalProperties" => node.additional = self.node(argument, &here),
                "items" if !argument.is_array() => node.items = self.node(argument, &here),
                "allOf" => node.all_of = self.node_list(argument, &here),
                "anyOf" => node.any_of = self.node_list(argument, &here),
                "oneOf" => node.one_of = self.node_list(argument, &here),
                "if" => node.condition = self.node(argument, &here),
                "then" => node.then = self.node(argument, &here),
                "else" => node.otherwise = self.node(argument, &here),
                // Compiled before the root's other keywords.
                "definitions" if at == "#" => {}
                other if ANNOTATIONS.contains(&other) => {}
                _ => self.unread.push(here),
            }
        }
        self.push(node)
    }
}

/// A mapping's members by name: the tables are the same whether `serde_json` keeps the order
/// of the file (as the crate's does) or sorts (as `build.rs`'s does).
fn sorted(object: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut members: Vec<_> = object.iter().collect();
    members.sort_by_key(|(name, _)| *name);
    members
}

fn type_bits(argument: &Value) -> Option<u8> {
    let names = match argument {
        Value::String(_) => std::slice::from_ref(argument),
        Value::Array(names) => names.as_slice(),
        _ => return None,
    };
    names.iter().try_fold(0, |bits, name| {
        Some(
            bits | match name.as_str()? {
                "null" => types::NULL,
                "boolean" => types::BOOLEAN,
                "object" => types::OBJECT,
                "array" => types::ARRAY,
                "string" => types::STRING,
                "number" => types::NUMBER | types::INTEGER,
                "integer" => types::INTEGER,
                _ => return None,
            },
        )
    })
}
