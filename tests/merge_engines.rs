//! Property tests of the aggregation, first-row and partial-update sequence-group engines:
//! random changes over several commits (one flush each), written with `TableWriter` and
//! read with `scan`, equal a plain model of Paimon's semantics. As in Paimon, each flush
//! folds a key's changes into one row, and the files' folded rows are folded again in the
//! order of their own sequence values.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use lakejoin::lsm::compact::full_compact;
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::{Datum, Row};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::types::{DataType, MAX_LENGTH};
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use proptest::prelude::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn make_table(columns: &[(&str, DataType)], options: &[(&str, &str)]) -> Arc<Table> {
    let mut opts: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    opts.insert("bucket".into(), "3".into());
    let schema = TableSchema::new(
        columns
            .iter()
            .map(|(n, t)| (n.to_string(), *t, true))
            .collect(),
        vec![],
        vec!["k".into()],
        opts,
    )
    .unwrap();
    let wh = Warehouse::in_memory();
    let id = TableIdentifier::parse("db.t").unwrap();
    Arc::new(Table::create(&wh, &id, schema).await.unwrap())
}

/// Writes each commit through its own writer (one flush per commit), optionally runs a
/// full compaction after commit `compact_after`, and scans.
async fn write_and_scan(
    table: Arc<Table>,
    commits: &[Vec<(RowKind, Row)>],
    compact_after: Option<usize>,
) -> Vec<Row> {
    for (i, commit) in commits.iter().enumerate() {
        let mut writer = TableWriter::new(table.clone(), "engines-test")
            .await
            .unwrap();
        for (kind, row) in commit {
            writer.write(*kind, row.clone()).unwrap();
        }
        writer.commit(BTreeMap::new()).await.unwrap();
        if compact_after == Some(i) {
            full_compact(&table, "engines-compact").await.unwrap();
        }
    }
    scan(&table, None, &ScanFilter::default()).await.unwrap()
}

fn opt_i64(d: &Datum) -> Option<i64> {
    match d {
        Datum::BigInt(v) => Some(*v),
        _ => None,
    }
}

fn big(v: Option<i64>) -> Datum {
    v.map_or(Datum::Null, Datum::BigInt)
}

fn key_of(row: &Row) -> i32 {
    match row.first() {
        Some(Datum::Int(k)) => *k,
        _ => panic!("row without an INT key: {row:?}"),
    }
}

/// One version in a model: its values, kind and arrival (= sequence number order).
#[derive(Debug, Clone)]
struct Version {
    kind: RowKind,
    row: Row,
    arrival: u64,
}

/// Runs a two-level model: `fold` folds each commit's versions of a key (sorted by
/// `order`), then the folded versions of all commits again; retractions are dropped. A
/// full compaction after commit `compact_after` folds each key's files into one version
/// then, dropping retractions as Paimon's does, except with a `sequence.field`
/// (`keep_retractions`): lakejoin keeps them there so that a later-arriving change with an
/// older sequence value cannot bring a deleted key back.
fn two_level_model(
    commits: &[Vec<(RowKind, Row)>],
    compact_after: Option<usize>,
    keep_retractions: bool,
    order: impl Fn(&Version, &Version) -> Ordering,
    fold: impl Fn(&[Version]) -> Option<Version>,
) -> Vec<Row> {
    // As Paimon (`ReducerMergeFunctionWrapper`), a lone version is kept as it is, a
    // retraction included; only two or more are folded.
    let fold = |versions: &[Version]| match versions {
        [only] => Some(only.clone()),
        _ => fold(versions),
    };
    let merge = |files: HashMap<i32, Vec<Version>>, keep: bool| -> HashMap<i32, Version> {
        files
            .into_iter()
            .filter_map(|(key, mut versions)| {
                versions.sort_by(&order);
                fold(&versions)
                    .filter(|v| keep || !v.kind.is_retract())
                    .map(|v| (key, v))
            })
            .collect()
    };
    let mut files: HashMap<i32, Vec<Version>> = HashMap::new();
    let mut arrival = 0;
    for (i, commit) in commits.iter().enumerate() {
        let mut batch: HashMap<i32, Vec<Version>> = HashMap::new();
        for (kind, row) in commit {
            arrival += 1;
            batch.entry(key_of(row)).or_default().push(Version {
                kind: *kind,
                row: row.clone(),
                arrival,
            });
        }
        for (key, mut versions) in batch {
            versions.sort_by(&order);
            if let Some(folded) = fold(&versions) {
                files.entry(key).or_default().push(folded);
            }
        }
        if compact_after == Some(i) {
            files = merge(std::mem::take(&mut files), keep_retractions)
                .into_iter()
                .map(|(k, v)| (k, vec![v]))
                .collect();
        }
    }
    let mut rows: Vec<(i32, Row)> = merge(files, false)
        .into_iter()
        .filter(|(_, v)| !v.kind.is_retract())
        .map(|(k, v)| (k, v.row))
        .collect();
    rows.sort_by_key(|(k, _)| *k);
    rows.into_iter().map(|(_, r)| r).collect()
}

// ---------------------------------------------------------------- aggregation

/// k, s (sum), mn (min), mx (max), l (listagg), lnn (default), fnn (first_non_null_value),
/// ts (the sequence field when configured).
fn agg_columns() -> Vec<(&'static str, DataType)> {
    vec![
        ("k", DataType::Int),
        ("s", DataType::BigInt),
        ("mn", DataType::BigInt),
        ("mx", DataType::BigInt),
        ("l", DataType::Varchar(MAX_LENGTH)),
        ("lnn", DataType::BigInt),
        ("fnn", DataType::BigInt),
        ("ts", DataType::BigInt),
    ]
}

#[derive(Debug, Clone, Copy)]
struct AggConfig {
    with_seq: bool,
    /// `aggregation.remove-record-on-delete` (then no -U is generated, as the
    /// non-retractable columns may not ignore retractions).
    remove_on_delete: bool,
}

fn agg_options(cfg: AggConfig, retractions: bool) -> Vec<(&'static str, &'static str)> {
    let mut options = vec![
        ("merge-engine", "aggregation"),
        ("fields.s.aggregate-function", "sum"),
        ("fields.mn.aggregate-function", "min"),
        ("fields.mx.aggregate-function", "max"),
        ("fields.l.aggregate-function", "listagg"),
        ("fields.fnn.aggregate-function", "first_non_null_value"),
    ];
    if cfg.with_seq {
        options.push(("sequence.field", "ts"));
    }
    if cfg.remove_on_delete {
        options.push(("aggregation.remove-record-on-delete", "true"));
    } else if retractions {
        for key in [
            "fields.mn.ignore-retract",
            "fields.mx.ignore-retract",
            "fields.l.ignore-retract",
            "fields.fnn.ignore-retract",
        ] {
            options.push((key, "true"));
        }
    }
    options
}

fn agg_change(kinds: Vec<RowKind>) -> impl Strategy<Value = (RowKind, Row)> {
    let value = || proptest::option::weighted(0.7, -20..100i64);
    let text = proptest::option::weighted(
        0.7,
        prop_oneof![Just("a"), Just("b"), Just("c"), Just(" "), Just("")],
    );
    (
        proptest::sample::select(kinds),
        0..5i32,
        (value(), value(), value(), text),
        (value(), value(), proptest::option::weighted(0.8, 0..10i64)),
    )
        .prop_map(|(kind, k, (s, mn, mx, l), (lnn, fnn, ts))| {
            let row = vec![
                Datum::Int(k),
                big(s),
                big(mn),
                big(mx),
                l.map_or(Datum::Null, |t| Datum::String(t.to_string().into())),
                big(lnn),
                big(fnn),
                big(ts),
            ];
            (kind, row)
        })
}

fn agg_commits(kinds: Vec<RowKind>) -> impl Strategy<Value = Vec<Vec<(RowKind, Row)>>> {
    proptest::collection::vec(proptest::collection::vec(agg_change(kinds), 0..20), 1..5)
}

fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}

/// Paimon's aggregation of one key's versions, oldest first.
fn fold_aggregation(cfg: AggConfig, versions: &[Version]) -> Option<Version> {
    let last = versions.last()?;
    let mut acc: Row = vec![Datum::Null; 8];
    acc[0] = last.row[0].clone();
    // first_non_null_value's state is not reset by a removing -D (as in Java).
    let mut fnn_taken = false;
    let mut deleted = false;
    for v in versions {
        deleted = cfg.remove_on_delete && v.kind == RowKind::Delete;
        if deleted {
            acc = vec![v.row[0].clone()];
            acc.resize(8, Datum::Null);
            continue;
        }
        let r = &v.row;
        if v.kind.is_retract() {
            // s: sum retracts by subtracting; mn, mx, l, fnn ignore retractions.
            acc[1] = match (opt_i64(&acc[1]), opt_i64(&r[1])) {
                (a, None) => big(a),
                (None, Some(x)) => big(Some(-x)),
                (Some(a), Some(x)) => big(Some(a - x)),
            };
            if !r[5].is_null() {
                acc[5] = Datum::Null;
            }
            acc[7] = if cfg.with_seq || !r[7].is_null() {
                Datum::Null
            } else {
                acc[7].clone()
            };
            continue;
        }
        let combine = |a: &Datum, x: &Datum, f: fn(i64, i64) -> i64| match (opt_i64(a), opt_i64(x))
        {
            (a, None) => big(a),
            (None, x) => big(x),
            (Some(a), Some(x)) => big(Some(f(a, x))),
        };
        acc[1] = combine(&acc[1], &r[1], |a, x| a + x);
        acc[2] = combine(&acc[2], &r[2], i64::min);
        acc[3] = combine(&acc[3], &r[3], i64::max);
        if let Datum::String(t) = &r[4]
            && !is_blank(t)
        {
            acc[4] = match &acc[4] {
                Datum::String(a) => Datum::String(format!("{a},{t}").into()),
                _ => Datum::String(t.clone()),
            };
        }
        if !r[5].is_null() {
            acc[5] = r[5].clone();
        }
        if !fnn_taken && !r[6].is_null() {
            fnn_taken = true;
            acc[6] = r[6].clone();
        }
        // ts: last_value as the sequence field, else the default last_non_null_value.
        if cfg.with_seq || !r[7].is_null() {
            acc[7] = r[7].clone();
        }
    }
    Some(Version {
        kind: if deleted {
            RowKind::Delete
        } else {
            RowKind::Insert
        },
        row: if deleted { last.row.clone() } else { acc },
        arrival: last.arrival,
    })
}

fn model_aggregation(
    cfg: AggConfig,
    commits: &[Vec<(RowKind, Row)>],
    compact_after: Option<usize>,
) -> Vec<Row> {
    let order = move |x: &Version, y: &Version| {
        let user = if cfg.with_seq {
            opt_i64(&x.row[7]).cmp(&opt_i64(&y.row[7]))
        } else {
            Ordering::Equal
        };
        user.then(x.arrival.cmp(&y.arrival))
    };
    two_level_model(commits, compact_after, cfg.with_seq, order, |v| {
        fold_aggregation(cfg, v)
    })
}

// ---------------------------------------------------------------- first-row

fn first_row_commits() -> impl Strategy<Value = Vec<Vec<(RowKind, Row)>>> {
    let change = (
        proptest::sample::select(vec![
            RowKind::Insert,
            RowKind::UpdateAfter,
            RowKind::UpdateBefore,
            RowKind::Delete,
        ]),
        0..6i32,
        proptest::option::weighted(0.8, 0..100i64),
    )
        .prop_map(|(kind, k, v)| (kind, vec![Datum::Int(k), big(v)]));
    proptest::collection::vec(proptest::collection::vec(change, 0..15), 1..5)
}

/// First-row with `first-row.ignore-delete`: retractions are dropped, and the first added
/// version of a key (by arrival) is kept forever.
fn model_first_row(commits: &[Vec<(RowKind, Row)>]) -> Vec<Row> {
    let mut first: BTreeMap<i32, Row> = BTreeMap::new();
    for (kind, row) in commits.iter().flatten() {
        if !kind.is_retract() {
            first.entry(key_of(row)).or_insert_with(|| row.clone());
        }
    }
    first.into_values().collect()
}

// ---------------------------------------------------------------- sequence groups

/// k, a, b (ordered by s1), c (ordered by s2), s1, s2, free (in no group).
fn group_columns() -> Vec<(&'static str, DataType)> {
    let mut cols = vec![("k", DataType::Int)];
    for name in ["a", "b", "c", "s1", "s2", "free"] {
        cols.push((name, DataType::BigInt));
    }
    cols
}

const A: usize = 1;
const B: usize = 2;
const C: usize = 3;
const S1: usize = 4;
const S2: usize = 5;
const FREE: usize = 6;

/// (members, sequence field) of each group.
const GROUPS: [(&[usize], usize); 2] = [(&[A, B], S1), (&[C], S2)];

/// Changes from two upstreams: one writes group s1, the other group s2; either may set
/// `free`. Sequence values collide often, so ties are exercised.
fn group_commits(with_deletes: bool) -> impl Strategy<Value = Vec<Vec<(RowKind, Row)>>> {
    let kinds = if with_deletes {
        vec![
            RowKind::Insert,
            RowKind::UpdateAfter,
            RowKind::Insert,
            RowKind::UpdateBefore,
            RowKind::Delete,
        ]
    } else {
        vec![RowKind::Insert, RowKind::UpdateAfter]
    };
    let value = || proptest::option::weighted(0.7, 0..100i64);
    let seq = || proptest::option::weighted(0.85, 0..8i64);
    let change = (
        proptest::sample::select(kinds),
        0..4i32,
        any::<bool>(),
        (value(), value(), seq()),
        proptest::option::weighted(0.4, 0..100i64),
    )
        .prop_map(|(kind, k, first_upstream, (x, y, s), free)| {
            let mut row = vec![Datum::Null; 7];
            row[0] = Datum::Int(k);
            if first_upstream {
                row[A] = big(x);
                row[B] = big(y);
                row[S1] = big(s);
            } else {
                row[C] = big(x);
                row[S2] = big(s);
            }
            row[FREE] = big(free);
            (kind, row)
        });
    proptest::collection::vec(proptest::collection::vec(change, 0..20), 1..5)
}

/// Paimon's partial-update with sequence groups, versions oldest first: a version wins a
/// group when the group's sequence is set in it and not older than the row's (nulls
/// first); an add then takes all the group's values, a retraction clears them (or, under
/// remove-record-on-sequence-group s1, a winning -D empties the row).
fn fold_groups(remove_on_s1: bool, versions: &[Version]) -> Option<Version> {
    let last = versions.last()?;
    let mut row: Row = vec![Datum::Null; 7];
    row[0] = last.row[0].clone();
    let mut met_insert = false;
    let mut deleted = false;
    for v in versions {
        deleted = false;
        let wins = |row: &Row, seq: usize| {
            let new = opt_i64(&v.row[seq]);
            new.is_some() && new >= opt_i64(&row[seq])
        };
        if v.kind.is_retract() {
            let won: Vec<bool> = GROUPS.iter().map(|(_, seq)| wins(&row, *seq)).collect();
            if remove_on_s1 && v.kind == RowKind::Delete && won[0] {
                row = vec![Datum::Null; 7];
                row[0] = v.row[0].clone();
                deleted = true;
                continue;
            }
            for ((members, seq), won) in GROUPS.iter().zip(won) {
                if won {
                    row[*seq] = v.row[*seq].clone();
                    for &m in *members {
                        row[m] = Datum::Null;
                    }
                }
            }
            continue;
        }
        for (members, seq) in GROUPS {
            if wins(&row, seq) {
                row[seq] = v.row[seq].clone();
                for &m in members {
                    row[m] = v.row[m].clone();
                }
            }
        }
        if !v.row[FREE].is_null() {
            row[FREE] = v.row[FREE].clone();
        }
        met_insert = true;
    }
    Some(Version {
        kind: if deleted || !met_insert {
            RowKind::Delete
        } else {
            RowKind::Insert
        },
        // A folded removal keeps the -D's values (as Paimon 1.4.2 does), so its sequence
        // fields remove the row again in later merges.
        row: if deleted { last.row.clone() } else { row },
        arrival: last.arrival,
    })
}

fn model_groups(remove_on_s1: bool, commits: &[Vec<(RowKind, Row)>]) -> Vec<Row> {
    two_level_model(
        commits,
        None,
        false,
        |x, y| x.arrival.cmp(&y.arrival),
        |v| fold_groups(remove_on_s1, v),
    )
}

// ---------------------------------------------------------------- properties

const ADDS: [RowKind; 2] = [RowKind::Insert, RowKind::UpdateAfter];

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn aggregation_matches_model(
        commits in agg_commits(ADDS.to_vec()),
        with_seq in any::<bool>(),
        compact_after in proptest::option::of(0..4usize),
    ) {
        let cfg = AggConfig { with_seq, remove_on_delete: false };
        let rt = runtime();
        let table = rt.block_on(make_table(&agg_columns(), &agg_options(cfg, false)));
        let got = rt.block_on(write_and_scan(table, &commits, compact_after));
        prop_assert_eq!(got, model_aggregation(cfg, &commits, compact_after));
    }

    #[test]
    fn aggregation_with_retractions_matches_model(
        commits in agg_commits(vec![
            RowKind::Insert, RowKind::UpdateAfter, RowKind::UpdateBefore, RowKind::Delete,
        ]),
        with_seq in any::<bool>(),
        compact_after in proptest::option::of(0..4usize),
    ) {
        let cfg = AggConfig { with_seq, remove_on_delete: false };
        let rt = runtime();
        let table = rt.block_on(make_table(&agg_columns(), &agg_options(cfg, true)));
        let got = rt.block_on(write_and_scan(table, &commits, compact_after));
        prop_assert_eq!(got, model_aggregation(cfg, &commits, compact_after));
    }

    #[test]
    fn aggregation_remove_record_on_delete_matches_model(
        commits in agg_commits(vec![RowKind::Insert, RowKind::UpdateAfter, RowKind::Delete]),
        with_seq in any::<bool>(),
        compact_after in proptest::option::of(0..4usize),
    ) {
        let cfg = AggConfig { with_seq, remove_on_delete: true };
        let rt = runtime();
        let table = rt.block_on(make_table(&agg_columns(), &agg_options(cfg, true)));
        let got = rt.block_on(write_and_scan(table, &commits, compact_after));
        prop_assert_eq!(got, model_aggregation(cfg, &commits, compact_after));
    }

    #[test]
    fn first_row_matches_model(
        commits in first_row_commits(),
        compact_after in proptest::option::of(0..4usize),
    ) {
        let rt = runtime();
        let columns = [("k", DataType::Int), ("v", DataType::BigInt)];
        let table = rt.block_on(make_table(
            &columns,
            &[("merge-engine", "first-row"), ("first-row.ignore-delete", "true")],
        ));
        // Paimon's batch readers skip level-0 files of first-row tables, so the check reads
        // after a full compaction (and, in between, across compacted and fresh files).
        let last = commits.len() - 1;
        let compact = compact_after.filter(|&c| c < last);
        rt.block_on(write_and_scan(table.clone(), &commits[..last], compact));
        let got = rt.block_on(write_and_scan(table, &commits[last..], Some(0)));
        prop_assert_eq!(got, model_first_row(&commits));
    }

    #[test]
    fn sequence_groups_match_model(commits in group_commits(false)) {
        let rt = runtime();
        let table = rt.block_on(make_table(&group_columns(), &[
            ("merge-engine", "partial-update"),
            ("fields.s1.sequence-group", "a,b"),
            ("fields.s2.sequence-group", "c"),
        ]));
        let got = rt.block_on(write_and_scan(table, &commits, None));
        prop_assert_eq!(got, model_groups(false, &commits));
    }

    #[test]
    fn sequence_groups_with_retractions_match_model(
        commits in group_commits(true),
        remove_on_s1 in any::<bool>(),
    ) {
        let rt = runtime();
        let mut options = vec![
            ("merge-engine", "partial-update"),
            ("fields.s1.sequence-group", "a,b"),
            ("fields.s2.sequence-group", "c"),
        ];
        if remove_on_s1 {
            options.push(("partial-update.remove-record-on-sequence-group", "s1"));
        }
        let table = rt.block_on(make_table(&group_columns(), &options));
        let got = rt.block_on(write_and_scan(table, &commits, None));
        prop_assert_eq!(got, model_groups(remove_on_s1, &commits));
    }
}
