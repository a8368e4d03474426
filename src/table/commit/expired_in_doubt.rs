//! A commit in doubt whose window of possible snapshots was partly expired before a retry
//! could read it back (docs/format.md §9.1, "Expired while in doubt").
//!
//! The retry cannot tell from the snapshot ids alone whether one of the expired snapshots
//! was this commit. Publishing it again if it did land would apply it twice, and would
//! name a delta manifest list that the expiry deleted, leaving a snapshot nobody can read.
//! So the table's files decide: what an expiry leaves behind of a commit it removed.

use std::collections::HashSet;

use object_store::ObjectStoreExt;

use super::PreparedCommit;
use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::manifest::{FileIdentifier, FileKind, ManifestCompression};
use crate::table::snapshot::Snapshot;

impl Table {
    /// Whether `prepared` landed in a snapshot that expiry has removed since, judged
    /// against `latest`:
    /// - its delta manifest list is gone: only the expiry of its own snapshot deletes it;
    /// - a data file it adds is live in `latest`, or deleted by a retained snapshot's
    ///   delta (a compaction after it);
    /// - a data file it adds is gone from the store: the expiry of the compaction that
    ///   replaced it deleted it.
    ///
    /// Otherwise it did not land, except in one window: an expiry that removed both this
    /// commit's snapshot and a later compaction of its files, and has not deleted their
    /// files yet. That takes two unlikely events inside one expiry run.
    pub(super) async fn landed_in_expired_snapshot(
        &self,
        prepared: &PreparedCommit,
        latest: &Snapshot,
    ) -> Result<bool> {
        if !self.manifest_exists(&prepared.delta_list).await? {
            return Ok(true);
        }
        let entries = &prepared.request.entries;
        // An upgrade deletes and adds the same file (another level): it existed before.
        let deleted_by_us: HashSet<&str> = entries
            .iter()
            .filter(|e| e.kind == FileKind::Delete)
            .map(|e| e.file.file_name.as_str())
            .collect();
        let added: Vec<_> = entries.iter().filter(|e| e.kind == FileKind::Add).collect();
        if added.is_empty() {
            return Ok(false);
        }
        let ours: HashSet<FileIdentifier> = added.iter().map(|e| e.identifier()).collect();
        if self
            .live_files(latest)
            .await?
            .iter()
            .any(|e| ours.contains(&e.identifier()))
        {
            return Ok(true);
        }
        let first = self
            .snapshot_ids()
            .await?
            .first()
            .copied()
            .unwrap_or(latest.id);
        for id in first..=latest.id {
            let snapshot = match self.snapshot(id).await {
                Ok(s) => s,
                Err(Error::SnapshotNotFound { .. }) => continue,
                Err(e) => return Err(e),
            };
            let metas = self
                .read_manifest_list(&snapshot.delta_manifest_list)
                .await?;
            let compacted = self
                .read_manifests(&metas)
                .await?
                .iter()
                .any(|e| e.kind == FileKind::Delete && ours.contains(&e.identifier()));
            if compacted {
                return Ok(true);
            }
        }
        for entry in added
            .iter()
            .filter(|e| !deleted_by_us.contains(e.file.file_name.as_str()))
            .filter(|e| e.file.external_path.is_none())
        {
            let location = self.data_file_path(entry)?;
            match self.store().head(&location).await {
                Ok(_) => {}
                Err(object_store::Error::NotFound { .. }) => return Ok(true),
                Err(e) => return Err(Error::store(format!("checking {location}"), e)),
            }
        }
        Ok(false)
    }

    /// Gives `prepared` new delta (and changelog) manifest lists with the same content.
    /// A commit that did not land is published again under them: should an expiry that
    /// is still running have removed this commit's own snapshot after all (the window in
    /// [`Table::landed_in_expired_snapshot`]), it deletes the old lists, not the ones the
    /// new snapshot names.
    pub(super) async fn renew_lists(
        &self,
        prepared: &mut PreparedCommit,
        compression: ManifestCompression,
    ) -> Result<()> {
        let (delta_list, delta_list_size) = self
            .write_manifest_list(&prepared.delta_metas, compression)
            .await?;
        let changelog_list = match &prepared.changelog_list {
            Some((name, _)) => {
                let metas = self.read_manifest_list(name).await?;
                Some(self.write_manifest_list(&metas, compression).await?)
            }
            None => None,
        };
        let former = std::mem::replace(&mut prepared.delta_list, delta_list);
        prepared.former_delta_lists.push(former);
        prepared.delta_list_size = delta_list_size;
        prepared.changelog_list = changelog_list;
        Ok(())
    }

    /// The result of a commit found to have landed in an expired snapshot: the commit's
    /// own identity and properties, at the id of `latest`, the newest snapshot, which
    /// holds its changes.
    pub(super) fn expired_commit(prepared: &PreparedCommit, latest: &Snapshot) -> Snapshot {
        let request = &prepared.request;
        Snapshot {
            commit_user: request.commit_user.clone(),
            commit_identifier: request.commit_identifier,
            commit_kind: request.kind,
            delta_manifest_list: prepared.delta_list.clone(),
            delta_record_count: prepared.delta_record_count,
            properties: (!request.properties.is_empty()).then(|| request.properties.clone()),
            ..latest.clone()
        }
    }

    async fn manifest_exists(&self, name: &str) -> Result<bool> {
        let location = self.manifest_path(name);
        match self.store().head(&location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(Error::store(format!("checking {location}"), e)),
        }
    }
}
