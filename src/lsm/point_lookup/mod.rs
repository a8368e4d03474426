//! Point lookups by primary key: partition → bucket → the files whose key range holds the
//! key → each file's local lookup file (built on first use: the key-values decoded once and
//! laid out for point reads) → a hash probe and one positioned read; the versions found in
//! several files are merged with the table's engine.

mod cache;
mod codec;
mod file;
mod key;
mod pages;
mod read;
mod scratch_dir;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

pub(crate) use cache::LocalFileCache;

use codec::RowCodec;
use key::KeyLayout;
use scratch_dir::ScratchDir;

use super::merge::{MergeEngine, SequenceOrder};
use crate::error::Result;
use crate::table::data_file::KeyValue;
use crate::table::datum::{Datum, Row};
use crate::table::deletion_vector::{DeletionFile, DeletionFiles};
use crate::table::manifest::{FileSource, ManifestEntry};
use crate::table::snapshot::{CommitKind, Snapshot};
use crate::table::{Table, binary_row};

/// Settings of a [`PointLookup`].
#[derive(Debug, Clone)]
pub struct LookupOptions {
    /// Where local lookup files are kept (a temporary directory when `None`).
    pub(crate) local_cache_dir: Option<PathBuf>,
    /// Upper bound of the local lookup files plus the indexes of the open ones, in bytes.
    pub(crate) local_cache_max_bytes: u64,
    /// Open local lookup files (descriptor plus index in memory).
    pub(crate) max_open_files: u64,
    /// Bytes of the local lookup files' pages held in memory; `None`: the table's
    /// `lookup.cache-max-memory-size` (256 mb unless set), as in Paimon.
    pub(crate) page_cache_max_bytes: Option<u64>,
}

impl Default for LookupOptions {
    fn default() -> Self {
        LookupOptions {
            local_cache_dir: None,
            local_cache_max_bytes: 10 << 30,
            max_open_files: 4096,
            page_cache_max_bytes: None,
        }
    }
}

/// What a [`PointLookup::refresh`] moved over.
#[derive(Debug, Clone)]
pub struct SnapshotDelta {
    pub from: Option<i64>,
    pub to: Option<i64>,
    /// Commit time of the snapshot moved to.
    pub commit_time_millis: Option<i64>,
    /// Newly visible files that may hold changed rows (appends, not compaction rewrites).
    pub(crate) changed_files: Vec<ManifestEntry>,
    /// The deletion vectors of the snapshot moved to, which apply to `changed_files`.
    pub(crate) deletions: DeletionFiles,
    /// The change cannot be applied from `changed_files` alone (an overwrite, expired
    /// snapshots in between, or a deletion vector that now removes rows of a file read
    /// before): caches must reload.
    pub(crate) reload: bool,
}

/// One live file with its decoded key range.
#[derive(Debug)]
struct FileRange {
    entry: ManifestEntry,
    /// Its deletion vector in this snapshot.
    deletion: Option<DeletionFile>,
    /// Its location in the warehouse (the file name when it has none lakejoin reads)
    /// and its deletion vector's, which name its local lookup file in the cache.
    cache_key: String,
    min_key: Vec<Datum>,
    max_key: Vec<Datum>,
}

/// What reading a table takes that depends on its schema: the table handle at that
/// schema, its merge engine and version order, and the row codec of the local lookup
/// files. Replaced whole when a snapshot names a newer schema (columns added or widened),
/// so lookups read every file in the newest schema, never a wider value into a narrower
/// type.
struct SchemaView {
    table: Arc<Table>,
    engine: MergeEngine,
    order: SequenceOrder,
    codec: Arc<RowCodec>,
}

impl SchemaView {
    fn new(table: Arc<Table>) -> Result<Self> {
        Ok(SchemaView {
            engine: MergeEngine::new(table.schema(), table.options())?,
            order: SequenceOrder::new(table.schema(), table.options())?,
            codec: Arc::new(RowCodec::new(table.schema())),
            table,
        })
    }
}

/// Files by (serialized partition, bucket). hashbrown's, with foldhash: a lookup finds
/// its bucket by a borrowed [`BucketOf`] (no copy of the partition bytes per key), and
/// hashes it without SipHash.
type BucketFiles = hashbrown::HashMap<(Vec<u8>, i32), Vec<FileRange>, foldhash::fast::RandomState>;

/// A (partition, bucket) key of [`BucketFiles`], borrowed. Hashes as the owned tuple does
/// (a `Vec<u8>` hashes as its slice).
#[derive(Hash)]
struct BucketOf<'a>(&'a [u8], i32);

impl hashbrown::Equivalent<(Vec<u8>, i32)> for BucketOf<'_> {
    fn equivalent(&self, key: &(Vec<u8>, i32)) -> bool {
        self.0 == key.0.as_slice() && self.1 == key.1
    }
}

/// The live files of one snapshot, by (partition, bucket), and the schema they are read in.
struct LookupState {
    view: Arc<SchemaView>,
    snapshot_id: Option<i64>,
    buckets: BucketFiles,
    /// Some file was written with another number of buckets than the table has now.
    rescaled: bool,
}

/// Point reads of the merged current row of a primary key, pinned to a snapshot until
/// [`PointLookup::refresh`] moves it to the latest one.
pub struct PointLookup {
    state: RwLock<Arc<LookupState>>,
    /// The key's place in partitions and buckets: fixed, since key and partition columns
    /// never change type.
    layout: KeyLayout,
    /// Trimmed primary-key columns, to order versions.
    key_indices: Vec<usize>,
    lookup_files: LocalFileCache,
    /// Keeps a temporary cache directory alive as long as the lookup.
    _temp_dir: Option<ScratchDir>,
}

impl std::fmt::Debug for PointLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PointLookup")
            .field("table", self.current().view.table.identifier())
            .field("snapshot", &self.snapshot_id())
            .finish()
    }
}

impl PointLookup {
    /// Opens lookups on the latest snapshot of `table`.
    pub async fn open(table: Arc<Table>, options: LookupOptions) -> Result<Self> {
        let (dir, temp_dir) = match &options.local_cache_dir {
            Some(d) => (d.clone(), None),
            None => {
                let t = ScratchDir::create()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let lookup_files = LocalFileCache::new(
            dir,
            options.local_cache_max_bytes,
            options.max_open_files,
            options
                .page_cache_max_bytes
                .unwrap_or(table.options().lookup_cache_max_memory_size),
        )?;
        let layout = KeyLayout::new(&table);
        let key_indices = table.schema().trimmed_key_indices();
        let lookup = PointLookup {
            state: RwLock::new(Arc::new(LookupState {
                view: Arc::new(SchemaView::new(table)?),
                snapshot_id: None,
                buckets: BucketFiles::default(),
                rescaled: false,
            })),
            layout,
            key_indices,
            lookup_files,
            _temp_dir: temp_dir,
        };
        lookup.refresh().await?;
        Ok(lookup)
    }

    /// The table at the schema lookups read in (the newest one a snapshot they moved to
    /// names).
    pub(crate) fn table(&self) -> Arc<Table> {
        self.current().view.table.clone()
    }

    /// The snapshot lookups currently read.
    pub(crate) fn snapshot_id(&self) -> Option<i64> {
        self.current().snapshot_id
    }

    fn current(&self) -> Arc<LookupState> {
        match self.state.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Moves to the latest snapshot. Returns what changed, or `None` when it did not move.
    /// A snapshot of a newer schema than the one read so far (another writer added or
    /// widened columns) moves lookups to that schema: rows are then read in it, and the
    /// delta asks caches to reload (their rows are in the old one).
    pub async fn refresh(&self) -> Result<Option<SnapshotDelta>> {
        let previous = self.current();
        let latest = previous.view.table.latest_snapshot().await?;
        let latest_id = latest.as_ref().map(|s| s.id);
        if latest_id == previous.snapshot_id && latest_id.is_some() {
            return Ok(None);
        }
        let view = match &latest {
            Some(s) if s.schema_id > previous.view.table.schema().id => {
                let table = previous.view.table.at_newest_schema().await?;
                tracing::info!(table = %table.identifier(), schema = table.schema().id,
                    "lookups read the table in its new schema");
                Arc::new(SchemaView::new(Arc::new(table))?)
            }
            _ => previous.view.clone(),
        };
        let table = view.table.clone();
        let mut buckets = BucketFiles::default();
        let mut deletions = DeletionFiles::default();
        if let Some(snapshot) = &latest {
            deletions = table.deletion_files(snapshot).await?;
            let schema = table.schema();
            let key_types = schema.types_of(&schema.trimmed_key_indices());
            // Java and pypaimon skip level 0 of first-row and deletion-vector tables; do
            // the same so every reader sees the same rows.
            let skip_level0 = table.options().batch_scan_skips_level0();
            for entry in table.live_files(snapshot).await? {
                if skip_level0 && entry.file.level == 0 {
                    continue;
                }
                let min_key = binary_row::deserialize(&entry.file.min_key, &key_types)?;
                let max_key = binary_row::deserialize(&entry.file.max_key, &key_types)?;
                let deletion = deletions.get(&entry.file.file_name).cloned();
                // The schema read in is part of the name: a local file holds rows of it.
                let mut cache_key = table.data_file_path(&entry).map_or_else(
                    |_| entry.file.file_name.clone(),
                    |p| format!("{p}@schema-{}", schema.id),
                );
                if let Some(d) = &deletion {
                    cache_key = format!("{cache_key}#{}", d.identity());
                }
                buckets
                    .entry((entry.partition.clone(), entry.bucket))
                    .or_default()
                    .push(FileRange {
                        entry,
                        deletion,
                        cache_key,
                        min_key,
                        max_key,
                    });
            }
        }
        let num_buckets = table.options().bucket;
        let rescaled = buckets
            .values()
            .flatten()
            .any(|f| f.entry.total_buckets != num_buckets);
        let schema_changed = !Arc::ptr_eq(&view, &previous.view);
        let state = Arc::new(LookupState {
            view,
            snapshot_id: latest_id,
            buckets,
            rescaled,
        });
        let mut delta = self
            .delta(&previous, &state, latest.as_ref(), deletions)
            .await?;
        delta.reload |= schema_changed;
        match self.state.write() {
            Ok(mut s) => *s = state,
            Err(poisoned) => *poisoned.into_inner() = state,
        }
        Ok(Some(delta))
    }

    /// The files `next` sees that `previous` did not and that may hold changed rows.
    /// Compaction output only rewrites rows already visible, except where level 0 is
    /// invisible (first-row tables): there compaction is what makes rows visible.
    /// Incremental application is refused (`reload`) when an overwrite happened in
    /// between or the snapshots in between are gone, because removed rows leave no trace
    /// in added files.
    async fn delta(
        &self,
        previous: &LookupState,
        next: &LookupState,
        latest: Option<&Snapshot>,
        deletions: DeletionFiles,
    ) -> Result<SnapshotDelta> {
        let known: HashMap<&str, Option<&DeletionFile>> = previous
            .buckets
            .values()
            .flatten()
            .map(|f| (f.entry.file.file_name.as_str(), f.deletion.as_ref()))
            .collect();
        let table = &next.view.table;
        let compaction_reveals_rows = table.options().batch_scan_skips_level0();
        let changed_files: Vec<ManifestEntry> = next
            .buckets
            .values()
            .flatten()
            .filter(|f| !known.contains_key(f.entry.file.file_name.as_str()))
            .filter(|f| {
                compaction_reveals_rows || f.entry.file.file_source != Some(FileSource::Compact)
            })
            .map(|f| f.entry.clone())
            .collect();
        // A vector that newly marks rows of a file read before may be a key's only trace
        // of its deletion (Java drops a deletion merged into the last level); which keys
        // those rows hold would take reading the file again, so reload instead.
        let mut reload = next.buckets.values().flatten().any(|f| {
            known
                .get(f.entry.file.file_name.as_str())
                .is_some_and(|before| *before != f.deletion.as_ref())
        });
        if let (Some(from), Some(to)) = (previous.snapshot_id, next.snapshot_id) {
            if to < from {
                reload = true;
            }
            for id in from + 1..to {
                match table.snapshot(id).await {
                    Ok(s) if s.commit_kind != CommitKind::Overwrite => {}
                    _ => {
                        reload = true;
                        break;
                    }
                }
            }
        }
        if latest.is_some_and(|s| s.commit_kind == CommitKind::Overwrite)
            && previous.snapshot_id.is_some()
        {
            reload = true;
        }
        Ok(SnapshotDelta {
            from: previous.snapshot_id,
            to: next.snapshot_id,
            commit_time_millis: latest.map(|s| s.time_millis),
            changed_files,
            deletions,
            reload,
        })
    }

    /// Serialized partitions that have live files in the current snapshot.
    pub(crate) fn partitions(&self) -> Vec<Vec<u8>> {
        let state = self.current();
        let mut partitions: Vec<Vec<u8>> = state.buckets.keys().map(|(p, _)| p.clone()).collect();
        partitions.sort();
        partitions.dedup();
        partitions
    }

    /// The merged current row of the key (primary-key values in `primary_keys` order),
    /// or `None` when absent or deleted.
    pub async fn get(&self, key: &[Datum]) -> Result<Option<Row>> {
        let state = self.current();
        self.get_in(&state, key).await
    }

    /// [`PointLookup::get`], with the snapshot it read and the table at the schema the
    /// row is in.
    pub(crate) async fn get_pinned(
        &self,
        key: &[Datum],
    ) -> Result<(Option<Row>, Option<i64>, Arc<Table>)> {
        let state = self.current();
        let row = self.get_in(&state, key).await?;
        Ok((row, state.snapshot_id, state.view.table.clone()))
    }

    /// [`PointLookup::get`] for many keys against one snapshot. The keys are grouped by
    /// the files that may hold them, so each file is looked up once per batch.
    pub async fn get_many<K: AsRef<[Datum]>>(&self, keys: &[K]) -> Result<Vec<Option<Row>>> {
        let state = self.current();
        self.get_batch(&state, keys).await
    }

    /// What the versions of each key (primary-key values) in the files reduce to, with
    /// its sequence number and kind: a retraction is returned, not dropped (a later
    /// merge starts from it). `None` when the key is in no file.
    pub(crate) async fn reduced_many<K: AsRef<[Datum]>>(
        &self,
        keys: &[K],
    ) -> Result<Vec<Option<KeyValue>>> {
        let state = self.current();
        self.reduced_batch(&state, keys).await
    }

    /// [`PointLookup::get_many`], with the snapshot it read and the table at the schema
    /// the rows are in.
    pub(crate) async fn get_many_pinned<K: AsRef<[Datum]>>(
        &self,
        keys: &[K],
    ) -> Result<(Vec<Option<Row>>, Option<i64>, Arc<Table>)> {
        let state = self.current();
        let rows = self.get_batch(&state, keys).await?;
        Ok((rows, state.snapshot_id, state.view.table.clone()))
    }
}

#[cfg(test)]
mod tests;
