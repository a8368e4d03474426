//! The shape of the table a Debezium topic describes: its columns, their types and its
//! primary key, read off one change event, for whole-database sync to create the table
//! before the first change is written.
//!
//! As Paimon's `kafka_sync_database` does with Debezium JSON: with the Connect schema of
//! `value.converter.schemas.enable=true`, each column gets the type Paimon's MySQL CDC
//! maps its schema to ([`super::connect_type`]), and is nullable when the schema says
//! `optional`; without it every column is a nullable STRING (the JSON says nothing
//! more). The primary key is the record key's fields, which Debezium fills with the
//! source table's primary key (or its `message.key.columns`). Columns of a type lakejoin
//! has no table type for (times of day, bit strings, geometries) become STRING columns
//! holding Debezium's value as text, so that nothing of the row is dropped.

use serde_json::{Map, Value};

use super::connect_type;
use crate::table::types::{DataType, MAX_LENGTH};

/// A table as one change event describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceTable {
    /// Name, type and nullability of each column, in the source's order.
    pub(crate) columns: Vec<(String, DataType, bool)>,
    /// The record key's fields; empty when the record had no key.
    pub(crate) primary_key: Vec<String>,
    /// Whether the types came from a Connect schema (else every column is STRING).
    pub(crate) typed: bool,
}

/// Why a record describes no table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoShape {
    /// A tombstone, a truncate or a message event: no row, look at the next record.
    #[error("the record carries no row")]
    NoRow,
    /// Not a Debezium change event at all.
    #[error("not a Debezium change event: {0}")]
    Malformed(String),
}

/// The table `value` (and `key`) of one Debezium JSON record describe.
pub(crate) fn source_table(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<SourceTable, NoShape> {
    let Some(value) = value else {
        return Err(NoShape::NoRow);
    };
    let root: Value = serde_json::from_slice(value)
        .map_err(|e| NoShape::Malformed(format!("the value is not JSON: {e}")))?;
    let Value::Object(mut root) = root else {
        return Err(NoShape::Malformed("the value is not a JSON object".into()));
    };
    let schema = match (root.remove("schema"), root.remove("payload")) {
        (Some(schema), Some(Value::Object(payload))) => {
            root = payload;
            Some(schema)
        }
        (Some(_), Some(Value::Null)) => return Err(NoShape::NoRow),
        (Some(_), Some(_)) => {
            return Err(NoShape::Malformed("`payload` is not an object".into()));
        }
        (schema, None) => {
            // No wrapper: `schema` was a column of the row, put it back.
            if let Some(s) = schema {
                root.insert("schema".into(), s);
            }
            None
        }
        (None, Some(payload)) => {
            root.insert("payload".into(), payload);
            None
        }
    };
    match root.get("op").and_then(Value::as_str) {
        Some("c" | "r" | "u" | "d") => {}
        Some("t" | "m") => return Err(NoShape::NoRow),
        Some(other) => return Err(NoShape::Malformed(format!("unknown `op` {other:?}"))),
        None => return Err(NoShape::Malformed("no `op` field".into())),
    }
    let columns = match &schema {
        Some(schema) => typed_columns(schema)?,
        None => untyped_columns(&root)?,
    };
    Ok(SourceTable {
        columns,
        primary_key: key.map(key_fields).transpose()?.unwrap_or_default(),
        typed: schema.is_some(),
    })
}

/// The `after` (else `before`) struct of an envelope's Connect schema, as columns.
fn typed_columns(schema: &Value) -> Result<Vec<(String, DataType, bool)>, NoShape> {
    let fields = schema
        .get("fields")
        .and_then(Value::as_array)
        .ok_or_else(|| NoShape::Malformed("the schema has no `fields`".into()))?;
    let row = ["after", "before"]
        .into_iter()
        .find_map(|name| {
            fields
                .iter()
                .find(|f| f.get("field").and_then(Value::as_str) == Some(name))
        })
        .and_then(|s| s.get("fields"))
        .and_then(Value::as_array)
        .ok_or_else(|| NoShape::Malformed("the schema describes no `after` struct".into()))?;
    row.iter()
        .map(|f| {
            let name = f
                .get("field")
                .and_then(Value::as_str)
                .ok_or_else(|| NoShape::Malformed("a schema field has no name".into()))?;
            let data_type = connect_type(f)
                .data_type
                .unwrap_or(DataType::Varchar(MAX_LENGTH));
            let nullable = f.get("optional").and_then(Value::as_bool).unwrap_or(true);
            Ok((name.to_string(), data_type, nullable))
        })
        .collect()
}

/// The members of the row image (`after`, else `before`) of a schemaless envelope, as
/// nullable STRING columns.
fn untyped_columns(
    envelope: &Map<String, Value>,
) -> Result<Vec<(String, DataType, bool)>, NoShape> {
    let row = ["after", "before"]
        .into_iter()
        .find_map(|name| envelope.get(name).and_then(Value::as_object))
        .ok_or_else(|| NoShape::Malformed("neither `after` nor `before` is an object".into()))?;
    Ok(row
        .keys()
        .map(|name| (name.clone(), DataType::Varchar(MAX_LENGTH), true))
        .collect())
}

/// The field names of a record key: the struct of its Connect schema, else the members
/// of the JSON object.
fn key_fields(key: &[u8]) -> Result<Vec<String>, NoShape> {
    let key: Value = serde_json::from_slice(key)
        .map_err(|e| NoShape::Malformed(format!("the key is not JSON: {e}")))?;
    if let (Some(schema), Some(_)) = (key.get("schema"), key.get("payload"))
        && let Some(fields) = schema.get("fields").and_then(Value::as_array)
    {
        return Ok(fields
            .iter()
            .filter_map(|f| f.get("field").and_then(Value::as_str).map(str::to_string))
            .collect());
    }
    match key {
        Value::Object(members) => Ok(members.keys().cloned().collect()),
        _ => Err(NoShape::Malformed("the key is not a JSON object".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(name: &str, connect: &str, optional: bool, logical: Option<&str>) -> Value {
        let mut f = json!({"type": connect, "optional": optional, "field": name});
        if let Some(l) = logical {
            f["name"] = json!(l);
        }
        f
    }

    fn envelope_with_schema(row_fields: Vec<Value>, op: &str) -> Vec<u8> {
        let row = json!({"type": "struct", "optional": true, "fields": row_fields});
        let (mut before, mut after) = (row.clone(), row);
        before["field"] = json!("before");
        after["field"] = json!("after");
        json!({
            "schema": {"type": "struct", "fields": [before, after,
                {"type": "string", "optional": false, "field": "op"}]},
            "payload": {"before": null, "after": {"id": 1}, "op": op}
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_schema_wrapped_event_gives_types_nullability_and_the_key() {
        let value = envelope_with_schema(
            vec![
                field("id", "int64", false, None),
                field(
                    "amount",
                    "bytes",
                    true,
                    Some("org.apache.kafka.connect.data.Decimal"),
                ),
                field(
                    "created",
                    "int64",
                    true,
                    Some("io.debezium.time.MicroTimestamp"),
                ),
                field("note", "string", true, None),
                field("at", "int64", true, Some("io.debezium.time.MicroTime")),
            ],
            "r",
        );
        let key =
            json!({"schema": {"type": "struct", "fields": [field("id", "int64", false, None)]},
            "payload": {"id": 1}})
            .to_string();
        let shape = source_table(Some(key.as_bytes()), Some(&value)).unwrap();
        assert_eq!(
            shape.columns,
            vec![
                ("id".into(), DataType::BigInt, false),
                (
                    "amount".into(),
                    DataType::Decimal {
                        precision: 38,
                        scale: 0
                    },
                    true
                ),
                ("created".into(), DataType::Timestamp(6), true),
                ("note".into(), DataType::Varchar(MAX_LENGTH), true),
                // No table type for a time of day: kept as text.
                ("at".into(), DataType::Varchar(MAX_LENGTH), true),
            ]
        );
        assert_eq!(shape.primary_key, vec!["id".to_string()]);
        assert!(shape.typed);
    }

    #[test]
    fn a_schemaless_event_gives_string_columns_in_source_order() {
        let value = json!({"before": {"b": 1, "a": 2}, "after": null, "op": "d"}).to_string();
        let shape = source_table(Some(br#"{"b": 1}"#), Some(value.as_bytes())).unwrap();
        let names: Vec<&str> = shape.columns.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert!(
            shape
                .columns
                .iter()
                .all(|c| c.1 == DataType::Varchar(MAX_LENGTH) && c.2)
        );
        assert_eq!(shape.primary_key, vec!["b".to_string()]);
        assert!(!shape.typed);
    }

    #[test]
    fn rowless_and_malformed_records_say_which() {
        assert_eq!(source_table(None, None), Err(NoShape::NoRow));
        let truncate = json!({"before": null, "after": null, "op": "t"}).to_string();
        assert_eq!(
            source_table(None, Some(truncate.as_bytes())),
            Err(NoShape::NoRow)
        );
        let null_payload = json!({"schema": {}, "payload": null}).to_string();
        assert_eq!(
            source_table(None, Some(null_payload.as_bytes())),
            Err(NoShape::NoRow)
        );
        for bad in [
            &b"not json"[..],
            b"[1]",
            br#"{"after": {"a": 1}}"#,
            br#"{"op": "c"}"#,
        ] {
            assert!(
                matches!(source_table(None, Some(bad)), Err(NoShape::Malformed(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let value = json!({"after": {"a": 1}, "op": "c"}).to_string();
        assert!(matches!(
            source_table(Some(b"7"), Some(value.as_bytes())),
            Err(NoShape::Malformed(m)) if m.contains("key")
        ));
        // No key: no primary key (the caller decides what that means).
        assert!(
            source_table(None, Some(value.as_bytes()))
                .unwrap()
                .primary_key
                .is_empty()
        );
    }
}
