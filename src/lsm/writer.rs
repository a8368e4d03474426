//! The table writer: buffers changes per partition and bucket, folds them with the merge
//! engine, flushes sorted level-0 files and commits them as snapshots.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use object_store::{ObjectStoreExt, PutPayload};

use super::auto_compact::AutoCompaction;
use super::compact_task::CompactionState;
use super::merge::{Admission, MergeEngine, SequenceOrder, key_of, sort_and_fold};
use crate::error::{Error, Result};
use crate::table::binary_row;
use crate::table::bucket;
use crate::table::commit::{CommitRequest, PreparedCommit, column_stats};
use crate::table::data_file::{self, DataFileWriteOptions, KeyValue, RowKind};
use crate::table::datum::{Datum, Row, format_timestamp, timestamp_out_of_range};
use crate::table::fence::WriterFence;
use crate::table::manifest::{DataFileMeta, FileKind, FileSource, ManifestEntry, SimpleStats};
use crate::table::schema::TableSchema;
use crate::table::snapshot::{CommitKind, Snapshot};
use crate::table::types::DataType;
use crate::table::{IO_CONCURRENCY, Table};

/// Changes buffered in memory before they are flushed to files (Paimon's
/// `write-buffer-size` default is 256 MiB; this counts estimated row bytes).
const DEFAULT_BUFFER_BYTES: usize = 256 << 20;

/// (serialized partition row, bucket)
type BucketId = (Vec<u8>, i32);

#[derive(Debug)]
struct BucketBuffer {
    partition: Row,
    rows: Vec<KeyValue>,
}

/// Files and rows produced by a flush or compaction, ready to commit.
#[derive(Debug, Default, Clone)]
pub struct PendingFiles {
    pub entries: Vec<ManifestEntry>,
}

/// Writes changes into one table. One writer per table at a time (Paimon's rule: two
/// writers of one bucket would reuse sequence numbers).
pub struct TableWriter {
    table: Arc<Table>,
    commit_user: String,
    next_commit_identifier: i64,
    engine: MergeEngine,
    order: SequenceOrder,
    layout: RowLayout,
    buffers: HashMap<BucketId, BucketBuffer>,
    next_sequence: HashMap<BucketId, i64>,
    pending: Vec<ManifestEntry>,
    buffered_bytes: usize,
    buffer_limit: usize,
    file_options: DataFileWriteOptions,
    /// Automatic compaction after commits; `None` for `write-only` tables.
    auto_compaction: Option<AutoCompaction>,
    /// Checked before every snapshot is published, when set.
    fence: Option<Arc<WriterFence>>,
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
    pub schema: Arc<TableSchema>,
    pub key_indices: Vec<usize>,
    pub partition_indices: Vec<usize>,
    pub partition_types: Vec<DataType>,
    pub bucket_indices: Vec<usize>,
    pub bucket_types: Vec<DataType>,
    pub num_buckets: i32,
    /// Column named by the `rowkind.field` option.
    pub row_kind_column: Option<usize>,
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
            key_indices,
            partition_indices,
            bucket_indices,
            num_buckets: table.options().bucket,
            row_kind_column: row_kind_column(&schema),
            schema,
        }
    }
}

/// The column `rowkind.field` names, if the table sets it.
pub(crate) fn row_kind_column(schema: &TableSchema) -> Option<usize> {
    schema
        .options
        .get("rowkind.field")
        .and_then(|f| schema.field_index(f.trim()))
}

/// The kind a change is applied as: with `rowkind.field`, the kind its column holds
/// (Paimon's writers take it from there); the decoder's `kind` otherwise, or when the
/// column is null. `Err` with the reason for a value that is no row kind.
pub(crate) fn row_kind_of(
    schema: &TableSchema,
    row_kind_column: Option<usize>,
    kind: RowKind,
    row: &[Datum],
) -> std::result::Result<RowKind, String> {
    match row_kind_column.and_then(|i| Some((i, row.get(i)?))) {
        Some((i, Datum::String(s))) => RowKind::parse(s).ok_or_else(|| {
            format!(
                "column `{}` (rowkind.field) must be +I, -U, +U or -D, got {s:?}",
                schema.fields[i].name
            )
        }),
        _ => Ok(kind),
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
        let file_options = DataFileWriteOptions::from_table_options(
            &table.options().file_compression,
            table.options().zstd_level,
        )?;
        let mut next_sequence = HashMap::new();
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
        Ok(TableWriter {
            layout: RowLayout::new(&table),
            table,
            commit_user,
            next_commit_identifier,
            engine,
            order,
            buffers: HashMap::new(),
            next_sequence,
            pending: Vec::new(),
            buffered_bytes: 0,
            buffer_limit: DEFAULT_BUFFER_BYTES,
            file_options,
            auto_compaction,
            fence: None,
            in_doubt: None,
            known_snapshot: snapshot_id,
        })
    }

    /// Makes commits fail with `Error::ForeignCommitOfUser` if an APPEND of this writer's
    /// user newer than snapshot `seen` appears: the caller resumed its input from what
    /// it saw up to `seen`, and a later snapshot of the same user (a fenced writer's last
    /// publish, landing late) already holds input it is about to replay. The writer
    /// itself reads the latest snapshot later, which may already include that one.
    pub fn resumed_from(&mut self, seen: i64) {
        self.known_snapshot = self.known_snapshot.min(seen);
    }

    /// Makes every commit check `fence` right before publishing: once another writer
    /// claimed the table, commits fail with `Error::WriterFenced` and publish nothing.
    pub fn set_fence(&mut self, fence: Arc<WriterFence>) {
        self.fence = Some(fence);
    }

    /// Whether a failed commit is waiting to be published again.
    pub fn has_commit_in_doubt(&self) -> bool {
        self.in_doubt.is_some()
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Sets how many estimated bytes of changes are buffered before `write` asks for a
    /// flush (see [`TableWriter::needs_flush`]).
    pub fn set_buffer_limit(&mut self, bytes: usize) {
        self.buffer_limit = bytes.max(1);
    }

    /// Whether the buffer is over its limit and should be flushed.
    pub fn needs_flush(&self) -> bool {
        self.buffered_bytes >= self.buffer_limit
    }

    /// Validates one change and buffers it. A `Data` error rejects this change only; the
    /// writer is unchanged.
    pub fn write(&mut self, kind: RowKind, row: Row) -> Result<()> {
        check_row(&self.layout.schema, &row).map_err(Error::Data)?;
        // `rowkind.field`: the kind is taken from a column, as Paimon's writers do.
        let kind = row_kind_of(&self.layout.schema, self.layout.row_kind_column, kind, &row)
            .map_err(Error::Data)?;
        match self.engine.admit(kind).map_err(Error::Data)? {
            Admission::Drop => return Ok(()),
            Admission::Keep => {}
        }
        let partition = key_of(&row, &self.layout.partition_indices);
        let partition_bytes = binary_row::serialize(&partition, &self.layout.partition_types)?;
        let bucket_values = key_of(&row, &self.layout.bucket_indices);
        let bucket = bucket::bucket_of(
            &bucket_values,
            &self.layout.bucket_types,
            self.layout.num_buckets,
        )?;
        let id = (partition_bytes, bucket);
        let seq = self.next_sequence.entry(id.clone()).or_insert(0);
        let sequence_number = *seq;
        *seq += 1;
        self.buffered_bytes += estimate_row_bytes(&row);
        self.buffers
            .entry(id)
            .or_insert_with(|| BucketBuffer {
                partition,
                rows: Vec::new(),
            })
            .rows
            .push(KeyValue {
                sequence_number,
                kind,
                row,
            });
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
                    let (entries, failed) = write_files_or_return(
                        &table,
                        &partition_bytes,
                        &partition,
                        bucket,
                        folded,
                        0,
                        FileSource::Append,
                        options,
                    )
                    .await;
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
                self.buffered_bytes += rows
                    .iter()
                    .map(|kv| estimate_row_bytes(&kv.row))
                    .sum::<usize>();
                if !rows.is_empty() {
                    self.buffers.insert(id, BucketBuffer { partition, rows });
                }
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
                    if self.pending.is_empty() && same {
                        return Ok(resolved);
                    }
                }
                Err(e) => {
                    self.in_doubt = Some(prepared);
                    return Err(e);
                }
            }
        }
        if self.pending.is_empty() && properties.is_empty() {
            return Ok(resolved);
        }
        let request = CommitRequest {
            commit_user: self.commit_user.clone(),
            commit_identifier: self.next_commit_identifier,
            kind: CommitKind::Append,
            entries: std::mem::take(&mut self.pending),
            properties,
        };
        let mut prepared = match self.table.prepare_commit(request.clone()).await {
            Ok(p) => p,
            Err(e) => {
                // Nothing was published; keep the files so a retried commit has them.
                self.pending = request.entries;
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
        if let Some(auto) = &mut self.auto_compaction
            && let Err(e) = auto.after_commit(snapshot.id, entries).await
        {
            // The snapshot is committed; compaction is retried after the next one.
            tracing::warn!(table = %self.table.identifier(), error = %e,
                "could not start compaction after a commit");
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

    /// State of the background compactor, once one was started.
    pub fn compaction_state(&self) -> Option<CompactionState> {
        self.auto_compaction
            .as_ref()
            .and_then(AutoCompaction::state)
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

/// Rough in-memory size of a row, used to bound the buffer.
fn estimate_row_bytes(row: &Row) -> usize {
    64 + row
        .iter()
        .map(|d| match d {
            Datum::String(s) => 24 + s.len(),
            Datum::Bytes(b) => 24 + b.len(),
            _ => 24,
        })
        .sum::<usize>()
}

/// Checks arity, nullability and that each datum has its column's type.
pub(crate) fn check_row(schema: &TableSchema, row: &Row) -> std::result::Result<(), String> {
    if row.len() != schema.fields.len() {
        return Err(format!(
            "row has {} values, table {} columns",
            row.len(),
            schema.fields.len()
        ));
    }
    let mut problems = Vec::new();
    for (field, value) in schema.fields.iter().zip(row) {
        // A timestamp the column's Parquet unit cannot hold (a millisecond value from a
        // message beyond i64 microseconds or nanoseconds).
        if let (Datum::Timestamp(ts), DataType::Timestamp(p) | DataType::TimestampLtz(p)) =
            (value, field.data_type)
            && !ts.fits_precision(p)
        {
            problems.push(format!(
                "column `{}`: {}",
                field.name,
                timestamp_out_of_range(format_timestamp(*ts), &field.data_type)
            ));
            continue;
        }
        let ok = match (value, field.data_type) {
            (Datum::Null, _) => {
                if !field.nullable {
                    problems.push(format!(
                        "column `{}` is NOT NULL but the value is null",
                        field.name
                    ));
                }
                true
            }
            (Datum::Boolean(_), DataType::Boolean)
            | (Datum::TinyInt(_), DataType::TinyInt)
            | (Datum::SmallInt(_), DataType::SmallInt)
            | (Datum::Int(_), DataType::Int)
            | (Datum::BigInt(_), DataType::BigInt)
            | (Datum::Float(_), DataType::Float)
            | (Datum::Double(_), DataType::Double)
            | (Datum::Decimal(_), DataType::Decimal { .. })
            | (Datum::String(_), DataType::Char(_) | DataType::Varchar(_))
            | (Datum::Bytes(_), DataType::Binary(_) | DataType::Varbinary(_))
            | (Datum::Date(_), DataType::Date)
            | (Datum::Timestamp(_), DataType::Timestamp(_) | DataType::TimestampLtz(_)) => true,
            _ => false,
        };
        if !ok {
            problems.push(format!(
                "column `{}` of type {} cannot hold {value:?}",
                field.name, field.data_type
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Estimated encoded bytes per row before a new file is started.
fn rows_per_file(rows: &[KeyValue], target_file_size: u64) -> usize {
    let sample = rows
        .iter()
        .take(64)
        .map(|kv| estimate_row_bytes(&kv.row))
        .sum::<usize>();
    let per_row = (sample / rows.len().clamp(1, 64)).max(1) as u64;
    // Parquet with zstd is several times smaller than the in-memory estimate. A target
    // beyond u64::MAX / 4 (Paimon takes any long) saturates: it means files never roll.
    let rows = target_file_size.saturating_mul(4) / per_row;
    usize::try_from(rows).unwrap_or(usize::MAX).max(1024)
}

/// Writes rows (sorted by key, one per key) of one bucket as data files at `level`,
/// returning their ADD entries.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write_files(
    table: &Table,
    partition_bytes: &[u8],
    partition: &Row,
    bucket: i32,
    rows: Vec<KeyValue>,
    level: i32,
    source: FileSource,
    options: DataFileWriteOptions,
) -> Result<Vec<ManifestEntry>> {
    let (entries, failed) = write_files_or_return(
        table,
        partition_bytes,
        partition,
        bucket,
        rows,
        level,
        source,
        options,
    )
    .await;
    match failed {
        None => Ok(entries),
        Some((e, _)) => Err(e),
    }
}

/// [`write_files`], but on failure hands back what was written (files now in the store)
/// and the rows not yet in any file, so a flush can keep them instead of losing them.
#[allow(clippy::too_many_arguments)]
async fn write_files_or_return(
    table: &Table,
    partition_bytes: &[u8],
    partition: &Row,
    bucket: i32,
    rows: Vec<KeyValue>,
    level: i32,
    source: FileSource,
    options: DataFileWriteOptions,
) -> (Vec<ManifestEntry>, Option<(Error, Vec<KeyValue>)>) {
    let mut entries = Vec::new();
    let mut rows = rows;
    while !rows.is_empty() {
        let rest = rows.split_off(
            rows.len()
                .min(rows_per_file(&rows, table.options().target_file_size)),
        );
        let part = std::mem::replace(&mut rows, rest);
        match write_file(
            table,
            partition_bytes,
            partition,
            bucket,
            part,
            level,
            source,
            options,
        )
        .await
        {
            Ok(entry) => entries.push(entry),
            Err((e, mut part)) => {
                part.append(&mut rows);
                return (entries, Some((e, part)));
            }
        }
    }
    (entries, None)
}

/// Writes one data file of `part`; on failure returns the rows with the error.
#[allow(clippy::too_many_arguments)]
async fn write_file(
    table: &Table,
    partition_bytes: &[u8],
    partition: &Row,
    bucket: i32,
    part: Vec<KeyValue>,
    level: i32,
    source: FileSource,
    options: DataFileWriteOptions,
) -> std::result::Result<ManifestEntry, (Error, Vec<KeyValue>)> {
    let schema = table.schema().clone();
    let key_indices = schema.trimmed_key_indices();
    let key_types = schema.types_of(&key_indices);
    let keys: Vec<Vec<Datum>> = part
        .iter()
        .map(|kv| key_of(&kv.row, &key_indices))
        .collect();
    let stats = (|| -> Result<_> {
        let min_key = binary_row::serialize(keys.first().map_or(&[][..], |k| k), &key_types)?;
        let max_key = binary_row::serialize(keys.last().map_or(&[][..], |k| k), &key_types)?;
        Ok((min_key, max_key, column_stats(&keys, &key_types)?))
    })();
    let (min_key, max_key, key_stats) = match stats {
        Ok(stats) => stats,
        Err(e) => return Err((e, part)),
    };
    let row_count = part.len() as i64;
    let delete_row_count = part.iter().filter(|kv| kv.kind.is_retract()).count() as i64;
    let min_seq = part.iter().map(|kv| kv.sequence_number).min().unwrap_or(0);
    let max_seq = part.iter().map(|kv| kv.sequence_number).max().unwrap_or(0);
    let encode_schema = schema.clone();
    let encoded = tokio::task::spawn_blocking(move || {
        let bytes = data_file::encode_data_file(&encode_schema, &part, options);
        (bytes, part)
    })
    .await;
    let (bytes, part) = match encoded {
        Ok(done) => done,
        // The rows went down with the task; nothing to hand back.
        Err(e) => {
            return Err((Error::task("encoding task", e), Vec::new()));
        }
    };
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => return Err((e, part)),
    };
    let file_name = format!("data-{}-0.parquet", uuid::Uuid::new_v4());
    let location = table.data_file_location(partition, bucket, &file_name);
    let file_size = bytes.len() as i64;
    if let Err(e) = table.store().put(&location, PutPayload::from(bytes)).await {
        return Err((Error::store(format!("writing {location}"), e), part));
    }
    Ok(ManifestEntry {
        kind: FileKind::Add,
        partition: partition_bytes.to_vec(),
        bucket,
        total_buckets: table.options().bucket,
        file: DataFileMeta {
            file_name,
            file_size,
            row_count,
            min_key,
            max_key,
            key_stats,
            value_stats: SimpleStats::empty(),
            min_sequence_number: min_seq,
            max_sequence_number: max_seq,
            schema_id: schema.id,
            level,
            extra_files: Vec::new(),
            creation_time: Some(chrono::Utc::now().timestamp_millis()),
            delete_row_count: Some(delete_row_count),
            embedded_file_index: None,
            file_source: Some(source),
            value_stats_cols: Some(Vec::new()),
            external_path: None,
            first_row_id: None,
            write_cols: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::Timestamp;

    fn table_with(ty: &str) -> TableSchema {
        let (data_type, _) = DataType::parse(ty).unwrap();
        TableSchema::new(
            vec![
                ("id".into(), DataType::Int, false),
                ("t".into(), data_type, true),
            ],
            vec![],
            vec!["id".into()],
            BTreeMap::new(),
        )
        .unwrap()
    }

    fn ts_row(millis: i64, nanos_of_milli: u32) -> Row {
        vec![
            Datum::Int(1),
            Datum::Timestamp(Timestamp {
                millis,
                nanos_of_milli,
            }),
        ]
    }

    #[test]
    fn a_timestamp_its_column_cannot_store_is_rejected() {
        // i64 microseconds for precisions 4..=6, i64 nanoseconds for 7..=9; milliseconds
        // (0..=3) hold any i64.
        let micros = table_with("TIMESTAMP(6)");
        assert!(check_row(&micros, &ts_row(i64::MAX / 1000, 807_999)).is_ok());
        let err = check_row(&micros, &ts_row(i64::MAX / 1000, 808_000)).unwrap_err();
        assert!(
            err.contains("column `t`") && err.contains("out of range"),
            "{err}"
        );
        assert!(check_row(&micros, &ts_row(i64::MIN / 1000 - 1, 0)).is_err());
        let nanos = table_with("TIMESTAMP(9)");
        assert!(check_row(&nanos, &ts_row(i64::MAX / 1_000_000, 0)).is_ok());
        assert!(check_row(&nanos, &ts_row(i64::MAX / 1_000_000 + 1, 0)).is_err());
        let millis = table_with("TIMESTAMP_LTZ(3)");
        assert!(check_row(&millis, &ts_row(i64::MAX, 0)).is_ok());
        assert!(check_row(&millis, &ts_row(i64::MIN, 0)).is_ok());
    }

    proptest::proptest! {
        #[test]
        fn rows_per_file_never_overflows(target in proptest::num::u64::ANY, text in 0usize..10_000) {
            let rows = vec![KeyValue {
                sequence_number: 0,
                kind: RowKind::Insert,
                row: vec![Datum::String("x".repeat(text))],
            }];
            let n = rows_per_file(&rows, target);
            proptest::prop_assert!(n >= 1024);
            // A larger target never yields fewer rows per file.
            proptest::prop_assert!(rows_per_file(&rows, target.saturating_add(1)) >= n);
        }
    }
}
