//! Encoding a table's changes as Kafka records, for `[[changelog]]` pipelines.
//!
//! - `debezium-json`: Debezium's envelope without a schema: `before`, `after`, `source`,
//!   `op` and `ts_ms`. `+I` is `c`; a `-U` directly followed by the `+U` of the same key
//!   is one `u` with both images, as Debezium reports an update; a `+U` alone is a `u`
//!   without `before` (as Debezium with PostgreSQL's `REPLICA IDENTITY DEFAULT`); a `-U`
//!   alone, and `-D`, are `d` with `before`. A `-D` is followed by a tombstone (the key
//!   with a null value), as Debezium's `tombstones.on.delete` does, so compacted topics
//!   drop the key.
//! - `json`: the row as a JSON object with an `op` member of `+I`/`-U`/`+U`/`-D`, one
//!   record per change (what lakejoin's `json` CDC format reads with
//!   `row_kind_field = "op"`).
//! - `avro`: the row as an Avro record with the same `op` (see [`avro`] for the schema,
//!   Flink's), plain or in the Confluent wire format once the schemas are registered.
//!
//! The key is an object of the key columns (by default the primary key): JSON, or an
//! Avro record for `avro`. So every change of a key lands in one partition, in order.
//!
//! Why in the codec layer: it is the inverse of the CDC decoders, over the same row and
//! JSON value conversions, and nothing here knows Kafka or the table's files.

use serde_json::{Map, Value, json};

use super::avro::EncodeError;

use crate::table::TableIdentifier;
use crate::table::datum::{Row, datum_to_json};
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;

mod avro;

pub(crate) use avro::{AvroChangeSchemas, valid_avro_name};

/// The member of a `json` or `avro` record holding the row kind.
pub(crate) const OP_FIELD: &str = "op";

/// A changelog record's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeFormat {
    DebeziumJson,
    Json,
    Avro,
}

impl ChangeFormat {
    pub(crate) fn parse(name: &str) -> Option<Self> {
        match name {
            "debezium-json" => Some(Self::DebeziumJson),
            "json" => Some(Self::Json),
            "avro" => Some(Self::Avro),
            _ => None,
        }
    }
}

/// One record to produce: its key and value (`None`: a tombstone).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChangeRecord {
    pub(crate) key: Vec<u8>,
    pub(crate) value: Option<Vec<u8>>,
}

/// Where a snapshot's changes come from, as the Debezium `source` block names it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChangeSource {
    pub(crate) snapshot: i64,
    /// The snapshot's commit time (milliseconds since the epoch): the records' `ts_ms`.
    pub(crate) time_millis: i64,
}

/// Encodes one table's changes.
#[derive(Debug, Clone)]
pub(crate) struct ChangeEncoder {
    format: ChangeFormat,
    schema: TableSchema,
    /// Columns of the Kafka key.
    key: Vec<usize>,
    /// Primary-key columns: a `-U`/`+U` pair is one update only for one key.
    primary_key: Vec<usize>,
    database: String,
    table: String,
    /// The schemas of `avro` records.
    avro: Option<AvroChangeSchemas>,
}

impl ChangeEncoder {
    /// An encoder of `table`'s changes; `key` names the key columns (empty: the primary
    /// key). Unknown columns, and for `avro` column names Avro does not allow, are an
    /// error naming them.
    pub(crate) fn new(
        format: ChangeFormat,
        schema: TableSchema,
        key: &[String],
        table: &TableIdentifier,
    ) -> Result<Self, String> {
        let primary_key = schema.primary_key_indices();
        let key = if key.is_empty() {
            primary_key.clone()
        } else {
            let mut indices = Vec::new();
            for column in key {
                match schema.fields.iter().position(|f| &f.name == column) {
                    Some(i) => indices.push(i),
                    None => {
                        return Err(format!("key column `{column}` is not a column of {table}"));
                    }
                }
            }
            indices
        };
        let avro = match format {
            ChangeFormat::Avro => Some(AvroChangeSchemas::new(&schema.fields, &key, OP_FIELD)?),
            ChangeFormat::DebeziumJson | ChangeFormat::Json => None,
        };
        Ok(ChangeEncoder {
            format,
            schema,
            key,
            primary_key,
            database: table.database.clone(),
            table: table.name.clone(),
            avro,
        })
    }

    pub(crate) fn format(&self) -> ChangeFormat {
        self.format
    }

    /// The Avro schemas of an `avro` encoder (to register them, and frame the records
    /// with their ids).
    pub(crate) fn avro_schemas_mut(&mut self) -> Option<&mut AvroChangeSchemas> {
        self.avro.as_mut()
    }

    /// The records of one snapshot's changes, in order. Only `avro` can fail: a value
    /// that does not fit its column's Avro type (a broken invariant, as the schema is
    /// derived from the same columns).
    pub(crate) fn encode(
        &self,
        changes: &[(RowKind, &Row)],
        source: ChangeSource,
    ) -> Result<Vec<ChangeRecord>, EncodeError> {
        let mut records = Vec::with_capacity(changes.len());
        let mut i = 0;
        while let Some(&(kind, row)) = changes.get(i) {
            i += 1;
            if let Some(avro) = &self.avro {
                let mut object = self.row_object(row);
                object.insert(OP_FIELD.into(), Value::String(kind.short_string().into()));
                records.push(ChangeRecord {
                    key: avro.encode_key(&self.key_object(row))?,
                    value: Some(avro.encode_value(&object)?),
                });
                continue;
            }
            let key = Value::Object(self.key_object(row)).to_string().into_bytes();
            match self.format {
                ChangeFormat::Json | ChangeFormat::Avro => {
                    let mut object = self.row_object(row);
                    object.insert(OP_FIELD.into(), Value::String(kind.short_string().into()));
                    records.push(ChangeRecord {
                        key,
                        value: Some(Value::Object(object).to_string().into_bytes()),
                    });
                }
                ChangeFormat::DebeziumJson => {
                    let paired = match (kind, changes.get(i)) {
                        (RowKind::UpdateBefore, Some(&(RowKind::UpdateAfter, after)))
                            if self.same_key(row, after) =>
                        {
                            i += 1;
                            Some(after)
                        }
                        _ => None,
                    };
                    let (op, before, after) = match (kind, paired) {
                        (_, Some(after)) => ("u", Some(row), Some(after)),
                        (RowKind::Insert, None) => ("c", None, Some(row)),
                        (RowKind::UpdateAfter, None) => ("u", None, Some(row)),
                        (RowKind::UpdateBefore | RowKind::Delete, None) => ("d", Some(row), None),
                    };
                    let envelope = json!({
                        "before": before.map(|r| Value::Object(self.row_object(r))),
                        "after": after.map(|r| Value::Object(self.row_object(r))),
                        "source": {
                            "connector": "lakejoin",
                            "db": self.database,
                            "table": self.table,
                            "snapshot": source.snapshot,
                            "ts_ms": source.time_millis,
                        },
                        "op": op,
                        "ts_ms": source.time_millis,
                    });
                    records.push(ChangeRecord {
                        key: key.clone(),
                        value: Some(envelope.to_string().into_bytes()),
                    });
                    if kind == RowKind::Delete {
                        records.push(ChangeRecord { key, value: None });
                    }
                }
            }
        }
        Ok(records)
    }

    fn same_key(&self, a: &Row, b: &Row) -> bool {
        self.primary_key
            .iter()
            .chain(&self.key)
            .all(|&i| a.get(i) == b.get(i))
    }

    fn row_object(&self, row: &Row) -> Map<String, Value> {
        let mut object = Map::with_capacity(self.schema.fields.len() + 1);
        for (field, datum) in self.schema.fields.iter().zip(row) {
            object.insert(field.name.clone(), datum_to_json(datum, &field.data_type));
        }
        object
    }

    fn key_object(&self, row: &Row) -> Map<String, Value> {
        let mut object = Map::with_capacity(self.key.len());
        for &i in &self.key {
            if let (Some(field), Some(datum)) = (self.schema.fields.get(i), row.get(i)) {
                object.insert(field.name.clone(), datum_to_json(datum, &field.data_type));
            }
        }
        object
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::Datum;
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;

    fn encoder(format: ChangeFormat, key: &[&str]) -> ChangeEncoder {
        let schema = keyed_schema(
            &[
                ("id", DataType::Int),
                ("name", DataType::Varchar(10)),
                ("total", DataType::BigInt),
            ],
            &["id"],
            &[],
        );
        let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
        let table = TableIdentifier::parse("shop.users").unwrap();
        ChangeEncoder::new(format, schema, &key, &table).unwrap()
    }

    fn row(id: i32, name: &str, total: i64) -> Row {
        vec![
            Datum::Int(id),
            Datum::String(name.into()),
            Datum::BigInt(total),
        ]
    }

    const SOURCE: ChangeSource = ChangeSource {
        snapshot: 7,
        time_millis: 1_700_000_000_000,
    };

    fn values(records: &[ChangeRecord]) -> Vec<(Value, Option<Value>)> {
        records
            .iter()
            .map(|r| {
                (
                    serde_json::from_slice(&r.key).unwrap(),
                    r.value.as_ref().map(|v| serde_json::from_slice(v).unwrap()),
                )
            })
            .collect()
    }

    #[test]
    fn debezium_pairs_an_update_and_follows_a_delete_with_a_tombstone() {
        let (a, a2, b, c) = (
            row(1, "ada", 5),
            row(1, "ada", 9),
            row(2, "bo", 1),
            row(3, "cy", 2),
        );
        let changes = [
            (RowKind::Insert, &b),
            (RowKind::UpdateBefore, &a),
            (RowKind::UpdateAfter, &a2),
            (RowKind::Delete, &c),
            (RowKind::UpdateAfter, &b),
        ];
        let out = values(
            &encoder(ChangeFormat::DebeziumJson, &[])
                .encode(&changes, SOURCE)
                .unwrap(),
        );
        assert_eq!(out.len(), 5, "{out:?}");
        let (key, value) = &out[0];
        assert_eq!(key, &json!({"id": 2}));
        let value = value.as_ref().unwrap();
        assert_eq!(value["op"], "c");
        assert_eq!(value["before"], Value::Null);
        assert_eq!(value["after"], json!({"id": 2, "name": "bo", "total": 1}));
        assert_eq!(value["ts_ms"], 1_700_000_000_000_i64);
        assert_eq!(value["source"]["table"], "users");
        assert_eq!(value["source"]["db"], "shop");
        assert_eq!(value["source"]["snapshot"], 7);
        let update = out[1].1.as_ref().unwrap();
        assert_eq!(update["op"], "u");
        assert_eq!(update["before"]["total"], 5);
        assert_eq!(update["after"]["total"], 9);
        let delete = out[2].1.as_ref().unwrap();
        assert_eq!(delete["op"], "d");
        assert_eq!(delete["before"]["id"], 3);
        assert_eq!(delete["after"], Value::Null);
        assert_eq!(
            out[3],
            (json!({"id": 3}), None),
            "the tombstone of the delete"
        );
        let lone = out[4].1.as_ref().unwrap();
        assert_eq!(
            (lone["op"].as_str(), &lone["before"]),
            (Some("u"), &Value::Null)
        );
    }

    #[test]
    fn debezium_pairs_only_the_same_key_and_a_lone_retraction_is_a_delete() {
        let (a, b) = (row(1, "ada", 5), row(2, "bo", 1));
        let changes = [(RowKind::UpdateBefore, &a), (RowKind::UpdateAfter, &b)];
        let out = values(
            &encoder(ChangeFormat::DebeziumJson, &[])
                .encode(&changes, SOURCE)
                .unwrap(),
        );
        let ops: Vec<&str> = out
            .iter()
            .map(|(_, v)| v.as_ref().unwrap()["op"].as_str().unwrap())
            .collect();
        assert_eq!(
            ops,
            ["d", "u"],
            "no tombstone after a retraction that is no delete"
        );
        // The key column changed: the before and after belong to two Kafka keys.
        let renamed = row(1, "eve", 5);
        let changes = [
            (RowKind::UpdateBefore, &a),
            (RowKind::UpdateAfter, &renamed),
        ];
        let out = values(
            &encoder(ChangeFormat::DebeziumJson, &["name"])
                .encode(&changes, SOURCE)
                .unwrap(),
        );
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].0, json!({"name": "ada"}));
        assert_eq!(out[1].0, json!({"name": "eve"}));
    }

    #[test]
    fn json_adds_the_row_kind_and_keeps_every_change() {
        let (a, a2) = (row(1, "ada", 5), row(1, "ada", 9));
        let changes = [
            (RowKind::Insert, &a),
            (RowKind::UpdateBefore, &a),
            (RowKind::UpdateAfter, &a2),
            (RowKind::Delete, &a2),
        ];
        let out = values(
            &encoder(ChangeFormat::Json, &["id", "name"])
                .encode(&changes, SOURCE)
                .unwrap(),
        );
        let ops: Vec<&str> = out
            .iter()
            .map(|(_, v)| v.as_ref().unwrap()["op"].as_str().unwrap())
            .collect();
        assert_eq!(ops, ["+I", "-U", "+U", "-D"]);
        assert_eq!(out[0].0, json!({"id": 1, "name": "ada"}));
        assert_eq!(
            out[2].1,
            Some(json!({"id": 1, "name": "ada", "total": 9, "op": "+U"}))
        );
    }

    /// Decodes Avro `bytes` with apache-avro, the oracle.
    fn avro_fields(schema: &str, bytes: &[u8]) -> Vec<(String, AvroValue)> {
        let schema = apache_avro::Schema::parse_str(schema).unwrap();
        let mut reader = bytes;
        let value = apache_avro::reader::datum::GenericDatumReader::builder(&schema)
            .build()
            .unwrap()
            .read_value(&mut reader)
            .unwrap();
        assert!(reader.is_empty(), "bytes left after the datum");
        match value {
            AvroValue::Record(fields) => fields,
            other => panic!("not a record: {other:?}"),
        }
    }

    use apache_avro::types::Value as AvroValue;

    #[test]
    fn avro_records_decode_with_apache_avro_and_are_framed_once_registered() {
        let mut e = encoder(ChangeFormat::Avro, &[]);
        let (a, a2) = (row(1, "ada", 5), row(1, "ada", 9));
        let changes = [
            (RowKind::Insert, &a),
            (RowKind::UpdateBefore, &a),
            (RowKind::UpdateAfter, &a2),
            (RowKind::Delete, &a2),
        ];
        let plain = e.encode(&changes, SOURCE).unwrap();
        assert_eq!(plain.len(), 4, "one record per change, no tombstone");
        let schemas = e.avro_schemas_mut().unwrap().clone();
        let ops: Vec<AvroValue> = plain
            .iter()
            .map(|r| {
                let fields = avro_fields(schemas.value_text(), r.value.as_deref().unwrap());
                fields.last().unwrap().1.clone()
            })
            .collect();
        let op = |s: &str| AvroValue::String(s.into());
        assert_eq!(ops, [op("+I"), op("-U"), op("+U"), op("-D")]);
        assert_eq!(
            avro_fields(schemas.value_text(), plain[2].value.as_deref().unwrap()),
            [
                ("id".to_string(), AvroValue::Int(1)),
                (
                    "name".to_string(),
                    AvroValue::Union(1, Box::new(AvroValue::String("ada".into())))
                ),
                (
                    "total".to_string(),
                    AvroValue::Union(1, Box::new(AvroValue::Long(9)))
                ),
                ("op".to_string(), op("+U")),
            ]
        );
        assert_eq!(
            avro_fields(schemas.key_text(), &plain[0].key),
            [("id".to_string(), AvroValue::Int(1))]
        );
        e.avro_schemas_mut().unwrap().set_ids(7, 8);
        let framed = e.encode(&changes, SOURCE).unwrap();
        for (f, p) in framed.iter().zip(&plain) {
            assert_eq!(f.key[..5], [0, 0, 0, 0, 7]);
            assert_eq!(f.key[5..], p.key[..]);
            let (fv, pv) = (f.value.as_deref().unwrap(), p.value.as_deref().unwrap());
            assert_eq!(fv[..5], [0, 0, 0, 0, 8]);
            assert_eq!(fv[5..], pv[..]);
        }
    }

    proptest::proptest! {
        /// Every type's values, null or not, encode into the derived schema and decode
        /// back with apache-avro to the same values.
        #[test]
        fn avro_values_of_every_type_decode_with_apache_avro(
            id in proptest::prelude::any::<i32>(),
            flag in proptest::option::of(proptest::prelude::any::<bool>()),
            small in proptest::option::of(proptest::prelude::any::<i16>()),
            amount in proptest::option::of(-999_999_999_999_i128..999_999_999_999_i128),
            text in proptest::option::of("\\PC{0,12}"),
            bytes in proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8)),
            day in proptest::option::of(-100_000i32..100_000),
            millis in proptest::option::of(-10_000_000_000_000i64..10_000_000_000_000),
            micros_part in 0u32..1000,
            real in proptest::option::of(-1e12f64..1e12),
        ) {
            use crate::table::datum::Timestamp;
            let schema = keyed_schema(
                &[
                    ("id", DataType::Int),
                    ("flag", DataType::Boolean),
                    ("small", DataType::SmallInt),
                    ("amount", DataType::Decimal { precision: 12, scale: 2 }),
                    ("text", DataType::Varchar(100)),
                    ("raw", DataType::Varbinary(100)),
                    ("day", DataType::Date),
                    ("at", DataType::Timestamp(3)),
                    ("at_us", DataType::Timestamp(6)),
                    ("real", DataType::Double),
                ],
                &["id"],
                &[],
            );
            let table = TableIdentifier::parse("shop.all").unwrap();
            let e = ChangeEncoder::new(ChangeFormat::Avro, schema, &[], &table).unwrap();
            let or_null = |d: Option<Datum>| d.unwrap_or(Datum::Null);
            let ts = |nanos_of_milli| millis.map(|millis| Datum::Timestamp(Timestamp { millis, nanos_of_milli }));
            let row = vec![
                Datum::Int(id),
                or_null(flag.map(Datum::Boolean)),
                or_null(small.map(Datum::SmallInt)),
                or_null(amount.map(Datum::Decimal)),
                or_null(text.clone().map(|s| Datum::String(s.into()))),
                or_null(bytes.clone().map(Datum::Bytes)),
                or_null(day.map(Datum::Date)),
                or_null(ts(0)),
                or_null(ts(micros_part * 1000)),
                or_null(real.map(Datum::Double)),
            ];
            let records = e.encode(&[(RowKind::Insert, &row)], SOURCE).unwrap();
            let value_text = e.avro.as_ref().unwrap().value_text().to_string();
            let fields = avro_fields(&value_text, records[0].value.as_deref().unwrap());
            let nullable = |v: Option<AvroValue>| match v {
                None => AvroValue::Union(0, Box::new(AvroValue::Null)),
                Some(v) => AvroValue::Union(1, Box::new(v)),
            };
            let decimal = |f: &AvroValue| match f {
                AvroValue::Union(1, d) => match d.as_ref() {
                    AvroValue::Decimal(d) => {
                        let be: Vec<u8> = Vec::try_from(d.clone()).unwrap();
                        let fill = if be.first().is_some_and(|b| b & 0x80 != 0) { 0xff } else { 0 };
                        let mut full = [fill; 16];
                        full[16 - be.len()..].copy_from_slice(&be);
                        Some(i128::from_be_bytes(full))
                    }
                    other => panic!("not a decimal: {other:?}"),
                },
                _ => None,
            };
            let got: Vec<AvroValue> = fields.iter().map(|(_, v)| v.clone()).collect();
            proptest::prop_assert_eq!(&got[0], &AvroValue::Int(id));
            proptest::prop_assert_eq!(&got[1], &nullable(flag.map(AvroValue::Boolean)));
            proptest::prop_assert_eq!(&got[2], &nullable(small.map(|v| AvroValue::Int(v.into()))));
            proptest::prop_assert_eq!(decimal(&got[3]), amount);
            proptest::prop_assert_eq!(&got[4], &nullable(text.map(AvroValue::String)));
            proptest::prop_assert_eq!(&got[5], &nullable(bytes.map(AvroValue::Bytes)));
            proptest::prop_assert_eq!(&got[6], &nullable(day.map(AvroValue::Date)));
            proptest::prop_assert_eq!(&got[7], &nullable(millis.map(AvroValue::TimestampMillis)));
            proptest::prop_assert_eq!(
                &got[8],
                &nullable(millis.map(|m| AvroValue::TimestampMicros(m * 1000 + i64::from(micros_part))))
            );
            proptest::prop_assert_eq!(&got[9], &nullable(real.map(AvroValue::Double)));
            proptest::prop_assert_eq!(&got[10], &AvroValue::String("+I".into()));
        }
    }

    #[test]
    fn an_unknown_key_column_is_named() {
        let schema = keyed_schema(&[("id", DataType::Int)], &["id"], &[]);
        let table = TableIdentifier::parse("shop.users").unwrap();
        let err =
            ChangeEncoder::new(ChangeFormat::Json, schema, &["nope".into()], &table).unwrap_err();
        assert_eq!(err, "key column `nope` is not a column of shop.users");
    }

    #[test]
    fn encoded_records_decode_back_through_the_cdc_decoders() {
        use crate::codec::{CdcDecoder, CdcOptions, Decoded, Format, KafkaRecord, UpdateMode};
        let e = encoder(ChangeFormat::DebeziumJson, &[]);
        let (a, a2) = (row(1, "ada", 5), row(1, "ada", 9));
        let changes = [(RowKind::UpdateBefore, &a), (RowKind::UpdateAfter, &a2)];
        let records = e.encode(&changes, SOURCE).unwrap();
        let options = CdcOptions {
            update_mode: UpdateMode::UpdateBeforeAfter,
            ..CdcOptions::default()
        };
        let schema = std::sync::Arc::new(e.schema.clone());
        let decoder = CdcDecoder::new(Format::DebeziumJson, schema, options).unwrap();
        let record = KafkaRecord {
            topic: "t",
            partition: 0,
            offset: 0,
            timestamp_ms: None,
            key: Some(&records[0].key),
            payload: records[0].value.as_deref(),
        };
        match decoder.decode(&record).unwrap() {
            Decoded::Changes(decoded) => {
                let got: Vec<(RowKind, Row)> =
                    decoded.into_iter().map(|c| (c.kind, c.row)).collect();
                assert_eq!(
                    got,
                    vec![(RowKind::UpdateBefore, a), (RowKind::UpdateAfter, a2)]
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
