//! The table writer: buffers changes per partition and bucket, folds them with the merge
//! engine, flushes sorted level-0 files and commits them as snapshots.
//!
//! Changelog producers: `input` and `lookup` changelogs are written by the flushes
//! (`changelog_flush`) into the APPEND snapshot; the `full-compaction` changelog by the
//! full compaction the writer runs after every `full-compaction.delta-commits`-th commit
//! (every commit when unset, as Java's Flink writers do), into its COMPACT snapshot.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;

use super::auto_compact::AutoCompaction;
use super::changelog_flush::{ChangelogFlush, Images};
use super::flush::{FileTarget, estimate_row_bytes};
use super::merge::{MergeEngine, SequenceOrder, key_of, sort_and_fold};
use super::point_lookup::{LookupOptions, PointLookup};
use super::row_check::{CheckedChange, RowCheck};
use crate::error::{Error, Result};
use crate::table::binary_row;
use crate::table::bucket;
use crate::table::changelog_options::ChangelogProducer;
use crate::table::commit::{CommitRequest, PreparedCommit};
use crate::table::data_file::{DataFileWriteOptions, KeyValue};
use crate::table::datum::Row;
use crate::table::fence::WriterFence;
use crate::table::manifest::{FileSource, ManifestEntry};
use crate::table::row_kind::RowKind;
use crate::table::snapshot::{BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot};
use crate::table::types::DataType;
use crate::table::{IO_CONCURRENCY, Table};

/// Changes buffered in memory before they are flushed to files (Paimon's
/// `write-buffer-size` default is 256 MiB; this counts estimated row bytes).
const DEFAULT_BUFFER_BYTES: usize = 256 << 20;

/// (serialized partition row, bucket)
type BucketId = (Vec<u8>, i32);

/// A map by bucket that every written row looks up (twice): foldhash, not the standard
/// library's SipHash, which was ~4% of a CDC pipeline's instructions; hashbrown, so that a
/// row looks its bucket up by a [`BucketRef`] into scratch bytes, allocating nothing.
type BucketMap<V> = hashbrown::HashMap<BucketId, V, foldhash::fast::RandomState>;

/// A [`BucketId`] borrowed. Hashes as the tuple does (a byte slice hashes as the `Vec`).
#[derive(Hash)]
struct BucketRef<'a>(&'a [u8], i32);

impl hashbrown::Equivalent<BucketId> for BucketRef<'_> {
    fn equivalent(&self, key: &BucketId) -> bool {
        self.1 == key.1 && self.0 == key.0.as_slice()
    }
}

impl BucketRef<'_> {
    fn to_owned(&self) -> BucketId {
        (self.0.to_vec(), self.1)
    }
}

#[derive(Debug)]
struct BucketBuffer {
    partition: Row,
    rows: Vec<KeyValue>,
}

/// Writes changes into one table. One writer per table at a time (Paimon's rule: two
/// writers of one bucket would reuse sequence numbers).
pub struct TableWriter {
    table: Arc<Table>,
    commit_user: String,
    next_commit_identifier: i64,
    engine: MergeEngine,
    check: RowCheck,
    order: SequenceOrder,
    layout: RowLayout,
    /// Each written row's serialized partition and bucket-key image, reused.
    partition_scratch: Vec<u8>,
    bucket_scratch: Vec<u8>,
    buffers: BucketMap<BucketBuffer>,
    next_sequence: BucketMap<i64>,
    pending: Vec<ManifestEntry>,
    /// The changelog of the tables that have a `changelog-producer`: how flushes write
    /// it, and the changelog files written since the last commit.
    changelog: Option<ChangelogFlush>,
    pending_changelog: Vec<ManifestEntry>,
    /// `lookup`: the after images of the keys flushed since the last commit that landed,
    /// which the point lookups of the committed table do not see yet.
    images: HashMap<BucketId, Images>,
    buffered_bytes: usize,
    buffer_limit: usize,
    file_options: DataFileWriteOptions,
    /// Automatic compaction after commits; `None` for `write-only` tables.
    auto_compaction: Option<AutoCompaction>,
    /// Checked before every snapshot is published, when set.
    fence: Option<Arc<WriterFence>>,
    /// A one-shot write ([`Self::set_batch_write`]).
    batch_write: bool,
    /// A commit whose publishing failed (possibly after landing unseen); it is published
    /// again, unchanged, before anything newer, so it lands exactly once.
    in_doubt: Option<PreparedCommit>,
    /// Newest snapshot this writer knows to be consistent with its state: the one it
    /// started from (or its caller resumed from, [`Self::resumed_from`]), then each of
    /// its commits. An APPEND of its commit user appearing
    /// after it is another writer's (see `PreparedCommit::guard_user_since`).
    known_snapshot: i64,
}

/// Column positions the writer needs for every row.
#[derive(Debug, Clone)]
pub(crate) struct RowLayout {
    pub(crate) key_indices: Vec<usize>,
    pub(crate) key_types: Vec<DataType>,
    pub(crate) partition_indices: Vec<usize>,
    pub(crate) partition_types: Vec<DataType>,
    pub(crate) bucket_indices: Vec<usize>,
    pub(crate) bucket_types: Vec<DataType>,
    pub(crate) num_buckets: i32,
}

impl RowLayout {
    pub(crate) fn new(table: &Table) -> Self {
        let schema = table.schema().clone();
        let key_indices = schema.trimmed_key_indices();
        let partition_indices = schema.partition_indices();
        let bucket_indices = schema.bucket_key_indices();
        RowLayout {
            partition_types: schema.types_of(&partition_indices),
            bucket_types: schema.types_of(&bucket_indices),
            key_types: schema.types_of(&key_indices),
            key_indices,
            partition_indices,
            bucket_indices,
            num_buckets: table.options().bucket,
        }
    }
}

impl TableWriter {
    /// A writer for `table` committing as `commit_user`. Sequence numbers continue from
    /// the latest snapshot; commit identifiers from this user's latest snapshot.
    pub async fn new(table: Arc<Table>, commit_user: impl Into<String>) -> Result<Self> {
        let commit_user = commit_user.into();
        if table.options().bucket < 1 {
            return Err(Error::Config(format!(
                "table {} has bucket = {}; lakejoin writes fixed-bucket tables only",
                table.identifier(),
                table.options().bucket
            )));
        }
        let engine = MergeEngine::new(table.schema(), table.options())?;
        let order = SequenceOrder::new(table.schema(), table.options())?;
        let file_options = DataFileWriteOptions::for_table(table.options())?;
        let mut next_sequence = BucketMap::default();
        let (live, snapshot_id) = match table.latest_snapshot().await? {
            Some(latest) => (table.live_files(&latest).await?, latest.id),
            None => (Vec::new(), 0),
        };
        for entry in &live {
            let next = next_sequence
                .entry((entry.partition.clone(), entry.bucket))
                .or_insert(0);
            *next = (*next).max(entry.file.max_sequence_number + 1);
        }
        let auto_compaction = AutoCompaction::new(table.clone(), &commit_user, live, snapshot_id);
        let next_commit_identifier = table
            .latest_snapshot_of_user(&commit_user)
            .await?
            .map_or(1, |s| s.commit_identifier.saturating_add(1));
        let changelog = changelog_flush(&table, &engine, &order).await?;
        Ok(TableWriter {
            check: RowCheck::new(&table)?,
            layout: RowLayout::new(&table),
            partition_scratch: Vec::new(),
            bucket_scratch: Vec::new(),
            table,
            commit_user,
            next_commit_identifier,
            engine,
            order,
            buffers: BucketMap::default(),
            next_sequence,
            pending: Vec::new(),
            changelog,
            pending_changelog: Vec::new(),
            images: HashMap::new(),
            buffered_bytes: 0,
            buffer_limit: DEFAULT_BUFFER_BYTES,
            file_options,
            auto_compaction,
            fence: None,
            batch_write: false,
            in_doubt: None,
            known_snapshot: snapshot_id,
        })
    }

    /// Makes commits fail with `Error::ForeignCommitOfUser` if an APPEND of this writer's
    /// user newer than snapshot `seen` appears: the caller resumed its input from what
    /// it saw up to `seen`, and a later snapshot of the same user (a fenced writer's last
    /// publish, landing late) already holds input it is about to replay. The writer
    /// itself reads the latest snapshot later, which may already include that one.
    pub(crate) fn resumed_from(&mut self, seen: i64) {
        self.known_snapshot = self.known_snapshot.min(seen);
    }

    /// Makes every commit check `fence` right before publishing: once another writer
    /// claimed the table, commits fail with `Error::WriterFenced` and publish nothing.
    pub fn set_fence(&mut self, fence: Arc<WriterFence>) {
        self.fence = Some(fence);
    }

    /// Marks this writer as a one-shot write (`lakejoin table write`): as Java's batch
    /// writes, it fully compacts a table with periodic full compaction (`full-compaction`
    /// changelog, `full-compaction.delta-commits`) at every commit, whatever the number
    /// of delta commits.
    pub fn set_batch_write(&mut self) {
        self.batch_write = true;
    }

    /// Whether a failed commit is waiting to be published again.
    pub fn has_commit_in_doubt(&self) -> bool {
        self.in_doubt.is_some()
    }

    pub(crate) fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Sets how many estimated bytes of changes are buffered before `write` asks for a
    /// flush (see `TableWriter::needs_flush`).
    pub fn set_buffer_limit(&mut self, bytes: usize) {
        self.buffer_limit = bytes.max(1);
    }

    /// Whether the buffer is over its limit and should be flushed.
    pub(crate) fn needs_flush(&self) -> bool {
        self.buffered_bytes >= self.buffer_limit
    }

    /// Checks one change ([`RowCheck`]) and buffers it. A `Data` error rejects this change
    /// only; the writer is unchanged.
    pub fn write(&mut self, kind: RowKind, row: Row) -> Result<()> {
        match self.check.check(kind, row)? {
            Some(change) => self.write_checked(change),
            None => Ok(()),
        }
    }

    /// The checks every change passes before `Self::write_checked`.
    pub fn row_check(&self) -> &RowCheck {
        &self.check
    }

    /// Buffers a change [`RowCheck::check`] accepted.
    pub(crate) fn write_checked(&mut self, change: CheckedChange) -> Result<()> {
        let (kind, row) = change.into_parts();
        let layout = &self.layout;
        self.partition_scratch.clear();
        binary_row::serialize_columns_into(
            &mut self.partition_scratch,
            &row,
            &layout.partition_indices,
            &layout.partition_types,
        )?;
        let bucket = bucket::bucket_of_columns(
            &mut self.bucket_scratch,
            &row,
            &layout.bucket_indices,
            &layout.bucket_types,
            layout.num_buckets,
        )?;
        // Looked up borrowed: the id is copied once per bucket, not per row.
        let id = BucketRef(&self.partition_scratch, bucket);
        let sequence_number = match self.next_sequence.get_mut(&id) {
            Some(next) => {
                *next += 1;
                *next - 1
            }
            None => {
                self.next_sequence.insert(id.to_owned(), 1);
                0
            }
        };
        self.buffered_bytes += estimate_row_bytes(&row);
        match self.buffers.get_mut(&id) {
            Some(buffer) => buffer.rows.push(KeyValue {
                sequence_number,
                kind,
                row,
            }),
            None => {
                let partition = key_of(&row, &layout.partition_indices);
                let rows = vec![KeyValue {
                    sequence_number,
                    kind,
                    row,
                }];
                self.buffers
                    .insert(id.to_owned(), BucketBuffer { partition, rows });
            }
        }
        Ok(())
    }

    /// Number of changes buffered and not yet flushed.
    pub fn buffered_rows(&self) -> usize {
        self.buffers.values().map(|b| b.rows.len()).sum()
    }

    /// Writes every buffered bucket as level-0 files (not yet committed). On failure the
    /// rows not yet in a file go back into the buffer (folded), and the files that were
    /// written are kept for the next commit, so a flush that fails loses nothing.
    pub async fn flush(&mut self) -> Result<()> {
        if let Some(changelog) = self.changelog.clone() {
            return self.flush_with_changelog(&changelog).await;
        }
        let buffers = std::mem::take(&mut self.buffers);
        self.buffered_bytes = 0;
        let jobs: Vec<(BucketId, BucketBuffer)> = buffers.into_iter().collect();
        let table = self.table.clone();
        let layout = self.layout.clone();
        let engine = self.engine.clone();
        let order = self.order.clone();
        let options = self.file_options;
        let flushes: Vec<_> = jobs
            .into_iter()
            .map(|((partition_bytes, bucket), buffer)| {
                let table = table.clone();
                let layout = layout.clone();
                let engine = engine.clone();
                let order = order.clone();
                async move {
                    let partition = buffer.partition;
                    let rows = buffer.rows;
                    let folded = tokio::task::spawn_blocking(move || {
                        sort_and_fold(rows, &layout.key_indices, &order, &engine)
                    })
                    .await
                    .map_err(|e| Error::task("flush task", e))
                    .and_then(|folded| folded);
                    let folded = match folded {
                        Ok(f) => f,
                        Err(e) => {
                            return (
                                Vec::new(),
                                Some((e, (partition_bytes, bucket), partition, Vec::new())),
                            );
                        }
                    };
                    let target = FileTarget {
                        table: &table,
                        partition_bytes: &partition_bytes,
                        partition: &partition,
                        bucket,
                        level: 0,
                        source: FileSource::Append,
                        options,
                        changelog: false,
                    };
                    let (entries, failed) = target.write_or_return(folded).await;
                    let failed =
                        failed.map(|(e, rows)| (e, (partition_bytes, bucket), partition, rows));
                    (entries, failed)
                }
            })
            .collect();
        let results: Vec<_> = futures::stream::iter(flushes)
            .buffer_unordered(IO_CONCURRENCY)
            .collect()
            .await;
        let mut first_error = None;
        for (entries, failed) in results {
            self.pending.extend(entries);
            if let Some((e, id, partition, rows)) = failed {
                self.put_back(id, partition, rows);
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Flushes and commits everything written so far as one snapshot carrying
    /// `properties`. Returns `None` when there was nothing to commit.
    ///
    /// Afterwards, buckets that reached `num-sorted-run.compaction-trigger` sorted runs are
    /// compacted on a background task (see [`TableWriter::wait_for_compaction`] and
    /// [`TableWriter::close`]). This waits for that compaction only when a bucket exceeds
    /// `num-sorted-run.stop-trigger`, or always for tables whose readers skip level 0
    /// (first-row, deletion vectors, `compaction.force-up-level-0`). `write-only` tables
    /// are never compacted by their writers.
    pub async fn commit(
        &mut self,
        properties: BTreeMap<String, String>,
    ) -> Result<Option<Snapshot>> {
        self.flush().await?;
        // A commit that failed earlier goes first, unchanged: it may have landed, and its
        // identity (user, identifier, delta manifest list) is how it is recognised.
        let mut resolved = None;
        if let Some(mut prepared) = self.in_doubt.take() {
            match self
                .table
                .publish(&mut prepared, self.fence.as_deref())
                .await
            {
                Ok(snapshot) => {
                    self.committed(&snapshot, &prepared.request().entries).await;
                    let same = prepared.request().properties == properties;
                    resolved = Some(snapshot);
                    if self.pending.is_empty() && self.pending_changelog.is_empty() && same {
                        return Ok(resolved);
                    }
                }
                Err(e) => {
                    self.in_doubt = Some(prepared);
                    return Err(e);
                }
            }
        }
        if self.pending.is_empty() && self.pending_changelog.is_empty() && properties.is_empty() {
            return Ok(resolved);
        }
        let request = CommitRequest {
            commit_user: self.commit_user.clone(),
            commit_identifier: self.next_commit_identifier,
            kind: CommitKind::Append,
            entries: std::mem::take(&mut self.pending),
            changelog: std::mem::take(&mut self.pending_changelog),
            properties,
        };
        let mut prepared = match self.table.prepare_commit(request.clone()).await {
            Ok(p) => p,
            Err(e) => {
                // Nothing was published; keep the files so a retried commit has them.
                self.pending = request.entries;
                self.pending_changelog = request.changelog;
                return Err(e);
            }
        };
        prepared.guard_user_since(self.known_snapshot);
        match self
            .table
            .publish(&mut prepared, self.fence.as_deref())
            .await
        {
            Ok(snapshot) => {
                self.committed(&snapshot, &request.entries).await;
                Ok(Some(snapshot))
            }
            Err(e) => {
                self.in_doubt = Some(prepared);
                Err(e)
            }
        }
    }

    /// Bookkeeping after `snapshot` (this writer's next commit identifier) landed.
    async fn committed(&mut self, snapshot: &Snapshot, entries: &[ManifestEntry]) {
        // Saturating: a batch commit of this user (i64::MAX) must not panic here.
        self.next_commit_identifier = self.next_commit_identifier.saturating_add(1);
        self.known_snapshot = self.known_snapshot.max(snapshot.id);
        if self.pending.is_empty() && self.pending_changelog.is_empty() && self.in_doubt.is_none() {
            // Every flushed change is in a published snapshot now, which the point
            // lookups see once refreshed.
            self.images.clear();
        }
        let full_compaction = self.full_compaction_due(snapshot.commit_identifier);
        if let Some(auto) = &mut self.auto_compaction
            && let Err(e) = auto
                .after_commit(snapshot.id, entries, full_compaction)
                .await
        {
            // The snapshot is committed; compaction is retried after the next one.
            tracing::warn!(table = %self.table.identifier(), error = %e,
                "could not start compaction after a commit");
        }
    }
}

impl TableWriter {
    /// Whether the commit with `identifier` is followed by a full compaction of every
    /// bucket, and its identifier then. Java's writers compact fully at every commit
    /// whose identifier is a multiple of `full-compaction.delta-commits`, which is 1 for
    /// `full-compaction` tables without it, and at every batch commit. `write-only`
    /// tables are never compacted by their writers (see `AutoCompaction`): their full
    /// compaction, and `full-compaction` changelog, is `lakejoin table compact --full`'s.
    fn full_compaction_due(&self, identifier: i64) -> Option<i64> {
        let options = &self.table.options().changelog;
        let every = match (options.full_compaction_delta_commits, options.producer) {
            (Some(n), _) => i64::from(n),
            (None, ChangelogProducer::FullCompaction) => 1,
            (None, _) => return None,
        };
        let due =
            self.batch_write || identifier == BATCH_COMMIT_IDENTIFIER || identifier % every == 0;
        due.then_some(identifier)
    }
}

/// The changelog the flushes of a writer of `table` produce, if its `changelog-producer`
/// asks for one there. The `full-compaction` changelog is written by compactions
/// instead (`lsm::compact_changelog`).
async fn changelog_flush(
    table: &Arc<Table>,
    engine: &MergeEngine,
    order: &SequenceOrder,
) -> Result<Option<ChangelogFlush>> {
    let options = &table.options().changelog;
    let lookup = match options.producer {
        ChangelogProducer::None | ChangelogProducer::FullCompaction => return Ok(None),
        ChangelogProducer::Input => None,
        ChangelogProducer::Lookup => Some(Arc::new(
            PointLookup::open(table.clone(), LookupOptions::default()).await?,
        )),
    };
    Ok(Some(ChangelogFlush {
        producer: options.producer,
        row_deduplicate: options.row_deduplicate,
        lookup,
        layout: RowLayout::new(table),
        engine: engine.clone(),
        order: order.clone(),
        primary_key_indices: table.schema().primary_key_indices(),
    }))
}

impl TableWriter {
    /// [`Self::flush`] of a table with a changelog producer: each bucket all or nothing
    /// (see `lsm::changelog_flush`). A bucket that fails keeps its changes in the
    /// buffer; the others' files are kept for the next commit.
    async fn flush_with_changelog(&mut self, changelog: &ChangelogFlush) -> Result<()> {
        if let Some(lookup) = &changelog.lookup {
            // The newest committed state, the one the images of this commit build on.
            lookup.refresh().await?;
        }
        let buffers = std::mem::take(&mut self.buffers);
        self.buffered_bytes = 0;
        let table = self.table.clone();
        let options = self.file_options;
        let empty = Images::new();
        let images = &self.images;
        let flushes: Vec<_> = buffers
            .into_iter()
            .map(|(id, buffer)| {
                let table = table.clone();
                let bucket_images = images.get(&id).unwrap_or(&empty);
                async move {
                    let target = FileTarget {
                        table: &table,
                        partition_bytes: &id.0,
                        partition: &buffer.partition,
                        bucket: id.1,
                        level: 0,
                        source: FileSource::Append,
                        options,
                        changelog: false,
                    };
                    let result = changelog
                        .flush_bucket(target, buffer.rows, bucket_images)
                        .await;
                    (id, buffer.partition, result)
                }
            })
            .collect();
        let results: Vec<_> = futures::stream::iter(flushes)
            .buffer_unordered(IO_CONCURRENCY)
            .collect()
            .await;
        let mut first_error = None;
        for (id, partition, result) in results {
            match result {
                Ok(flushed) => {
                    self.pending.extend(flushed.data);
                    self.pending_changelog.extend(flushed.changelog);
                    if !flushed.images.is_empty() {
                        self.images.entry(id).or_default().extend(flushed.images);
                    }
                }
                Err((e, rows)) => {
                    self.put_back(id, partition, rows);
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl TableWriter {
    /// Puts a bucket's rows back in its buffer after its flush failed, so the next flush
    /// (or commit) writes them again and nothing is lost.
    fn put_back(&mut self, id: BucketId, partition: Row, rows: Vec<KeyValue>) {
        self.buffered_bytes += rows
            .iter()
            .map(|kv| estimate_row_bytes(&kv.row))
            .sum::<usize>();
        if !rows.is_empty() {
            self.buffers.insert(id, BucketBuffer { partition, rows });
        }
    }
}

impl TableWriter {
    /// Waits until the compaction that this writer's commits made due has finished, and
    /// reports its error if it failed. Returns at once when nothing is pending.
    pub async fn wait_for_compaction(&mut self) -> Result<()> {
        match &mut self.auto_compaction {
            Some(auto) => auto.wait().await,
            None => Ok(()),
        }
    }

    /// Moves this writer to `table`, a newer schema of its table (columns added or
    /// widened), keeping its commit user, fence, buffer limit and known snapshot, so
    /// commit identifiers go on and a foreign commit of its user is still caught.
    /// Everything written must be committed first (the buffers are laid out in the old
    /// schema); the compaction running on the old schema is finished first. Files written
    /// from here on carry the new schema id; the schema file was published before, so no
    /// data file names a schema that is not there.
    pub(crate) async fn move_to_schema(&mut self, table: Arc<Table>) -> Result<()> {
        if !self.buffers.is_empty() || !self.pending.is_empty() || self.in_doubt.is_some() {
            return Err(Error::format(format!(
                "table {}: the writer cannot move to a new schema with uncommitted changes",
                self.table.identifier()
            )));
        }
        if let Some(auto) = self.auto_compaction.take()
            && let Err(e) = auto.close().await
        {
            tracing::warn!(table = %self.table.identifier(), error = %e,
                "background compaction failed before the schema change; it runs again later");
        }
        let mut next = TableWriter::new(table, self.commit_user.clone()).await?;
        next.known_snapshot = next.known_snapshot.min(self.known_snapshot);
        next.fence = self.fence.take();
        next.batch_write = self.batch_write;
        next.buffer_limit = self.buffer_limit;
        *self = next;
        Ok(())
    }

    /// Finishes pending compaction and stops the background compactor. Changes written
    /// but not committed are discarded. Returns the last compaction error, if any (the
    /// committed data is intact either way).
    pub async fn close(self) -> Result<()> {
        match self.auto_compaction {
            Some(auto) => auto.close().await,
            None => Ok(()),
        }
    }
}
