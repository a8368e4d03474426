//! Every column type in a round trip, in both directions and with and without partitions
//! on typed columns: values one implementation writes must read back unchanged in the
//! other's canonical scan encoding.

use serde_json::{Value, json};

use crate::filter_rows;
use crate::support::{Creator, Table, TableSpec, full_row};

const EVERY_TYPE_COLUMNS: [&str; 19] = [
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
    "c_date:DATE",
    "c_ts0:TIMESTAMP(0)",
    "c_ts3:TIMESTAMP(3)",
    "c_ts6:TIMESTAMP(6)",
    "c_ts9:TIMESTAMP(9)",
];

/// Rows in the canonical scan encoding (so the expected read-back equals the input).
fn every_type_values() -> Vec<Value> {
    vec![
        json!({
            "c_bool": true, "c_tiny": -128, "c_small": 32767, "c_int": -2147483648,
            "c_big": 9223372036854775807i64, "c_float": 0.1, "c_double": 0.1,
            "c_dec": "-12345678.90", "c_dec18": "12345678901234.5678",
            "c_wide": "-1234567890123456789012345678.0123456789",
            "c_str": "héllo wörld, a longer string", "c_varchar": "twenty chars exactly",
            "c_char": "abcde", "c_bytes": "AAEC/w==", "c_date": "1969-12-31",
            "c_ts0": "1969-12-31 23:59:59", "c_ts3": "2024-01-01 00:00:00.123",
            "c_ts6": "1900-01-01 00:00:00.000001", "c_ts9": "2262-04-11 23:47:16.854775807",
        }),
        json!({
            "c_bool": false, "c_tiny": 127, "c_small": -32768, "c_int": 2147483647,
            "c_big": -9223372036854775808i64, "c_float": -3.4028235e38, "c_double": 1e-300,
            "c_dec": "0.00", "c_dec18": "-0.0001", "c_wide": "0.0000000000",
            "c_str": "", "c_varchar": "", "c_char": "€uro!", "c_bytes": "",
            "c_date": "2024-02-29", "c_ts0": "2038-01-19 03:14:08", "c_ts3": "1969-12-31 23:59:59.999",
            "c_ts6": "2024-06-30 12:00:00.5", "c_ts9": "1677-09-21 00:12:43.145224193",
        }),
        json!({
            "c_bool": true, "c_tiny": 0, "c_small": 0, "c_int": 0, "c_big": 0,
            "c_float": 1.5, "c_double": -2.5e300, "c_dec": "99999999.99",
            "c_dec18": "99999999999999.9999", "c_wide": "9999999999999999999999999999.9999999999",
            "c_str": "short", "c_varchar": "日本語", "c_char": "x    ",
            "c_bytes": "AAECAwQFBgcICQoLDA0ODw==", "c_date": "0001-01-01",
            "c_ts0": "1970-01-01 00:00:00", "c_ts3": "9999-12-31 23:59:59.999",
            "c_ts6": "1969-12-31 23:59:59.999999", "c_ts9": "1970-01-01 00:00:00.000000001",
        }),
        // All nulls.
        json!({}),
    ]
}

fn every_type_spec(partitioned: bool) -> TableSpec {
    let mut columns: Vec<&str> = Vec::new();
    if partitioned {
        columns.extend(["p_date:DATE", "p_str:STRING", "p_int:INT", "p_bool:BOOLEAN"]);
    }
    columns.push("id:INT");
    columns.extend(EVERY_TYPE_COLUMNS);
    if partitioned {
        TableSpec::new(
            "db.every_type_p",
            &columns,
            &["p_date", "p_str", "p_int", "p_bool", "id"],
            3,
        )
        .partition_by(&["p_date", "p_str", "p_int", "p_bool"])
    } else {
        TableSpec::new("db.every_type", &columns, &["id"], 3)
    }
}

fn every_type_rows(spec: &TableSpec, partitioned: bool) -> Vec<Value> {
    let partitions = [
        json!({"p_date": "2024-01-01", "p_str": "a b/c=d", "p_int": -1, "p_bool": true}),
        json!({"p_date": "1970-01-01", "p_str": "", "p_int": 7, "p_bool": false}),
        json!({"p_date": "2024-01-01", "p_str": "日本%20x", "p_int": 0, "p_bool": true}),
    ];
    let mut rows = Vec::new();
    for (index, values) in every_type_values().into_iter().enumerate() {
        let copies = if partitioned { partitions.len() } else { 1 };
        for copy in 0..copies {
            let mut row = values.clone();
            row["id"] = json!(index as i64 * 10 + copy as i64);
            if partitioned {
                for (key, value) in partitions[(index + copy) % partitions.len()]
                    .as_object()
                    .expect("object")
                {
                    row[key] = value.clone();
                }
            }
            rows.push(full_row(spec, &row));
        }
    }
    rows
}

fn every_type_round_trip(partitioned: bool, writer: Creator) {
    let spec = every_type_spec(partitioned);
    let table = Table::create(spec.clone(), writer);
    let rows = every_type_rows(&spec, partitioned);
    let context = format!("every type (partitioned: {partitioned}, writer: {writer:?})");
    match writer {
        Creator::Lakejoin => {
            table.lj_write(&rows, None);
            table.check_latest_commit_files(&context, 0, 0);
        }
        Creator::Pypaimon => table.py_write(&rows),
    }
    table.assert_both_read(&context, &rows);
    if partitioned {
        let expected = filter_rows(&rows, "p_str", &json!(""));
        assert!(!expected.is_empty());
        table.assert_both_read_at(
            &format!("{context} where p_str=''"),
            None,
            Some("p_str="),
            &expected,
        );
    }
}

#[test]
fn every_type_lakejoin_to_pypaimon() {
    every_type_round_trip(false, Creator::Lakejoin);
}

#[test]
fn every_type_pypaimon_to_lakejoin() {
    every_type_round_trip(false, Creator::Pypaimon);
}

#[test]
fn every_type_partitioned_lakejoin_to_pypaimon() {
    every_type_round_trip(true, Creator::Lakejoin);
}

#[test]
fn every_type_partitioned_pypaimon_to_lakejoin() {
    every_type_round_trip(true, Creator::Pypaimon);
}
