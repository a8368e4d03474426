//! `upsert-json`: the Kafka key is the primary key, the value the row.
//!
//! The key is a JSON object of key columns; for a one-column primary key a bare JSON
//! scalar, or any non-JSON UTF-8 text, is accepted as that column's value. Key fields
//! override (or complete) the value's fields. A record with a value is `+I`; a null value
//! (tombstone) is `-D` of the key, and needs a key.

use serde_json::{Map, Value};

use super::error::{DecodeError, Part};
use super::json_value::{parse_object, type_name};
use super::row::MessageMeta;
use super::{Ctx, Decoded};
use crate::table::row_kind::RowKind;

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
        (None, Some(key)) => (RowKind::Delete, key.into_object()),
        (Some(payload), key) => {
            // The common case: read the value straight into column slots.
            if let Some(slots) = ctx.builder.field_slots()
                && let Some(mut fields) = slots.parse(payload)
            {
                match key {
                    Some(KeyFields::Object(object)) => {
                        for (k, v) in object {
                            slots.set(&mut fields, &k, v);
                        }
                    }
                    Some(KeyFields::Single(name, value)) => slots.set(&mut fields, name, value),
                    None => {}
                }
                let change = ctx.builder.build_fields(
                    RowKind::Insert,
                    fields,
                    &MessageMeta::default(),
                    ctx.record,
                )?;
                return Ok(Decoded::Changes(vec![change]));
            }
            let mut row = parse_object(payload, Part::Payload)?;
            for (k, v) in key.map(KeyFields::into_object).into_iter().flatten() {
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

/// The fields a record's key gives.
enum KeyFields<'a> {
    /// A JSON object's.
    Object(Map<String, Value>),
    /// A bare value of the one-column primary key, and the field it stands for: no map
    /// (hashed, with an owned name) per record for the usual key.
    Single(&'a str, Value),
}

impl KeyFields<'_> {
    fn into_object(self) -> Map<String, Value> {
        match self {
            KeyFields::Object(object) => object,
            KeyFields::Single(name, value) => Map::from_iter([(name.to_string(), value)]),
        }
    }
}

/// The key's fields; `None` without a key.
fn key_object<'a>(ctx: &Ctx<'a, '_>) -> Result<Option<KeyFields<'a>>, DecodeError> {
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
        Ok(Value::Object(o)) => return Ok(Some(KeyFields::Object(o))),
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
            Ok(Some(KeyFields::Single(name, scalar)))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testkit::{Change, decoder, record, sample_row, upsert_json};
    use super::super::*;
    use crate::table::datum::Datum;

    fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Decoded, DecodeError> {
        let mut rec = record(b"");
        rec.key = key;
        rec.payload = value;
        decoder(Format::UpsertJson, CdcOptions::default()).decode(&rec)
    }

    #[test]
    fn value_upserts_and_null_value_deletes() {
        let (key, value) = upsert_json(&Change::Insert(sample_row(5)));
        assert_eq!(
            decode(Some(&key), value.as_deref()),
            Ok(Decoded::Changes(vec![RowChange {
                kind: RowKind::Insert,
                row: sample_row(5)
            }]))
        );
        let (key, value) = upsert_json(&Change::Delete(sample_row(5)));
        assert_eq!(value, None);
        let Ok(Decoded::Changes(got)) = decode(Some(&key), None) else {
            panic!("changes expected")
        };
        assert_eq!(got[0].kind, RowKind::Delete);
        assert_eq!(got[0].row[0], Datum::Int(5));
        assert_eq!(got[0].row[1], Datum::Null);
    }

    #[test]
    fn key_fields_override_and_complete_the_value() {
        let value = json!({"id": 1, "name": "x"}).to_string();
        let Ok(Decoded::Changes(got)) = decode(Some(br#"{"id": 2}"#), Some(value.as_bytes()))
        else {
            panic!("changes expected")
        };
        assert_eq!(got[0].row[0], Datum::Int(2));
        let no_id = json!({"name": "x"}).to_string();
        for key in [&b"9"[..], b"\"9\"", b"9 not json"] {
            let got = decode(Some(key), Some(no_id.as_bytes()));
            let expected = if key == b"9 not json" {
                Err(())
            } else {
                Ok(Datum::Int(9))
            };
            match (got, expected) {
                (Ok(Decoded::Changes(c)), Ok(d)) => assert_eq!(c[0].row[0], d),
                // Raw text `9 not json` is the key value, which is not an INT.
                (Err(e), Err(())) => assert!(e.to_string().contains("column `id`"), "{e}"),
                (other, _) => panic!("unexpected {other:?}"),
            }
        }
        let Ok(Decoded::Changes(got)) = decode(None, Some(value.as_bytes())) else {
            panic!("changes expected")
        };
        assert_eq!(got[0].row[0], Datum::Int(1));
    }

    #[test]
    fn key_errors() {
        let err = decode(None, None).unwrap_err();
        assert_eq!(err.code(), "malformed");
        assert!(err.to_string().contains("no key"), "{err}");
        let err = decode(Some(b"[1]"), None).unwrap_err();
        assert!(err.to_string().contains("malformed key"), "{err}");
        let composite = Arc::new(
            crate::table::schema::TableSchema::new(
                vec![
                    ("a".into(), crate::table::types::DataType::Int, false),
                    ("b".into(), crate::table::types::DataType::Int, false),
                ],
                vec![],
                vec!["a".into(), "b".into()],
                Default::default(),
            )
            .unwrap(),
        );
        let dec = CdcDecoder::new(Format::UpsertJson, composite, CdcOptions::default()).unwrap();
        let mut rec = record(b"{}");
        rec.key = Some(b"1");
        let err = dec.decode(&rec).unwrap_err();
        assert!(err.to_string().contains("(a, b)"), "{err}");
        rec.key = Some(br#"{"a": 1, "b": 2}"#);
        rec.payload = None;
        let Ok(Decoded::Changes(got)) = dec.decode(&rec) else {
            panic!("changes expected")
        };
        assert_eq!(got[0].row, vec![Datum::Int(1), Datum::Int(2)]);
    }
}
