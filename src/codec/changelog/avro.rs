//! The `avro` changelog format: each change is an Avro record of the table's columns
//! plus `op` (`+I`/`-U`/`+U`/`-D`), keyed by an Avro record of the key columns.
//!
//! The schemas are the ones Flink derives from the same columns
//! (`AvroSchemaConverter.convertToSchema`, Flink 2.0 with its default legacy timestamp
//! mapping), so Flink's `avro` format reads the plain records with a DDL of the table's
//! columns plus `op STRING NOT NULL`, and its `avro-confluent` format reads the framed
//! ones. The golden test below holds what Flink 2.0.0 printed for such a DDL.
//!
//! | Paimon type | Avro |
//! | --- | --- |
//! | BOOLEAN | `boolean` |
//! | TINYINT, SMALLINT, INT | `int` |
//! | BIGINT | `long` |
//! | FLOAT / DOUBLE | `float` / `double` |
//! | CHAR, VARCHAR | `string` |
//! | BINARY, VARBINARY | `bytes` |
//! | DECIMAL(p, s) | `bytes`, logical `decimal` |
//! | DATE | `int`, logical `date` |
//! | TIMESTAMP(p), TIMESTAMP(p) WITH LOCAL TIME ZONE | `long`, `timestamp-millis` (p ≤ 3) or `timestamp-micros` (p > 3; digits past the microsecond are cut) |
//!
//! A nullable column is `["null", T]` with default null (so a column added later keeps
//! the schema backward compatible in a registry); a NOT NULL column is `T`. Records are
//! named `record` in the namespace `org.apache.flink.avro.generated`, as Flink's are.
//!
//! Why a module of its own: the type mapping and the schema texts (registered under the
//! topic's subjects) are a format of their own; the row → JSON → Avro encoding is the
//! codec's ([`AvroSchema::encode_object`]).

use serde_json::{Map, Value, json};

use crate::codec::avro::{AvroSchema, CONFLUENT_MAGIC, EncodeError};
use crate::table::types::{DataType, Field};

/// The name and namespace of the records, as Flink names the ones it derives.
const RECORD_NAME: &str = "record";
const RECORD_NAMESPACE: &str = "org.apache.flink.avro.generated";

/// The Avro schemas of one table schema's changes: the value (columns + `op`) and the
/// key (the key columns), with their registry ids once registered.
#[derive(Debug, Clone)]
pub(crate) struct AvroChangeSchemas {
    key: AvroSchema,
    key_text: String,
    value: AvroSchema,
    value_text: String,
    /// `(key id, value id)`: records are framed in the Confluent wire format with them.
    ids: Option<(u32, u32)>,
}

impl AvroChangeSchemas {
    /// The schemas of records of `fields` (with `op_field` appended) keyed by the columns
    /// `key` (indices into `fields`). A column whose name Avro does not allow is an error
    /// naming it.
    pub(super) fn new(fields: &[Field], key: &[usize], op_field: &str) -> Result<Self, String> {
        let key_fields: Vec<&Field> = key.iter().filter_map(|&i| fields.get(i)).collect();
        let value_fields: Vec<&Field> = fields.iter().collect();
        let key_json = record_schema(&key_fields, None)?;
        let value_json = record_schema(&value_fields, Some(op_field))?;
        let compile = |json: &Value| {
            let text = json.to_string();
            AvroSchema::parse(&text)
                .map(|schema| (schema, text))
                .map_err(|e| format!("the derived Avro schema does not compile: {e}"))
        };
        let (key, key_text) = compile(&key_json)?;
        let (value, value_text) = compile(&value_json)?;
        Ok(AvroChangeSchemas {
            key,
            key_text,
            value,
            value_text,
            ids: None,
        })
    }

    /// The key schema's JSON text (registered under `<topic>-key`).
    pub(crate) fn key_text(&self) -> &str {
        &self.key_text
    }

    /// The value schema's JSON text (registered under `<topic>-value`).
    pub(crate) fn value_text(&self) -> &str {
        &self.value_text
    }

    /// Frames every record from now on in the Confluent wire format with these ids.
    pub(crate) fn set_ids(&mut self, key: u32, value: u32) {
        self.ids = Some((key, value));
    }

    pub(super) fn encode_key(&self, object: &Map<String, Value>) -> Result<Vec<u8>, EncodeError> {
        encode(&self.key, self.ids.map(|(k, _)| k), object)
    }

    pub(super) fn encode_value(&self, object: &Map<String, Value>) -> Result<Vec<u8>, EncodeError> {
        encode(&self.value, self.ids.map(|(_, v)| v), object)
    }
}

fn encode(
    schema: &AvroSchema,
    id: Option<u32>,
    object: &Map<String, Value>,
) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(64);
    if let Some(id) = id {
        out.push(CONFLUENT_MAGIC);
        out.extend_from_slice(&id.to_be_bytes());
    }
    schema.encode_object(object, &mut out)?;
    Ok(out)
}

/// The schema (JSON) of a record of `fields`, then a non-null string field `op`.
fn record_schema(fields: &[&Field], op: Option<&str>) -> Result<Value, String> {
    let mut out = Vec::with_capacity(fields.len() + 1);
    for field in fields {
        if !valid_avro_name(&field.name) {
            return Err(format!(
                "column `{}` is not a valid Avro field name (a letter or `_`, then letters, \
                 digits or `_`)",
                field.name
            ));
        }
        let ty = avro_type(&field.data_type);
        out.push(if field.nullable {
            json!({"name": field.name, "type": ["null", ty], "default": null})
        } else {
            json!({"name": field.name, "type": ty})
        });
    }
    if let Some(op) = op {
        out.push(json!({"name": op, "type": "string"}));
    }
    Ok(json!({
        "type": "record",
        "name": RECORD_NAME,
        "namespace": RECORD_NAMESPACE,
        "fields": out,
    }))
}

/// The Avro type of a column's values.
fn avro_type(ty: &DataType) -> Value {
    match ty {
        DataType::Boolean => json!("boolean"),
        DataType::TinyInt | DataType::SmallInt | DataType::Int => json!("int"),
        DataType::BigInt => json!("long"),
        DataType::Float => json!("float"),
        DataType::Double => json!("double"),
        DataType::Decimal { precision, scale } => json!({
            "type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale
        }),
        DataType::Char(_) | DataType::Varchar(_) => json!("string"),
        DataType::Binary(_) | DataType::Varbinary(_) => json!("bytes"),
        DataType::Date => json!({"type": "int", "logicalType": "date"}),
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
            let logical = if *p <= 3 {
                "timestamp-millis"
            } else {
                "timestamp-micros"
            };
            json!({"type": "long", "logicalType": logical})
        }
    }
}

/// Avro's rule for names: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn valid_avro_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, data_type: DataType, nullable: bool) -> Field {
        Field {
            id: 0,
            name: name.into(),
            data_type,
            nullable,
            description: None,
        }
    }

    /// What Flink 2.0.0's `AvroSchemaConverter.convertToSchema` printed for
    /// `ROW<id INT NOT NULL, b BOOLEAN, t TINYINT, s SMALLINT, l BIGINT, f FLOAT, d DOUBLE,
    /// amt DECIMAL(10,2), c CHAR(3), v VARCHAR(10), bin BINARY(4), vb BYTES, dt DATE,
    /// ts TIMESTAMP(3), ts0 TIMESTAMP(0), op STRING NOT NULL> NOT NULL` (the record
    /// inside the nullable union it prints for a nullable row).
    const FLINK_SCHEMA: &str = r#"{
      "type" : "record", "name" : "record", "namespace" : "org.apache.flink.avro.generated",
      "fields" : [
        { "name" : "id", "type" : "int" },
        { "name" : "b", "type" : [ "null", "boolean" ], "default" : null },
        { "name" : "t", "type" : [ "null", "int" ], "default" : null },
        { "name" : "s", "type" : [ "null", "int" ], "default" : null },
        { "name" : "l", "type" : [ "null", "long" ], "default" : null },
        { "name" : "f", "type" : [ "null", "float" ], "default" : null },
        { "name" : "d", "type" : [ "null", "double" ], "default" : null },
        { "name" : "amt", "type" : [ "null", { "type" : "bytes", "logicalType" : "decimal",
          "precision" : 10, "scale" : 2 } ], "default" : null },
        { "name" : "c", "type" : [ "null", "string" ], "default" : null },
        { "name" : "v", "type" : [ "null", "string" ], "default" : null },
        { "name" : "bin", "type" : [ "null", "bytes" ], "default" : null },
        { "name" : "vb", "type" : [ "null", "bytes" ], "default" : null },
        { "name" : "dt", "type" : [ "null", { "type" : "int", "logicalType" : "date" } ],
          "default" : null },
        { "name" : "ts", "type" : [ "null", { "type" : "long",
          "logicalType" : "timestamp-millis" } ], "default" : null },
        { "name" : "ts0", "type" : [ "null", { "type" : "long",
          "logicalType" : "timestamp-millis" } ], "default" : null },
        { "name" : "op", "type" : "string" }
      ]
    }"#;

    #[test]
    fn the_value_schema_is_flinks() {
        let fields = [
            field("id", DataType::Int, false),
            field("b", DataType::Boolean, true),
            field("t", DataType::TinyInt, true),
            field("s", DataType::SmallInt, true),
            field("l", DataType::BigInt, true),
            field("f", DataType::Float, true),
            field("d", DataType::Double, true),
            field(
                "amt",
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                true,
            ),
            field("c", DataType::Char(3), true),
            field("v", DataType::Varchar(10), true),
            field("bin", DataType::Binary(4), true),
            field("vb", DataType::Varbinary(i32::MAX as u32), true),
            field("dt", DataType::Date, true),
            field("ts", DataType::Timestamp(3), true),
            field("ts0", DataType::Timestamp(0), true),
        ];
        let refs: Vec<&Field> = fields.iter().collect();
        let flink: Value = serde_json::from_str(FLINK_SCHEMA).unwrap();
        assert_eq!(record_schema(&refs, Some("op")).unwrap(), flink);
        let key = record_schema(&refs[..1], None).unwrap();
        assert_eq!(key["fields"], json!([{"name": "id", "type": "int"}]));
    }

    #[test]
    fn finer_timestamps_are_micros_and_bad_names_are_named() {
        assert_eq!(
            avro_type(&DataType::Timestamp(6))["logicalType"],
            "timestamp-micros"
        );
        assert_eq!(
            avro_type(&DataType::TimestampLtz(9))["logicalType"],
            "timestamp-micros"
        );
        let bad = field("unit-price", DataType::Int, true);
        let err = AvroChangeSchemas::new(&[bad], &[0], "op").unwrap_err();
        assert!(err.contains("`unit-price`"), "{err}");
        assert!(valid_avro_name("_a1"));
        assert!(!valid_avro_name("1a"));
        assert!(!valid_avro_name(""));
    }
}
