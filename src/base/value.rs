//! Runtime values: JSON-shaped data held in context, inputs and events, cheap to clone.

use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;

/// What a scalar, and each element's place in a list or map, counts for in `size_in_bytes`.
pub const SCALAR_BYTES: usize = 8;

/// A value of the protocol's data model. Lists and maps are shared, so cloning never copies them.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    /// Only from JSON numbers above `i64::MAX`; CEL calls this `uint`.
    UInt(u64),
    Float(f64),
    String(Arc<str>),
    List(Arc<Vec<Value>>),
    Map(Arc<IndexMap<Arc<str>, Value>>),
    /// A point in time (`now()`, `timestamp(text)`); JSON shows it as RFC 3339 text.
    Timestamp(crate::base::time::Timestamp),
    /// A span of time (`duration('90s')`, `t2 - t1`); JSON shows it as a literal like `1h30m`.
    Duration(crate::base::time::Duration),
}

impl Value {
    pub fn string(text: impl Into<Arc<str>>) -> Value {
        Value::String(text.into())
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    /// What the value counts for against `--max-value-bytes`: the bytes of its strings and
    /// keys, and `SCALAR_BYTES` for every other scalar and each element's place, as
    /// `compile::bounded::measure` counts a CEL value.
    pub fn size_in_bytes(&self) -> usize {
        match self {
            Value::String(text) => text.len(),
            Value::List(items) => items
                .iter()
                .map(|item| SCALAR_BYTES + item.size_in_bytes())
                .fold(0, usize::saturating_add),
            Value::Map(entries) => entries
                .iter()
                .map(|(key, item)| SCALAR_BYTES + key.len() + item.size_in_bytes())
                .fold(0, usize::saturating_add),
            _ => SCALAR_BYTES,
        }
    }

    /// The CEL type name, used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::UInt(_) => "uint",
            Value::Float(_) => "double",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Timestamp(_) => "timestamp",
            Value::Duration(_) => "duration",
        }
    }

    /// Member `key` of a map, or None.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(map) => map.get(key),
            _ => None,
        }
    }

    pub fn from_json(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(flag) => Value::Bool(*flag),
            serde_json::Value::Number(number) => {
                if let Some(integer) = number.as_i64() {
                    Value::Int(integer)
                } else if let Some(unsigned) = number.as_u64() {
                    Value::UInt(unsigned)
                } else {
                    Value::Float(number.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(text) => Value::string(text.as_str()),
            serde_json::Value::Array(items) => {
                Value::List(Arc::new(items.iter().map(Value::from_json).collect()))
            }
            serde_json::Value::Object(object) => Value::Map(Arc::new(
                object
                    .iter()
                    .map(|(key, value)| (Arc::from(key.as_str()), Value::from_json(value)))
                    .collect(),
            )),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(flag) => serde_json::Value::Bool(*flag),
            Value::Int(integer) => serde_json::Value::from(*integer),
            Value::UInt(unsigned) => serde_json::Value::from(*unsigned),
            Value::Float(float) => serde_json::Number::from_f64(*float)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Value::String(text) => serde_json::Value::String(text.to_string()),
            Value::List(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_json).collect())
            }
            Value::Map(map) => serde_json::Value::Object(
                map.iter()
                    .map(|(key, value)| (key.to_string(), value.to_json()))
                    .collect(),
            ),
            Value::Timestamp(_) | Value::Duration(_) => serde_json::Value::String(self.to_string()),
        }
    }

    /// Converts to the `cel` crate's value for the full-CEL evaluation path.
    pub fn to_cel(&self) -> cel::Value {
        match self {
            Value::Null => cel::Value::Null,
            Value::Bool(flag) => cel::Value::Bool(*flag),
            Value::Int(integer) => cel::Value::Int(*integer),
            Value::UInt(unsigned) => cel::Value::UInt(*unsigned),
            Value::Float(float) => cel::Value::Float(*float),
            Value::String(text) => cel::Value::String(Arc::new(text.to_string())),
            Value::List(items) => {
                cel::Value::List(Arc::new(items.iter().map(Value::to_cel).collect()))
            }
            Value::Map(map) => {
                let entries: std::collections::HashMap<cel::objects::Key, cel::Value> = map
                    .iter()
                    .map(|(key, value)| {
                        (
                            cel::objects::Key::String(Arc::new(key.to_string())),
                            value.to_cel(),
                        )
                    })
                    .collect();
                cel::Value::Map(cel::objects::Map {
                    map: Arc::new(entries),
                })
            }
            Value::Timestamp(timestamp) => cel::Value::Timestamp(timestamp.fixed_offset()),
            Value::Duration(duration) => cel::Value::Duration(*duration),
        }
    }

    /// Converts a CEL result back; None for values with no JSON shape (bytes, types, opaque).
    pub fn from_cel(value: &cel::Value) -> Option<Value> {
        Some(match value {
            cel::Value::Null => Value::Null,
            cel::Value::Bool(flag) => Value::Bool(*flag),
            cel::Value::Int(integer) => Value::Int(*integer),
            cel::Value::UInt(unsigned) => Value::UInt(*unsigned),
            cel::Value::Float(float) => Value::Float(*float),
            cel::Value::String(text) => Value::string(text.as_str()),
            cel::Value::List(items) => Value::List(Arc::new(
                items
                    .iter()
                    .map(Value::from_cel)
                    .collect::<Option<Vec<_>>>()?,
            )),
            cel::Value::Map(map) => {
                let mut entries: Vec<(Arc<str>, Value)> = Vec::with_capacity(map.map.len());
                for (key, value) in map.map.iter() {
                    let key: Arc<str> = match key {
                        cel::objects::Key::String(text) => Arc::from(text.as_str()),
                        cel::objects::Key::Int(integer) => Arc::from(integer.to_string()),
                        cel::objects::Key::Uint(unsigned) => Arc::from(unsigned.to_string()),
                        cel::objects::Key::Bool(flag) => Arc::from(flag.to_string()),
                    };
                    entries.push((key, Value::from_cel(value)?));
                }
                // CEL maps are unordered: sort keys so output is deterministic.
                entries.sort_by(|left, right| left.0.cmp(&right.0));
                Value::Map(Arc::new(entries.into_iter().collect()))
            }
            cel::Value::Timestamp(timestamp) => {
                Value::Timestamp(timestamp.with_timezone(&chrono::Utc))
            }
            cel::Value::Duration(duration) => Value::Duration(*duration),
            _ => return None,
        })
    }

    /// Whether the value is true in a guard: only the boolean `true` is.
    pub fn is_true(&self) -> bool {
        matches!(self, Value::Bool(true))
    }
}

impl fmt::Display for Value {
    /// Strings print bare (for templates); everything else prints as compact JSON.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(text) => formatter.write_str(text),
            Value::Int(integer) => write!(formatter, "{integer}"),
            Value::Bool(flag) => write!(formatter, "{flag}"),
            Value::Timestamp(timestamp) => {
                formatter.write_str(&crate::base::time::format_timestamp(timestamp))
            }
            Value::Duration(duration) => {
                formatter.write_str(&crate::base::time::format_duration(duration))
            }
            other => write!(formatter, "{}", other.to_json()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_keeps_order_and_types() {
        let json = serde_json::json!({"b": 1, "a": [true, null, 1.5, "x"], "c": {"z": 18446744073709551615u64}});
        assert_eq!(Value::from_json(&json).to_json(), json);
    }

    #[test]
    fn cel_round_trip() {
        let value = Value::from_json(&serde_json::json!({"k": [1, "two", 3.5, false, null]}));
        assert_eq!(Value::from_cel(&value.to_cel()), Some(value));
    }
}
