//! `upsert-json`: the Kafka key is the primary key, the value the row.
//!
//! The key is a JSON object of key columns; for a one-column primary key a bare JSON
//! scalar, or any non-JSON UTF-8 text, is accepted as that column's value. Key fields
//! override (or complete) the value's fields. A record with a value is `+I`; a null value
//! (tombstone) is `-D` of the key, and needs a key.

use serde_json::{Map, Value};

use super::error::{DecodeError, Part};
use super::json::{parse_object, type_name};
use super::row::MessageMeta;
use super::{Ctx, Decoded};
use crate::table::data_file::RowKind;

/// Decodes one upsert record.
pub(crate) fn decode(ctx: &Ctx<'_, '_>) -> Result<Decoded, DecodeError> {
    let key = key_object(ctx)?;
    let (kind, row) = match (ctx.record.payload, key) {
        (None, None) => {
            return Err(DecodeError::malformed(
                Part::Key,
                "a null value deletes by key, but the record has no key",
            ));
        }
        (None, Some(key)) => (RowKind::Delete, key),
        (Some(payload), key) => {
            let mut row = parse_object(payload, Part::Payload)?;
            for (k, v) in key.into_iter().flatten() {
                row.insert(k, v);
            }
            (RowKind::Insert, row)
        }
    };
    let change = ctx
        .builder
        .build(kind, &row, &MessageMeta::default(), ctx.record)?;
    Ok(Decoded::Changes(vec![change]))
}

/// The key as an object of key fields; `None` without a key.
fn key_object(ctx: &Ctx<'_, '_>) -> Result<Option<Map<String, Value>>, DecodeError> {
    let Some(bytes) = ctx.record.key else {
        return Ok(None);
    };
    let schema = ctx.builder.schema();
    let single = match schema.primary_keys.as_slice() {
        [one] => Some(one.as_str()),
        _ => None,
    };
    let value = serde_json::from_slice::<Value>(bytes);
    let scalar = match value {
        Ok(Value::Object(o)) => return Ok(Some(o)),
        Ok(v @ (Value::Bool(_) | Value::Number(_) | Value::String(_))) => v,
        Ok(other) => {
            return Err(DecodeError::malformed(
                Part::Key,
                format!(
                    "expected a JSON object of primary-key fields, got {}",
                    type_name(&other)
                ),
            ));
        }
        Err(e) => match std::str::from_utf8(bytes) {
            Ok(text) if single.is_some() => Value::String(text.to_string()),
            _ => {
                return Err(DecodeError::malformed(
                    Part::Key,
                    format!("not valid JSON: {e}"),
                ));
            }
        },
    };
    match single {
        Some(column) => {
            // The key field has the name the column is read from.
            let name = match ctx.options.field_paths.get(column) {
                Some(path) if !path.contains('.') => path.as_str(),
                _ => column,
            };
            Ok(Some(Map::from_iter([(name.to_string(), scalar)])))
        }
        None => Err(DecodeError::malformed(
            Part::Key,
            format!(
                "a bare key value needs a one-column primary key; the table's is ({}), so the \
                 key must be a JSON object",
                schema.primary_keys.join(", ")
            ),
        )),
    }
}
