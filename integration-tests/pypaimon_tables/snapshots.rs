//! Snapshots: time travel to snapshots of both writers, `lakejoin table snapshots`
//! against what pypaimon reads from the snapshot files, and bad input that must fail
//! `lakejoin table write` naming the line without committing a snapshot.

use serde_json::{Value, json};

use crate::support::{Creator, DedupModel, Table, TableSpec, full_row, snapshot_count, without};

/// `--snapshot N` reads the table as of snapshot N, for snapshots of both writers.
#[test]
fn time_travel_both_writers() {
    let spec = TableSpec::new("db.tt", &["id:INT", "v:STRING"], &["id"], 2);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut model = DedupModel::default();
    let mut history = Vec::new();
    let commits = vec![
        (
            Creator::Lakejoin,
            vec![
                json!({"id": 1, "v": "a", "op": "+I"}),
                json!({"id": 2, "v": "b", "op": "+I"}),
            ],
        ),
        (
            Creator::Lakejoin,
            vec![
                json!({"id": 1, "op": "-D"}),
                json!({"id": 3, "v": "c", "op": "+I"}),
            ],
        ),
        (
            Creator::Pypaimon,
            vec![json!({"id": 2, "v": "b2"}), json!({"id": 4, "v": "d"})],
        ),
        (
            Creator::Lakejoin,
            vec![
                json!({"id": 1, "v": "a again", "op": "+I"}),
                json!({"id": 4, "op": "-D"}),
            ],
        ),
    ];
    for (writer, rows) in &commits {
        match writer {
            Creator::Lakejoin => table.lj_write(rows, Some("op")),
            Creator::Pypaimon => table.py_write(rows),
        }
        for row in rows {
            let kind = row.get("op").and_then(Value::as_str).unwrap_or("+I");
            model.apply(&spec, kind, &without(row, "op"));
        }
        history.push(model.rows());
    }
    for (index, expected) in history.iter().enumerate() {
        let id = index as u64 + 1;
        table.assert_both_read_at(&format!("time travel to {id}"), Some(id), None, expected);
    }
    table.assert_both_read("latest", &model.rows());
}

/// `lakejoin table snapshots` lists what pypaimon reads from the snapshot files.
#[test]
fn snapshots_listing_matches_pypaimon() {
    let spec = TableSpec::new("db.snaps", &["id:INT", "v:STRING"], &["id"], 1);
    let table = Table::create(spec, Creator::Lakejoin);
    table.lj_write(
        &[json!({"id": 1, "v": "a"}), json!({"id": 2, "v": "b"})],
        None,
    );
    table.py_write(&[json!({"id": 3, "v": "c"})]);
    table.lj_write(&[json!({"id": 1, "v": "a2"})], None);
    table.lj_compact_full();

    let lakejoin_view = table.lj_snapshots();
    let pypaimon_view = table.py_snapshots();
    assert_eq!(
        lakejoin_view.len(),
        4,
        "four commits, four snapshots: {lakejoin_view:?}"
    );
    for (lj, py) in lakejoin_view.iter().zip(&pypaimon_view) {
        for key in [
            "id",
            "schemaId",
            "commitUser",
            "commitIdentifier",
            "commitKind",
            "totalRecordCount",
            "deltaRecordCount",
            "timeMillis",
        ] {
            assert_eq!(
                lj[key], py[key],
                "snapshot {}: {key} differs\n  lakejoin: {lj}\n  pypaimon: {py}",
                py["id"]
            );
        }
        assert!(
            lj["properties"].is_object(),
            "snapshot {}: properties is an object: {lj}",
            py["id"]
        );
    }
    let kinds: Vec<&Value> = lakejoin_view.iter().map(|s| &s["commitKind"]).collect();
    assert_eq!(
        kinds,
        vec![
            &json!("APPEND"),
            &json!("APPEND"),
            &json!("APPEND"),
            &json!("COMPACT")
        ]
    );
    table.check_snapshot_record_counts("snapshots");
}

/// Bad input makes `lakejoin table write` fail, naming the line, and commits nothing.
#[test]
fn bad_input_is_rejected_without_commit() {
    let spec = TableSpec::new(
        "db.bad",
        &[
            "id:INT",
            "name:STRING",
            "amount:DECIMAL(10,2)",
            "day:DATE",
            "at:TIMESTAMP(9)",
        ],
        &["id"],
        2,
    );
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let good = vec![json!({"id": 1, "name": "one", "amount": "1.50", "day": "2024-01-01"})];
    table.lj_write(&good, None);
    let expected = vec![full_row(&spec, &good[0])];

    let valid = r#"{"id": 5, "name": "five", "amount": "5.00", "day": "2024-01-05"}"#;
    let cases: Vec<(&str, Vec<&str>, usize, Option<&str>)> = vec![
        (
            "unknown column",
            vec![valid, r#"{"id": 2, "nope": 1}"#],
            2,
            None,
        ),
        (
            "string for INT",
            vec![valid, valid, r#"{"id": "two"}"#],
            3,
            None,
        ),
        (
            "bad DATE",
            vec![r#"{"id": 2, "day": "2024-13-45"}"#],
            1,
            None,
        ),
        (
            "bad DECIMAL",
            vec![valid, r#"{"id": 2, "amount": "abc"}"#],
            2,
            None,
        ),
        ("missing key", vec![valid, r#"{"name": "no id"}"#], 2, None),
        (
            "null key",
            vec![valid, r#"{"id": null, "name": "null id"}"#],
            2,
            None,
        ),
        (
            "INT out of range",
            vec![valid, r#"{"id": 3000000000}"#],
            2,
            None,
        ),
        // TIMESTAMP(9) is stored as int64 nanoseconds: 1677-09-21 .. 2262-04-11.
        (
            "TIMESTAMP(9) after the range",
            vec![valid, r#"{"id": 2, "at": "2262-04-12 00:00:00"}"#],
            2,
            None,
        ),
        (
            "TIMESTAMP(9) before the range",
            vec![valid, r#"{"id": 2, "at": "1677-09-20 00:00:00"}"#],
            2,
            None,
        ),
        ("malformed JSON", vec![valid, r#"{"id": 4,"#], 2, None),
        ("not an object", vec![valid, valid, "[1, 2]"], 3, None),
        (
            "unknown row kind",
            vec![valid, r#"{"id": 2, "op": "+X"}"#],
            2,
            Some("op"),
        ),
    ];
    for (what, lines, bad_line, row_kind_field) in cases {
        let stdin = lines.join("\n") + "\n";
        let output = table.lj_write_raw(&stdin, row_kind_field);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success(),
            "{what}: lakejoin table write accepted bad input\n  input:\n{stdin}\n  stderr: {stderr}"
        );
        assert!(
            stderr.to_lowercase().contains(&format!("line {bad_line}")),
            "{what}: stderr does not name line {bad_line}:\n{stderr}"
        );
        assert_eq!(
            table.lj_snapshots().len(),
            1,
            "{what}: a failed write must not commit"
        );
    }
    assert_eq!(snapshot_count(&table), 1, "pypaimon sees one snapshot");
    table.assert_both_read("after rejected writes", &expected);
}
