//! Hermetic tests of compaction, snapshot expiry and orphan-file cleaning on in-memory and
//! local stores.
//!
//! Its tests are grouped by what they exercise: `compaction` (writers
//! compacting automatically, COMPACT commit conflicts), `expiry` (snapshot expiry),
//! `orphans` (orphan-file cleaning) and `property` (random commits, compactions and
//! expiries against a model). This file holds what they share: the test table and its
//! rows, a deduplicate model, a random history, scans, and the checks of levels and of
//! the files that remain.

mod compaction;
mod expiry;
mod orphans;
mod property;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use lakejoin::lsm::compact::full_compact;
use lakejoin::lsm::levels::Levels;
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::binary_row;
use lakejoin::table::datum::{Datum, Row, compare_rows};
use lakejoin::table::manifest::ManifestEntry;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::snapshot::Snapshot;
use lakejoin::table::types::DataType;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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
