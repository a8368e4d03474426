//! The `debezium-avro` decoder on records a real connector wrote: Debezium 3.5's MariaDB
//! connector through Apicurio Registry's AvroConverter (Confluent wire format, content
//! ids), with the writer schemas as Apicurio Registry's Confluent API gives them, captured
//! from the Avro run of `integration-tests/debezium_mariadb.rs` (fixtures under
//! `tests/fixtures/debezium/`). What only the real converter does: keys and values framed
//! with their own schema ids, the row record defined in `before` and named in `after`,
//! Connect types kept as `connect.type`/`connect.name` (TINYINT(1) and SMALLINT as `int`
//! with `connect.type` `int16`), DECIMAL as an Avro decimal, and after `ALTER TABLE … ADD
//! COLUMN city VARCHAR(32), ADD COLUMN visits SMALLINT` a new writer schema, whose new
//! fields must be reported with the types Debezium's JSON schemas would give them.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::Value;

use super::super::testkit::record;
use super::super::*;
use crate::table::datum::{Datum, Timestamp};
use crate::table::schema::TableSchema;
use crate::table::types::{DataType, MAX_LENGTH};

const USER_PROFILE: &str =
    include_str!("../../../tests/fixtures/debezium/mariadb-user-profile-avro.jsonl");
const TYPES: &str =
    include_str!("../../../tests/fixtures/debezium/mariadb-types-snapshot-avro.jsonl");
const SCHEMAS: &str = include_str!("../../../tests/fixtures/debezium/mariadb-avro-schemas.json");

/// The registry's schemas by id, as lakejoin would have fetched them.
fn resolver() -> Arc<SchemaResolver> {
    let schemas: BTreeMap<String, String> = serde_json::from_str(SCHEMAS).expect("fixture");
    let resolver = schemas
        .into_iter()
        .fold(SchemaResolver::new(), |r, (id, text)| {
            r.with_schema(
                id.parse().expect("an id"),
                AvroSchema::parse(&text).expect("the registry's schema parses"),
            )
        });
    Arc::new(resolver)
}

fn decoder(columns: Vec<(&str, DataType, bool)>, key: &str, strict: bool) -> CdcDecoder {
    let fields = columns
        .into_iter()
        .map(|(name, ty, nullable)| (name.to_string(), ty, nullable))
        .collect();
    let schema = TableSchema::new(fields, vec![], vec![key.into()], BTreeMap::new())
        .expect("a valid test schema");
    let options = CdcOptions {
        avro: Some(AvroSchemas::Confluent(resolver())),
        strict,
        ..CdcOptions::default()
    };
    CdcDecoder::new(Format::DebeziumAvro, Arc::new(schema), options).expect("a valid decoder")
}

fn user_profile(strict: bool) -> CdcDecoder {
    decoder(
        vec![
            ("user_id", DataType::Int, false),
            ("age", DataType::Int, true),
            ("sex", DataType::Varchar(MAX_LENGTH), true),
        ],
        "user_id",
        strict,
    )
}

/// Key and value bytes of each captured record (`None`: a tombstone).
fn captured(lines: &str) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let bytes = |v: &Value| {
        v.as_str()
            .map(|text| BASE64.decode(text).expect("base64 in the fixture"))
    };
    lines
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("fixture line");
            (bytes(&v["key"]).expect("a key"), bytes(&v["value"]))
        })
        .collect()
}

fn decode(dec: &CdcDecoder, key: &[u8], value: Option<&[u8]>) -> Result<Decoded, DecodeError> {
    let mut rec = record(b"");
    rec.key = Some(key);
    rec.payload = value;
    dec.decode(&rec)
}

fn profile(id: i32, age: i32, sex: &str) -> Vec<Datum> {
    vec![Datum::Int(id), Datum::Int(age), Datum::String(sex.into())]
}

/// Every change of the scenario, in the order the topic's two partitions gave them: the
/// snapshot, an update, a delete and its tombstone, re-inserts, and after the `ALTER
/// TABLE` an update in the new writer schema (its new fields ignored by a decoder that
/// is not strict).
#[test]
fn snapshot_updates_deletes_tombstones_and_a_new_writer_schema() {
    let dec = user_profile(false);
    let change = |kind, row| RowChange { kind, row };
    let expected = vec![
        Decoded::Changes(vec![change(RowKind::Insert, profile(2, 41, "m"))]),
        Decoded::Changes(vec![change(RowKind::Insert, profile(1, 30, "f"))]),
        Decoded::Changes(vec![
            change(RowKind::Delete, profile(1, 30, "f")),
            change(RowKind::Insert, profile(1, 31, "f")),
        ]),
        Decoded::Changes(vec![change(RowKind::Delete, profile(2, 41, "m"))]),
        Decoded::Skipped(SkipReason::Tombstone),
        Decoded::Changes(vec![change(RowKind::Insert, profile(3, 52, "m"))]),
        Decoded::Changes(vec![
            change(RowKind::Delete, profile(1, 31, "f")),
            change(RowKind::Insert, profile(1, 31, "x")),
        ]),
        Decoded::Changes(vec![change(RowKind::Insert, profile(2, 25, "f"))]),
        Decoded::Changes(vec![
            change(RowKind::Delete, profile(3, 52, "m")),
            change(RowKind::Insert, profile(3, 52, "m")),
        ]),
    ];
    let got: Vec<Decoded> = captured(USER_PROFILE)
        .iter()
        .map(|(k, v)| decode(&dec, k, v.as_deref()).expect("decodes"))
        .collect();
    assert_eq!(got, expected);
}

/// The record after `ALTER TABLE … ADD COLUMN city VARCHAR(32), ADD COLUMN visits
/// SMALLINT`: a strict decoder reports both new fields with their types from the new
/// writer schema (STRING, and SMALLINT from `connect.type` `int16`), as the CDC pipeline
/// needs to add them. The records before it fit.
#[test]
fn the_new_writer_schema_reports_the_added_columns_with_their_types() {
    let dec = user_profile(true);
    let records = captured(USER_PROFILE);
    let (last, before) = records.split_last().expect("records");
    for (k, v) in before {
        decode(&dec, k, v.as_deref()).expect("the records before the ALTER fit");
    }
    let Err(DecodeError::SchemaChanged { columns, .. }) = decode(&dec, &last.0, last.1.as_deref())
    else {
        panic!("the new fields are reported");
    };
    let types: BTreeMap<&str, Option<DataType>> = columns
        .iter()
        .map(|c| (c.name.as_str(), c.source_type))
        .collect();
    assert_eq!(
        types,
        BTreeMap::from([
            ("city", Some(DataType::Varchar(MAX_LENGTH))),
            ("visits", Some(DataType::SmallInt)),
        ])
    );
}

/// Every column type of `shop.types` in an Avro snapshot read, into the table the
/// integration test declares.
#[test]
fn every_type_of_an_avro_snapshot_read() {
    let dec = decoder(
        vec![
            ("id", DataType::BigInt, false),
            (
                "price",
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                true,
            ),
            (
                "big",
                DataType::Decimal {
                    precision: 30,
                    scale: 5,
                },
                true,
            ),
            ("born", DataType::Date, true),
            ("seen", DataType::Timestamp(3), true),
            ("seen6", DataType::Timestamp(6), true),
            ("ts", DataType::Timestamp(3), true),
            ("flag", DataType::Boolean, true),
            ("d", DataType::Double, true),
            ("bin", DataType::Varbinary(MAX_LENGTH), true),
            ("u", DataType::BigInt, true),
            ("y", DataType::Int, true),
            ("e", DataType::Varchar(MAX_LENGTH), true),
            ("j", DataType::Varchar(MAX_LENGTH), true),
            ("s", DataType::Varchar(20), true),
        ],
        "id",
        true,
    );
    let records = captured(TYPES);
    let (key, value) = &records[0];
    let got = decode(&dec, key, value.as_deref()).expect("decodes");
    let ts = |millis: i64, nanos_of_milli: u32| {
        Datum::Timestamp(Timestamp {
            millis,
            nanos_of_milli,
        })
    };
    // 2024-03-01 10:11:12.345(678) as a local date-time.
    let seen = 1_709_287_872_345;
    let row = vec![
        Datum::BigInt(1),
        Datum::Decimal(1234),
        Datum::Decimal(-1_234_567_890_123_456_789_012_345),
        // 2024-02-29
        Datum::Date(19_782),
        ts(seen, 0),
        ts(seen, 678_000),
        ts(seen, 0),
        Datum::Boolean(true),
        Datum::Double(0.5),
        Datum::Bytes(vec![0x01, 0x02, 0xff]),
        Datum::BigInt(4_000_000_000),
        Datum::Int(2024),
        Datum::String("b".into()),
        Datum::String(r#"{"a": 1}"#.into()),
        Datum::String("grüße".into()),
    ];
    assert_eq!(
        got,
        Decoded::Changes(vec![RowChange {
            kind: RowKind::Insert,
            row
        }])
    );
}
