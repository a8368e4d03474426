//! Publishing a commit (docs/format.md §9): manifests, manifest lists, then `snapshot-N`
//! written create-if-absent; a lost race is retried on top of the new latest snapshot.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use object_store::{ObjectStoreExt, PutPayload};

use super::binary_row;
use super::datum::{Datum, compare_datums, compare_rows};
use super::manifest::{
    self, FileIdentifier, FileKind, ManifestCompression, ManifestEntry, ManifestFileMeta,
    SimpleStats,
};
use super::snapshot::{CommitKind, Snapshot};
use super::{Table, create_object};
use crate::error::{Error, Result};

mod in_doubt;

/// Base manifests are merged into one once a snapshot references this many
/// (Java's `manifest.merge-min-count`), so reading a long-lived table stays cheap.
const MANIFEST_MERGE_MIN_COUNT: usize = 30;

/// What one commit adds to the table.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    /// Writer identity; with `commit_identifier` it detects a commit that already landed.
    pub commit_user: String,
    /// Increasing per commit user (Long.MAX for one-shot batch writes).
    pub commit_identifier: i64,
    pub kind: CommitKind,
    /// ADD entries for new files, DELETE entries for files a compaction replaced.
    pub entries: Vec<ManifestEntry>,
    /// ADD entries of the commit's changelog files (docs/format.md §3.1), listed in the
    /// snapshot's changelog manifest list; empty for tables without a changelog producer.
    pub changelog: Vec<ManifestEntry>,
    /// Stored in the snapshot (e.g. Kafka offsets covered by this commit).
    pub properties: BTreeMap<String, String>,
}

/// A commit whose delta manifest and manifest list are written, ready to publish.
///
/// It is kept across failed publish attempts: its delta manifest list name is unique, so
/// together with the commit user and identifier it tells this commit's snapshot apart
/// from every other, also from an earlier commit of the same user whose outcome was
/// unknown and that landed late.
#[derive(Debug, Clone)]
pub(crate) struct PreparedCommit {
    request: CommitRequest,
    delta_metas: Vec<ManifestFileMeta>,
    delta_list: String,
    delta_list_size: i64,
    delta_record_count: i64,
    /// The changelog manifest list and its size, when the commit has changelog files.
    changelog_list: Option<(String, i64)>,
    /// The newest snapshot id seen before a publish attempt whose outcome is unknown:
    /// this commit may be any snapshot after it.
    in_doubt_since: Option<i64>,
    /// The newest snapshot id the writer knew of when it prepared this commit (see
    /// [`PreparedCommit::guard_user_since`]).
    user_guard_since: Option<i64>,
    /// Delta manifest lists this commit was published under before it got new ones
    /// (`in_doubt`); a late write of an earlier attempt still names one.
    former_delta_lists: Vec<String>,
}

impl PreparedCommit {
    pub(crate) fn request(&self) -> &CommitRequest {
        &self.request
    }

    /// Whether an attempt to publish this commit may have landed unseen.
    pub(crate) fn in_doubt(&self) -> bool {
        self.in_doubt_since.is_some()
    }

    /// Makes publishing fail with `Error::ForeignCommitOfUser` if an APPEND snapshot of
    /// this commit's user that is not this commit appears after snapshot `since` (the
    /// writer's own last commit, or the snapshot it resumed from). A writer that resumed
    /// from the offsets of one snapshot must not build on a later one it did not write:
    /// the changes in between would be applied twice.
    pub(crate) fn guard_user_since(&mut self, since: i64) {
        self.user_guard_since = Some(since);
    }

    /// Whether `snapshot` is this commit.
    fn is(&self, snapshot: &Snapshot) -> bool {
        snapshot.commit_user == self.request.commit_user
            && snapshot.commit_identifier == self.request.commit_identifier
            && snapshot.commit_kind == self.request.kind
            && (snapshot.delta_manifest_list == self.delta_list
                || self
                    .former_delta_lists
                    .contains(&snapshot.delta_manifest_list))
    }

    /// Whether `snapshot` is another APPEND commit of this commit's user.
    fn is_foreign_of_user(&self, snapshot: &Snapshot) -> bool {
        self.request.kind == CommitKind::Append
            && snapshot.commit_kind == CommitKind::Append
            && snapshot.commit_user == self.request.commit_user
            && !self.is(snapshot)
    }
}

/// What one publish attempt found.
enum Attempt {
    Published(Box<Snapshot>),
    /// Another commit took the snapshot id; build on the new latest snapshot.
    LostRace,
}

/// Names manifests and manifest lists as Java's `FileStorePathFactory` does: one random
/// UUID per writer (a table handle here) and a counter, `manifest-<uuid>-<n>` and
/// `manifest-list-<uuid>-<n>`, so a snapshot's base and delta lists share a prefix.
#[derive(Debug)]
pub(crate) struct ManifestNames {
    manifest_uuid: uuid::Uuid,
    list_uuid: uuid::Uuid,
    manifests: std::sync::atomic::AtomicU64,
    lists: std::sync::atomic::AtomicU64,
}

impl ManifestNames {
    pub(crate) fn new() -> Self {
        ManifestNames {
            manifest_uuid: uuid::Uuid::new_v4(),
            list_uuid: uuid::Uuid::new_v4(),
            manifests: Default::default(),
            lists: Default::default(),
        }
    }

    fn next_manifest(&self) -> String {
        let n = self
            .manifests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("manifest-{}-{n}", self.manifest_uuid)
    }

    fn next_list(&self) -> String {
        let n = self
            .lists
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("manifest-list-{}-{n}", self.list_uuid)
    }
}

impl Table {
    /// Commits `request` as the next snapshot and returns it. Retries when another writer
    /// takes the snapshot id first, or when the store fails, up to `commit.max-retries`
    /// times (see `Table::publish`).
    ///
    /// A `CommitKind::Compact` request is checked against each snapshot it would follow
    /// (as Java's conflict detection does): every file it deletes must still be live, and
    /// no two files of a bucket may overlap in key range on a level ≥ 1 afterwards.
    /// Otherwise it fails with `Error::CommitConflict` and publishes nothing; the caller
    /// plans the compaction again. Appends are not checked (Paimon's rule).
    pub async fn commit(&self, request: CommitRequest) -> Result<Snapshot> {
        let mut prepared = self.prepare_commit(request).await?;
        self.publish(&mut prepared, None).await
    }

    /// Writes the delta manifest and its list. They do not depend on the snapshot the
    /// commit will follow, so they are written once and reused by every publish attempt.
    pub(crate) async fn prepare_commit(&self, request: CommitRequest) -> Result<PreparedCommit> {
        let compression = ManifestCompression::parse(&self.options().manifest_compression)?;
        let delta_meta = if request.entries.is_empty() {
            None
        } else {
            Some(self.write_manifest(&request.entries, compression).await?)
        };
        let delta_metas: Vec<ManifestFileMeta> = delta_meta.into_iter().collect();
        let (delta_list, delta_list_size) =
            self.write_manifest_list(&delta_metas, compression).await?;
        let delta_record_count: i64 = request
            .entries
            .iter()
            .map(|e| match e.kind {
                FileKind::Add => e.file.row_count,
                FileKind::Delete => -e.file.row_count,
            })
            .sum();
        // As Java's commit: a changelog manifest and list only when there are changelog
        // files.
        let changelog_list = if request.changelog.is_empty() {
            None
        } else {
            let meta = self.write_manifest(&request.changelog, compression).await?;
            Some(self.write_manifest_list(&[meta], compression).await?)
        };
        Ok(PreparedCommit {
            request,
            delta_metas,
            delta_list,
            delta_list_size,
            delta_record_count,
            changelog_list,
            in_doubt_since: None,
            user_guard_since: None,
            former_delta_lists: Vec::new(),
        })
    }

    /// Publishes `prepared` as `snapshot-<latest + 1>`, written create-if-absent, and
    /// returns it; `fence`, when given, is checked right before each write.
    ///
    /// Every outcome of that write is handled so that the commit lands exactly once:
    /// - `AlreadyExists`: the snapshot there is read back. If it is this commit (an
    ///   earlier attempt's write that the store retried, or whose response was lost),
    ///   that is the result; otherwise another writer won and the commit is rebuilt on it.
    /// - any other error: the write may or may not have been applied. The snapshot is
    ///   read back; while that cannot tell, the commit stays in doubt and each later
    ///   attempt first looks for it among the snapshots after the one it was built on.
    ///   A late write can only land at the id it targeted, and only while that id is
    ///   free, so a retry either finds it or takes the id first (create-if-absent).
    ///
    /// An existing snapshot is never overwritten, and nothing a published snapshot may
    /// reference is deleted. When retries run out the error is
    /// `Error::CommitOutcomeUnknown` if the commit is in doubt; publishing the same
    /// `prepared` again later resolves it. A full, read-only or access-denied warehouse
    /// ([`Error::is_storage_unwritable`]) is returned at once, its cause intact, with the
    /// commit in doubt as above.
    pub(crate) async fn publish(
        &self,
        prepared: &mut PreparedCommit,
        fence: Option<&super::fence::WriterFence>,
    ) -> Result<Snapshot> {
        let compression = ManifestCompression::parse(&self.options().manifest_compression)?;
        let max_attempts = commit_attempts(self.options().commit_max_retries);
        let mut backoff = Duration::from_millis(10);
        let mut last_error = None;
        for attempt in 1..=max_attempts {
            if attempt > 1 {
                let jitter = rand::random_range(0..=backoff.as_millis() as u64 / 2);
                tokio::time::sleep(backoff + Duration::from_millis(jitter)).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
            match self.publish_once(prepared, fence, compression).await {
                Ok(Attempt::Published(snapshot)) => return Ok(*snapshot),
                Ok(Attempt::LostRace) => {
                    tracing::debug!(table = %self.identifier(), attempt, "lost the commit race, retrying");
                    last_error = None;
                }
                Err(e) if is_retryable(&e) => {
                    tracing::warn!(table = %self.identifier(), attempt, error = %e,
                        in_doubt = prepared.in_doubt(), "commit attempt failed, retrying");
                    last_error = Some(e);
                }
                Err(e) => {
                    if let (Error::CommitConflict { .. }, Some(since)) =
                        (&e, prepared.in_doubt_since)
                    {
                        // An earlier attempt may have landed, and been expired before this
                        // one looked for it: the conflict can be with itself. Its files
                        // (a compaction's output among them) must stay.
                        return Err(Error::CommitOutcomeUnknown {
                            table: self.identifier().to_string(),
                            since,
                            message: e.to_string(),
                        });
                    }
                    if matches!(e, Error::CommitConflict { .. }) {
                        // Nothing references our delta manifest and list any more.
                        let mut names: Vec<String> = prepared
                            .delta_metas
                            .iter()
                            .map(|m| m.file_name.clone())
                            .collect();
                        names.push(prepared.delta_list.clone());
                        names.extend(prepared.changelog_list.iter().map(|(n, _)| n.clone()));
                        self.delete_quietly(&names).await;
                    }
                    return Err(e);
                }
            }
        }
        if let Some(since) = prepared.in_doubt_since {
            return Err(Error::CommitOutcomeUnknown {
                table: self.identifier().to_string(),
                since,
                message: last_error.map_or_else(|| "retries exhausted".into(), |e| e.to_string()),
            });
        }
        match last_error {
            Some(e) => Err(e),
            None => Err(Error::CommitRetriesExhausted {
                table: self.identifier().to_string(),
                attempts: max_attempts,
            }),
        }
    }

    async fn publish_once(
        &self,
        prepared: &mut PreparedCommit,
        fence: Option<&super::fence::WriterFence>,
        compression: ManifestCompression,
    ) -> Result<Attempt> {
        let latest = self.latest_snapshot().await?;
        let latest_id = latest.as_ref().map_or(0, |s| s.id);
        let scan_from = match (prepared.in_doubt_since, prepared.user_guard_since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(since) = scan_from
            && let Some(done) = self
                .find_committed(prepared, since + 1, latest.as_ref(), compression)
                .await?
        {
            // An earlier attempt landed even though we saw an error.
            return Ok(Attempt::Published(Box::new(done)));
        }
        let request = &prepared.request;
        let (base_metas, merged) = self
            .prepare_base(latest.as_ref(), request, compression)
            .await?;
        let (base_list, base_list_size) =
            self.write_manifest_list(&base_metas, compression).await?;
        let id = latest_id + 1;
        let snapshot = Snapshot {
            version: 3,
            id,
            schema_id: self.schema().id,
            base_manifest_list: base_list,
            delta_manifest_list: prepared.delta_list.clone(),
            changelog_manifest_list: prepared.changelog_list.as_ref().map(|(n, _)| n.clone()),
            changelog_manifest_list_size: prepared.changelog_list.as_ref().map(|(_, s)| *s),
            index_manifest: latest.as_ref().and_then(|s| s.index_manifest.clone()),
            commit_user: request.commit_user.clone(),
            commit_identifier: request.commit_identifier,
            commit_kind: request.kind,
            time_millis: chrono::Utc::now().timestamp_millis(),
            total_record_count: latest.as_ref().map_or(0, |s| s.total_record_count)
                + prepared.delta_record_count,
            delta_record_count: prepared.delta_record_count,
            // As Java's commit: no changelog count without changelog files, the
            // watermark carried forward (lakejoin sets none of its own), and the row id
            // counter carried forward (lakejoin's tables do not track row ids).
            changelog_record_count: (!request.changelog.is_empty())
                .then(|| request.changelog.iter().map(|e| e.file.row_count).sum()),
            base_manifest_list_size: Some(base_list_size),
            delta_manifest_list_size: Some(prepared.delta_list_size),
            watermark: latest.as_ref().and_then(|s| s.watermark),
            statistics: None,
            properties: if request.properties.is_empty() {
                None
            } else {
                Some(request.properties.clone())
            },
            next_row_id: Some(latest.as_ref().and_then(|s| s.next_row_id).unwrap_or(0)),
        };
        // Our own base list and merged manifest: deleted only once it is certain that no
        // snapshot references them.
        let attempt_files: Vec<String> = std::iter::once(snapshot.base_manifest_list.clone())
            .chain(merged)
            .collect();
        if let Some(fence) = fence {
            fence.check().await?;
        }
        if let Some(base) = &latest
            && !self.snapshot_exists(base.id).await?
        {
            // Expiry removed the snapshot this attempt builds on, which it does only once
            // newer ones exist: our id is taken, or was and has been expired too. A
            // create-if-absent write there could succeed and land outside the lineage.
            if prepared.in_doubt_since.is_none() {
                self.delete_quietly(&attempt_files).await;
            }
            return Ok(Attempt::LostRace);
        }
        let location = self.snapshot_dir().join(format!("snapshot-{id}"));
        let put = create_object(
            &**self.store(),
            &location,
            PutPayload::from(snapshot.to_json().into_bytes()),
        )
        .await;
        match put {
            Ok(_) => {
                self.write_latest_hint(id).await;
                Ok(Attempt::Published(Box::new(snapshot)))
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                // Ours if an earlier write of this attempt was applied (a store-side
                // retry, a lost response); else another commit won the id.
                let there = match self.snapshot(id).await {
                    Ok(there) => there,
                    Err(e) => {
                        prepared.in_doubt_since.get_or_insert(latest_id);
                        return Err(e);
                    }
                };
                if prepared.is(&there) {
                    self.write_latest_hint(id).await;
                    return Ok(Attempt::Published(Box::new(there)));
                }
                if prepared.is_foreign_of_user(&there) {
                    return Err(self.foreign_commit(&there));
                }
                if prepared.in_doubt_since.is_none() {
                    self.delete_quietly(&attempt_files).await;
                }
                Ok(Attempt::LostRace)
            }
            Err(e) => {
                prepared.in_doubt_since.get_or_insert(latest_id);
                let error = Error::store(format!("publishing {location}"), e);
                // The write may have been applied: look before trying again.
                match self.snapshot(id).await {
                    Ok(there) if prepared.is(&there) => {
                        self.write_latest_hint(id).await;
                        Ok(Attempt::Published(Box::new(there)))
                    }
                    Ok(there) if prepared.is_foreign_of_user(&there) => {
                        Err(self.foreign_commit(&there))
                    }
                    Ok(_) => Ok(Attempt::LostRace),
                    Err(_) => Err(error),
                }
            }
        }
    }

    fn foreign_commit(&self, snapshot: &Snapshot) -> Error {
        Error::ForeignCommitOfUser {
            table: self.identifier().to_string(),
            user: snapshot.commit_user.clone(),
            snapshot: snapshot.id,
        }
    }

    /// Best-effort removal of manifest files that no snapshot references; whatever stays
    /// behind is removed by orphan cleaning.
    async fn delete_quietly(&self, names: &[String]) {
        for name in names {
            let _ = self.store().delete(&self.manifest_path(name)).await;
        }
    }

    /// The base manifests of the next snapshot on top of `latest` (merged into one new
    /// manifest, also returned by name, once there are many), after checking that a
    /// COMPACT request still fits `latest`.
    async fn prepare_base(
        &self,
        latest: Option<&Snapshot>,
        request: &CommitRequest,
        compression: ManifestCompression,
    ) -> Result<(Vec<ManifestFileMeta>, Option<String>)> {
        let key_types = self.schema().types_of(&self.schema().trimmed_key_indices());
        let Some(latest) = latest else {
            if request.kind == CommitKind::Compact
                && let Some(reason) = compaction_conflict(&[], &request.entries, &key_types)?
            {
                return Err(self.conflict(format!("{reason} (the table has no snapshot)")));
            }
            return Ok((Vec::new(), None));
        };
        let base_metas = self.snapshot_manifests(latest).await?;
        let needs_merge = base_metas.len() >= MANIFEST_MERGE_MIN_COUNT;
        if request.kind != CommitKind::Compact && !needs_merge {
            return Ok((base_metas, None));
        }
        let live = super::live_entries(self.read_manifests(&base_metas).await?);
        if request.kind == CommitKind::Compact
            && let Some(reason) = compaction_conflict(&live, &request.entries, &key_types)?
        {
            return Err(self.conflict(format!("{reason} (latest snapshot {})", latest.id)));
        }
        if !needs_merge {
            return Ok((base_metas, None));
        }
        if live.is_empty() {
            return Ok((Vec::new(), None));
        }
        let merged = self.write_manifest(&live, compression).await?;
        let name = merged.file_name.clone();
        Ok((vec![merged], Some(name)))
    }

    fn conflict(&self, reason: String) -> Error {
        Error::CommitConflict {
            table: self.identifier().to_string(),
            reason,
        }
    }

    async fn write_latest_hint(&self, id: i64) {
        self.write_snapshot_hint("LATEST", id).await;
    }

    /// Writes `id` to the hint file `snapshot/<name>` (`LATEST`, `EARLIEST`). Readers
    /// validate a hint and fall back to listing the directory, so a failed or stale write
    /// only costs them a listing: it is logged, not returned.
    pub(crate) async fn write_snapshot_hint(&self, name: &str, id: i64) {
        let location = self.snapshot_dir().join(name);
        if let Err(e) = self
            .store()
            .put(&location, PutPayload::from(id.to_string().into_bytes()))
            .await
        {
            tracing::warn!(table = %self.identifier(), error = %e, "could not write snapshot/{name}");
        }
    }

    /// Writes one manifest holding `entries` and returns its list record.
    pub(crate) async fn write_manifest(
        &self,
        entries: &[ManifestEntry],
        compression: ManifestCompression,
    ) -> Result<ManifestFileMeta> {
        let bytes = manifest::encode_manifest(entries, compression)?;
        let name = self.manifest_names.next_manifest();
        let size = bytes.len() as i64;
        self.put_new(&self.manifest_path(&name), bytes).await?;
        let partition_types = self.schema().types_of(&self.schema().partition_indices());
        let partitions: Vec<&[u8]> = entries.iter().map(|e| e.partition.as_slice()).collect();
        Ok(ManifestFileMeta {
            file_name: name,
            file_size: size,
            num_added_files: entries.iter().filter(|e| e.kind == FileKind::Add).count() as i64,
            num_deleted_files: entries
                .iter()
                .filter(|e| e.kind == FileKind::Delete)
                .count() as i64,
            partition_stats: partition_stats(&partitions, &partition_types)?,
            schema_id: entries
                .iter()
                .map(|e| e.file.schema_id)
                .max()
                .unwrap_or(self.schema().id),
            min_bucket: entries.iter().map(|e| e.bucket).min(),
            max_bucket: entries.iter().map(|e| e.bucket).max(),
            min_level: entries.iter().map(|e| e.file.level).min(),
            max_level: entries.iter().map(|e| e.file.level).max(),
            min_row_id: None,
            max_row_id: None,
        })
    }

    async fn write_manifest_list(
        &self,
        metas: &[ManifestFileMeta],
        compression: ManifestCompression,
    ) -> Result<(String, i64)> {
        let bytes = manifest::encode_manifest_list(metas, compression)?;
        let name = self.manifest_names.next_list();
        let size = bytes.len() as i64;
        self.put_new(&self.manifest_path(&name), bytes).await?;
        Ok((name, size))
    }

    async fn put_new(&self, location: &object_store::path::Path, bytes: Vec<u8>) -> Result<()> {
        self.store()
            .put(location, PutPayload::from(bytes))
            .await
            .map_err(|e| Error::store(format!("writing {location}"), e))?;
        Ok(())
    }
}

/// Whether a publish attempt that failed with `error` is worth repeating at once. A full,
/// read-only or access-denied warehouse is not: it is reported right away (the commit
/// stays in doubt when the snapshot write may have landed), and the caller retries with
/// its own, longer backoff.
fn is_retryable(error: &Error) -> bool {
    if error.is_storage_unwritable() {
        return false;
    }
    error.is_not_found()
        || matches!(error, Error::TruncatedRead { .. })
        || matches!(error, Error::Store { .. } if error.kind() == crate::error::ErrorKind::Transient)
}

/// Why a COMPACT commit of `entries` cannot go on top of the files `live`, if it cannot
/// (Java's conflict detection): every file it deletes must still be live, and after the
/// change no two files of one bucket may overlap in key range on a level ≥ 1.
pub(crate) fn compaction_conflict(
    live: &[ManifestEntry],
    entries: &[ManifestEntry],
    key_types: &[super::types::DataType],
) -> Result<Option<String>> {
    let live_ids: HashSet<FileIdentifier> = live.iter().map(ManifestEntry::identifier).collect();
    let mut deleted = HashSet::new();
    for e in entries.iter().filter(|e| e.kind == FileKind::Delete) {
        let id = e.identifier();
        if !live_ids.contains(&id) {
            return Ok(Some(format!(
                "data file {} (bucket {}, level {}) that the compaction replaces is no longer live",
                e.file.file_name, e.bucket, e.file.level
            )));
        }
        deleted.insert(id);
    }
    // Levels ≥ 1 that receive a new file; only these can have gained an overlap.
    let touched: HashSet<(&[u8], i32, i32)> = entries
        .iter()
        .filter(|e| e.kind == FileKind::Add && e.file.level >= 1)
        .map(|e| (e.partition.as_slice(), e.bucket, e.file.level))
        .collect();
    if touched.is_empty() {
        return Ok(None);
    }
    // (partition, bucket, level) -> (min key, max key, file name) of its files
    type KeyRanges<'a> = Vec<(Vec<Datum>, Vec<Datum>, &'a str)>;
    let mut by_level: HashMap<(&[u8], i32, i32), KeyRanges> = HashMap::new();
    let after = live
        .iter()
        .filter(|e| !deleted.contains(&e.identifier()))
        .chain(entries.iter().filter(|e| e.kind == FileKind::Add));
    for e in after {
        let slot = (e.partition.as_slice(), e.bucket, e.file.level);
        if !touched.contains(&slot) {
            continue;
        }
        let min = binary_row::deserialize(&e.file.min_key, key_types)?;
        let max = binary_row::deserialize(&e.file.max_key, key_types)?;
        by_level
            .entry(slot)
            .or_default()
            .push((min, max, e.file.file_name.as_str()));
    }
    for ((_, bucket, level), mut files) in by_level {
        files.sort_by(|a, b| compare_rows(&a.0, &b.0));
        for pair in files.windows(2) {
            if compare_rows(&pair[0].1, &pair[1].0) != Ordering::Less {
                return Ok(Some(format!(
                    "data files {} and {} would overlap in key range on level {level} of bucket {bucket}",
                    pair[0].2, pair[1].2
                )));
            }
        }
    }
    Ok(None)
}

/// Column-wise min/max/null counts over serialized partition rows.
pub(crate) fn partition_stats(
    partitions: &[&[u8]],
    types: &[super::types::DataType],
) -> Result<SimpleStats> {
    if types.is_empty() {
        return Ok(SimpleStats::empty());
    }
    let rows: Vec<Vec<Datum>> = partitions
        .iter()
        .map(|p| binary_row::deserialize(p, types))
        .collect::<Result<_>>()?;
    column_stats(&rows, types)
}

/// Column-wise min/max (nulls ignored) and null counts of `rows`.
pub(crate) fn column_stats(
    rows: &[Vec<Datum>],
    types: &[super::types::DataType],
) -> Result<SimpleStats> {
    let mut stats = ColumnStatsBuilder::new(types.len());
    for row in rows {
        stats.add(row);
    }
    stats.finish(types)
}

/// [`column_stats`] gathered a row at a time, for files written as their rows stream by.
#[derive(Debug, Clone)]
pub(crate) struct ColumnStatsBuilder {
    mins: Vec<Datum>,
    maxs: Vec<Datum>,
    nulls: Vec<i64>,
}

impl ColumnStatsBuilder {
    pub(crate) fn new(columns: usize) -> Self {
        ColumnStatsBuilder {
            mins: vec![Datum::Null; columns],
            maxs: vec![Datum::Null; columns],
            nulls: vec![0; columns],
        }
    }

    /// Adds a row's values (the first `columns` of them).
    pub(crate) fn add<'a>(&mut self, values: impl IntoIterator<Item = &'a Datum>) {
        let columns = self
            .mins
            .iter_mut()
            .zip(&mut self.maxs)
            .zip(&mut self.nulls);
        for (((min, max), nulls), v) in columns.zip(values) {
            if v.is_null() {
                *nulls += 1;
                continue;
            }
            if min.is_null() || compare_datums(v, min) == Ordering::Less {
                *min = v.clone();
            }
            if max.is_null() || compare_datums(v, max) == Ordering::Greater {
                *max = v.clone();
            }
        }
    }

    pub(crate) fn finish(self, types: &[super::types::DataType]) -> Result<SimpleStats> {
        Ok(SimpleStats {
            min_values: binary_row::serialize(&self.mins, types)?,
            max_values: binary_row::serialize(&self.maxs, types)?,
            null_counts: Some(self.nulls.into_iter().map(Some).collect()),
        })
    }
}

/// Attempts `publish` makes for `commit.max-retries` = `retries`: the first plus the
/// retries, at least two, saturating (the options allow at most `i32::MAX` retries).
fn commit_attempts(retries: u32) -> u32 {
    retries.max(1).saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn every_retry_count_allows_at_least_two_attempts(retries in proptest::num::u32::ANY) {
            let attempts = commit_attempts(retries);
            proptest::prop_assert!(attempts >= 2);
            proptest::prop_assert!(attempts > retries || retries == u32::MAX);
        }
    }

    #[test]
    fn the_largest_retry_count_does_not_wrap_to_zero_attempts() {
        assert_eq!(commit_attempts(u32::MAX), u32::MAX);
        assert_eq!(commit_attempts(0), 2);
        assert_eq!(commit_attempts(10), 11);
    }
}
