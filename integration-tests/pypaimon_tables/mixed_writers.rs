//! Each implementation writing the other's tables: pypaimon appending to a lakejoin table
//! that carries lakejoin's writer fence, lakejoin then updating and deleting pypaimon's
//! rows, and the two alternating commits of random changes (T4); tables pypaimon created,
//! with `rowkind.field` (T5) and partial-update (T6), read by lakejoin and written to.
//! Each writer must resume after the other's sequence numbers and chain onto its
//! manifests.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::{Creator, DedupModel, Table, TableSpec, without};
use crate::{apply_dedup, filter_rows, random_dedup_changes, random_double, random_text};

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
