//! Debezium change events: `debezium-json` (with or without the `schema`/`payload`
//! wrapper of `value.converter.schemas.enable=true`) and the envelope of `debezium-avro`.
//!
//! `op`: `c` insert, `r` snapshot read, `u` update, `d` delete, `t` truncate (skipped),
//! `m` logical-decoding message (skipped). With the schema wrapper, the Connect schema
//! names of the `after` (or `before`) fields fix what ambiguous values mean:
//! `io.debezium.time.MicroTimestamp` numbers are microseconds, Connect `Decimal` strings
//! are base64 unscaled bytes, and so on (see [`super::coerce::Semantic`]). The Connect types
//! of the row's fields (from the JSON wrapper's schema, or from the Avro writer schema of
//! `debezium-avro`, see `avro_types`) type the columns a schema change adds.

use serde_json::{Map, Value};

use super::coerce::{Hints, semantic_of};
use super::envelope;
use super::error::{DecodeError, Part};
use super::json_value::{parse_value, type_name};
use super::row::{Emitter, MessageMeta, SourceType, SourceTypes};
use super::{Ctx, Decoded, Format, SkipReason};
use crate::table::types::{DataType, MAX_LENGTH};

mod avro_types;
pub(crate) mod shape;

pub(crate) use avro_types::row_types as avro_row_types;

/// `debezium-json`: parses the payload, unwraps `schema`/`payload`, decodes the envelope.
pub(crate) fn decode_json(ctx: &Ctx<'_, '_>) -> Result<Decoded, DecodeError> {
    let Some(root) = envelope::root(ctx)? else {
        return Ok(Decoded::Skipped(SkipReason::Tombstone));
    };
    match unwrap_schema(root)? {
        None => Ok(Decoded::Skipped(SkipReason::Tombstone)),
        Some((env, schema)) => match schema {
            Some(RowSchema { hints, types }) => {
                decode_envelope(ctx, &env, Some(&hints), Some(&types))
            }
            None => decode_envelope(ctx, &env, None, None),
        },
    }
}

/// What the Connect schema of a message says about its row's fields.
struct RowSchema {
    hints: Hints,
    types: SourceTypes,
}

/// A row object (or envelope) with what its schema says of its fields, if it had one.
type WithHints = (Map<String, Value>, Option<RowSchema>);

/// Splits a Connect JSON message with schema into its payload and the hints of its row
/// schema; a message without the wrapper is returned as is. `None` for a null payload.
fn unwrap_schema(mut root: Map<String, Value>) -> Result<Option<WithHints>, DecodeError> {
    if !(root.contains_key("schema") && root.contains_key("payload")) {
        return Ok(Some((root, None)));
    }
    let hints = root.get("schema").map(connect_row_schema);
    match root.remove("payload") {
        Some(Value::Object(payload)) => Ok(Some((payload, hints))),
        Some(Value::Null) | None => Ok(None),
        Some(other) => Err(DecodeError::envelope(
            "payload",
            format!("expected an object, got {}", type_name(&other)),
        )),
    }
}

/// Hints and source types from a Connect schema: the fields of an envelope's `after`
/// struct (or `before` when `after` is not described), or of the struct itself (a key
/// schema).
fn connect_row_schema(schema: &Value) -> RowSchema {
    let mut hints = Hints::new();
    let mut types = SourceTypes::new();
    let Some(fields) = schema.get("fields").and_then(Value::as_array) else {
        return RowSchema { hints, types };
    };
    let row_struct = ["after", "before"].into_iter().find_map(|name| {
        fields
            .iter()
            .find(|f| f.get("field").and_then(Value::as_str) == Some(name))
    });
    let row_fields = match row_struct {
        Some(s) => match s.get("fields").and_then(Value::as_array) {
            Some(f) => f,
            None => return RowSchema { hints, types },
        },
        None => fields,
    };
    for f in row_fields {
        let Some(field) = f.get("field").and_then(Value::as_str) else {
            continue;
        };
        types.insert(field.to_string(), connect_type(f));
        let Some(name) = f.get("name").and_then(Value::as_str) else {
            continue;
        };
        let scale = f
            .get("parameters")
            .and_then(|p| p.get("scale"))
            .and_then(Value::as_str);
        if let Some(semantic) = semantic_of(name, scale) {
            hints.insert(field.to_string(), semantic);
        }
    }
    RowSchema { hints, types }
}

/// The table type of a Connect schema field, as Paimon's MySQL CDC maps Debezium's
/// schemas: by the logical name (`Decimal` with `connect.decimal.precision`,
/// `io.debezium.time.*`), else by the Connect type. With Debezium's
/// `column.propagate.source.type`, a `VARCHAR(n)`/`CHAR(n)` column's length is known
/// too; otherwise a Connect `string` is a STRING of unknown bound (not exact).
fn connect_type(f: &Value) -> SourceType {
    let connect = f.get("type").and_then(Value::as_str).unwrap_or("?");
    let name = f.get("name").and_then(Value::as_str);
    let parameter = |key: &str| {
        f.get("parameters")
            .and_then(|p| p.get(key))
            .and_then(Value::as_str)
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    let described = name.map_or_else(|| connect.to_string(), |n| format!("{connect} ({n})"));
    let typed = |data_type: Option<DataType>, exact: bool| SourceType {
        data_type,
        exact,
        described: described.clone(),
    };
    let source_column_type = f
        .get("parameters")
        .and_then(|p| p.get("__debezium.source.column.type"))
        .and_then(Value::as_str)
        .map(str::to_ascii_uppercase);
    let length = parameter("__debezium.source.column.length");
    match (source_column_type.as_deref(), length) {
        (Some("VARCHAR"), Some(n)) if n >= 1 => return typed(Some(DataType::Varchar(n)), true),
        (Some("CHAR"), Some(n)) if n >= 1 => return typed(Some(DataType::Char(n)), true),
        _ => {}
    }
    match name {
        Some("org.apache.kafka.connect.data.Decimal") => {
            let scale = parameter("scale").unwrap_or(0);
            let precision = parameter("connect.decimal.precision");
            let p = precision.unwrap_or(38);
            return match (u8::try_from(p), u8::try_from(scale)) {
                (Ok(precision), Ok(scale))
                    if (1..=38).contains(&precision) && scale <= precision =>
                {
                    typed(Some(DataType::Decimal { precision, scale }), true)
                }
                _ => typed(None, false),
            };
        }
        Some("io.debezium.time.Date" | "org.apache.kafka.connect.data.Date") => {
            return typed(Some(DataType::Date), true);
        }
        Some("io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp") => {
            return typed(Some(DataType::Timestamp(3)), true);
        }
        Some("io.debezium.time.MicroTimestamp") => {
            return typed(Some(DataType::Timestamp(6)), true);
        }
        Some("io.debezium.time.NanoTimestamp") => return typed(Some(DataType::Timestamp(9)), true),
        Some("io.debezium.time.ZonedTimestamp") => {
            return typed(Some(DataType::TimestampLtz(6)), true);
        }
        Some("io.debezium.time.Year") => return typed(Some(DataType::Int), true),
        Some(
            "io.debezium.data.Json"
            | "io.debezium.data.Enum"
            | "io.debezium.data.EnumSet"
            | "io.debezium.data.Uuid"
            | "io.debezium.data.Xml",
        ) => return typed(Some(DataType::Varchar(MAX_LENGTH)), false),
        // Times of day, bit strings, variable-scale decimals, geometries: no table type.
        Some(other) if other.starts_with("io.debezium.") => return typed(None, false),
        _ => {}
    }
    match connect {
        "int8" => typed(Some(DataType::TinyInt), true),
        "int16" => typed(Some(DataType::SmallInt), true),
        "int32" => typed(Some(DataType::Int), true),
        "int64" => typed(Some(DataType::BigInt), true),
        "float32" => typed(Some(DataType::Float), true),
        "float64" => typed(Some(DataType::Double), true),
        "boolean" => typed(Some(DataType::Boolean), true),
        "string" => typed(Some(DataType::Varchar(MAX_LENGTH)), false),
        "bytes" => typed(Some(DataType::Varbinary(MAX_LENGTH)), false),
        _ => typed(None, false),
    }
}

/// Decodes one Debezium envelope (`op`, `before`, `after`, `source`, `ts_ms`), with what
/// its schema says of the row's fields (their semantics and source types), if it has one.
pub(crate) fn decode_envelope(
    ctx: &Ctx<'_, '_>,
    env: &Map<String, Value>,
    hints: Option<&Hints>,
    types: Option<&SourceTypes>,
) -> Result<Decoded, DecodeError> {
    let op = envelope::event_kind(env, "op", "a Debezium change event")?;
    let source = env.get("source").and_then(Value::as_object);
    let meta = MessageMeta {
        ingestion_ms: envelope::int(env, "ts_ms"),
        source_ms: source.and_then(|s| envelope::int(s, "ts_ms")),
        database: source.and_then(|s| envelope::text(s, "db")),
        table: source.and_then(|s| envelope::text(s, "table")),
    };
    let emit = Emitter {
        ctx,
        hints,
        types,
        meta,
    };
    let before = envelope::object(env, "before")?;
    let after = envelope::object(env, "after")?;
    let require_after = || envelope::required(after, "after", "op", op);
    let mut out = Vec::with_capacity(2);
    match op {
        "c" => emit.insert(require_after()?, &mut out)?,
        "r" => {
            if !emit.snapshot(require_after()?, &mut out)? {
                return Ok(Decoded::Skipped(SkipReason::SnapshotRead));
            }
        }
        "u" => emit.update(before, require_after()?, &mut out)?,
        "d" => match before {
            Some(before) => emit.delete(before, &mut out)?,
            None => {
                let (key, key_schema) = key_image(ctx)?;
                let emit = Emitter {
                    ctx,
                    hints: key_schema.as_ref().map(|s| &s.hints),
                    types: None,
                    meta,
                };
                emit.delete(&key, &mut out)?;
            }
        },
        "t" => return Ok(Decoded::Skipped(SkipReason::Truncate)),
        "m" => {
            return Ok(Decoded::Skipped(SkipReason::Other(
                "logical decoding message (op m)".into(),
            )));
        }
        other => {
            return Err(envelope::unknown_kind(
                "op",
                "operation",
                other,
                "c, r, u, d, t or m",
            ));
        }
    }
    Ok(Decoded::Changes(out))
}

/// The primary key of a delete without `before`, from the record key (a JSON struct,
/// possibly with its own `schema`/`payload` wrapper). Only `debezium-json` keys are read.
fn key_image(ctx: &Ctx<'_, '_>) -> Result<WithHints, DecodeError> {
    let missing = || {
        DecodeError::envelope(
            "before",
            "missing or null for op \"d\", and the record key gives no primary key",
        )
    };
    let (Format::DebeziumJson, Some(key)) = (ctx.format, ctx.record.key) else {
        return Err(missing());
    };
    let root = match parse_value(key, Part::Key)? {
        Value::Object(o) => o,
        _ => return Err(missing()),
    };
    unwrap_schema(root)?.ok_or_else(missing)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testkit::{
        Change, change, debezium_json, decoder, metadata_decoder, record, sample_row,
    };
    use super::super::*;
    use crate::table::datum::{Datum, Timestamp};
    use crate::table::types::DataType;

    fn decode(options: CdcOptions, payload: &[u8]) -> Result<Decoded, DecodeError> {
        decoder(Format::DebeziumJson, options).decode(&record(payload))
    }

    fn changes(d: Decoded) -> Vec<RowChange> {
        match d {
            Decoded::Changes(c) => c,
            other => panic!("expected changes, got {other:?}"),
        }
    }

    /// `ALTER TABLE … ADD COLUMN colour`, `MODIFY id BIGINT` as the Connect schema shows
    /// them: the row is not built; the new column is reported with its source type. A
    /// narrower or cross-family type (the user's mapping), a string of unknown bound, and a
    /// wider primary-key column (`INT UNSIGNED` comes as `int64`; no schema change may
    /// widen a key) are not: the key's values are converted one by one.
    #[test]
    fn a_connect_schema_with_a_new_field_or_a_wider_type_reports_the_columns() {
        let msg = json!({
            "schema": {"type": "struct", "optional": false, "fields": [
                {"type": "struct", "optional": true, "field": "after", "fields": [
                    {"type": "int64", "optional": false, "field": "id"},
                    {"type": "string", "optional": true, "field": "colour"},
                    {"type": "int32", "optional": true, "field": "score"},
                    {"type": "string", "optional": true, "field": "name", "parameters": {
                        "__debezium.source.column.type": "VARCHAR",
                        "__debezium.source.column.length": "40"}},
                    {"type": "int16", "optional": true, "field": "in_stock"}]},
                {"type": "string", "optional": false, "field": "op"}]},
            "payload": {"before": null, "op": "c",
                "after": {"id": 1, "colour": "red", "score": 3, "name": "x", "in_stock": 1}}
        })
        .to_string();
        let strict = CdcOptions {
            strict: true,
            ..CdcOptions::default()
        };
        let Err(DecodeError::SchemaChanged { columns, .. }) = decode(strict, msg.as_bytes()) else {
            panic!("the schema change is reported");
        };
        let by_name: std::collections::BTreeMap<&str, &SourceColumn> =
            columns.iter().map(|c| (c.name.as_str(), c)).collect();
        assert_eq!(by_name.len(), 1, "{columns:?}");
        assert_eq!(
            by_name["colour"].source_type,
            Some(DataType::Varchar(crate::table::types::MAX_LENGTH))
        );
        assert_eq!(by_name["colour"].table_type, None);
        let text = DecodeError::SchemaChanged {
            row: None,
            columns: columns.clone(),
        }
        .to_string();
        assert!(
            text.contains("field `colour` (STRING) is not a column"),
            "{text}"
        );
        // Ignoring unknown fields drops `colour`; the key's `int64` value fits its INT.
        let decoded = changes(decode(CdcOptions::default(), msg.as_bytes()).unwrap());
        assert_eq!(decoded.len(), 1);
        assert_eq!(decoded[0].row[0], Datum::Int(1));
    }

    #[test]
    fn connect_types_map_as_paimons_mysql_cdc_maps_them() {
        let cases = [
            (json!({"type": "int8"}), Some(DataType::TinyInt), true),
            (json!({"type": "int64"}), Some(DataType::BigInt), true),
            (json!({"type": "float32"}), Some(DataType::Float), true),
            (
                json!({"type": "string"}),
                Some(DataType::Varchar(crate::table::types::MAX_LENGTH)),
                false,
            ),
            (
                json!({"type": "string", "parameters": {"__debezium.source.column.type": "CHAR",
                "__debezium.source.column.length": "3"}}),
                Some(DataType::Char(3)),
                true,
            ),
            (
                json!({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2", "connect.decimal.precision": "12"}}),
                Some(DataType::Decimal {
                    precision: 12,
                    scale: 2,
                }),
                true,
            ),
            (
                json!({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}),
                Some(DataType::Timestamp(6)),
                true,
            ),
            (
                json!({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}),
                Some(DataType::TimestampLtz(6)),
                true,
            ),
            (
                json!({"type": "int64", "name": "io.debezium.time.MicroTime"}),
                None,
                false,
            ),
            (json!({"type": "struct"}), None, false),
        ];
        for (field, data_type, exact) in cases {
            let got = super::connect_type(&field);
            assert_eq!((got.data_type, got.exact), (data_type, exact), "{field}");
        }
    }

    #[test]
    fn create_without_schema_coerces_every_column() {
        // As the MySQL connector writes it with schemas.enable=false and
        // decimal.handling.mode=string.
        let msg = json!({
            "before": null,
            "after": {"id": 1001, "name": "scooter", "weight": "3.14", "in_stock": true,
                      "updated_at": "2023-11-14T22:13:20.123456Z", "born": "2024-01-01",
                      "score": 0.5, "extra": "ignored"},
            "source": {"version": "2.5.0.Final", "connector": "mysql", "name": "db",
                       "ts_ms": 1700000000000i64, "db": "inventory", "table": "products"},
            "op": "c", "ts_ms": 1700000000123i64, "transaction": null
        });
        let got = changes(decode(CdcOptions::default(), msg.to_string().as_bytes()).unwrap());
        assert_eq!(got, vec![change(RowKind::Insert, sample_row(1001))]);
    }

    #[test]
    fn schema_envelope_fixes_micro_timestamps_and_connect_decimals() {
        let c = Change::Insert(sample_row(7));
        let got = changes(decode(CdcOptions::default(), &debezium_json(&c, true)).unwrap());
        assert_eq!(got[0].row, sample_row(7));
        // The same number without the schema is read as epoch millis (the default unit)…
        let plain = json!({"op": "c", "after": {"id": 7, "updated_at": 1_700_000_000_123_456i64}});
        let err = decode(CdcOptions::default(), plain.to_string().as_bytes());
        let row = &changes(err.unwrap())[0].row;
        assert_ne!(row[4], sample_row(7)[4]);
        // …unless the epoch unit says otherwise.
        let micros = CdcOptions {
            epoch_unit: EpochUnit::Micros,
            ..CdcOptions::default()
        };
        let row = &changes(decode(micros, plain.to_string().as_bytes()).unwrap())[0].row;
        assert_eq!(row[4], sample_row(7)[4]);
    }

    #[test]
    fn updates_follow_the_update_mode() {
        let before = sample_row(1);
        let mut after = sample_row(1);
        after[1] = Datum::String("bike".into());
        let msg = debezium_json(&Change::Update(before.clone(), after.clone()), false);
        let got = changes(decode(CdcOptions::default(), &msg).unwrap());
        assert_eq!(
            got,
            vec![
                change(RowKind::Delete, before.clone()),
                change(RowKind::Insert, after.clone())
            ]
        );
        let changelog = CdcOptions {
            update_mode: UpdateMode::UpdateBeforeAfter,
            ..CdcOptions::default()
        };
        let kinds: Vec<RowKind> = changes(decode(changelog, &msg).unwrap())
            .iter()
            .map(|c| c.kind)
            .collect();
        assert_eq!(kinds, vec![RowKind::UpdateBefore, RowKind::UpdateAfter]);
        // Upsert: the after image alone, unless the key changed.
        let upsert = CdcOptions {
            update_mode: UpdateMode::Upsert,
            ..CdcOptions::default()
        };
        let got = changes(decode(upsert.clone(), &msg).unwrap());
        assert_eq!(got, vec![change(RowKind::UpdateAfter, after.clone())]);
        let mut moved = after.clone();
        moved[0] = Datum::Int(2);
        let msg = debezium_json(&Change::Update(before.clone(), moved.clone()), false);
        let got = changes(decode(upsert, &msg).unwrap());
        assert_eq!(
            got,
            vec![
                change(RowKind::Delete, before.clone()),
                change(RowKind::UpdateAfter, moved)
            ]
        );
        // No before image (PostgreSQL REPLICA IDENTITY DEFAULT): an upsert of after.
        let no_before = json!({"op": "u", "before": null, "after": {"id": 1, "name": "bike"}});
        let got = changes(decode(CdcOptions::default(), no_before.to_string().as_bytes()).unwrap());
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].kind, RowKind::Insert);
        // A partial before image is completed from after.
        let partial = json!({"op": "u", "before": {"id": 1, "name": "old"},
                             "after": {"id": 1, "name": "new", "score": 2.0}});
        let got = changes(decode(CdcOptions::default(), partial.to_string().as_bytes()).unwrap());
        assert_eq!(got[0].row[1], Datum::String("old".into()));
        assert_eq!(got[0].row[6], Datum::Double(2.0));
    }

    #[test]
    fn deletes_use_before_or_the_key() {
        let msg = debezium_json(&Change::Delete(sample_row(3)), true);
        let got = changes(decode(CdcOptions::default(), &msg).unwrap());
        assert_eq!(got, vec![change(RowKind::Delete, sample_row(3))]);
        let payload = json!({"op": "d", "before": null, "after": null}).to_string();
        let key = json!({"schema": {"type": "struct", "fields": [
                            {"type": "int32", "optional": false, "field": "id"}]},
                         "payload": {"id": 3}})
        .to_string();
        let mut rec = record(payload.as_bytes());
        rec.key = Some(key.as_bytes());
        let got = changes(
            decoder(Format::DebeziumJson, CdcOptions::default())
                .decode(&rec)
                .unwrap(),
        );
        assert_eq!(got[0].kind, RowKind::Delete);
        assert_eq!(got[0].row[0], Datum::Int(3));
        let err = decode(CdcOptions::default(), payload.as_bytes()).unwrap_err();
        assert_eq!(err.code(), "envelope");
        assert!(err.to_string().contains("`before`"), "{err}");
    }

    #[test]
    fn snapshots_truncates_tombstones_and_messages() {
        let read = json!({"op": "r", "after": {"id": 1}}).to_string();
        let got = changes(decode(CdcOptions::default(), read.as_bytes()).unwrap());
        assert_eq!(got[0].kind, RowKind::Insert);
        let skip = CdcOptions {
            snapshot_mode: SnapshotMode::Skip,
            ..CdcOptions::default()
        };
        assert_eq!(
            decode(skip, read.as_bytes()),
            Ok(Decoded::Skipped(SkipReason::SnapshotRead))
        );
        let t = json!({"op": "t", "before": null, "after": null}).to_string();
        assert_eq!(
            decode(CdcOptions::default(), t.as_bytes()),
            Ok(Decoded::Skipped(SkipReason::Truncate))
        );
        let m = json!({"op": "m", "message": {"prefix": "x"}}).to_string();
        assert!(matches!(
            decode(CdcOptions::default(), m.as_bytes()),
            Ok(Decoded::Skipped(SkipReason::Other(_)))
        ));
        let mut tombstone = record(b"");
        tombstone.payload = None;
        assert_eq!(
            decoder(Format::DebeziumJson, CdcOptions::default()).decode(&tombstone),
            Ok(Decoded::Skipped(SkipReason::Tombstone))
        );
        let null_payload = json!({"schema": null, "payload": null}).to_string();
        assert_eq!(
            decode(CdcOptions::default(), null_payload.as_bytes()),
            Ok(Decoded::Skipped(SkipReason::Tombstone))
        );
    }

    #[test]
    fn errors_name_the_field_the_type_and_the_value() {
        let bad = json!({"op": "c", "after": {"id": "x1", "weight": "12.345", "born": "soon"}});
        let err = decode(CdcOptions::default(), bad.to_string().as_bytes()).unwrap_err();
        let text = err.to_string();
        assert_eq!(err.code(), "column");
        assert!(text.contains("column `id` (INT NOT NULL)"), "{text}");
        assert!(text.contains("got \"x1\""), "{text}");
        assert!(text.contains("column `weight` (DECIMAL(10, 2))"), "{text}");
        assert!(text.contains("column `born` (DATE)"), "{text}");
        let DecodeError::Columns { errors, .. } = err else {
            panic!("column errors expected")
        };
        assert_eq!(errors.len(), 3);
        let missing = json!({"op": "c", "after": {"name": "x"}}).to_string();
        let err = decode(CdcOptions::default(), missing.as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("primary-key column is missing"),
            "{err}"
        );
        for (payload, code, needle) in [
            ("{", "malformed", "not valid JSON"),
            ("[1]", "malformed", "an array"),
            (r#"{"after": {}}"#, "envelope", "`op`"),
            (r#"{"op": 5}"#, "envelope", "a number"),
            (r#"{"op": "x"}"#, "envelope", "unknown operation"),
            (r#"{"op": "c", "after": 3}"#, "envelope", "`after`"),
            (r#"{"op": "c"}"#, "envelope", "missing or null"),
        ] {
            let err = decode(CdcOptions::default(), payload.as_bytes()).unwrap_err();
            assert_eq!(err.code(), code, "{payload}: {err}");
            assert!(err.to_string().contains(needle), "{payload}: {err}");
        }
    }

    #[test]
    fn metadata_columns_and_strict_mode() {
        let strict = CdcOptions {
            strict: true,
            ..CdcOptions::default()
        };
        let dec = metadata_decoder(
            Format::DebeziumJson,
            &[
                ("ts", DataType::Timestamp(3), Metadata::IngestionTimestamp),
                ("src_ms", DataType::BigInt, Metadata::SourceTimestamp),
                ("db", DataType::Varchar(100), Metadata::Database),
                ("tbl", DataType::Varchar(100), Metadata::Table),
                ("off", DataType::BigInt, Metadata::Offset),
            ],
            strict,
        );
        let msg = json!({"op": "c", "after": {"id": 1}, "ts_ms": 1_700_000_000_123i64,
                         "source": {"ts_ms": 1_700_000_000_000i64, "db": "inv", "table": "p"}});
        let bytes = msg.to_string();
        let mut rec = record(bytes.as_bytes());
        rec.offset = 42;
        let Decoded::Changes(got) = dec.decode(&rec).unwrap() else {
            panic!("changes expected")
        };
        assert_eq!(
            got[0].row,
            vec![
                Datum::Int(1),
                Datum::Timestamp(Timestamp {
                    millis: 1_700_000_000_123,
                    nanos_of_milli: 0
                }),
                Datum::BigInt(1_700_000_000_000),
                Datum::String("inv".into()),
                Datum::String("p".into()),
                Datum::BigInt(42),
            ]
        );
        let extra = json!({"op": "c", "after": {"id": 1, "shoe_size": 44}}).to_string();
        let err = dec.decode(&record(extra.as_bytes())).unwrap_err();
        assert_eq!(err.code(), "schema-changed");
        assert!(err.to_string().contains("shoe_size"), "{err}");
    }
}

#[cfg(test)]
mod real_avro_output;
#[cfg(test)]
mod real_output;
