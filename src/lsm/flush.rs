//! Writing sorted rows as data files: what a flush of the write buffer and a compaction
//! both end with. A [`FileTarget`] names where the files go (table, partition, bucket,
//! level, why); [`FileTarget::write`] rolls files at `target-file-size`, encodes each off
//! the async runtime and stores it, and returns the manifest entries to commit. Its own
//! module so that the writer and the compactor both depend on it and not on each other.

use object_store::{ObjectStoreExt, PutPayload};

use super::merge::key_of;
use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::binary_row;
use crate::table::commit::column_stats;
use crate::table::data_file::{self, DataFileWriteOptions, KeyValue};

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

    /// Writes one data file of `part`; on failure returns the rows with the error.
    async fn write_file(
        &self,
        part: Vec<KeyValue>,
    ) -> std::result::Result<ManifestEntry, (Error, Vec<KeyValue>)> {
        let FileTarget {
            table,
            partition_bytes,
            partition,
            bucket,
            level,
            source,
            options,
            changelog,
        } = *self;
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
        let prefix = if changelog { "changelog" } else { "data" };
        let file_name = format!("{prefix}-{}-0.parquet", uuid::Uuid::new_v4());
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::row_kind::RowKind;

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
