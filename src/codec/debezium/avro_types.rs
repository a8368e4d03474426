//! The source types of a Debezium envelope's row fields, read from its Avro writer schema
//! (`debezium-avro`), so that a column added by `ALTER TABLE` gets the table type it gets
//! from `debezium-json` with schemas, not STRING as for untyped formats.
//!
//! Kafka Connect's Avro converters (Confluent's `AvroData`, and Apicurio's copy of it)
//! write a Connect schema into Avro as: the Connect type in the Avro type (`int`, with
//! `connect.type` `int8`/`int16` for the narrow ones, `long`, `float`, `double`,
//! `boolean`, `string`, `bytes`), the logical name in `connect.name` (`io.debezium.time.*`,
//! Connect `Decimal`), its parameters in `connect.parameters`, optional fields as a union
//! with `null`. Each field is turned back into the Connect field it was and typed by
//! [`super::connect_type`], the one mapping of Debezium's types. A field with an Avro
//! logical type and no Connect name (a writer that is not Connect) is typed by the logical
//! type. Debezium's envelope defines the row record inline in `before` and refers to it
//! by name in `after`; whichever holds it is read.

use serde_json::{Map, Value, json};

use super::connect_type;
use crate::codec::row::{SourceType, SourceTypes};
use crate::table::types::{DataType, MAX_LENGTH};

/// The source types of the row fields of an envelope schema; `None` when the schema is not
/// a record with an inline row record in `after` or `before`.
pub(crate) fn row_types(schema: &Value) -> Option<SourceTypes> {
    let fields = schema.get("fields")?.as_array()?;
    let row = ["after", "before"].into_iter().find_map(|name| {
        let field = fields
            .iter()
            .find(|f| f.get("name").and_then(Value::as_str) == Some(name))?;
        inline_record(field.get("type")?)
    })?;
    Some(
        row.iter()
            .filter_map(|f| {
                let name = f.get("name")?.as_str()?;
                Some((name.to_string(), source_type(f.get("type")?)))
            })
            .collect(),
    )
}

/// The fields of the record a type defines inline (itself or a union branch).
fn inline_record(avro: &Value) -> Option<&Vec<Value>> {
    match avro {
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("record") => {
            o.get("fields")?.as_array()
        }
        Value::Array(branches) => branches.iter().find_map(inline_record),
        _ => None,
    }
}

/// The source type of one field's Avro type.
fn source_type(avro: &Value) -> SourceType {
    // An optional field is `["null", T]`; any other union has no one type.
    let node = match avro {
        Value::Array(branches) => {
            let mut typed = branches.iter().filter(|b| b.as_str() != Some("null"));
            match (typed.next(), typed.next()) {
                (Some(only), None) => only,
                _ => return untyped("union"),
            }
        }
        other => other,
    };
    let (base, attrs) = match node {
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) => (
            o.get("type").and_then(Value::as_str).unwrap_or("?"),
            Some(o),
        ),
        _ => return untyped("?"),
    };
    let attr = |key: &str| attrs.and_then(|o| o.get(key));
    let logical = attr("logicalType").and_then(Value::as_str);
    if let (Some(logical), None) = (logical, attr("connect.name")) {
        return logical_type(base, logical, attrs);
    }
    let connect = match base {
        "int" => match attr("connect.type").and_then(Value::as_str) {
            Some("int8") => "int8",
            Some("int16") => "int16",
            // Connect writes no other; anything else is not a narrower integer.
            _ => "int32",
        },
        "long" => "int64",
        "float" => "float32",
        "double" => "float64",
        "boolean" => "boolean",
        "string" | "enum" => "string",
        "bytes" | "fixed" => "bytes",
        "record" => "struct",
        "array" => "array",
        "map" => "map",
        // A named type defined elsewhere.
        other => return untyped(other),
    };
    let mut field = Map::new();
    field.insert("type".into(), json!(connect));
    if let Some(name) = attr("connect.name") {
        field.insert("name".into(), name.clone());
    }
    if let Some(parameters) = attr("connect.parameters") {
        field.insert("parameters".into(), parameters.clone());
    }
    connect_type(&Value::Object(field))
}

/// The type of an Avro logical type written by something other than Connect.
fn logical_type(base: &str, logical: &str, attrs: Option<&Map<String, Value>>) -> SourceType {
    let number = |key: &str| {
        attrs
            .and_then(|o| o.get(key))
            .and_then(Value::as_u64)
            .and_then(|n| u8::try_from(n).ok())
    };
    let data_type = match logical {
        "decimal" => {
            let scale = number("scale").unwrap_or(0);
            match number("precision") {
                Some(precision) if (1..=38).contains(&precision) && scale <= precision => {
                    Some(DataType::Decimal { precision, scale })
                }
                _ => None,
            }
        }
        "date" => Some(DataType::Date),
        "timestamp-millis" => Some(DataType::Timestamp(3)),
        "timestamp-micros" => Some(DataType::Timestamp(6)),
        "timestamp-nanos" => Some(DataType::Timestamp(9)),
        "local-timestamp-millis" => Some(DataType::Timestamp(3)),
        "local-timestamp-micros" => Some(DataType::Timestamp(6)),
        "local-timestamp-nanos" => Some(DataType::Timestamp(9)),
        "uuid" => {
            return SourceType {
                data_type: Some(DataType::Varchar(MAX_LENGTH)),
                exact: false,
                described: format!("{base} ({logical})"),
            };
        }
        // Times of day and durations have no table type.
        _ => None,
    };
    SourceType {
        exact: data_type.is_some(),
        data_type,
        described: format!("{base} ({logical})"),
    }
}

fn untyped(described: &str) -> SourceType {
    SourceType {
        data_type: None,
        exact: false,
        described: described.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn typed(avro: Value) -> (Option<DataType>, bool) {
        let t = source_type(&avro);
        (t.data_type, t.exact)
    }

    /// What Apicurio's (and Confluent's) converter writes for Debezium's MariaDB types
    /// maps as the Connect JSON schema of the same columns does.
    #[test]
    fn connect_avro_types_map_as_their_connect_schemas_do() {
        let cases = [
            (json!("int"), Some(DataType::Int), true),
            (
                json!(["null", {"type": "int", "connect.type": "int16"}]),
                Some(DataType::SmallInt),
                true,
            ),
            (
                json!({"type": "int", "connect.type": "int8"}),
                Some(DataType::TinyInt),
                true,
            ),
            (json!(["null", "long"]), Some(DataType::BigInt), true),
            (json!("float"), Some(DataType::Float), true),
            (json!(["null", "double"]), Some(DataType::Double), true),
            (json!("boolean"), Some(DataType::Boolean), true),
            (
                json!(["null", "string"]),
                Some(DataType::Varchar(MAX_LENGTH)),
                false,
            ),
            (
                json!(["null", {"type": "string", "connect.parameters": {
                    "__debezium.source.column.type": "VARCHAR",
                    "__debezium.source.column.length": "32"}}]),
                Some(DataType::Varchar(32)),
                true,
            ),
            (
                json!(["null", "bytes"]),
                Some(DataType::Varbinary(MAX_LENGTH)),
                false,
            ),
            (
                json!(["null", {"type": "bytes", "scale": 2, "precision": 10,
                    "connect.version": 1,
                    "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
                    "connect.name": "org.apache.kafka.connect.data.Decimal",
                    "logicalType": "decimal"}]),
                Some(DataType::Decimal {
                    precision: 10,
                    scale: 2,
                }),
                true,
            ),
            (
                json!(["null", {"type": "int", "connect.version": 1,
                    "connect.name": "io.debezium.time.Date"}]),
                Some(DataType::Date),
                true,
            ),
            (
                json!({"type": "long", "connect.version": 1,
                    "connect.name": "io.debezium.time.Timestamp"}),
                Some(DataType::Timestamp(3)),
                true,
            ),
            (
                json!(["null", {"type": "long", "connect.version": 1,
                    "connect.name": "io.debezium.time.MicroTimestamp"}]),
                Some(DataType::Timestamp(6)),
                true,
            ),
            (
                json!(["null", {"type": "string", "connect.version": 1,
                    "connect.name": "io.debezium.time.ZonedTimestamp"}]),
                Some(DataType::TimestampLtz(6)),
                true,
            ),
            (
                json!({"type": "int", "connect.name": "io.debezium.time.Year"}),
                Some(DataType::Int),
                true,
            ),
            (
                json!({"type": "string", "connect.name": "io.debezium.data.Json"}),
                Some(DataType::Varchar(MAX_LENGTH)),
                false,
            ),
            (
                json!({"type": "long", "connect.name": "io.debezium.time.MicroTime"}),
                None,
                false,
            ),
            (json!(["null", "int", "string"]), None, false),
            (
                json!({"type": "record", "name": "R", "fields": []}),
                None,
                false,
            ),
            (json!("some.named.Type"), None, false),
        ];
        for (avro, data_type, exact) in cases {
            assert_eq!(typed(avro.clone()), (data_type, exact), "{avro}");
        }
    }

    #[test]
    fn logical_types_without_a_connect_name_map_by_the_logical_type() {
        let cases = [
            (
                json!({"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}),
                Some(DataType::Decimal {
                    precision: 12,
                    scale: 3,
                }),
            ),
            (
                json!({"type": "bytes", "logicalType": "decimal", "precision": 60}),
                None,
            ),
            (
                json!({"type": "int", "logicalType": "date"}),
                Some(DataType::Date),
            ),
            (
                json!(["null", {"type": "long", "logicalType": "timestamp-micros"}]),
                Some(DataType::Timestamp(6)),
            ),
            (
                json!({"type": "long", "logicalType": "local-timestamp-millis"}),
                Some(DataType::Timestamp(3)),
            ),
            (json!({"type": "int", "logicalType": "time-millis"}), None),
        ];
        for (avro, data_type) in cases {
            assert_eq!(typed(avro.clone()).0, data_type, "{avro}");
        }
    }

    /// Debezium's envelope: the row record inline in `before`, named in `after`.
    #[test]
    fn the_row_record_is_found_inline_in_before_when_after_names_it() {
        let schema = json!({
            "type": "record", "name": "Envelope", "fields": [
                {"name": "before", "type": ["null", {"type": "record", "name": "Value",
                    "fields": [
                        {"name": "user_id", "type": "int"},
                        {"name": "city", "type": ["null", "string"], "default": null}]}]},
                {"name": "after", "type": ["null", "Value"]},
                {"name": "op", "type": "string"}]
        });
        let types = row_types(&schema).unwrap();
        assert_eq!(types.len(), 2);
        assert_eq!(types["user_id"].data_type, Some(DataType::Int));
        assert_eq!(types["city"].data_type, Some(DataType::Varchar(MAX_LENGTH)));
        assert_eq!(row_types(&json!({"type": "record", "fields": []})), None);
        assert_eq!(row_types(&json!("string")), None);
    }
}
