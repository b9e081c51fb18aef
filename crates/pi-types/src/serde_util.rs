//! Small serde helpers shared by the wire types.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Deserialize a present field (even `null`) as `Some(value)`; an absent one stays `None`
/// through `#[serde(default)]`. Keeps JavaScript's `undefined` vs `null` apart.
pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The `role` string of a message object.
pub(crate) fn role_of(value: &Value) -> Result<&str, &'static str> {
    match value.get("role") {
        Some(Value::String(role)) => Ok(role),
        Some(_) => Err("message `role` must be a string"),
        None => Err("message has no `role`"),
    }
}
