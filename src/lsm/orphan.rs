//! Orphan-file cleaning, as Java's `OrphanFilesClean` does it: files in the table's
//! directories that no snapshot (or tag) references, left behind by failed commits,
//! crashed writers or interrupted expiry, are removed once older than a threshold.
//!
//! Looked at: data files in bucket directories, `manifest/` (manifests, manifest lists,
//! index manifests), and anything in `snapshot/` other than `snapshot-<n>`, `EARLIEST` and
//! `LATEST` (e.g. pypaimon's `.snapshot-<n>.<uuid>.tmp`). On a local warehouse also
//! object_store's staging files (`<name>#<n>`), which its listings hide. Never touched:
//! `schema/`, snapshot files, tags, consumers, `index/`, `statistics/`, the writer fence
//! (`_lakejoin/`) and unknown directories.
//!
//! The age threshold (default one day) is what keeps this safe next to running writers:
//! a file written for a commit that has not been published yet is unreferenced but new.
//! If a snapshot that still exists references a manifest that cannot be read, cleaning
//! stops without deleting anything rather than guess.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::expire::tagged_snapshots;
use crate::error::{Error, Result};
use crate::table::manifest::ManifestEntry;
use crate::table::snapshot::Snapshot;
use crate::table::{IO_CONCURRENCY, Table};

/// Options of one cleaning run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanCleanConfig {
    /// Only files last modified longer ago than this are removed.
    pub older_than: Duration,
    /// Report what would be removed without removing it.
    pub dry_run: bool,
}

impl Default for OrphanCleanConfig {
    fn default() -> Self {
        OrphanCleanConfig {
            older_than: Duration::from_secs(24 * 3600),
            dry_run: false,
        }
    }
}

/// One unreferenced file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanFile {
    /// Path relative to the table directory.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, epoch milliseconds.
    pub last_modified_millis: i64,
}

/// What a cleaning run found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrphanCleanReport {
    /// Unreferenced files old enough: removed (or, on a dry run, to be removed).
    pub removed: Vec<OrphanFile>,
    /// Unreferenced files kept because they are younger than the threshold.
    pub too_recent: Vec<OrphanFile>,
    /// Files examined that snapshots reference.
    pub referenced: usize,
}

/// Finds unreferenced files of `table` and removes those older than the threshold.
pub async fn clean_orphan_files(
    table: &Table,
    config: &OrphanCleanConfig,
) -> Result<OrphanCleanReport> {
    let cutoff = SystemTime::now()
        .checked_sub(config.older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let cutoff_millis = millis(cutoff);
    let used = used_files(table).await?;
    let mut report = OrphanCleanReport::default();

    let table_root = table.path_of("");
    let mut listing = table.store().list(Some(&table_root));
    let mut candidates: Vec<(Path, OrphanFile)> = Vec::new();
    while let Some(meta) = listing
        .try_next()
        .await
        .map_err(|e| Error::store(format!("listing {table_root}"), e))?
    {
        let Some(relative) = meta.location.prefix_match(&table_root) else {
            continue;
        };
        let parts: Vec<String> = relative.map(|p| p.as_ref().to_string()).collect();
        let Some(referenced) = classify(&parts, &used, table.schema().partition_keys.len()) else {
            continue;
        };
        if referenced {
            report.referenced += 1;
            continue;
        }
        let file = OrphanFile {
            path: parts.join("/"),
            size: meta.size,
            last_modified_millis: meta.last_modified.timestamp_millis(),
        };
        if file.last_modified_millis < cutoff_millis {
            candidates.push((meta.location, file));
        } else {
            report.too_recent.push(file);
        }
    }
    for (location, file) in candidates {
        if !config.dry_run {
            match table.store().delete(&location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(Error::store(format!("deleting {location}"), e)),
            }
        }
        report.removed.push(file);
    }
    if let Some(dir) = table.local_dir() {
        let dir = dir.to_path_buf();
        let dry_run = config.dry_run;
        let staged =
            tokio::task::spawn_blocking(move || clean_staging_files(&dir, cutoff, dry_run))
                .await
                .map_err(|e| Error::task("staging-file scan", e))??;
        report.removed.extend(staged);
    }
    report.removed.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report)
}

/// Names in use: manifest lists, manifests, index manifests and statistics files
/// (`manifest/`), and data files with their extra files.
#[derive(Debug, Default)]
struct UsedFiles {
    metadata: HashSet<String>,
    data: HashSet<String>,
}

/// Whether a file at `parts` (relative to the table) is referenced, or `None` if it is
/// not in a directory orphan cleaning looks at.
fn classify(parts: &[String], used: &UsedFiles, partition_keys: usize) -> Option<bool> {
    let (name, dirs) = parts.split_last()?;
    match dirs {
        [dir] if dir == "snapshot" => {
            Some(name.starts_with("snapshot-") || name == "EARLIEST" || name == "LATEST")
        }
        [dir] if dir == "manifest" => Some(used.metadata.contains(name)),
        [partitions @ .., bucket]
            if bucket.starts_with("bucket-")
                && partitions.len() == partition_keys
                && partitions.iter().all(|p| p.contains('=')) =>
        {
            Some(used.data.contains(name))
        }
        _ => None,
    }
}

/// Collects what every snapshot and tag references.
async fn used_files(table: &Table) -> Result<UsedFiles> {
    let mut snapshots: Vec<Snapshot> = Vec::new();
    for id in table.snapshot_ids().await? {
        match table.snapshot(id).await {
            Ok(s) => snapshots.push(s),
            // Expired meanwhile: what it referenced is being deleted anyway.
            Err(Error::SnapshotNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let tags = tagged_snapshots(table).await?;
    let mut used = UsedFiles::default();
    // manifest name -> a snapshot using it (to tell expiry from damage if it is missing).
    let mut manifests: BTreeMap<String, Option<i64>> = BTreeMap::new();
    let tagged = tags.iter().map(|s| (s, None));
    for (snapshot, id) in snapshots.iter().map(|s| (s, Some(s.id))).chain(tagged) {
        let lists = [
            Some(&snapshot.base_manifest_list),
            Some(&snapshot.delta_manifest_list),
            snapshot.changelog_manifest_list.as_ref(),
        ];
        used.metadata
            .extend(snapshot.index_manifest.iter().cloned());
        used.metadata.extend(snapshot.statistics.iter().cloned());
        for list in lists.into_iter().flatten() {
            used.metadata.insert(list.clone());
            match table.read_manifest_list(list).await {
                Ok(metas) => {
                    for m in metas {
                        manifests.entry(m.file_name).or_insert(id);
                    }
                }
                Err(e) if e.is_not_found() => ensure_gone(table, id, list).await?,
                Err(e) => return Err(e),
            }
        }
    }
    // Long-lived changelogs (docs/format.md §11.2) keep the changelog files and
    // manifests of expired snapshots; their other lists are gone with the snapshots.
    for id in table.long_lived_changelog_ids().await? {
        let Some(changelog) = table.long_lived_changelog(id).await? else {
            continue;
        };
        if let Some(list) = &changelog.changelog_manifest_list {
            used.metadata.insert(list.clone());
            match table.read_manifest_list(list).await {
                Ok(metas) => {
                    for m in metas {
                        manifests.entry(m.file_name).or_insert(Some(id));
                    }
                }
                Err(e) if e.is_not_found() => ensure_gone(table, Some(id), list).await?,
                Err(e) => return Err(e),
            }
        }
    }
    used.metadata.extend(manifests.keys().cloned());
    let reads: Vec<_> = manifests
        .iter()
        .map(|(name, id)| read_manifest_if_live(table, name, *id))
        .collect();
    let lists: Vec<Vec<ManifestEntry>> = futures::stream::iter(reads)
        .buffer_unordered(IO_CONCURRENCY)
        .try_collect()
        .await?;
    // ADD and DELETE entries alike: a file a snapshot deletes may still be live in an
    // older one.
    for entry in lists.into_iter().flatten() {
        used.data.insert(entry.file.file_name);
        used.data.extend(entry.file.extra_files);
    }
    Ok(used)
}

async fn read_manifest_if_live(
    table: &Table,
    name: &str,
    snapshot: Option<i64>,
) -> Result<Vec<ManifestEntry>> {
    match table.read_manifest(name).await {
        Ok(entries) => Ok(entries),
        Err(e) if e.is_not_found() => {
            ensure_gone(table, snapshot, name).await?;
            Ok(Vec::new())
        }
        Err(e) => Err(e),
    }
}

/// A file `snapshot` references is missing: fine if the snapshot expired meanwhile, an
/// error (stop, delete nothing) if it still exists or is a tag.
async fn ensure_gone(table: &Table, snapshot: Option<i64>, file: &str) -> Result<()> {
    let still_there = match snapshot {
        None => true,
        Some(id) => match table.snapshot(id).await {
            Ok(_) => true,
            Err(Error::SnapshotNotFound { .. }) => false,
            Err(e) => return Err(e),
        },
    };
    if still_there {
        return Err(Error::format(format!(
            "{} references the missing file manifest/{file}; not cleaning orphan files \
             of a damaged table",
            snapshot.map_or_else(|| "a tag".to_string(), |id| format!("snapshot {id}"))
        )));
    }
    Ok(())
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Removes object_store staging files (`<name>#<digits>`) under `dir` modified before
/// `cutoff`; they are leftovers of interrupted uploads and never part of a table.
fn clean_staging_files(
    dir: &std::path::Path,
    cutoff: SystemTime,
    dry_run: bool,
) -> Result<Vec<OrphanFile>> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let entries = match std::fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(Error::Io {
                    context: format!("listing {}", current.display()),
                    source: e,
                });
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let staging = name.rsplit_once('#').is_some_and(|(base, suffix)| {
                !base.is_empty() && !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit())
            });
            let modified = meta.modified().unwrap_or(SystemTime::now());
            if !staging || modified >= cutoff {
                continue;
            }
            if !dry_run
                && let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                return Err(Error::Io {
                    context: format!("deleting {}", path.display()),
                    source: e,
                });
            }
            let relative = path.strip_prefix(dir).unwrap_or(&path);
            found.push(OrphanFile {
                path: relative.to_string_lossy().into_owned(),
                size: meta.len(),
                last_modified_millis: millis(modified),
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &str) -> Vec<String> {
        p.split('/').map(str::to_string).collect()
    }

    #[test]
    fn classifies_only_table_file_directories() {
        let used = UsedFiles {
            metadata: HashSet::from(["manifest-a".to_string()]),
            data: HashSet::from(["data-a.parquet".to_string()]),
        };
        let c = |p: &str, keys| classify(&parts(p), &used, keys);
        assert_eq!(c("snapshot/snapshot-3", 0), Some(true));
        assert_eq!(c("snapshot/LATEST", 0), Some(true));
        assert_eq!(c("snapshot/.snapshot-3.abc.tmp", 0), Some(false));
        assert_eq!(c("manifest/manifest-a", 0), Some(true));
        assert_eq!(c("manifest/manifest-b", 0), Some(false));
        assert_eq!(c("bucket-0/data-a.parquet", 0), Some(true));
        assert_eq!(c("bucket-0/data-b.parquet", 0), Some(false));
        assert_eq!(c("dt=1/bucket-0/data-b.parquet", 1), Some(false));
        assert_eq!(c("dt=1/bucket-0/data-b.parquet", 0), None);
        assert_eq!(c("schema/schema-0", 0), None);
        assert_eq!(c("index/index-1", 0), None);
        assert_eq!(c("tag/tag-x", 0), None);
        assert_eq!(c("README", 0), None);
        assert_eq!(c("_lakejoin/writer/epoch-1", 0), None);
        assert_eq!(c("_lakejoin/writer/epoch-1", 2), None);
    }
}
