//! Snapshot expiry, as Java's `ExpireSnapshotsImpl` does it: the oldest snapshots beyond
//! the retention options are removed together with the files only they reference, and
//! `snapshot/EARLIEST` is written.
//!
//! Which snapshots go: everything older than the newest `snapshot.num-retained.max`; of the
//! rest, those older than `snapshot.time-retained`, stopping at the first younger one,
//! and never any of the newest `snapshot.num-retained.min`. Snapshots that a consumer
//! (`consumer/consumer-*`) will read next stay.
//!
//! Which files go, with `[begin, end)` the expired ids (snapshot `end` is retained):
//! - **Data files** deleted by a snapshot in `(begin, end]`: they were live only in
//!   expired snapshots, and Paimon never re-adds a deleted file, except an "upgrade" that
//!   deletes and adds the same file in one commit, which is recognised and kept. Newer
//!   commits (including concurrent ones) only build on snapshots after `end`, so they
//!   cannot reference these files. Files of tagged snapshots are kept.
//! - **Manifests and manifest lists** of expired snapshots that snapshot `end` (or a tag)
//!   does not use. A manifest is referenced by a contiguous range of snapshots (from the
//!   commit that writes it until one merges it away), so what `end` does not use, no
//!   newer snapshot uses either.
//! - **Changelog files** added by expired snapshots, unless the table's changelog
//!   retention outlasts its snapshots (Java's `changelogDecoupled`): then each expired
//!   snapshot is first kept as a long-lived changelog (`changelog/changelog-<id>`) with
//!   its changelog files and manifests, which `lsm::expire_changelog` removes later.
//!
//! Index manifests and index files (deletion vectors, dynamic-bucket index) are left in
//! place: lakejoin does not decode them, and keeping them is always safe.
//!
//! Snapshot files are removed (oldest first) before the files they reference, so a crash
//! midway leaves unreferenced files for orphan cleaning rather than broken snapshots.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::expire_changelog::expire_changelogs;
use crate::error::{Error, Result};
use crate::table::manifest::{FileKind, ManifestEntry, ManifestFileMeta};
use crate::table::options::MaintenanceOptions;
use crate::table::snapshot::Snapshot;
use crate::table::{IO_CONCURRENCY, Table, list_dir, read_text};

/// Retention for one expiry run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpireConfig {
    /// Never expire the newest this many snapshots (at least 1).
    pub retain_min: usize,
    /// Always expire all but the newest this many snapshots.
    pub retain_max: usize,
    /// Keep snapshots committed less than this long ago (within the two counts).
    pub time_retained: Duration,
    /// Expire at most this many snapshots in one run.
    pub max_deletes: usize,
}

impl ExpireConfig {
    /// `snapshot.num-retained.min`, `snapshot.num-retained.max` and
    /// `snapshot.time-retained` of a table, with no limit on the number expired.
    pub fn from_options(options: &MaintenanceOptions) -> Self {
        ExpireConfig {
            retain_min: options.snapshot_retained_min,
            retain_max: options.snapshot_retained_max,
            time_retained: options.snapshot_time_retained,
            max_deletes: usize::MAX,
        }
    }
}

/// What an expiry run removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpireReport {
    /// Ids of the snapshots removed, ascending.
    pub expired: Vec<i64>,
    /// The oldest snapshot left (written to `snapshot/EARLIEST`).
    pub earliest: Option<i64>,
    /// Data and changelog files removed.
    pub data_files_deleted: usize,
    /// Manifest files removed.
    pub manifests_deleted: usize,
    /// Manifest lists removed.
    pub manifest_lists_deleted: usize,
    /// Ids of the long-lived changelogs removed (`changelog/changelog-<id>`), ascending.
    pub changelogs_expired: Vec<i64>,
}

/// Expires snapshots of `table` per `config` (see the module docs).
pub async fn expire_snapshots(table: &Table, config: &ExpireConfig) -> Result<ExpireReport> {
    if config.retain_min == 0 || config.retain_max < config.retain_min {
        return Err(Error::Config(format!(
            "snapshot retention needs 1 ≤ retain-min ({}) ≤ retain-max ({})",
            config.retain_min, config.retain_max
        )));
    }
    let ids = table.snapshot_ids().await?;
    let (Some(&earliest), Some(latest)) = (ids.first(), table.latest_snapshot_id().await?) else {
        return Ok(ExpireReport::default());
    };
    let to_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    // Oldest snapshot that `retain_max` allows to stay.
    let min = latest
        .saturating_sub(to_i64(config.retain_max))
        .saturating_add(1)
        .max(earliest);
    // Exclusive bound that `retain_min`, consumers and `max_deletes` protect.
    let mut max_exclusive = latest
        .saturating_sub(to_i64(config.retain_min))
        .saturating_add(1);
    if let Some(next) = min_consumer_snapshot(table).await? {
        max_exclusive = max_exclusive.min(next);
    }
    max_exclusive = max_exclusive.min(earliest.saturating_add(to_i64(config.max_deletes)));
    let threshold = chrono::Utc::now()
        .timestamp_millis()
        .saturating_sub(i64::try_from(config.time_retained.as_millis()).unwrap_or(i64::MAX));
    let mut end = max_exclusive;
    for &id in ids.iter().filter(|&&id| id >= min && id < max_exclusive) {
        match table.snapshot(id).await {
            Ok(s) if s.time_millis >= threshold => {
                end = id;
                break;
            }
            Ok(_) | Err(Error::SnapshotNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    if end <= earliest {
        write_earliest_if_missing(table, earliest).await;
        return nothing_expired(table, earliest).await;
    }
    // Snapshot ids are contiguous from the earliest kept one; start after any gap.
    let present: HashSet<i64> = ids.iter().copied().collect();
    let mut begin = earliest;
    for id in (earliest..end).rev() {
        if !present.contains(&id) {
            begin = id + 1;
            break;
        }
    }
    if begin >= end {
        return nothing_expired(table, earliest).await;
    }
    let changelog = &table.options().changelog;
    let keep_changelog = changelog.produces()
        && changelog.decoupled(config.retain_min, config.retain_max, config.time_retained);
    let plan = plan_deletions(table, begin, end, keep_changelog).await?;

    let mut report = ExpireReport {
        earliest: Some(end),
        ..ExpireReport::default()
    };
    for id in begin..end {
        if keep_changelog {
            // Its changelog outlives it: kept before the snapshot goes.
            table
                .write_long_lived_changelog(&table.snapshot(id).await?)
                .await?;
        }
        let location = table.snapshot_dir().join(format!("snapshot-{id}"));
        delete_quietly(table, &location).await?;
        report.expired.push(id);
    }
    write_earliest(table, end).await;
    report.data_files_deleted = delete_all(table, plan.data_files).await?;
    report.manifests_deleted = delete_all(table, plan.manifests).await?;
    report.manifest_lists_deleted = delete_all(table, plan.manifest_lists).await?;
    let changelogs = expire_changelogs(table, changelog).await?;
    report.changelogs_expired = changelogs.ids;
    report.data_files_deleted += changelogs.files_deleted;
    tracing::info!(
        table = %table.identifier(),
        from = begin,
        to = end - 1,
        data_files = report.data_files_deleted,
        manifests = report.manifests_deleted,
        "expired snapshots"
    );
    Ok(report)
}

/// The report of a run that expires no snapshot. Long-lived changelogs are expired all
/// the same, as Java's commit runs `ExpireChangelogImpl` after every snapshot expiry: a
/// consumer that moved on lets them go without waiting for a snapshot to expire.
async fn nothing_expired(table: &Table, earliest: i64) -> Result<ExpireReport> {
    let changelog = &table.options().changelog;
    let changelogs = if changelog.produces() {
        expire_changelogs(table, changelog).await?
    } else {
        Default::default()
    };
    Ok(ExpireReport {
        earliest: Some(earliest),
        changelogs_expired: changelogs.ids,
        data_files_deleted: changelogs.files_deleted,
        ..ExpireReport::default()
    })
}

/// Files to remove when snapshots `begin..end` expire.
#[derive(Debug, Default)]
struct DeletionPlan {
    data_files: Vec<Path>,
    manifests: Vec<Path>,
    manifest_lists: Vec<Path>,
}

/// `keep_changelog`: the changelog files and manifests of the expired snapshots stay
/// (they become long-lived changelogs).
async fn plan_deletions(
    table: &Table,
    begin: i64,
    end: i64,
    keep_changelog: bool,
) -> Result<DeletionPlan> {
    let tags = tagged_snapshots(table).await?;
    let retained = table.snapshot(end).await?;

    // Manifests and lists that the first retained snapshot (or a tag) still uses.
    let mut keep_manifests: HashSet<String> = HashSet::new();
    for s in std::iter::once(&retained).chain(&tags) {
        keep_manifests.extend(metadata_files(table, s).await?);
    }
    // Data files that tags still use.
    let mut keep_data: HashSet<Path> = HashSet::new();
    for tag in &tags {
        for entry in table.live_files(tag).await? {
            keep_data.insert(table.data_file_path(&entry)?);
        }
    }

    let mut plan = DeletionPlan::default();
    let mut data: HashSet<Path> = HashSet::new();
    for id in begin + 1..=end {
        let snapshot = if id == end {
            retained.clone()
        } else {
            table.snapshot(id).await?
        };
        let entries = read_list_entries(table, &snapshot.delta_manifest_list).await?;
        for path in deleted_files(table, &entries)? {
            if !keep_data.contains(&path) {
                data.insert(path);
            }
        }
    }
    let mut manifests: HashSet<String> = HashSet::new();
    let mut lists: HashSet<String> = HashSet::new();
    for id in begin..end {
        let snapshot = table.snapshot(id).await?;
        let changelog = snapshot
            .changelog_manifest_list
            .as_ref()
            .filter(|_| !keep_changelog);
        if let Some(changelog) = changelog {
            for entry in read_list_entries(table, changelog).await? {
                if entry.kind == FileKind::Add {
                    data.extend(file_paths(table, &entry)?);
                }
            }
        }
        let own_lists = [
            Some(&snapshot.base_manifest_list),
            Some(&snapshot.delta_manifest_list),
            changelog,
        ];
        for list in own_lists.into_iter().flatten() {
            if keep_manifests.contains(list) {
                continue;
            }
            for meta in read_list_lenient(table, list).await?.unwrap_or_default() {
                if !keep_manifests.contains(&meta.file_name) {
                    manifests.insert(meta.file_name);
                }
            }
            lists.insert(list.clone());
        }
    }
    plan.data_files = data.into_iter().collect();
    plan.manifests = manifests
        .into_iter()
        .map(|m| table.manifest_path(&m))
        .collect();
    plan.manifest_lists = lists.into_iter().map(|l| table.manifest_path(&l)).collect();
    Ok(plan)
}

/// Data files (with their extra files) that a delta deletes for good: DELETE entries
/// whose file the same delta does not add back (Java's upgrade moves a file between
/// levels with a DELETE and an ADD of the same name).
fn deleted_files(table: &Table, entries: &[ManifestEntry]) -> Result<Vec<Path>> {
    let local = |e: &&ManifestEntry| e.file.external_path.is_none();
    let added: HashSet<Path> = entries
        .iter()
        .filter(local)
        .filter(|e| e.kind == FileKind::Add)
        .map(|e| table.data_file_path(e))
        .collect::<Result<_>>()?;
    let mut deleted: HashMap<Path, &ManifestEntry> = HashMap::new();
    for entry in entries
        .iter()
        .filter(local)
        .filter(|e| e.kind == FileKind::Delete)
    {
        let path = table.data_file_path(entry)?;
        if !added.contains(&path) {
            deleted.insert(path, entry);
        }
    }
    let mut paths = Vec::new();
    for entry in deleted.into_values() {
        paths.extend(file_paths(table, entry)?);
    }
    Ok(paths)
}

/// The data file of an entry and its extra files.
fn file_paths(table: &Table, entry: &ManifestEntry) -> Result<Vec<Path>> {
    if entry.file.external_path.is_some() {
        return Ok(Vec::new());
    }
    let path = table.data_file_path(entry)?;
    let mut paths = vec![path.clone()];
    if !entry.file.extra_files.is_empty() {
        let dir = table.bucket_path(&table.partition_values(&entry.partition)?, entry.bucket);
        paths.extend(
            entry
                .file
                .extra_files
                .iter()
                .map(|f| dir.clone().join(f.as_str())),
        );
    }
    Ok(paths)
}

/// Names of the manifest lists, manifests, index manifest and statistics file that a
/// snapshot uses. Its lists must be readable: what to keep cannot be guessed.
pub(crate) async fn metadata_files(table: &Table, snapshot: &Snapshot) -> Result<Vec<String>> {
    let mut names = vec![
        snapshot.base_manifest_list.clone(),
        snapshot.delta_manifest_list.clone(),
    ];
    let mut lists = vec![&snapshot.base_manifest_list, &snapshot.delta_manifest_list];
    if let Some(changelog) = &snapshot.changelog_manifest_list {
        names.push(changelog.clone());
        lists.push(changelog);
    }
    for list in lists {
        names.extend(
            table
                .read_manifest_list(list)
                .await?
                .into_iter()
                .map(|m| m.file_name),
        );
    }
    names.extend(snapshot.index_manifest.iter().cloned());
    names.extend(snapshot.statistics.iter().cloned());
    Ok(names)
}

/// A manifest list, or `None` if it is already gone (a previous run was interrupted).
pub(crate) async fn read_list_lenient(
    table: &Table,
    name: &str,
) -> Result<Option<Vec<ManifestFileMeta>>> {
    match table.read_manifest_list(name).await {
        Ok(metas) => Ok(Some(metas)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The entries of every manifest of a list; missing files count as empty.
pub(crate) async fn read_list_entries(table: &Table, list: &str) -> Result<Vec<ManifestEntry>> {
    let Some(metas) = read_list_lenient(table, list).await? else {
        return Ok(Vec::new());
    };
    let mut entries = Vec::new();
    for meta in metas {
        match table.read_manifest(&meta.file_name).await {
            Ok(more) => entries.extend(more),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(entries)
}

/// Snapshots named by tags (`tag/tag-<name>`, a snapshot file with extra fields).
pub(crate) async fn tagged_snapshots(table: &Table) -> Result<Vec<Snapshot>> {
    let dir = table.path_of("tag");
    let mut tags = Vec::new();
    for path in list_files(table, &dir, "tag-").await? {
        let text = read_text(&**table.store(), &path).await?;
        let snapshot = Snapshot::from_json(&text)
            .map_err(|e| Error::format(format!("tag file {path}: {e}")))?;
        tags.push(snapshot);
    }
    Ok(tags)
}

/// The smallest `nextSnapshot` of the table's consumers (`consumer/consumer-<id>`).
pub(crate) async fn min_consumer_snapshot(table: &Table) -> Result<Option<i64>> {
    Ok(table
        .consumers()
        .await?
        .into_iter()
        .map(|(_, next)| next)
        .min())
}

/// Objects directly under `dir` whose names start with `prefix`.
async fn list_files(table: &Table, dir: &Path, prefix: &str) -> Result<Vec<Path>> {
    Ok(list_dir(&**table.store(), dir)
        .await?
        .into_iter()
        .map(|o| o.location)
        .filter(|p| p.filename().is_some_and(|n| n.starts_with(prefix)))
        .collect())
}

async fn delete_quietly(table: &Table, location: &Path) -> Result<bool> {
    match table.store().delete(location).await {
        Ok(()) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(Error::store(format!("deleting {location}"), e)),
    }
}

/// Deletes `paths` concurrently; returns how many existed.
pub(crate) async fn delete_all(table: &Table, paths: Vec<Path>) -> Result<usize> {
    let deletes: Vec<_> = paths.iter().map(|p| delete_quietly(table, p)).collect();
    let done: Vec<bool> = futures::stream::iter(deletes)
        .buffer_unordered(IO_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(done.into_iter().filter(|&d| d).count())
}

async fn write_earliest(table: &Table, id: i64) {
    table.write_snapshot_hint("EARLIEST", id).await;
}

async fn write_earliest_if_missing(table: &Table, id: i64) {
    let location = table.snapshot_dir().join("EARLIEST");
    if matches!(
        table.store().head(&location).await,
        Err(object_store::Error::NotFound { .. })
    ) {
        write_earliest(table, id).await;
    }
}
