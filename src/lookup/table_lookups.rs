//! The lookups of one joined table, and how they follow it: [`TableLookups`] owns the
//! point lookups its joins share and moves them, and every join's cache, from snapshot
//! to snapshot. Two loops drive the moves: [`TableLookups::follow_commits`] applies this
//! process's own commits as soon as they are published (so `wait_for_cdc` joins see
//! them at once), and [`TableLookups::poll`] picks up other writers' snapshots every
//! `refresh_interval` and newer `max_pt()` partitions every `partition_refresh_interval`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{ChangedKeys, LookupTable, SnapshotDelta, changed_keys};
use crate::error::Result;
use crate::lsm::point_lookup::PointLookup;

/// Longest wait between attempts of a refresh that keeps failing after a commit.
const MAX_REFRESH_BACKOFF: Duration = Duration::from_secs(30);

/// The joins on one table and the point lookups they share.
pub struct TableLookups {
    point: Arc<PointLookup>,
    joins: Vec<Arc<LookupTable>>,
    /// One refresh at a time: each applies the delta from where the previous one ended.
    /// Holds, for each join, whether its cache is behind the point lookups: a refresh
    /// moved those to a newer snapshot, then failed before that cache applied the change
    /// (a read of the new files failed). The next refresh then reloads that cache, since
    /// the delta is gone; the joins that applied it are not reloaded.
    refreshing: tokio::sync::Mutex<Vec<bool>>,
}

impl TableLookups {
    pub fn new(point: Arc<PointLookup>, joins: Vec<Arc<LookupTable>>) -> Self {
        TableLookups {
            point,
            refreshing: tokio::sync::Mutex::new(vec![false; joins.len()]),
            joins,
        }
    }

    pub fn joins(&self) -> &[Arc<LookupTable>] {
        &self.joins
    }

    /// Loads the `full` caches (in the background at start; the joins report ready when
    /// done).
    pub async fn load(&self) -> Result<()> {
        let _one_at_a_time = self.refreshing.lock().await;
        for join in &self.joins {
            join.load_full().await?;
        }
        Ok(())
    }

    /// Moves to the table's latest snapshot and updates every join's cache from the
    /// rows that changed. Returns whether the snapshot moved.
    pub async fn refresh(&self) -> Result<bool> {
        let mut behind = self.refreshing.lock().await;
        let started = Instant::now();
        let delta = match self.point.refresh().await? {
            Some(delta) => delta,
            // Nothing new, but a cache missed the last move: it reloads below.
            None if behind.contains(&true) => {
                let at = self.point.snapshot_id();
                SnapshotDelta {
                    from: at,
                    to: at,
                    commit_time_millis: None,
                    changed_files: Vec::new(),
                    deletions: Default::default(),
                    reload: false,
                }
            }
            None => return Ok(false),
        };
        // The point lookups moved: every cache is behind until it applied this delta.
        let was_behind = std::mem::replace(&mut *behind, vec![true; self.joins.len()]);
        let changed = if delta.reload || delta.changed_files.is_empty() {
            ChangedKeys::default()
        } else {
            changed_keys(&self.point.table(), &delta.changed_files, &delta.deletions).await?
        };
        let mut failed = None;
        for ((join, behind), was_behind) in self.joins.iter().zip(behind.iter_mut()).zip(was_behind)
        {
            match join
                .apply(&delta, &changed, delta.reload || was_behind)
                .await
            {
                Ok(()) => *behind = false,
                // Its lookups fail with that error from now on (the facts are held), so
                // it neither keeps the others behind nor fails their refreshes.
                Err(_) if join.columns_dropped() => *behind = false,
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        tracing::debug!(
            table = %self.point.table().identifier(),
            snapshot = ?delta.to,
            changed_keys = changed.keys.len(),
            reload = delta.reload,
            took_ms = started.elapsed().as_millis() as u64,
            "lookups refreshed"
        );
        Ok(true)
    }

    /// Moves `max_pt()` joins to the newest partition of the snapshot they read (a
    /// `full` cache reloads). Runs on its own interval, not on every refresh: a partition
    /// that just appeared is usually still filling, and joining against it early would
    /// miss.
    pub(crate) async fn refresh_partitions(&self) -> Result<()> {
        let mut behind = self.refreshing.lock().await;
        for (join, behind) in self.joins.iter().zip(behind.iter_mut()) {
            if join.select_newest_partition()? {
                // Until the reload succeeds the cache holds the old partition's rows:
                // a failed one is redone by the next refresh, which reloads it.
                *behind = true;
                join.load_full().await?;
                *behind = false;
            }
        }
        Ok(())
    }

    /// Applies each commit `commits` announces, then calls `visible` with it: from then
    /// on every join of this table reads it. A refresh that fails (the store blinked) is
    /// tried again with backoff (100 ms doubling to 30 s), never skipped: until it
    /// succeeds the joins read the snapshot before, and `visible` is not called, so
    /// `wait_for_cdc` joins wait (up to `max_wait`) rather than see the commit early.
    /// Returns when `commits` closes or `stop` fires.
    pub(crate) async fn follow_commits<T: Clone>(
        &self,
        mut commits: watch::Receiver<T>,
        mut visible: impl FnMut(T),
        mut stop: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                changed = commits.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let commit = commits.borrow_and_update().clone();
                    let mut wait = Duration::from_millis(100);
                    while let Err(e) = self.refresh().await {
                        tracing::warn!(table = %self.point.table().identifier(), error = %e,
                            retry_in = ?wait, "lookup refresh after a commit failed; trying again");
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = stop.changed() => return,
                        }
                        wait = (wait * 2).min(MAX_REFRESH_BACKOFF);
                    }
                    visible(commit);
                }
                _ = stop.changed() => return,
            }
        }
    }

    /// Refreshes every `refresh_interval` (snapshots of other writers), and moves
    /// `max_pt()` joins to a newer partition every `partition_interval` when set. A
    /// failure is logged and the next tick tries again. Returns when `stop` fires.
    pub(crate) async fn poll(
        &self,
        refresh_interval: Duration,
        partition_interval: Option<Duration>,
        mut stop: watch::Receiver<bool>,
    ) {
        let table = self.point.table().identifier().to_string();
        let mut refresh_tick = tokio::time::interval(refresh_interval);
        let mut partition_tick =
            tokio::time::interval(partition_interval.unwrap_or(Duration::from_secs(3600)));
        loop {
            tokio::select! {
                _ = refresh_tick.tick() => {
                    if let Err(e) = self.refresh().await {
                        tracing::warn!(%table, error = %e, "lookup refresh failed; retrying later");
                    }
                }
                _ = partition_tick.tick(), if partition_interval.is_some() => {
                    if let Err(e) = self.refresh_partitions().await {
                        tracing::warn!(%table, error = %e, "partition refresh failed; retrying later");
                    }
                }
                _ = stop.changed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use object_store::ObjectStoreExt;

    use super::*;
    use crate::lookup::{LookupSpec, PartitionChoice, Strategy};
    use crate::lsm::point_lookup::LookupOptions;
    use crate::lsm::writer::TableWriter;
    use crate::table::datum::Datum;
    use crate::table::row_kind::RowKind;
    use crate::table::schema::TableSchema;
    use crate::table::types::{DataType, MAX_LENGTH};
    use crate::table::{Table, TableIdentifier, Warehouse};

    async fn write(table: &Arc<Table>, dt: &str, v: &str) {
        let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
        let row = vec![
            Datum::String(dt.into()),
            Datum::Int(1),
            Datum::String(v.into()),
        ];
        writer.write(RowKind::Insert, row).unwrap();
        writer.commit(BTreeMap::new()).await.unwrap();
        writer.close().await.unwrap();
    }

    /// A `max_pt()` join whose `full` reload fails after it moved to a new partition
    /// (a file of it could not be read) is reloaded by the next refresh, instead of
    /// answering from the old partition's rows until something else reloads it.
    #[tokio::test]
    async fn a_failed_reload_after_a_partition_switch_is_redone_by_the_next_refresh() {
        let wh = Warehouse::in_memory();
        let string = DataType::Varchar(MAX_LENGTH);
        let schema = TableSchema::new(
            vec![
                ("dt".into(), string, false),
                ("id".into(), DataType::Int, false),
                ("v".into(), string, true),
            ],
            vec!["dt".into()],
            vec!["dt".into(), "id".into()],
            BTreeMap::from([("bucket".to_string(), "1".to_string())]),
        )
        .unwrap();
        let id = TableIdentifier::parse("db.prices").unwrap();
        let table = Arc::new(Table::create(&wh, &id, schema).await.unwrap());
        write(&table, "2024-01-01", "old").await;
        let point = Arc::new(
            PointLookup::open(table.clone(), LookupOptions::default())
                .await
                .unwrap(),
        );
        let spec = LookupSpec {
            strategy: Strategy::Full,
            key_columns: vec![1],
            projection: vec![2],
            partition: Some(PartitionChoice::Newest),
        };
        let join = Arc::new(LookupTable::new(point.clone(), spec).unwrap());
        let lookups = TableLookups::new(point, vec![join.clone()]);
        lookups.load().await.unwrap();
        let value = |row: Option<crate::lookup::ProjectedRow>| row.unwrap().decode().unwrap();
        assert_eq!(
            value(join.get(&[Datum::Int(1)]).await.unwrap()),
            vec![Datum::String("old".into())]
        );

        // A newer partition appears; its file cannot be read while the join moves to it.
        write(&table, "2024-01-02", "new").await;
        assert!(lookups.refresh().await.unwrap());
        let latest = table.latest_snapshot().await.unwrap().unwrap();
        let newest_file = table
            .live_files(&latest)
            .await
            .unwrap()
            .into_iter()
            .map(|entry| table.data_file_path(&entry).unwrap())
            .find(|path| path.as_ref().contains("2024-01-02"))
            .unwrap();
        let bytes = table
            .store()
            .get(&newest_file)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        table.store().delete(&newest_file).await.unwrap();
        assert!(lookups.refresh_partitions().await.is_err());

        // Readable again: the next refresh reloads, though no snapshot came.
        table.store().put(&newest_file, bytes.into()).await.unwrap();
        lookups.refresh().await.unwrap();
        assert_eq!(
            value(join.get(&[Datum::Int(1)]).await.unwrap()),
            vec![Datum::String("new".into())]
        );
    }
}
