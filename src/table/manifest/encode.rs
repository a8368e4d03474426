//! Writing manifest files and lists in Java Paimon 1.4's layout exactly: its writer
//! schemas (a golden test compares them with files Java wrote) and its field order.

use std::sync::LazyLock;

use serde_json::json;

use super::model::{FileSource, ManifestCompression, ManifestEntry, ManifestFileMeta, SimpleStats};
use crate::avro::{ContainerWriter, put_bytes, put_items, put_long, put_strings};
use crate::error::Result;

/// `_VERSION` of manifest entries and manifest-file metas. Java rejects any other value.
const FORMAT_VERSION: i64 = 2;

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

pub(super) static MANIFEST_ENTRY_SCHEMA: LazyLock<String> = LazyLock::new(|| {
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

pub(super) static MANIFEST_FILE_META_SCHEMA: LazyLock<String> = LazyLock::new(|| {
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

/// Encodes a manifest file holding `entries`, in order.
pub fn encode_manifest(
    entries: &[ManifestEntry],
    compression: ManifestCompression,
) -> Result<Vec<u8>> {
    encode_file(&MANIFEST_ENTRY_SCHEMA, entries, compression, put_entry)
}

/// Encodes a manifest list holding `metas`, in order.
pub fn encode_manifest_list(
    metas: &[ManifestFileMeta],
    compression: ManifestCompression,
) -> Result<Vec<u8>> {
    encode_file(
        &MANIFEST_FILE_META_SCHEMA,
        metas,
        compression,
        put_file_meta,
    )
}

/// A container file of `schema` holding `records`, each written by `put`.
fn encode_file<T>(
    schema: &str,
    records: &[T],
    compression: ManifestCompression,
    put: fn(&mut Vec<u8>, &T),
) -> Result<Vec<u8>> {
    let mut writer = ContainerWriter::new(schema, compression.codec());
    for record in records {
        writer.append(|buf| put(buf, record))?;
    }
    Ok(writer.finish()?)
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
    put_strings(buf, &f.extra_files);
    put_opt(buf, f.creation_time, put_long);
    put_opt(buf, f.delete_row_count, put_long);
    put_opt(buf, f.embedded_file_index.as_deref(), put_bytes);
    put_opt(buf, f.file_source.map(FileSource::code), put_long);
    put_opt(buf, f.value_stats_cols.as_deref(), put_strings);
    put_opt(
        buf,
        f.external_path.as_ref().map(|p| p.as_bytes()),
        put_bytes,
    );
    put_opt(buf, f.first_row_id, put_long);
    put_opt(buf, f.write_cols.as_deref(), put_strings);
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
    put_opt(buf, m.min_bucket.map(i64::from), put_long);
    put_opt(buf, m.max_bucket.map(i64::from), put_long);
    put_opt(buf, m.min_level.map(i64::from), put_long);
    put_opt(buf, m.max_level.map(i64::from), put_long);
    put_opt(buf, m.min_row_id, put_long);
    put_opt(buf, m.max_row_id, put_long);
}

fn put_stats(buf: &mut Vec<u8>, s: &SimpleStats) {
    put_bytes(buf, &s.min_values);
    put_bytes(buf, &s.max_values);
    put_opt(buf, s.null_counts.as_deref(), |buf, counts| {
        put_items(buf, counts.iter(), |buf, c| put_opt(buf, *c, put_long))
    });
}

/// A nullable field, `["null", T]`: branch 0, or branch 1 and the value.
fn put_opt<T>(buf: &mut Vec<u8>, v: Option<T>, put: impl FnOnce(&mut Vec<u8>, T)) {
    match v {
        None => put_long(buf, 0),
        Some(v) => {
            put_long(buf, 1);
            put(buf, v);
        }
    }
}
