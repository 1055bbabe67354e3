//! The JSON a store keeps a value as: plain JSON, with timestamps and durations tagged so a resumed run reads them back as the same values.

use std::sync::Arc;

use crate::base::value::Value;

/// The key of a stored timestamp: `{"$timestamp": "2026-01-01T09:00:00.000Z"}`.
const TIMESTAMP_KEY: &str = "$timestamp";
/// The key of a stored duration: `{"$duration": "1h30m"}`.
const DURATION_KEY: &str = "$duration";
/// The key wrapping a map of the protocol's own whose only key is one of these three, so it is
/// not read back as a time value: `{"$map": {"$timestamp": "not a time"}}`.
const MAP_KEY: &str = "$map";

impl Value {
    /// The stored form: `to_json` for everything but timestamps and durations (which JSON has
    /// no type for: plain text would come back as text), tagged so `from_stored_json` gives
    /// back exactly this value.
    pub fn to_stored_json(&self) -> serde_json::Value {
        match self {
            Value::Timestamp(_) => tagged(TIMESTAMP_KEY, self.to_string()),
            Value::Duration(_) => tagged(DURATION_KEY, self.to_string()),
            Value::List(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_stored_json).collect())
            }
            Value::Map(map) => {
                let object: serde_json::Map<String, serde_json::Value> = map
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.to_stored_json()))
                    .collect();
                let object = serde_json::Value::Object(object);
                match map.keys().next() {
                    Some(key) if map.len() == 1 && is_tag(key) => {
                        serde_json::json!({ MAP_KEY: object })
                    }
                    _ => object,
                }
            }
            other => other.to_json(),
        }
    }

    /// A value from its stored form (see `to_stored_json`). A tag whose text does not read
    /// (a store edited by hand) stays the map it is.
    pub fn from_stored_json(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Array(items) => Value::List(Arc::new(
                items.iter().map(Value::from_stored_json).collect(),
            )),
            serde_json::Value::Object(object) => {
                if let Some((key, inner)) = object.iter().next()
                    && object.len() == 1
                    && let Some(value) = untag(key, inner)
                {
                    return value;
                }
                map_from_stored(object)
            }
            other => Value::from_json(other),
        }
    }
}

fn tagged(key: &str, text: String) -> serde_json::Value {
    serde_json::json!({ key: text })
}

fn is_tag(key: &str) -> bool {
    matches!(key, TIMESTAMP_KEY | DURATION_KEY | MAP_KEY)
}

fn untag(key: &str, inner: &serde_json::Value) -> Option<Value> {
    match (key, inner) {
        (TIMESTAMP_KEY, serde_json::Value::String(text)) => {
            crate::base::time::parse_timestamp(text)
                .ok()
                .map(Value::Timestamp)
        }
        (DURATION_KEY, serde_json::Value::String(text)) => crate::base::time::parse_duration(text)
            .ok()
            .map(Value::Duration),
        (MAP_KEY, serde_json::Value::Object(object)) => Some(map_from_stored(object)),
        _ => None,
    }
}

fn map_from_stored(object: &serde_json::Map<String, serde_json::Value>) -> Value {
    Value::Map(Arc::new(
        object
            .iter()
            .map(|(key, value)| (Arc::from(key.as_str()), Value::from_stored_json(value)))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_values_and_look_alike_maps_round_trip() {
        let timestamp =
            crate::base::time::parse_timestamp("2026-01-01T09:00:00.123456789Z").unwrap();
        let duration = crate::base::time::parse_duration("-1h30m").unwrap();
        let look_alike = Value::from_json(&serde_json::json!({"$timestamp": "not a time"}));
        let wrapped = Value::from_json(&serde_json::json!({"$map": {"a": 1}}));
        let value = Value::List(Arc::new(vec![
            Value::Timestamp(timestamp),
            Value::Duration(duration),
            look_alike.clone(),
            wrapped,
            Value::from_json(&serde_json::json!({"plain": [1, "x", null]})),
        ]));
        let stored = value.to_stored_json();
        assert_eq!(
            stored[0],
            serde_json::json!({"$timestamp": "2026-01-01T09:00:00.123456789Z"})
        );
        assert_eq!(stored[1], serde_json::json!({"$duration": "-1h30m"}));
        assert_eq!(Value::from_stored_json(&stored), value);
        // Plain JSON shows the readable text.
        assert_eq!(value.to_json()[1], serde_json::json!("-1h30m"));
        assert_eq!(Value::from_stored_json(&look_alike.to_json()), look_alike);
    }
}
