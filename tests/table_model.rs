//! Property tests: random change sequences written over several commits, read back by the
//! merge-on-read scan, equal a plain model of Paimon's semantics.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::{Datum, Row};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::types::DataType;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Change {
    kind: RowKind,
    key: i32,
    part: i32,
    a: Option<i64>,
    b: Option<i64>,
    seq: Option<i64>,
}

fn change(with_deletes: bool) -> impl Strategy<Value = Change> {
    let kinds = if with_deletes {
        prop_oneof![
            4 => Just(RowKind::Insert),
            2 => Just(RowKind::UpdateAfter),
            1 => Just(RowKind::Delete),
            1 => Just(RowKind::UpdateBefore),
        ]
        .boxed()
    } else {
        prop_oneof![Just(RowKind::Insert), Just(RowKind::UpdateAfter)].boxed()
    };
    (
        kinds,
        0..6i32,
        0..2i32,
        proptest::option::weighted(0.7, 0..100i64),
        proptest::option::weighted(0.7, 0..100i64),
        proptest::option::weighted(0.9, 0..20i64),
    )
        .prop_map(|(kind, key, part, a, b, seq)| Change {
            kind,
            key,
            part,
            a,
            b,
            seq,
        })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn make_table(options: &[(&str, &str)], partitioned: bool) -> Arc<Table> {
    let mut opts: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    opts.insert("bucket".into(), "3".into());
    let schema = TableSchema::new(
        vec![
            ("k".into(), DataType::Int, false),
            ("p".into(), DataType::Int, false),
            ("a".into(), DataType::BigInt, true),
            ("b".into(), DataType::BigInt, true),
            ("seq".into(), DataType::BigInt, true),
        ],
        if partitioned {
            vec!["p".into()]
        } else {
            vec![]
        },
        if partitioned {
            vec!["k".into(), "p".into()]
        } else {
            vec!["k".into()]
        },
        opts,
    )
    .unwrap();
    let wh = Warehouse::in_memory();
    let id = TableIdentifier::parse("db.t").unwrap();
    Arc::new(Table::create(&wh, &id, schema).await.unwrap())
}

fn to_row(c: &Change, partitioned: bool) -> Row {
    vec![
        Datum::Int(c.key),
        Datum::Int(if partitioned { c.part } else { 0 }),
        c.a.map_or(Datum::Null, Datum::BigInt),
        c.b.map_or(Datum::Null, Datum::BigInt),
        c.seq.map_or(Datum::Null, Datum::BigInt),
    ]
}

/// Writes each commit's changes through one writer per commit (as separate CLI runs
/// would) and returns the scanned rows.
async fn write_and_scan(table: Arc<Table>, commits: &[Vec<Change>], partitioned: bool) -> Vec<Row> {
    for commit in commits {
        let mut writer = TableWriter::new(table.clone(), "model-test").await.unwrap();
        for c in commit {
            writer.write(c.kind, to_row(c, partitioned)).unwrap();
        }
        writer.commit(BTreeMap::new()).await.unwrap();
    }
    scan(&table, None, &ScanFilter::default()).await.unwrap()
}

type ModelKey = (i32, i32);

/// A version in the model: values, user sequence, arrival number, retraction flag.
#[derive(Debug, Clone)]
struct Version {
    row: Row,
    seq: Option<i64>,
    arrival: u64,
    retract: bool,
    delete: bool,
}

fn seq_order(x: &Version, y: &Version, with_seq: bool) -> std::cmp::Ordering {
    // Nulls first, then value; ties by arrival.
    let user = if with_seq {
        x.seq.cmp(&y.seq)
    } else {
        std::cmp::Ordering::Equal
    };
    user.then(x.arrival.cmp(&y.arrival))
}

/// Deduplicate: the greatest version by (sequence field, arrival) wins; a retraction removes.
fn model_deduplicate(commits: &[Vec<Change>], partitioned: bool, with_seq: bool) -> Vec<Row> {
    let mut best: HashMap<ModelKey, Version> = HashMap::new();
    let mut arrival = 0;
    for commit in commits {
        for c in commit {
            arrival += 1;
            let v = Version {
                row: to_row(c, partitioned),
                seq: c.seq,
                arrival,
                retract: c.kind.is_retract(),
                delete: c.kind == RowKind::Delete,
            };
            let key = (c.key, if partitioned { c.part } else { 0 });
            match best.get(&key) {
                Some(old) if seq_order(old, &v, with_seq).is_gt() => {}
                _ => {
                    best.insert(key, v);
                }
            }
        }
    }
    let mut rows: Vec<(ModelKey, Row)> = best
        .into_iter()
        .filter(|(_, v)| !v.retract)
        .map(|(k, v)| (k, v.row))
        .collect();
    rows.sort_by_key(|(k, _)| *k);
    rows.into_iter().map(|(_, r)| r).collect()
}

/// Partial-update as Paimon defines it: each commit folds a key's changes in sequence
/// order into one version (non-null fields overwrite; `-D` empties the row when
/// remove-record-on-delete), and the commits' folded versions are then folded again in
/// the order of *their* sequence values.
fn model_partial_update(
    commits: &[Vec<Change>],
    partitioned: bool,
    with_seq: bool,
    remove_on_delete: bool,
) -> Vec<Row> {
    let fold = |mut versions: Vec<Version>| -> Option<Version> {
        versions.sort_by(|x, y| seq_order(x, y, with_seq));
        let mut acc: Option<Version> = None;
        for v in versions {
            if v.retract {
                if remove_on_delete && v.delete {
                    acc = Some(Version {
                        row: v.row.clone(),
                        ..v
                    });
                }
                continue;
            }
            let mut row = match &acc {
                Some(a) if !a.delete => a.row.clone(),
                _ => vec![Datum::Null; v.row.len()],
            };
            for (slot, value) in row.iter_mut().zip(&v.row) {
                if !value.is_null() {
                    *slot = value.clone();
                }
            }
            let seq = match &row[4] {
                Datum::BigInt(s) => Some(*s),
                _ => None,
            };
            acc = Some(Version {
                row,
                seq,
                arrival: v.arrival,
                retract: false,
                delete: false,
            });
        }
        acc
    };
    let mut per_key_files: HashMap<ModelKey, Vec<Version>> = HashMap::new();
    let mut arrival = 0;
    for commit in commits {
        let mut batch: HashMap<ModelKey, Vec<Version>> = HashMap::new();
        for c in commit {
            arrival += 1;
            let key = (c.key, if partitioned { c.part } else { 0 });
            batch.entry(key).or_default().push(Version {
                row: to_row(c, partitioned),
                seq: c.seq,
                arrival,
                retract: c.kind.is_retract(),
                delete: c.kind == RowKind::Delete,
            });
        }
        for (key, versions) in batch {
            if let Some(folded) = fold(versions) {
                // A folded delete keeps the seq of the delete row itself.
                let seq = match &folded.row[4] {
                    Datum::BigInt(s) => Some(*s),
                    _ => None,
                };
                per_key_files.entry(key).or_default().push(Version {
                    retract: folded.delete,
                    seq,
                    ..folded
                });
            }
        }
    }
    let mut rows: Vec<(ModelKey, Row)> = per_key_files
        .into_iter()
        .filter_map(|(k, files)| fold(files).filter(|v| !v.delete).map(|v| (k, v.row)))
        .collect();
    rows.sort_by_key(|(k, _)| *k);
    rows.into_iter().map(|(_, r)| r).collect()
}

fn commits(with_deletes: bool) -> impl Strategy<Value = Vec<Vec<Change>>> {
    proptest::collection::vec(proptest::collection::vec(change(with_deletes), 0..25), 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn deduplicate_matches_model(commits in commits(true), partitioned in any::<bool>()) {
        let rt = runtime();
        let table = rt.block_on(make_table(&[], partitioned));
        let got = rt.block_on(write_and_scan(table, &commits, partitioned));
        prop_assert_eq!(got, model_deduplicate(&commits, partitioned, false));
    }

    #[test]
    fn deduplicate_with_sequence_field_matches_model(commits in commits(true), partitioned in any::<bool>()) {
        let rt = runtime();
        let table = rt.block_on(make_table(&[("sequence.field", "seq")], partitioned));
        let got = rt.block_on(write_and_scan(table, &commits, partitioned));
        prop_assert_eq!(got, model_deduplicate(&commits, partitioned, true));
    }

    #[test]
    fn partial_update_matches_model(commits in commits(false), with_seq in any::<bool>()) {
        let rt = runtime();
        let opts: &[(&str, &str)] = if with_seq {
            &[("merge-engine", "partial-update"), ("sequence.field", "seq")]
        } else {
            &[("merge-engine", "partial-update")]
        };
        let table = rt.block_on(make_table(opts, false));
        let got = rt.block_on(write_and_scan(table, &commits, false));
        prop_assert_eq!(got, model_partial_update(&commits, false, with_seq, false));
    }

    #[test]
    fn partial_update_ignore_delete_matches_model(commits in commits(true), with_seq in any::<bool>()) {
        let rt = runtime();
        let mut opts = vec![("merge-engine", "partial-update"), ("partial-update.ignore-delete", "true")];
        if with_seq {
            opts.push(("sequence.field", "seq"));
        }
        let table = rt.block_on(make_table(&opts, true));
        let got = rt.block_on(write_and_scan(table, &commits, true));
        let kept: Vec<Vec<Change>> = commits
            .iter()
            .map(|c| c.iter().filter(|c| !c.kind.is_retract()).cloned().collect())
            .collect();
        prop_assert_eq!(got, model_partial_update(&kept, true, with_seq, false));
    }

    #[test]
    fn partial_update_remove_record_on_delete_matches_model(commits in commits(true), with_seq in any::<bool>()) {
        let rt = runtime();
        let mut opts = vec![("merge-engine", "partial-update"), ("partial-update.remove-record-on-delete", "true")];
        if with_seq {
            opts.push(("sequence.field", "seq"));
        }
        let table = rt.block_on(make_table(&opts, false));
        let got = rt.block_on(write_and_scan(table, &commits, false));
        prop_assert_eq!(got, model_partial_update(&commits, false, with_seq, true));
    }
}
