//! Writing sorted rows as data files: what a flush of the write buffer and a compaction
//! both end with. A [`FileTarget`] names where the files go (table, partition, bucket,
//! level, why); [`FileTarget::write`] rolls files at `target-file-size`, encodes each off
//! the async runtime and stores it, and returns the manifest entries to commit. Its own
//! module so that the writer and the compactor both depend on it and not on each other.

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};

use super::merge::key_of;
use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::binary_row;
use crate::table::commit::ColumnStatsBuilder;
use crate::table::data_file::{DataFileEncoder, DataFileWriteOptions, KeyValue};
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
        let mut entries = Vec::new();
        match self.roll_stream(rows, expected_rows, &mut entries).await {
            Ok(()) => Ok(entries),
            Err(e) => {
                delete_data_files(self.table, entries.iter()).await;
                Err(e)
            }
        }
    }

    /// [`Self::write_stream`]'s files, pushed to `entries` as each is stored.
    async fn roll_stream(
        &self,
        rows: RowStream,
        expected_rows: usize,
        entries: &mut Vec<ManifestEntry>,
    ) -> Result<()> {
        let schema = self.table.schema().clone();
        let options = self.options;
        let target = self.table.options().target_file_size;
        let mut rows = rows;
        loop {
            let schema = schema.clone();
            let encoded = tokio::task::spawn_blocking(move || {
                let file = encode_next_file(&mut rows, &schema, options, target, expected_rows);
                (rows, file)
            })
            .await
            .map_err(|e| Error::task("encoding task", e))?;
            let file;
            (rows, file) = encoded;
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
                row_count: stats.rows,
                min_key,
                max_key,
                key_stats,
                value_stats: SimpleStats::empty(),
                min_sequence_number: stats.min_sequence.unwrap_or(0),
                max_sequence_number: stats.max_sequence.unwrap_or(0),
                schema_id: schema.id,
                level,
                extra_files: Vec::new(),
                creation_time: Some(chrono::Utc::now().timestamp_millis()),
                delete_row_count: Some(stats.deletes),
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

    fn finish(self) -> Result<(Bytes, FileStats)> {
        Ok((self.encoder.finish()?, self.stats))
    }
}

/// Encodes rows from `rows` into one file until its encoded size reaches `target` or the
/// rows end; `None` when no row was left.
fn encode_next_file(
    rows: &mut RowStream,
    schema: &TableSchema,
    options: DataFileWriteOptions,
    target: u64,
    expected_rows: usize,
) -> Result<Option<(Bytes, FileStats)>> {
    let mut file: Option<RollingFile> = None;
    let mut chunk = Vec::with_capacity(STREAM_CHUNK_ROWS);
    loop {
        chunk.clear();
        for row in rows.by_ref().take(STREAM_CHUNK_ROWS) {
            chunk.push(row?);
        }
        if chunk.is_empty() {
            break;
        }
        let open = match &mut file {
            Some(open) => open,
            None => file.insert(RollingFile::new(
                schema,
                options,
                target,
                expected_rows,
                &chunk,
            )?),
        };
        if open.add(&chunk)? {
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
            rows: 0,
            deletes: 0,
            min_sequence: None,
            max_sequence: None,
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
            self.keys.add(
                self.key_indices
                    .iter()
                    .map(|&i| kv.row.get(i).unwrap_or(&Datum::Null)),
            );
            self.rows += 1;
            self.deletes += i64::from(kv.kind.is_retract());
            let seq = kv.sequence_number;
            self.min_sequence = Some(self.min_sequence.map_or(seq, |m| m.min(seq)));
            self.max_sequence = Some(self.max_sequence.map_or(seq, |m| m.max(seq)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::row_kind::RowKind;
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;
    use crate::table::{TableIdentifier, Warehouse};

    /// An in-memory table of one bucket, keyed by an INT, with a string column, rolling
    /// files at `target_file_size`, uncompressed.
    async fn table_rolling_at(target_file_size: &str) -> Table {
        let schema = keyed_schema(
            &[("id", DataType::Int), ("note", DataType::Varchar(200))],
            &["id"],
            &[
                ("bucket", "1"),
                ("target-file-size", target_file_size),
                ("file.compression", "none"),
            ],
        );
        let id = TableIdentifier::parse("db.t").unwrap();
        Table::create(&Warehouse::in_memory(), &id, schema)
            .await
            .unwrap()
    }

    /// Compaction output of `table`'s unpartitioned bucket 0 at `level`.
    fn compaction_target<'a>(
        table: &'a Table,
        partition: &'a Row,
        partition_bytes: &'a [u8],
        level: i32,
    ) -> FileTarget<'a> {
        FileTarget {
            table,
            partition_bytes,
            partition,
            bucket: 0,
            level,
            source: FileSource::Compact,
            options: DataFileWriteOptions::from_table_options("none", 1).unwrap(),
            changelog: false,
        }
    }

    /// A stream of rows is written as files rolled at `target-file-size` (encoded), each
    /// whole and in order, with the key range, counts and sequence bounds of its rows.
    #[tokio::test]
    async fn a_stream_is_written_as_files_rolled_at_the_target_size() {
        let table = table_rolling_at("160 kb").await;
        let rows: Vec<KeyValue> = (0..20_000)
            .map(|i| KeyValue {
                sequence_number: 100 + i64::from(i),
                kind: if i % 10 == 0 {
                    RowKind::Delete
                } else {
                    RowKind::Insert
                },
                row: vec![
                    Datum::Int(i),
                    Datum::String(format!("note {}", i * 7919).into()),
                ],
            })
            .collect();
        let partition = Vec::new();
        let partition_bytes = binary_row::serialize(&[], &[]).unwrap();
        let target = compaction_target(&table, &partition, &partition_bytes, 3);
        let stream: RowStream = Box::new(rows.clone().into_iter().map(Ok));
        let entries = target.write_stream(stream, rows.len()).await.unwrap();
        assert!(entries.len() > 2, "{} files", entries.len());
        let mut read = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let file_rows = table.read_data_file(entry, None).await.unwrap();
            let meta = &entry.file;
            assert_eq!(meta.level, 3);
            assert_eq!(meta.row_count, file_rows.len() as i64);
            let deletes = file_rows.iter().filter(|kv| kv.kind.is_retract()).count();
            assert_eq!(meta.delete_row_count, Some(deletes as i64));
            let first = file_rows.first().unwrap();
            let last = file_rows.last().unwrap();
            let key_types = [DataType::Int];
            assert_eq!(
                meta.min_key,
                binary_row::serialize(&first.row[..1], &key_types).unwrap()
            );
            assert_eq!(
                meta.max_key,
                binary_row::serialize(&last.row[..1], &key_types).unwrap()
            );
            assert_eq!(meta.min_sequence_number, first.sequence_number);
            assert_eq!(meta.max_sequence_number, last.sequence_number);
            if i + 1 < entries.len() {
                // Rolled once past the target, not long after: one chunk at most.
                assert!(
                    meta.file_size >= 160 * 1024,
                    "file {i}: {} bytes",
                    meta.file_size
                );
                assert!(
                    meta.file_size < 160 * 1024 * 2,
                    "file {i}: {} bytes",
                    meta.file_size
                );
            }
            read.extend(file_rows);
        }
        assert_eq!(read, rows);
        // Rows held in memory (a flush) roll at the same points, into the same files.
        let counts = |entries: &[ManifestEntry]| -> Vec<(i64, i64)> {
            entries
                .iter()
                .map(|e| (e.file.row_count, e.file.file_size))
                .collect()
        };
        let flushed = target.write(rows.clone()).await.unwrap();
        assert_eq!(counts(&flushed), counts(&entries));
        // A row that fails to encode fails its file: the files before it are written, and
        // every row from that file's first on is handed back.
        let mut bad = rows.clone();
        bad.last_mut().unwrap().row.truncate(1);
        let (written, failed) = target.write_or_return(bad.clone()).await;
        let (err, back) = failed.expect("the short row fails");
        assert!(err.to_string().contains("row has 1 values"), "{err}");
        assert_eq!(counts(&written), counts(&entries[..entries.len() - 1]));
        let kept: i64 = written.iter().map(|e| e.file.row_count).sum();
        assert_eq!(back.as_slice(), &bad[kept as usize..]);
        // Nothing to write, no file.
        let empty: RowStream = Box::new(std::iter::empty());
        assert!(target.write_stream(empty, 0).await.unwrap().is_empty());
        // A row that fails to come is the write's error.
        let failing: RowStream = Box::new(
            rows.clone()
                .into_iter()
                .take(10)
                .map(Ok)
                .chain(std::iter::once(Err(Error::format("broken input")))),
        );
        let err = target.write_stream(failing, 10).await.unwrap_err();
        assert!(err.to_string().contains("broken input"), "{err}");
    }

    /// A stream that fails after files were rolled leaves none of them behind.
    #[tokio::test]
    async fn a_failed_stream_deletes_the_files_it_rolled() {
        use futures::TryStreamExt;

        let table = table_rolling_at("64 kb").await;
        let partition = Vec::new();
        let partition_bytes = binary_row::serialize(&[], &[]).unwrap();
        let target = compaction_target(&table, &partition, &partition_bytes, 1);
        let data_files = || async {
            let all: Vec<_> = table.store().list(None).try_collect().await.unwrap();
            all.into_iter()
                .filter(|m| {
                    m.location
                        .filename()
                        .is_some_and(|f| f.starts_with("data-"))
                })
                .count()
        };
        let rows = (0..10_000).map(|i| {
            Ok(KeyValue {
                sequence_number: i64::from(i),
                kind: RowKind::Insert,
                row: vec![
                    Datum::Int(i),
                    Datum::String(format!("note {}", i * 7919).into()),
                ],
            })
        });
        // The same rows without the failure roll several files: the failure comes after
        // some were stored.
        let whole: RowStream = Box::new(rows.clone());
        let written = target.write_stream(whole, 10_000).await.unwrap();
        assert!(written.len() > 2, "{} files", written.len());
        assert_eq!(data_files().await, written.len());
        delete_data_files(&table, written.iter()).await;
        assert_eq!(data_files().await, 0);
        let failing: RowStream =
            Box::new(rows.chain(std::iter::once(Err(Error::format("input vanished")))));
        let err = target.write_stream(failing, 10_000).await.unwrap_err();
        assert!(err.to_string().contains("input vanished"), "{err}");
        assert_eq!(data_files().await, 0);
    }
}
