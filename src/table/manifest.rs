//! Manifest files (`manifest-*`, one [`ManifestEntry`] per data-file change) and manifest
//! lists (`manifest-list-*`, one [`ManifestFileMeta`] per manifest file): pure Avro
//! encode/decode, no I/O. See `docs/format.md` §4.
//!
//! **Writing** follows Java Paimon 1.4's layout exactly (a golden test compares the writer
//! schemas with files Java wrote): a plain top-level record (Java ≤ 0.8 wrapped it in a
//! `["null", record]` union) named `record` in namespace `org.apache.paimon.avro.generated`, Java's field
//! order, nested records named after their path (`record__FILE`,
//! `record__FILE__KEY_STATS`, ...), non-null nested records (Java's newest manifest reader
//! rejects a nullable `_FILE`) and `["null", T]` with default `null` for nullable fields.
//! Manifest lists carry exactly Java's fields; pypaimon's extensions `_TOTAL_BUCKETS` and
//! `_EXTRA_FILES` are read by pypaimon with `dict.get` (absent = `None`), so leaving them out
//! only disables pypaimon's manifest-level bucket pruning.
//!
//! **Reading** resolves fields by name from the writer's schema, so the Java style, the
//! pypaimon style (a plain top-level record), older layouts with fewer or nullable fields
//! and unknown extra fields (e.g. pypaimon's `_WRITE_COLS_SEQUENCES`) all decode. Codecs
//! `null`, `deflate`, `snappy` and `zstandard` are accepted.

pub(crate) mod avro;
mod index;

pub use index::{DeletionVectorRange, IndexFileMeta, decode_index_manifest};

use std::sync::LazyLock;

use serde_json::json;

use crate::error::{Error, Result};
use avro::{BlockCodec, Cursor, Node, RecordNode, Val, put_bytes, put_long, put_string_array};

/// `_VERSION` of manifest entries and manifest-file metas. Java rejects any other value.
const FORMAT_VERSION: i64 = 2;

/// The serialized empty row: arity 0 (4 bytes, big-endian) and an 8-byte header.
const EMPTY_ROW: [u8; 12] = [0; 12];

/// Column-wise min/max/null-count stats. Rows are "serialized rows" (4-byte big-endian
/// arity + BinaryRow bytes), kept as raw bytes here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SimpleStats {
    /// Serialized row of per-column minimums.
    pub min_values: Vec<u8>,
    /// Serialized row of per-column maximums.
    pub max_values: Vec<u8>,
    /// Per-column null counts; `None` when the writer stored no array.
    pub null_counts: Option<Vec<Option<i64>>>,
}

impl SimpleStats {
    /// Stats over zero columns: empty rows (`00000000 0000000000000000`) and no null counts.
    pub fn empty() -> Self {
        SimpleStats {
            min_values: EMPTY_ROW.to_vec(),
            max_values: EMPTY_ROW.to_vec(),
            null_counts: Some(Vec::new()),
        }
    }
}

/// Whether a manifest entry adds or deletes a data file (`_KIND` 0 / 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// The file becomes live.
    Add,
    /// A previously added file is removed (its identity must match the ADD).
    Delete,
}

impl FileKind {
    fn code(self) -> i64 {
        match self {
            FileKind::Add => 0,
            FileKind::Delete => 1,
        }
    }
}

/// How a data file came to be (`_FILE_SOURCE` 0 / 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileSource {
    /// New data written by a writer.
    Append,
    /// Output of a compaction.
    Compact,
}

impl FileSource {
    fn code(self) -> i64 {
        match self {
            FileSource::Append => 0,
            FileSource::Compact => 1,
        }
    }
}

/// Metadata of one data file (the `_FILE` record of a manifest entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFileMeta {
    /// File name, relative to the bucket directory.
    pub file_name: String,
    /// Exact size in bytes.
    pub file_size: i64,
    /// All rows, retractions included.
    pub row_count: i64,
    /// Serialized row of the trimmed primary key of the first row.
    pub min_key: Vec<u8>,
    /// Serialized row of the trimmed primary key of the last row.
    pub max_key: Vec<u8>,
    /// Stats of the trimmed primary-key columns (used for pruning, must be correct).
    pub key_stats: SimpleStats,
    /// Stats of the value columns named by `value_stats_cols`.
    pub value_stats: SimpleStats,
    /// Smallest `_SEQUENCE_NUMBER` in the file.
    pub min_sequence_number: i64,
    /// Largest `_SEQUENCE_NUMBER` in the file.
    pub max_sequence_number: i64,
    /// Schema id the file was written with.
    pub schema_id: i64,
    /// LSM level (0 for freshly flushed files).
    pub level: i32,
    /// Sidecar files (file indexes); usually empty.
    pub extra_files: Vec<String>,
    /// Creation time in epoch milliseconds (informational).
    pub creation_time: Option<i64>,
    /// Number of -U/-D rows.
    pub delete_row_count: Option<i64>,
    /// Small file index stored inline.
    pub embedded_file_index: Option<Vec<u8>>,
    /// Append or compaction output.
    pub file_source: Option<FileSource>,
    /// Columns covered by `value_stats`: `None` = all, empty = none.
    pub value_stats_cols: Option<Vec<String>>,
    /// Full path when the file lives outside the table directory.
    pub external_path: Option<String>,
    /// First row id (row tracking); `None` for primary-key tables.
    pub first_row_id: Option<i64>,
    /// Columns of a partial-column file (data evolution); `None` normally.
    pub write_cols: Option<Vec<String>>,
}

/// One record of a manifest file: a data file added to or deleted from a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// Add or delete.
    pub kind: FileKind,
    /// Serialized partition row (the empty row for unpartitioned tables).
    pub partition: Vec<u8>,
    /// Bucket id.
    pub bucket: i32,
    /// Bucket count when the file was written (-1 for dynamic-bucket tables).
    pub total_buckets: i32,
    /// The data file.
    pub file: DataFileMeta,
}

/// Identity of a data file in a table; a DELETE entry cancels the ADD with the same one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileIdentifier {
    /// Serialized partition row.
    pub partition: Vec<u8>,
    /// Bucket id.
    pub bucket: i32,
    /// LSM level.
    pub level: i32,
    /// Data file name.
    pub file_name: String,
    /// Sidecar files.
    pub extra_files: Vec<String>,
    /// Inline file index.
    pub embedded_file_index: Option<Vec<u8>>,
    /// External location.
    pub external_path: Option<String>,
}

impl ManifestEntry {
    /// Identity used to cancel an ADD by a DELETE: (partition, bucket, level, file name,
    /// extra files, embedded index, external path), as Java and pypaimon compare them.
    pub fn identifier(&self) -> FileIdentifier {
        FileIdentifier {
            partition: self.partition.clone(),
            bucket: self.bucket,
            level: self.file.level,
            file_name: self.file.file_name.clone(),
            extra_files: self.file.extra_files.clone(),
            embedded_file_index: self.file.embedded_file_index.clone(),
            external_path: self.file.external_path.clone(),
        }
    }
}

/// One record of a manifest list: a manifest file and summary stats of its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFileMeta {
    /// Manifest file name in `manifest/`.
    pub file_name: String,
    /// Exact size in bytes.
    pub file_size: i64,
    /// Number of ADD entries.
    pub num_added_files: i64,
    /// Number of DELETE entries.
    pub num_deleted_files: i64,
    /// Min/max/null counts of the partition columns over the entries.
    pub partition_stats: SimpleStats,
    /// Largest schema id among the entries.
    pub schema_id: i64,
    /// Smallest bucket among the entries (pruning hint).
    pub min_bucket: Option<i32>,
    /// Largest bucket among the entries.
    pub max_bucket: Option<i32>,
    /// Smallest level among the entries.
    pub min_level: Option<i32>,
    /// Largest level among the entries.
    pub max_level: Option<i32>,
    /// Smallest row id (row tracking).
    pub min_row_id: Option<i64>,
    /// Largest row id (row tracking).
    pub max_row_id: Option<i64>,
}

/// Block compression of manifest files and lists (table option `manifest.compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ManifestCompression {
    /// Avro codec `zstandard`; Paimon's default.
    #[default]
    Zstd,
    /// Avro codec `deflate`.
    Deflate,
    /// Avro codec `snappy`.
    Snappy,
    /// Avro codec `null`.
    None,
}

impl ManifestCompression {
    /// Parses the option text (case-insensitive): `zstd`/`zstandard`, `deflate`, `snappy`,
    /// `none`/`null`/`uncompressed`. Java and pypaimon also know `bzip2` and `xz`, which
    /// lakejoin does not write.
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "zstd" | "zstandard" => Ok(ManifestCompression::Zstd),
            "deflate" => Ok(ManifestCompression::Deflate),
            "snappy" => Ok(ManifestCompression::Snappy),
            "none" | "null" | "uncompressed" => Ok(ManifestCompression::None),
            _ => Err(Error::Config(format!(
                "manifest.compression {text:?} is not supported \
                 (use zstd, deflate, snappy or none)"
            ))),
        }
    }

    fn codec(self) -> BlockCodec {
        match self {
            ManifestCompression::Zstd => BlockCodec::Zstandard,
            ManifestCompression::Deflate => BlockCodec::Deflate,
            ManifestCompression::Snappy => BlockCodec::Snappy,
            ManifestCompression::None => BlockCodec::Null,
        }
    }
}

// ------------------------------------------------------------------------------------------
// Writer schemas (Java style)
// ------------------------------------------------------------------------------------------

/// Java's `SimpleStats` record under the given record name.
fn stats_schema(name: &str) -> serde_json::Value {
    json!({"type": "record", "name": name, "fields": [
        {"name": "_MIN_VALUES", "type": "bytes"},
        {"name": "_MAX_VALUES", "type": "bytes"},
        {"name": "_NULL_COUNTS", "type": ["null", {"type": "array", "items": ["null", "long"]}],
         "default": null},
    ]})
}

/// A nullable field, written as Java writes them.
fn nullable(name: &str, ty: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "type": ["null", ty], "default": null})
}

/// The top-level record, as Java Paimon 1.x writes it (`AvroSchemaConverter`: a plain
/// record; Java ≤ 0.8 wrapped it in `["null", record]`, which readers still accept).
fn top_level(fields: Vec<serde_json::Value>) -> String {
    json!({
        "type": "record",
        "name": "record",
        "namespace": "org.apache.paimon.avro.generated",
        "fields": fields,
    })
    .to_string()
}

static MANIFEST_ENTRY_SCHEMA: LazyLock<String> = LazyLock::new(|| {
    let strings = json!({"type": "array", "items": "string"});
    let file = json!({"type": "record", "name": "record__FILE", "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": stats_schema("record__FILE__KEY_STATS")},
        {"name": "_VALUE_STATS", "type": stats_schema("record__FILE__VALUE_STATS")},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": strings},
        nullable("_CREATION_TIME", json!({"type": "long", "logicalType": "timestamp-millis"})),
        nullable("_DELETE_ROW_COUNT", json!("long")),
        nullable("_EMBEDDED_FILE_INDEX", json!("bytes")),
        nullable("_FILE_SOURCE", json!("int")),
        nullable("_VALUE_STATS_COLS", strings.clone()),
        nullable("_EXTERNAL_PATH", json!("string")),
        nullable("_FIRST_ROW_ID", json!("long")),
        nullable("_WRITE_COLS", strings.clone()),
    ]});
    // Java's newest manifest reader requires exactly these six top-level fields, in order.
    top_level(vec![
        json!({"name": "_VERSION", "type": "int"}),
        json!({"name": "_KIND", "type": "int"}),
        json!({"name": "_PARTITION", "type": "bytes"}),
        json!({"name": "_BUCKET", "type": "int"}),
        json!({"name": "_TOTAL_BUCKETS", "type": "int"}),
        json!({"name": "_FILE", "type": file}),
    ])
});

static MANIFEST_FILE_META_SCHEMA: LazyLock<String> = LazyLock::new(|| {
    top_level(vec![
        json!({"name": "_VERSION", "type": "int"}),
        json!({"name": "_FILE_NAME", "type": "string"}),
        json!({"name": "_FILE_SIZE", "type": "long"}),
        json!({"name": "_NUM_ADDED_FILES", "type": "long"}),
        json!({"name": "_NUM_DELETED_FILES", "type": "long"}),
        json!({"name": "_PARTITION_STATS", "type": stats_schema("record__PARTITION_STATS")}),
        json!({"name": "_SCHEMA_ID", "type": "long"}),
        nullable("_MIN_BUCKET", json!("int")),
        nullable("_MAX_BUCKET", json!("int")),
        nullable("_MIN_LEVEL", json!("int")),
        nullable("_MAX_LEVEL", json!("int")),
        nullable("_MIN_ROW_ID", json!("long")),
        nullable("_MAX_ROW_ID", json!("long")),
    ])
});

// ------------------------------------------------------------------------------------------
// Encoding
// ------------------------------------------------------------------------------------------

/// Encodes a manifest file holding `entries`, in order.
pub fn encode_manifest(
    entries: &[ManifestEntry],
    compression: ManifestCompression,
) -> Result<Vec<u8>> {
    let mut writer = avro::ContainerWriter::new(&MANIFEST_ENTRY_SCHEMA, compression.codec());
    for entry in entries {
        writer.append(|buf| put_entry(buf, entry))?;
    }
    writer.finish()
}

/// Encodes a manifest list holding `metas`, in order.
pub fn encode_manifest_list(
    metas: &[ManifestFileMeta],
    compression: ManifestCompression,
) -> Result<Vec<u8>> {
    let mut writer = avro::ContainerWriter::new(&MANIFEST_FILE_META_SCHEMA, compression.codec());
    for meta in metas {
        writer.append(|buf| put_file_meta(buf, meta))?;
    }
    writer.finish()
}

/// Encodes one entry in the field order of [`MANIFEST_ENTRY_SCHEMA`].
fn put_entry(buf: &mut Vec<u8>, e: &ManifestEntry) {
    put_long(buf, FORMAT_VERSION);
    put_long(buf, e.kind.code());
    put_bytes(buf, &e.partition);
    put_long(buf, e.bucket.into());
    put_long(buf, e.total_buckets.into());
    let f = &e.file;
    put_bytes(buf, f.file_name.as_bytes());
    put_long(buf, f.file_size);
    put_long(buf, f.row_count);
    put_bytes(buf, &f.min_key);
    put_bytes(buf, &f.max_key);
    put_stats(buf, &f.key_stats);
    put_stats(buf, &f.value_stats);
    put_long(buf, f.min_sequence_number);
    put_long(buf, f.max_sequence_number);
    put_long(buf, f.schema_id);
    put_long(buf, f.level.into());
    put_string_array(buf, &f.extra_files);
    put_opt_long(buf, f.creation_time);
    put_opt_long(buf, f.delete_row_count);
    put_opt_bytes(buf, f.embedded_file_index.as_deref());
    put_opt_long(buf, f.file_source.map(FileSource::code));
    put_opt_strings(buf, f.value_stats_cols.as_deref());
    put_opt_bytes(buf, f.external_path.as_ref().map(|p| p.as_bytes()));
    put_opt_long(buf, f.first_row_id);
    put_opt_strings(buf, f.write_cols.as_deref());
}

/// Encodes one manifest-file meta in the field order of [`MANIFEST_FILE_META_SCHEMA`].
fn put_file_meta(buf: &mut Vec<u8>, m: &ManifestFileMeta) {
    put_long(buf, FORMAT_VERSION);
    put_bytes(buf, m.file_name.as_bytes());
    put_long(buf, m.file_size);
    put_long(buf, m.num_added_files);
    put_long(buf, m.num_deleted_files);
    put_stats(buf, &m.partition_stats);
    put_long(buf, m.schema_id);
    put_opt_long(buf, m.min_bucket.map(i64::from));
    put_opt_long(buf, m.max_bucket.map(i64::from));
    put_opt_long(buf, m.min_level.map(i64::from));
    put_opt_long(buf, m.max_level.map(i64::from));
    put_opt_long(buf, m.min_row_id);
    put_opt_long(buf, m.max_row_id);
}

fn put_stats(buf: &mut Vec<u8>, s: &SimpleStats) {
    put_bytes(buf, &s.min_values);
    put_bytes(buf, &s.max_values);
    match &s.null_counts {
        None => put_long(buf, 0),
        Some(counts) => {
            put_long(buf, 1);
            if !counts.is_empty() {
                put_long(buf, counts.len() as i64);
                for c in counts {
                    put_opt_long(buf, *c);
                }
            }
            put_long(buf, 0);
        }
    }
}

/// `["null", long]` (or int: same encoding).
fn put_opt_long(buf: &mut Vec<u8>, v: Option<i64>) {
    match v {
        None => put_long(buf, 0),
        Some(v) => {
            put_long(buf, 1);
            put_long(buf, v);
        }
    }
}

/// `["null", bytes]` (or string: same encoding).
fn put_opt_bytes(buf: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => put_long(buf, 0),
        Some(v) => {
            put_long(buf, 1);
            put_bytes(buf, v);
        }
    }
}

fn put_opt_strings(buf: &mut Vec<u8>, v: Option<&[String]>) {
    match v {
        None => put_long(buf, 0),
        Some(v) => {
            put_long(buf, 1);
            put_string_array(buf, v);
        }
    }
}

// ------------------------------------------------------------------------------------------
// Decoding
// ------------------------------------------------------------------------------------------

/// Decodes a manifest file written by lakejoin, Java Paimon or pypaimon.
pub fn decode_manifest(bytes: &[u8]) -> Result<Vec<ManifestEntry>> {
    let file = avro::read_container(bytes)?;
    let layout = EntryLayout::new(top_record(&file.schema, "manifest")?)?;
    decode_records(&file, |v| layout.read(v))
}

/// Decodes a manifest list written by lakejoin, Java Paimon or pypaimon.
pub fn decode_manifest_list(bytes: &[u8]) -> Result<Vec<ManifestFileMeta>> {
    let file = avro::read_container(bytes)?;
    let layout = FileMetaLayout::new(top_record(&file.schema, "manifest list")?)?;
    decode_records(&file, |v| layout.read(v))
}

fn top_record<'s>(schema: &'s Node, what: &str) -> Result<&'s RecordNode> {
    schema.as_record().ok_or_else(|| {
        Error::format(format!(
            "{what} schema is neither a record nor a union holding one record"
        ))
    })
}

fn decode_records<T>(
    file: &avro::Container,
    mut convert: impl FnMut(Val<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let total = file.blocks.iter().map(|b| b.count).sum();
    let mut out = Vec::with_capacity(total);
    for block in &file.blocks {
        let mut cur = Cursor::new(&block.data);
        for _ in 0..block.count {
            out.push(convert(avro::decode(&file.schema, &mut cur)?)?);
        }
        // Leftover bytes mean the records were not what the schema says.
        if !cur.at_end() {
            return Err(Error::format("avro block has bytes after its last record"));
        }
    }
    Ok(out)
}

/// Positions of the known fields of a writer's record, resolved once per file.
struct Fields<'s> {
    record: &'s RecordNode,
    path: &'static str,
}

impl<'s> Fields<'s> {
    fn index(&self, name: &str) -> Option<usize> {
        self.record.field_index(name)
    }

    /// The record schema of the nested record field `name`, if the writer has that field.
    fn nested(&self, name: &'static str, path: &'static str) -> Result<Option<Fields<'s>>> {
        let Some(i) = self.index(name) else {
            return Ok(None);
        };
        match self.record.fields[i].node.as_record() {
            Some(record) => Ok(Some(Fields { record, path })),
            None => Err(Error::format(format!(
                "{}.{name} is not a record in the writer schema",
                self.path
            ))),
        }
    }
}

struct StatsLayout {
    min_values: Option<usize>,
    max_values: Option<usize>,
    null_counts: Option<usize>,
}

impl StatsLayout {
    fn new(fields: Option<Fields<'_>>) -> Option<Self> {
        fields.map(|f| StatsLayout {
            min_values: f.index("_MIN_VALUES"),
            max_values: f.index("_MAX_VALUES"),
            null_counts: f.index("_NULL_COUNTS"),
        })
    }

    fn read(layout: &Option<Self>, v: Val<'_>, path: &'static str) -> Result<SimpleStats> {
        let (Some(layout), Val::Record(mut v)) = (layout, v) else {
            return Err(missing(path));
        };
        Ok(SimpleStats {
            min_values: required(opt_bytes(take(&mut v, layout.min_values), path)?, path)?,
            max_values: required(opt_bytes(take(&mut v, layout.max_values), path)?, path)?,
            null_counts: opt_null_counts(take(&mut v, layout.null_counts), path)?,
        })
    }
}

struct EntryLayout {
    kind: Option<usize>,
    partition: Option<usize>,
    bucket: Option<usize>,
    total_buckets: Option<usize>,
    file: Option<usize>,
    f: FileLayout,
}

struct FileLayout {
    file_name: Option<usize>,
    file_size: Option<usize>,
    row_count: Option<usize>,
    min_key: Option<usize>,
    max_key: Option<usize>,
    key_stats: Option<usize>,
    key_stats_layout: Option<StatsLayout>,
    value_stats: Option<usize>,
    value_stats_layout: Option<StatsLayout>,
    min_sequence_number: Option<usize>,
    max_sequence_number: Option<usize>,
    schema_id: Option<usize>,
    level: Option<usize>,
    extra_files: Option<usize>,
    creation_time: Option<usize>,
    delete_row_count: Option<usize>,
    embedded_file_index: Option<usize>,
    file_source: Option<usize>,
    value_stats_cols: Option<usize>,
    external_path: Option<usize>,
    first_row_id: Option<usize>,
    write_cols: Option<usize>,
}

impl EntryLayout {
    fn new(record: &RecordNode) -> Result<Self> {
        let top = Fields {
            record,
            path: "manifest entry",
        };
        let file = top.nested("_FILE", "_FILE")?;
        let f = match &file {
            Some(f) => FileLayout {
                file_name: f.index("_FILE_NAME"),
                file_size: f.index("_FILE_SIZE"),
                row_count: f.index("_ROW_COUNT"),
                min_key: f.index("_MIN_KEY"),
                max_key: f.index("_MAX_KEY"),
                key_stats: f.index("_KEY_STATS"),
                key_stats_layout: StatsLayout::new(f.nested("_KEY_STATS", "_FILE._KEY_STATS")?),
                value_stats: f.index("_VALUE_STATS"),
                value_stats_layout: StatsLayout::new(
                    f.nested("_VALUE_STATS", "_FILE._VALUE_STATS")?,
                ),
                min_sequence_number: f.index("_MIN_SEQUENCE_NUMBER"),
                max_sequence_number: f.index("_MAX_SEQUENCE_NUMBER"),
                schema_id: f.index("_SCHEMA_ID"),
                level: f.index("_LEVEL"),
                extra_files: f.index("_EXTRA_FILES"),
                creation_time: f.index("_CREATION_TIME"),
                delete_row_count: f.index("_DELETE_ROW_COUNT"),
                embedded_file_index: f.index("_EMBEDDED_FILE_INDEX"),
                file_source: f.index("_FILE_SOURCE"),
                value_stats_cols: f.index("_VALUE_STATS_COLS"),
                external_path: f.index("_EXTERNAL_PATH"),
                first_row_id: f.index("_FIRST_ROW_ID"),
                write_cols: f.index("_WRITE_COLS"),
            },
            // Every `_FILE` field is then missing; the first record reports it.
            None => FileLayout {
                file_name: None,
                file_size: None,
                row_count: None,
                min_key: None,
                max_key: None,
                key_stats: None,
                key_stats_layout: None,
                value_stats: None,
                value_stats_layout: None,
                min_sequence_number: None,
                max_sequence_number: None,
                schema_id: None,
                level: None,
                extra_files: None,
                creation_time: None,
                delete_row_count: None,
                embedded_file_index: None,
                file_source: None,
                value_stats_cols: None,
                external_path: None,
                first_row_id: None,
                write_cols: None,
            },
        };
        Ok(EntryLayout {
            kind: top.index("_KIND"),
            partition: top.index("_PARTITION"),
            bucket: top.index("_BUCKET"),
            total_buckets: top.index("_TOTAL_BUCKETS"),
            file: top.index("_FILE"),
            f,
        })
    }

    fn read(&self, v: Val<'_>) -> Result<ManifestEntry> {
        let mut top = record_fields(v, "manifest entry")?;
        let kind = match required(opt_long(take(&mut top, self.kind), "_KIND")?, "_KIND")? {
            0 => FileKind::Add,
            1 => FileKind::Delete,
            other => return Err(Error::format(format!("unknown manifest _KIND {other}"))),
        };
        let partition = required(
            opt_bytes(take(&mut top, self.partition), "_PARTITION")?,
            "_PARTITION",
        )?;
        let bucket = required(opt_int(take(&mut top, self.bucket), "_BUCKET")?, "_BUCKET")?;
        let total_buckets = required(
            opt_int(take(&mut top, self.total_buckets), "_TOTAL_BUCKETS")?,
            "_TOTAL_BUCKETS",
        )?;
        let file = self.f.read(take(&mut top, self.file))?;
        Ok(ManifestEntry {
            kind,
            partition,
            bucket,
            total_buckets,
            file,
        })
    }
}

impl FileLayout {
    fn read(&self, v: Val<'_>) -> Result<DataFileMeta> {
        let mut f = record_fields(v, "_FILE")?;
        let l = self;
        Ok(DataFileMeta {
            file_name: required(
                opt_string(take(&mut f, l.file_name), "_FILE._FILE_NAME")?,
                "_FILE._FILE_NAME",
            )?,
            file_size: required(
                opt_long(take(&mut f, l.file_size), "_FILE._FILE_SIZE")?,
                "_FILE._FILE_SIZE",
            )?,
            row_count: required(
                opt_long(take(&mut f, l.row_count), "_FILE._ROW_COUNT")?,
                "_FILE._ROW_COUNT",
            )?,
            min_key: required(
                opt_bytes(take(&mut f, l.min_key), "_FILE._MIN_KEY")?,
                "_FILE._MIN_KEY",
            )?,
            max_key: required(
                opt_bytes(take(&mut f, l.max_key), "_FILE._MAX_KEY")?,
                "_FILE._MAX_KEY",
            )?,
            key_stats: StatsLayout::read(
                &l.key_stats_layout,
                take(&mut f, l.key_stats),
                "_FILE._KEY_STATS",
            )?,
            value_stats: StatsLayout::read(
                &l.value_stats_layout,
                take(&mut f, l.value_stats),
                "_FILE._VALUE_STATS",
            )?,
            min_sequence_number: required(
                opt_long(
                    take(&mut f, l.min_sequence_number),
                    "_FILE._MIN_SEQUENCE_NUMBER",
                )?,
                "_FILE._MIN_SEQUENCE_NUMBER",
            )?,
            max_sequence_number: required(
                opt_long(
                    take(&mut f, l.max_sequence_number),
                    "_FILE._MAX_SEQUENCE_NUMBER",
                )?,
                "_FILE._MAX_SEQUENCE_NUMBER",
            )?,
            schema_id: required(
                opt_long(take(&mut f, l.schema_id), "_FILE._SCHEMA_ID")?,
                "_FILE._SCHEMA_ID",
            )?,
            level: required(
                opt_int(take(&mut f, l.level), "_FILE._LEVEL")?,
                "_FILE._LEVEL",
            )?,
            // Java's oldest layouts lacked it; an absent list means "no sidecars".
            extra_files: opt_strings(take(&mut f, l.extra_files), "_FILE._EXTRA_FILES")?
                .unwrap_or_default(),
            creation_time: opt_long(take(&mut f, l.creation_time), "_FILE._CREATION_TIME")?,
            delete_row_count: opt_long(
                take(&mut f, l.delete_row_count),
                "_FILE._DELETE_ROW_COUNT",
            )?,
            embedded_file_index: opt_bytes(
                take(&mut f, l.embedded_file_index),
                "_FILE._EMBEDDED_FILE_INDEX",
            )?,
            file_source: opt_file_source(take(&mut f, l.file_source))?,
            value_stats_cols: opt_strings(
                take(&mut f, l.value_stats_cols),
                "_FILE._VALUE_STATS_COLS",
            )?,
            external_path: opt_string(take(&mut f, l.external_path), "_FILE._EXTERNAL_PATH")?,
            first_row_id: opt_long(take(&mut f, l.first_row_id), "_FILE._FIRST_ROW_ID")?,
            write_cols: opt_strings(take(&mut f, l.write_cols), "_FILE._WRITE_COLS")?,
        })
    }
}

struct FileMetaLayout {
    file_name: Option<usize>,
    file_size: Option<usize>,
    num_added_files: Option<usize>,
    num_deleted_files: Option<usize>,
    partition_stats: Option<usize>,
    partition_stats_layout: Option<StatsLayout>,
    schema_id: Option<usize>,
    min_bucket: Option<usize>,
    max_bucket: Option<usize>,
    min_level: Option<usize>,
    max_level: Option<usize>,
    min_row_id: Option<usize>,
    max_row_id: Option<usize>,
}

impl FileMetaLayout {
    fn new(record: &RecordNode) -> Result<Self> {
        let f = Fields {
            record,
            path: "manifest file meta",
        };
        Ok(FileMetaLayout {
            file_name: f.index("_FILE_NAME"),
            file_size: f.index("_FILE_SIZE"),
            num_added_files: f.index("_NUM_ADDED_FILES"),
            num_deleted_files: f.index("_NUM_DELETED_FILES"),
            partition_stats: f.index("_PARTITION_STATS"),
            partition_stats_layout: StatsLayout::new(
                f.nested("_PARTITION_STATS", "_PARTITION_STATS")?,
            ),
            schema_id: f.index("_SCHEMA_ID"),
            min_bucket: f.index("_MIN_BUCKET"),
            max_bucket: f.index("_MAX_BUCKET"),
            min_level: f.index("_MIN_LEVEL"),
            max_level: f.index("_MAX_LEVEL"),
            min_row_id: f.index("_MIN_ROW_ID"),
            max_row_id: f.index("_MAX_ROW_ID"),
        })
    }

    fn read(&self, v: Val<'_>) -> Result<ManifestFileMeta> {
        let mut m = record_fields(v, "manifest file meta")?;
        let l = self;
        Ok(ManifestFileMeta {
            file_name: required(
                opt_string(take(&mut m, l.file_name), "_FILE_NAME")?,
                "_FILE_NAME",
            )?,
            file_size: required(
                opt_long(take(&mut m, l.file_size), "_FILE_SIZE")?,
                "_FILE_SIZE",
            )?,
            num_added_files: required(
                opt_long(take(&mut m, l.num_added_files), "_NUM_ADDED_FILES")?,
                "_NUM_ADDED_FILES",
            )?,
            num_deleted_files: required(
                opt_long(take(&mut m, l.num_deleted_files), "_NUM_DELETED_FILES")?,
                "_NUM_DELETED_FILES",
            )?,
            partition_stats: StatsLayout::read(
                &l.partition_stats_layout,
                take(&mut m, l.partition_stats),
                "_PARTITION_STATS",
            )?,
            schema_id: required(
                opt_long(take(&mut m, l.schema_id), "_SCHEMA_ID")?,
                "_SCHEMA_ID",
            )?,
            min_bucket: opt_int(take(&mut m, l.min_bucket), "_MIN_BUCKET")?,
            max_bucket: opt_int(take(&mut m, l.max_bucket), "_MAX_BUCKET")?,
            min_level: opt_int(take(&mut m, l.min_level), "_MIN_LEVEL")?,
            max_level: opt_int(take(&mut m, l.max_level), "_MAX_LEVEL")?,
            min_row_id: opt_long(take(&mut m, l.min_row_id), "_MIN_ROW_ID")?,
            max_row_id: opt_long(take(&mut m, l.max_row_id), "_MAX_ROW_ID")?,
        })
    }
}

// ---- value conversion helpers: `Val::Null` stands for both "null" and "field absent" ----

fn missing(path: &str) -> Error {
    Error::format(format!("manifest field {path} is missing or null"))
}

fn mismatch(path: &str, v: &Val<'_>) -> Error {
    let found = match v {
        Val::Null => "null",
        Val::Bool(_) => "a boolean",
        Val::Long(_) => "an integer",
        Val::Float(_) | Val::Double(_) => "a floating-point number",
        Val::Bytes(_) => "bytes/string",
        Val::Array(_) => "an array",
        Val::Map(_) => "a map",
        Val::Record(_) => "a record",
    };
    Error::format(format!(
        "manifest field {path} has an unexpected type ({found})"
    ))
}

fn required<T>(v: Option<T>, path: &str) -> Result<T> {
    v.ok_or_else(|| missing(path))
}

/// Moves the value at `index` out of a decoded record (absent field: `Null`).
fn take<'a>(fields: &mut [Val<'a>], index: Option<usize>) -> Val<'a> {
    index
        .and_then(|i| fields.get_mut(i))
        .map(|v| std::mem::replace(v, Val::Null))
        .unwrap_or(Val::Null)
}

fn record_fields<'a>(v: Val<'a>, path: &str) -> Result<Vec<Val<'a>>> {
    match v {
        Val::Record(fields) => Ok(fields),
        Val::Null => Err(missing(path)),
        other => Err(mismatch(path, &other)),
    }
}

fn opt_long(v: Val<'_>, path: &str) -> Result<Option<i64>> {
    match v {
        Val::Null => Ok(None),
        Val::Long(x) => Ok(Some(x)),
        other => Err(mismatch(path, &other)),
    }
}

fn opt_int(v: Val<'_>, path: &str) -> Result<Option<i32>> {
    opt_long(v, path)?
        .map(|x| {
            i32::try_from(x)
                .map_err(|_| Error::format(format!("manifest field {path} = {x} overflows int")))
        })
        .transpose()
}

fn opt_bytes(v: Val<'_>, path: &str) -> Result<Option<Vec<u8>>> {
    match v {
        Val::Null => Ok(None),
        Val::Bytes(b) => Ok(Some(b.to_vec())),
        other => Err(mismatch(path, &other)),
    }
}

fn opt_string(v: Val<'_>, path: &str) -> Result<Option<String>> {
    match v {
        Val::Null => Ok(None),
        Val::Bytes(b) => std::str::from_utf8(b)
            .map(|s| Some(s.to_string()))
            .map_err(|_| Error::format(format!("manifest field {path} is not valid UTF-8"))),
        other => Err(mismatch(path, &other)),
    }
}

fn opt_strings(v: Val<'_>, path: &str) -> Result<Option<Vec<String>>> {
    match v {
        Val::Null => Ok(None),
        Val::Array(items) => items
            .into_iter()
            .map(|item| required(opt_string(item, path)?, path))
            .collect::<Result<Vec<_>>>()
            .map(Some),
        other => Err(mismatch(path, &other)),
    }
}

fn opt_null_counts(v: Val<'_>, path: &str) -> Result<Option<Vec<Option<i64>>>> {
    match v {
        Val::Null => Ok(None),
        Val::Array(items) => items
            .into_iter()
            .map(|item| opt_long(item, path))
            .collect::<Result<Vec<_>>>()
            .map(Some),
        other => Err(mismatch(path, &other)),
    }
}

fn opt_file_source(v: Val<'_>) -> Result<Option<FileSource>> {
    const PATH: &str = "_FILE._FILE_SOURCE";
    match v {
        Val::Null => Ok(None),
        Val::Long(0) => Ok(Some(FileSource::Append)),
        Val::Long(1) => Ok(Some(FileSource::Compact)),
        // Early pypaimon releases declared the field as a string.
        Val::Bytes(b) if b.eq_ignore_ascii_case(b"APPEND") || b == b"0" => {
            Ok(Some(FileSource::Append))
        }
        Val::Bytes(b) if b.eq_ignore_ascii_case(b"COMPACT") || b == b"1" => {
            Ok(Some(FileSource::Compact))
        }
        Val::Long(x) => Err(Error::format(format!("unknown {PATH} {x}"))),
        other => Err(mismatch(PATH, &other)),
    }
}

#[cfg(test)]
mod tests;
