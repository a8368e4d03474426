//! Every Paimon type lakejoin supports in one table, both directions, with nulls and edge
//! values (extreme integers, negative and widest decimals, empty and non-ASCII strings,
//! NaN and infinities, the timestamp range of each precision), in the key too: a Java
//! table's rows are looked up by lakejoin, so the bucket of every key type must agree.
//!
//! Why a file of its own: the values are long, and they are the one place where the two
//! programs' JSON encodings meet in full (support/java.rs maps them).

use serde_json::{Value, json};

use crate::support::{Creator, Table, TableSpec, assert_same_rows, expect_success, full_row};

const KEY_COLUMNS: [&str; 5] = [
    "id:INT",
    "k_str:STRING",
    "k_dec:DECIMAL(20,4)",
    "k_ts:TIMESTAMP(6)",
    "k_date:DATE",
];

const VALUE_COLUMNS: [&str; 22] = [
    "c_bool:BOOLEAN",
    "c_tiny:TINYINT",
    "c_small:SMALLINT",
    "c_int:INT",
    "c_big:BIGINT",
    "c_float:FLOAT",
    "c_double:DOUBLE",
    "c_dec:DECIMAL(10,2)",
    "c_dec18:DECIMAL(18,4)",
    "c_wide:DECIMAL(38,10)",
    "c_str:STRING",
    "c_varchar:VARCHAR(20)",
    "c_char:CHAR(5)",
    "c_bytes:BYTES",
    "c_binary:BINARY(4)",
    "c_varbinary:VARBINARY(8)",
    "c_date:DATE",
    "c_ts0:TIMESTAMP(0)",
    "c_ts3:TIMESTAMP(3)",
    "c_ts6:TIMESTAMP(6)",
    "c_ltz3:TIMESTAMP(3) WITH LOCAL TIME ZONE",
    "c_ltz6:TIMESTAMP(6) WITH LOCAL TIME ZONE",
];

const PARTITION_COLUMNS: [&str; 4] = ["p_date:DATE", "p_str:STRING", "p_int:INT", "p_bool:BOOLEAN"];

fn names(columns: &[&str]) -> Vec<String> {
    columns
        .iter()
        .map(|c| c.split_once(':').expect("name:TYPE").0.to_owned())
        .collect()
}

/// TIMESTAMP(7..9): Parquet INT96 in both directions (Java reads no other encoding of it).
const NANOS_COLUMN: &str = "c_ts9:TIMESTAMP(9)";

fn spec(partitioned: bool) -> TableSpec {
    let mut columns: Vec<&str> = Vec::new();
    let mut key = Vec::new();
    if partitioned {
        columns.extend(PARTITION_COLUMNS);
        key.extend(names(&PARTITION_COLUMNS));
    }
    columns.extend(KEY_COLUMNS);
    key.extend(names(&KEY_COLUMNS));
    columns.extend(VALUE_COLUMNS);
    columns.push(NANOS_COLUMN);
    let key: Vec<&str> = key.iter().map(String::as_str).collect();
    let name = if partitioned {
        "db.types_p"
    } else {
        "db.types"
    };
    let spec = TableSpec::new(name, &columns, &key, 3);
    if partitioned {
        let partition = names(&PARTITION_COLUMNS);
        let partition: Vec<&str> = partition.iter().map(String::as_str).collect();
        spec.partition_by(&partition)
    } else {
        spec
    }
}

/// In lakejoin's encoding, so the rows read back equal them.
fn values() -> Vec<Value> {
    vec![
        json!({
            "k_str": "", "k_dec": "-1234567890123456.7890", "k_ts": "1969-12-31 23:59:59.999999",
            "k_date": "1970-01-01",
            "c_bool": true, "c_tiny": -128, "c_small": 32767, "c_int": -2147483648,
            "c_big": 9223372036854775807i64, "c_float": 0.1, "c_double": 0.1,
            "c_dec": "-12345678.90", "c_dec18": "12345678901234.5678",
            "c_wide": "-1234567890123456789012345678.0123456789",
            "c_str": "héllo wörld, 日本語 ✓", "c_varchar": "twenty chars exactly",
            "c_char": "abcde", "c_bytes": "AAEC/w==", "c_binary": "AAEC/w==",
            "c_varbinary": "AAECAwQFBgc=", "c_date": "1969-12-31",
            "c_ts0": "1969-12-31 23:59:59", "c_ts3": "2024-01-01 00:00:00.123",
            "c_ts6": "1900-01-01 00:00:00.000001", "c_ts9": "2262-04-11 23:47:16.854775807",
            "c_ltz3": "2024-02-29 12:00:00.5", "c_ltz6": "1970-01-01 00:00:00.000001",
        }),
        json!({
            "k_str": "日本/a=b", "k_dec": "0.0000", "k_ts": "2024-01-01 00:00:00",
            "k_date": "0001-01-01",
            "c_bool": false, "c_tiny": 127, "c_small": -32768, "c_int": 2147483647,
            "c_big": -9223372036854775808i64, "c_float": -3.4028235e38, "c_double": "NaN",
            "c_dec": "0.00", "c_dec18": "-0.0001", "c_wide": "0.0000000000",
            "c_str": "", "c_varchar": "", "c_char": "€uro!", "c_bytes": "",
            "c_binary": "/////w==", "c_varbinary": "", "c_date": "2024-02-29",
            "c_ts0": "2038-01-19 03:14:08", "c_ts3": "1969-12-31 23:59:59.999",
            "c_ts6": "2024-06-30 12:00:00.5", "c_ts9": "1677-09-21 00:12:43.145224193",
            "c_ltz3": "1969-12-31 23:59:59.999", "c_ltz6": "2262-04-11 23:47:16.854775",
        }),
        json!({
            "k_str": "z", "k_dec": "9999999999999999.9999", "k_ts": "9999-12-31 23:59:59.999999",
            "k_date": "9999-12-31",
            "c_bool": true, "c_tiny": 0, "c_small": 0, "c_int": 0, "c_big": 0,
            "c_float": 1e-45, "c_double": "-inf", "c_dec": "99999999.99",
            "c_dec18": "-99999999999999.9999",
            "c_wide": "9999999999999999999999999999.9999999999",
            "c_str": " ", "c_varchar": "日本語", "c_char": "x",
            "c_bytes": "AAECAwQFBgcICQoLDA0ODw==", "c_binary": "AAAAAA==",
            "c_varbinary": "/w==", "c_date": "0001-01-01",
            "c_ts0": "1970-01-01 00:00:00", "c_ts3": "9999-12-31 23:59:59.999",
            "c_ts6": "1969-12-31 23:59:59.999999", "c_ts9": "1970-01-01 00:00:00.000000001",
            "c_ltz3": "9999-12-31 23:59:59.999", "c_ltz6": "0001-01-01 00:00:00",
        }),
        json!({
            "k_str": "a", "k_dec": "-0.0001", "k_ts": "0001-01-01 00:00:00",
            "k_date": "1969-12-31",
            "c_float": "inf", "c_double": 1e-300,
        }),
        // Every value column null.
        json!({"k_str": "null", "k_dec": "1.0000", "k_ts": "2024-01-01 00:00:00.5", "k_date": "2024-01-01"}),
    ]
}

/// The rows of `values` for `spec` (`full_row` drops the columns it lacks).
fn rows(spec: &TableSpec, partitioned: bool) -> Vec<Value> {
    let partitions = [
        json!({"p_date": "2024-01-01", "p_str": "a b/c=d", "p_int": -1, "p_bool": true}),
        json!({"p_date": "1970-01-01", "p_str": "", "p_int": 7, "p_bool": false}),
        json!({"p_date": "0001-01-01", "p_str": "日本%20x", "p_int": 0, "p_bool": true}),
    ];
    let mut rows = Vec::new();
    for (index, values) in values().into_iter().enumerate() {
        let copies = if partitioned { partitions.len() } else { 1 };
        for copy in 0..copies {
            let mut row = values.clone();
            row["id"] = json!(index as i64 * 10 + copy as i64);
            if partitioned {
                let partition = &partitions[(index + copy) % partitions.len()];
                for (key, value) in partition.as_object().expect("object") {
                    row[key] = value.clone();
                }
            }
            rows.push(full_row(spec, &row));
        }
    }
    rows
}

fn key_of(spec: &TableSpec, row: &Value) -> Value {
    let mut key = serde_json::Map::new();
    for column in &spec.primary_key {
        key.insert(column.clone(), row[column].clone());
    }
    Value::Object(key)
}

/// lakejoin writes, Java reads; Java compacts lakejoin's files, both read again.
fn lakejoin_to_java(partitioned: bool) {
    let spec = spec(partitioned);
    let rows = rows(&spec, partitioned);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    table.lj_write(&rows, None);
    let key = &spec.primary_key;
    assert_same_rows("Java read", &rows, &table.java_read(None), key);
    assert_same_rows("lakejoin scan", &rows, &table.lj_scan(None, None), key);
    table.java_compact(true);
    assert_same_rows(
        "after Java's compaction: Java",
        &rows,
        &table.java_read(None),
        key,
    );
    assert_same_rows(
        "after Java's compaction: lakejoin",
        &rows,
        &table.lj_scan(None, None),
        key,
    );
}

/// Every type through lakejoin's compaction copying columns: one commit per row, so each
/// bucket holds small files of growing ids that overlap no other; the full compaction
/// rewrites them into one file per bucket without a merge. Java reads the copies and
/// compacts them again. (pypaimon's read script cannot print this table's NaN as JSON.)
fn copied_by_lakejoin_compaction(partitioned: bool) {
    let spec = spec(partitioned);
    let rows = rows(&spec, partitioned);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    for row in &rows {
        table.lj_write(std::slice::from_ref(row), None);
    }
    let output = table.lakejoin(&["table", "compact"], &["--full".to_owned()], "");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    expect_success("lakejoin table compact --full", output);
    let copied = stderr
        .split_once(" (")
        .and_then(|(_, rest)| rest.split_once(" copied without a merge"))
        .and_then(|(n, _)| n.parse::<usize>().ok());
    // More rows than buckets: some bucket holds two files or more, which are copied.
    assert!(
        copied.is_some_and(|n| n >= 2),
        "lakejoin's compaction: {stderr}"
    );
    let key = &spec.primary_key;
    assert_same_rows(
        "Java read after the copy",
        &rows,
        &table.java_read(None),
        key,
    );
    assert_same_rows(
        "lakejoin scan after the copy",
        &rows,
        &table.lj_scan(None, None),
        key,
    );
    table.java_compact(true);
    assert_same_rows(
        "after Java's compaction of the copies: lakejoin",
        &rows,
        &table.lj_scan(None, None),
        key,
    );
}

/// Java writes, lakejoin scans and looks every key up (and one key that is absent).
fn java_to_lakejoin(partitioned: bool) {
    let spec = spec(partitioned);
    let rows = rows(&spec, partitioned);
    let table = Table::create_with_java(spec.clone());
    table.java_write(&rows);
    let key = &spec.primary_key;
    assert_same_rows("Java read", &rows, &table.java_read(None), key);
    assert_same_rows("lakejoin scan", &rows, &table.lj_scan(None, None), key);
    for row in &rows {
        assert_eq!(
            table.lj_get(&key_of(&spec, row)).as_ref(),
            Some(row),
            "lakejoin table get"
        );
    }
    let mut absent = key_of(&spec, &rows[0]);
    absent["k_str"] = json!("absent");
    assert_eq!(table.lj_get(&absent), None, "lakejoin table get {absent}");
}

#[test]
fn every_type_lakejoin_writes_java_reads() {
    lakejoin_to_java(false);
}

#[test]
fn every_type_partitioned_lakejoin_writes_java_reads() {
    lakejoin_to_java(true);
}

#[test]
fn every_type_copied_by_lakejoin_compaction_reads_the_same_in_java() {
    copied_by_lakejoin_compaction(false);
}

#[test]
fn every_type_partitioned_copied_by_lakejoin_compaction_reads_the_same_in_java() {
    copied_by_lakejoin_compaction(true);
}

#[test]
fn every_type_java_writes_lakejoin_reads() {
    java_to_lakejoin(false);
}

#[test]
fn every_type_partitioned_java_writes_lakejoin_reads() {
    java_to_lakejoin(true);
}
