//! Full compaction: rewrites every bucket's files as one sorted run on the highest level,
//! committed as a COMPACT snapshot (DELETE entries for the inputs, ADD for the outputs).

use std::collections::BTreeMap;

use super::merge::{MergeEngine, SequenceOrder};
use super::reader::{group_by_bucket, read_and_merge};
use super::writer::write_files;
use crate::error::Result;
use crate::table::Table;
use crate::table::commit::CommitRequest;
use crate::table::data_file::DataFileWriteOptions;
use crate::table::manifest::{FileKind, FileSource, ManifestEntry};
use crate::table::snapshot::{CommitKind, Snapshot};

/// Highest level of Paimon's default LSM (`num-levels` = 6); full compaction writes here.
pub const MAX_LEVEL: i32 = 5;

/// Compacts every bucket that has more than one file, or any level-0 file or retraction.
/// Returns the COMPACT snapshot, or `None` when the table was already compact.
pub async fn full_compact(table: &Table, commit_user: &str) -> Result<Option<Snapshot>> {
    let Some(latest) = table.latest_snapshot().await? else {
        return Ok(None);
    };
    let engine = MergeEngine::new(table.schema(), table.options())?;
    let order = SequenceOrder::new(table.schema(), table.options())?;
    let options = DataFileWriteOptions::from_table_options(
        &table.options().file_compression,
        table.options().zstd_level,
    )?;
    let mut entries: Vec<ManifestEntry> = Vec::new();
    for ((partition_bytes, bucket), files) in group_by_bucket(table.live_files(&latest).await?) {
        let already_compact = files.len() == 1
            && files[0].file.level == MAX_LEVEL
            && files[0].file.delete_row_count.unwrap_or(0) == 0;
        if already_compact {
            continue;
        }
        // Every version of every key is in these files, so retractions have nothing left
        // to hide and are dropped.
        let merged: Vec<_> = read_and_merge(table, &files, &engine, &order)
            .await?
            .into_iter()
            .filter(|kv| !kv.kind.is_retract())
            .collect();
        let partition = table.partition_values(&partition_bytes)?;
        let outputs = write_files(
            table,
            &partition_bytes,
            &partition,
            bucket,
            merged,
            MAX_LEVEL,
            FileSource::Compact,
            options,
        )
        .await?;
        for f in files {
            entries.push(ManifestEntry {
                kind: FileKind::Delete,
                ..f
            });
        }
        entries.extend(outputs);
    }
    if entries.is_empty() {
        return Ok(None);
    }
    let request = CommitRequest {
        commit_user: commit_user.to_string(),
        commit_identifier: crate::table::snapshot::BATCH_COMMIT_IDENTIFIER,
        kind: CommitKind::Compact,
        entries,
        properties: BTreeMap::new(),
    };
    Ok(Some(table.commit(request).await?))
}
