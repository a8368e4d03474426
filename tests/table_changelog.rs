//! Hermetic tests of the changelog producers through the writer, the incremental reader
//! and expiry, on in-memory and local warehouses.
//!
//! - `lookup`: random commits to every merge engine; after each commit the changes read
//!   back (`lsm::changes::read_changes`) replay onto a view of the table (`-U`/`-D`
//!   must name the row the view holds) that equals the merged scan. Commits that flush
//!   twice (a tiny write buffer) check that a second flush starts from the first.
//! - `input`: the changes read back are the changes written, key by key in order.
//! - `full-compaction`: random commits to every merge engine that takes it, with
//!   `full-compaction.delta-commits` 1 to 3. A commit the writer fully compacts after
//!   must read back, key by key, exactly the model's changes from the rows of the last
//!   full compaction to the merged scan (for the keys written since: `+I`, `-D`, or
//!   `-U/+U` unless `row-deduplicate` and equal); the commits in between read back none.
//! - Expiry keeps the changelog of expired snapshots while the changelog retention
//!   lasts (long-lived changelogs), through orphan cleaning, and removes it after; a
//!   consumer (`consumer/consumer-<id>`) holds what it reads next.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lakejoin::lsm::changes::{Change, read_changes};
use lakejoin::lsm::compact::full_compact;
use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
use lakejoin::lsm::orphan::{OrphanCleanConfig, clean_orphan_files};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::{Datum, Row};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::snapshot::CommitKind;
use lakejoin::table::types::DataType;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use proptest::prelude::*;

/// `k INT` (key), `a BIGINT`, `b BIGINT`, `s BIGINT`, in 2 buckets, with `options`.
async fn create(wh: &Warehouse, options: &[(&str, &str)]) -> Arc<Table> {
    let mut map: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.insert("bucket".into(), "2".into());
    let schema = TableSchema::new(
        vec![
            ("k".into(), DataType::Int, false),
            ("a".into(), DataType::BigInt, true),
            ("b".into(), DataType::BigInt, true),
            ("s".into(), DataType::BigInt, true),
        ],
        vec![],
        vec!["k".into()],
        map,
    )
    .unwrap();
    let id = TableIdentifier::parse("db.t").unwrap();
    Arc::new(Table::create(wh, &id, schema).await.unwrap())
}

/// A change as generated: kind, key, a, b, s.
type Gen = (RowKind, i32, Option<i64>, Option<i64>, Option<i64>);

fn row(g: &Gen) -> Row {
    let d = |v: Option<i64>| v.map_or(Datum::Null, Datum::BigInt);
    vec![Datum::Int(g.1), d(g.2), d(g.3), d(g.4)]
}

fn key(row: &Row) -> i32 {
    match row[0] {
        Datum::Int(k) => k,
        ref other => panic!("key {other:?}"),
    }
}

/// Replays `changes` onto `view`, checking each retraction against it.
fn replay(view: &mut BTreeMap<i32, Row>, changes: &[Change]) {
    for c in changes {
        let k = key(&c.row);
        match c.kind {
            RowKind::Insert => {
                assert!(
                    view.insert(k, c.row.clone()).is_none(),
                    "+I of held key {k}"
                );
            }
            RowKind::UpdateAfter => {
                view.insert(k, c.row.clone());
            }
            RowKind::UpdateBefore | RowKind::Delete => {
                assert_eq!(
                    view.remove(&k),
                    Some(c.row.clone()),
                    "{:?} of key {k}",
                    c.kind
                );
            }
        }
    }
}

/// Writes `commits` to a `lookup` table of `options`, checking after each commit that
/// its changelog replays to the merged scan.
async fn lookup_replays_to_scan(options: &[(&str, &str)], commits: &[Vec<Gen>], tiny_buffer: bool) {
    let wh = Warehouse::in_memory();
    let mut all = vec![("changelog-producer", "lookup")];
    all.extend_from_slice(options);
    let table = create(&wh, &all).await;
    let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
    if tiny_buffer {
        // Flushes after every change: one commit, several flushes.
        writer.set_buffer_limit(1);
    }
    let mut view = BTreeMap::new();
    let mut last = 0;
    for commit in commits {
        for g in commit {
            writer.write(g.0, row(g)).unwrap();
            if tiny_buffer {
                writer.flush().await.unwrap();
            }
        }
        let Some(snapshot) = writer.commit(BTreeMap::new()).await.unwrap() else {
            continue;
        };
        // Compactions may have landed in between; they add no changes.
        let changes = read_changes(&table, last, snapshot.id).await.unwrap();
        last = snapshot.id;
        replay(&mut view, &changes);
        // The latest snapshot: first-row tables are read from levels ≥ 1, which the
        // compaction the writer waited for filled.
        let rows: BTreeMap<i32, Row> = scan(&table, None, &ScanFilter::default())
            .await
            .unwrap()
            .into_iter()
            .map(|r| (key(&r), r))
            .collect();
        assert_eq!(
            view, rows,
            "the changelog replayed vs the table after snapshot {last}"
        );
    }
    writer.close().await.unwrap();
}

fn kinds(retractions: bool) -> BoxedStrategy<RowKind> {
    if retractions {
        prop_oneof![
            4 => Just(RowKind::Insert),
            2 => Just(RowKind::UpdateAfter),
            1 => Just(RowKind::UpdateBefore),
            2 => Just(RowKind::Delete),
        ]
        .boxed()
    } else {
        prop_oneof![Just(RowKind::Insert), Just(RowKind::UpdateAfter)].boxed()
    }
}

fn commits(retractions: bool) -> impl Strategy<Value = Vec<Vec<Gen>>> {
    let v = proptest::option::weighted(0.7, 0..6i64);
    let change = (kinds(retractions), 0..6i32, v.clone(), v.clone(), v);
    proptest::collection::vec(proptest::collection::vec(change, 1..8), 1..6)
}

fn run(f: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn lookup_deduplicate_replays_to_the_table(commits in commits(true), tiny in any::<bool>()) {
        run(lookup_replays_to_scan(&[], &commits, tiny));
    }

    #[test]
    fn lookup_deduplicate_with_sequence_field_replays_to_the_table(commits in commits(true)) {
        run(lookup_replays_to_scan(&[("sequence.field", "s")], &commits, false));
    }

    #[test]
    fn lookup_partial_update_replays_to_the_table(commits in commits(false), tiny in any::<bool>()) {
        run(lookup_replays_to_scan(&[("merge-engine", "partial-update")], &commits, tiny));
    }

    #[test]
    fn lookup_partial_update_with_sequence_group_replays_to_the_table(commits in commits(true)) {
        run(lookup_replays_to_scan(
            &[("merge-engine", "partial-update"), ("fields.s.sequence-group", "a,b")],
            &commits,
            false,
        ));
    }

    #[test]
    fn lookup_aggregation_replays_to_the_table(commits in commits(true), tiny in any::<bool>()) {
        run(lookup_replays_to_scan(
            &[
                ("merge-engine", "aggregation"),
                ("fields.a.aggregate-function", "sum"),
                ("fields.b.aggregate-function", "sum"),
                ("fields.s.aggregate-function", "sum"),
            ],
            &commits,
            tiny,
        ));
    }

    #[test]
    fn lookup_first_row_replays_to_the_table(commits in commits(false)) {
        run(lookup_replays_to_scan(&[("merge-engine", "first-row")], &commits, false));
    }

    #[test]
    fn full_compaction_deduplicate_matches_the_model(
        commits in commits(true), delta in 1..4u32, dedup in any::<bool>(),
    ) {
        run(full_compaction_changes_match_the_model(&[], &commits, delta, dedup));
    }

    #[test]
    fn full_compaction_deduplicate_with_sequence_field_matches_the_model(
        commits in commits(true), delta in 1..4u32,
    ) {
        run(full_compaction_changes_match_the_model(&[("sequence.field", "s")], &commits, delta, false));
    }

    #[test]
    fn full_compaction_partial_update_matches_the_model(
        commits in commits(false), delta in 1..4u32, dedup in any::<bool>(),
    ) {
        run(full_compaction_changes_match_the_model(
            &[("merge-engine", "partial-update")], &commits, delta, dedup,
        ));
    }

    #[test]
    fn full_compaction_partial_update_with_sequence_group_matches_the_model(
        commits in commits(true), delta in 1..4u32,
    ) {
        run(full_compaction_changes_match_the_model(
            &[("merge-engine", "partial-update"), ("fields.s.sequence-group", "a,b")],
            &commits,
            delta,
            false,
        ));
    }

    #[test]
    fn full_compaction_aggregation_matches_the_model(
        commits in commits(true), delta in 1..4u32, dedup in any::<bool>(),
    ) {
        run(full_compaction_changes_match_the_model(
            &[
                ("merge-engine", "aggregation"),
                ("fields.a.aggregate-function", "sum"),
                ("fields.b.aggregate-function", "sum"),
                ("fields.s.aggregate-function", "sum"),
            ],
            &commits,
            delta,
            dedup,
        ));
    }

    #[test]
    fn input_changelog_is_the_changes_written(commits in commits(true)) {
        run(async {
            let wh = Warehouse::in_memory();
            let table = create(&wh, &[("changelog-producer", "input")]).await;
            let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
            let mut last = 0;
            for commit in &commits {
                for g in commit {
                    writer.write(g.0, row(g)).unwrap();
                }
                let snapshot = writer.commit(BTreeMap::new()).await.unwrap().unwrap();
                let changes = read_changes(&table, last, snapshot.id).await.unwrap();
                last = snapshot.id;
                let mut written: BTreeMap<i32, Vec<(RowKind, Row)>> = BTreeMap::new();
                for g in commit {
                    written.entry(g.1).or_default().push((g.0, row(g)));
                }
                let mut read: BTreeMap<i32, Vec<(RowKind, Row)>> = BTreeMap::new();
                for c in changes {
                    read.entry(key(&c.row)).or_default().push((c.kind, c.row));
                }
                assert_eq!(read, written);
                let count = table.snapshot(snapshot.id).await.unwrap().changelog_record_count;
                assert_eq!(count, Some(commit.len() as i64));
            }
            writer.close().await.unwrap();
        });
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_without_producer_reads_its_delta_files_and_names_no_changelog() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[]).await;
    let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
    writer
        .write(
            RowKind::Insert,
            row(&(RowKind::Insert, 1, Some(1), None, None)),
        )
        .unwrap();
    writer
        .write(
            RowKind::Insert,
            row(&(RowKind::Insert, 1, Some(2), None, None)),
        )
        .unwrap();
    let s = writer.commit(BTreeMap::new()).await.unwrap().unwrap();
    assert_eq!(s.changelog_manifest_list, None);
    assert_eq!(s.changelog_record_count, None);
    let changes = read_changes(&table, 0, s.id).await.unwrap();
    // The delta file's folded row.
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].row[1], Datum::BigInt(2));
    writer.close().await.unwrap();
}

/// The merged rows of the latest snapshot, by key.
async fn scan_by_key(table: &Table) -> BTreeMap<i32, Row> {
    scan(table, None, &ScanFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (key(&r), r))
        .collect()
}

/// Each key's changes, in the order read.
fn per_key(changes: &[Change]) -> BTreeMap<i32, Vec<(RowKind, Row)>> {
    let mut out: BTreeMap<i32, Vec<(RowKind, Row)>> = BTreeMap::new();
    for c in changes {
        out.entry(key(&c.row))
            .or_default()
            .push((c.kind, c.row.clone()));
    }
    out
}

/// The `full-compaction` changelog a full compaction must write: for each key written
/// since the last one, the way from its row then (`before`) to its merged row now
/// (`after`), as Java's `FullChangelogMergeFunctionWrapper` writes it.
fn expected_full_changes(
    before: &BTreeMap<i32, Row>,
    after: &BTreeMap<i32, Row>,
    written: &std::collections::BTreeSet<i32>,
    row_deduplicate: bool,
) -> BTreeMap<i32, Vec<(RowKind, Row)>> {
    let mut out = BTreeMap::new();
    for k in written {
        let changes = match (before.get(k), after.get(k)) {
            (None, None) => continue,
            (None, Some(a)) => vec![(RowKind::Insert, a.clone())],
            (Some(b), None) => vec![(RowKind::Delete, b.clone())],
            (Some(b), Some(a)) if row_deduplicate && a == b => continue,
            (Some(b), Some(a)) => vec![
                (RowKind::UpdateBefore, b.clone()),
                (RowKind::UpdateAfter, a.clone()),
            ],
        };
        out.insert(*k, changes);
    }
    out
}

/// Writes `commits` to a `full-compaction` table of `options` with
/// `full-compaction.delta-commits` = `delta` (unset for 1), checking the changes each
/// commit reads back (see the module doc).
async fn full_compaction_changes_match_the_model(
    options: &[(&str, &str)],
    commits: &[Vec<Gen>],
    delta: u32,
    row_deduplicate: bool,
) {
    let wh = Warehouse::in_memory();
    let delta_text = delta.to_string();
    let dedup_text = row_deduplicate.to_string();
    let mut all = vec![
        ("changelog-producer", "full-compaction"),
        ("changelog-producer.row-deduplicate", dedup_text.as_str()),
    ];
    if delta > 1 {
        all.push(("full-compaction.delta-commits", delta_text.as_str()));
    }
    all.extend_from_slice(options);
    let table = create(&wh, &all).await;
    let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
    // The rows of the last full compaction, replayed from the changelog.
    let mut view = BTreeMap::new();
    let mut written = std::collections::BTreeSet::new();
    let mut last = 0;
    for commit in commits {
        for g in commit {
            writer.write(g.0, row(g)).unwrap();
            written.insert(g.1);
        }
        let append = writer.commit(BTreeMap::new()).await.unwrap().unwrap();
        assert_eq!(append.commit_kind, CommitKind::Append);
        assert_eq!(
            append.changelog_manifest_list, None,
            "an APPEND with changelog"
        );
        let latest = table.latest_snapshot().await.unwrap().unwrap();
        let changes = read_changes(&table, last, latest.id).await.unwrap();
        last = latest.id;
        if append.commit_identifier % i64::from(delta) != 0 {
            assert!(
                changes.is_empty(),
                "commit {} is not fully compacted after, yet reads {changes:?}",
                append.commit_identifier
            );
            continue;
        }
        // The writer waited for its full compaction, committed with its identifier.
        assert_eq!(latest.commit_kind, CommitKind::Compact);
        assert_eq!(latest.commit_identifier, append.commit_identifier);
        let rows = scan_by_key(&table).await;
        assert_eq!(
            per_key(&changes),
            expected_full_changes(&view, &rows, &written, row_deduplicate),
            "the changes of the full compaction after commit {} (before: {view:?})",
            append.commit_identifier
        );
        replay(&mut view, &changes);
        assert_eq!(view, rows, "the changelog replayed vs the table");
        written.clear();
    }
    writer.close().await.unwrap();
}

/// `full-compaction.delta-commits` = 2: commits 1 and 3 carry no changelog, the full
/// compactions after 2 and 4 carry the changes of two commits each.
#[tokio::test(flavor = "multi_thread")]
async fn full_compaction_every_second_commit() {
    use RowKind::*;
    let commits = vec![
        vec![
            (Insert, 1, Some(1), None, None),
            (Insert, 2, Some(2), None, None),
        ],
        vec![
            (Insert, 1, Some(3), None, None),
            (Insert, 3, Some(3), None, None),
        ],
        vec![
            (Delete, 2, Some(2), None, None),
            (Insert, 4, Some(4), None, None),
        ],
        vec![
            (Insert, 3, Some(3), None, None),
            (Delete, 4, Some(4), None, None),
        ],
    ];
    for engine in [
        &[][..],
        &[
            ("merge-engine", "aggregation"),
            ("fields.a.aggregate-function", "sum"),
        ][..],
    ] {
        full_compaction_changes_match_the_model(engine, &commits, 2, false).await;
        full_compaction_changes_match_the_model(engine, &commits, 2, true).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_only_full_compaction_table_gets_its_changelog_from_compact() {
    let wh = Warehouse::in_memory();
    let table = create(
        &wh,
        &[
            ("changelog-producer", "full-compaction"),
            ("write-only", "true"),
        ],
    )
    .await;
    let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
    for (k, v) in [(1, 1), (2, 2), (1, 3)] {
        let g = (RowKind::Insert, k, Some(v), None, None);
        writer.write(g.0, row(&g)).unwrap();
        let s = writer.commit(BTreeMap::new()).await.unwrap().unwrap();
        assert_eq!(s.changelog_manifest_list, None);
    }
    writer.close().await.unwrap();
    let compacted = full_compact(&table, "compactor").await.unwrap().unwrap();
    let changes = read_changes(&table, 0, compacted.id).await.unwrap();
    assert!(changes.iter().all(|c| c.snapshot == compacted.id));
    let rows = |pairs: &[(RowKind, i32, i64)]| -> Vec<(RowKind, Row)> {
        pairs
            .iter()
            .map(|&(kind, k, v)| (kind, row(&(kind, k, Some(v), None, None))))
            .collect()
    };
    assert_eq!(changes.len(), 2, "{changes:?}");
    let mut by_key = per_key(&changes);
    assert_eq!(by_key.remove(&1).unwrap(), rows(&[(RowKind::Insert, 1, 3)]));
    assert_eq!(by_key.remove(&2).unwrap(), rows(&[(RowKind::Insert, 2, 2)]));
    // An update and a delete, then the next full compaction.
    let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
    writer
        .write(
            RowKind::UpdateAfter,
            row(&(RowKind::UpdateAfter, 1, Some(4), None, None)),
        )
        .unwrap();
    writer
        .write(
            RowKind::Delete,
            row(&(RowKind::Delete, 2, Some(2), None, None)),
        )
        .unwrap();
    writer.commit(BTreeMap::new()).await.unwrap().unwrap();
    writer.close().await.unwrap();
    let again = full_compact(&table, "compactor").await.unwrap().unwrap();
    let mut by_key = per_key(&read_changes(&table, compacted.id, again.id).await.unwrap());
    assert_eq!(
        by_key.remove(&1).unwrap(),
        rows(&[(RowKind::UpdateBefore, 1, 3), (RowKind::UpdateAfter, 1, 4)])
    );
    assert_eq!(by_key.remove(&2).unwrap(), rows(&[(RowKind::Delete, 2, 2)]));
    assert!(by_key.is_empty());
    // Compact already: nothing to do, no snapshot, no changes.
    assert!(full_compact(&table, "compactor").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn expiry_keeps_changelogs_while_their_retention_lasts() {
    let dir = tempfile::tempdir().unwrap();
    let wh = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let table = create(
        &wh,
        &[
            ("changelog-producer", "lookup"),
            ("write-only", "true"),
            ("changelog.num-retained.min", "1"),
            ("changelog.num-retained.max", "5"),
            ("changelog.time-retained", "1 ms"),
        ],
    )
    .await;
    let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
    for i in 0..8 {
        let g = (RowKind::Insert, i % 3, Some(i64::from(i)), None, None);
        writer.write(g.0, row(&g)).unwrap();
        writer.commit(BTreeMap::new()).await.unwrap().unwrap();
    }
    writer.close().await.unwrap();
    let before = read_changes(&table, 0, 8).await.unwrap();
    let from =
        |id: i64| -> Vec<Change> { before.iter().filter(|c| c.snapshot > id).cloned().collect() };
    tokio::time::sleep(Duration::from_millis(5)).await;
    // Once `time_retained` has passed, expiry keeps only `retain_min` snapshots (Java's
    // `ExpireSnapshotsImpl`: `retain_max` caps what stays, it keeps nothing): the two
    // newest stay here.
    let config = ExpireConfig {
        retain_min: 2,
        retain_max: 2,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    assert_eq!(
        table.snapshot_ids().await.unwrap(),
        (1..=8).collect::<Vec<_>>()
    );
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(report.expired, (1..=6).collect::<Vec<_>>());
    // Changelog retention: the newest 5 snapshots' worth (4..8), and the newest
    // long-lived changelog (6) bounds what goes; so 1..5 go, 6 stays.
    assert_eq!(report.changelogs_expired, (1..=5).collect::<Vec<_>>());
    assert_eq!(read_changes(&table, 5, 8).await.unwrap(), from(5));
    assert!(
        read_changes(&table, 4, 8).await.is_err(),
        "changelog 5 is gone"
    );
    // Orphan cleaning leaves the long-lived changelog's files alone.
    let orphans = OrphanCleanConfig {
        older_than: Duration::ZERO,
        dry_run: false,
    };
    clean_orphan_files(&table, &orphans).await.unwrap();
    assert_eq!(read_changes(&table, 5, 8).await.unwrap(), from(5));
    // Without decoupled retention (the changelog retention defaults to the snapshots'),
    // expiry drops the changelog with the snapshot.
    let plain = create(
        &Warehouse::in_memory(),
        &[
            ("changelog-producer", "input"),
            ("write-only", "true"),
            ("snapshot.num-retained.min", "2"),
            ("snapshot.num-retained.max", "2"),
            ("snapshot.time-retained", "1 ms"),
        ],
    )
    .await;
    let mut writer = TableWriter::new(plain.clone(), "test").await.unwrap();
    for i in 0..3 {
        let g = (RowKind::Insert, i, Some(1), None, None);
        writer.write(g.0, row(&g)).unwrap();
        writer.commit(BTreeMap::new()).await.unwrap().unwrap();
    }
    writer.close().await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let config = ExpireConfig::from_options(&plain.options().maintenance);
    let report = expire_snapshots(&plain, &config).await.unwrap();
    assert_eq!(report.expired, vec![1]);
    assert!(report.changelogs_expired.is_empty());
    assert!(read_changes(&plain, 0, 3).await.is_err());
    assert_eq!(read_changes(&plain, 1, 3).await.unwrap().len(), 2);
}

/// A consumer (`consumer/consumer-<id>`, as a `[[changelog]]` pipeline or Flink's
/// `consumer-id` writes it) holds long-lived changelogs too: changelog expiry removes
/// none it reads next, and the ones before it once it moves on, even when no snapshot
/// expires then (Java runs `ExpireChangelogImpl` after every snapshot expiry).
#[tokio::test(flavor = "multi_thread")]
async fn changelog_expiry_keeps_what_a_consumer_reads_next() {
    use object_store::{ObjectStoreExt, PutPayload};
    let table = create(
        &Warehouse::in_memory(),
        &[
            ("changelog-producer", "input"),
            ("write-only", "true"),
            ("changelog.num-retained.min", "6"),
            ("changelog.num-retained.max", "100"),
            ("changelog.time-retained", "1 ms"),
        ],
    )
    .await;
    let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
    let commit = async |writer: &mut TableWriter, i: i32| {
        let g = (RowKind::Insert, i % 3, Some(i64::from(i)), None, None);
        writer.write(g.0, row(&g)).unwrap();
        writer.commit(BTreeMap::new()).await.unwrap().unwrap();
    };
    for i in 0..8 {
        commit(&mut writer, i).await;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    let config = ExpireConfig {
        retain_min: 1,
        retain_max: 1,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(report.expired, (1..=7).collect::<Vec<_>>());
    // `changelog.num-retained.min` (6) keeps 3..=8.
    assert_eq!(report.changelogs_expired, vec![1, 2]);

    let consumer = |next: i64| {
        let table = table.clone();
        async move {
            table
                .store()
                .put(
                    &table.path_of("consumer/consumer-out"),
                    PutPayload::from(format!("{{\n  \"nextSnapshot\" : {next}\n}}")),
                )
                .await
                .unwrap();
        }
    };
    consumer(3).await;
    for i in 8..12 {
        commit(&mut writer, i).await;
    }
    writer.close().await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let before = read_changes(&table, 2, 12).await.unwrap();
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert!(
        report.expired.is_empty(),
        "the consumer holds snapshot 8 on"
    );
    // Without the consumer 3..=6 would go (num-retained.min keeps 7..=12).
    assert!(report.changelogs_expired.is_empty(), "{report:?}");
    assert_eq!(read_changes(&table, 2, 12).await.unwrap(), before);

    consumer(6).await;
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert!(report.expired.is_empty());
    assert_eq!(report.changelogs_expired, vec![3, 4, 5]);
    assert!(read_changes(&table, 2, 12).await.is_err());
    assert_eq!(
        read_changes(&table, 5, 12).await.unwrap(),
        before
            .into_iter()
            .filter(|c| c.snapshot > 5)
            .collect::<Vec<_>>()
    );
}
