//! Tables written by lakejoin read by pypaimon and the other way round.
//!
//! Every test drives the real `lakejoin` binary and pypaimon 2.1.0 (through
//! `integration-tests/py/oracle.py`) on the same table directory and checks both readers
//! against each other and against an in-test model. The tests T1–T8 port the round-trip
//! checks of the early format study; docs/format.md §13 lists them.

#[path = "support/mod.rs"]
mod support;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use support::{
    Creator, DedupModel, PartialUpdateModel, Table, TableSpec, assert_same_rows, file_names,
    full_row, snapshot_count, without,
};

/// Long (> 7 bytes, stored out of line in BinaryRow) and short (inline) key strings.
const KEY_STRINGS: [&str; 5] = [
    "a-much-longer-key-string",
    "another-rather-long-key",
    "short",
    "k",
    "ünïcödé-key-€",
];

fn random_text(rng: &mut StdRng) -> Value {
    if rng.random_bool(0.15) {
        return Value::Null;
    }
    let words = [
        "alpha",
        "beta",
        "gamma",
        "δέλτα",
        "",
        "a somewhat longer value text",
    ];
    json!(format!(
        "{}-{}",
        words.choose(rng).expect("non-empty"),
        rng.random_range(0..1000)
    ))
}

/// A double with an exact short decimal form.
fn random_double(rng: &mut StdRng) -> Value {
    if rng.random_bool(0.15) {
        return Value::Null;
    }
    json!(f64::from(rng.random_range(-8000..8000)) / 8.0)
}

/// Random change for a deduplicate table: +I/+U for a live key mostly, -D sometimes
/// (also for keys that do not exist), and -U/+U pairs.
fn random_dedup_changes(
    rng: &mut StdRng,
    spec: &TableSpec,
    count: usize,
    make_row: &mut dyn FnMut(&mut StdRng) -> Value,
) -> Vec<Value> {
    let mut rows = Vec::new();
    while rows.len() < count {
        let row = make_row(rng);
        let roll = rng.random_range(0..100);
        if roll < 55 {
            rows.push(with_kind(&row, "+I"));
        } else if roll < 75 {
            rows.push(with_kind(&row, "+U"));
        } else if roll < 90 {
            rows.push(with_kind(&row, "-D"));
        } else {
            // An update as CDC sends it: the before image, then the after image.
            rows.push(with_kind(&row, "-U"));
            let mut after = make_row(rng);
            for key in &spec.primary_key {
                after[key] = row[key].clone();
            }
            rows.push(with_kind(&after, "+U"));
        }
    }
    rows
}

fn with_kind(row: &Value, kind: &str) -> Value {
    let mut row = row.clone();
    row["op"] = json!(kind);
    row
}

fn apply_dedup(model: &mut DedupModel, spec: &TableSpec, rows: &[Value], keep_op: bool) {
    for row in rows {
        let kind = row["op"].as_str().expect("op");
        if keep_op {
            model.apply(spec, kind, row);
        } else {
            model.apply(spec, kind, &without(row, "op"));
        }
    }
}

fn filter_rows(rows: &[Value], column: &str, value: &Value) -> Vec<Value> {
    rows.iter()
        .filter(|row| &row[column] == value)
        .cloned()
        .collect()
}

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

/// T3: partial-update with a sequence field and out-of-order sequence values over four
/// commits; partitions DATE + STRING with characters that must be escaped in paths;
/// partition filters.
#[test]
fn t3_partial_update_sequence_field_partitions() {
    let spec = TableSpec::new(
        "db.t3",
        &[
            "dt:DATE",
            "region:STRING",
            "id:INT",
            "name:STRING",
            "score:INT",
            "seq:BIGINT",
        ],
        &["dt", "region", "id"],
        2,
    )
    .partition_by(&["dt", "region"])
    .merge_engine("partial-update")
    .sequence_field(&["seq"]);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let dates = ["2024-01-01", "1999-12-31"];
    let regions = ["eu/west", "us=east:1", "a b"];
    let mut rng = StdRng::seed_from_u64(3);
    let mut model = PartialUpdateModel::new(&spec);
    for commit in 1..=4 {
        let rows: Vec<Value> = (0..30)
            .map(|_| {
                let mut row = json!({
                    "dt": *dates.choose(&mut rng).expect("non-empty"),
                    "region": *regions.choose(&mut rng).expect("non-empty"),
                    "id": rng.random_range(0..5),
                    "seq": rng.random_range(0..40),
                });
                if rng.random_bool(0.6) {
                    row["name"] = random_text(&mut rng);
                }
                if rng.random_bool(0.6) {
                    row["score"] = json!(rng.random_range(0..100));
                }
                row
            })
            .collect();
        table.lj_write(&rows, None);
        model.commit(&rows);
        table.check_latest_commit_files(&format!("T3 commit {commit}"), 0, 0);
        table.assert_both_read(&format!("T3 after commit {commit}"), &model.rows());
    }

    // Directory names: DATE as epoch days, escaped '/', '=' and ':', space kept.
    for dir in [
        "dt=19723/region=eu%2Fwest",
        "dt=10956/region=us%3Deast%3A1",
        "dt=19723/region=a b",
    ] {
        assert!(
            table.path().join(dir).is_dir(),
            "T3: partition directory {dir} missing under {}",
            table.path().display()
        );
    }

    let all = model.rows();
    for (column, text, value) in [
        ("region", "eu/west", json!("eu/west")),
        ("dt", "1999-12-31", json!("1999-12-31")),
    ] {
        let expected = filter_rows(&all, column, &value);
        assert!(!expected.is_empty(), "T3: test data has {column}={text}");
        let filter = format!("{column}={text}");
        table.assert_both_read_at(
            &format!("T3 where {filter}"),
            None,
            Some(&filter),
            &expected,
        );
    }
    table.check_snapshot_record_counts("T3");
}

/// The per-commit folding of partial-update: commit 1 holds {a:1, seq:5} and {b:2, seq:1},
/// folded into one row with seq 5; commit 2 holds {b:9, seq:3}, which sorts before it, so
/// Paimon returns b=2 (folding all three rows globally would give b=9).
fn folding_rows() -> (TableSpec, Vec<Value>, Vec<Value>, Value) {
    let spec = TableSpec::new(
        "db.fold",
        &["k:INT", "a:INT", "b:INT", "seq:BIGINT"],
        &["k"],
        1,
    )
    .merge_engine("partial-update")
    .sequence_field(&["seq"]);
    let commit1 = vec![
        json!({"k": 1, "a": 1, "seq": 5}),
        json!({"k": 1, "b": 2, "seq": 1}),
    ];
    let commit2 = vec![json!({"k": 1, "b": 9, "seq": 3})];
    let expected = json!({"k": 1, "a": 1, "b": 2, "seq": 5});
    (spec, commit1, commit2, expected)
}

#[test]
fn partial_update_folds_per_commit_lakejoin_writes() {
    let (spec, commit1, commit2, expected) = folding_rows();
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    table.lj_write(&commit1, None);
    table.lj_write(&commit2, None);
    let mut model = PartialUpdateModel::new(&spec);
    model.commit(&commit1);
    model.commit(&commit2);
    assert_eq!(
        model.rows(),
        vec![expected.clone()],
        "the model folds per commit"
    );
    table.assert_both_read("partial-update folding, lakejoin writes", &[expected]);
}

#[test]
fn partial_update_folds_per_commit_pypaimon_writes() {
    let (spec, commit1, commit2, expected) = folding_rows();
    let table = Table::create(spec, Creator::Pypaimon);
    table.py_write(&commit1);
    table.py_write(&commit2);
    table.assert_both_read("partial-update folding, pypaimon writes", &[expected]);
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

/// T4 and T4b: pypaimon appends to a lakejoin table (it must resume sequence numbers after
/// lakejoin's and chain onto its manifests), then lakejoin updates and deletes rows
/// including those pypaimon wrote (it must resume after pypaimon's sequence numbers).
#[test]
fn t4_mixed_writers_pypaimon_appends_then_lakejoin_deletes() {
    let spec = TableSpec::new("db.t4", &["id:INT", "name:STRING", "n:BIGINT"], &["id"], 2);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    claim_writer_fence(&table, "db.t4");
    let mut model = DedupModel::default();
    let apply = |model: &mut DedupModel, rows: &[Value]| {
        for row in rows {
            let kind = row.get("op").and_then(Value::as_str).unwrap_or("+I");
            model.apply(&spec, kind, &without(row, "op"));
        }
    };

    let commit1: Vec<Value> = (0..10)
        .map(|id| json!({"id": id, "name": format!("lakejoin-{id}"), "n": id}))
        .collect();
    table.lj_write(&commit1, None);
    apply(&mut model, &commit1);
    let lakejoin_files = table.check_latest_commit_files("T4 commit 1", 0, 0);

    // pypaimon: update ids 0..5 and add ids 10..15.
    let commit2: Vec<Value> = (0..5)
        .chain(10..15)
        .map(|id| json!({"id": id, "name": format!("pypaimon-{id}"), "n": id * 100}))
        .collect();
    table.py_write(&commit2);
    apply(&mut model, &commit2);
    table.assert_both_read("T4 after pypaimon's append", &model.rows());
    let pypaimon_files = table.files_added_by(2);
    assert_sequence_numbers_resume("T4", &lakejoin_files, &pypaimon_files);

    // T4b: lakejoin deletes keys written by both writers and updates others.
    let commit3 = vec![
        json!({"id": 1, "op": "-D"}),
        json!({"id": 7, "op": "-D"}),
        json!({"id": 12, "op": "-D"}),
        json!({"id": 2, "name": "lakejoin-again", "n": 2, "op": "+U"}),
        json!({"id": 13, "name": "lakejoin-again", "n": 13, "op": "+U"}),
        json!({"id": 20, "name": "lakejoin-new", "n": 20, "op": "+I"}),
    ];
    table.lj_write(&commit3, Some("op"));
    apply(&mut model, &commit3);
    let lakejoin_files_2 = table.check_latest_commit_files("T4b commit 3", 0, 0);
    assert_sequence_numbers_resume("T4b", &pypaimon_files, &lakejoin_files_2);
    table.assert_both_read("T4b after lakejoin's deletes", &model.rows());

    // And once more pypaimon on top of that.
    let commit4 = vec![
        json!({"id": 1, "name": "revived-by-pypaimon", "n": -1}),
        json!({"id": 13, "name": "pypaimon-last", "n": 1313}),
    ];
    table.py_write(&commit4);
    apply(&mut model, &commit4);
    table.assert_both_read("T4b after pypaimon's second append", &model.rows());
    table.check_snapshot_record_counts("T4");
}

/// Claims the table's writer fence as `lakejoin run` does, leaving the epoch file in the
/// table directory: pypaimon must read and write the table as if it were not there.
fn claim_writer_fence(table: &Table, name: &str) {
    use lakejoin::table::fence::{FenceOptions, WriterFence};
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let warehouse =
            lakejoin::table::Warehouse::from_uri(&table.warehouse, &Default::default()).unwrap();
        let id = lakejoin::table::TableIdentifier::parse(name).unwrap();
        let opened = lakejoin::table::Table::open(&warehouse, &id).await.unwrap();
        let fence = WriterFence::acquire(&opened, "pypaimon test", FenceOptions::default())
            .await
            .unwrap();
        fence.heartbeat().await.unwrap();
    });
    assert!(table.path().join("_lakejoin/writer/epoch-1").is_file());
}

/// In every bucket, the files of the later commit start after the earlier commit's maximum
/// sequence number.
fn assert_sequence_numbers_resume(context: &str, earlier: &[Value], later: &[Value]) {
    for new in later {
        for old in earlier {
            if new["partition"] == old["partition"] && new["bucket"] == old["bucket"] {
                let new_min = new["minSequenceNumber"].as_i64().expect("min seq");
                let old_max = old["maxSequenceNumber"].as_i64().expect("max seq");
                assert!(
                    new_min > old_max,
                    "{context}: bucket {} of partition {}: a later file starts at sequence \
                     number {new_min}, not after the earlier file's maximum {old_max}\n  \
                     earlier: {old}\n  later: {new}",
                    new["bucket"],
                    new["partition"]
                );
            }
        }
    }
}

/// Mixed writers on a partitioned table, alternating commits with random changes.
#[test]
fn t4_alternating_writers_random_changes() {
    let spec = TableSpec::new(
        "db.t4r",
        &["p:STRING", "id:INT", "v:STRING", "x:DOUBLE"],
        &["p", "id"],
        3,
    )
    .partition_by(&["p"]);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut rng = StdRng::seed_from_u64(44);
    let mut model = DedupModel::default();
    let mut make_row = |rng: &mut StdRng| {
        json!({
            "p": *["2024-05-01", "other"].choose(rng).expect("non-empty"),
            "id": rng.random_range(0..15),
            "v": random_text(rng),
            "x": random_double(rng),
        })
    };
    for commit in 1..=6 {
        if commit % 2 == 1 {
            let rows = random_dedup_changes(&mut rng, &spec, 25, &mut make_row);
            table.lj_write(&rows, Some("op"));
            apply_dedup(&mut model, &spec, &rows, false);
            table.check_latest_commit_files(&format!("T4 random commit {commit}"), 0, 0);
        } else {
            // pypaimon writes upserts only (this table has no row-kind column).
            let rows: Vec<Value> = (0..25).map(|_| make_row(&mut rng)).collect();
            table.py_write(&rows);
            for row in &rows {
                model.apply(&spec, "+I", row);
            }
        }
        table.assert_both_read(&format!("T4 random after commit {commit}"), &model.rows());
    }
    table.check_snapshot_record_counts("T4 random");
}

/// T5: a pypaimon deduplicate table with `rowkind.field`, 3 buckets and 2 partitions, four
/// random commits; lakejoin's merge-on-read equals pypaimon's read and the model, also
/// when travelling back to an earlier snapshot.
#[test]
fn t5_pypaimon_rowkind_table_read_by_lakejoin() {
    let spec = TableSpec::new(
        "db.t5",
        &["p:INT", "id:INT", "v:STRING", "n:BIGINT", "op:STRING"],
        &["p", "id"],
        3,
    )
    .partition_by(&["p"])
    .option("rowkind.field", "op");
    let table = Table::create(spec.clone(), Creator::Pypaimon);
    let mut rng = StdRng::seed_from_u64(5);
    let mut model = DedupModel::default();
    let mut make_row = |rng: &mut StdRng| {
        json!({
            "p": rng.random_range(0..2),
            "id": rng.random_range(0..12),
            "v": random_text(rng),
            "n": rng.random_range(-100..100),
        })
    };
    let mut model_after_commit = Vec::new();
    for _ in 1..=4 {
        let rows = random_dedup_changes(&mut rng, &spec, 40, &mut make_row);
        table.py_write(&rows);
        apply_dedup(&mut model, &spec, &rows, true);
        model_after_commit.push(model.rows());
    }

    // pypaimon reads a lone file of a bucket without merging and would show its -D rows
    // (its writer stores _DELETE_ROW_COUNT=0); the data must give every bucket 2+ files.
    let files = table.py_files(None);
    let mut groups = std::collections::BTreeMap::new();
    for file in &files {
        *groups
            .entry((file["partition"].to_string(), file["bucket"].to_string()))
            .or_insert(0) += 1;
    }
    assert_eq!(
        groups.len(),
        6,
        "T5 precondition: 2 partitions x 3 buckets hold data"
    );
    assert!(
        groups.values().all(|&count| count >= 2),
        "T5 precondition: every bucket has two or more files: {groups:?}"
    );

    table.assert_both_read("T5", &model.rows());
    table.assert_both_read_at("T5 snapshot 2", Some(2), None, &model_after_commit[1]);
    let expected = filter_rows(&model.rows(), "p", &json!(1));
    table.assert_both_read_at("T5 where p=1", None, Some("p=1"), &expected);
}

/// T6: the pypaimon-written customers table (partial-update + sequence field), read by
/// lakejoin: {1: zs/us/2, 2: ls/ch/1}; then lakejoin appends to it.
#[test]
fn t6_pypaimon_customers_partial_update() {
    let spec = TableSpec::new(
        "db.customers",
        &["id:INT", "name:STRING", "country:STRING", "seq:BIGINT"],
        &["id"],
        2,
    )
    .merge_engine("partial-update")
    .sequence_field(&["seq"]);
    let table = Table::create(spec, Creator::Pypaimon);
    table.py_write(&[
        json!({"id": 1, "name": "zs", "seq": 2}),
        json!({"id": 2, "name": "ls", "country": "ch", "seq": 1}),
    ]);
    table.py_write(&[
        json!({"id": 1, "name": "old", "country": "us", "seq": 1}),
        json!({"id": 2, "country": "de", "seq": 0}),
    ]);
    table.assert_both_read(
        "T6",
        &[
            json!({"id": 1, "name": "zs", "country": "us", "seq": 2}),
            json!({"id": 2, "name": "ls", "country": "ch", "seq": 1}),
        ],
    );

    // T6b: lakejoin writes into the pypaimon table: a newer country for 1, and a name for 2
    // whose sequence value is older than what the table has, so it must not win.
    table.lj_write(
        &[
            json!({"id": 1, "country": "fr", "seq": 3}),
            json!({"id": 2, "name": "ww", "seq": 0}),
        ],
        None,
    );
    table.check_latest_commit_files("T6b", 0, 0);
    table.assert_both_read(
        "T6b",
        &[
            json!({"id": 1, "name": "zs", "country": "fr", "seq": 3}),
            json!({"id": 2, "name": "ls", "country": "ch", "seq": 1}),
        ],
    );
}

/// Asserts pypaimon's bucket function agrees with the bucket of every row of every live file
/// and that the check covered `expected_files`.
fn assert_buckets(context: &str, table: &Table, expected_files: &[String]) {
    let report = table.py_bucket_check();
    assert_eq!(
        report["mismatches"],
        json!([]),
        "{context}: rows stored in the wrong bucket: {report}"
    );
    let checked: Vec<String> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f.as_str().expect("file name").to_owned())
        .collect();
    for file in expected_files {
        assert!(
            checked.contains(file),
            "{context}: file {file} was not checked: {report}"
        );
    }
    assert!(
        report["rows"].as_i64().unwrap_or(0) > 0,
        "{context}: no rows checked: {report}"
    );
}

/// T7: every row of every file lies in the bucket pypaimon's hash predicts, for files
/// written by both implementations into one 4-bucket table; lakejoin finds every key
/// written by pypaimon with a key filter.
#[test]
fn t7_buckets_agree_both_writers() {
    let spec = TableSpec::new(
        "db.t7",
        &["k1:INT", "k2:STRING", "v:STRING"],
        &["k1", "k2"],
        4,
    );
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut model = DedupModel::default();
    let rows_for = |ids: std::ops::Range<i32>, writer: &str| -> Vec<Value> {
        ids.map(|i| {
            json!({
                "k1": i % 9 - 4,
                "k2": KEY_STRINGS[(i as usize) % KEY_STRINGS.len()].repeat(1 + (i as usize) % 3),
                "v": format!("{writer}-{i}"),
            })
        })
        .collect()
    };
    let commit1 = rows_for(0..40, "lakejoin");
    table.lj_write(&commit1, None);
    let commit2 = rows_for(20..70, "pypaimon");
    table.py_write(&commit2);
    let commit3 = rows_for(60..90, "lakejoin");
    table.lj_write(&commit3, None);
    for row in commit1.iter().chain(&commit2).chain(&commit3) {
        model.apply(&spec, "+I", row);
    }

    let mut expected_files = Vec::new();
    for id in 1..=3 {
        let added = file_names(&table.files_added_by(id));
        assert!(!added.is_empty(), "T7: commit {id} added files");
        expected_files.extend(added);
    }
    assert_buckets("T7", &table, &expected_files);
    table.assert_both_read("T7", &model.rows());

    // lakejoin's filters over files of both writers: a full key (lakejoin may prune by its
    // own bucket hash, so a hash that disagrees with pypaimon's loses the row) and a
    // partial key (key-range pruning).
    for row in commit2.iter().step_by(3) {
        let k1 = format!("k1={}", row["k1"]);
        let k2 = format!("k2={}", row["k2"].as_str().expect("k2"));
        let expected = filter_rows(
            &filter_rows(&model.rows(), "k1", &row["k1"]),
            "k2",
            &row["k2"],
        );
        assert_eq!(expected.len(), 1, "T7: one row per full key");
        assert_same_rows(
            &format!("T7 lakejoin where {k1} and {k2}"),
            &expected,
            &table.lj_scan_where(None, &[&k1, &k2]),
            &spec.primary_key,
        );
    }
    for k1 in -4..=4 {
        let expected = filter_rows(&model.rows(), "k1", &json!(k1));
        let filter = format!("k1={k1}");
        assert_same_rows(
            &format!("T7 lakejoin where {filter}"),
            &expected,
            &table.lj_scan(None, Some(&filter)),
            &spec.primary_key,
        );
    }
}

/// T7b: bucket agreement for a bucket key made of every key-able type (compact and
/// non-compact DECIMAL and TIMESTAMP, inline and long strings and bytes), 5 buckets.
#[test]
fn t7b_buckets_agree_every_key_type() {
    let key_columns = [
        "k_tiny:TINYINT",
        "k_small:SMALLINT",
        "k_int:INT",
        "k_big:BIGINT",
        "k_bool:BOOLEAN",
        "k_str:STRING",
        "k_date:DATE",
        "k_dec:DECIMAL(10,2)",
        "k_wide:DECIMAL(24,6)",
        "k_ts3:TIMESTAMP(3)",
        "k_ts9:TIMESTAMP(9)",
        "k_bytes:BYTES",
    ];
    let mut columns = key_columns.to_vec();
    columns.push("v:INT");
    let key_names: Vec<&str> = key_columns
        .iter()
        .map(|c| c.split_once(':').expect("name:TYPE").0)
        .collect();
    let spec = TableSpec::new("db.t7b", &columns, &key_names, 5);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut rng = StdRng::seed_from_u64(7);
    let random_key_row = |rng: &mut StdRng, v: i32| {
        let strings = [
            "",
            "x",
            "seven77",
            "eight888",
            "a considerably longer string ✓",
        ];
        let bytes = ["", "AQ==", "AAECAwQFBgc=", "AAECAwQFBgcICQoLDA0ODxAREhM="];
        let wide = [
            "0.000000",
            "-123456789012345678.123456",
            "999999999999999999.999999",
            "1.000001",
        ];
        let ts3 = [
            "1970-01-01 00:00:00",
            "1969-12-31 23:59:59.999",
            "2024-02-29 12:34:56.789",
        ];
        // Whole microseconds only: pypaimon hashes TIMESTAMP(7..9) keys after dropping the
        // nanoseconds below a microsecond (Python datetime), Java and lakejoin keep them,
        // so keys with such digits land in different buckets by design.
        let ts9 = [
            "1970-01-01 00:00:00",
            "2024-02-29 12:34:56.123456",
            "1900-01-01 00:00:00.000001",
        ];
        json!({
            "k_tiny": rng.random_range(-128..=127),
            "k_small": rng.random_range(-32768..=32767),
            "k_int": rng.random_range(i32::MIN..=i32::MAX),
            "k_big": rng.random_range(i64::MIN..=i64::MAX),
            "k_bool": rng.random_bool(0.5),
            "k_str": *strings.choose(rng).expect("non-empty"),
            "k_date": *["1970-01-01", "1969-07-20", "2024-02-29", "9999-12-31"].choose(rng).expect("non-empty"),
            "k_dec": format!("{}.{:02}", rng.random_range(-99_999_999..99_999_999), rng.random_range(0..100)),
            "k_wide": *wide.choose(rng).expect("non-empty"),
            "k_ts3": *ts3.choose(rng).expect("non-empty"),
            "k_ts9": *ts9.choose(rng).expect("non-empty"),
            "k_bytes": *bytes.choose(rng).expect("non-empty"),
            "v": v,
        })
    };
    let commit1: Vec<Value> = (0..30).map(|v| random_key_row(&mut rng, v)).collect();
    table.lj_write(&commit1, None);
    let commit2: Vec<Value> = (30..60).map(|v| random_key_row(&mut rng, v)).collect();
    table.py_write(&commit2);
    let mut model = DedupModel::default();
    for row in commit1.iter().chain(&commit2) {
        model.apply(&spec, "+I", row);
    }
    let expected_files: Vec<String> = file_names(&table.files_added_by(1))
        .into_iter()
        .chain(file_names(&table.files_added_by(2)))
        .collect();
    assert_buckets("T7b", &table, &expected_files);
    table.assert_both_read("T7b", &model.rows());
}

/// T8, T8b, T8c: lakejoin full compaction (one COMPACT commit: DELETE entries for the inputs,
/// level-5 outputs with _FILE_SOURCE=1), pypaimon appending on top (level 0 over level 5),
/// lakejoin writing and compacting again over pypaimon's files; both readers agree at
/// every step and time travel still sees the pre-compaction snapshots.
#[test]
fn t8_full_compaction_then_pypaimon_append() {
    let spec = TableSpec::new(
        "db.t8",
        &["id:INT", "name:STRING", "amount:BIGINT"],
        &["id"],
        2,
    );
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut model = DedupModel::default();
    let mut history = Vec::new();
    let apply = |model: &mut DedupModel, rows: &[Value]| {
        for row in rows {
            let kind = row.get("op").and_then(Value::as_str).unwrap_or("+I");
            model.apply(&spec, kind, &without(row, "op"));
        }
    };

    let commit1: Vec<Value> = (0..20)
        .map(|id| json!({"id": id, "name": format!("n{id}"), "amount": id * 10, "op": "+I"}))
        .collect();
    table.lj_write(&commit1, Some("op"));
    apply(&mut model, &commit1);
    history.push(model.rows());
    let commit2 = vec![
        json!({"id": 3, "op": "-D"}),
        json!({"id": 4, "op": "-D"}),
        json!({"id": 5, "name": "five", "amount": 55, "op": "+U"}),
        json!({"id": 30, "name": "thirty", "amount": 300, "op": "+I"}),
    ];
    table.lj_write(&commit2, Some("op"));
    apply(&mut model, &commit2);
    history.push(model.rows());

    // T8: full compaction.
    table.lj_compact_full();
    assert_compacted("T8", &table, 3);
    table.assert_both_read("T8 after compaction", &model.rows());
    history.push(model.rows());

    // T8b: pypaimon appends level-0 files over the level-5 files.
    let commit4 = vec![
        json!({"id": 5, "name": "five-by-pypaimon", "amount": 5}),
        json!({"id": 3, "name": "three-is-back", "amount": 3}),
        json!({"id": 40, "name": "forty", "amount": 400}),
    ];
    table.py_write(&commit4);
    apply(&mut model, &commit4);
    history.push(model.rows());
    let added = table.files_added_by(4);
    assert!(
        added.iter().all(|f| f["level"] == json!(0)),
        "T8b: pypaimon's files are level 0: {added:?}"
    );
    table.assert_both_read("T8b after pypaimon's append", &model.rows());

    // T8c: lakejoin writes, then compacts level 5 + pypaimon's and its own level 0 files.
    let commit5 = vec![
        json!({"id": 40, "op": "-D"}),
        json!({"id": 6, "name": "six", "amount": 66, "op": "+U"}),
    ];
    table.lj_write(&commit5, Some("op"));
    apply(&mut model, &commit5);
    history.push(model.rows());
    table.lj_compact_full();
    assert_compacted("T8c", &table, 6);
    table.assert_both_read("T8c after the second compaction", &model.rows());
    history.push(model.rows());

    let commit7 = vec![json!({"id": 7, "name": "seven-after-two-compactions", "amount": 7})];
    table.py_write(&commit7);
    apply(&mut model, &commit7);
    history.push(model.rows());
    table.assert_both_read("T8c after pypaimon's last append", &model.rows());

    for (index, expected) in history.iter().enumerate() {
        let id = index as u64 + 1;
        table.assert_both_read_at(&format!("T8 time travel to {id}"), Some(id), None, expected);
    }
    table.check_snapshot_record_counts("T8");
}

/// After a full compaction (snapshot `id`): a COMPACT snapshot, and every live file a
/// level-5 compaction output with consistent metadata.
fn assert_compacted(context: &str, table: &Table, id: u64) {
    let lakejoin_view = table.lj_snapshots();
    let pypaimon_view = table.py_snapshots();
    assert_eq!(
        pypaimon_view.len() as u64,
        id,
        "{context}: the compaction adds one snapshot: {pypaimon_view:?}"
    );
    let last = &pypaimon_view[id as usize - 1];
    assert_eq!(last["commitKind"], json!("COMPACT"), "{context}: {last}");
    assert_eq!(
        lakejoin_view.last().map(|s| &s["commitKind"]),
        Some(&json!("COMPACT")),
        "{context}: lakejoin table snapshots: {lakejoin_view:?}"
    );
    table.check_latest_commit_files(context, 5, 1);
    let live = table.py_files(None);
    assert!(
        live.iter().all(|f| f["level"] == json!(5)),
        "{context}: after a full compaction only level-5 files are live: {live:?}"
    );
    let mut buckets: Vec<String> = live
        .iter()
        .map(|f| format!("{}/{}", f["partition"], f["bucket"]))
        .collect();
    let count = buckets.len();
    buckets.dedup();
    assert_eq!(
        buckets.len(),
        count,
        "{context}: one output file per bucket (small data): {live:?}"
    );
}

/// T8 on a partitioned partial-update table: compaction folds the versions of a key into one
/// row, after which a pypaimon row with a lower sequence value no longer overrides fields.
#[test]
fn t8_compaction_partial_update_partitioned() {
    let spec = TableSpec::new(
        "db.t8p",
        &["dt:DATE", "id:INT", "a:STRING", "b:INT", "seq:INT"],
        &["dt", "id"],
        2,
    )
    .partition_by(&["dt"])
    .merge_engine("partial-update")
    .sequence_field(&["seq"]);
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut rng = StdRng::seed_from_u64(8);
    let mut model = PartialUpdateModel::new(&spec);
    let random_rows = |rng: &mut StdRng| -> Vec<Value> {
        (0..20)
            .map(|_| {
                let mut row = json!({
                    "dt": *["2023-03-01", "2023-03-02"].choose(rng).expect("non-empty"),
                    "id": rng.random_range(0..6),
                    "seq": rng.random_range(0..30),
                });
                if rng.random_bool(0.5) {
                    row["a"] = random_text(rng);
                }
                if rng.random_bool(0.5) {
                    row["b"] = json!(rng.random_range(0..1000));
                }
                row
            })
            .collect()
    };
    for _ in 0..3 {
        let rows = random_rows(&mut rng);
        table.lj_write(&rows, None);
        model.commit(&rows);
    }
    table.lj_compact_full();
    model.compact();
    assert_compacted("T8 partial-update", &table, 4);
    table.assert_both_read("T8 partial-update after compaction", &model.rows());
    for _ in 0..2 {
        let rows = random_rows(&mut rng);
        table.py_write(&rows);
        model.commit(&rows);
        table.assert_both_read("T8 partial-update after pypaimon's append", &model.rows());
    }
    table.check_snapshot_record_counts("T8 partial-update");
}

// ---------------------------------------------------------------------------------------
// Other merge engines

/// (column, type, aggregate function) of the aggregation test table.
const AGGREGATES: [(&str, &str, &str); 12] = [
    ("s_big", "BIGINT", "sum"),
    ("s_dbl", "DOUBLE", "sum"),
    ("s_dec", "DECIMAL(12,2)", "sum"),
    ("prod", "BIGINT", "product"),
    ("mx", "INT", "max"),
    ("mn", "STRING", "min"),
    ("lv", "STRING", "last_value"),
    ("lnn", "STRING", "last_non_null_value"),
    ("fv", "STRING", "first_value"),
    ("fnn", "STRING", "first_non_null_value"),
    ("la", "STRING", "listagg"),
    ("band", "BOOLEAN", "bool_and"),
];

fn aggregation_spec(name: &str) -> TableSpec {
    let mut columns = vec!["k:INT".to_owned()];
    columns.extend(AGGREGATES.iter().map(|(c, t, _)| format!("{c}:{t}")));
    columns.push("bor:BOOLEAN".to_owned());
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut spec = TableSpec::new(name, &columns, &["k"], 2).merge_engine("aggregation");
    for (column, _, function) in AGGREGATES {
        spec = spec.option(&format!("fields.{column}.aggregate-function"), function);
    }
    spec.option("fields.bor.aggregate-function", "bool_or")
}

/// Folds rows of one key in arrival order with the aggregate functions (Paimon's rules:
/// nulls are ignored except by last_value/first_value; listagg skips blank strings).
fn aggregate_model(spec: &TableSpec, rows: &[Value]) -> Vec<Value> {
    let mut by_key: std::collections::BTreeMap<i64, Value> = std::collections::BTreeMap::new();
    let mut functions: Vec<(&str, &str)> = AGGREGATES.iter().map(|(c, _, f)| (*c, *f)).collect();
    functions.push(("bor", "bool_or"));
    for row in rows {
        let key = row["k"].as_i64().expect("k");
        let Some(acc) = by_key.get_mut(&key) else {
            by_key.insert(key, full_row(spec, row));
            continue;
        };
        for (column, function) in &functions {
            let input = row.get(*column).cloned().unwrap_or(Value::Null);
            let current = acc[*column].clone();
            let merged = match (*function, &current, &input) {
                ("last_value", _, _) => input.clone(),
                ("first_value", _, _) => current.clone(),
                (_, _, Value::Null) => current.clone(),
                (_, Value::Null, _) => input.clone(),
                ("sum", Value::String(a), Value::String(b)) => {
                    json!(cents_to_decimal(decimal_to_cents(a) + decimal_to_cents(b)))
                }
                ("sum", a, b) if a.is_i64() => json!(a.as_i64().unwrap() + b.as_i64().unwrap()),
                ("sum", a, b) => json!(a.as_f64().unwrap() + b.as_f64().unwrap()),
                ("product", a, b) => json!(a.as_i64().unwrap() * b.as_i64().unwrap()),
                ("max", a, b) => json!(a.as_i64().unwrap().max(b.as_i64().unwrap())),
                ("min", Value::String(a), Value::String(b)) => json!(a.min(b)),
                ("last_non_null_value", _, _) => input.clone(),
                ("first_non_null_value", _, _) => current.clone(),
                ("listagg", Value::String(a), Value::String(b)) => {
                    if b.trim().is_empty() {
                        current.clone()
                    } else if a.trim().is_empty() {
                        input.clone()
                    } else {
                        json!(format!("{a},{b}"))
                    }
                }
                ("bool_and", a, b) => json!(a.as_bool().unwrap() && b.as_bool().unwrap()),
                ("bool_or", a, b) => json!(a.as_bool().unwrap() || b.as_bool().unwrap()),
                other => panic!("model: unexpected {other:?}"),
            };
            acc[*column] = merged;
        }
    }
    by_key.into_values().collect()
}

fn decimal_to_cents(text: &str) -> i64 {
    let negative = text.starts_with('-');
    let (whole, fraction) = text.trim_start_matches('-').split_once('.').expect("d.dd");
    let cents =
        whole.parse::<i64>().expect("whole") * 100 + fraction.parse::<i64>().expect("cents");
    if negative { -cents } else { cents }
}

fn cents_to_decimal(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", cents.abs() / 100, cents.abs() % 100)
}

fn random_aggregate_rows(rng: &mut StdRng, count: usize) -> Vec<Value> {
    let words = ["pear", "apple", "fig", "plum", "kiwi"];
    let mut rows = Vec::new();
    for _ in 0..count {
        let mut word = || json!(*words.choose(rng).expect("non-empty"));
        let mut row = json!({
            "mn": word(),
            "lv": word(),
            "lnn": word(),
            "fv": word(),
            "fnn": word(),
            "la": word(),
        });
        row["k"] = json!(rng.random_range(0..5));
        row["s_big"] = json!(rng.random_range(-1000..1000));
        row["s_dbl"] = json!(f64::from(rng.random_range(-64..64)) / 4.0);
        row["s_dec"] = json!(cents_to_decimal(rng.random_range(-10_000..10_000)));
        row["prod"] = json!(rng.random_range(-3..4));
        row["mx"] = json!(rng.random_range(-100..100));
        row["band"] = json!(rng.random_bool(0.8));
        row["bor"] = json!(rng.random_bool(0.2));
        let columns: Vec<&str> = AGGREGATES
            .iter()
            .map(|(c, _, _)| *c)
            .chain(["bor"])
            .collect();
        for column in columns {
            if rng.random_bool(0.2) {
                row[column] = Value::Null;
            }
        }
        rows.push(row);
    }
    rows
}

/// Aggregation engine with the functions both implementations support, written by either
/// side over several commits (folded per commit, then across commits), read by both, and
/// compacted by lakejoin.
#[test]
fn aggregation_engine_both_writers() {
    let spec = aggregation_spec("db.agg");
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut rng = StdRng::seed_from_u64(9);
    let mut all_rows = Vec::new();
    for commit in 1..=4 {
        let rows = random_aggregate_rows(&mut rng, 12);
        if commit % 2 == 1 {
            table.lj_write(&rows, None);
            table.check_latest_commit_files(&format!("aggregation commit {commit}"), 0, 0);
        } else {
            table.py_write(&rows);
        }
        all_rows.extend(rows);
        table.assert_both_read(
            &format!("aggregation after commit {commit}"),
            &aggregate_model(&spec, &all_rows),
        );
    }
    table.lj_compact_full();
    assert_compacted("aggregation", &table, 5);
    table.assert_both_read(
        "aggregation after compaction",
        &aggregate_model(&spec, &all_rows),
    );
    let rows = random_aggregate_rows(&mut rng, 12);
    table.py_write(&rows);
    all_rows.extend(rows);
    table.assert_both_read(
        "aggregation after pypaimon's append on the compacted table",
        &aggregate_model(&spec, &all_rows),
    );
}

/// first-row keeps the first version of a key. pypaimon (like Java) skips level-0 files of
/// first-row tables in batch reads, so lakejoin's writer compacts level 0 up after every
/// commit: pypaimon sees the rows at once, and still after a full compaction.
#[test]
fn first_row_engine_visible_to_pypaimon_after_compaction() {
    let spec =
        TableSpec::new("db.first", &["id:INT", "v:STRING"], &["id"], 2).merge_engine("first-row");
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    table.lj_write(
        &[
            json!({"id": 1, "v": "first"}),
            json!({"id": 1, "v": "second in the same commit"}),
            json!({"id": 2, "v": "first"}),
        ],
        None,
    );
    table.lj_write(
        &[
            json!({"id": 2, "v": "later"}),
            json!({"id": 3, "v": "first"}),
        ],
        None,
    );
    let expected = vec![
        json!({"id": 1, "v": "first"}),
        json!({"id": 2, "v": "first"}),
        json!({"id": 3, "v": "first"}),
    ];
    table.assert_both_read("first-row, level 0 compacted up by the writer", &expected);
    table.lj_compact_full();
    table.assert_both_read("first-row after a full compaction", &expected);
}

// ---------------------------------------------------------------------------------------
// Every type

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

// ---------------------------------------------------------------------------------------
// Time travel, snapshots, bad input

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

/// pypaimon's default bucket mode (-1: dynamic buckets kept by a HASH index) is read by
/// lakejoin like any fixed-bucket table, scans and point lookups alike.
#[test]
fn dynamic_bucket_table_written_by_pypaimon_reads_in_lakejoin() {
    let spec = TableSpec::new("db.dynamic", &["id:INT", "v:STRING"], &["id"], 1)
        .option("bucket", "-1")
        .option("dynamic-bucket.target-row-num", "3");
    let table = Table::create(spec.clone(), Creator::Pypaimon);
    let first: Vec<Value> = (1..=8)
        .map(|i| json!({"id": i, "v": format!("a{i}")}))
        .collect();
    table.py_write(&first);
    table.py_write(&[json!({"id": 2, "v": "b2"}), json!({"id": 9, "v": "b9"})]);
    let files = table.py_files(None);
    let buckets: std::collections::BTreeSet<String> =
        files.iter().map(|f| f["bucket"].to_string()).collect();
    assert!(
        buckets.len() > 1 && files.iter().all(|f| f["totalBuckets"] == json!(-1)),
        "precondition: several dynamic buckets: {files:?}"
    );
    let mut expected: Vec<Value> = (1..=9)
        .map(|i| json!({"id": i, "v": format!("a{i}")}))
        .collect();
    expected[1] = json!({"id": 2, "v": "b2"});
    expected[8] = json!({"id": 9, "v": "b9"});
    table.assert_both_read("dynamic-bucket table", &expected);
    let got = table.lakejoin(
        &["table", "get"],
        &["--key".to_owned(), r#"{"id":2}"#.to_owned()],
        "",
    );
    assert!(
        got.status.success(),
        "table get: {}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&got.stdout).trim(),
        r#"{"id":2,"v":"b2"}"#
    );
}
