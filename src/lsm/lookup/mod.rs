//! Point lookups by primary key: partition → bucket → the files whose key range holds the
//! key → row-group statistics and bloom filters → the pages that may hold it → binary
//! search; the versions found in several files are merged with the table's engine.

mod cache;
mod file;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use moka::sync::Cache;

pub use cache::LocalFileCache;
pub use file::FileKeyReader;

use super::merge::{MergeEngine, SequenceOrder, compare_keys};
use crate::error::{Error, Result};
use crate::table::data_file::{DataFileWriteOptions, KeyValue, decode_data_file, encode_data_file};
use crate::table::datum::{Datum, Row, compare_rows};
use crate::table::manifest::{FileSource, ManifestEntry};
use crate::table::snapshot::{CommitKind, Snapshot};
use crate::table::{Table, binary_row, bucket, read_bytes};

/// Settings of a [`PointLookup`].
#[derive(Debug, Clone)]
pub struct LookupOptions {
    /// Where local lookup files are kept (a temporary directory when `None`).
    pub local_cache_dir: Option<PathBuf>,
    /// Upper bound of the local copies, in bytes.
    pub local_cache_max_bytes: u64,
    /// Open data files (descriptor plus decoded footer, page index and bloom filters).
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
    min_key: Vec<Datum>,
    max_key: Vec<Datum>,
}

/// The live files of one snapshot, by (partition, bucket).
#[derive(Debug, Default)]
struct LookupState {
    snapshot_id: Option<i64>,
    buckets: HashMap<(Vec<u8>, i32), Vec<FileRange>>,
}

/// Point reads of the merged current row of a primary key, pinned to a snapshot until
/// [`PointLookup::refresh`] moves it to the latest one.
pub struct PointLookup {
    table: Arc<Table>,
    engine: MergeEngine,
    order: SequenceOrder,
    state: RwLock<Arc<LookupState>>,
    readers: Cache<String, Arc<FileKeyReader>>,
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
        let lookup_files = LocalFileCache::new(dir, options.local_cache_max_bytes)?;
        let lookup = PointLookup {
            table,
            engine,
            order,
            state: RwLock::new(Arc::new(LookupState::default())),
            readers: Cache::new(options.max_open_files.max(1)),
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
                buckets
                    .entry((entry.partition.clone(), entry.bucket))
                    .or_default()
                    .push(FileRange {
                        entry,
                        min_key,
                        max_key,
                    });
            }
        }
        let state = Arc::new(LookupState {
            snapshot_id: latest_id,
            buckets,
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

    /// [`PointLookup::get`] for many keys against one snapshot.
    pub async fn get_many(&self, keys: &[Vec<Datum>]) -> Result<Vec<Option<Row>>> {
        let state = self.current();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            out.push(self.get_in(&state, key).await?);
        }
        Ok(out)
    }

    async fn get_in(&self, state: &LookupState, key: &[Datum]) -> Result<Option<Row>> {
        let schema = self.table.schema();
        if key.len() != schema.primary_keys.len() {
            return Err(Error::Data(format!(
                "a key of {} needs {} values ({}), got {}",
                self.table.identifier(),
                schema.primary_keys.len(),
                schema.primary_keys.join(", "),
                key.len()
            )));
        }
        let value_of = |column: &str| {
            schema
                .primary_keys
                .iter()
                .position(|k| k == column)
                .map(|p| key[p].clone())
        };
        let partition: Vec<Datum> = schema
            .partition_keys
            .iter()
            .map(|k| value_of(k).unwrap_or(Datum::Null))
            .collect();
        let trimmed: Vec<Datum> = schema
            .trimmed_primary_keys()
            .iter()
            .map(|k| value_of(k).unwrap_or(Datum::Null))
            .collect();
        let partition_bytes =
            binary_row::serialize(&partition, &schema.types_of(&schema.partition_indices()))
                .map_err(|e| Error::Data(format!("key of {}: {e}", self.table.identifier())))?;
        let num_buckets = self.table.options().bucket;
        let bucket_columns = schema.bucket_key_indices();
        let bucket_values: Option<Vec<Datum>> = bucket_columns
            .iter()
            .map(|&i| value_of(&schema.fields[i].name))
            .collect();
        let target = match bucket_values {
            Some(values) if num_buckets > 0 => Some(
                bucket::bucket_of(&values, &schema.types_of(&bucket_columns), num_buckets)
                    .map_err(|e| Error::Data(format!("key of {}: {e}", self.table.identifier())))?,
            ),
            // Dynamic buckets or a bucket key outside the primary key: look everywhere.
            _ => None,
        };
        let mut versions: Vec<KeyValue> = Vec::new();
        for ((part, b), files) in &state.buckets {
            if part != &partition_bytes {
                continue;
            }
            if let Some(t) = target
                && *b != t
                && files.iter().all(|f| f.entry.total_buckets == num_buckets)
            {
                continue;
            }
            for f in files {
                if compare_rows(&trimmed, &f.min_key).is_lt()
                    || compare_rows(&trimmed, &f.max_key).is_gt()
                {
                    continue;
                }
                let reader = self.reader(&f.entry).await?;
                if let Some(kv) = reader.get(&trimmed)? {
                    versions.push(kv);
                }
            }
        }
        if versions.is_empty() {
            return Ok(None);
        }
        let key_indices = schema.trimmed_key_indices();
        versions.sort_by(|a, b| {
            compare_keys(&a.row, &b.row, &key_indices).then_with(|| self.order.compare(a, b))
        });
        let Some(merged) = self.engine.merge(&versions)? else {
            return Ok(None);
        };
        if merged.kind.is_retract() {
            return Ok(None);
        }
        let mut row = merged.row;
        for (&i, v) in schema.partition_indices().iter().zip(partition) {
            row[i] = v;
        }
        Ok(Some(row))
    }

    /// The open reader of a data file's local lookup file, building that file once: the
    /// data file re-encoded in the current schema without compression or dictionaries,
    /// because setting up a zstd page costs more than the whole point read.
    async fn reader(&self, entry: &ManifestEntry) -> Result<Arc<FileKeyReader>> {
        let location = self.table.data_file_path(entry)?;
        let key = location.to_string();
        if let Some(r) = self.readers.get(&key) {
            return Ok(r);
        }
        let table = self.table.clone();
        let path = self
            .lookup_files
            .get_or_build(&key, async {
                let bytes = read_bytes(&**table.store(), &location).await?;
                let file_schema = table.schema_by_id(entry.file.schema_id).await?;
                let table_schema = table.schema().clone();
                tokio::task::spawn_blocking(move || {
                    let rows = decode_data_file(bytes, &file_schema, &table_schema)?;
                    encode_data_file(&table_schema, &rows, DataFileWriteOptions::lookup())
                })
                .await
                .map_err(|e| Error::format(format!("lookup file task failed: {e}")))?
            })
            .await?;
        let file = std::fs::File::open(path.as_ref()).map_err(|e| Error::Io {
            context: format!("opening lookup file {}", path.display()),
            source: e,
        })?;
        let schema = self.table.schema();
        let reader = Arc::new(
            FileKeyReader::open(file, schema, schema)
                .map_err(|e| Error::format(format!("lookup file of {location}: {e}")))?,
        );
        self.readers.insert(key, reader.clone());
        Ok(reader)
    }
}
