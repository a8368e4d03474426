//! Property tests: no decoder panics on any input; encode → decode round trips; a change
//! written in any input format decodes to the same row changes.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::testkit::{
    Change, avro_options, avro_row, canal_json, confluent, debezium_avro, debezium_json, decoder,
    maxwell_json, record, row_json, upsert_json,
};
use super::*;
use crate::table::datum::{Datum, Row, Timestamp};
use crate::table::row_kind::RowKind;

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

/// Keys the envelopes and the test table use, so random objects hit real code paths.
const KEYS: &[&str] = &[
    "op",
    "before",
    "after",
    "source",
    "ts_ms",
    "payload",
    "schema",
    "type",
    "data",
    "old",
    "isDdl",
    "es",
    "ts",
    "database",
    "table",
    "id",
    "name",
    "weight",
    "in_stock",
    "updated_at",
    "born",
    "score",
    "fields",
    "field",
    "scale",
    "value",
    "parameters",
];

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("c"),
            Just("u"),
            Just("d"),
            Just("r"),
            Just("t"),
            Just("INSERT"),
            Just("UPDATE"),
            Just("DELETE"),
            Just("insert"),
            Just("update"),
            Just("delete"),
            Just("bootstrap-insert"),
            Just("1"),
            Just("2024-01-01"),
            Just("12.5"),
            Just("AAEC"),
            Just("io.debezium.time.MicroTimestamp"),
            Just("org.apache.kafka.connect.data.Decimal"),
        ]
        .prop_map(|s| Value::String(s.into())),
        ".{0,8}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        prop::sample::select(KEYS).prop_map(str::to_string),
                        ".{0,4}"
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn row() -> impl Strategy<Value = Row> {
    (
        any::<i32>(),
        prop::option::of(".{0,12}"),
        prop::option::of(-9_999_999_999i128..=9_999_999_999),
        prop::option::of(any::<bool>()),
        // Years 1900..2200 in micros.
        prop::option::of(-2_208_988_800_000_000i64..7_258_118_400_000_000),
        prop::option::of(-25_567i32..84_000),
        prop::option::of(any::<f64>().prop_filter("finite", |f| f.is_finite())),
    )
        .prop_map(|(id, name, weight, stock, ts, born, score)| {
            vec![
                Datum::Int(id),
                name.map_or(Datum::Null, |s| Datum::String(s.into())),
                weight.map_or(Datum::Null, Datum::Decimal),
                stock.map_or(Datum::Null, Datum::Boolean),
                ts.map_or(Datum::Null, |t| Datum::Timestamp(Timestamp::from_micros(t))),
                born.map_or(Datum::Null, Datum::Date),
                score.map_or(Datum::Null, Datum::Double),
            ]
        })
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        row().prop_map(Change::Insert),
        (row(), row(), any::<bool>()).prop_map(|(b, mut a, same_key)| {
            if same_key {
                a[0] = b[0].clone();
            }
            Change::Update(b, a)
        }),
        row().prop_map(Change::Delete),
    ]
}

/// The changes Paimon's ingestion makes of a change (update mode `DeleteInsert`).
fn expected(change: &Change) -> Vec<RowChange> {
    match change {
        Change::Insert(a) => vec![RowChange {
            kind: RowKind::Insert,
            row: a.clone(),
        }],
        Change::Update(b, a) => vec![
            RowChange {
                kind: RowKind::Delete,
                row: b.clone(),
            },
            RowChange {
                kind: RowKind::Insert,
                row: a.clone(),
            },
        ],
        Change::Delete(b) => vec![RowChange {
            kind: RowKind::Delete,
            row: b.clone(),
        }],
    }
}

fn changes(d: Result<Decoded, DecodeError>) -> Vec<RowChange> {
    match d {
        Ok(Decoded::Changes(c)) => c,
        other => panic!("expected changes, got {other:?}"),
    }
}

/// Every decoder there is, for the no-panic properties.
fn all_decoders() -> Vec<CdcDecoder> {
    let mut out = Vec::new();
    for f in Format::ALL {
        if f.is_avro() {
            out.push(decoder(f, avro_options(true)));
            out.push(decoder(f, avro_options(false)));
        } else {
            out.push(decoder(f, CdcOptions::default()));
            out.push(decoder(
                f,
                CdcOptions {
                    strict: true,
                    update_mode: UpdateMode::UpdateBeforeAfter,
                    snapshot_mode: SnapshotMode::Skip,
                    field_paths: [("name".to_string(), "after.name".to_string())]
                        .into_iter()
                        .collect(),
                    ..CdcOptions::default()
                },
            ));
        }
    }
    out
}

fn fact_decoders() -> Vec<FactDecoder> {
    vec![
        FactDecoder::new(Format::Json, None).expect("json facts"),
        FactDecoder::new(Format::Avro, avro_options(true).avro).expect("avro facts"),
        FactDecoder::new(Format::Avro, avro_options(false).avro).expect("avro facts"),
    ]
}

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_decoder_panics_on_arbitrary_bytes(
        payload in prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        key in prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
        framed in any::<bool>(),
        id in prop::sample::select(vec![7u8, 8, 9]),
    ) {
        // Half the time behind a valid Confluent frame, to reach the Avro decoder.
        let payload = payload.map(|p| if framed { confluent(u32::from(id), &p) } else { p });
        let rec = KafkaRecord {
            topic: "t", partition: 0, offset: 0, timestamp_ms: None,
            key: key.as_deref(), payload: payload.as_deref(),
        };
        for d in all_decoders() {
            let _ = d.decode(&rec);
        }
        for d in fact_decoders() {
            let _ = d.decode(&rec);
        }
    }

    #[test]
    fn no_decoder_panics_on_arbitrary_json(payload in json_value(), key in json_value()) {
        let p = payload.to_string();
        let k = key.to_string();
        let wrapped = json!({"schema": key, "payload": payload}).to_string();
        for bytes in [&p, &wrapped] {
            let rec = KafkaRecord {
                topic: "t", partition: 0, offset: 0, timestamp_ms: None,
                key: Some(k.as_bytes()), payload: Some(bytes.as_bytes()),
            };
            for d in all_decoders() {
                let _ = d.decode(&rec);
            }
        }
    }

    #[test]
    fn json_output_round_trips(value in json_value()) {
        let object: Map<String, Value> = match value {
            Value::Object(o) => o,
            other => Map::from_iter([("v".to_string(), other)]),
        };
        let bytes = OutputEncoder::Json.encode(&object).expect("json encodes");
        let facts = FactDecoder::new(Format::Json, None).expect("json facts");
        prop_assert_eq!(facts.decode(&record(&bytes)).map(|f| f.map(|f| f.into_tree().expect("a tree"))), Ok(Some(object)));
    }

    #[test]
    fn avro_output_round_trips(row in row(), id in any::<u32>()) {
        let object = row_json(&row);
        let encoder = OutputEncoder::Avro {
            schema: Arc::new(super::testkit::products_avro()),
            confluent_id: Some(id),
        };
        let bytes = encoder.encode(&object).expect("row encodes");
        let resolver = SchemaResolver::new().with_schema(id, super::testkit::products_avro());
        let facts = FactDecoder::new(
            Format::Avro,
            Some(AvroSchemas::Confluent(Arc::new(resolver))),
        )
        .expect("avro facts");
        prop_assert_eq!(facts.decode(&record(&bytes)).map(|f| f.map(|f| f.into_tree().expect("a tree"))), Ok(Some(object)));
    }

    #[test]
    fn avro_decoder_survives_arbitrary_bytes_for_every_type(
        bytes in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        let schema = avro_all_types();
        if let Ok(value) = schema.decode(&bytes) {
            // Encoding what was decoded does not panic either (it may fail: a timestamp
            // outside chrono's range has no text form to parse back).
            let _ = schema.encode(&value, &mut Vec::new());
        }
    }

    #[test]
    fn debezium_json_round_trips(change in change(), with_schema in any::<bool>()) {
        let d = decoder(Format::DebeziumJson, CdcOptions::default());
        let got = changes(d.decode(&record(&debezium_json(&change, with_schema))));
        prop_assert_eq!(got, expected(&change));
    }

    #[test]
    fn debezium_avro_round_trips(change in change()) {
        let d = decoder(Format::DebeziumAvro, avro_options(false));
        let got = changes(d.decode(&record(&debezium_avro(&change))));
        prop_assert_eq!(got, expected(&change));
    }

    #[test]
    fn canal_round_trips(batch in prop::collection::vec(change(), 1..4)) {
        // One Canal message holds changes of one kind.
        let kind = std::mem::discriminant(&batch[0]);
        let batch: Vec<Change> = batch
            .into_iter()
            .filter(|c| std::mem::discriminant(c) == kind)
            .collect();
        let d = decoder(Format::CanalJson, CdcOptions::default());
        let got = changes(d.decode(&record(&canal_json(&batch))));
        let want: Vec<RowChange> = batch.iter().flat_map(expected).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn maxwell_round_trips(change in change()) {
        let d = decoder(Format::MaxwellJson, CdcOptions::default());
        let got = changes(d.decode(&record(&maxwell_json(&change))));
        prop_assert_eq!(got, expected(&change));
    }

    #[test]
    fn upsert_round_trips(change in change()) {
        let (key, value) = upsert_json(&change);
        let rec = KafkaRecord { key: Some(&key), payload: value.as_deref(), ..record(b"") };
        let got = changes(decoder(Format::UpsertJson, CdcOptions::default()).decode(&rec));
        let want = match &change {
            Change::Insert(a) | Change::Update(_, a) => RowChange { kind: RowKind::Insert, row: a.clone() },
            Change::Delete(b) => {
                let mut key_only = vec![Datum::Null; b.len()];
                key_only[0] = b[0].clone();
                RowChange { kind: RowKind::Delete, row: key_only }
            }
        };
        prop_assert_eq!(got, vec![want]);
    }

    #[test]
    fn json_round_trips(change in change()) {
        let options = CdcOptions { row_kind_field: Some("op".into()), ..CdcOptions::default() };
        let (kind, row) = match &change {
            Change::Insert(a) | Change::Update(_, a) => (RowKind::Insert, a),
            Change::Delete(b) => (RowKind::Delete, b),
        };
        let mut object = row_json(row);
        object.insert("op".into(), json!(kind.short_string()));
        let bytes = Value::Object(object).to_string();
        let got = changes(decoder(Format::Json, options).decode(&record(bytes.as_bytes())));
        prop_assert_eq!(got, vec![RowChange { kind, row: row.clone() }]);
    }

    #[test]
    fn avro_round_trips(row in row(), framed in any::<bool>()) {
        let d = decoder(Format::Avro, avro_options(!framed));
        let body = avro_row(&row);
        let bytes = if framed { confluent(8, &body) } else { body };
        let got = changes(d.decode(&record(&bytes)));
        prop_assert_eq!(got, vec![RowChange { kind: RowKind::Insert, row }]);
    }
}

/// A schema with most types, for the arbitrary-bytes property.
fn avro_all_types() -> AvroSchema {
    let text = json!({
        "type": "record", "name": "R", "fields": [
            {"name": "u", "type": ["null", "boolean", "int", "float", "double"]},
            {"name": "s", "type": "string"},
            {"name": "b", "type": "bytes"},
            {"name": "a", "type": {"type": "array", "items": ["null", "long"]}},
            {"name": "m", "type": {"type": "map", "values": "int"}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
            {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38,
                                   "scale": 4}},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
            {"name": "dt", "type": {"type": "int", "logicalType": "date"}}
        ]
    });
    AvroSchema::parse(&text.to_string()).expect("valid schema")
}
