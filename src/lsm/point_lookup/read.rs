//! The read path of [`PointLookup`]: the files that may hold a key, a probe of each file's
//! local lookup file (built on first use, built again once when unusable), and the merge
//! of the versions found.

use std::collections::HashMap;
use std::sync::Arc;

use super::file::LookupFile;
use super::key::ResolvedKey;
use super::{BucketOf, FileRange, LookupState, PointLookup, SchemaView};
use crate::error::{Error, Result};
use crate::lsm::merge::compare_keys;
use crate::table::data_file::{KeyValue, decode_data_file};

use crate::table::datum::{Datum, Row, compare_rows};
use crate::table::deletion_vector::without_deleted;
use crate::table::read_bytes;

impl PointLookup {
    pub(super) async fn get_in(&self, state: &LookupState, key: &[Datum]) -> Result<Option<Row>> {
        let resolved = self.layout.resolve(key)?;
        let mut key_bytes = Vec::with_capacity(64);
        if state
            .view
            .codec
            .encode_key(&resolved.trimmed, &mut key_bytes)
            .is_err()
        {
            // Values that do not fit the key's types are in no file.
            return Ok(None);
        }
        let mut versions: Vec<KeyValue> = Vec::new();
        for f in self.candidates(state, &resolved) {
            self.probe(&state.view, f, &[&key_bytes], |_, kv| versions.push(kv))
                .await?;
        }
        self.merge(&state.view, versions, resolved.partition)
    }

    pub(super) async fn get_batch<K: AsRef<[Datum]>>(
        &self,
        state: &LookupState,
        keys: &[K],
    ) -> Result<Vec<Option<Row>>> {
        self.versions_batch(state, keys)
            .await?
            .into_iter()
            .map(|(v, partition)| self.merge(&state.view, v, partition))
            .collect()
    }

    /// What each key's versions reduce to, retractions included (`None`: the key is in
    /// no file): the state a merge with newer versions starts from, as the changelog of
    /// `changelog-producer = lookup` needs it.
    pub(super) async fn reduced_batch<K: AsRef<[Datum]>>(
        &self,
        state: &LookupState,
        keys: &[K],
    ) -> Result<Vec<Option<KeyValue>>> {
        self.versions_batch(state, keys)
            .await?
            .into_iter()
            .map(|(v, partition)| self.reduce(&state.view, v, &partition))
            .collect()
    }

    /// Every version of each key found in the files, with the key's partition values.
    async fn versions_batch<K: AsRef<[Datum]>>(
        &self,
        state: &LookupState,
        keys: &[K],
    ) -> Result<Vec<(Vec<KeyValue>, Vec<Datum>)>> {
        let mut partitions = Vec::with_capacity(keys.len());
        let mut key_bytes: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
        // The files to probe, in order of first use, with the keys to probe in each.
        let mut groups: Vec<(&FileRange, Vec<usize>)> = Vec::new();
        let mut group_of: HashMap<&str, usize> = HashMap::new();
        for (i, key) in keys.iter().enumerate() {
            let resolved = self.layout.resolve(key.as_ref())?;
            let mut bytes = Vec::with_capacity(64);
            if state
                .view
                .codec
                .encode_key(&resolved.trimmed, &mut bytes)
                .is_ok()
            {
                for f in self.candidates(state, &resolved) {
                    let g = *group_of.entry(f.cache_key.as_str()).or_insert_with(|| {
                        groups.push((f, Vec::new()));
                        groups.len() - 1
                    });
                    if let Some((_, members)) = groups.get_mut(g) {
                        members.push(i);
                    }
                }
            }
            key_bytes.push(bytes);
            partitions.push(resolved.partition);
        }
        let mut versions: Vec<Vec<KeyValue>> = (0..keys.len()).map(|_| Vec::new()).collect();
        for (f, members) in &groups {
            let probes: Vec<&[u8]> = members
                .iter()
                .map(|&i| key_bytes.get(i).map_or(&[][..], |b| b.as_slice()))
                .collect();
            self.probe(&state.view, f, &probes, |j, kv| {
                if let Some(v) = members.get(j).and_then(|&i| versions.get_mut(i)) {
                    v.push(kv);
                }
            })
            .await?;
        }
        Ok(versions.into_iter().zip(partitions).collect())
    }

    /// The files that may hold the key: its partition, its bucket (every bucket when it
    /// cannot be computed or buckets were rescaled), and a key range holding it.
    fn candidates<'s>(&self, state: &'s LookupState, key: &ResolvedKey) -> Vec<&'s FileRange> {
        let in_range = |f: &&FileRange| {
            compare_rows(&key.trimmed, &f.min_key).is_ge()
                && compare_rows(&key.trimmed, &f.max_key).is_le()
        };
        if let Some(t) = key.bucket
            && !state.rescaled
        {
            return state
                .buckets
                .get(&BucketOf(&key.partition_bytes, t))
                .map(|files| files.iter().filter(in_range).collect())
                .unwrap_or_default();
        }
        let num_buckets = self.layout.num_buckets();
        let mut out = Vec::new();
        for ((part, b), files) in &state.buckets {
            if part != &key.partition_bytes {
                continue;
            }
            if let Some(t) = key.bucket
                && *b != t
                && files.iter().all(|f| f.entry.total_buckets == num_buckets)
            {
                continue;
            }
            out.extend(files.iter().filter(in_range));
        }
        out
    }

    /// The current row from the versions of one key found in the files.
    fn merge(
        &self,
        view: &SchemaView,
        versions: Vec<KeyValue>,
        partition: Vec<Datum>,
    ) -> Result<Option<Row>> {
        Ok(self
            .reduce(view, versions, &partition)?
            .filter(|merged| !merged.kind.is_retract())
            .map(|merged| merged.row))
    }

    /// The versions of one key reduced by the engine, retraction or not, with the
    /// partition columns set from the key.
    fn reduce(
        &self,
        view: &SchemaView,
        mut versions: Vec<KeyValue>,
        partition: &[Datum],
    ) -> Result<Option<KeyValue>> {
        if versions.is_empty() {
            return Ok(None);
        }
        let schema = view.table.schema();
        let key_indices = &self.key_indices;
        versions.sort_by(|a, b| {
            compare_keys(&a.row, &b.row, key_indices).then_with(|| view.order.compare(a, b))
        });
        let Some(mut merged) = view.engine.reduce(&versions)? else {
            return Ok(None);
        };
        for (&i, v) in schema.partition_indices().iter().zip(partition) {
            if let Some(slot) = merged.row.get_mut(i) {
                *slot = v.clone();
            }
        }
        Ok(Some(merged))
    }

    /// Hands `found` the version in the file `f` of each key (canonical key bytes), with
    /// the key's position in `keys`. A local lookup file that does not open or read
    /// (deleted, truncated, corrupt) is built again once; a second failure is an error.
    async fn probe(
        &self,
        view: &SchemaView,
        f: &FileRange,
        keys: &[&[u8]],
        mut found: impl FnMut(usize, KeyValue),
    ) -> Result<()> {
        let mut rebuilt = false;
        loop {
            let result = self.lookup_file(view, f).await?.and_then(|file| {
                let (mut hits, mut buf) = (Vec::new(), Vec::new());
                for (i, key) in keys.iter().enumerate() {
                    file.get(key, &mut buf, |record| {
                        hits.push((i, view.codec.decode(record)?));
                        Ok(())
                    })?;
                }
                Ok(hits)
            });
            match result {
                Ok(hits) => {
                    for (i, kv) in hits {
                        found(i, kv);
                    }
                    return Ok(());
                }
                Err(e) if !rebuilt => {
                    tracing::warn!(
                        data_file = %f.cache_key,
                        error = %e,
                        "local lookup file unusable; building it again"
                    );
                    self.lookup_files.invalidate(&f.cache_key).await;
                    rebuilt = true;
                }
                Err(e) => {
                    return Err(Error::format(format!(
                        "local lookup file of {}: {e}",
                        f.cache_key
                    )));
                }
            }
        }
    }

    /// The open local lookup file of a data file, built once: the data file decoded in
    /// the current schema and its key-values written for point reads. The outer error is
    /// the build's; the inner one, a local file that does not open.
    async fn lookup_file(
        &self,
        view: &SchemaView,
        f: &FileRange,
    ) -> Result<Result<Arc<LookupFile>>> {
        let table = &view.table;
        let entry = &f.entry;
        let codec = view.codec.clone();
        self.lookup_files
            .get_or_build(&f.cache_key, |target| async move {
                let location = table.data_file_path(entry)?;
                let bytes = read_bytes(&**table.store(), &location).await?;
                let file_schema = table.schema_by_id(entry.file.schema_id).await?;
                let table_schema = table.schema().clone();
                let vector = match &f.deletion {
                    Some(d) => Some(table.read_deletion_vector(d).await?),
                    None => None,
                };
                tokio::task::spawn_blocking(move || {
                    let mut rows = decode_data_file(bytes, &file_schema, &table_schema)?;
                    if let Some(vector) = &vector {
                        rows = without_deleted(rows, vector);
                    }
                    codec.write_file(&target, &rows)
                })
                .await
                .map_err(|e| Error::task("lookup file task", e))?
            })
            .await
    }
}
