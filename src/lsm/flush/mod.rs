//! Writing sorted rows as data files: what a flush of the write buffer and a compaction
//! both end with. A [`FileTarget`] names where the files go (table, partition, bucket,
//! level, why); [`FileTarget::write`] rolls files at `target-file-size`, encodes each off
//! the async runtime and stores it, and returns the manifest entries to commit. The rows
//! come as rows (a flush, a merge) or as columns (a compaction's files that need no
//! merge), encoded a chunk at a time either way. Its own module so that the writer and
//! the compactor both depend on it and not on each other.

use std::borrow::Cow;

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};

use super::merge::key_of;
use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::binary_row;
use crate::table::commit::ColumnStatsBuilder;
use crate::table::data_file::{ColumnBatch, DataFileEncoder, DataFileWriteOptions, KeyValue};
use crate::table::schema::TableSchema;

use crate::table::datum::{Datum, Row};
use crate::table::manifest::{DataFileMeta, FileKind, FileSource, ManifestEntry, SimpleStats};

/// Rough in-memory size of a row, used to bound the write buffer.
pub(crate) fn estimate_row_bytes(row: &Row) -> usize {
    64 + row
        .iter()
        .map(|d| match d {
            Datum::String(s) => 24 + s.len(),
            Datum::Bytes(b) => 24 + b.len(),
            _ => 24,
        })
        .sum::<usize>()
}

/// Where a run of rows goes: one bucket of one partition of a table, at one level.
pub(crate) struct FileTarget<'a> {
    pub(crate) table: &'a Table,
    pub(crate) partition_bytes: &'a [u8],
    pub(crate) partition: &'a Row,
    pub(crate) bucket: i32,
    pub(crate) level: i32,
    /// Why the files are written: a flush (`Append`) or a compaction.
    pub(crate) source: FileSource,
    pub(crate) options: DataFileWriteOptions,
    /// Changelog files (`changelog-<uuid>-0.parquet`, docs/format.md §3.1) rather than
    /// data files: the same layout, several rows of a key allowed.
    pub(crate) changelog: bool,
}

impl FileTarget<'_> {
    /// Writes rows (sorted by key, one per key; a changelog may hold several of a key, in
    /// sequence order) as data files, rolling at the table's
    /// `target-file-size`, and returns their ADD entries.
    pub(crate) async fn write(&self, rows: Vec<KeyValue>) -> Result<Vec<ManifestEntry>> {
        match self.write_or_return(rows).await {
            (entries, None) => Ok(entries),
            (_, Some((e, _))) => Err(e),
        }
    }

    /// [`Self::write`], but on failure hands back what was written (files now in the
    /// store) and the rows not yet in any file, so a flush can keep them instead of
    /// losing them. Files roll at the encoded `target-file-size`, as
    /// [`Self::write_stream`]'s do; the rows are encoded off the async runtime, a chunk
    /// at a time, in place.
    pub(crate) async fn write_or_return(
        &self,
        rows: Vec<KeyValue>,
    ) -> (Vec<ManifestEntry>, Option<(Error, Vec<KeyValue>)>) {
        let schema = self.table.schema().clone();
        let options = self.options;
        let target = self.table.options().target_file_size;
        let mut entries = Vec::new();
        let mut rows = rows;
        let mut start = 0;
        while start < rows.len() {
            let schema = schema.clone();
            let encoded = tokio::task::spawn_blocking(move || {
                let file = encode_file_from(&rows, start, &schema, options, target);
                (rows, file)
            })
            .await;
            let file;
            (rows, file) = match encoded {
                Ok(done) => done,
                // The rows went down with the task; nothing to hand back. Not lost: a
                // task error is fatal, so the pipeline stops before committing them.
                Err(e) => return (entries, Some((Error::task("encoding task", e), Vec::new()))),
            };
            let stored = match file {
                Ok((bytes, stats, end)) => self.store(bytes, stats).await.map(|entry| (entry, end)),
                Err(e) => Err(e),
            };
            match stored {
                Ok((entry, end)) => {
                    entries.push(entry);
                    start = end;
                }
                Err(e) => return (entries, Some((e, rows.split_off(start)))),
            }
        }
        (entries, None)
    }

    /// Writes `rows` (sorted by key, one per key), as they come, as data files rolled when
    /// a file's encoded size reaches `target-file-size`, as Java's rolling writer rolls
    /// them; returns their ADD entries. Only a chunk of rows and the open file's bytes
    /// are held, so a compaction's memory does not grow with the bucket. The rows are
    /// read and encoded off the async runtime. `expected_rows` (an upper bound) sizes
    /// the bloom filters.
    ///
    /// On an error (a row that fails to come or to encode, a failed store) the files
    /// already rolled are deleted: no commit will reference them, and a compaction that
    /// fails midway must not leave them for orphan cleaning.
    pub(crate) async fn write_stream(
        &self,
        rows: RowStream,
        expected_rows: usize,
    ) -> Result<Vec<ManifestEntry>> {
        self.write_sorted(SortedInput::Rows(rows), expected_rows)
            .await
    }

    /// [`Self::write_stream`] of rows that come as columns (files whose rows need no
    /// merge, one after the other): the same rows give the same files, without a row
    /// made of them.
    pub(crate) async fn write_columns(
        &self,
        batches: ColumnStream,
        expected_rows: usize,
    ) -> Result<Vec<ManifestEntry>> {
        let chunks = ColumnChunks {
            batches,
            rest: None,
        };
        self.write_sorted(SortedInput::Columns(Box::new(chunks)), expected_rows)
            .await
    }

    async fn write_sorted(
        &self,
        input: SortedInput,
        expected_rows: usize,
    ) -> Result<Vec<ManifestEntry>> {
        let mut entries = Vec::new();
        match self.roll_stream(input, expected_rows, &mut entries).await {
            Ok(()) => Ok(entries),
            Err(e) => {
                delete_data_files(self.table, entries.iter()).await;
                Err(e)
            }
        }
    }

    /// [`Self::write_sorted`]'s files, pushed to `entries` as each is stored.
    async fn roll_stream(
        &self,
        input: SortedInput,
        expected_rows: usize,
        entries: &mut Vec<ManifestEntry>,
    ) -> Result<()> {
        let schema = self.table.schema().clone();
        let options = self.options;
        let target = self.table.options().target_file_size;
        let mut input = input;
        loop {
            let schema = schema.clone();
            let encoded = tokio::task::spawn_blocking(move || {
                let file = encode_next_file(&mut input, &schema, options, target, expected_rows);
                (input, file)
            })
            .await
            .map_err(|e| Error::task("encoding task", e))?;
            let file;
            (input, file) = encoded;
            match file? {
                Some((bytes, stats)) => entries.push(self.store(bytes, stats).await?),
                None => return Ok(()),
            }
        }
    }

    /// Stores an encoded file and returns its ADD entry.
    async fn store(&self, bytes: Bytes, stats: FileStats) -> Result<ManifestEntry> {
        let FileTarget {
            table,
            partition_bytes,
            partition,
            bucket,
            level,
            source,
            changelog,
            ..
        } = *self;
        let schema = table.schema();
        let key_types = schema.types_of(&schema.trimmed_key_indices());
        let empty = Vec::new();
        let min_key =
            binary_row::serialize(stats.first_key.as_ref().unwrap_or(&empty), &key_types)?;
        let max_key = binary_row::serialize(stats.last_key.as_ref().unwrap_or(&empty), &key_types)?;
        let key_stats = stats.keys.finish(&key_types)?;
        let prefix = if changelog { "changelog" } else { "data" };
        let file_name = format!("{prefix}-{}-0.parquet", uuid::Uuid::new_v4());
        let location = table.data_file_location(partition, bucket, &file_name);
        let file_size = bytes.len() as i64;
        table
            .store()
            .put(&location, PutPayload::from(bytes))
            .await
            .map_err(|e| Error::store(format!("writing {location}"), e))?;
        Ok(ManifestEntry {
            kind: FileKind::Add,
            partition: partition_bytes.to_vec(),
            bucket,
            total_buckets: table.options().bucket,
            file: DataFileMeta {
                file_name,
                file_size,
                row_count: stats.counts.rows,
                min_key,
                max_key,
                key_stats,
                value_stats: SimpleStats::empty(),
                min_sequence_number: stats.counts.min_sequence.unwrap_or(0),
                max_sequence_number: stats.counts.max_sequence.unwrap_or(0),
                schema_id: schema.id,
                level,
                extra_files: Vec::new(),
                creation_time: Some(chrono::Utc::now().timestamp_millis()),
                delete_row_count: Some(stats.counts.deletes),
                embedded_file_index: None,
                file_source: Some(source),
                value_stats_cols: Some(Vec::new()),
                external_path: None,
                first_row_id: None,
                write_cols: None,
            },
        })
    }
}

/// Best-effort removal of written files that nothing will reference; whatever stays
/// behind is removed by orphan cleaning.
pub(crate) async fn delete_data_files(
    table: &Table,
    entries: impl Iterator<Item = &ManifestEntry>,
) {
    for entry in entries {
        if let Ok(path) = table.data_file_path(entry)
            && let Err(e) = table.store().delete(&path).await
        {
            tracing::debug!(path = %path, error = %e, "could not remove an unused data file");
        }
    }
}

/// Rows to write, sorted by key, read as they are written (a merge of sorted runs).
pub(crate) type RowStream = Box<dyn Iterator<Item = Result<KeyValue>> + Send>;

/// Rows to write as columns, sorted by key, read as they are written (the batches of
/// files that need no merge, one file after the other).
pub(crate) type ColumnStream = Box<dyn Iterator<Item = Result<ColumnBatch>> + Send>;

/// What files are encoded from, a file at a time.
enum SortedInput {
    Rows(RowStream),
    Columns(Box<ColumnChunks>),
}

impl SortedInput {
    /// The next `STREAM_CHUNK_ROWS` rows (fewer at the end); `None` when none is left.
    fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        match self {
            SortedInput::Rows(rows) => {
                let chunk = rows
                    .by_ref()
                    .take(STREAM_CHUNK_ROWS)
                    .collect::<Result<Vec<_>>>()?;
                Ok((!chunk.is_empty()).then_some(Chunk::Rows(chunk)))
            }
            SortedInput::Columns(chunks) => {
                Ok(chunks.next_chunk(STREAM_CHUNK_ROWS)?.map(Chunk::Columns))
            }
        }
    }
}

/// Rows encoded at once.
enum Chunk {
    Rows(Vec<KeyValue>),
    Columns(ColumnBatch),
}

impl Chunk {
    /// The rows, as rows: what chooses a file's encodings when the file starts with them.
    fn rows(&self, schema: &TableSchema) -> Result<Cow<'_, [KeyValue]>> {
        Ok(match self {
            Chunk::Rows(rows) => Cow::Borrowed(rows),
            Chunk::Columns(columns) => Cow::Owned(columns.rows(&schema.fields, 0, None)?),
        })
    }
}

/// A [`ColumnStream`] taken `STREAM_CHUNK_ROWS` rows at a time, as a [`RowStream`] is
/// (across the ends of its batches), so that the same rows make the same files.
struct ColumnChunks {
    batches: ColumnStream,
    /// What is left of a batch the last chunk ended in.
    rest: Option<ColumnBatch>,
}

impl ColumnChunks {
    /// The next `rows` rows (fewer at the end); `None` when none is left.
    fn next_chunk(&mut self, rows: usize) -> Result<Option<ColumnBatch>> {
        let mut parts = Vec::new();
        let mut have = 0;
        while have < rows {
            let batch = match self.rest.take() {
                Some(batch) => batch,
                None => match self.batches.next() {
                    Some(batch) => batch?,
                    None => break,
                },
            };
            let take = (rows - have).min(batch.len());
            if take < batch.len() {
                self.rest = Some(batch.slice(take, batch.len() - take));
                parts.push(batch.slice(0, take));
            } else if take > 0 {
                parts.push(batch);
            }
            have += take;
        }
        if parts.is_empty() {
            return Ok(None);
        }
        ColumnBatch::concat(&parts).map(Some)
    }
}

/// Rows encoded at a time by [`FileTarget::write_stream`]: how often it checks a file's
/// size, as Java's rolling writer checks every 1,000 records.
const STREAM_CHUNK_ROWS: usize = 1024;
// A file's first chunk holds the rows that choose its columns' encodings.
const _: () = assert!(STREAM_CHUNK_ROWS >= crate::table::dictionary_choice::SAMPLE_ROWS);

/// One data file being filled until its encoded size reaches the target: what both
/// ways of writing files roll by.
struct RollingFile {
    encoder: DataFileEncoder,
    stats: FileStats,
    target: u64,
}

impl RollingFile {
    /// `first_rows`: the rows the file starts with (their first page decides its
    /// columns' encodings).
    fn new(
        schema: &TableSchema,
        options: DataFileWriteOptions,
        target: u64,
        expected_rows: usize,
        first_rows: &[KeyValue],
    ) -> Result<Self> {
        Ok(RollingFile {
            encoder: DataFileEncoder::new(schema, options, expected_rows, first_rows)?,
            stats: FileStats::new(schema),
            target,
        })
    }

    /// Adds rows that follow those already added; `true` once the file is full.
    fn add(&mut self, rows: &[KeyValue]) -> Result<bool> {
        self.encoder.write(rows)?;
        self.stats.add(rows);
        Ok(self.encoder.estimated_size() as u64 >= self.target)
    }

    /// [`Self::add`] of rows as columns, of `schema`.
    fn add_columns(&mut self, rows: &ColumnBatch, schema: &TableSchema) -> Result<bool> {
        self.encoder.write_columns(rows)?;
        self.stats.add_columns(rows, schema)?;
        Ok(self.encoder.estimated_size() as u64 >= self.target)
    }

    fn finish(self) -> Result<(Bytes, FileStats)> {
        Ok((self.encoder.finish()?, self.stats))
    }
}

/// Encodes rows from `input` into one file until its encoded size reaches `target` or the
/// rows end; `None` when no row was left.
fn encode_next_file(
    input: &mut SortedInput,
    schema: &TableSchema,
    options: DataFileWriteOptions,
    target: u64,
    expected_rows: usize,
) -> Result<Option<(Bytes, FileStats)>> {
    let mut file: Option<RollingFile> = None;
    while let Some(chunk) = input.next_chunk()? {
        let open = match &mut file {
            Some(open) => open,
            None => file.insert(RollingFile::new(
                schema,
                options,
                target,
                expected_rows,
                &chunk.rows(schema)?,
            )?),
        };
        let full = match &chunk {
            Chunk::Rows(rows) => open.add(rows)?,
            Chunk::Columns(columns) => open.add_columns(columns, schema)?,
        };
        if full {
            break;
        }
    }
    file.map(RollingFile::finish).transpose()
}

/// Encodes `rows[start..]` into one file until its encoded size reaches `target` or the
/// rows end (at least one row: `start` is before the end); returns the file and where
/// the next one starts.
fn encode_file_from(
    rows: &[KeyValue],
    start: usize,
    schema: &TableSchema,
    options: DataFileWriteOptions,
    target: u64,
) -> Result<(Bytes, FileStats, usize)> {
    let rest = rows.get(start..).unwrap_or_default();
    let mut file = RollingFile::new(schema, options, target, rest.len(), rest)?;
    let mut end = start;
    for chunk in rest.chunks(STREAM_CHUNK_ROWS) {
        end += chunk.len();
        if file.add(chunk)? {
            break;
        }
    }
    let (bytes, stats) = file.finish()?;
    Ok((bytes, stats, end))
}

/// What a data file's manifest entry says of its rows, gathered as they are encoded.
struct FileStats {
    key_indices: Vec<usize>,
    first_key: Option<Vec<Datum>>,
    last_key: Option<Vec<Datum>>,
    keys: ColumnStatsBuilder,
    counts: RowCounts,
}

/// A file's rows, retractions and sequence numbers.
#[derive(Default)]
struct RowCounts {
    rows: i64,
    deletes: i64,
    min_sequence: Option<i64>,
    max_sequence: Option<i64>,
}

impl FileStats {
    fn new(schema: &TableSchema) -> Self {
        let key_indices = schema.trimmed_key_indices();
        FileStats {
            keys: ColumnStatsBuilder::new(key_indices.len()),
            key_indices,
            first_key: None,
            last_key: None,
            counts: RowCounts::default(),
        }
    }

    /// Adds rows that follow those already added.
    fn add(&mut self, rows: &[KeyValue]) {
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return;
        };
        if self.first_key.is_none() {
            self.first_key = Some(key_of(&first.row, &self.key_indices));
        }
        self.last_key = Some(key_of(&last.row, &self.key_indices));
        for kv in rows {
            let key = self
                .key_indices
                .iter()
                .map(|&i| kv.row.get(i).unwrap_or(&Datum::Null));
            Self::add_row(
                &mut self.keys,
                &mut self.counts,
                key,
                kv.kind.is_retract(),
                kv.sequence_number,
            );
        }
    }

    /// [`Self::add`] of rows as columns, of `schema`: only the key columns are made
    /// datums.
    fn add_columns(&mut self, rows: &ColumnBatch, schema: &TableSchema) -> Result<()> {
        let keys = rows.rows_of_columns(&schema.fields, &self.key_indices)?;
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            return Ok(());
        };
        if self.first_key.is_none() {
            self.first_key = Some(first.clone());
        }
        self.last_key = Some(last.clone());
        for (r, key) in keys.iter().enumerate() {
            Self::add_row(
                &mut self.keys,
                &mut self.counts,
                key,
                rows.kind_at(r)?.is_retract(),
                rows.sequence.value(r),
            );
        }
        Ok(())
    }

    fn add_row<'a>(
        keys: &mut ColumnStatsBuilder,
        counts: &mut RowCounts,
        key: impl IntoIterator<Item = &'a Datum>,
        retract: bool,
        sequence: i64,
    ) {
        keys.add(key);
        counts.rows += 1;
        counts.deletes += i64::from(retract);
        counts.min_sequence = Some(counts.min_sequence.map_or(sequence, |m| m.min(sequence)));
        counts.max_sequence = Some(counts.max_sequence.map_or(sequence, |m| m.max(sequence)));
    }
}

#[cfg(test)]
mod tests;
