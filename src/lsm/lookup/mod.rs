//! Point lookups by primary key: partition → bucket → the files whose key range holds the
//! key → each file's local lookup file (built on first use: the key-values decoded once and
//! laid out for point reads) → a hash probe and one positioned read; the versions found in
//! several files are merged with the table's engine.

mod cache;
mod codec;
mod file;
mod key;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

pub use cache::LocalFileCache;
pub use file::{BuiltFile, LookupFile, LookupFileWriter, Record, key_hash};

use codec::RowCodec;
use key::{KeyLayout, ResolvedKey};

use super::merge::{MergeEngine, SequenceOrder, compare_keys};
use crate::error::{Error, Result};
use crate::table::data_file::{KeyValue, decode_data_file};
use crate::table::datum::{Datum, Row, compare_rows};
use crate::table::manifest::{FileSource, ManifestEntry};
use crate::table::snapshot::{CommitKind, Snapshot};
use crate::table::{Table, binary_row, read_bytes};

/// Settings of a [`PointLookup`].
#[derive(Debug, Clone)]
pub struct LookupOptions {
    /// Where local lookup files are kept (a temporary directory when `None`).
    pub local_cache_dir: Option<PathBuf>,
    /// Upper bound of the local lookup files plus the indexes of the open ones, in bytes.
    pub local_cache_max_bytes: u64,
    /// Open local lookup files (descriptor plus index in memory).
    pub max_open_files: u64,
}

impl Default for LookupOptions {
    fn default() -> Self {
        LookupOptions {
            local_cache_dir: None,
            local_cache_max_bytes: 10 << 30,
            max_open_files: 4096,
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
    pub changed_files: Vec<ManifestEntry>,
    /// The change cannot be applied from `changed_files` alone (an overwrite, or expired
    /// snapshots in between): caches must reload.
    pub reload: bool,
}

/// One live file with its decoded key range.
#[derive(Debug)]
struct FileRange {
    entry: ManifestEntry,
    /// Its location in the warehouse (the file name when it has none lakejoin reads),
    /// which names its local lookup file in the cache.
    cache_key: String,
    min_key: Vec<Datum>,
    max_key: Vec<Datum>,
}

/// The live files of one snapshot, by (partition, bucket).
#[derive(Debug, Default)]
struct LookupState {
    snapshot_id: Option<i64>,
    buckets: HashMap<(Vec<u8>, i32), Vec<FileRange>>,
    /// Some file was written with another number of buckets than the table has now.
    rescaled: bool,
}

/// Point reads of the merged current row of a primary key, pinned to a snapshot until
/// [`PointLookup::refresh`] moves it to the latest one.
pub struct PointLookup {
    table: Arc<Table>,
    engine: MergeEngine,
    order: SequenceOrder,
    state: RwLock<Arc<LookupState>>,
    codec: Arc<RowCodec>,
    layout: KeyLayout,
    /// Trimmed primary-key columns, to order versions.
    key_indices: Vec<usize>,
    lookup_files: LocalFileCache,
    /// Keeps a temporary cache directory alive as long as the lookup.
    _temp_dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for PointLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PointLookup")
            .field("table", self.table.identifier())
            .field("snapshot", &self.snapshot_id())
            .finish()
    }
}

impl PointLookup {
    /// Opens lookups on the latest snapshot of `table`.
    pub async fn open(table: Arc<Table>, options: LookupOptions) -> Result<Self> {
        let engine = MergeEngine::new(table.schema(), table.options())?;
        let order = SequenceOrder::new(table.schema(), table.options())?;
        let (dir, temp_dir) = match &options.local_cache_dir {
            Some(d) => (d.clone(), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("lakejoin-lookup-")
                    .tempdir()
                    .map_err(|e| Error::Io {
                        context: "creating lookup cache directory".into(),
                        source: e,
                    })?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let lookup_files =
            LocalFileCache::new(dir, options.local_cache_max_bytes, options.max_open_files)?;
        let codec = Arc::new(RowCodec::new(table.schema()));
        let layout = KeyLayout::new(&table);
        let key_indices = table.schema().trimmed_key_indices();
        let lookup = PointLookup {
            table,
            engine,
            order,
            state: RwLock::new(Arc::new(LookupState::default())),
            codec,
            layout,
            key_indices,
            lookup_files,
            _temp_dir: temp_dir,
        };
        lookup.refresh().await?;
        Ok(lookup)
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// The snapshot lookups currently read.
    pub fn snapshot_id(&self) -> Option<i64> {
        self.current().snapshot_id
    }

    fn current(&self) -> Arc<LookupState> {
        match self.state.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Moves to the latest snapshot. Returns what changed, or `None` when it did not move.
    pub async fn refresh(&self) -> Result<Option<SnapshotDelta>> {
        let latest = self.table.latest_snapshot().await?;
        let latest_id = latest.as_ref().map(|s| s.id);
        let previous = self.current();
        if latest_id == previous.snapshot_id && latest_id.is_some() {
            return Ok(None);
        }
        let mut buckets: HashMap<(Vec<u8>, i32), Vec<FileRange>> = HashMap::new();
        if let Some(snapshot) = &latest {
            let schema = self.table.schema();
            let key_types = schema.types_of(&schema.trimmed_key_indices());
            // Java and pypaimon skip level 0 of first-row and deletion-vector tables; do
            // the same so every reader sees the same rows.
            let skip_level0 = self.table.options().batch_scan_skips_level0();
            for entry in self.table.live_files(snapshot).await? {
                if skip_level0 && entry.file.level == 0 {
                    continue;
                }
                let min_key = binary_row::deserialize(&entry.file.min_key, &key_types)?;
                let max_key = binary_row::deserialize(&entry.file.max_key, &key_types)?;
                let cache_key = self
                    .table
                    .data_file_path(&entry)
                    .map_or_else(|_| entry.file.file_name.clone(), |p| p.to_string());
                buckets
                    .entry((entry.partition.clone(), entry.bucket))
                    .or_default()
                    .push(FileRange {
                        entry,
                        cache_key,
                        min_key,
                        max_key,
                    });
            }
        }
        let num_buckets = self.table.options().bucket;
        let rescaled = buckets
            .values()
            .flatten()
            .any(|f| f.entry.total_buckets != num_buckets);
        let state = Arc::new(LookupState {
            snapshot_id: latest_id,
            buckets,
            rescaled,
        });
        let delta = self.delta(&previous, &state, latest.as_ref()).await?;
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
    ) -> Result<SnapshotDelta> {
        let known: std::collections::HashSet<&str> = previous
            .buckets
            .values()
            .flatten()
            .map(|f| f.entry.file.file_name.as_str())
            .collect();
        let compaction_reveals_rows = self.table.options().batch_scan_skips_level0();
        let changed_files: Vec<ManifestEntry> = next
            .buckets
            .values()
            .flatten()
            .filter(|f| !known.contains(f.entry.file.file_name.as_str()))
            .filter(|f| {
                compaction_reveals_rows || f.entry.file.file_source != Some(FileSource::Compact)
            })
            .map(|f| f.entry.clone())
            .collect();
        let mut reload = false;
        if let (Some(from), Some(to)) = (previous.snapshot_id, next.snapshot_id) {
            if to < from {
                reload = true;
            }
            for id in from + 1..to {
                match self.table.snapshot(id).await {
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
            reload,
        })
    }

    /// Serialized partitions that have live files in the current snapshot.
    pub fn partitions(&self) -> Vec<Vec<u8>> {
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

    /// [`PointLookup::get`], with the snapshot it read.
    pub async fn get_pinned(&self, key: &[Datum]) -> Result<(Option<Row>, Option<i64>)> {
        let state = self.current();
        let row = self.get_in(&state, key).await?;
        Ok((row, state.snapshot_id))
    }

    /// [`PointLookup::get`] for many keys against one snapshot. The keys are grouped by
    /// the files that may hold them, so each file is looked up once per batch.
    pub async fn get_many<K: AsRef<[Datum]>>(&self, keys: &[K]) -> Result<Vec<Option<Row>>> {
        let state = self.current();
        self.get_batch(&state, keys).await
    }

    /// [`PointLookup::get_many`], with the snapshot it read.
    pub async fn get_many_pinned<K: AsRef<[Datum]>>(
        &self,
        keys: &[K],
    ) -> Result<(Vec<Option<Row>>, Option<i64>)> {
        let state = self.current();
        let rows = self.get_batch(&state, keys).await?;
        Ok((rows, state.snapshot_id))
    }

    async fn get_in(&self, state: &LookupState, key: &[Datum]) -> Result<Option<Row>> {
        let resolved = self.layout.resolve(key)?;
        let mut key_bytes = Vec::with_capacity(64);
        if self
            .codec
            .encode_key(&resolved.trimmed, &mut key_bytes)
            .is_err()
        {
            // Values that do not fit the key's types are in no file.
            return Ok(None);
        }
        let mut versions: Vec<KeyValue> = Vec::new();
        for f in self.candidates(state, &resolved) {
            self.probe(f, &[&key_bytes], |_, kv| versions.push(kv))
                .await?;
        }
        self.merge(versions, resolved.partition)
    }

    async fn get_batch<K: AsRef<[Datum]>>(
        &self,
        state: &LookupState,
        keys: &[K],
    ) -> Result<Vec<Option<Row>>> {
        let mut partitions = Vec::with_capacity(keys.len());
        let mut key_bytes: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
        // The files to probe, in order of first use, with the keys to probe in each.
        let mut groups: Vec<(&FileRange, Vec<usize>)> = Vec::new();
        let mut group_of: HashMap<&str, usize> = HashMap::new();
        for (i, key) in keys.iter().enumerate() {
            let resolved = self.layout.resolve(key.as_ref())?;
            let mut bytes = Vec::with_capacity(64);
            if self.codec.encode_key(&resolved.trimmed, &mut bytes).is_ok() {
                for f in self.candidates(state, &resolved) {
                    let g = *group_of.entry(f.cache_key.as_str()).or_insert_with(|| {
                        groups.push((f, Vec::new()));
                        groups.len() - 1
                    });
                    if let Some((_, members)) = groups.get_mut(g) {
                        members.push(i);
                    }
                }
            }
            key_bytes.push(bytes);
            partitions.push(resolved.partition);
        }
        let mut versions: Vec<Vec<KeyValue>> = (0..keys.len()).map(|_| Vec::new()).collect();
        for (f, members) in &groups {
            let probes: Vec<&[u8]> = members
                .iter()
                .map(|&i| key_bytes.get(i).map_or(&[][..], |b| b.as_slice()))
                .collect();
            self.probe(f, &probes, |j, kv| {
                if let Some(v) = members.get(j).and_then(|&i| versions.get_mut(i)) {
                    v.push(kv);
                }
            })
            .await?;
        }
        versions
            .into_iter()
            .zip(partitions)
            .map(|(v, partition)| self.merge(v, partition))
            .collect()
    }

    /// The files that may hold the key: its partition, its bucket (every bucket when it
    /// cannot be computed or buckets were rescaled), and a key range holding it.
    fn candidates<'s>(&self, state: &'s LookupState, key: &ResolvedKey) -> Vec<&'s FileRange> {
        let in_range = |f: &&FileRange| {
            compare_rows(&key.trimmed, &f.min_key).is_ge()
                && compare_rows(&key.trimmed, &f.max_key).is_le()
        };
        if let Some(t) = key.bucket
            && !state.rescaled
        {
            return state
                .buckets
                .get(&(key.partition_bytes.clone(), t))
                .map(|files| files.iter().filter(in_range).collect())
                .unwrap_or_default();
        }
        let num_buckets = self.layout.num_buckets();
        let mut out = Vec::new();
        for ((part, b), files) in &state.buckets {
            if part != &key.partition_bytes {
                continue;
            }
            if let Some(t) = key.bucket
                && *b != t
                && files.iter().all(|f| f.entry.total_buckets == num_buckets)
            {
                continue;
            }
            out.extend(files.iter().filter(in_range));
        }
        out
    }

    /// The current row from the versions of one key found in the files.
    fn merge(&self, mut versions: Vec<KeyValue>, partition: Vec<Datum>) -> Result<Option<Row>> {
        if versions.is_empty() {
            return Ok(None);
        }
        let schema = self.table.schema();
        let key_indices = &self.key_indices;
        versions.sort_by(|a, b| {
            compare_keys(&a.row, &b.row, key_indices).then_with(|| self.order.compare(a, b))
        });
        let Some(merged) = self.engine.merge(&versions)? else {
            return Ok(None);
        };
        if merged.kind.is_retract() {
            return Ok(None);
        }
        let mut row = merged.row;
        for (&i, v) in schema.partition_indices().iter().zip(partition) {
            if let Some(slot) = row.get_mut(i) {
                *slot = v;
            }
        }
        Ok(Some(row))
    }

    /// Hands `found` the version in the file `f` of each key (canonical key bytes), with
    /// the key's position in `keys`. A local lookup file that does not open or read
    /// (deleted, truncated, corrupt) is built again once; a second failure is an error.
    async fn probe(
        &self,
        f: &FileRange,
        keys: &[&[u8]],
        mut found: impl FnMut(usize, KeyValue),
    ) -> Result<()> {
        let mut rebuilt = false;
        loop {
            let result = self.lookup_file(f).await?.and_then(|file| {
                let mut hits = Vec::new();
                for (i, key) in keys.iter().enumerate() {
                    file.get(key, |record| {
                        hits.push((i, self.codec.decode(record)?));
                        Ok(())
                    })?;
                }
                Ok(hits)
            });
            match result {
                Ok(hits) => {
                    for (i, kv) in hits {
                        found(i, kv);
                    }
                    return Ok(());
                }
                Err(e) if !rebuilt => {
                    tracing::warn!(
                        data_file = %f.cache_key,
                        error = %e,
                        "local lookup file unusable; building it again"
                    );
                    self.lookup_files.invalidate(&f.cache_key).await;
                    rebuilt = true;
                }
                Err(e) => {
                    return Err(Error::format(format!(
                        "local lookup file of {}: {e}",
                        f.cache_key
                    )));
                }
            }
        }
    }

    /// The open local lookup file of a data file, built once: the data file decoded in
    /// the current schema and its key-values written for point reads. The outer error is
    /// the build's; the inner one, a local file that does not open.
    async fn lookup_file(&self, f: &FileRange) -> Result<Result<Arc<LookupFile>>> {
        let table = &self.table;
        let entry = &f.entry;
        let codec = self.codec.clone();
        self.lookup_files
            .get_or_build(&f.cache_key, |target| async move {
                let location = table.data_file_path(entry)?;
                let bytes = read_bytes(&**table.store(), &location).await?;
                let file_schema = table.schema_by_id(entry.file.schema_id).await?;
                let table_schema = table.schema().clone();
                tokio::task::spawn_blocking(move || {
                    let rows = decode_data_file(bytes, &file_schema, &table_schema)?;
                    codec.write_file(&target, &rows)
                })
                .await
                .map_err(|e| Error::format(format!("lookup file task failed: {e}")))?
            })
            .await
    }
}

#[cfg(test)]
mod tests;
