//! Hermetic tests of compaction, snapshot expiry and orphan-file cleaning on in-memory and
//! local stores.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::TryStreamExt;
use lakejoin::Error;
use lakejoin::lsm::compact::{CompactScope, Compactor, full_compact};
use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
use lakejoin::lsm::levels::Levels;
use lakejoin::lsm::orphan::{OrphanCleanConfig, clean_orphan_files};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::binary_row;
use lakejoin::table::commit::CommitRequest;
use lakejoin::table::datum::{Datum, Row, compare_rows};
use lakejoin::table::manifest::{FileKind, ManifestEntry};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::snapshot::{CommitKind, Snapshot};
use lakejoin::table::types::DataType;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Longest any single wait (a commit, waiting for compaction) may take before the test
/// fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(120);

async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, future)
        .await
        .expect("gave up waiting: deadline passed")
}

fn schema(options: &[(&str, &str)]) -> TableSchema {
    let mut map: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.entry("bucket".into()).or_insert_with(|| "2".into());
    TableSchema::new(
        vec![
            ("k".into(), DataType::Int, false),
            ("v".into(), DataType::BigInt, true),
            ("seq".into(), DataType::BigInt, true),
        ],
        vec![],
        vec!["k".into()],
        map,
    )
    .unwrap()
}

async fn create(wh: &Warehouse, options: &[(&str, &str)]) -> Arc<Table> {
    let id = TableIdentifier::parse("db.t").unwrap();
    Arc::new(Table::create(wh, &id, schema(options)).await.unwrap())
}

fn local_warehouse() -> (tempfile::TempDir, Warehouse) {
    let dir = tempfile::tempdir().unwrap();
    let wh = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    (dir, wh)
}

fn row(k: i32, v: i64, seq: Option<i64>) -> Row {
    vec![
        Datum::Int(k),
        Datum::BigInt(v),
        seq.map_or(Datum::Null, Datum::BigInt),
    ]
}

/// Deduplicate model: key → (value, sequence field); `None` value = deleted.
#[derive(Debug, Default, Clone)]
struct Model {
    rows: BTreeMap<i32, (Option<i64>, Option<i64>)>,
    with_seq: bool,
}

impl Model {
    fn new(with_seq: bool) -> Self {
        Model {
            rows: BTreeMap::new(),
            with_seq,
        }
    }

    /// Applies an upsert (`Some(v)`) or delete (`None`) with a sequence value; with
    /// `sequence.field` a change older than the current version is ignored.
    fn apply(&mut self, k: i32, v: Option<i64>, seq: Option<i64>) {
        if self.with_seq
            && let Some(&(_, current)) = self.rows.get(&k)
            && current > seq
        {
            return;
        }
        self.rows.insert(k, (v, seq));
    }

    fn expected(&self) -> Vec<Row> {
        self.rows
            .iter()
            .filter_map(|(&k, &(v, seq))| v.map(|v| row(k, v, seq)))
            .collect()
    }
}

/// Writes `n` random changes of keys `0..keys` through `writer` and into `model`.
fn random_changes(
    rng: &mut StdRng,
    writer: &mut TableWriter,
    model: &mut Model,
    n: usize,
    keys: i32,
) {
    for _ in 0..n {
        let k = rng.random_range(0..keys);
        let seq = model.with_seq.then(|| rng.random_range(0..20i64));
        if rng.random_bool(0.2) {
            writer
                .write(RowKind::Delete, row(k, 0, seq))
                .expect("valid row");
            model.apply(k, None, seq);
        } else {
            let v = rng.random_range(0..1_000_000i64);
            writer
                .write(RowKind::Insert, row(k, v, seq))
                .expect("valid row");
            model.apply(k, Some(v), seq);
        }
    }
}

async fn scan_at(table: &Table, snapshot: Option<&Snapshot>) -> Vec<Row> {
    scan(table, snapshot, &ScanFilter::default()).await.unwrap()
}

async fn live(table: &Table) -> Vec<ManifestEntry> {
    let latest = table.latest_snapshot().await.unwrap().unwrap();
    table.live_files(&latest).await.unwrap()
}

/// Sorted runs per bucket of the latest snapshot.
async fn sorted_runs(table: &Table) -> BTreeMap<(Vec<u8>, i32), usize> {
    let mut by_bucket: BTreeMap<(Vec<u8>, i32), Vec<ManifestEntry>> = BTreeMap::new();
    for f in live(table).await {
        by_bucket
            .entry((f.partition.clone(), f.bucket))
            .or_default()
            .push(f);
    }
    let levels = table.options().maintenance.num_levels;
    by_bucket
        .into_iter()
        .map(|(id, files)| (id, Levels::new(files, levels).number_of_sorted_runs()))
        .collect()
}

/// No two files of one bucket overlap in key range on a level ≥ 1.
async fn assert_levels_disjoint(table: &Table) {
    let key_types = table
        .schema()
        .types_of(&table.schema().trimmed_key_indices());
    let mut by_level: BTreeMap<(i32, i32), Vec<(Row, Row)>> = BTreeMap::new();
    for f in live(table).await {
        if f.file.level >= 1 {
            let min = binary_row::deserialize(&f.file.min_key, &key_types).unwrap();
            let max = binary_row::deserialize(&f.file.max_key, &key_types).unwrap();
            by_level
                .entry((f.bucket, f.file.level))
                .or_default()
                .push((min, max));
        }
    }
    for ((bucket, level), mut ranges) in by_level {
        ranges.sort_by(|a, b| compare_rows(&a.0, &b.0));
        for pair in ranges.windows(2) {
            assert!(
                compare_rows(&pair[0].1, &pair[1].0).is_lt(),
                "overlapping files on level {level} of bucket {bucket}: {pair:?}"
            );
        }
    }
}

async fn snapshots(table: &Table) -> Vec<Snapshot> {
    let mut out = Vec::new();
    for id in table.snapshot_ids().await.unwrap() {
        out.push(table.snapshot(id).await.unwrap());
    }
    out
}

/// Every object under `<table>/<dir>` (relative paths), recursively.
async fn objects_under(table: &Table, dir: &str) -> BTreeSet<String> {
    let root = table.path_of(dir);
    table
        .store()
        .list(Some(&root))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap()
}

fn max_runs(runs: &BTreeMap<(Vec<u8>, i32), usize>) -> usize {
    runs.values().copied().max().unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// Automatic compaction
// ---------------------------------------------------------------------------------------

/// Waiting for compaction after each commit: every bucket stays within the trigger, the
/// rows never change, and every COMPACT snapshot reads exactly like the one before it.
#[tokio::test]
async fn auto_compaction_keeps_sorted_runs_within_the_trigger() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[]).await;
    let trigger = table.options().maintenance.compaction_trigger;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(7);
    let mut expected: BTreeMap<i64, Vec<Row>> = BTreeMap::new();
    for commit in 0..40 {
        let n = rng.random_range(1..25);
        random_changes(&mut rng, &mut writer, &mut model, n, 60);
        within(writer.commit(BTreeMap::new())).await.unwrap();
        within(writer.wait_for_compaction()).await.unwrap();
        let runs = sorted_runs(&table).await;
        assert!(
            max_runs(&runs) <= trigger,
            "commit {commit}: {runs:?} exceeds the trigger {trigger}"
        );
        assert_eq!(
            scan_at(&table, None).await,
            model.expected(),
            "commit {commit}"
        );
        let latest = table.latest_snapshot_id().await.unwrap().unwrap();
        for id in expected.len() as i64 + 1..=latest {
            expected.insert(id, model.expected());
        }
    }
    within(writer.close()).await.unwrap();
    let all = snapshots(&table).await;
    let compactions = all
        .iter()
        .filter(|s| s.commit_kind == CommitKind::Compact)
        .count();
    assert!(compactions >= 5, "only {compactions} COMPACT snapshots");
    for s in &all {
        assert_eq!(
            scan_at(&table, Some(s)).await,
            expected[&s.id],
            "snapshot {}",
            s.id
        );
        if s.commit_kind == CommitKind::Compact {
            assert_ne!(
                s.commit_user, "cdc",
                "compaction must not use the writer's user"
            );
        }
        let rows: i64 = table
            .live_files(s)
            .await
            .unwrap()
            .iter()
            .map(|f| f.file.row_count)
            .sum();
        assert_eq!(
            s.total_record_count, rows,
            "totalRecordCount of snapshot {}",
            s.id
        );
    }
    assert_levels_disjoint(&table).await;
    // The writer's own latest snapshot is still an APPEND one (it resumes from it).
    let own = table.latest_snapshot_of_user("cdc").await.unwrap().unwrap();
    assert_eq!(own.commit_kind, CommitKind::Append);
    assert_eq!(own.commit_identifier, 40);
}

/// Without waiting, the writer keeps appending while compaction runs on another task:
/// every APPEND snapshot holds exactly the rows written so far, no bucket grows past
/// `num-sorted-run.stop-trigger`, and closing the writer leaves it within the trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_appends_while_compaction_runs_in_the_background() {
    let (_dir, wh) = local_warehouse();
    let table = create(
        &wh,
        &[
            ("num-sorted-run.compaction-trigger", "3"),
            ("sequence.field", "seq"),
        ],
    )
    .await;
    let options = table.options().maintenance.clone();
    assert_eq!(options.stop_trigger, 6);
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(true);
    let mut rng = StdRng::seed_from_u64(11);
    let mut appends: Vec<(i64, Vec<Row>)> = Vec::new();
    for commit in 0..30 {
        let n = rng.random_range(1..30);
        random_changes(&mut rng, &mut writer, &mut model, n, 40);
        let snapshot = within(writer.commit(BTreeMap::new()))
            .await
            .unwrap()
            .unwrap();
        appends.push((snapshot.id, model.expected()));
        let runs = sorted_runs(&table).await;
        assert!(
            max_runs(&runs) <= options.stop_trigger,
            "commit {commit}: {runs:?} exceeds the stop trigger"
        );
    }
    within(writer.close()).await.unwrap();
    assert!(max_runs(&sorted_runs(&table).await) <= options.compaction_trigger);
    assert_eq!(scan_at(&table, None).await, model.expected());
    for (id, rows) in &appends {
        let s = table.snapshot(*id).await.unwrap();
        assert_eq!(
            &scan_at(&table, Some(&s)).await,
            rows,
            "APPEND snapshot {id}"
        );
    }
    let all = snapshots(&table).await;
    for pair in all.windows(2) {
        if pair[1].commit_kind == CommitKind::Compact {
            assert_eq!(
                scan_at(&table, Some(&pair[1])).await,
                scan_at(&table, Some(&pair[0])).await,
                "COMPACT snapshot {} changed the rows",
                pair[1].id
            );
        }
    }
    assert!(all.iter().any(|s| s.commit_kind == CommitKind::Compact));
    assert_levels_disjoint(&table).await;
}

#[tokio::test]
async fn write_only_tables_are_never_compacted_by_writers() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("write-only", "true"), ("bucket", "1")]).await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    for i in 0..12 {
        writer
            .write(RowKind::Insert, row(i, i.into(), None))
            .unwrap();
        within(writer.commit(BTreeMap::new())).await.unwrap();
    }
    within(writer.wait_for_compaction()).await.unwrap();
    within(writer.close()).await.unwrap();
    assert!(
        snapshots(&table)
            .await
            .iter()
            .all(|s| s.commit_kind == CommitKind::Append)
    );
    assert_eq!(max_runs(&sorted_runs(&table).await), 12);
    // An explicit compaction (the separate job of a write-only table) still works.
    let mut compactor = Compactor::new(table.clone(), "job").unwrap();
    let report = compactor.compact(&CompactScope::all()).await.unwrap();
    assert!(report.snapshot.is_some());
    assert_eq!(report.max_sorted_runs(), 1);
    assert_eq!(scan_at(&table, None).await.len(), 12);
}

/// Tables whose batch readers skip level 0 (deletion vectors here; first-row once its
/// merge function exists) never keep data there after a commit; lakejoin's reader skips
/// level 0 for them exactly as Java and pypaimon do.
#[tokio::test]
async fn level0_is_compacted_up_where_readers_skip_it() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("deletion-vectors.enabled", "true")]).await;
    assert!(table.options().batch_scan_skips_level0());
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(3);
    for commit in 0..8 {
        random_changes(&mut rng, &mut writer, &mut model, 10, 20);
        within(writer.commit(BTreeMap::new())).await.unwrap();
        let files = live(&table).await;
        assert!(
            files.iter().all(|f| f.file.level > 0),
            "commit {commit} left level-0 files"
        );
        // Java and pypaimon concatenate the levels of such tables without merging, so a
        // table without deletion vectors must hold each key once: one run per bucket.
        assert_eq!(max_runs(&sorted_runs(&table).await), 1, "commit {commit}");
        assert_eq!(scan_at(&table, None).await, model.expected());
    }
    within(writer.close()).await.unwrap();

    // With writers not compacting, the rows stay invisible, as they do to pypaimon,
    // until a compaction moves them up.
    let wh = Warehouse::in_memory();
    let table = create(
        &wh,
        &[("deletion-vectors.enabled", "true"), ("write-only", "true")],
    )
    .await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    writer.write(RowKind::Insert, row(1, 10, None)).unwrap();
    within(writer.commit(BTreeMap::new())).await.unwrap();
    assert!(scan_at(&table, None).await.is_empty());
    let report = Compactor::new(table.clone(), "job")
        .unwrap()
        .compact(&CompactScope::all())
        .await
        .unwrap();
    assert!(report.snapshot.is_some(), "level 0 must be forced up");
    assert_eq!(scan_at(&table, None).await, vec![row(1, 10, None)]);

    // A table with deletion vectors (Java's, here an index manifest Java wrote): lakejoin
    // reads them but refuses to rewrite the files they apply to.
    let mut latest = table.latest_snapshot().await.unwrap().unwrap();
    latest.index_manifest = Some("index-manifest-from-java-0".into());
    let java_index = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/java/deletion_vectors/bitmap32/index-manifest"),
    )
    .unwrap();
    table
        .store()
        .put(
            &table.path_of("manifest/index-manifest-from-java-0"),
            java_index.into(),
        )
        .await
        .unwrap();
    let location = table.path_of(&format!("snapshot/snapshot-{}", latest.id));
    table
        .store()
        .put(&location, latest.to_json().into())
        .await
        .unwrap();
    let err = Compactor::new(table.clone(), "job")
        .unwrap()
        .compact(&CompactScope::full())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("deletion vectors"), "{err}");

    // `compaction.force-up-level-0` forces the same without hiding level 0 from reads.
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("compaction.force-up-level-0", "true")]).await;
    assert!(!table.options().batch_scan_skips_level0());
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    writer.write(RowKind::Insert, row(1, 10, None)).unwrap();
    within(writer.commit(BTreeMap::new())).await.unwrap();
    assert!(live(&table).await.iter().all(|f| f.file.level > 0));
    within(writer.close()).await.unwrap();
}

// ---------------------------------------------------------------------------------------
// COMPACT commit conflicts
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn compact_commit_fails_when_its_inputs_are_gone_or_its_output_overlaps() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("bucket", "1")]).await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    for i in 0..3 {
        writer.write(RowKind::Insert, row(i, 1, None)).unwrap();
        writer.write(RowKind::Insert, row(i + 10, 1, None)).unwrap();
        within(writer.commit(BTreeMap::new())).await.unwrap();
    }
    let stale = live(&table).await;
    let before = scan_at(&table, None).await;
    // Someone else compacts first.
    full_compact(&table, "other").await.unwrap().unwrap();
    let latest = table.latest_snapshot_id().await.unwrap();

    // A compaction planned on the old files must not commit on top of that.
    let late = CommitRequest {
        commit_user: "late".into(),
        commit_identifier: 1,
        kind: CommitKind::Compact,
        entries: stale
            .iter()
            .map(|e| ManifestEntry {
                kind: FileKind::Delete,
                ..e.clone()
            })
            .collect(),
        changelog: Vec::new(),
        properties: BTreeMap::new(),
    };
    match table.commit(late).await {
        Err(Error::CommitConflict { reason, .. }) => {
            assert!(reason.contains("no longer live"), "{reason}")
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Two files overlapping on one level ≥ 1.
    let top = live(&table).await.remove(0);
    let mut twin = top.clone();
    twin.file.file_name = "data-twin.parquet".into();
    let overlap = CommitRequest {
        commit_user: "late".into(),
        commit_identifier: 2,
        kind: CommitKind::Compact,
        entries: vec![twin],
        changelog: Vec::new(),
        properties: BTreeMap::new(),
    };
    match table.commit(overlap).await {
        Err(Error::CommitConflict { reason, .. }) => {
            assert!(reason.contains("overlap"), "{reason}")
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(table.latest_snapshot_id().await.unwrap(), latest);
    assert_eq!(scan_at(&table, None).await, before);
    // The rejected commits left no manifests behind.
    let latest = table.latest_snapshot().await.unwrap().unwrap();
    let mut referenced: HashSet<String> = HashSet::new();
    for s in snapshots(&table).await {
        referenced.insert(s.base_manifest_list.clone());
        referenced.insert(s.delta_manifest_list.clone());
        for m in table.snapshot_manifests(&s).await.unwrap() {
            referenced.insert(m.file_name);
        }
    }
    for object in objects_under(&table, "manifest").await {
        let name = object.rsplit('/').next().unwrap().to_string();
        assert!(referenced.contains(&name), "unreferenced {object}");
    }
    assert_eq!(latest.commit_kind, CommitKind::Compact);
}

/// Two compactors racing on the same buckets: one may lose, plans again, and the table
/// stays correct (files never overlap on a level, rows never change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_compactors_plan_again_and_never_corrupt_the_table() {
    let (_dir, wh) = local_warehouse();
    let table = create(
        &wh,
        &[
            ("write-only", "true"),
            ("num-sorted-run.compaction-trigger", "2"),
        ],
    )
    .await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(5);
    for round in 0..6 {
        for _ in 0..4 {
            random_changes(&mut rng, &mut writer, &mut model, 15, 30);
            within(writer.commit(BTreeMap::new())).await.unwrap();
        }
        let scope = if round % 2 == 0 {
            CompactScope::all()
        } else {
            CompactScope::full()
        };
        let mut a = Compactor::new(table.clone(), format!("a-{round}")).unwrap();
        let mut b = Compactor::new(table.clone(), format!("b-{round}")).unwrap();
        let (sa, sb) = (scope.clone(), scope);
        let ta = tokio::spawn(async move { a.compact(&sa).await });
        let tb = tokio::spawn(async move { b.compact(&sb).await });
        let ra = ta.await.unwrap().unwrap();
        let rb = tb.await.unwrap().unwrap();
        assert!(
            ra.snapshot.is_some() || rb.snapshot.is_some(),
            "round {round}"
        );
        assert_eq!(
            scan_at(&table, None).await,
            model.expected(),
            "round {round}"
        );
        assert_levels_disjoint(&table).await;
    }
}

// ---------------------------------------------------------------------------------------
// Snapshot expiry
// ---------------------------------------------------------------------------------------

/// Writes `commits` commits (compacting as the table options say, plus one full
/// compaction) and returns the expected rows of every snapshot.
async fn history(
    table: &Arc<Table>,
    commits: usize,
    seed: u64,
) -> (Model, BTreeMap<i64, Vec<Row>>) {
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut expected = BTreeMap::new();
    for commit in 0..commits {
        let n = rng.random_range(1..20);
        random_changes(&mut rng, &mut writer, &mut model, n, 30);
        within(writer.commit(BTreeMap::new())).await.unwrap();
        within(writer.wait_for_compaction()).await.unwrap();
        if commit == commits / 2 {
            full_compact(table, "full").await.unwrap();
        }
        let latest = table.latest_snapshot_id().await.unwrap().unwrap();
        for id in expected.len() as i64 + 1..=latest {
            expected.insert(id, model.expected());
        }
    }
    within(writer.close()).await.unwrap();
    (model, expected)
}

/// Data files and manifests present equal exactly those the remaining snapshots use.
async fn assert_only_referenced_files_remain(table: &Table) {
    let mut data: BTreeSet<String> = BTreeSet::new();
    let mut metadata: BTreeSet<String> = BTreeSet::new();
    for s in snapshots(table).await {
        metadata.insert(s.base_manifest_list.clone());
        metadata.insert(s.delta_manifest_list.clone());
        for m in table.snapshot_manifests(&s).await.unwrap() {
            metadata.insert(m.file_name);
        }
        for f in table.live_files(&s).await.unwrap() {
            data.insert(table.data_file_path(&f).unwrap().to_string());
        }
    }
    let mut present_data: BTreeSet<String> = BTreeSet::new();
    for bucket in 0..table.options().bucket {
        present_data.extend(objects_under(table, &format!("bucket-{bucket}")).await);
    }
    assert_eq!(present_data, data, "data files");
    let present_meta: BTreeSet<String> = objects_under(table, "manifest")
        .await
        .into_iter()
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(present_meta, metadata, "manifests and manifest lists");
}

#[tokio::test]
async fn expiry_keeps_exactly_the_retained_snapshots_readable() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("num-sorted-run.compaction-trigger", "3")]).await;
    let (model, expected) = history(&table, 24, 1).await;
    let latest = table.latest_snapshot_id().await.unwrap().unwrap();
    assert!(latest > 24, "compactions add snapshots: {latest}");

    // Young snapshots survive the default `snapshot.time-retained` of 1 h.
    let defaults = ExpireConfig::from_options(&table.options().maintenance);
    let report = expire_snapshots(&table, &defaults).await.unwrap();
    assert!(report.expired.is_empty());
    assert_eq!(table.snapshot_ids().await.unwrap().len() as i64, latest);
    let earliest = table.path_of("snapshot/EARLIEST");
    let hint = table
        .store()
        .get(&earliest)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&hint[..], b"1");

    // Keep the newest 6: beyond `retain_max` snapshots go whatever their age.
    let config = ExpireConfig {
        retain_min: 1,
        retain_max: 6,
        ..defaults.clone()
    };
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(report.expired, (1..=latest - 6).collect::<Vec<_>>());
    assert_eq!(report.earliest, Some(latest - 5));
    assert!(report.data_files_deleted > 0 && report.manifests_deleted > 0);
    assert_eq!(
        table.snapshot_ids().await.unwrap(),
        (latest - 5..=latest).collect::<Vec<_>>()
    );
    let hint = table
        .store()
        .get(&earliest)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&hint), (latest - 5).to_string());
    for id in latest - 5..=latest {
        let s = table.snapshot(id).await.unwrap();
        assert_eq!(
            scan_at(&table, Some(&s)).await,
            expected[&id],
            "time travel to {id}"
        );
    }
    assert!(matches!(
        table.snapshot(1).await,
        Err(Error::SnapshotNotFound { .. })
    ));
    assert_only_referenced_files_remain(&table).await;
    assert_eq!(scan_at(&table, None).await, model.expected());

    // Without a time limit all but the newest `retain_min` go, at most `max_deletes` a run.
    let config = ExpireConfig {
        retain_min: 4,
        retain_max: usize::MAX,
        time_retained: Duration::ZERO,
        max_deletes: 1,
    };
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(
        report.expired,
        vec![latest - 5],
        "max_deletes limits one run"
    );
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(report.expired, vec![latest - 4]);
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert!(report.expired.is_empty());
    assert_eq!(table.snapshot_ids().await.unwrap().len(), 4);
    assert_only_referenced_files_remain(&table).await;
    for id in latest - 3..=latest {
        let s = table.snapshot(id).await.unwrap();
        assert_eq!(scan_at(&table, Some(&s)).await, expected[&id]);
    }
}

#[tokio::test]
async fn expiry_stops_at_the_first_snapshot_younger_than_the_time_retained() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[]).await;
    let (_, expected) = history(&table, 8, 2).await;
    // Backdate snapshots 1..=3 by two hours.
    let old = chrono::Utc::now().timestamp_millis() - 2 * 3600 * 1000;
    for id in 1..=3 {
        let mut s = table.snapshot(id).await.unwrap();
        s.time_millis = old;
        let location = table.path_of(&format!("snapshot/snapshot-{id}"));
        table
            .store()
            .put(&location, s.to_json().into())
            .await
            .unwrap();
    }
    let config = ExpireConfig::from_options(&table.options().maintenance);
    assert_eq!(config.time_retained, Duration::from_secs(3600));
    let config = ExpireConfig {
        retain_min: 1,
        ..config
    };
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(report.expired, vec![1, 2, 3]);
    assert_eq!(table.snapshot_ids().await.unwrap()[0], 4);
    for (id, rows) in expected.range(4..) {
        let s = table.snapshot(*id).await.unwrap();
        assert_eq!(&scan_at(&table, Some(&s)).await, rows);
    }
    assert_only_referenced_files_remain(&table).await;
    // Bad retention is refused.
    let bad = ExpireConfig {
        retain_min: 3,
        retain_max: 2,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    assert!(matches!(
        expire_snapshots(&table, &bad).await,
        Err(Error::Config(_))
    ));
}

/// Expiry running in a loop next to a writer (with background compaction) on a local
/// store: the writer never fails and the final table is complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_is_safe_next_to_a_running_writer() {
    let (_dir, wh) = local_warehouse();
    let table = create(&wh, &[("num-sorted-run.compaction-trigger", "3")]).await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let expirer = {
        let table = table.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let config = ExpireConfig {
                retain_min: 2,
                retain_max: usize::MAX,
                time_retained: Duration::ZERO,
                max_deletes: usize::MAX,
            };
            let mut expired = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                expired += expire_snapshots(&table, &config)
                    .await
                    .unwrap()
                    .expired
                    .len();
                tokio::task::yield_now().await;
            }
            expired
        })
    };
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(13);
    for _ in 0..30 {
        let n = rng.random_range(1..20);
        random_changes(&mut rng, &mut writer, &mut model, n, 30);
        within(writer.commit(BTreeMap::new())).await.unwrap();
    }
    within(writer.close()).await.unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let expired = expirer.await.unwrap();
    assert!(expired > 0, "the expirer never expired anything");
    assert_eq!(scan_at(&table, None).await, model.expected());
    for s in snapshots(&table).await {
        scan_at(&table, Some(&s)).await;
    }
    assert_only_referenced_files_remain(&table).await;
}

// ---------------------------------------------------------------------------------------
// Orphan files
// ---------------------------------------------------------------------------------------

fn set_mtime(path: &std::path::Path, when: SystemTime) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(when).unwrap();
}

fn all_local_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all_local_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[tokio::test]
async fn orphan_cleaning_removes_old_unreferenced_files_only() {
    let (_dir, wh) = local_warehouse();
    let table = create(&wh, &[("num-sorted-run.compaction-trigger", "3")]).await;
    let (model, _) = history(&table, 10, 4).await;
    let config = ExpireConfig {
        retain_min: 1,
        retain_max: 4,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    expire_snapshots(&table, &config).await.unwrap();
    let local = table.local_dir().unwrap().to_path_buf();
    let two_days_ago = SystemTime::now() - Duration::from_secs(2 * 86_400);

    // Leftovers of failed writes.
    let put = |relative: &'static str| {
        let location: Path = table.path_of(relative);
        let store = table.store().clone();
        async move { store.put(&location, "junk".into()).await.unwrap() }
    };
    put("bucket-0/data-orphan-old.parquet").await;
    put("manifest/manifest-orphan-old-0").await;
    put("manifest/manifest-list-orphan-old-0").await;
    put("snapshot/.snapshot-99.0f1e.tmp").await;
    std::fs::write(
        local.join("bucket-1/data-interrupted.parquet#1"),
        b"partial",
    )
    .unwrap();
    // Everything present so far is old, referenced or not.
    let mut files = Vec::new();
    all_local_files(&local, &mut files);
    for f in &files {
        set_mtime(f, two_days_ago);
    }
    // A file a writer is about to commit: unreferenced but fresh.
    put("bucket-1/data-being-committed.parquet").await;

    let expected: BTreeSet<String> = [
        "bucket-0/data-orphan-old.parquet",
        "bucket-1/data-interrupted.parquet#1",
        "manifest/manifest-list-orphan-old-0",
        "manifest/manifest-orphan-old-0",
        "snapshot/.snapshot-99.0f1e.tmp",
    ]
    .into_iter()
    .map(String::from)
    .collect();

    let dry = clean_orphan_files(
        &table,
        &OrphanCleanConfig {
            older_than: Duration::from_secs(86_400),
            dry_run: true,
        },
    )
    .await
    .unwrap();
    let found: BTreeSet<String> = dry.removed.iter().map(|f| f.path.clone()).collect();
    assert_eq!(found, expected);
    assert!(local.join("bucket-0/data-orphan-old.parquet").exists());
    assert!(local.join("bucket-1/data-interrupted.parquet#1").exists());

    let report = clean_orphan_files(&table, &OrphanCleanConfig::default())
        .await
        .unwrap();
    let removed: BTreeSet<String> = report.removed.iter().map(|f| f.path.clone()).collect();
    assert_eq!(removed, expected);
    assert_eq!(report.too_recent.len(), 1);
    assert_eq!(
        report.too_recent[0].path,
        "bucket-1/data-being-committed.parquet"
    );
    assert!(report.referenced > 0);
    for path in &expected {
        assert!(!local.join(path).exists(), "{path} still exists");
    }
    assert!(local.join("bucket-1/data-being-committed.parquet").exists());
    assert!(local.join("schema/schema-0").exists());
    // Every remaining snapshot is complete.
    for s in snapshots(&table).await {
        scan_at(&table, Some(&s)).await;
    }
    assert_eq!(scan_at(&table, None).await, model.expected());
    // A second run finds nothing old.
    let again = clean_orphan_files(&table, &OrphanCleanConfig::default())
        .await
        .unwrap();
    assert!(again.removed.is_empty());
}

#[tokio::test]
async fn orphan_cleaning_refuses_a_table_with_missing_manifests() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[]).await;
    history(&table, 3, 9).await;
    let latest = table.latest_snapshot().await.unwrap().unwrap();
    let list = table.path_of(&format!("manifest/{}", latest.delta_manifest_list));
    table.store().delete(&list).await.unwrap();
    let err = clean_orphan_files(
        &table,
        &OrphanCleanConfig {
            older_than: Duration::ZERO,
            dry_run: false,
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

// ---------------------------------------------------------------------------------------
// Property: random commits, compactions and expiries read like the model
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    /// (key, value or delete, sequence value)
    Commit(Vec<(i32, Option<i64>, i64)>),
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
        1 => Just(Op::Compact),
        1 => Just(Op::FullCompact),
        2 => (1..4usize, 0..5usize).prop_map(|(min, extra)| Op::Expire {
            retain_min: min,
            retain_max: min + extra,
        }),
    ]
}

async fn run_ops(ops: Vec<Op>, with_seq: bool) -> std::result::Result<(), TestCaseError> {
    let wh = Warehouse::in_memory();
    let mut options = vec![("num-sorted-run.compaction-trigger", "3")];
    if with_seq {
        options.push(("sequence.field", "seq"));
    }
    let table = create(&wh, &options).await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut compactor = Compactor::new(table.clone(), "compactor").unwrap();
    let mut model = Model::new(with_seq);
    let mut expected: BTreeMap<i64, Vec<Row>> = BTreeMap::new();
    for op in ops {
        match op {
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
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run_ops(ops, with_seq))?;
    }
}
