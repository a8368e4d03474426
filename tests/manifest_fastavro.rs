//! Manifests and manifest lists written by lakejoin are readable by fastavro, the Avro
//! library pypaimon decodes them with: every field comes back with its value, the writer
//! schema is Java's style, and every key pypaimon looks up with `record[...]` is present.
//!
//! Needs a Python with fastavro: `$LAKEJOIN_PYTHON`, else `<crate>/.venv/bin/python`.

use std::path::{Path, PathBuf};
use std::process::Command;

use lakejoin::table::manifest::{
    DataFileMeta, FileKind, FileSource, ManifestCompression, ManifestEntry, ManifestFileMeta,
    SimpleStats, encode_manifest, encode_manifest_list,
};
use serde_json::{Value, json};

/// Reads the Avro files named on the command line and prints, per file, the codec, the
/// raw writer schema and the records (bytes as hex, timestamps as epoch millis).
const READER: &str = r#"
import datetime, json, sys
import fastavro

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

def plain(v):
    if isinstance(v, bytes):
        return {"hex": v.hex()}
    if isinstance(v, datetime.datetime):
        return {"millis": (v - EPOCH) // datetime.timedelta(milliseconds=1)}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v

out = []
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        out.append({
            "codec": reader.codec,
            "schema": json.loads(reader.metadata["avro.schema"]),
            "records": [plain(r) for r in reader],
        })
print(json.dumps(out))
"#;

fn python() -> PathBuf {
    let python = std::env::var_os("LAKEJOIN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    assert!(
        python.exists(),
        "no Python interpreter at {}: set LAKEJOIN_PYTHON to a Python with fastavro \
         (e.g. the pypaimon 2.1.0 venv) or create <crate>/.venv",
        python.display()
    );
    python
}

fn read_with_fastavro(paths: &[&Path]) -> Vec<Value> {
    let python = python();
    let output = Command::new(&python)
        .arg("-c")
        .arg(READER)
        .args(paths)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    assert!(
        output.status.success(),
        "fastavro failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice::<Vec<Value>>(&output.stdout).expect("reader prints JSON")
}

fn hex(bytes: &[u8]) -> Value {
    json!({"hex": bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()})
}

fn int_row(v: i32) -> Vec<u8> {
    let mut row = vec![0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    row.extend_from_slice(&v.to_le_bytes());
    row.extend_from_slice(&[0; 4]);
    row
}

fn entries() -> Vec<ManifestEntry> {
    let full = ManifestEntry {
        kind: FileKind::Delete,
        partition: int_row(7),
        bucket: 3,
        total_buckets: 4,
        file: DataFileMeta {
            file_name: "data-1-0.parquet".to_string(),
            file_size: 4096,
            row_count: 12,
            min_key: int_row(1),
            max_key: int_row(9),
            key_stats: SimpleStats {
                min_values: int_row(1),
                max_values: int_row(9),
                null_counts: Some(vec![Some(0)]),
            },
            value_stats: SimpleStats {
                min_values: int_row(-1),
                max_values: int_row(1),
                null_counts: Some(vec![None, Some(2)]),
            },
            min_sequence_number: 10,
            max_sequence_number: 21,
            schema_id: 1,
            level: 5,
            extra_files: vec!["index-1".to_string()],
            creation_time: Some(1_700_000_000_123),
            delete_row_count: Some(3),
            embedded_file_index: Some(vec![1, 2, 3]),
            file_source: Some(FileSource::Compact),
            value_stats_cols: Some(vec!["v".to_string()]),
            external_path: Some("s3://b/data-1-0.parquet".to_string()),
            first_row_id: Some(100),
            write_cols: Some(vec!["k".to_string(), "v".to_string()]),
        },
    };
    let sparse = ManifestEntry {
        kind: FileKind::Add,
        partition: SimpleStats::empty().min_values,
        bucket: 0,
        total_buckets: 1,
        file: DataFileMeta {
            file_name: "data-2-0.parquet".to_string(),
            file_size: 1,
            row_count: 1,
            min_key: int_row(5),
            max_key: int_row(5),
            key_stats: SimpleStats::empty(),
            value_stats: SimpleStats::empty(),
            min_sequence_number: 0,
            max_sequence_number: 0,
            schema_id: 0,
            level: 0,
            extra_files: vec![],
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
    vec![full, sparse]
}

fn metas() -> Vec<ManifestFileMeta> {
    vec![
        ManifestFileMeta {
            file_name: "manifest-a-0".to_string(),
            file_size: 2048,
            num_added_files: 5,
            num_deleted_files: 2,
            partition_stats: SimpleStats {
                min_values: int_row(1),
                max_values: int_row(7),
                null_counts: Some(vec![Some(0)]),
            },
            schema_id: 1,
            min_bucket: Some(0),
            max_bucket: Some(3),
            min_level: Some(0),
            max_level: Some(5),
            min_row_id: Some(1),
            max_row_id: Some(99),
        },
        ManifestFileMeta {
            file_name: "manifest-b-0".to_string(),
            file_size: 10,
            num_added_files: 0,
            num_deleted_files: 0,
            partition_stats: SimpleStats::empty(),
            schema_id: 0,
            min_bucket: None,
            max_bucket: None,
            min_level: None,
            max_level: None,
            min_row_id: None,
            max_row_id: None,
        },
    ]
}

fn stats_json(s: &SimpleStats) -> Value {
    json!({
        "_MIN_VALUES": hex(&s.min_values),
        "_MAX_VALUES": hex(&s.max_values),
        "_NULL_COUNTS": s.null_counts,
    })
}

fn entry_json(e: &ManifestEntry) -> Value {
    let f = &e.file;
    json!({
        "_VERSION": 2,
        "_KIND": if e.kind == FileKind::Add { 0 } else { 1 },
        "_PARTITION": hex(&e.partition),
        "_BUCKET": e.bucket,
        "_TOTAL_BUCKETS": e.total_buckets,
        "_FILE": {
            "_FILE_NAME": f.file_name,
            "_FILE_SIZE": f.file_size,
            "_ROW_COUNT": f.row_count,
            "_MIN_KEY": hex(&f.min_key),
            "_MAX_KEY": hex(&f.max_key),
            "_KEY_STATS": stats_json(&f.key_stats),
            "_VALUE_STATS": stats_json(&f.value_stats),
            "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
            "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
            "_SCHEMA_ID": f.schema_id,
            "_LEVEL": f.level,
            "_EXTRA_FILES": f.extra_files,
            "_CREATION_TIME": f.creation_time.map(|m| json!({"millis": m})),
            "_DELETE_ROW_COUNT": f.delete_row_count,
            "_EMBEDDED_FILE_INDEX": f.embedded_file_index.as_deref().map(hex),
            "_FILE_SOURCE": f.file_source.map(|s| if s == FileSource::Append { 0 } else { 1 }),
            "_VALUE_STATS_COLS": f.value_stats_cols,
            "_EXTERNAL_PATH": f.external_path,
            "_FIRST_ROW_ID": f.first_row_id,
            "_WRITE_COLS": f.write_cols,
        }
    })
}

fn meta_json(m: &ManifestFileMeta) -> Value {
    json!({
        "_VERSION": 2,
        "_FILE_NAME": m.file_name,
        "_FILE_SIZE": m.file_size,
        "_NUM_ADDED_FILES": m.num_added_files,
        "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": stats_json(&m.partition_stats),
        "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": m.min_bucket,
        "_MAX_BUCKET": m.max_bucket,
        "_MIN_LEVEL": m.min_level,
        "_MAX_LEVEL": m.max_level,
        "_MIN_ROW_ID": m.min_row_id,
        "_MAX_ROW_ID": m.max_row_id,
    })
}

/// Checks the Java 1.x layout: a plain top-level record `record` in Java's namespace.
fn assert_java_record(schema: &Value) -> &Value {
    assert!(schema.is_object(), "top-level schema is a record: {schema}");
    let record = schema;
    assert_eq!(record["type"], "record");
    assert_eq!(record["name"], "record");
    assert_eq!(record["namespace"], "org.apache.paimon.avro.generated");
    record
}

#[test]
fn fastavro_reads_our_manifest_and_manifest_list() {
    let dir = tempfile::tempdir().unwrap();
    let entries = entries();
    let metas = metas();
    let manifest = dir.path().join("manifest-test-0");
    let list = dir.path().join("manifest-list-test-0");
    let list_deflate = dir.path().join("manifest-list-test-1");
    let list_snappy = dir.path().join("manifest-list-test-2");
    std::fs::write(
        &manifest,
        encode_manifest(&entries, ManifestCompression::default()).unwrap(),
    )
    .unwrap();
    std::fs::write(
        &list,
        encode_manifest_list(&metas, ManifestCompression::Zstd).unwrap(),
    )
    .unwrap();
    std::fs::write(
        &list_deflate,
        encode_manifest_list(&metas, ManifestCompression::Deflate).unwrap(),
    )
    .unwrap();
    std::fs::write(
        &list_snappy,
        encode_manifest_list(&metas, ManifestCompression::Snappy).unwrap(),
    )
    .unwrap();

    let files = read_with_fastavro(&[&manifest, &list, &list_deflate, &list_snappy]);

    // The manifest.
    let m = &files[0];
    assert_eq!(m["codec"], "zstandard");
    let record = assert_java_record(&m["schema"]);
    let file_schema = &record["fields"][5]["type"];
    assert_eq!(file_schema["type"], "record");
    assert_eq!(file_schema["name"], "record__FILE");
    let records = m["records"].as_array().unwrap();
    assert_eq!(records.len(), entries.len());
    for (got, want) in records.iter().zip(&entries) {
        assert_eq!(got, &entry_json(want));
        // Keys pypaimon reads with `record[...]` (a missing one is a KeyError there).
        for key in ["_KIND", "_PARTITION", "_BUCKET", "_TOTAL_BUCKETS", "_FILE"] {
            assert!(got.get(key).is_some(), "{key}");
        }
        for key in [
            "_FILE_NAME",
            "_FILE_SIZE",
            "_ROW_COUNT",
            "_MIN_KEY",
            "_MAX_KEY",
            "_KEY_STATS",
            "_VALUE_STATS",
            "_MIN_SEQUENCE_NUMBER",
            "_MAX_SEQUENCE_NUMBER",
            "_SCHEMA_ID",
            "_LEVEL",
            "_EXTRA_FILES",
            "_CREATION_TIME",
            "_DELETE_ROW_COUNT",
            "_EMBEDDED_FILE_INDEX",
            "_FILE_SOURCE",
            "_VALUE_STATS_COLS",
        ] {
            assert!(got["_FILE"].get(key).is_some(), "_FILE.{key}");
        }
    }

    // The manifest lists, one per codec.
    for (file, codec) in files[1..].iter().zip(["zstandard", "deflate", "snappy"]) {
        assert_eq!(file["codec"], codec);
        let record = assert_java_record(&file["schema"]);
        assert_eq!(
            record["fields"][5]["type"]["name"],
            "record__PARTITION_STATS"
        );
        let want: Vec<Value> = metas.iter().map(meta_json).collect();
        assert_eq!(file["records"].as_array().unwrap(), &want);
    }
}

/// Reads `db.orders` of the warehouse given as argument with pypaimon, merge-on-read.
const PYPAIMON_READ: &str = r#"
import json, sys
from pypaimon import CatalogFactory

table = CatalogFactory.create({"warehouse": sys.argv[1]}).get_table("db.orders")
builder = table.new_read_builder()
rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
print(json.dumps(rows.sort_by([("dt", "ascending"), ("id", "ascending")]).to_pylist()))
"#;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn pypaimon_rows(warehouse: &Path) -> Value {
    let python = python();
    let output = Command::new(&python)
        .arg("-c")
        .arg(PYPAIMON_READ)
        .arg(warehouse)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    assert!(
        output.status.success(),
        "pypaimon failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("pypaimon prints JSON")
}

/// pypaimon itself (not just fastavro) reads a table whose latest snapshot's manifest
/// lists and manifests were all rewritten by lakejoin's encoder.
#[test]
fn pypaimon_reads_a_table_whose_manifests_we_rewrote() {
    use lakejoin::table::manifest::{decode_manifest, decode_manifest_list};

    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pypaimon");
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("warehouse");
    copy_dir(&golden, &warehouse);
    let table = warehouse.join("db.db/orders");
    let manifest_dir = table.join("manifest");

    let snapshot_path = table.join("snapshot/snapshot-3");
    let mut snapshot: Value =
        serde_json::from_slice(&std::fs::read(&snapshot_path).unwrap()).unwrap();
    for (list_key, size_key) in [
        ("baseManifestList", "baseManifestListSize"),
        ("deltaManifestList", "deltaManifestListSize"),
    ] {
        let list_path = manifest_dir.join(snapshot[list_key].as_str().unwrap());
        let mut metas = decode_manifest_list(&std::fs::read(&list_path).unwrap()).unwrap();
        for meta in &mut metas {
            let path = manifest_dir.join(&meta.file_name);
            let entries = decode_manifest(&std::fs::read(&path).unwrap()).unwrap();
            let ours = encode_manifest(&entries, ManifestCompression::Zstd).unwrap();
            meta.file_size = ours.len() as i64;
            std::fs::write(&path, ours).unwrap();
        }
        let ours = encode_manifest_list(&metas, ManifestCompression::Zstd).unwrap();
        snapshot[size_key] = json!(ours.len());
        std::fs::write(&list_path, ours).unwrap();
    }
    std::fs::write(&snapshot_path, serde_json::to_vec(&snapshot).unwrap()).unwrap();

    // Every manifest of snapshot 3 now has our Java-style schema.
    let check =
        read_with_fastavro(&[&manifest_dir.join(snapshot["deltaManifestList"].as_str().unwrap())]);
    assert_java_record(&check[0]["schema"]);

    assert_eq!(pypaimon_rows(&warehouse), pypaimon_rows(&golden));
    assert_eq!(
        pypaimon_rows(&warehouse),
        json!([
            {"id": 1, "dt": "2024-01-01", "name": "a1", "amount": 10},
            {"id": 2, "dt": "2024-01-01", "name": "a2-new", "amount": 21},
            {"id": 3, "dt": "2024-01-01", "name": "a3", "amount": 30},
            {"id": 4, "dt": "2024-01-01", "name": "a4", "amount": 40},
            {"id": 5, "dt": "2024-01-01", "name": "a5", "amount": 50},
            {"id": 6, "dt": "2024-01-01", "name": "a6", "amount": 60},
            {"id": 1, "dt": "2024-01-02", "name": "b1", "amount": 100},
            {"id": 2, "dt": "2024-01-02", "name": "b2", "amount": 200},
            {"id": 3, "dt": "2024-01-02", "name": "b3-new", "amount": 301},
        ])
    );
}
