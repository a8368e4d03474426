//! JSON values as every decoder meets them: payload bytes parsed into a value or an
//! object (errors naming the part of the record), the value at a dotted path, and a
//! value's type in words for messages.
//!
//! Both [`super::json`] (the `json` format, rows ⇄ JSON) and [`super::row`] (building
//! rows) need these; they live here, below both, so that neither imports the other.

use serde_json::{Map, Value};

use super::error::{DecodeError, Part};

/// The value at a dotted path (`"customer.id"`, `"items.0.sku"`) of an object. A key that
/// itself contains dots is found too: at each level the longest matching key wins over
/// splitting it. Array elements are addressed by index.
pub(crate) fn lookup_path<'a>(record: &'a Map<String, Value>, dotted: &str) -> Option<&'a Value> {
    if let Some(v) = record.get(dotted) {
        return Some(v);
    }
    // Try the split points from the right, so longer keys are preferred.
    let mut end = dotted.len();
    while let Some(dot) = dotted[..end].rfind('.') {
        if let Some(inner) = record.get(&dotted[..dot])
            && let Some(v) = lookup_in(inner, &dotted[dot + 1..])
        {
            return Some(v);
        }
        end = dot;
    }
    None
}

fn lookup_in<'a>(value: &'a Value, rest: &str) -> Option<&'a Value> {
    match value {
        Value::Object(map) => lookup_path(map, rest),
        Value::Array(items) => {
            let (index, tail) = match rest.split_once('.') {
                Some((i, tail)) => (i, Some(tail)),
                None => (rest, None),
            };
            let item = items.get(index.parse::<usize>().ok()?)?;
            match tail {
                None => Some(item),
                Some(tail) => lookup_in(item, tail),
            }
        }
        _ => None,
    }
}

/// Parses bytes as one JSON value. The bytes are checked as UTF-8 once, as a whole
/// (vectorised), rather than string by string as `from_slice` does; text that is not
/// UTF-8 is left to `from_slice`, which says where it goes wrong.
pub(crate) fn parse_value(bytes: &[u8], part: Part) -> Result<Value, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
    .map_err(|e| DecodeError::malformed(part, format!("not valid JSON: {e}")))
}

/// Parses bytes as one JSON object.
pub(crate) fn parse_object(bytes: &[u8], part: Part) -> Result<Map<String, Value>, DecodeError> {
    match parse_value(bytes, part)? {
        Value::Object(map) => Ok(map),
        other => Err(DecodeError::malformed(
            part,
            format!("expected a JSON object, got {}", type_name(&other)),
        )),
    }
}

/// What a value is, in words (`a string`, `null`), for error messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn dotted_paths_walk_objects_arrays_and_dotted_keys() {
        let v = json!({
            "customer": {"id": 7, "address": {"city": "Oslo"}},
            "items": [{"sku": "a"}, {"sku": "b"}],
            "a.b": 1,
            "a": {"b": 2, "c.d": 3},
        });
        let Value::Object(m) = v else { unreachable!() };
        assert_eq!(lookup_path(&m, "customer.id"), Some(&json!(7)));
        assert_eq!(
            lookup_path(&m, "customer.address.city"),
            Some(&json!("Oslo"))
        );
        assert_eq!(lookup_path(&m, "items.1.sku"), Some(&json!("b")));
        assert_eq!(lookup_path(&m, "a.b"), Some(&json!(1)));
        assert_eq!(lookup_path(&m, "a.c.d"), Some(&json!(3)));
        assert_eq!(lookup_path(&m, "customer.name"), None);
        assert_eq!(lookup_path(&m, "items.9.sku"), None);
        assert_eq!(lookup_path(&m, "items.x"), None);
        assert_eq!(lookup_path(&m, "customer.id.x"), None);
        assert_eq!(lookup_path(&m, ""), None);
        assert_eq!(lookup_path(&m, "."), None);
    }
}
