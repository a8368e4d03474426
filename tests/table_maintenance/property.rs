//! Property test: random sequences of commits, compactions, full compactions and
//! expiries, with and without `sequence.field`, read like a deduplicate model at the
//! latest snapshot and at every retained one, and leave only referenced files and
//! disjoint levels. A small `target-file-size` makes most files "large", so compactions
//! move files up a level (a DELETE and an ADD of one file) as well as merge them, and
//! expiries must keep what was moved. It covers the interleavings the targeted tests of the other modules
//! do not name.

use std::collections::BTreeMap;
use std::time::Duration;

use lakejoin::lsm::compact::{CompactScope, Compactor};
use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::Warehouse;
use lakejoin::table::datum::Row;
use lakejoin::table::row_kind::RowKind;
use proptest::prelude::*;

use super::{
    Model, assert_levels_disjoint, assert_only_referenced_files_remain, create, row, scan_at,
    within,
};

#[derive(Debug, Clone)]
enum Op {
    /// (key, value or delete, sequence value)
    Commit(Vec<(i32, Option<i64>, i64)>),
    /// Values for keys no commit has used yet, above all of them (an auto-increment id):
    /// files that overlap nothing, which compactions move rather than merge.
    CommitNewKeys(Vec<i64>),
    Compact,
    FullCompact,
    Expire {
        retain_min: usize,
        retain_max: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let change = (
        0..12i32,
        proptest::option::weighted(0.8, 0..1000i64),
        0..8i64,
    );
    prop_oneof![
        6 => proptest::collection::vec(change, 1..12).prop_map(Op::Commit),
        3 => proptest::collection::vec(0..1000i64, 1..8).prop_map(Op::CommitNewKeys),
        1 => Just(Op::Compact),
        1 => Just(Op::FullCompact),
        2 => (1..4usize, 0..5usize).prop_map(|(min, extra)| Op::Expire {
            retain_min: min,
            retain_max: min + extra,
        }),
    ]
}

async fn run_ops(
    ops: Vec<Op>,
    with_seq: bool,
    target_file_size: &str,
) -> std::result::Result<(), TestCaseError> {
    let wh = Warehouse::in_memory();
    let mut options = vec![
        ("num-sorted-run.compaction-trigger", "3"),
        ("target-file-size", target_file_size),
    ];
    if with_seq {
        options.push(("sequence.field", "seq"));
    }
    let table = create(&wh, &options).await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut compactor = Compactor::new(table.clone(), "compactor").unwrap();
    let mut model = Model::new(with_seq);
    let mut expected: BTreeMap<i64, Vec<Row>> = BTreeMap::new();
    // Above the keys `Op::Commit` draws.
    let mut next_new_key = 100;
    for op in ops {
        match op {
            Op::CommitNewKeys(values) => {
                for v in values {
                    writer
                        .write(RowKind::Insert, row(next_new_key, v, with_seq.then_some(0)))
                        .unwrap();
                    model.apply(next_new_key, Some(v), with_seq.then_some(0));
                    next_new_key += 1;
                }
                within(writer.commit(BTreeMap::new())).await.unwrap();
                within(writer.wait_for_compaction()).await.unwrap();
            }
            Op::Commit(changes) => {
                for (k, v, seq) in changes {
                    let seq = with_seq.then_some(seq);
                    let kind = if v.is_some() {
                        RowKind::Insert
                    } else {
                        RowKind::Delete
                    };
                    writer.write(kind, row(k, v.unwrap_or(0), seq)).unwrap();
                    model.apply(k, v, seq);
                }
                within(writer.commit(BTreeMap::new())).await.unwrap();
                within(writer.wait_for_compaction()).await.unwrap();
            }
            Op::Compact => {
                compactor.compact(&CompactScope::all()).await.unwrap();
            }
            Op::FullCompact => {
                compactor.compact(&CompactScope::full()).await.unwrap();
            }
            Op::Expire {
                retain_min,
                retain_max,
            } => {
                let config = ExpireConfig {
                    retain_min,
                    retain_max,
                    time_retained: Duration::ZERO,
                    max_deletes: usize::MAX,
                };
                let report = expire_snapshots(&table, &config).await.unwrap();
                for id in report.expired {
                    expected.remove(&id);
                }
            }
        }
        let Some(latest) = table.latest_snapshot_id().await.unwrap() else {
            continue;
        };
        let first_new = expected.keys().next_back().map_or(1, |id| id + 1);
        for id in first_new..=latest {
            expected.insert(id, model.expected());
        }
        prop_assert_eq!(scan_at(&table, None).await, model.expected());
        for (id, rows) in &expected {
            let s = table.snapshot(*id).await.unwrap();
            prop_assert_eq!(&scan_at(&table, Some(&s)).await, rows, "snapshot {}", id);
        }
    }
    within(writer.close()).await.unwrap();
    if table.latest_snapshot_id().await.unwrap().is_some() {
        assert_only_referenced_files_remain(&table).await;
        assert_levels_disjoint(&table).await;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_commits_compactions_and_expiries_match_the_model(
        ops in proptest::collection::vec(op(), 1..30),
        with_seq in any::<bool>(),
        // Paimon's default; files of a few rows; a row per file.
        target_file_size in proptest::sample::select(vec!["128 mb", "2 kb", "1"]),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run_ops(ops, with_seq, target_file_size))?;
    }
}
