//! Partial-update tables: `sequence.field` with out-of-order values in DATE and escaped
//! STRING partitions (T3), and Paimon's per-commit folding, which gives a different row
//! than folding every row at once; lakejoin's writes and pypaimon's must both fold as
//! Paimon does.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::{Creator, PartialUpdateModel, Table, TableSpec};
use crate::{filter_rows, random_text};

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
