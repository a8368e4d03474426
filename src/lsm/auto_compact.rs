//! Automatic compaction for a [`super::writer::TableWriter`]: after each commit, the
//! buckets it wrote that reach `num-sorted-run.compaction-trigger` sorted runs are handed
//! to a [`BackgroundCompactor`], so the writer keeps appending while they compact. The
//! writer waits for that compaction only when a bucket exceeds
//! `num-sorted-run.stop-trigger` runs, or, for tables whose readers skip level 0
//! (first-row, deletion vectors, `compaction.force-up-level-0`), always: their data
//! must not stay on level 0.
//!
//! A commit that `full-compaction.delta-commits` (or the `full-compaction` changelog
//! producer) makes due for a full compaction hands over every bucket instead, and the
//! writer waits for it, as Java's writers wait for the full compaction of such a
//! checkpoint: its changelog is that commit's.
//!
//! The writer tracks sorted runs per bucket without re-reading the table: the count
//! from the snapshot it started on (or from the compactor's latest round), plus the
//! level-0 files it committed since.

use std::collections::HashMap;
use std::sync::Arc;

use super::compact::{BucketId, Compactor};
use super::compact_task::{BackgroundCompactor, CompactionState};
use super::levels::Levels;
use super::reader::group_by_bucket;
use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::manifest::{FileKind, ManifestEntry};

/// A writer's view of its buckets and its background compactor.
#[derive(Debug)]
pub(crate) struct AutoCompaction {
    table: Arc<Table>,
    compact_user: String,
    trigger: usize,
    stop_trigger: usize,
    force_level0_up: bool,
    /// Sorted runs per bucket as of a snapshot id.
    known: HashMap<BucketId, (usize, i64)>,
    /// Level-0 files this writer committed per bucket: (snapshot id, files).
    own_level0: HashMap<BucketId, Vec<(i64, usize)>>,
    background: Option<BackgroundCompactor>,
    /// The last snapshot handed to the background compactor.
    last_requested: Option<i64>,
}

impl AutoCompaction {
    /// Bookkeeping for a writer starting on snapshot `snapshot_id` whose live files are
    /// `live`; `None` for `write-only` tables.
    pub(crate) fn new(
        table: Arc<Table>,
        writer_user: &str,
        live: Vec<ManifestEntry>,
        snapshot_id: i64,
    ) -> Option<Self> {
        let options = &table.options().maintenance;
        if options.write_only {
            return None;
        }
        let known = group_by_bucket(live)
            .into_iter()
            .map(|(id, files)| {
                let runs = Levels::new(files, options.num_levels).number_of_sorted_runs();
                (id, (runs, snapshot_id))
            })
            .collect();
        Some(AutoCompaction {
            // Never the writer's own user: the writer resumes from its latest snapshot's
            // properties, which a COMPACT snapshot does not carry.
            compact_user: format!("{writer_user}-compact-{}", uuid::Uuid::new_v4()),
            trigger: options.compaction_trigger,
            stop_trigger: options.stop_trigger,
            force_level0_up: table.options().force_up_level0(),
            known,
            own_level0: HashMap::new(),
            background: None,
            last_requested: None,
            table,
        })
    }

    /// Hands the buckets of committed snapshot `snapshot_id` (with `entries`) that need
    /// compaction to the background compactor, and waits for it when they must not grow.
    /// With `full_compaction`, the writer's commit identifier, every bucket is fully
    /// compacted instead, committed with that identifier, and waited for.
    pub(crate) async fn after_commit(
        &mut self,
        snapshot_id: i64,
        entries: &[ManifestEntry],
        full_compaction: Option<i64>,
    ) -> Result<()> {
        self.absorb_state();
        let mut added: HashMap<BucketId, usize> = HashMap::new();
        for e in entries
            .iter()
            .filter(|e| e.kind == FileKind::Add && e.file.level == 0)
        {
            *added.entry((e.partition.clone(), e.bucket)).or_default() += 1;
        }
        for (id, files) in &added {
            self.own_level0
                .entry(id.clone())
                .or_default()
                .push((snapshot_id, *files));
        }
        if let Some(identifier) = full_compaction {
            self.background()?.request_full(snapshot_id, identifier)?;
            self.last_requested = Some(snapshot_id);
            let state = self.background()?.wait_for(snapshot_id).await?;
            self.absorb(&state);
            if let Some(message) = state.last_error {
                // Nothing is lost: the next full compaction compares the top level with
                // every level again, these changes included.
                tracing::warn!(table = %self.table.identifier(), error = %message,
                    "full compaction after a commit failed; its changelog comes with the next one");
            }
            return Ok(());
        }
        if added.is_empty() {
            return Ok(());
        }
        let due: Vec<BucketId> = added
            .keys()
            .filter(|id| self.force_level0_up || self.estimated_runs(id) >= self.trigger)
            .cloned()
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let must_wait = self.force_level0_up
            || due
                .iter()
                .any(|id| self.estimated_runs(id) > self.stop_trigger);
        self.background()?.request(snapshot_id, due)?;
        self.last_requested = Some(snapshot_id);
        if must_wait {
            let state = self.background()?.wait_for(snapshot_id).await?;
            self.absorb(&state);
            if let Some(message) = state.last_error {
                tracing::warn!(table = %self.table.identifier(), error = %message,
                    "compaction the writer waited for failed; continuing");
            }
        }
        Ok(())
    }

    /// Waits until the compaction requested after this writer's commits has finished.
    pub(crate) async fn wait(&mut self) -> Result<()> {
        let Some(last) = self.last_requested else {
            return Ok(());
        };
        let Some(background) = self.background.as_mut() else {
            return Ok(());
        };
        let state = background.wait_for(last).await?;
        self.absorb(&state);
        self.error_of(&state)
    }

    /// Finishes queued compaction and stops the background task.
    pub(crate) async fn close(self) -> Result<()> {
        let Some(background) = self.background else {
            return Ok(());
        };
        let state = background.close().await?;
        let AutoCompaction { table, .. } = self;
        match state.last_error {
            None => Ok(()),
            Some(message) => Err(Error::BackgroundCompaction {
                table: table.identifier().to_string(),
                message,
            }),
        }
    }

    /// The background compactor's latest state, if it was started.
    pub(crate) fn state(&self) -> Option<CompactionState> {
        self.background.as_ref().map(BackgroundCompactor::state)
    }

    fn error_of(&self, state: &CompactionState) -> Result<()> {
        match &state.last_error {
            None => Ok(()),
            Some(message) => Err(Error::BackgroundCompaction {
                table: self.table.identifier().to_string(),
                message: message.clone(),
            }),
        }
    }

    fn background(&mut self) -> Result<&mut BackgroundCompactor> {
        if self.background.is_none() {
            let compactor = Compactor::new(self.table.clone(), self.compact_user.clone())?;
            self.background = Some(BackgroundCompactor::spawn(compactor));
        }
        self.background
            .as_mut()
            .ok_or_else(|| Error::format("background compactor missing"))
    }

    fn absorb_state(&mut self) {
        if let Some(state) = self.state() {
            self.absorb(&state);
        }
    }

    /// Takes newer per-bucket run counts from the compactor's state.
    fn absorb(&mut self, state: &CompactionState) {
        for (id, &(runs, as_of)) in &state.sorted_runs {
            let newer = self.known.get(id).is_none_or(|&(_, seen)| as_of > seen);
            if newer {
                self.known.insert(id.clone(), (runs, as_of));
                if let Some(own) = self.own_level0.get_mut(id) {
                    own.retain(|&(snapshot, _)| snapshot > as_of);
                }
            }
        }
    }

    /// Sorted runs of a bucket now: the last known count plus own level-0 files since.
    fn estimated_runs(&self, id: &BucketId) -> usize {
        let (runs, as_of) = self.known.get(id).copied().unwrap_or((0, 0));
        let own: usize = self.own_level0.get(id).map_or(0, |files| {
            files
                .iter()
                .filter(|&&(snapshot, _)| snapshot > as_of)
                .map(|&(_, n)| n)
                .sum()
        });
        runs + own
    }
}
