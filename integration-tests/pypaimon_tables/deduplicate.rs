//! Deduplicate tables, the default merge engine: random +I/+U/-D over a composite key
//! (T1), -D rows in a file alone in its bucket, which pypaimon reads without merging
//! (T2, T2b), value filters applied after the merge (on a partial-update table too), and
//! a TIMESTAMP `sequence.field` under which a late older change loses. Both writers, both
//! readers: the newest version of a key must win the same way in each.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::{Creator, DedupModel, Table, TableSpec, assert_same_rows};
use crate::{
    KEY_STRINGS, apply_dedup, filter_rows, random_dedup_changes, random_double, random_text,
};

/// T1: deduplicate, 4 buckets, composite key (INT, long STRING), random +I/+U/-D over three
/// lakejoin commits, read back by pypaimon and by lakejoin; a key filter k1=3.
#[test]
fn t1_dedup_composite_key_random_changes() {
    let spec = TableSpec::new(
        "db.t1",
        &[
            "k1:INT",
            "k2:STRING",
            "v_int:BIGINT",
            "v_str:STRING",
            "v_double:DOUBLE",
        ],
        &["k1", "k2"],
        4,
    )
    .merge_engine("deduplicate");
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut rng = StdRng::seed_from_u64(1);
    let mut model = DedupModel::default();
    let mut make_row = |rng: &mut StdRng| {
        json!({
            "k1": rng.random_range(0..6),
            "k2": *KEY_STRINGS.choose(rng).expect("non-empty"),
            "v_int": rng.random_range(-1_000_000_000_000i64..1_000_000_000_000),
            "v_str": random_text(rng),
            "v_double": random_double(rng),
        })
    };
    for commit in 1..=3 {
        let rows = random_dedup_changes(&mut rng, &spec, 40, &mut make_row);
        table.lj_write(&rows, Some("op"));
        apply_dedup(&mut model, &spec, &rows, false);
        table.check_latest_commit_files(&format!("T1 commit {commit}"), 0, 0);
        table.assert_both_read(&format!("T1 after commit {commit}"), &model.rows());
    }
    assert!(model.len() > 5, "test data should leave live keys");

    // Key filter: pypaimon prunes files with _KEY_STATS, so wrong key stats lose rows.
    let expected = filter_rows(&model.rows(), "k1", &json!(3));
    assert!(!expected.is_empty(), "test data should have k1=3 rows");
    table.assert_both_read_at("T1 where k1=3", None, Some("k1=3"), &expected);

    assert_eq!(
        table.lj_snapshots().len(),
        3,
        "T1: three commits, three snapshots"
    );
    table.check_snapshot_record_counts("T1");
}

/// T2: a single data file holding -D rows: the deleted keys must not surface in pypaimon,
/// which reads a lone file without merging unless `_DELETE_ROW_COUNT` says it has deletes.
#[test]
fn t2_single_file_with_delete_does_not_surface() {
    let spec = TableSpec::new("db.t2", &["id:INT", "name:STRING"], &["id"], 1);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let rows = vec![
        json!({"id": 1, "name": "kept", "op": "+I"}),
        json!({"id": 2, "name": "inserted then deleted", "op": "+I"}),
        json!({"id": 2, "name": "inserted then deleted", "op": "-D"}),
        json!({"id": 3, "name": "never inserted", "op": "-D"}),
    ];
    table.lj_write(&rows, Some("op"));
    let files = table.check_latest_commit_files("T2", 0, 0);
    assert_eq!(
        files.len(),
        1,
        "T2: one bucket, one commit: one file: {files:?}"
    );
    assert_eq!(
        files[0]["deleteRowCount"],
        json!(2),
        "T2: the file holds two -D rows (ids 2 and 3): {}",
        files[0]
    );
    table.assert_both_read("T2", &[json!({"id": 1, "name": "kept"})]);
}

/// T2b: the other direction of T2. pypaimon stores `_DELETE_ROW_COUNT=0` even for a file
/// with -D rows, and then shows those rows itself when the file is alone in its bucket;
/// lakejoin must drop them whatever the manifest says.
#[test]
fn t2b_lakejoin_drops_deletes_in_lone_pypaimon_file() {
    let spec = TableSpec::new(
        "db.t2b",
        &["id:INT", "name:STRING", "op:STRING"],
        &["id"],
        1,
    )
    .option("rowkind.field", "op");
    let table = Table::create(spec.clone(), Creator::Pypaimon);
    table.py_write(&[
        json!({"id": 1, "name": "kept", "op": "+I"}),
        json!({"id": 2, "name": "deleted", "op": "-D"}),
        json!({"id": 3, "name": "retracted", "op": "-U"}),
    ]);
    let files = table.py_files(None);
    assert_eq!(files.len(), 1, "T2b precondition: one file: {files:?}");
    assert_eq!(
        files[0]["retractRowCount"],
        json!(2),
        "T2b precondition: the file holds the -D and -U rows: {}",
        files[0]
    );
    assert_same_rows(
        "T2b: lakejoin scan",
        &[json!({"id": 1, "name": "kept", "op": "+I"})],
        &table.lj_scan(None, None),
        &spec.primary_key,
    );
}

/// A filter on a value column applies to the merged rows: a key whose newest version no
/// longer matches must not come back with an older version that does.
#[test]
fn value_filter_applies_after_merge() {
    let spec = TableSpec::new("db.vf", &["id:INT", "v:STRING", "n:INT"], &["id"], 1);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    table.lj_write(
        &[
            json!({"id": 1, "v": "old", "n": 1}),
            json!({"id": 2, "v": "old", "n": 2}),
        ],
        None,
    );
    table.lj_write(&[json!({"id": 1, "v": "new", "n": 10})], None);
    table.assert_both_read_at(
        "dedup where v=old",
        None,
        Some("v=old"),
        &[json!({"id": 2, "v": "old", "n": 2})],
    );
    table.assert_both_read_at(
        "dedup where n=10",
        None,
        Some("n=10"),
        &[json!({"id": 1, "v": "new", "n": 10})],
    );

    let spec = TableSpec::new("db.vfp", &["id:INT", "a:STRING", "b:INT"], &["id"], 1)
        .merge_engine("partial-update");
    let table = Table::create(spec, Creator::Lakejoin);
    table.lj_write(&[json!({"id": 1, "a": "x", "b": 1})], None);
    table.lj_write(&[json!({"id": 1, "b": 2})], None);
    table.assert_both_read_at("partial-update where b=1", None, Some("b=1"), &[]);
    table.assert_both_read_at(
        "partial-update where a=x",
        None,
        Some("a=x"),
        &[json!({"id": 1, "a": "x", "b": 2})],
    );
}

/// Deduplicate with a TIMESTAMP sequence field: a late change with an older sequence value
/// (an update or a delete) loses against the newer version already in the table, in a
/// later commit and inside one commit; both writers, both readers.
fn dedup_sequence_field(writer: Creator) {
    let spec = TableSpec::new(
        "db.dedup_seq",
        &["id:INT", "v:STRING", "ts:TIMESTAMP(3)", "op:STRING"],
        &["id"],
        2,
    )
    .sequence_field(&["ts"])
    .option("rowkind.field", "op");
    let table = Table::create(spec, writer);
    let write = |rows: &[Value]| match writer {
        Creator::Lakejoin => table.lj_write(rows, None),
        Creator::Pypaimon => table.py_write(rows),
    };
    write(&[
        json!({"id": 1, "v": "ten", "ts": "2024-01-01 10:00:00", "op": "+I"}),
        json!({"id": 2, "v": "ten", "ts": "2024-01-01 10:00:00", "op": "+I"}),
        json!({"id": 3, "v": "newer first", "ts": "2024-01-01 11:00:00.5", "op": "+I"}),
        json!({"id": 3, "v": "older second", "ts": "2024-01-01 11:00:00.25", "op": "+U"}),
    ]);
    write(&[
        json!({"id": 1, "v": "nine (late)", "ts": "2024-01-01 09:00:00", "op": "+U"}),
        json!({"id": 2, "v": "ten", "ts": "2024-01-01 09:59:59.999", "op": "-D"}),
        json!({"id": 4, "v": "new", "ts": "2024-01-01 12:00:00", "op": "+I"}),
    ]);
    let mut expected = vec![
        json!({"id": 1, "v": "ten", "ts": "2024-01-01 10:00:00", "op": "+I"}),
        json!({"id": 2, "v": "ten", "ts": "2024-01-01 10:00:00", "op": "+I"}),
        json!({"id": 3, "v": "newer first", "ts": "2024-01-01 11:00:00.5", "op": "+I"}),
        json!({"id": 4, "v": "new", "ts": "2024-01-01 12:00:00", "op": "+I"}),
    ];
    table.assert_both_read(
        &format!("dedup sequence field, {writer:?} writes"),
        &expected,
    );

    // A newer delete, its kind given by the table's `rowkind.field` column.
    write(&[json!({"id": 4, "v": "new", "ts": "2024-01-01 13:00:00", "op": "-D"})]);
    expected.pop();
    table.assert_both_read(
        &format!("dedup sequence field, newer -D through rowkind.field, {writer:?} writes"),
        &expected,
    );
}

#[test]
fn dedup_sequence_field_lakejoin_writes() {
    dedup_sequence_field(Creator::Lakejoin);
}

#[test]
fn dedup_sequence_field_pypaimon_writes() {
    dedup_sequence_field(Creator::Pypaimon);
}
