//! Test helpers: a sample table, record builders, and encoders that write a change in
//! each input format (the way the CDC tools do), for unit and property tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

use super::{
    AvroSchema, AvroSchemas, CdcDecoder, CdcOptions, Format, KafkaRecord, Metadata, RowChange,
};
use crate::table::datum::{Datum, Row, datum_to_json};
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// A row change, shorter to write in expectations than the struct.
pub(crate) fn change(kind: RowKind, row: Row) -> RowChange {
    RowChange { kind, row }
}

/// A decoder of `format` for a table of `id INT` (the primary key) and `columns`, each
/// filled from a metadata value; `options` gives the rest.
pub(crate) fn metadata_decoder(
    format: Format,
    columns: &[(&str, DataType, Metadata)],
    options: CdcOptions,
) -> CdcDecoder {
    let mut fields = vec![("id".to_string(), DataType::Int, false)];
    fields.extend(
        columns
            .iter()
            .map(|(name, ty, _)| (name.to_string(), *ty, true)),
    );
    let schema = TableSchema::new(fields, vec![], vec!["id".into()], BTreeMap::new())
        .expect("a valid test schema");
    let options = CdcOptions {
        metadata: columns
            .iter()
            .map(|(name, _, m)| (name.to_string(), *m))
            .collect(),
        ..options
    };
    CdcDecoder::new(format, Arc::new(schema), options).expect("a valid test decoder")
}

/// `products(id INT PK, name STRING, weight DECIMAL(10,2), in_stock BOOLEAN,
/// updated_at TIMESTAMP(6), born DATE, score DOUBLE)`.
pub(crate) fn products() -> Arc<TableSchema> {
    Arc::new(
        TableSchema::new(
            vec![
                ("id".into(), DataType::Int, false),
                ("name".into(), DataType::Varchar(i32::MAX as u32), true),
                (
                    "weight".into(),
                    DataType::Decimal {
                        precision: 10,
                        scale: 2,
                    },
                    true,
                ),
                ("in_stock".into(), DataType::Boolean, true),
                ("updated_at".into(), DataType::Timestamp(6), true),
                ("born".into(), DataType::Date, true),
                ("score".into(), DataType::Double, true),
            ],
            vec![],
            vec!["id".into()],
            BTreeMap::new(),
        )
        .expect("valid test schema"),
    )
}

/// A record with a payload and no key.
pub(crate) fn record(payload: &[u8]) -> KafkaRecord<'_> {
    KafkaRecord {
        topic: "t",
        partition: 0,
        offset: 0,
        timestamp_ms: Some(1_700_000_000_000),
        key: None,
        payload: Some(payload),
    }
}

pub(crate) fn decoder(format: Format, options: CdcOptions) -> CdcDecoder {
    CdcDecoder::new(format, products(), options).expect("valid decoder")
}

/// The row as a JSON object in the JSON form of `datum_to_json`.
pub(crate) fn row_json(row: &Row) -> Map<String, Value> {
    let schema = products();
    schema
        .fields
        .iter()
        .zip(row)
        .map(|(f, d)| (f.name.clone(), datum_to_json(d, &f.data_type)))
        .collect()
}

/// A change to encode: an insert, an update (before, after) or a delete.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    Insert(Row),
    Update(Row, Row),
    Delete(Row),
}

/// How Debezium wrote the row values.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Style {
    /// `decimal.handling.mode=string`, ISO timestamps (e.g. via SMTs): the JSON form.
    Plain,
    /// Connect JSON: timestamps epoch micros (`MicroTimestamp`), decimals base64
    /// (Connect `Decimal`), dates epoch days.
    ConnectJson,
    /// Confluent Avro: like `ConnectJson`, but decimals are Avro decimals.
    ConnectAvro,
}

fn debezium_row(row: &Row, style: Style) -> Value {
    let mut m = row_json(row);
    if style != Style::Plain {
        if let Datum::Timestamp(ts) = &row[4] {
            m.insert("updated_at".into(), json!(ts.checked_micros()));
        }
        if let Datum::Date(d) = &row[5] {
            m.insert("born".into(), json!(d));
        }
    }
    if style == Style::ConnectJson
        && let Datum::Decimal(v) = &row[2]
    {
        m.insert("weight".into(), json!(BASE64.encode(minimal_be(*v))));
    }
    Value::Object(m)
}

fn minimal_be(v: i128) -> Vec<u8> {
    let full = v.to_be_bytes();
    let mut start = 0;
    while start < 15
        && ((full[start] == 0 && full[start + 1] & 0x80 == 0)
            || (full[start] == 0xFF && full[start + 1] & 0x80 != 0))
    {
        start += 1;
    }
    full[start..].to_vec()
}

/// The Connect schema of a Debezium envelope of `products`.
fn debezium_connect_schema() -> Value {
    let row = json!({
        "type": "struct", "optional": true, "name": "db.inventory.products.Value",
        "fields": [
            {"type": "int32", "optional": false, "field": "id"},
            {"type": "string", "optional": true, "field": "name"},
            {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
             "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"},
             "field": "weight"},
            {"type": "boolean", "optional": true, "field": "in_stock"},
            {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp",
             "version": 1, "field": "updated_at"},
            {"type": "int32", "optional": true, "name": "io.debezium.time.Date", "version": 1,
             "field": "born"},
            {"type": "double", "optional": true, "field": "score"}
        ]
    });
    let mut before = row.clone();
    before["field"] = json!("before");
    let mut after = row;
    after["field"] = json!("after");
    json!({
        "type": "struct", "optional": false, "name": "db.inventory.products.Envelope",
        "fields": [
            before, after,
            {"type": "struct", "optional": false, "name": "io.debezium.connector.mysql.Source",
             "field": "source", "fields": [
                {"type": "int64", "optional": false, "field": "ts_ms"},
                {"type": "string", "optional": false, "field": "db"},
                {"type": "string", "optional": true, "field": "table"}]},
            {"type": "string", "optional": false, "field": "op"},
            {"type": "int64", "optional": true, "field": "ts_ms"}
        ]
    })
}

fn debezium_envelope(change: &Change, style: Style) -> Value {
    let (op, before, after) = match change {
        Change::Insert(a) => ("c", Value::Null, debezium_row(a, style)),
        Change::Update(b, a) => ("u", debezium_row(b, style), debezium_row(a, style)),
        Change::Delete(b) => ("d", debezium_row(b, style), Value::Null),
    };
    json!({
        "before": before,
        "after": after,
        "source": {"version": "2.5.0.Final", "connector": "mysql", "name": "db",
                   "ts_ms": 1_700_000_000_000i64, "snapshot": "false", "db": "inventory",
                   "table": "products", "server_id": 223344, "file": "mysql-bin.000003",
                   "pos": 154, "row": 0},
        "op": op,
        "ts_ms": 1_700_000_000_123i64,
        "transaction": null
    })
}

/// Debezium JSON, with or without the `schema`/`payload` wrapper.
pub(crate) fn debezium_json(change: &Change, with_schema: bool) -> Vec<u8> {
    let style = if with_schema {
        Style::ConnectJson
    } else {
        Style::Plain
    };
    let envelope = debezium_envelope(change, style);
    let value = if with_schema {
        json!({"schema": debezium_connect_schema(), "payload": envelope})
    } else {
        envelope
    };
    value.to_string().into_bytes()
}

/// Canal's text form of a value: every non-null value a string, booleans `1`/`0`.
fn canal_value(v: &Value) -> Value {
    match v {
        Value::Null => Value::Null,
        Value::Bool(b) => json!(if *b { "1" } else { "0" }),
        Value::String(s) => json!(s),
        other => json!(other.to_string()),
    }
}

fn canal_row(row: &Row) -> Map<String, Value> {
    row_json(row)
        .into_iter()
        .map(|(k, v)| (k, canal_value(&v)))
        .collect()
}

/// The fields of `before` that differ from `after` (Canal/Maxwell `old`).
fn changed(before: &Map<String, Value>, after: &Map<String, Value>) -> Map<String, Value> {
    before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One Canal message carrying `changes` (all of the same kind).
pub(crate) fn canal_json(changes: &[Change]) -> Vec<u8> {
    let kind = match changes.first() {
        Some(Change::Insert(_)) | None => "INSERT",
        Some(Change::Update(..)) => "UPDATE",
        Some(Change::Delete(_)) => "DELETE",
    };
    let mut data = Vec::new();
    let mut old = Vec::new();
    for c in changes {
        match c {
            Change::Insert(a) | Change::Delete(a) => data.push(Value::Object(canal_row(a))),
            Change::Update(b, a) => {
                let (b, a) = (canal_row(b), canal_row(a));
                old.push(Value::Object(changed(&b, &a)));
                data.push(Value::Object(a));
            }
        }
    }
    json!({
        "data": data,
        "database": "inventory",
        "es": 1_700_000_000_000i64,
        "id": 9,
        "isDdl": false,
        "mysqlType": {"id": "int(11)", "name": "varchar(255)", "weight": "decimal(10,2)",
                      "in_stock": "tinyint(1)", "updated_at": "datetime(6)", "born": "date",
                      "score": "double"},
        "old": if kind == "UPDATE" { Value::Array(old) } else { Value::Null },
        "pkNames": ["id"],
        "sql": "",
        "sqlType": {"id": 4, "name": 12, "weight": 3, "in_stock": -6, "updated_at": 93,
                    "born": 91, "score": 8},
        "table": "products",
        "ts": 1_700_000_000_123i64,
        "type": kind
    })
    .to_string()
    .into_bytes()
}

/// Maxwell's form of a row: booleans as `1`/`0` (MySQL `TINYINT(1)`).
fn maxwell_row(row: &Row) -> Map<String, Value> {
    row_json(row)
        .into_iter()
        .map(|(k, v)| match v {
            Value::Bool(b) => (k, json!(u8::from(b))),
            other => (k, other),
        })
        .collect()
}

pub(crate) fn maxwell_json(change: &Change) -> Vec<u8> {
    let (kind, data, old) = match change {
        Change::Insert(a) => ("insert", maxwell_row(a), None),
        Change::Update(b, a) => {
            let (b, a) = (maxwell_row(b), maxwell_row(a));
            let old = changed(&b, &a);
            ("update", a, Some(old))
        }
        Change::Delete(b) => ("delete", maxwell_row(b), None),
    };
    let mut m = json!({
        "database": "inventory", "table": "products", "type": kind, "ts": 1_700_000_000i64,
        "xid": 8249, "commit": true, "data": data,
    });
    if let Some(old) = old {
        m["old"] = Value::Object(old);
    }
    m.to_string().into_bytes()
}

/// Upsert key and value of an insert (value = row) or delete (value = null).
pub(crate) fn upsert_json(change: &Change) -> (Vec<u8>, Option<Vec<u8>>) {
    let (row, delete) = match change {
        Change::Insert(a) | Change::Update(_, a) => (a, false),
        Change::Delete(b) => (b, true),
    };
    let m = row_json(row);
    let key = json!({"id": m.get("id")}).to_string().into_bytes();
    let value = (!delete).then(|| Value::Object(m).to_string().into_bytes());
    (key, value)
}

/// The Avro schema of a flat `products` record.
pub(crate) fn products_avro() -> AvroSchema {
    AvroSchema::parse(
        &json!({
            "type": "record", "name": "products", "namespace": "inventory",
            "fields": [
                {"name": "id", "type": "int"},
                {"name": "name", "type": ["null", "string"], "default": null},
                {"name": "weight", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                                      "precision": 10, "scale": 2}]},
                {"name": "in_stock", "type": ["null", "boolean"]},
                {"name": "updated_at", "type": ["null", {"type": "long",
                                                          "logicalType": "timestamp-micros"}]},
                {"name": "born", "type": ["null", {"type": "int", "logicalType": "date"}]},
                {"name": "score", "type": ["null", "double"]}
            ]
        })
        .to_string(),
    )
    .expect("valid Avro schema")
}

/// The Avro schema of a Debezium envelope of `products`, as the Confluent converter
/// writes it: `io.debezium.time.MicroTimestamp` is a plain long with `connect.name`.
pub(crate) fn debezium_avro_schema() -> AvroSchema {
    AvroSchema::parse(&debezium_avro_schema_text()).expect("valid Avro schema")
}

/// The JSON text of [`debezium_avro_schema`].
pub(crate) fn debezium_avro_schema_text() -> String {
    json!({
        "type": "record", "name": "Envelope", "namespace": "db.inventory.products",
        "connect.name": "db.inventory.products.Envelope",
        "fields": [
            {"name": "before", "default": null, "type": ["null", {
                "type": "record", "name": "Value",
                "connect.name": "db.inventory.products.Value",
                "fields": [
                    {"name": "id", "type": "int"},
                    {"name": "name", "type": ["null", "string"], "default": null},
                    {"name": "weight", "default": null, "type": ["null", {
                        "type": "bytes", "scale": 2, "precision": 10,
                        "connect.version": 1,
                        "connect.parameters": {"scale": "2",
                                               "connect.decimal.precision": "10"},
                        "connect.name": "org.apache.kafka.connect.data.Decimal",
                        "logicalType": "decimal"}]},
                    {"name": "in_stock", "type": ["null", "boolean"], "default": null},
                    {"name": "updated_at", "default": null, "type": ["null", {
                        "type": "long", "connect.version": 1,
                        "connect.name": "io.debezium.time.MicroTimestamp"}]},
                    {"name": "born", "default": null, "type": ["null", {
                        "type": "int", "connect.version": 1,
                        "connect.name": "io.debezium.time.Date"}]},
                    {"name": "score", "type": ["null", "double"], "default": null}
                ]}]},
            {"name": "after", "type": ["null", "Value"], "default": null},
            {"name": "source", "type": {
                "type": "record", "name": "Source", "namespace": "io.debezium.connector.mysql",
                "fields": [
                    {"name": "ts_ms", "type": "long"},
                    {"name": "db", "type": "string"},
                    {"name": "table", "type": ["null", "string"], "default": null}
                ]}},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": null}
        ]
    })
    .to_string()
}

/// Confluent framing of an Avro body.
pub(crate) fn confluent(id: u32, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// A flat Avro record of the row (inserts only: the `avro` format carries no kind).
pub(crate) fn avro_row(row: &Row) -> Vec<u8> {
    let mut out = Vec::new();
    products_avro()
        .encode_object(&row_json(row), &mut out)
        .expect("row fits the Avro schema");
    out
}

/// A Confluent-framed Debezium Avro envelope (schema id 7).
pub(crate) fn debezium_avro(change: &Change) -> Vec<u8> {
    let Value::Object(envelope) = debezium_envelope(change, Style::ConnectAvro) else {
        unreachable!("envelopes are objects")
    };
    let mut out = Vec::new();
    debezium_avro_schema()
        .encode_object(&envelope, &mut out)
        .expect("envelope fits the Avro schema");
    confluent(7, &out)
}

/// Options with a Confluent resolver that knows the Debezium envelope as id 7 and the
/// flat record as id 8.
pub(crate) fn avro_options(plain: bool) -> CdcOptions {
    let avro = if plain {
        AvroSchemas::Plain(Arc::new(products_avro()))
    } else {
        AvroSchemas::Confluent(Arc::new(
            super::SchemaResolver::new()
                .with_schema(7, debezium_avro_schema())
                .with_schema(8, products_avro()),
        ))
    };
    CdcOptions {
        avro: Some(avro),
        ..CdcOptions::default()
    }
}

/// A sample row.
pub(crate) fn sample_row(id: i32) -> Row {
    vec![
        Datum::Int(id),
        Datum::String("scooter".into()),
        Datum::Decimal(314),
        Datum::Boolean(true),
        Datum::Timestamp(crate::table::datum::Timestamp::from_micros(
            1_700_000_000_123_456,
        )),
        Datum::Date(19_723),
        Datum::Double(0.5),
    ]
}
