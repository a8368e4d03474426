//! Tests of the module's entry points: formats, decoder construction, fact decoding,
//! output encoding, Avro CDC formats.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::testkit::{
    Change, avro_options, avro_row, confluent, debezium_avro, decoder, products, products_avro,
    record, row_json, sample_row,
};
use super::*;
use crate::table::datum::Datum;
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

#[test]
fn formats_parse_from_config_spellings() {
    for f in Format::ALL {
        assert_eq!(f.name().parse::<Format>().unwrap(), f);
        let quoted = format!("\"{}\"", f.name());
        assert_eq!(serde_json::from_str::<Format>(&quoted).unwrap(), f);
        assert_eq!(f.to_string(), f.name());
    }
    let err = "debezium".parse::<Format>().unwrap_err().to_string();
    assert!(err.contains("debezium-json"), "{err}");
    assert_eq!(
        "ingestion-timestamp".parse::<Metadata>().unwrap(),
        Metadata::IngestionTimestamp
    );
    assert!("ts".parse::<Metadata>().is_err());
    assert_eq!(
        serde_json::from_str::<UpdateMode>("\"update-before-after\"").unwrap(),
        UpdateMode::UpdateBeforeAfter
    );
}

#[test]
fn decoder_options_are_checked_together() {
    let options = CdcOptions {
        field_paths: [("nope".to_string(), "a..b".to_string())]
            .into_iter()
            .collect(),
        metadata: [("ghost".to_string(), Metadata::Offset)]
            .into_iter()
            .collect(),
        row_kind_field: Some("op".into()),
        ..CdcOptions::default()
    };
    let err = CdcDecoder::new(Format::DebeziumAvro, products(), options)
        .unwrap_err()
        .to_string();
    for needle in [
        "needs an Avro schema source",
        "`row_kind_field` applies",
        "`nope`",
        "`ghost`",
        "field path `a..b`",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    let err = CdcDecoder::new(Format::Json, products(), avro_options(true))
        .unwrap_err()
        .to_string();
    assert!(err.contains("takes no Avro schema"), "{err}");
    assert!(FactDecoder::new(Format::CanalJson, None).is_err());
    assert!(FactDecoder::new(Format::Avro, None).is_err());
    assert!(FactDecoder::new(Format::Json, avro_options(true).avro).is_err());
}

#[test]
fn avro_cdc_plain_and_confluent() {
    let row = sample_row(11);
    let plain = decoder(Format::Avro, avro_options(true));
    assert_eq!(
        plain.decode(&record(&avro_row(&row))),
        Ok(Decoded::Changes(vec![RowChange {
            kind: RowKind::Insert,
            row: row.clone()
        }]))
    );
    let framed = decoder(Format::Avro, avro_options(false));
    let bytes = confluent(8, &avro_row(&row));
    let Ok(Decoded::Changes(got)) = framed.decode(&record(&bytes)) else {
        panic!("changes expected")
    };
    assert_eq!(got[0].row, row);
    // An id nobody fetched: transient until prepare() fetched it.
    let unknown = confluent(99, &avro_row(&row));
    let err = framed.decode(&record(&unknown)).unwrap_err();
    assert!(err.is_transient());
    assert!(err.to_string().contains("schema id 99"), "{err}");
    let err = plain.decode(&record(&[1, 2, 3])).unwrap_err();
    assert_eq!(err.code(), "malformed");
}

#[test]
fn debezium_avro_changes() {
    let dec = decoder(Format::DebeziumAvro, avro_options(false));
    let (b, mut a) = (sample_row(1), sample_row(2));
    a[1] = crate::table::datum::Datum::Null;
    let Ok(Decoded::Changes(got)) = dec.decode(&record(&debezium_avro(&Change::Update(
        b.clone(),
        a.clone(),
    )))) else {
        panic!("changes expected")
    };
    assert_eq!(
        got,
        vec![
            RowChange {
                kind: RowKind::Delete,
                row: b
            },
            RowChange {
                kind: RowKind::Insert,
                row: a
            }
        ]
    );
    let mut tombstone = record(b"");
    tombstone.payload = None;
    assert_eq!(
        dec.decode(&tombstone),
        Ok(Decoded::Skipped(SkipReason::Tombstone))
    );
}

/// `ALTER TABLE … ADD COLUMN` under `debezium-avro`: the converter's next writer schema
/// has the new field, and its Connect types in Avro (`int` with `connect.type` `int16`, a
/// Connect `Decimal`) type the columns as `debezium-json` with schemas would, where they
/// used to be STRING as for untyped formats.
#[test]
fn debezium_avro_types_the_columns_a_new_writer_schema_adds() {
    let mut schema: Value =
        serde_json::from_str(&super::testkit::debezium_avro_schema_text()).expect("JSON");
    let row_fields = schema["fields"][0]["type"][1]["fields"]
        .as_array_mut()
        .expect("the row record is inline in before");
    row_fields.push(json!({"name": "stock", "default": null,
        "type": ["null", {"type": "int", "connect.type": "int16"}]}));
    row_fields.push(json!({"name": "price", "default": null, "type": ["null", {
        "type": "bytes", "scale": 3, "precision": 12, "connect.version": 1,
        "connect.parameters": {"scale": "3", "connect.decimal.precision": "12"},
        "connect.name": "org.apache.kafka.connect.data.Decimal", "logicalType": "decimal"}]}));
    let schema = AvroSchema::parse(&schema.to_string()).expect("valid Avro schema");
    let options = CdcOptions {
        avro: Some(AvroSchemas::Confluent(Arc::new(
            SchemaResolver::new().with_schema(9, schema.clone()),
        ))),
        strict: true,
        ..CdcOptions::default()
    };
    let dec = decoder(Format::DebeziumAvro, options);
    let mut after = row_json(&sample_row(1));
    // (Connect writes these as epoch numbers; null spares converting them here.)
    after.insert("updated_at".into(), Value::Null);
    after.insert("born".into(), Value::Null);
    after.insert("stock".into(), json!(4));
    after.insert("price".into(), json!("1.250"));
    let envelope = json!({"before": null, "after": after,
        "source": {"ts_ms": 1_700_000_000_000i64, "db": "inventory", "table": "products"},
        "op": "c", "ts_ms": null});
    let mut body = Vec::new();
    schema
        .encode_object(envelope.as_object().expect("object"), &mut body)
        .expect("the envelope fits");
    let Err(DecodeError::SchemaChanged { columns, .. }) = dec.decode(&record(&confluent(9, &body)))
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
            (
                "price",
                Some(DataType::Decimal {
                    precision: 12,
                    scale: 3
                })
            ),
            ("stock", Some(DataType::SmallInt)),
        ])
    );
}

#[tokio::test]
async fn fact_records_decode_to_json_objects() {
    let json_facts = FactDecoder::new(Format::Json, None).unwrap();
    let payload = json!({"order_id": 1, "customer": {"id": 7}}).to_string();
    json_facts
        .prepare(&record(payload.as_bytes()))
        .await
        .unwrap();
    let got = json_facts
        .decode(&record(payload.as_bytes()))
        .unwrap()
        .unwrap();
    assert!(matches!(got, Fact::Raw(_)), "kept as its bytes");
    assert_eq!(got.get("customer.id").unwrap().as_deref(), Some(&json!(7)));
    let mut tombstone = record(b"");
    tombstone.payload = None;
    assert!(matches!(json_facts.decode(&tombstone), Ok(None)));
    assert_eq!(
        json_facts.decode(&record(b"[]")).unwrap_err().code(),
        "malformed"
    );
    let avro_facts = FactDecoder::new(Format::Avro, avro_options(false).avro).unwrap();
    let row = sample_row(3);
    let bytes = confluent(8, &avro_row(&row));
    avro_facts.prepare(&record(&bytes)).await.unwrap();
    let got = avro_facts
        .decode(&record(&bytes))
        .unwrap()
        .unwrap()
        .into_tree()
        .unwrap();
    // The JSON form of datum_to_json.
    assert_eq!(got, row_json(&row));
    assert_eq!(got["weight"], json!("3.14"));
    assert_eq!(got["updated_at"], json!("2023-11-14 22:13:20.123456"));
    assert_eq!(got["born"], json!("2024-01-01"));
}

#[test]
fn output_encoders() {
    let mut record_map = row_json(&sample_row(5));
    record_map.insert("extra".into(), json!("ignored by Avro"));
    let json_bytes = OutputEncoder::Json.encode(&record_map).unwrap();
    assert_eq!(
        serde_json::from_slice::<Map<String, Value>>(&json_bytes).unwrap(),
        record_map
    );
    let schema = Arc::new(products_avro());
    let plain = OutputEncoder::Avro {
        schema: schema.clone(),
        confluent_id: None,
    };
    let body = plain.encode(&record_map).unwrap();
    record_map.remove("extra");
    assert_eq!(
        schema.decode(&body).unwrap(),
        Value::Object(record_map.clone())
    );
    let framed = OutputEncoder::Avro {
        schema,
        confluent_id: Some(258),
    };
    let bytes = framed.encode(&record_map).unwrap();
    assert_eq!(&bytes[..5], &[0, 0, 0, 1, 2]);
    assert_eq!(&bytes[5..], &body[..]);
    record_map.insert("id".into(), json!("seven"));
    let err = framed.encode(&record_map).unwrap_err();
    assert_eq!(err.path, "id");
    assert_eq!(err.to_string(), "field `id`: expected int, got \"seven\"");
}

/// Upsert JSON reads strings straight into the row (moved, not copied): a CHAR/VARCHAR
/// length is still counted in characters, and a value too long is the column's error.
#[test]
fn upsert_strings_are_checked_against_their_length_in_characters() {
    let schema = TableSchema::new(
        vec![
            ("id".into(), DataType::Int, false),
            ("code".into(), DataType::Varchar(3), true),
        ],
        vec![],
        vec!["id".into()],
        BTreeMap::new(),
    )
    .unwrap();
    let dec = CdcDecoder::new(Format::UpsertJson, Arc::new(schema), CdcOptions::default()).unwrap();
    // Three characters in six bytes fit VARCHAR(3).
    let Ok(Decoded::Changes(got)) = dec.decode(&record(r#"{"id":1,"code":"ééé"}"#.as_bytes()))
    else {
        panic!("three characters fit VARCHAR(3)");
    };
    assert_eq!(got[0].row, vec![Datum::Int(1), Datum::String("ééé".into())]);
    for long in [r#"{"id":2,"code":"éééé"}"#, r#"{"id":2,"code":"abcd"}"#] {
        let err = dec
            .decode(&record(long.as_bytes()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("code") && err.contains("VARCHAR(3)"), "{err}");
    }
}
