//! A yes-or-no reading of a document against the generated schema as it stands, so the validator (costly to build) is built only for a document that fails.
//!
//! Building `jsonschema`'s validator for the protocol schema costs more than everything else
//! `validate` does (issue 29). Most documents a process reads are valid, and for them a walk of
//! the schema's JSON answers the only question asked: does it conform? The walk knows the
//! Draft 7 keywords the generated schemas use; a keyword it does not know makes it answer
//! `Unknown`, and the caller then asks the real validator, so a schema that grows a new keyword
//! is never misread. Only `Conforms` skips the validator: every error message still comes from
//! it.

use std::cmp::Ordering;

use serde_json::{Map, Value};

/// The answer of the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Conforms,
    Fails,
    /// The schema uses a keyword (or a form of one) this walk does not read.
    Unknown,
}

/// Whether `document` conforms to `schema` (a draft-07 schema with local `#/definitions/` refs).
pub fn check(schema: &Value, document: &Value) -> Verdict {
    let walk = Walk { root: schema };
    match walk.conforms(schema, document, 0) {
        Ok(true) => Verdict::Conforms,
        Ok(false) => Verdict::Fails,
        Err(Unknown) => Verdict::Unknown,
    }
}

/// Every keyword of `schema` this walk cannot read, with where it is (for the test that keeps
/// the committed schemas within what it reads).
#[cfg(test)]
pub fn unread_keywords(schema: &Value) -> Vec<String> {
    let mut unread = Vec::new();
    list_unread(schema, "#", &mut unread);
    unread
}

#[derive(Debug)]
struct Unknown;

/// How deep `$ref`s may nest before the walk gives the question to the validator: the
/// document's own depth is bounded by the YAML reader, so this only stops a schema that refers
/// to itself without consuming the document.
const DEPTH_LIMIT: usize = 512;

/// Keywords that say nothing about validity.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$comment",
    "title",
    "description",
    "markdownDescription",
    "default",
    "examples",
    "definitions",
    "doNotSuggest",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Formats schemars writes for Rust's numbers: Draft 7 defines none of them, so a validator
/// ignores them (as `jsonschema` does); a format Draft 7 defines would be checked, and is not
/// read here.
const IGNORED_FORMATS: &[&str] = &[
    "uint8", "uint16", "uint32", "uint64", "uint", "int8", "int16", "int32", "int64", "int",
    "float", "double",
];

struct Walk<'a> {
    root: &'a Value,
}

impl<'a> Walk<'a> {
    fn conforms(&self, schema: &'a Value, value: &Value, depth: usize) -> Result<bool, Unknown> {
        let object = match schema {
            Value::Bool(accepts) => return Ok(*accepts),
            Value::Object(object) => object,
            _ => return Err(Unknown),
        };
        if depth > DEPTH_LIMIT {
            return Err(Unknown);
        }
        // Draft 7 ignores every keyword beside `$ref`.
        if let Some(reference) = object.get("$ref") {
            let target = self.resolve(reference)?;
            return self.conforms(target, value, depth + 1);
        }
        let mut holds = true;
        for (keyword, argument) in object {
            holds = match keyword.as_str() {
                "type" => has_type(argument, value)?,
                "enum" => match argument {
                    Value::Array(options) => options.iter().any(|option| equal(option, value)),
                    _ => return Err(Unknown),
                },
                "const" => equal(argument, value),
                "minimum" | "maximum" => match (argument, value) {
                    (Value::Number(limit), Value::Number(number)) => {
                        let order = compare(number, limit).ok_or(Unknown)?;
                        if keyword == "minimum" {
                            order.is_ge()
                        } else {
                            order.is_le()
                        }
                    }
                    (Value::Number(_), _) => true,
                    _ => return Err(Unknown),
                },
                "format" => match argument.as_str() {
                    Some(format) if IGNORED_FORMATS.contains(&format) => true,
                    _ => return Err(Unknown),
                },
                // Read together, once: under `properties` when there is one.
                "properties" | "additionalProperties"
                    if keyword == "properties" || !object.contains_key("properties") =>
                {
                    match value {
                        Value::Object(members) => self.members_conform(object, members, depth)?,
                        _ => true,
                    }
                }
                "additionalProperties" => true,
                "required" => match (argument, value) {
                    (Value::Array(names), Value::Object(members)) => names
                        .iter()
                        .all(|name| name.as_str().is_some_and(|name| members.contains_key(name))),
                    (Value::Array(_), _) => true,
                    _ => return Err(Unknown),
                },
                "items" => match (argument, value) {
                    (Value::Array(_), _) => return Err(Unknown),
                    (_, Value::Array(items)) => {
                        let mut all = true;
                        for item in items {
                            if !self.conforms(argument, item, depth + 1)? {
                                all = false;
                                break;
                            }
                        }
                        all
                    }
                    _ => true,
                },
                "allOf" => {
                    let mut all = true;
                    for branch in branches(argument)? {
                        if !self.conforms(branch, value, depth + 1)? {
                            all = false;
                            break;
                        }
                    }
                    all
                }
                "anyOf" => {
                    let mut any = false;
                    for branch in branches(argument)? {
                        if self.conforms(branch, value, depth + 1)? {
                            any = true;
                            break;
                        }
                    }
                    any
                }
                "oneOf" => {
                    let mut taken = 0;
                    for branch in branches(argument)? {
                        if self.conforms(branch, value, depth + 1)? {
                            taken += 1;
                        }
                    }
                    taken == 1
                }
                "if" => {
                    let next = if self.conforms(argument, value, depth + 1)? {
                        object.get("then")
                    } else {
                        object.get("else")
                    };
                    match next {
                        Some(next) => self.conforms(next, value, depth + 1)?,
                        None => true,
                    }
                }
                // Read with `if`; alone they mean nothing.
                "then" | "else" => true,
                other if ANNOTATIONS.contains(&other) => true,
                _ => return Err(Unknown),
            };
            if !holds {
                break;
            }
        }
        Ok(holds)
    }

    /// `properties` and `additionalProperties` together (there is no `patternProperties` in
    /// the generated schemas: `list_unread` reports one).
    fn members_conform(
        &self,
        schema: &'a Map<String, Value>,
        members: &Map<String, Value>,
        depth: usize,
    ) -> Result<bool, Unknown> {
        let properties = match schema.get("properties") {
            Some(Value::Object(properties)) => Some(properties),
            Some(_) => return Err(Unknown),
            None => None,
        };
        let additional = schema.get("additionalProperties");
        for (name, member) in members {
            let rule = match properties.and_then(|properties| properties.get(name)) {
                Some(rule) => rule,
                None => match additional {
                    Some(rule) => rule,
                    None => continue,
                },
            };
            if !self.conforms(rule, member, depth + 1)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn resolve(&self, reference: &Value) -> Result<&'a Value, Unknown> {
        let name = reference
            .as_str()
            .and_then(|reference| reference.strip_prefix("#/definitions/"))
            .ok_or(Unknown)?;
        // A name with `/` or `~` would be an escaped pointer: not written by schemars.
        if name.contains(['/', '~', '%']) {
            return Err(Unknown);
        }
        self.root
            .get("definitions")
            .and_then(|definitions| definitions.get(name))
            .ok_or(Unknown)
    }
}

fn branches(argument: &Value) -> Result<&Vec<Value>, Unknown> {
    match argument {
        Value::Array(branches) if !branches.is_empty() => Ok(branches),
        _ => Err(Unknown),
    }
}

fn has_type(argument: &Value, value: &Value) -> Result<bool, Unknown> {
    match argument {
        Value::String(name) => is_type(name, value),
        Value::Array(names) => {
            for name in names {
                if is_type(name.as_str().ok_or(Unknown)?, value)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        _ => Err(Unknown),
    }
}

fn is_type(name: &str, value: &Value) -> Result<bool, Unknown> {
    Ok(match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        // Draft 7: any number with no fractional part, `1.0` included.
        "integer" => match value {
            Value::Number(number) => {
                number.is_i64()
                    || number.is_u64()
                    || number.as_f64().is_some_and(|float| float.fract() == 0.0)
            }
            _ => false,
        },
        _ => return Err(Unknown),
    })
}

/// Two JSON numbers in order: integers exactly, floats where either is one.
fn compare(number: &serde_json::Number, limit: &serde_json::Number) -> Option<Ordering> {
    if let (Some(number), Some(limit)) = (number.as_i64(), limit.as_i64()) {
        return Some(number.cmp(&limit));
    }
    if let (Some(number), Some(limit)) = (number.as_u64(), limit.as_u64()) {
        return Some(number.cmp(&limit));
    }
    if number.is_f64() || limit.is_f64() {
        return number.as_f64()?.partial_cmp(&limit.as_f64()?);
    }
    // One is negative and the other beyond `i64`.
    Some(if number.is_u64() {
        Ordering::Greater
    } else {
        Ordering::Less
    })
}

/// JSON equality as Draft 7 means it: numbers by value (`1` equals `1.0`).
fn equal(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(left), Value::Number(right)) => {
            compare(left, right) == Some(Ordering::Equal)
        }
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len() && left.iter().zip(right).all(|(l, r)| equal(l, r))
        }
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left
                    .iter()
                    .all(|(key, l)| right.get(key).is_some_and(|r| equal(l, r)))
        }
        _ => left == right,
    }
}

#[cfg(test)]
fn list_unread(schema: &Value, at: &str, unread: &mut Vec<String>) {
    let Value::Object(object) = schema else {
        if !schema.is_boolean() {
            unread.push(format!(
                "{at}: a schema that is neither an object nor a boolean"
            ));
        }
        return;
    };
    for (keyword, argument) in object {
        let here = format!("{at}/{keyword}");
        match keyword.as_str() {
            "$ref" => {
                let local = argument
                    .as_str()
                    .and_then(|reference| reference.strip_prefix("#/definitions/"))
                    .is_some_and(|name| !name.contains(['/', '~', '%']));
                if !local {
                    unread.push(format!("{here}: not a `#/definitions/NAME` reference"));
                }
                if object
                    .keys()
                    .any(|other| other != "$ref" && !ANNOTATIONS.contains(&other.as_str()))
                {
                    unread.push(format!("{here}: keywords beside `$ref`"));
                }
            }
            "type" | "enum" | "const" | "minimum" | "maximum" | "required" | "then" | "else" => {}
            "format" => {
                if !argument
                    .as_str()
                    .is_some_and(|format| IGNORED_FORMATS.contains(&format))
                {
                    unread.push(format!("{here}: {argument}"));
                }
            }
            "properties" | "definitions" => {
                if let Value::Object(members) = argument {
                    for (name, member) in members {
                        list_unread(member, &format!("{here}/{name}"), unread);
                    }
                }
            }
            "additionalProperties" | "if" => list_unread(argument, &here, unread),
            "items" => {
                if argument.is_array() {
                    unread.push(format!("{here}: a list of item schemas"));
                } else {
                    list_unread(argument, &here, unread);
                }
            }
            "allOf" | "anyOf" | "oneOf" => {
                if let Value::Array(branches) = argument {
                    for (index, branch) in branches.iter().enumerate() {
                        list_unread(branch, &format!("{here}/{index}"), unread);
                    }
                }
            }
            other if ANNOTATIONS.contains(&other) => {}
            _ => unread.push(here),
        }
    }
    for branch in ["then", "else"] {
        if let Some(argument) = object.get(branch) {
            list_unread(argument, &format!("{at}/{branch}"), unread);
        }
    }
}
