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
use crate::table::data_file::{self, DataFileEncoder, DataFileWriteOptions, KeyValue};
use crate::table::schema::TableSchema;

use crate::table::datum::{Datum, Row};
use crate::table::manifest::{DataFileMeta, FileKind, FileSource, ManifestEntry, SimpleStats};

/// Rough in-memory size of a row, used to bound the write buffer and to size files.
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
    /// losing them.
    pub(crate) async fn write_or_return(
        &self,
        rows: Vec<KeyValue>,
    ) -> (Vec<ManifestEntry>, Option<(Error, Vec<KeyValue>)>) {
        let mut entries = Vec::new();
        let mut rows = rows;
        while !rows.is_empty() {
            let rest = rows.split_off(
                rows.len()
                    .min(rows_per_file(&rows, self.table.options().target_file_size)),
            );
            let part = std::mem::replace(&mut rows, rest);
            match self.write_file(part).await {
                Ok(entry) => entries.push(entry),
                Err((e, mut part)) => {
                    part.append(&mut rows);
                    return (entries, Some((e, part)));
                }
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
    pub(crate) async fn write_stream(
        &self,
        rows: RowStream,
        expected_rows: usize,
    ) -> Result<Vec<ManifestEntry>> {
        let schema = self.table.schema().clone();
        let options = self.options;
        let target = self.table.options().target_file_size;
        let mut entries = Vec::new();
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
                None => return Ok(entries),
            }
        }
    }

    /// Writes one data file of `part`; on failure returns the rows with the error.
    async fn write_file(
        &self,
        part: Vec<KeyValue>,
    ) -> std::result::Result<ManifestEntry, (Error, Vec<KeyValue>)> {
        let schema = self.table.schema().clone();
        let mut stats = FileStats::new(&schema);
        stats.add(&part);
        let options = self.options;
        let encoded = tokio::task::spawn_blocking(move || {
            let bytes = data_file::encode_data_file(&schema, &part, options);
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
        match self.store(bytes, stats).await {
            Ok(entry) => Ok(entry),
            Err(e) => Err((e, part)),
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

/// Rows to write, sorted by key, read as they are written (a merge of sorted runs).
pub(crate) type RowStream = Box<dyn Iterator<Item = Result<KeyValue>> + Send>;

/// Rows encoded at a time by [`FileTarget::write_stream`]: how often it checks a file's
/// size, as Java's rolling writer checks every 1,000 records.
const STREAM_CHUNK_ROWS: usize = 1024;

/// Encodes rows from `rows` into one file until its encoded size reaches `target` or the
/// rows end; `None` when no row was left.
fn encode_next_file(
    rows: &mut RowStream,
    schema: &TableSchema,
    options: DataFileWriteOptions,
    target: u64,
    expected_rows: usize,
) -> Result<Option<(Bytes, FileStats)>> {
    let mut encoder: Option<DataFileEncoder> = None;
    let mut stats = FileStats::new(schema);
    let mut chunk = Vec::with_capacity(STREAM_CHUNK_ROWS);
    loop {
        chunk.clear();
        for row in rows.by_ref().take(STREAM_CHUNK_ROWS) {
            chunk.push(row?);
        }
        if chunk.is_empty() {
            break;
        }
        let file = match &mut encoder {
            Some(file) => file,
            None => encoder.insert(DataFileEncoder::new(schema, options, expected_rows)?),
        };
        file.write(&chunk)?;
        stats.add(&chunk);
        if file.estimated_size() as u64 >= target {
            break;
        }
    }
    match encoder {
        Some(file) => Ok(Some((file.finish()?, stats))),
        None => Ok(None),
    }
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

    /// A stream of rows is written as files rolled at `target-file-size` (encoded), each
    /// whole and in order, with the key range, counts and sequence bounds of its rows.
    #[tokio::test]
    async fn a_stream_is_written_as_files_rolled_at_the_target_size() {
        use crate::table::testkit::keyed_schema;
        use crate::table::types::DataType;
        use crate::table::{TableIdentifier, Warehouse};

        let schema = keyed_schema(
            &[("id", DataType::Int), ("note", DataType::Varchar(200))],
            &["id"],
            &[
                ("bucket", "1"),
                ("target-file-size", "160 kb"),
                ("file.compression", "none"),
            ],
        );
        let id = TableIdentifier::parse("db.t").unwrap();
        let table = Table::create(&Warehouse::in_memory(), &id, schema)
            .await
            .unwrap();
        let rows: Vec<KeyValue> = (0..20_000)
            .map(|i| KeyValue {
                sequence_number: 100 + i64::from(i),
                kind: if i % 10 == 0 {
                    RowKind::Delete
                } else {
                    RowKind::Insert
                },
                row: vec![Datum::Int(i), Datum::String(format!("note {}", i * 7919))],
            })
            .collect();
        let partition = Vec::new();
        let partition_bytes = binary_row::serialize(&[], &[]).unwrap();
        let target = FileTarget {
            table: &table,
            partition_bytes: &partition_bytes,
            partition: &partition,
            bucket: 0,
            level: 3,
            source: FileSource::Compact,
            options: DataFileWriteOptions::from_table_options("none", 1).unwrap(),
            changelog: false,
        };
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
