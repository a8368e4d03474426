//! Expiry of long-lived changelogs (`changelog/changelog-<id>`, docs/format.md §11.2), as
//! Java's `ExpireChangelogImpl` does it: a table whose changelog retention outlasts its
//! snapshots keeps the changelog files of expired snapshots, and this removes them once
//! `changelog.num-retained.max`, `changelog.time-retained` and
//! `changelog.num-retained.min` let them go, never what a consumer reads next.
//!
//! Why its own module: snapshot expiry (`lsm::expire`) hands the changelog of the
//! snapshots it removes over to these files, and this second step has its own
//! retention and its own deletion plan (only the changelog files and the changelog
//! manifests, which no snapshot shares).

use std::collections::HashSet;

use object_store::path::Path;

use super::expire::{delete_all, min_consumer_snapshot, read_list_entries, read_list_lenient};
use crate::error::Result;
use crate::table::Table;
use crate::table::changelog_options::ChangelogOptions;
use crate::table::manifest::FileKind;

/// What one run removed: the ids of the long-lived changelogs and how many files.
#[derive(Debug, Default)]
pub(crate) struct ChangelogExpired {
    pub(crate) ids: Vec<i64>,
    pub(crate) files_deleted: usize,
}

/// Expires the long-lived changelogs of `table` per its changelog options.
pub(crate) async fn expire_changelogs(
    table: &Table,
    options: &ChangelogOptions,
) -> Result<ChangelogExpired> {
    let ids = table.long_lived_changelog_ids().await?;
    let (Some(&earliest), Some(&latest_changelog)) = (ids.first(), ids.last()) else {
        return Ok(ChangelogExpired::default());
    };
    let Some(latest) = table.latest_snapshot_id().await? else {
        return Ok(ChangelogExpired::default());
    };
    let to_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let min = latest
        .saturating_sub(to_i64(options.retained_max))
        .saturating_add(1)
        .max(earliest);
    let mut max_exclusive = latest
        .saturating_sub(to_i64(options.retained_min))
        .saturating_add(1);
    if let Some(next) = min_consumer_snapshot(table).await? {
        max_exclusive = max_exclusive.min(next);
    }
    // As Java: the newest long-lived changelog stays, it bounds the range expired.
    max_exclusive = max_exclusive.min(latest_changelog);
    if max_exclusive <= earliest {
        return Ok(ChangelogExpired::default());
    }
    let threshold = chrono::Utc::now()
        .timestamp_millis()
        .saturating_sub(i64::try_from(options.time_retained.as_millis()).unwrap_or(i64::MAX));
    let mut end = max_exclusive;
    for id in min..=max_exclusive {
        if let Some(changelog) = table.long_lived_changelog(id).await?
            && changelog.time_millis >= threshold
        {
            end = id;
            break;
        }
    }
    if end <= earliest {
        return Ok(ChangelogExpired::default());
    }
    let mut files: Vec<Path> = Vec::new();
    let mut expired = Vec::new();
    for id in ids.iter().copied().filter(|&id| id < end) {
        let Some(changelog) = table.long_lived_changelog(id).await? else {
            continue;
        };
        if let Some(list) = &changelog.changelog_manifest_list {
            let mut manifests: HashSet<String> = HashSet::new();
            for entry in read_list_entries(table, list).await? {
                if entry.kind == FileKind::Add && entry.file.external_path.is_none() {
                    files.push(table.data_file_path(&entry)?);
                }
            }
            for meta in read_list_lenient(table, list).await?.unwrap_or_default() {
                manifests.insert(meta.file_name);
            }
            files.extend(manifests.iter().map(|m| table.manifest_path(m)));
            files.push(table.manifest_path(list));
        }
        expired.push(id);
    }
    // The records first, oldest first, then the files they name: a crash in between
    // leaves unreferenced files for orphan cleaning, never a record without its files.
    for &id in &expired {
        table.delete_long_lived_changelog(id).await?;
    }
    table.write_changelog_hint("EARLIEST", end).await;
    let files_deleted = delete_all(table, files).await?;
    tracing::info!(table = %table.identifier(), until = end, changelogs = expired.len(),
        "expired long-lived changelogs");
    Ok(ChangelogExpired {
        ids: expired,
        files_deleted,
    })
}
