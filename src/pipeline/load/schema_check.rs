//! A yes-or-no reading of a document against the schema's compiled tables, so the validator (costly to build) is built only for a document that fails.
//!
//! Building `jsonschema`'s validator for the protocol schema cost more than everything else
//! `validate` did (issue 29). Most documents a process reads are valid, and for them a walk of
//! the tables `build.rs` compiled from the committed schema answers the only question asked:
//! does it conform? A schema with a keyword the tables do not hold is answered `Unknown`, and
//! the caller asks the real validator. Only `Conforms` skips the validator: every error message
//! still comes from it.

use std::cell::Cell;
use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

use super::schema_tables::{NONE, Node, Span, Tables, types};

/// The answer of the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Conforms,
    Fails,
    /// The schema has a keyword the tables do not hold, or nests deeper than the walk goes.
    Unknown,
}

/// Whether `document` conforms to the schema compiled into `tables`.
pub fn check(tables: &Tables, document: &Value) -> Verdict {
    if !tables.unread.is_empty() {
        return Verdict::Unknown;
    }
    let walk = Walk {
        tables,
        visits: Cell::new(0),
    };
    match walk.conforms(tables.root, document, 0) {
        Some(true) => Verdict::Conforms,
        Some(false) => Verdict::Fails,
        None => Verdict::Unknown,
    }
}

/// How many schemas a walk of `document` reads (for the tests of the visit limit).
#[cfg(test)]
pub fn visits(tables: &Tables, document: &Value) -> usize {
    let walk = Walk {
        tables,
        visits: Cell::new(0),
    };
    walk.conforms(tables.root, document, 0);
    walk.visits.get()
}

/// How many schemas deep the walk goes before it gives the question to the validator: the
/// document's depth is bounded by the YAML reader, so this only stops references that go round
/// without reading any deeper into the document.
const DEPTH_LIMIT: usize = 512;

/// How many schemas the walk reads in all before it gives the question to the validator: a
/// choice inside a choice can make a walk read the same part of a document many times, and a
/// hostile document must not make that the cost of reading it. A valid ITTW reads 1,582.
const VISIT_LIMIT: usize = 2_000_000;

/// One walk of a document over the tables, with the count of schemas it read.
struct Walk<'a> {
    tables: &'a Tables<'a>,
    visits: Cell<usize>,
}

impl Walk<'_> {
    /// `None` past the depth limit or the visit limit.
    fn conforms(&self, number: u32, value: &Value, depth: usize) -> Option<bool> {
        let visits = self.visits.get() + 1;
        if depth > DEPTH_LIMIT || visits > VISIT_LIMIT {
            return None;
        }
        self.visits.set(visits);
        let node: &Node = &self.tables.nodes[number as usize];
        if node.reference != NONE {
            return self.conforms(node.reference, value, depth + 1);
        }
        if node.accepts_nothing || node.types & type_bits(value) == 0 {
            return Some(false);
        }
        if let Some(values) = node.values
            && !value
                .as_str()
                .is_some_and(|text| self.strings_of(values).any(|allowed| allowed == text))
        {
            return Some(false);
        }
        if let Value::Number(number) = value
            && !(node
                .minimum
                .is_none_or(|limit| compare(number, limit).is_ge())
                && node
                    .maximum
                    .is_none_or(|limit| compare(number, limit).is_le()))
        {
            return Some(false);
        }
        let holds = match value {
            Value::Object(members) => self.members_conform(node, members, depth)?,
            Value::Array(items) if node.items != NONE => {
                self.all(items.iter().map(|item| (node.items, item)), depth)?
            }
            _ => true,
        };
        if !holds || !self.all(self.list(node.all_of).map(|branch| (branch, value)), depth)? {
            return Some(false);
        }
        if node.any_of.length > 0 {
            let mut any = false;
            for branch in self.list(node.any_of) {
                if self.conforms(branch, value, depth + 1)? {
                    any = true;
                    break;
                }
            }
            if !any {
                return Some(false);
            }
        }
        if node.one_of.length > 0 {
            let mut taken = 0;
            for branch in self.list(node.one_of) {
                taken += usize::from(self.conforms(branch, value, depth + 1)?);
            }
            if taken != 1 {
                return Some(false);
            }
        }
        if node.condition != NONE {
            let next = if self.conforms(node.condition, value, depth + 1)? {
                node.then
            } else {
                node.otherwise
            };
            if next != NONE {
                return self.conforms(next, value, depth + 1);
            }
        }
        Some(true)
    }

    fn all<'v>(
        &self,
        mut pairs: impl Iterator<Item = (u32, &'v Value)>,
        depth: usize,
    ) -> Option<bool> {
        pairs.try_fold(true, |holds, (number, value)| {
            Some(holds && self.conforms(number, value, depth + 1)?)
        })
    }

    fn members_conform(
        &self,
        node: &Node,
        members: &Map<String, Value>,
        depth: usize,
    ) -> Option<bool> {
        if !self
            .strings_of(node.required)
            .all(|name| members.contains_key(name))
        {
            return Some(false);
        }
        let properties = &self.tables.members[node.properties.range()];
        for (name, member) in members {
            let rule = properties
                .iter()
                .find(|property| self.text(property.name) == name)
                .map_or(node.additional, |property| property.node);
            if rule != NONE && !self.conforms(rule, member, depth + 1)? {
                return Some(false);
            }
        }
        Some(true)
    }

    fn list(&self, span: Span) -> impl Iterator<Item = u32> + '_ {
        self.tables.lists[span.range()].iter().copied()
    }

    fn strings_of(&self, span: Span) -> impl Iterator<Item = &str> + '_ {
        self.tables.strings[span.range()]
            .iter()
            .map(|span| self.text(*span))
    }

    fn text(&self, span: Span) -> &str {
        &self.tables.text[span.range()]
    }
}

fn type_bits(value: &Value) -> u8 {
    match value {
        Value::Null => types::NULL,
        Value::Bool(_) => types::BOOLEAN,
        Value::Object(_) => types::OBJECT,
        Value::Array(_) => types::ARRAY,
        Value::String(_) => types::STRING,
        Value::Number(number) => {
            let integral = number.is_i64()
                || number.is_u64()
                || number.as_f64().is_some_and(|float| float.fract() == 0.0);
            if integral {
                types::NUMBER | types::INTEGER
            } else {
                types::NUMBER
            }
        }
    }
}

/// A JSON number against an integer limit: exactly for integers, as floats otherwise.
fn compare(number: &Number, limit: i64) -> Ordering {
    if let Some(integer) = number.as_i64() {
        return integer.cmp(&limit);
    }
    if number.is_u64() {
        // Beyond `i64`.
        return Ordering::Greater;
    }
    let float = number.as_f64().unwrap_or(f64::NAN);
    float.partial_cmp(&(limit as f64)).unwrap_or(Ordering::Less)
}
