//! The Debezium decoder on records a real connector wrote: Debezium 3.5's MariaDB
//! connector through Kafka Connect's JSON converter with `schemas.enable=true`, captured
//! from the chain `integration-tests/debezium_mariadb.rs` runs (fixtures under
//! `tests/fixtures/debezium/`). Hand-written events miss what only the connector does:
//! the full Connect schema beside every payload, snapshot reads with `source.snapshot`,
//! a tombstone after each delete, DECIMAL as base64 two's-complement bytes, DATE as epoch
//! days, DATETIME(3) and DATETIME(6) as epoch milli- and microseconds, TIMESTAMP as zoned
//! text, TINYINT(1) as a 16-bit integer. The same payloads without their schema (what
//! `schemas.enable=false` sends) must read the same where the JSON alone is unambiguous,
//! and be refused, never misread, where it is not.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::super::testkit::record;
use super::super::*;
use crate::table::datum::{Datum, Timestamp};
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

const USER_PROFILE: &str =
    include_str!("../../../tests/fixtures/debezium/mariadb-user-profile-schemas.jsonl");
const TYPES: &str =
    include_str!("../../../tests/fixtures/debezium/mariadb-types-snapshot-schemas.json");

fn decoder(columns: Vec<(&str, DataType, bool)>, key: &str) -> CdcDecoder {
    let fields = columns
        .into_iter()
        .map(|(name, ty, nullable)| (name.to_string(), ty, nullable))
        .collect();
    let schema = TableSchema::new(fields, vec![], vec![key.into()], BTreeMap::new())
        .expect("a valid test schema");
    CdcDecoder::new(
        Format::DebeziumJson,
        Arc::new(schema),
        CdcOptions::default(),
    )
    .expect("a valid decoder")
}

fn user_profile() -> CdcDecoder {
    decoder(
        vec![
            ("user_id", DataType::Int, false),
            ("age", DataType::Int, true),
            ("sex", DataType::Varchar(i32::MAX as u32), true),
        ],
        "user_id",
    )
}

/// Key and value bytes of each captured record (`None`: a tombstone).
fn captured() -> Vec<(String, Option<String>)> {
    USER_PROFILE
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("fixture line");
            let value = (!v["value"].is_null()).then(|| v["value"].to_string());
            (v["key"].to_string(), value)
        })
        .collect()
}

fn decode(dec: &CdcDecoder, key: &str, value: Option<&str>) -> Result<Decoded, DecodeError> {
    let mut rec = record(b"");
    rec.key = Some(key.as_bytes());
    rec.payload = value.map(str::as_bytes);
    dec.decode(&rec)
}

fn profile(id: i32, age: i32, sex: &str) -> Vec<Datum> {
    vec![Datum::Int(id), Datum::Int(age), Datum::String(sex.into())]
}

fn expected_profile_changes() -> Vec<Decoded> {
    let change = |kind, row| RowChange { kind, row };
    vec![
        // Snapshot reads of the two rows there before the connector started.
        Decoded::Changes(vec![change(RowKind::Insert, profile(1, 30, "f"))]),
        Decoded::Changes(vec![change(RowKind::Insert, profile(2, 41, "m"))]),
        // UPDATE … SET age = 31: delete-insert, the default for deduplicate tables.
        Decoded::Changes(vec![
            change(RowKind::Delete, profile(1, 30, "f")),
            change(RowKind::Insert, profile(1, 31, "f")),
        ]),
        // DELETE, then the connector's tombstone for log compaction.
        Decoded::Changes(vec![change(RowKind::Delete, profile(2, 41, "m"))]),
        Decoded::Skipped(SkipReason::Tombstone),
    ]
}

#[test]
fn snapshot_update_delete_and_tombstone_with_schemas() {
    let dec = user_profile();
    let records = captured();
    let ops: Vec<String> = records
        .iter()
        .map(|(_, v)| match v {
            Some(v) => serde_json::from_str::<Value>(v).expect("json")["payload"]["op"]
                .as_str()
                .expect("op")
                .to_owned(),
            None => "tombstone".into(),
        })
        .collect();
    assert_eq!(
        ops,
        ["r", "r", "u", "d", "tombstone"],
        "the fixture's records"
    );
    let got: Vec<Decoded> = records
        .iter()
        .map(|(k, v)| decode(&dec, k, v.as_deref()).expect("decodes"))
        .collect();
    assert_eq!(got, expected_profile_changes());
}

#[test]
fn the_same_records_without_schemas() {
    // JsonConverter with schemas.enable=false writes the payloads alone.
    let dec = user_profile();
    let got: Vec<Decoded> = captured()
        .iter()
        .map(|(k, v)| {
            let strip = |text: &str| {
                let v: Value = serde_json::from_str(text).expect("json");
                v["payload"].to_string()
            };
            let value = v.as_deref().map(strip);
            decode(&dec, &strip(k), value.as_deref()).expect("decodes")
        })
        .collect();
    assert_eq!(got, expected_profile_changes());
}

#[test]
fn a_delete_without_before_takes_its_key_from_the_schema_wrapped_record_key() {
    // REPLICA IDENTITY-like cases (and some SMTs) leave `before` null: the record key,
    // itself schema-wrapped, gives the primary key.
    let dec = user_profile();
    let (key, value) = &captured()[3];
    let mut v: Value = serde_json::from_str(value.as_deref().expect("a delete")).expect("json");
    v["payload"]["before"] = Value::Null;
    let got = decode(&dec, key, Some(&v.to_string())).expect("decodes");
    let Decoded::Changes(changes) = got else {
        panic!("changes expected, got {got:?}")
    };
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].kind, RowKind::Delete);
    assert_eq!(changes[0].row[0], Datum::Int(2));
}

fn types_decoder() -> CdcDecoder {
    decoder(
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
            ("born", DataType::Date, true),
            ("seen", DataType::Timestamp(3), true),
            ("seen6", DataType::Timestamp(6), true),
            ("ts", DataType::Timestamp(3), true),
            ("flag", DataType::Boolean, true),
            ("d", DataType::Double, true),
            ("bin", DataType::Varbinary(8), true),
            (
                "big",
                DataType::Decimal {
                    precision: 30,
                    scale: 5,
                },
                true,
            ),
            ("u", DataType::BigInt, true),
            // TIME(3) as io.debezium.time.MicroTime: microseconds of the day.
            ("t", DataType::BigInt, true),
            ("y", DataType::Int, true),
            ("e", DataType::Varchar(1), true),
            ("j", DataType::Varchar(i32::MAX as u32), true),
        ],
        "id",
    )
}

#[test]
fn every_type_of_a_schema_wrapped_snapshot_read() {
    let dec = types_decoder();
    let got = dec
        .decode(&record(TYPES.trim().as_bytes()))
        .expect("decodes");
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
        // 2024-02-29
        Datum::Date(19_782),
        ts(seen, 0),
        ts(seen, 678_000),
        ts(seen, 0),
        Datum::Boolean(true),
        Datum::Double(0.5),
        Datum::Bytes(vec![0x01, 0x02, 0xff]),
        Datum::Decimal(-1_234_567_890_123_456_789_012_345),
        Datum::BigInt(4_000_000_000),
        Datum::BigInt(36_672_345_000),
        Datum::Int(2024),
        Datum::String("b".into()),
        Datum::String(r#"{"a":1}"#.into()),
    ];
    assert_eq!(
        got,
        Decoded::Changes(vec![RowChange {
            kind: RowKind::Insert,
            row
        }])
    );
}

#[test]
fn without_schemas_base64_decimals_are_refused_never_misread() {
    // decimal.handling.mode=precise without schemas: "BNI=" is bytes, not a number, and
    // nothing in the JSON says so. The decoder must refuse it (a dead letter naming the
    // column), which is why the README's quick start sets decimal.handling.mode=string.
    let dec = types_decoder();
    let v: Value = serde_json::from_str(TYPES.trim()).expect("json");
    let payload = v["payload"].to_string();
    let err = dec.decode(&record(payload.as_bytes())).unwrap_err();
    assert_eq!(err.code(), "column");
    let text = err.to_string();
    assert!(text.contains("column `price` (DECIMAL(10, 2))"), "{text}");
    assert!(text.contains("column `big` (DECIMAL(30, 5))"), "{text}");
}
