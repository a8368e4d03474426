//! Lookup joins' view of the tables. One [`TableLookups`] per joined table owns its point
//! lookups and moves them from snapshot to snapshot; one [`LookupTable`] per join keeps
//! that join's cache (`partial`, `full` or `none`) in step with each move, applying only
//! the rows of the files that changed.

mod changes;
pub(crate) mod full;
mod join_columns;
mod partial;
mod partition;
mod projected;
mod table_lookups;

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use tokio::sync::watch;

pub(crate) use changes::{ChangedKeys, changed_keys};
pub(crate) use full::FullCache;
use join_columns::{ColumnsInSchema, JoinColumns};
pub(crate) use partial::PartialCache;
pub use partial::PartialOptions;
pub use partition::PartitionChoice;
pub(crate) use partition::newest_partition;
pub use projected::ProjectedRow;
pub(crate) use projected::RowFields;
pub use table_lookups::TableLookups;

use crate::error::{Error, Result};
use crate::lsm::merge::SequenceOrder;
use crate::lsm::point_lookup::{PointLookup, SnapshotDelta};
use crate::lsm::reader::{ScanFilter, scan_in_chunks};
use crate::observe::LookupMetrics;
use crate::table::Table;
use crate::table::binary_row;
use crate::table::datum::{Datum, Row};
use crate::table::options::MergeEngineKind;
use crate::table::types::DataType;

thread_local! {
    /// Scratch space for encoding `partial` cache keys on the hit path.
    static KEY_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How a join caches.
#[derive(Debug, Clone)]
pub enum Strategy {
    /// The whole table (or the selected partition) in memory.
    Full,
    Partial(PartialOptions),
    None,
}

/// What one join looks up.
#[derive(Debug, Clone)]
pub struct LookupSpec {
    pub strategy: Strategy,
    /// Table columns the join key gives values for, in join-key order.
    pub key_columns: Vec<usize>,
    /// Table columns returned, in output order.
    pub projection: Vec<usize>,
    pub partition: Option<PartitionChoice>,
}

/// Where each primary-key value of a lookup comes from.
#[derive(Debug, Clone, Copy)]
enum KeyPart {
    /// Position in the join key.
    Join(usize),
    /// Position in the selected partition's values.
    Partition(usize),
}

enum Cache {
    /// Swapped whole on a (re)load, so lookups never see a half-loaded table.
    Full(RwLock<Arc<FullCache>>),
    Partial(PartialCache),
    None,
}

/// One join's lookups: primary-key values in, projected rows out.
pub struct LookupTable {
    point: Arc<PointLookup>,
    /// The returned columns and the join key's (a secondary index's columns when not the
    /// primary key), found again by field id in each schema the table is read in.
    columns: JoinColumns,
    /// Where each primary-key value comes from; empty for secondary-index joins.
    key_parts: Vec<KeyPart>,
    /// `key_parts` is the join key itself, in order (no partition values to add).
    join_key_is_primary_key: bool,
    /// For `deduplicate` tables ordered by arrival, the version order: a `full` cache then
    /// applies changes from the new files without reading the table.
    deduplicate: Option<SequenceOrder>,
    key_types: Vec<DataType>,
    partition_choice: Option<PartitionChoice>,
    /// The selected partition's values (`None` while `max_pt()` finds no partition).
    partition: RwLock<Option<Arc<Row>>>,
    cache: Cache,
    metrics: Arc<LookupMetrics>,
    ready: watch::Sender<bool>,
}

impl std::fmt::Debug for LookupTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupTable")
            .field("table", self.point.table().identifier())
            .field("columns", &self.columns)
            .finish()
    }
}

impl LookupTable {
    /// A join on `point`'s table. Its key columns plus the selected partition's columns
    /// must be the primary key.
    pub fn new(point: Arc<PointLookup>, spec: LookupSpec) -> Result<Self> {
        let table = point.table().clone();
        let schema = table.schema();
        let partition_indices = schema.partition_indices();
        let mut key_parts = Vec::with_capacity(schema.primary_keys.len());
        for name in &schema.primary_keys {
            let Some(column) = schema.field_index(name) else {
                return Err(Error::format(format!(
                    "primary key `{name}` is not a column"
                )));
            };
            let from_join = spec.key_columns.iter().position(|&c| c == column);
            let from_partition = partition_indices.iter().position(|&c| c == column);
            match (from_join, from_partition, &spec.partition) {
                (Some(i), _, _) => key_parts.push(KeyPart::Join(i)),
                (None, Some(i), Some(_)) => key_parts.push(KeyPart::Partition(i)),
                _ => break,
            }
        }
        let by_primary_key = key_parts.len() == schema.primary_keys.len()
            && spec.key_columns.len()
                == key_parts
                    .iter()
                    .filter(|p| matches!(p, KeyPart::Join(_)))
                    .count();
        if !by_primary_key && !matches!(spec.strategy, Strategy::Full) {
            return Err(Error::Config(format!(
                "a join on {} by columns other than its primary key needs cache = \"full\"",
                table.identifier()
            )));
        }
        let key_indices = schema.primary_key_indices();
        let partition = match &spec.partition {
            Some(PartitionChoice::Fixed(values)) => Some(Arc::new(values.clone())),
            _ => None,
        };
        let (cache, ready) = match &spec.strategy {
            Strategy::Full => {
                let secondary = if by_primary_key {
                    Vec::new()
                } else {
                    vec![spec.key_columns.clone()]
                };
                let full = FullCache::returning(schema.clone(), secondary, &spec.projection)?;
                // Not ready until the first load.
                (Cache::Full(RwLock::new(Arc::new(full))), false)
            }
            Strategy::Partial(options) => (Cache::Partial(PartialCache::new(options)), true),
            Strategy::None => (Cache::None, true),
        };
        let join_key_is_primary_key = by_primary_key
            && key_parts
                .iter()
                .enumerate()
                .all(|(i, p)| matches!(p, KeyPart::Join(j) if *j == i));
        let deduplicate = (table.options().merge_engine == MergeEngineKind::Deduplicate
            && table.options().sequence_fields.is_empty())
        .then(|| SequenceOrder::new(schema, table.options()))
        .transpose()?;
        let columns = JoinColumns::new(
            &table.identifier().to_string(),
            schema,
            &spec.key_columns,
            &spec.projection,
        )?;
        let lookup = LookupTable {
            join_key_is_primary_key,
            deduplicate,
            key_types: schema.types_of(&key_indices),
            point,
            columns,
            key_parts: if by_primary_key {
                key_parts
            } else {
                Vec::new()
            },
            partition_choice: spec.partition,
            partition: RwLock::new(partition),
            cache,
            metrics: Arc::new(LookupMetrics::default()),
            ready: watch::Sender::new(ready),
        };
        lookup.select_newest_partition()?;
        Ok(lookup)
    }

    /// Rows (misses included for `partial`; 0 for `none`) the cache holds (for `partial`,
    /// as of moka's last housekeeping). Metrics and benchmarks.
    pub fn cached_rows(&self) -> u64 {
        match &self.cache {
            Cache::Full(slot) => self.full(slot).len() as u64,
            Cache::Partial(cache) => cache.entry_count(),
            Cache::None => 0,
        }
    }

    /// Rows, heap bytes and the rows' total BinaryRow bytes (of the columns it keeps) of a
    /// `full` cache.
    pub fn full_cache_size(&self) -> Option<(usize, usize, usize)> {
        match &self.cache {
            Cache::Full(slot) => {
                let full = self.full(slot);
                Some((full.len(), full.memory_bytes(), full.binary_row_bytes()))
            }
            _ => None,
        }
    }

    /// Whether the join key is the primary key (else: a `full` cache's secondary index,
    /// which may match several rows).
    /// Whether the table dropped a column this join reads: every lookup then fails.
    pub(crate) fn columns_dropped(&self) -> bool {
        self.columns.check().is_err()
    }

    pub(crate) fn by_primary_key(&self) -> bool {
        !self.key_parts.is_empty()
    }

    pub(crate) fn metrics(&self) -> &Arc<LookupMetrics> {
        &self.metrics
    }

    /// Resolves once the join can serve lookups (a `full` cache has loaded).
    pub(crate) async fn wait_ready(&self) {
        let mut ready = self.ready.subscribe();
        // The sender lives as long as `self`, so this cannot fail while we wait.
        let _ = ready.wait_for(|r| *r).await;
    }

    pub(crate) fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// The full primary key for a join key; `None` when no partition is selected yet.
    fn primary_key<'k>(&self, join_key: &'k [Datum]) -> Option<Cow<'k, [Datum]>> {
        // The common case: the join key is the primary key, in key order.
        if self.join_key_is_primary_key {
            return Some(Cow::Borrowed(join_key));
        }
        let partition = self
            .partition
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        self.key_parts
            .iter()
            .map(|part| match part {
                KeyPart::Join(i) => join_key.get(*i).cloned(),
                KeyPart::Partition(i) => partition.as_ref().and_then(|p| p.get(*i).cloned()),
            })
            .collect::<Option<Vec<Datum>>>()
            .map(Cow::Owned)
    }

    /// Where the join's columns are in `table`'s schema (the schema a point lookup read
    /// its rows in).
    fn columns_in(&self, table: &Table) -> Result<Arc<ColumnsInSchema>> {
        self.columns.in_schema(table.schema())
    }

    /// The projected row of the join key (values of the spec's `key_columns`), for joins
    /// by primary key.
    pub async fn get(&self, join_key: &[Datum]) -> Result<Option<ProjectedRow>> {
        self.columns.check()?;
        match self.primary_key(join_key) {
            Some(key) => self.get_primary(&key).await,
            None => Ok(None),
        }
    }

    /// The projected row of a full primary key.
    async fn get_primary(&self, key: &[Datum]) -> Result<Option<ProjectedRow>> {
        match &self.cache {
            Cache::None => {
                let (row, _, table) = self.point.get_pinned(key).await?;
                let columns = self.columns_in(&table)?;
                row.map(|r| ProjectedRow::from_row(r, &columns.projection, &columns.types))
                    .transpose()
            }
            // The slot's read guard, not a clone of the Arc: two atomic operations fewer
            // on the hottest path.
            Cache::Full(full) => {
                let full = full.read().unwrap_or_else(|p| p.into_inner());
                full.get(key, full.returned_columns())
            }
            Cache::Partial(cache) => {
                // A hit encodes the key into a per-thread buffer; only a miss allocates it.
                let hit = KEY_BUFFER.with(|buffer| {
                    let mut buffer = buffer.borrow_mut();
                    buffer.clear();
                    binary_row::encode_into(&mut buffer, key, &self.key_types)
                        .map(|()| cache.get(buffer.as_slice()))
                })?;
                if let Some(hit) = hit {
                    return Ok(hit);
                }
                let cache_key = binary_row::encode(key, &self.key_types)?;
                let (row, read_at, table) = self.point.get_pinned(key).await?;
                let columns = self.columns_in(&table)?;
                let row = row
                    .map(|r| ProjectedRow::from_row(r, &columns.projection, &columns.types))
                    .transpose()?;
                cache.insert(&cache_key, row.clone(), read_at, || {
                    self.point.snapshot_id()
                });
                Ok(row)
            }
        }
    }

    /// [`get`](Self::get) for a batch of join keys, in their order: what the pipeline
    /// calls once per poll batch. A `full` cache overlaps the batch's memory reads; a
    /// `partial` cache answers its hits and then reads only the misses.
    pub async fn get_many(&self, join_keys: &[&[Datum]]) -> Result<Vec<Option<ProjectedRow>>> {
        self.columns.check()?;
        let keys: Vec<Option<Cow<'_, [Datum]>>> =
            join_keys.iter().map(|k| self.primary_key(k)).collect();
        match &self.cache {
            Cache::Full(full) => {
                let present: Vec<&[Datum]> = keys.iter().flatten().map(|k| k.as_ref()).collect();
                let rows = {
                    let full = full.read().unwrap_or_else(|p| p.into_inner());
                    full.get_many(&present, full.returned_columns())?
                };
                let mut rows = rows.into_iter();
                Ok(keys
                    .iter()
                    .map(|k| k.as_ref().and_then(|_| rows.next().flatten()))
                    .collect())
            }
            Cache::None => {
                // One batch of point reads: each file is looked up once for all its keys.
                let present: Vec<&[Datum]> = keys.iter().flatten().map(|k| k.as_ref()).collect();
                let (rows, _, table) = self.point.get_many_pinned(&present).await?;
                let columns = self.columns_in(&table)?;
                let mut rows = rows.into_iter();
                keys.iter()
                    .map(|k| {
                        k.as_ref()
                            .and_then(|_| rows.next().flatten())
                            .map(|r| ProjectedRow::from_row(r, &columns.projection, &columns.types))
                            .transpose()
                    })
                    .collect()
            }
            Cache::Partial(cache) => {
                // The hits first, with one clock read for the batch; then the misses in
                // one batch of point reads.
                let cache_keys = self.cache_keys(&keys)?;
                let encoded = cache_keys.keys();
                let now = cache.now_ms();
                let mut out: Vec<Option<ProjectedRow>> = Vec::with_capacity(keys.len());
                let mut misses: Vec<usize> = Vec::new();
                for (i, key) in encoded.iter().enumerate() {
                    match key.and_then(|key| cache.get_at(key, now)) {
                        Some(hit) => out.push(hit),
                        None => {
                            out.push(None);
                            if key.is_some() {
                                misses.push(i);
                            }
                        }
                    }
                }
                if misses.is_empty() {
                    return Ok(out);
                }
                let rows = self.read_and_cache(cache, &keys, &encoded, &misses).await?;
                for (&i, row) in misses.iter().zip(rows) {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = row;
                    }
                }
                Ok(out)
            }
        }
    }

    /// The `partial` cache keys of primary keys (`None`: no key), encoded into one
    /// buffer.
    fn cache_keys(&self, keys: &[Option<Cow<'_, [Datum]>>]) -> Result<CacheKeys> {
        let mut encoded = CacheKeys {
            buffer: Vec::with_capacity(keys.len() * 16),
            ranges: Vec::with_capacity(keys.len()),
        };
        for key in keys {
            encoded.ranges.push(match key {
                Some(key) => {
                    let start = encoded.buffer.len();
                    binary_row::encode_into(&mut encoded.buffer, key, &self.key_types)?;
                    Some(start..encoded.buffer.len())
                }
                None => None,
            });
        }
        Ok(encoded)
    }

    /// Reads the rows of `keys` at `misses` from the table's files, in one batch of point
    /// reads, and caches them under their `encoded` keys (a missing row too).
    async fn read_and_cache(
        &self,
        cache: &PartialCache,
        keys: &[Option<Cow<'_, [Datum]>>],
        encoded: &[Option<&[u8]>],
        misses: &[usize],
    ) -> Result<Vec<Option<ProjectedRow>>> {
        // One row per miss, or an error: a miss left without its row would be missed
        // again by every round of `visit_partial`.
        let mut miss_keys = Vec::with_capacity(misses.len());
        let mut cache_keys = Vec::with_capacity(misses.len());
        for &i in misses {
            let key = keys.get(i).and_then(|k| k.as_deref());
            match (key, encoded.get(i).copied().flatten()) {
                (Some(key), Some(cache_key)) => {
                    miss_keys.push(key);
                    cache_keys.push(cache_key);
                }
                _ => return Err(Error::format(format!("lookup miss {i} has no key"))),
            }
        }
        let (rows, read_at, table) = self.point.get_many_pinned(&miss_keys).await?;
        if rows.len() != miss_keys.len() {
            return Err(Error::format(format!(
                "{} rows read for {} keys",
                rows.len(),
                miss_keys.len()
            )));
        }
        let columns = self.columns_in(&table)?;
        cache_keys
            .into_iter()
            .zip(rows)
            .map(|(key, row)| {
                let row = row
                    .map(|r| ProjectedRow::from_row(r, &columns.projection, &columns.types))
                    .transpose()?;
                cache.insert(key, row.clone(), read_at, || self.point.snapshot_id());
                Ok(row)
            })
            .collect()
    }

    /// [`get_many`](Self::get_many), handing each key's row (`None`: no row) to `visit`
    /// in the keys' order instead of returning them: a `full` cache's rows are read in
    /// place, under its read locks, without a copy of their own. An error from `visit`
    /// ends the lookup.
    pub(crate) async fn visit_many(
        &self,
        join_keys: &[Option<&[Datum]>],
        mut visit: impl FnMut(Option<RowFields<'_>>) -> Result<()>,
    ) -> Result<()> {
        let full = match &self.cache {
            Cache::Full(full) => full,
            Cache::Partial(cache) => return self.visit_partial(cache, join_keys, visit).await,
            Cache::None => {
                let present: Vec<&[Datum]> = join_keys.iter().flatten().copied().collect();
                let mut rows = self.get_many(&present).await?.into_iter();
                for key in join_keys {
                    let row = key.and_then(|_| rows.next().flatten());
                    visit(row.as_ref().map(ProjectedRow::fields))?;
                }
                return Ok(());
            }
        };
        self.columns.check()?;
        // `None`: no join key, or no primary key for it (its partition is not known yet);
        // it finds nothing, in its place among the others.
        let keys: Vec<Option<Cow<'_, [Datum]>>> = join_keys
            .iter()
            .map(|k| k.and_then(|k| self.primary_key(k)))
            .collect();
        let present: Vec<&[Datum]> = keys.iter().flatten().map(|k| k.as_ref()).collect();
        let full = full.read().unwrap_or_else(|p| p.into_inner());
        let mut next = 0;
        full.get_many_with(&present, full.returned_columns(), |row| {
            while keys.get(next).is_some_and(Option::is_none) {
                visit(None)?;
                next += 1;
            }
            next += 1;
            visit(row)
        })?;
        for _ in next..keys.len() {
            visit(None)?;
        }
        Ok(())
    }

    /// [`visit_many`](Self::visit_many) through a `partial` cache: the hits read in
    /// place, after the misses are read from the table's files and cached.
    async fn visit_partial(
        &self,
        cache: &PartialCache,
        join_keys: &[Option<&[Datum]>],
        mut visit: impl FnMut(Option<RowFields<'_>>) -> Result<()>,
    ) -> Result<()> {
        self.columns.check()?;
        let keys: Vec<Option<Cow<'_, [Datum]>>> = join_keys
            .iter()
            .map(|k| k.and_then(|k| self.primary_key(k)))
            .collect();
        let cache_keys = self.cache_keys(&keys)?;
        let encoded = cache_keys.keys();
        let now = cache.now_ms();
        // Rows read from the files, by key. A round that meets a key neither cached nor
        // read visits nothing; each round reads every key it missed, so at most one
        // more round follows unless a hit of this one is evicted before the next.
        let mut read: Vec<Option<Option<ProjectedRow>>> = vec![None; keys.len()];
        loop {
            let misses = cache.visit_many(&encoded, &read, now, &mut visit)?;
            if misses.is_empty() {
                return Ok(());
            }
            let rows = self.read_and_cache(cache, &keys, &encoded, &misses).await?;
            for (&i, row) in misses.iter().zip(rows) {
                if let Some(slot) = read.get_mut(i) {
                    *slot = Some(row);
                }
            }
        }
    }

    /// Every projected row whose join columns equal `join_key`, in primary-key order, for
    /// joins on other columns (`full` caches only).
    pub(crate) fn get_all(&self, join_key: &[Datum]) -> Result<Vec<ProjectedRow>> {
        self.columns.check()?;
        match &self.cache {
            Cache::Full(full) => {
                let full = self.full(full);
                full.get_by(0, join_key, full.returned_columns())
            }
            _ => Err(Error::Config(
                "joins on non-primary-key columns need cache = \"full\"".into(),
            )),
        }
    }

    fn full(&self, full: &RwLock<Arc<FullCache>>) -> Arc<FullCache> {
        full.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Loads the `full` cache from the snapshot the point lookups read (only the selected
    /// partition when there is one) and swaps it in. A no-op for other strategies.
    async fn load_full(&self) -> Result<()> {
        let Cache::Full(slot) = &self.cache else {
            return Ok(());
        };
        let started = Instant::now();
        let table = self.point.table();
        let columns = self.columns_in(&table)?;
        let fresh = FullCache::returning(
            table.schema().clone(),
            if self.by_primary_key() {
                Vec::new()
            } else {
                vec![columns.key_columns.clone()]
            },
            &columns.projection,
        )?;
        let partition = self
            .partition
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let wanted_partition = self.partition_choice.is_some();
        if let Some(id) = self.point.snapshot_id()
            && (!wanted_partition || partition.is_some())
        {
            let snapshot = table.snapshot(id).await?;
            let mut filter = ScanFilter::default();
            if let Some(values) = &partition {
                for (&column, value) in table.schema().partition_indices().iter().zip(values.iter())
                {
                    filter.equals.push((column, value.clone()));
                }
            }
            // A chunk of merged rows at a time: the decoded rows of the whole table (or
            // of one bucket) would take more memory than the cache they fill.
            scan_in_chunks(&table, &snapshot, &filter, |rows| {
                rows.iter().try_for_each(|row| fresh.upsert(row))
            })
            .await?;
        }
        let rows = fresh.len() as u64;
        let bytes = fresh.memory_bytes() as u64;
        *slot.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(fresh);
        let took = started.elapsed();
        self.metrics
            .load_millis
            .store(took.as_millis() as u64, Ordering::Relaxed);
        self.metrics.cache_rows.store(rows, Ordering::Relaxed);
        self.metrics.cache_bytes.store(bytes, Ordering::Relaxed);
        self.ready.send_replace(true);
        tracing::info!(
            table = %table.identifier(),
            rows,
            bytes,
            took_ms = took.as_millis() as u64,
            "full lookup cache loaded"
        );
        Ok(())
    }

    /// A `deduplicate` table's changes (ordered by arrival, no `sequence.field`) applied
    /// from the new files alone: per key the newest version wins and replaces whatever is
    /// cached, since every version in newly visible files is newer than the cached ones.
    /// No table read. (With a sequence field an older version may lose to a delete the
    /// cache no longer remembers, so those tables re-read the changed keys instead.)
    fn apply_deduplicate(
        &self,
        slot: &RwLock<Arc<FullCache>>,
        order: &SequenceOrder,
        changed: &ChangedKeys,
    ) -> Result<()> {
        let full = self.full(slot);
        let ignore_delete = self.point.table().options().ignore_delete;
        for ((_, key), versions) in changed.keys.iter().zip(&changed.versions) {
            if !self.in_selected_partition(key) {
                continue;
            }
            let newest = versions
                .iter()
                .filter(|v| !(ignore_delete && v.kind.is_retract()))
                .max_by(|a, b| order.compare(a, b));
            let Some(newest) = newest else {
                continue;
            };
            if newest.kind.is_retract() {
                full.remove(key)?;
            } else {
                full.upsert(&newest.row)?;
            }
        }
        self.record_size(&full);
        Ok(())
    }

    /// The `full` cache's size, for the cache gauges.
    fn record_size(&self, full: &FullCache) {
        self.metrics
            .cache_rows
            .store(full.len() as u64, Ordering::Relaxed);
        self.metrics
            .cache_bytes
            .store(full.memory_bytes() as u64, Ordering::Relaxed);
    }

    /// Whether a primary key lies in the selected partition (always, without one).
    fn in_selected_partition(&self, key: &[Datum]) -> bool {
        let partition = self
            .partition
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if self.partition_choice.is_none() {
            return true;
        }
        let Some(values) = partition else {
            return false;
        };
        let table = self.point.table();
        let schema = table.schema();
        schema
            .partition_keys
            .iter()
            .zip(values.iter())
            .all(|(name, value)| {
                schema
                    .primary_keys
                    .iter()
                    .position(|k| k == name)
                    .is_some_and(|i| key.get(i) == Some(value))
            })
    }

    /// Follows `max_pt()` to the newest partition; returns whether it changed.
    pub(crate) fn select_newest_partition(&self) -> Result<bool> {
        if self.partition_choice != Some(PartitionChoice::Newest) {
            return Ok(false);
        }
        let newest = newest_partition(&self.point.table(), &self.point.partitions())?;
        let mut current = self.partition.write().unwrap_or_else(|p| p.into_inner());
        if current.as_deref() == newest.as_ref() {
            return Ok(false);
        }
        tracing::info!(
            table = %self.point.table().identifier(),
            partition = ?newest,
            "lookup join follows the newest partition"
        );
        *current = newest.map(Arc::new);
        Ok(true)
    }

    /// Brings the cache in step with a refresh of the point lookups; `reload` drops what
    /// the cache holds (the delta asks for it, or this join missed an earlier one).
    async fn apply(
        &self,
        delta: &SnapshotDelta,
        changed: &ChangedKeys,
        reload: bool,
    ) -> Result<()> {
        if reload {
            // A new schema: the join's columns must still be there, for every strategy.
            self.columns_in(&self.point.table())?;
        }
        match &self.cache {
            Cache::None => {}
            Cache::Partial(cache) => {
                if reload {
                    cache.invalidate_all();
                } else {
                    cache.invalidate(changed.keys.iter().map(|(bytes, _)| bytes.as_slice()));
                }
                self.metrics
                    .cache_rows
                    .store(cache.entry_count(), Ordering::Relaxed);
                self.metrics
                    .cache_bytes
                    .store(cache.weighted_size(), Ordering::Relaxed);
            }
            Cache::Full(slot) => {
                if reload {
                    self.load_full().await?;
                } else if let Some(order) = &self.deduplicate {
                    self.apply_deduplicate(slot, order, changed)?;
                } else {
                    // The new current rows of the changed keys, merged by the table's
                    // engine exactly as a point lookup sees them.
                    let keys: Vec<Vec<Datum>> = changed
                        .keys
                        .iter()
                        .map(|(_, key)| key.clone())
                        .filter(|key| self.in_selected_partition(key))
                        .collect();
                    let rows = self.point.get_many(&keys).await?;
                    let full = self.full(slot);
                    for (key, row) in keys.iter().zip(rows) {
                        match row {
                            Some(row) => full.upsert(&row)?,
                            None => full.remove(key)?,
                        }
                    }
                    self.record_size(&full);
                }
            }
        }
        self.metrics
            .snapshot_id
            .store(delta.to.unwrap_or(0), Ordering::Relaxed);
        LookupMetrics::add(&self.metrics.refreshes, 1);
        if let Some(commit) = delta.commit_time_millis {
            let lag = chrono::Utc::now().timestamp_millis().saturating_sub(commit);
            self.metrics
                .refresh_lag_millis
                .store(u64::try_from(lag).unwrap_or(0), Ordering::Relaxed);
        }
        Ok(())
    }
}

/// A batch's `partial` cache keys in one buffer (one allocation, not one per key).
struct CacheKeys {
    buffer: Vec<u8>,
    /// Each key's bytes in `buffer` (`None`: no key).
    ranges: Vec<Option<std::ops::Range<usize>>>,
}

impl CacheKeys {
    fn keys(&self) -> Vec<Option<&[u8]>> {
        self.ranges
            .iter()
            .map(|r| r.clone().and_then(|r| self.buffer.get(r)))
            .collect()
    }
}
