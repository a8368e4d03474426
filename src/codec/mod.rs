//! Decoding Kafka records into table row changes (CDC) and fact records (enrichment), and
//! encoding enriched records for output.
//!
//! # Formats
//!
//! | format | payload | one message gives |
//! | --- | --- | --- |
//! | `json` | a JSON object, columns by name or dotted path | `+I` (or the kind in `row_kind_field`) |
//! | `debezium-json` | Debezium envelope, with or without the `schema`/`payload` wrapper | see below |
//! | `canal-json` | Canal message, `data`/`old` arrays | one change (pair) per element of `data` |
//! | `maxwell-json` | Maxwell message, `data`/`old` objects | one change (pair) |
//! | `upsert-json` | key = primary key object, value = row object, null value = delete | `+I` or `-D` |
//! | `avro` | Avro binary: one schema, or Confluent-framed with ids from a registry/local files | `+I` (or `row_kind_field`) |
//! | `debezium-avro` | Confluent-framed Debezium envelope | as `debezium-json` |
//!
//! Every decoder returns an error, never panics, whatever the bytes.
//!
//! # Change semantics (what a message becomes)
//!
//! The rules follow Paimon's Flink CDC ingestion (`kafka_sync_table`'s record parsers):
//!
//! * Insert (`c`, Canal `INSERT`, Maxwell `insert`) → `+I(after)`.
//! * Snapshot read (Debezium `r`, Maxwell `bootstrap-insert`) → `+I(after)`, or skipped with
//!   [`SnapshotMode::Skip`].
//! * Update with a before image → `-D(before)` then `+I(after)` by default
//!   ([`UpdateMode::DeleteInsert`], as Paimon does), or `-U(before)` then `+U(after)` with
//!   [`UpdateMode::UpdateBeforeAfter`] (Flink's changelog formats). The before image is the
//!   after image overlaid with the fields the message gives for before (Debezium `before`,
//!   Canal/Maxwell `old`, which only list changed columns), so a partial before image still
//!   is a full row, and a primary-key change retracts the old key.
//! * Update without a before image (Debezium `u` with `before: null`, e.g. PostgreSQL
//!   `REPLICA IDENTITY DEFAULT`; Canal/Maxwell without `old`) → only the after change
//!   (`+I`, or `+U`): an upsert. Paimon fails on these; lakejoin accepts them.
//! * Delete → `-D(before)`. A Debezium `d` without `before` uses the record key (the
//!   primary-key struct) instead.
//! * Tombstones (null payload) → skipped ([`SkipReason::Tombstone`]), except in
//!   `upsert-json`, where a null value deletes the key.
//! * Debezium `t` (truncate) and `m` (logical message), Canal `isDdl`/DDL types, Maxwell
//!   DDL and bootstrap markers → skipped with a reason, never an error.
//!
//! Fields that are not columns are ignored, or reported with [`CdcOptions::strict`] as
//! [`DecodeError::SchemaChanged`] (the CDC pipeline then evolves the table or stops).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::table::datum::Row;
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;

mod avro;
mod canal;
pub(crate) mod changelog;
mod coerce;
mod debezium;
mod envelope;
mod error;
mod fact;
mod flat_object;
#[cfg(test)]
mod fuzz_seeds;
pub(crate) mod json;
mod json_scan;
mod json_value;
mod maxwell;
mod registry;
mod row;
mod upsert;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

pub use avro::AvroSchema;
pub(crate) use avro::{CONFLUENT_MAGIC, EncodeError};
pub(crate) use debezium::shape::{NoShape, SourceTable, source_table};
pub use error::{ColumnError, DecodeError, Part, SourceColumn};
pub use fact::{Fact, RawFact};
pub(crate) use fact::{FactValueError, FieldName};
pub(crate) use registry::SchemaRegistrar;
pub use registry::SchemaResolver;

use row::RowBuilder;

/// An input or output format, spelled as in `connectors.toml` (`"debezium-json"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Json,
    DebeziumJson,
    CanalJson,
    MaxwellJson,
    UpsertJson,
    Avro,
    DebeziumAvro,
}

impl Format {
    /// Every format, in declaration order.
    pub(crate) const ALL: [Format; 7] = [
        Format::Json,
        Format::DebeziumJson,
        Format::CanalJson,
        Format::MaxwellJson,
        Format::UpsertJson,
        Format::Avro,
        Format::DebeziumAvro,
    ];

    /// The configuration spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::DebeziumJson => "debezium-json",
            Format::CanalJson => "canal-json",
            Format::MaxwellJson => "maxwell-json",
            Format::UpsertJson => "upsert-json",
            Format::Avro => "avro",
            Format::DebeziumAvro => "debezium-avro",
        }
    }

    /// Whether payloads are Avro (and so need [`CdcOptions::avro`]).
    pub(crate) fn is_avro(self) -> bool {
        matches!(self, Format::Avro | Format::DebeziumAvro)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                Error::Config(format!(
                    "unknown format `{s}`; expected one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// One consumed Kafka record, borrowed from the consumer's message.
#[derive(Debug, Clone, Copy, Default)]
pub struct KafkaRecord<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub key: Option<&'a [u8]>,
    pub payload: Option<&'a [u8]>,
}

/// One change to a table: a full row (columns the message lacks are null) and its kind.
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    pub kind: RowKind,
    pub row: Row,
}

/// What a record decoded to.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// Changes to apply, in order (possibly none, e.g. a Canal message with empty `data`).
    Changes(Vec<RowChange>),
    /// A record that carries no row change; counted, not an error.
    Skipped(SkipReason),
}

/// Why a record carried no row change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// A null payload (log-compaction tombstone).
    Tombstone,
    /// A snapshot read, skipped by [`SnapshotMode::Skip`].
    SnapshotRead,
    /// A truncate event (Debezium `op: t`).
    Truncate,
    /// A schema change or other DDL statement (Canal `isDdl`, Maxwell `table-alter`, …).
    Ddl(String),
    /// Any other non-row event (Debezium `m` messages, Maxwell bootstrap markers, …).
    Other(String),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Tombstone => f.write_str("tombstone (null payload)"),
            SkipReason::SnapshotRead => f.write_str("snapshot read skipped by configuration"),
            SkipReason::Truncate => f.write_str("truncate event"),
            SkipReason::Ddl(what) => write!(f, "DDL event: {what}"),
            SkipReason::Other(what) => write!(f, "non-row event: {what}"),
        }
    }
}

/// How an update with a before image becomes row changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpdateMode {
    /// `-D(before)`, `+I(after)`: what Paimon's Flink CDC ingestion writes.
    #[default]
    DeleteInsert,
    /// `-U(before)`, `+U(after)`: Flink's changelog semantics. Prefer this for
    /// `partial-update`/`aggregation` tables with `remove-record-on-delete`, where a `-D`
    /// would drop the record instead of retracting the old values.
    UpdateBeforeAfter,
    /// `+U(after)` only (Flink's upsert changelog mode, which has no update-before); a
    /// change of the primary key still deletes the old key first. For `partial-update`
    /// tables, which cannot take a retraction without `ignore-delete` or sequence groups.
    Upsert,
}

/// What happens to snapshot reads (Debezium `r`, Maxwell `bootstrap-insert`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotMode {
    /// Insert them (`+I`), as Paimon does.
    #[default]
    Insert,
    /// Skip them ([`SkipReason::SnapshotRead`]), e.g. when the table was bulk-loaded.
    Skip,
}

/// Unit of epoch numbers given for TIMESTAMP columns when the message has no schema that
/// says (schemaless Debezium JSON, plain JSON). Avro logical types and Debezium's
/// `io.debezium.time.*` schema names override it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EpochUnit {
    #[default]
    Millis,
    Micros,
    Nanos,
}

/// A value of the message or record, not of the row, that can fill a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metadata {
    /// When the CDC tool processed the change, epoch ms: Debezium `ts_ms`, Canal `ts`,
    /// Maxwell `ts` (seconds, scaled). Usable as a `sequence.field`.
    IngestionTimestamp,
    /// When the database committed the change, epoch ms: Debezium `source.ts_ms`, Canal
    /// `es`, Maxwell `ts` (seconds, scaled).
    SourceTimestamp,
    /// Source database: Debezium `source.db`, Canal/Maxwell `database`.
    Database,
    /// Source table: Debezium `source.table`, Canal/Maxwell `table`.
    Table,
    /// Kafka topic of the record.
    Topic,
    /// Kafka partition of the record.
    Partition,
    /// Kafka offset of the record.
    Offset,
    /// Kafka timestamp of the record, epoch ms.
    Timestamp,
}

impl FromStr for Metadata {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "ingestion-timestamp" => Metadata::IngestionTimestamp,
            "source-timestamp" => Metadata::SourceTimestamp,
            "database" => Metadata::Database,
            "table" => Metadata::Table,
            "topic" => Metadata::Topic,
            "partition" => Metadata::Partition,
            "offset" => Metadata::Offset,
            "timestamp" => Metadata::Timestamp,
            _ => {
                return Err(Error::Config(format!(
                    "unknown metadata `{s}`; expected ingestion-timestamp, source-timestamp, \
                     database, table, topic, partition, offset or timestamp"
                )));
            }
        })
    }
}

/// Where Avro writer schemas come from.
#[derive(Debug, Clone)]
pub enum AvroSchemas {
    /// Payloads are plain Avro binary written with this one schema (a schema file).
    Plain(Arc<AvroSchema>),
    /// Payloads are in the Confluent wire format (magic byte 0, 4-byte big-endian schema id,
    /// Avro binary); ids are resolved by the resolver (registry and/or local files).
    Confluent(Arc<SchemaResolver>),
}

/// Options of a CDC decoder; `Default` is the common case.
#[derive(Debug, Clone, Default)]
pub struct CdcOptions {
    /// Column → dotted path of its source field in the row object, for columns whose
    /// field is named differently or nested (`"customer.id"`). Other columns are looked up
    /// by their own name.
    pub field_paths: BTreeMap<String, String>,
    /// Columns filled from the message's metadata; they win over a field of the same name.
    pub metadata: BTreeMap<String, Metadata>,
    /// `json` and `avro`: a field holding the row kind (`+I`, `-U`, `+U`, `-D`); it is not
    /// a column. Without it every record is `+I`.
    pub row_kind_field: Option<String>,
    pub update_mode: UpdateMode,
    pub snapshot_mode: SnapshotMode,
    pub epoch_unit: EpochUnit,
    /// Report records with fields that are not columns as
    /// [`DecodeError::SchemaChanged`] (default: ignore the fields).
    pub strict: bool,
    /// `avro` and `debezium-avro`: where the writer schemas come from.
    pub avro: Option<AvroSchemas>,
}

/// Decodes the records of CDC topics into changes of one table. Built once per pipeline.
#[derive(Debug)]
pub struct CdcDecoder {
    format: Format,
    builder: RowBuilder,
    options: CdcOptions,
}

impl CdcDecoder {
    /// Checks the options against the format and the table schema; every problem is
    /// reported at once as a [`Error::Config`].
    pub fn new(format: Format, schema: Arc<TableSchema>, options: CdcOptions) -> Result<Self> {
        let mut problems = Vec::new();
        if format.is_avro() && options.avro.is_none() {
            problems.push(format!(
                "format `{format}` needs an Avro schema source (a schema file, a schema \
                 registry or local schema files)"
            ));
        }
        if !format.is_avro() && options.avro.is_some() {
            problems.push(format!("format `{format}` takes no Avro schema"));
        }
        if options.row_kind_field.is_some() && !matches!(format, Format::Json | Format::Avro) {
            problems.push(format!(
                "`row_kind_field` applies to the json and avro formats, not `{format}`"
            ));
        }
        let builder = match RowBuilder::new(schema, &options) {
            Ok(b) => Some(b),
            Err(mut p) => {
                problems.append(&mut p);
                None
            }
        };
        match builder {
            Some(builder) if problems.is_empty() => Ok(CdcDecoder {
                format,
                builder,
                options,
            }),
            _ => Err(Error::Config(problems.join("; "))),
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Fetches the writer schema a Confluent-framed record refers to, unless it is cached.
    /// The only async step: call it before [`CdcDecoder::decode`], which is synchronous
    /// and fails with [`DecodeError::Schema`] for ids that were never fetched. Cheap (no
    /// await point reached) when the schema is cached or the format has no registry.
    pub(crate) async fn prepare(&self, record: &KafkaRecord<'_>) -> Result<(), DecodeError> {
        prepare_avro(self.options.avro.as_ref(), record).await
    }

    /// Decodes one record. Never panics.
    pub fn decode(&self, record: &KafkaRecord<'_>) -> Result<Decoded, DecodeError> {
        let ctx = Ctx {
            format: self.format,
            builder: &self.builder,
            options: &self.options,
            record,
        };
        match self.format {
            Format::Json => json::decode_cdc(&ctx),
            Format::DebeziumJson => debezium::decode_json(&ctx),
            Format::CanalJson => canal::decode(&ctx),
            Format::MaxwellJson => maxwell::decode(&ctx),
            Format::UpsertJson => upsert::decode(&ctx),
            Format::Avro => {
                let Some(payload) = record.payload else {
                    return Ok(Decoded::Skipped(SkipReason::Tombstone));
                };
                let (object, _) = decode_avro_payload(self.options.avro.as_ref(), payload)?;
                json::flat_change(&ctx, &object)
            }
            Format::DebeziumAvro => {
                let Some(payload) = record.payload else {
                    return Ok(Decoded::Skipped(SkipReason::Tombstone));
                };
                let (object, schema) = decode_avro_payload(self.options.avro.as_ref(), payload)?;
                debezium::decode_envelope(&ctx, &object, schema.row_hints(), schema.row_types())
            }
        }
    }
}

/// What the format decoders share for one record.
pub(crate) struct Ctx<'a, 'r> {
    pub(crate) format: Format,
    pub(crate) builder: &'a RowBuilder,
    pub(crate) options: &'a CdcOptions,
    pub(crate) record: &'a KafkaRecord<'r>,
}

/// Decodes fact records (enrichment input) into JSON objects.
#[derive(Debug)]
pub struct FactDecoder {
    format: Format,
    avro: Option<AvroSchemas>,
}

impl FactDecoder {
    /// `json`, or `avro` with its schema source; other formats are a config error.
    pub fn new(format: Format, avro: Option<AvroSchemas>) -> Result<Self> {
        match (format, &avro) {
            (Format::Json, None) | (Format::Avro, Some(_)) => Ok(FactDecoder { format, avro }),
            (Format::Json, Some(_)) => Err(Error::Config(
                "format `json` takes no Avro schema".to_string(),
            )),
            (Format::Avro, None) => Err(Error::Config(
                "format `avro` needs an Avro schema source (a schema file, a schema registry \
                 or local schema files)"
                    .to_string(),
            )),
            (other, _) => Err(Error::Config(format!(
                "format `{other}` cannot decode fact records; use json or avro"
            ))),
        }
    }

    /// See [`CdcDecoder::prepare`].
    pub(crate) async fn prepare(&self, record: &KafkaRecord<'_>) -> Result<(), DecodeError> {
        prepare_avro(self.avro.as_ref(), record).await
    }

    /// The record as a JSON object, in the JSON form of `datum_to_json` for Avro (decimals
    /// as strings, dates `YYYY-MM-DD`, timestamps as text, bytes base64). A JSON object
    /// stays its payload bytes where it can (see [`Fact`]). `None` for a tombstone (null
    /// payload).
    pub fn decode<'a>(&self, record: &KafkaRecord<'a>) -> Result<Option<Fact<'a>>, DecodeError> {
        let Some(payload) = record.payload else {
            return Ok(None);
        };
        match self.format {
            Format::Avro => {
                decode_avro_payload(self.avro.as_ref(), payload).map(|(m, _)| Some(Fact::Tree(m)))
            }
            _ => match Fact::raw(payload) {
                Some(fact) => Ok(Some(fact)),
                None => {
                    json_value::parse_object(payload, Part::Payload).map(|m| Some(Fact::Tree(m)))
                }
            },
        }
    }
}

/// Encodes enriched records for the output topic.
#[derive(Debug, Clone)]
pub(crate) enum OutputEncoder {
    /// `serde_json` bytes of the object.
    Json,
    /// Avro binary with this schema; with `confluent_id`, framed in the Confluent wire
    /// format with that schema id.
    Avro {
        schema: Arc<AvroSchema>,
        confluent_id: Option<u32>,
    },
}

impl OutputEncoder {
    /// Encodes one record. JSON never fails; Avro fails when a value does not fit the
    /// schema, naming the field.
    #[cfg(test)]
    pub(crate) fn encode(&self, record: &Map<String, Value>) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(64);
        self.encode_into(record, &mut out)?;
        Ok(out)
    }

    /// [`OutputEncoder::encode`], appended to `out`.
    pub(crate) fn encode_into(
        &self,
        record: &Map<String, Value>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match self {
            OutputEncoder::Json => {
                serde_json::to_writer(&mut *out, record).map_err(|e| EncodeError {
                    path: String::new(),
                    expected: "JSON-serialisable value".into(),
                    got: e.to_string(),
                })
            }
            OutputEncoder::Avro {
                schema,
                confluent_id,
            } => {
                if let Some(id) = confluent_id {
                    out.push(CONFLUENT_MAGIC);
                    out.extend_from_slice(&id.to_be_bytes());
                }
                schema.encode_object(record, out)
            }
        }
    }
}

async fn prepare_avro(
    avro: Option<&AvroSchemas>,
    record: &KafkaRecord<'_>,
) -> Result<(), DecodeError> {
    if let (Some(AvroSchemas::Confluent(resolver)), Some(payload)) = (avro, record.payload)
        && let Ok((id, _)) = avro::split_confluent(payload)
        && resolver.cached(id).is_none()
    {
        resolver.resolve(id).await?;
    }
    Ok(())
}

/// Decodes an Avro payload whose top level is a record; returns it with its schema.
fn decode_avro_payload(
    avro: Option<&AvroSchemas>,
    payload: &[u8],
) -> Result<(Map<String, Value>, Arc<AvroSchema>), DecodeError> {
    let (schema, body) = match avro {
        Some(AvroSchemas::Plain(schema)) => (schema.clone(), payload),
        Some(AvroSchemas::Confluent(resolver)) => {
            let (id, body) = avro::split_confluent(payload)?;
            let schema = resolver.cached(id).ok_or_else(|| DecodeError::Schema {
                id,
                reason: "schema not fetched (prepare() was not awaited, or the fetch failed)"
                    .into(),
                transient: true,
            })?;
            (schema, body)
        }
        None => {
            return Err(DecodeError::Malformed {
                part: Part::Payload,
                reason: "no Avro schema configured".into(),
            });
        }
    };
    match schema.decode(body)? {
        Value::Object(map) => Ok((map, schema)),
        other => Err(DecodeError::Malformed {
            part: Part::Payload,
            reason: format!(
                "the Avro schema's top level is not a record (decoded {})",
                json_value::type_name(&other)
            ),
        }),
    }
}
