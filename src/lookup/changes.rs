//! The primary keys a refresh changed, read from the files it made visible.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};

use crate::error::Result;
use crate::table::data_file::KeyValue;
use crate::table::datum::{Datum, Row};
use crate::table::deletion_vector::DeletionFiles;
use crate::table::manifest::ManifestEntry;
use crate::table::{IO_CONCURRENCY, Table, binary_row};

/// Distinct primary keys, each serialized (BinaryRow of the key columns, the partial
/// cache's key) and as values in `primary_keys` order, with the versions the files hold.
#[derive(Debug, Default)]
pub(crate) struct ChangedKeys {
    pub(crate) keys: Vec<(Vec<u8>, Vec<Datum>)>,
    /// The versions of `keys[i]` in the files (partition values filled in).
    pub(crate) versions: Vec<Vec<KeyValue>>,
}

/// Reads the keys and versions of every row in `files` that `deletions` leaves.
pub(crate) async fn changed_keys(
    table: &Table,
    files: &[ManifestEntry],
    deletions: &DeletionFiles,
) -> Result<ChangedKeys> {
    let schema = table.schema();
    let key_indices = schema.primary_key_indices();
    let key_types = schema.types_of(&key_indices);
    let partition_indices = schema.partition_indices();
    let reads: Vec<_> = files
        .iter()
        .map(|entry| read_file(table, entry, deletions))
        .collect();
    let per_file: Vec<_> = futures::stream::iter(reads)
        .buffer_unordered(IO_CONCURRENCY)
        .try_collect()
        .await?;
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut keys = Vec::new();
    let mut versions: Vec<Vec<KeyValue>> = Vec::new();
    for (rows, partition) in per_file {
        for kv in rows {
            let KeyValue {
                sequence_number,
                kind,
                mut row,
            } = kv;
            // Partition values come from the manifest, not the file (docs/format.md §7.1).
            for (&i, v) in partition_indices.iter().zip(&partition) {
                row[i] = v.clone();
            }
            let key: Vec<Datum> = key_indices.iter().map(|&i| row[i].clone()).collect();
            let bytes = binary_row::encode(&key, &key_types)?;
            let version = KeyValue {
                sequence_number,
                kind,
                row,
            };
            match seen.get(&bytes) {
                Some(&i) => versions[i].push(version),
                None => {
                    seen.insert(bytes.clone(), keys.len());
                    keys.push((bytes, key));
                    versions.push(vec![version]);
                }
            }
        }
    }
    Ok(ChangedKeys { keys, versions })
}

async fn read_file(
    table: &Table,
    entry: &ManifestEntry,
    deletions: &DeletionFiles,
) -> Result<(Vec<KeyValue>, Row)> {
    let rows = table
        .read_data_file(entry, deletions.get(&entry.file.file_name))
        .await?;
    let partition = table.partition_values(&entry.partition)?;
    Ok((rows, partition))
}
