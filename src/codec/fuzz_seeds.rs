//! Seed messages of the decoder fuzz targets (`fuzz/harness/mod.rs`): one valid message of
//! each shape per format, made by the same encoders the decoder tests use. The test checks
//! every seed decodes to changes, so the fuzzer starts from inputs that reach deep into the
//! decoders; with `LAKEJOIN_FUZZ_SEEDS=<dir>` it also writes them as `<dir>/<target>/*`
//! (how `fuzz/corpus` was seeded).

use std::sync::Arc;

use serde_json::Value;

use super::testkit::{
    Change, canal_json, confluent, debezium_avro, debezium_json, maxwell_json, products, record,
    row_json, sample_row, upsert_json,
};
use super::*;
use crate::table::datum::Datum;

/// The Avro schemas the `avro` fuzz target decodes with (ids 7 and 8 in its resolver).
const PRODUCTS_AVSC: &str = include_str!("../../fuzz/harness/products.avsc");
const DEBEZIUM_AVSC: &str = include_str!("../../fuzz/harness/debezium.avsc");

fn changes() -> Vec<Change> {
    let mut other = sample_row(2);
    other[1] = Datum::Null;
    other[2] = Datum::Decimal(-99_999);
    vec![
        Change::Insert(sample_row(1)),
        Change::Update(sample_row(1), other.clone()),
        Change::Delete(other),
    ]
}

/// `key \0 payload`, the record framing of the JSON fuzz targets.
fn framed(key: Option<&[u8]>, payload: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(key) = key {
        out.extend_from_slice(key);
        out.push(0);
    }
    out.extend_from_slice(payload.unwrap_or_default());
    out
}

/// Seeds per fuzz target, with the decoder that must accept each.
fn seeds() -> Vec<(&'static str, Format, Option<AvroSchemas>, Vec<u8>)> {
    let products_avro = Arc::new(AvroSchema::parse(PRODUCTS_AVSC).expect("products.avsc"));
    let envelope_avro = AvroSchema::parse(DEBEZIUM_AVSC).expect("debezium.avsc");
    let resolver = Arc::new(
        SchemaResolver::new()
            .with_schema(7, envelope_avro)
            .with_schema(8, (*products_avro).clone()),
    );
    let confluent_schemas = Some(AvroSchemas::Confluent(resolver));
    let mut out = Vec::new();
    for change in changes() {
        for with_schema in [false, true] {
            let payload = debezium_json(&change, with_schema);
            out.push(("debezium", Format::DebeziumJson, None, payload));
        }
        out.push((
            "canal",
            Format::CanalJson,
            None,
            canal_json(std::slice::from_ref(&change)),
        ));
        out.push(("maxwell", Format::MaxwellJson, None, maxwell_json(&change)));
        let (key, value) = upsert_json(&change);
        let upsert = framed(Some(&key), value.as_deref());
        out.push(("json_upsert", Format::UpsertJson, None, upsert));
        let (Change::Insert(row) | Change::Update(_, row) | Change::Delete(row)) = &change;
        let object = row_json(row);
        let json = Value::Object(object.clone()).to_string().into_bytes();
        out.push(("json_upsert", Format::Json, None, json));
        let mut body = Vec::new();
        products_avro
            .encode_object(&object, &mut body)
            .expect("row fits products.avsc");
        let plain = Some(AvroSchemas::Plain(products_avro.clone()));
        out.push(("avro", Format::Avro, plain, body.clone()));
        out.push((
            "avro",
            Format::Avro,
            confluent_schemas.clone(),
            confluent(8, &body),
        ));
        out.push((
            "avro",
            Format::DebeziumAvro,
            confluent_schemas.clone(),
            debezium_avro(&change),
        ));
    }
    out.push((
        "canal",
        Format::CanalJson,
        None,
        canal_json(&changes()[..2]),
    ));
    out
}

#[test]
fn fuzz_seeds_decode_to_changes() {
    let dir = std::env::var_os("LAKEJOIN_FUZZ_SEEDS").map(std::path::PathBuf::from);
    let mut kinds = std::collections::HashSet::new();
    for (i, (target, format, avro, bytes)) in seeds().into_iter().enumerate() {
        // The JSON targets split `key \0 payload`; only upsert seeds carry a key.
        let (key, payload) = match bytes.iter().position(|&b| b == 0) {
            Some(p) if target != "avro" => (Some(&bytes[..p]), &bytes[p + 1..]),
            _ => (None, &bytes[..]),
        };
        let mut rec = record(payload);
        rec.key = key;
        if payload.is_empty() {
            rec.payload = None;
        }
        let options = CdcOptions {
            avro,
            ..CdcOptions::default()
        };
        let decoder = CdcDecoder::new(format, products(), options).expect("decoder");
        let decoded = decoder.decode(&rec);
        assert!(
            matches!(decoded, Ok(Decoded::Changes(ref c)) if !c.is_empty()),
            "{target} seed {i} ({format}) decoded to {decoded:?}"
        );
        kinds.insert(format);
        if let Some(dir) = &dir {
            let target_dir = dir.join(target);
            std::fs::create_dir_all(&target_dir).expect("seed dir");
            std::fs::write(target_dir.join(format!("seed-{i:02}")), &bytes).expect("seed");
        }
    }
    assert_eq!(kinds.len(), Format::ALL.len(), "a seed for every format");
}
