//! The entry points each fuzz target drives, shared by the cargo-fuzz targets
//! (`fuzz/fuzz_targets/*.rs`) and the stable regression test `tests/fuzz_corpus.rs`, which
//! replays the committed corpus and every crash input through the same functions.
//!
//! Every function takes arbitrary bytes and calls the public functions the pipeline calls
//! on untrusted input (Kafka records, table files). Any result is fine; a panic, an abort
//! or an allocation past the fuzzer's limit is a bug in lakejoin.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use lakejoin::codec::{
    AvroSchema, AvroSchemas, CdcDecoder, CdcOptions, Decoded, FactDecoder, Format, KafkaRecord,
    Metadata, SchemaResolver, SnapshotMode, UpdateMode,
};
use lakejoin::lsm::merge::{MergeEngine, SequenceOrder};
use lakejoin::table::binary_row;
use lakejoin::table::data_file::{data_file_arrow_schema, decode_data_file};
use lakejoin::table::manifest::{decode_manifest, decode_manifest_list};
use lakejoin::table::options::TableOptions;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::snapshot::Snapshot;
use lakejoin::table::types::DataType;

/// One fuzz target: its entry point, which takes any bytes.
pub type Target = fn(&[u8]);

/// The targets, by name, as `fuzz/Cargo.toml` lists them.
pub const TARGETS: [(&str, Target); 10] = [
    ("json_upsert", json_upsert),
    ("debezium", debezium),
    ("canal", canal),
    ("maxwell", maxwell),
    ("avro", avro),
    ("binary_row", binary_row),
    ("snapshot", snapshot),
    ("schema", schema),
    ("manifest", manifest),
    ("data_file", data_file),
];

/// `products(id INT PK, name STRING, weight DECIMAL(10,2), in_stock BOOLEAN,
/// updated_at TIMESTAMP(6), born DATE, score DOUBLE)` (the codec tests' table) plus nullable
/// columns of the other types, so every value conversion is reachable.
fn products() -> Arc<TableSchema> {
    static SCHEMA: OnceLock<Arc<TableSchema>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let columns = vec![
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
                ("tiny".into(), DataType::TinyInt, true),
                ("small".into(), DataType::SmallInt, true),
                ("big".into(), DataType::BigInt, true),
                ("ratio".into(), DataType::Float, true),
                (
                    "wide".into(),
                    DataType::Decimal {
                        precision: 38,
                        scale: 10,
                    },
                    true,
                ),
                ("code".into(), DataType::Char(3), true),
                ("blob".into(), DataType::Varbinary(i32::MAX as u32), true),
                ("fixed".into(), DataType::Binary(4), true),
                ("ltz".into(), DataType::TimestampLtz(3), true),
                ("nanos".into(), DataType::Timestamp(9), true),
            ];
            Arc::new(
                TableSchema::new(columns, vec![], vec!["id".into()], BTreeMap::new())
                    .expect("valid fuzz schema"),
            )
        })
        .clone()
}

/// The default options, and a variant with every switch flipped (nested field paths,
/// metadata columns, before/after updates, skipped snapshot reads, strict fields).
fn option_sets(format: Format) -> Vec<CdcOptions> {
    let mut other = CdcOptions {
        field_paths: BTreeMap::from([("score".into(), "extra.score".into())]),
        metadata: BTreeMap::from([
            ("big".into(), Metadata::Offset),
            ("ltz".into(), Metadata::SourceTimestamp),
            ("code".into(), Metadata::Database),
        ]),
        update_mode: UpdateMode::UpdateBeforeAfter,
        snapshot_mode: SnapshotMode::Skip,
        strict: true,
        ..CdcOptions::default()
    };
    if matches!(format, Format::Json | Format::Avro) {
        other.row_kind_field = Some("op".into());
    }
    let upsert = CdcOptions {
        update_mode: UpdateMode::Upsert,
        ..CdcOptions::default()
    };
    vec![CdcOptions::default(), other, upsert]
}

fn decoders(format: Format, avro: Option<AvroSchemas>) -> Vec<CdcDecoder> {
    option_sets(format)
        .into_iter()
        .map(|mut options| {
            options.avro = avro.clone();
            CdcDecoder::new(format, products(), options).expect("valid fuzz decoder")
        })
        .collect()
}

/// A Kafka record from fuzz bytes: `key \0 payload`, or only a payload when the bytes hold
/// no NUL (JSON text never does). An empty payload after the NUL is a tombstone.
fn record(data: &[u8]) -> KafkaRecord<'_> {
    let (key, payload) = match data.iter().position(|&b| b == 0) {
        Some(i) => {
            let payload = &data[i + 1..];
            (Some(&data[..i]), (!payload.is_empty()).then_some(payload))
        }
        None => (None, Some(data)),
    };
    KafkaRecord {
        topic: "fuzz",
        partition: 0,
        offset: 42,
        timestamp_ms: Some(1_700_000_000_000),
        key,
        payload,
    }
}

fn decode_all(decoders: &[CdcDecoder], record: &KafkaRecord<'_>) {
    for decoder in decoders {
        if let Ok(Decoded::Changes(changes)) = decoder.decode(record) {
            for change in changes {
                assert_eq!(change.row.len(), products().fields.len(), "row arity");
            }
        }
    }
}

/// `json` and `upsert-json` CDC decoders and the `json` fact decoder.
pub fn json_upsert(data: &[u8]) {
    static DECODERS: OnceLock<(Vec<CdcDecoder>, Vec<CdcDecoder>)> = OnceLock::new();
    let (json, upsert) = DECODERS.get_or_init(|| {
        (
            decoders(Format::Json, None),
            decoders(Format::UpsertJson, None),
        )
    });
    let record = record(data);
    decode_all(json, &record);
    decode_all(upsert, &record);
    let facts = FactDecoder::new(Format::Json, None).expect("json fact decoder");
    let _ = facts.decode(&record);
}

/// `debezium-json` (with and without the `schema`/`payload` wrapper).
pub fn debezium(data: &[u8]) {
    static DECODERS: OnceLock<Vec<CdcDecoder>> = OnceLock::new();
    let decoders = DECODERS.get_or_init(|| decoders(Format::DebeziumJson, None));
    decode_all(decoders, &record(data));
}

/// `canal-json`.
pub fn canal(data: &[u8]) {
    static DECODERS: OnceLock<Vec<CdcDecoder>> = OnceLock::new();
    let decoders = DECODERS.get_or_init(|| decoders(Format::CanalJson, None));
    decode_all(decoders, &record(data));
}

/// `maxwell-json`.
pub fn maxwell(data: &[u8]) {
    static DECODERS: OnceLock<Vec<CdcDecoder>> = OnceLock::new();
    let decoders = DECODERS.get_or_init(|| decoders(Format::MaxwellJson, None));
    decode_all(decoders, &record(data));
}

/// The flat products record (the `avro` format's schema in the codec tests), with every
/// logical type the decoder maps.
pub const PRODUCTS_AVRO: &str = include_str!("products.avsc");

/// The Debezium envelope of products as the Confluent converter writes it.
pub const DEBEZIUM_AVRO: &str = include_str!("debezium.avsc");

/// Schema ids of the Confluent-framed payloads.
pub const DEBEZIUM_AVRO_ID: u32 = 7;
pub const PRODUCTS_AVRO_ID: u32 = 8;

struct AvroDecoders {
    plain: Vec<CdcDecoder>,
    framed: Vec<CdcDecoder>,
    debezium: Vec<CdcDecoder>,
    facts: FactDecoder,
}

/// `avro` (plain, one schema), `avro` and `debezium-avro` in the Confluent wire format
/// (schema ids 7 and 8 known locally), and the `avro` fact decoder.
pub fn avro(data: &[u8]) {
    static DECODERS: OnceLock<AvroDecoders> = OnceLock::new();
    let d = DECODERS.get_or_init(|| {
        let products = Arc::new(AvroSchema::parse(PRODUCTS_AVRO).expect("products schema"));
        let envelope = AvroSchema::parse(DEBEZIUM_AVRO).expect("debezium schema");
        let resolver = Arc::new(
            SchemaResolver::new()
                .with_schema(DEBEZIUM_AVRO_ID, envelope)
                .with_schema(PRODUCTS_AVRO_ID, (*products).clone()),
        );
        let confluent = AvroSchemas::Confluent(resolver);
        AvroDecoders {
            plain: decoders(Format::Avro, Some(AvroSchemas::Plain(products))),
            framed: decoders(Format::Avro, Some(confluent.clone())),
            debezium: decoders(Format::DebeziumAvro, Some(confluent.clone())),
            facts: FactDecoder::new(Format::Avro, Some(confluent)).expect("avro fact decoder"),
        }
    });
    // Avro bytes may hold NULs: the whole input is the payload.
    let record = KafkaRecord {
        payload: Some(data),
        ..record(b"")
    };
    decode_all(&d.plain, &record);
    decode_all(&d.framed, &record);
    decode_all(&d.debezium, &record);
    let _ = d.facts.decode(&record);
}

/// The field types of the rows deserialized from table files: partitions and keys of every
/// type, as in manifests' `_PARTITION`, `_MIN_KEY`/`_MAX_KEY` and stats rows.
fn row_types() -> &'static [Vec<DataType>] {
    static TYPES: OnceLock<Vec<Vec<DataType>>> = OnceLock::new();
    TYPES.get_or_init(|| {
        let all: Vec<DataType> = products()
            .fields
            .iter()
            .map(|f| f.data_type)
            .chain([DataType::Timestamp(3), DataType::Varchar(10)])
            .collect();
        vec![
            vec![],
            vec![DataType::Int],
            vec![DataType::Varchar(i32::MAX as u32), DataType::Int],
            vec![
                DataType::Decimal {
                    precision: 20,
                    scale: 4,
                },
                DataType::Timestamp(9),
            ],
            all,
        ]
    })
}

/// BinaryRow decoding: the first byte picks the field types, the rest is the row.
pub fn binary_row(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let types = &row_types()[pick as usize % row_types().len()];
    if let Ok(row) = binary_row::deserialize(bytes, types) {
        assert_eq!(row.len(), types.len(), "row arity");
    }
    let _ = binary_row::decode(bytes, types);
    let _ = binary_row::arity(bytes);
    let positions: Vec<usize> = (0..types.len()).rev().chain([types.len()]).collect();
    let _ = binary_row::decode_projected(bytes, types, &positions);
}

/// A snapshot file, read as `Table::snapshot` reads it.
pub fn snapshot(data: &[u8]) {
    let _ = Snapshot::from_json(&String::from_utf8_lossy(data));
}

/// A schema file, read as `Table::open` reads it, then every derived value a table handle
/// and its writers and readers compute from it.
pub fn schema(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(schema) = TableSchema::from_json(text) else {
        return;
    };
    let Ok(options) = TableOptions::from_map(&schema.options) else {
        return;
    };
    let _ = schema.validate();
    let _ = schema.trimmed_key_indices();
    let _ = schema.partition_indices();
    let _ = schema.bucket_key_indices();
    let _ = data_file_arrow_schema(&schema);
    let _ = MergeEngine::new(&schema, &options);
    let _ = SequenceOrder::new(&schema, &options);
    let _ = TableSchema::from_json(&schema.to_json());
}

/// A manifest list and a manifest (same container framing, different records).
pub fn manifest(data: &[u8]) {
    let _ = decode_manifest_list(data);
    if let Ok(entries) = decode_manifest(data) {
        for entry in entries {
            let types = &row_types()[2];
            let _ = binary_row::deserialize(&entry.partition, types);
            let _ = binary_row::deserialize(&entry.file.min_key, types);
        }
    }
}

/// The schema of the pypaimon-written `db.orders` fixture table, whose data files seed
/// the `data_file` corpus.
pub const ORDERS_SCHEMA: &str =
    include_str!("../../tests/fixtures/pypaimon/db.db/orders/schema/schema-0");

/// A Parquet data file decoded as `Table::read_data_file` and point lookups decode it:
/// as the file's schema, and as a later schema that added and retyped columns.
pub fn data_file(data: &[u8]) {
    static SCHEMAS: OnceLock<(TableSchema, TableSchema)> = OnceLock::new();
    let (orders, evolved) = SCHEMAS.get_or_init(|| {
        let orders = TableSchema::from_json(ORDERS_SCHEMA).expect("orders schema");
        let mut evolved = orders.clone();
        evolved.id = 1;
        evolved.fields[3].data_type = DataType::Decimal {
            precision: 20,
            scale: 2,
        };
        evolved.fields.push(lakejoin::table::types::Field {
            id: 4,
            name: "note".into(),
            data_type: DataType::Varchar(i32::MAX as u32),
            nullable: true,
            description: None,
        });
        evolved.highest_field_id = 4;
        (orders, evolved)
    });
    let bytes = bytes::Bytes::copy_from_slice(data);
    let _ = decode_data_file(bytes.clone(), orders, orders);
    let _ = decode_data_file(bytes, orders, evolved);
}
