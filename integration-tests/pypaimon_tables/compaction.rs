//! Full compaction by lakejoin under pypaimon's appends (T8): one COMPACT commit of
//! level-5 files, pypaimon writing level 0 on top, lakejoin compacting again over
//! pypaimon's files, and on a partitioned partial-update table the folded versions of a
//! key. Both readers must agree at every step, time travel included.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::{Creator, DedupModel, PartialUpdateModel, Table, TableSpec, without};
use crate::{assert_compacted, random_text};

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
