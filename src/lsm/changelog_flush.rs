//! A writer's flush of one bucket when its table has a changelog producer: the changelog
//! files (`changelog-<uuid>-0.parquet`, docs/format.md §3.1) next to the level-0 data
//! files, both committed in the same APPEND snapshot.
//!
//! Why its own module: a flush with a changelog must be all or nothing per bucket. A
//! changelog row written twice is a change a streaming reader sees twice, so when any
//! file of the bucket fails the flush hands back every change of the bucket (and drops
//! the files it wrote, left to orphan cleaning), where a plain flush keeps what it
//! wrote. The `lookup` producer also keeps, until the commit lands, the after image of
//! every key a flush changed: a second flush of the same commit starts from those, not
//! from the committed table its point lookups read.

use std::collections::HashMap;
use std::sync::Arc;

use super::changelog::lookup_change;
use super::flush::FileTarget;
use super::merge::{MergeEngine, SequenceOrder, key_of, sort_and_fold, sort_changes};
use super::point_lookup::PointLookup;
use super::writer::RowLayout;
use crate::error::{Error, Result};
use crate::table::binary_row;
use crate::table::changelog_options::ChangelogProducer;
use crate::table::data_file::KeyValue;
use crate::table::manifest::ManifestEntry;

/// After images of one bucket's keys flushed in the current commit, by serialized
/// trimmed key; `None` for a key whose versions all cancelled out.
pub(crate) type Images = HashMap<Vec<u8>, Option<KeyValue>>;

/// What a flush with a changelog needs besides the bucket's rows.
#[derive(Clone)]
pub(crate) struct ChangelogFlush {
    pub(crate) producer: ChangelogProducer,
    pub(crate) row_deduplicate: bool,
    /// Point reads of the committed table (`lookup` only).
    pub(crate) lookup: Option<Arc<PointLookup>>,
    pub(crate) layout: RowLayout,
    pub(crate) engine: MergeEngine,
    pub(crate) order: SequenceOrder,
    /// Primary-key columns (partition columns included), for point lookups.
    pub(crate) primary_key_indices: Vec<usize>,
}

/// What the flush of one bucket produced.
pub(crate) struct BucketFlushed {
    pub(crate) data: Vec<ManifestEntry>,
    pub(crate) changelog: Vec<ManifestEntry>,
    /// The after images of this flush's keys (`lookup`), to add to the bucket's images
    /// once every bucket is flushed.
    pub(crate) images: Vec<(Vec<u8>, Option<KeyValue>)>,
}

impl ChangelogFlush {
    /// Folds and writes one bucket's changes with their changelog. On failure returns
    /// the error with the changes to buffer again: as received (`input`, whose
    /// changelog is every change), or folded (`lookup`, which computes the same
    /// changelog from them again, since `images` only change once a flush succeeds).
    pub(crate) async fn flush_bucket(
        &self,
        target: FileTarget<'_>,
        rows: Vec<KeyValue>,
        images: &Images,
    ) -> std::result::Result<BucketFlushed, (Error, Vec<KeyValue>)> {
        let layout = self.layout.clone();
        let (engine, order) = (self.engine.clone(), self.order.clone());
        let input = self.producer == ChangelogProducer::Input;
        let prepared = tokio::task::spawn_blocking(move || {
            let sorted = sort_changes(rows, &layout.key_indices, &order);
            let raw = input.then(|| sorted.clone());
            sort_and_fold(sorted, &layout.key_indices, &order, &engine).map(|f| (raw, f))
        })
        .await
        .map_err(|e| Error::task("flush task", e))
        .and_then(|r| r);
        let (raw, folded) = match prepared {
            Ok(p) => p,
            // The rows went down with the task or the fold refused them (a merge error,
            // which retrying cannot cure either).
            Err(e) => return Err((e, Vec::new())),
        };
        let (changes, retry, written, updates) = match raw {
            Some(raw) => (raw.clone(), raw, folded, Vec::new()),
            None => match self.lookup_changes(&folded, images).await {
                Ok((changes, written, updates)) => (changes, folded, written, updates),
                Err(e) => return Err((e, folded)),
            },
        };
        let changelog = if changes.is_empty() {
            Vec::new()
        } else {
            let changelog_target = FileTarget {
                changelog: true,
                ..target
            };
            match changelog_target.write(changes).await {
                Ok(entries) => entries,
                Err(e) => return Err((e, retry)),
            }
        };
        match target.write(written).await {
            Ok(data) => Ok(BucketFlushed {
                data,
                changelog,
                images: updates,
            }),
            Err(e) => Err((e, retry)),
        }
    }

    /// The `lookup` changelog of a bucket's folded rows, the rows to write for them, and
    /// the after image of each of their keys.
    async fn lookup_changes(
        &self,
        folded: &[KeyValue],
        images: &Images,
    ) -> Result<(
        Vec<KeyValue>,
        Vec<KeyValue>,
        Vec<(Vec<u8>, Option<KeyValue>)>,
    )> {
        let key_types = &self.layout.key_types;
        let mut trimmed = Vec::with_capacity(folded.len());
        let mut missing = Vec::new();
        for (i, kv) in folded.iter().enumerate() {
            let key = binary_row::serialize(&key_of(&kv.row, &self.layout.key_indices), key_types)?;
            if !images.contains_key(&key) {
                missing.push(i);
            }
            trimmed.push(key);
        }
        let mut befores: Vec<Option<KeyValue>> = trimmed
            .iter()
            .map(|key| images.get(key).cloned().flatten())
            .collect();
        if let Some(lookup) = &self.lookup
            && !missing.is_empty()
        {
            let keys: Vec<Vec<_>> = missing
                .iter()
                .filter_map(|&i| folded.get(i))
                .map(|kv| key_of(&kv.row, &self.primary_key_indices))
                .collect();
            let found = lookup.reduced_many(&keys).await?;
            for (&i, before) in missing.iter().zip(found) {
                if let Some(slot) = befores.get_mut(i) {
                    *slot = before;
                }
            }
        }
        let mut updates = Vec::with_capacity(folded.len());
        let mut written = Vec::with_capacity(folded.len());
        let mut changes = Vec::new();
        for ((kv, before), key) in folded.iter().zip(befores).zip(trimmed) {
            let mut outcome = lookup_change(
                &self.engine,
                &self.order,
                self.row_deduplicate,
                before,
                kv.clone(),
            )?;
            changes.append(&mut outcome.changes);
            written.push(outcome.written);
            updates.push((key, outcome.after));
        }
        Ok((changes, written, updates))
    }
}
