//! Finding a commit in doubt (docs/format.md §9.2): among the snapshots after the one it
//! was built on, and when some of those were expired before a retry could read them back,
//! from what the snapshots left show.
//!
//! In the second case the retry cannot tell from the snapshot ids alone whether one of
//! the expired snapshots was this commit. Publishing it again if it did land would apply
//! it twice, and would name a delta manifest list that the expiry deleted, leaving a
//! snapshot nobody can read. So the table's files decide.

use std::collections::HashSet;

use object_store::ObjectStoreExt;

use super::PreparedCommit;
use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::manifest::{FileKind, ManifestCompression, ManifestEntry};
use crate::table::snapshot::Snapshot;

/// A data file by where it lies and its name, whatever its level.
type FileName<'a> = (&'a [u8], i32, &'a str);

fn file_name(entry: &ManifestEntry) -> FileName<'_> {
    (&entry.partition, entry.bucket, &entry.file.file_name)
}

/// What the table's files say of a commit in doubt whose snapshot may have expired.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Landed,
    NotLanded,
    /// Files only it or its snapshot named are gone, and no snapshot left shows it:
    /// the expiry of its own snapshot removed them, or orphan cleaning did (a commit in
    /// doubt for longer than `--older-than`). Nothing tells the two apart.
    Unknowable(String),
}

impl Table {
    /// This commit, if it is among the snapshots `from..=latest`; `ForeignCommitOfUser` if
    /// an APPEND of its user that is not this commit is among them.
    ///
    /// A snapshot in that range that expiry removed may have been this commit while it
    /// is in doubt: then the table's files decide (see `judge_expired_in_doubt`), and a commit
    /// that did not land gets new manifest lists before it is published again.
    pub(super) async fn find_committed(
        &self,
        prepared: &mut PreparedCommit,
        from: i64,
        latest: Option<&Snapshot>,
        compression: ManifestCompression,
    ) -> Result<Option<Snapshot>> {
        let Some(latest) = latest else {
            return Ok(None);
        };
        let guard_from = prepared.user_guard_since.map_or(i64::MAX, |s| s + 1);
        let mut expired_in_doubt = false;
        for id in from..=latest.id {
            let read = if id == latest.id {
                Ok(latest.clone())
            } else {
                self.snapshot(id).await
            };
            let s = match read {
                Ok(s) => s,
                // A table whose changelog outlives its snapshots keeps an expired
                // snapshot's record as its long-lived changelog: that tells exactly.
                Err(Error::SnapshotNotFound { .. }) => match self.long_lived_changelog(id).await? {
                    Some(kept) => kept,
                    None => {
                        expired_in_doubt |= prepared.in_doubt_since.is_some_and(|d| id > d);
                        continue;
                    }
                },
                Err(e) => return Err(e),
            };
            if prepared.is(&s) {
                return Ok(Some(s));
            }
            if id >= guard_from && prepared.is_foreign_of_user(&s) {
                return Err(self.foreign_commit(&s));
            }
        }
        if expired_in_doubt {
            match self.judge_expired_in_doubt(prepared, latest).await? {
                Verdict::Landed => {
                    tracing::info!(table = %self.identifier(), latest = latest.id,
                        "a commit in doubt landed in a snapshot expired since");
                    return Ok(Some(Self::expired_commit(prepared, latest)));
                }
                Verdict::Unknowable(why) => {
                    return Err(Error::CommitOutcomeLost {
                        table: self.identifier().to_string(),
                        message: format!(
                            "the snapshots it may have landed in were expired, and {why}"
                        ),
                    });
                }
                Verdict::NotLanded => {}
            }
            // The old lists stay for orphan cleaning: a late write of an earlier attempt
            // may still name them.
            self.renew_lists(prepared, compression).await?;
            // Not among the snapshots up to `latest`: only a late write after it can be.
            prepared.in_doubt_since = Some(latest.id);
        }
        Ok(None)
    }

    /// Judges `prepared` against `latest`. It landed if a snapshot left shows it:
    /// - a manifest it wrote is in `latest`'s lists (every snapshot after it carries it
    ///   until a manifest merge);
    /// - a data file it adds is live in `latest`;
    /// - a data file it adds is deleted by a retained snapshot's delta (a compaction).
    ///
    /// Otherwise it did not land, unless one of its manifest lists (current or former)
    /// or data files is gone: then it is [`Verdict::Unknowable`]. A commit without data
    /// files (offsets only) is published again then: applying it twice changes nothing.
    /// One window remains for a commit judged not to have landed: an expiry still
    /// running that removed both its snapshot and a later compaction of its files, after
    /// a manifest merge, and has not yet deleted their files.
    async fn judge_expired_in_doubt(
        &self,
        prepared: &PreparedCommit,
        latest: &Snapshot,
    ) -> Result<Verdict> {
        let ours: HashSet<&str> = prepared
            .delta_metas
            .iter()
            .map(|m| m.file_name.as_str())
            .collect();
        if !ours.is_empty()
            && self
                .snapshot_manifests(latest)
                .await?
                .iter()
                .any(|m| ours.contains(m.file_name.as_str()))
        {
            return Ok(Verdict::Landed);
        }
        let entries = &prepared.request.entries;
        // An upgrade deletes and adds the same file (another level): it existed before.
        let deleted_by_us: HashSet<&str> = entries
            .iter()
            .filter(|e| e.kind == FileKind::Delete)
            .map(|e| e.file.file_name.as_str())
            .collect();
        let added: Vec<_> = entries.iter().filter(|e| e.kind == FileKind::Add).collect();
        // By name, not level: a compactor may have moved the file up a level since.
        let new_files: HashSet<FileName<'_>> = added
            .iter()
            .filter(|e| !deleted_by_us.contains(e.file.file_name.as_str()))
            .map(|e| file_name(e))
            .collect();
        if !new_files.is_empty() && self.shows_files(latest, &new_files).await? {
            return Ok(Verdict::Landed);
        }
        if entries.is_empty() && prepared.request.changelog.is_empty() {
            return Ok(Verdict::NotLanded);
        }
        let lists = std::iter::once(&prepared.delta_list).chain(&prepared.former_delta_lists);
        for list in lists {
            if !self.manifest_exists(list).await? {
                return Ok(Verdict::Unknowable(format!(
                    "its delta manifest list {list} is gone"
                )));
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
                Err(object_store::Error::NotFound { .. }) => {
                    return Ok(Verdict::Unknowable(format!(
                        "its data file {location} is gone"
                    )));
                }
                Err(e) => return Err(Error::store(format!("checking {location}"), e)),
            }
        }
        Ok(Verdict::NotLanded)
    }

    /// Whether one of `files` is live in `latest`, or deleted by the delta of a snapshot
    /// the table keeps.
    async fn shows_files(&self, latest: &Snapshot, files: &HashSet<FileName<'_>>) -> Result<bool> {
        if self
            .live_files(latest)
            .await?
            .iter()
            .any(|e| files.contains(&file_name(e)))
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
            if self
                .read_manifests(&metas)
                .await?
                .iter()
                .any(|e| e.kind == FileKind::Delete && files.contains(&file_name(e)))
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Gives `prepared` new delta (and changelog) manifest lists with the same content.
    /// A commit that did not land is published again under them: should an expiry that
    /// is still running have removed this commit's own snapshot after all (the window in
    /// [`Table::judge_expired_in_doubt`]), it deletes the old lists, not the ones the
    /// new snapshot names.
    async fn renew_lists(
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
    /// own identity and properties, under the first id it may have taken (expired, like
    /// its own; the offsets mirrored with it must name an expired snapshot to be used
    /// once the table keeps none of its writer), the rest from `latest`.
    fn expired_commit(prepared: &PreparedCommit, latest: &Snapshot) -> Snapshot {
        let request = &prepared.request;
        let id = prepared
            .in_doubt_since
            .map_or(latest.id, |since| since.saturating_add(1));
        Snapshot {
            id,
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
