//! Long-lived changelogs (docs/format.md §11.2): `changelog/changelog-<id>`, the JSON of
//! an expired snapshot kept for its changelog files, with the hints `changelog/LATEST`
//! and `changelog/EARLIEST` (Java's `ChangelogManager`).
//!
//! Why: a table whose changelog retention (`changelog.num-retained.*`,
//! `changelog.time-retained`) outlasts its snapshot retention keeps the changelog of
//! expired snapshots for streaming readers that lag behind. Java's expiry writes the
//! snapshot's JSON here before it deletes the snapshot, and its readers look here for a
//! snapshot id older than the earliest snapshot; lakejoin does both the same way.

use object_store::{ObjectStoreExt, PutPayload};

use super::snapshot::Snapshot;
use super::{Table, list_dir, read_bytes};
use crate::error::{Error, Result};

impl Table {
    fn changelog_dir(&self) -> object_store::path::Path {
        self.path_of("changelog")
    }

    /// The ids of the long-lived changelogs, ascending.
    pub(crate) async fn long_lived_changelog_ids(&self) -> Result<Vec<i64>> {
        let mut ids: Vec<i64> = list_dir(&**self.store(), &self.changelog_dir())
            .await?
            .into_iter()
            .filter_map(|o| {
                o.location
                    .filename()
                    .and_then(|n| n.strip_prefix("changelog-"))
                    .and_then(|n| n.parse().ok())
            })
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// The long-lived changelog `id`, or `None` when there is none.
    pub(crate) async fn long_lived_changelog(&self, id: i64) -> Result<Option<Snapshot>> {
        let location = self.changelog_dir().join(format!("changelog-{id}"));
        match read_bytes(&**self.store(), &location).await {
            Ok(bytes) => Snapshot::from_json(&String::from_utf8_lossy(&bytes))
                .map(Some)
                .map_err(|e| e.in_file(&location)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Snapshot `id`, or its long-lived changelog once the snapshot expired: what an
    /// incremental read of that id reads.
    pub(crate) async fn snapshot_or_changelog(&self, id: i64) -> Result<Snapshot> {
        match self.snapshot(id).await {
            Err(Error::SnapshotNotFound { .. }) => match self.long_lived_changelog(id).await? {
                Some(changelog) => Ok(changelog),
                None => Err(Error::SnapshotNotFound {
                    table: self.identifier().to_string(),
                    id,
                }),
            },
            other => other,
        }
    }

    /// Writes `snapshot` as the long-lived changelog of its id, then the `LATEST` hint.
    pub(crate) async fn write_long_lived_changelog(&self, snapshot: &Snapshot) -> Result<()> {
        let location = self
            .changelog_dir()
            .join(format!("changelog-{}", snapshot.id));
        self.store()
            .put(&location, PutPayload::from(snapshot.to_json().into_bytes()))
            .await
            .map_err(|e| Error::store(format!("writing {location}"), e))?;
        self.write_changelog_hint("LATEST", snapshot.id).await;
        Ok(())
    }

    /// Deletes the long-lived changelog `id` (a missing one is no error).
    pub(crate) async fn delete_long_lived_changelog(&self, id: i64) -> Result<()> {
        let location = self.changelog_dir().join(format!("changelog-{id}"));
        match self.store().delete(&location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Error::store(format!("deleting {location}"), e)),
        }
    }

    /// Writes `changelog/<name>` (`LATEST`, `EARLIEST`); best effort, as readers list the
    /// directory when a hint is wrong.
    pub(crate) async fn write_changelog_hint(&self, name: &str, id: i64) {
        let location = self.changelog_dir().join(name);
        if let Err(e) = self
            .store()
            .put(&location, PutPayload::from(id.to_string().into_bytes()))
            .await
        {
            tracing::warn!(table = %self.identifier(), error = %e, "could not write changelog/{name}");
        }
    }
}
