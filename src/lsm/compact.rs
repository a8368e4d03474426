//! Compaction: merges sorted runs of a bucket into a higher level and commits the result as
//! a COMPACT snapshot (DELETE entries for the inputs, ADD entries for the outputs).
//!
//! A [`Compactor`] runs one *round* at a time: it plans on the latest snapshot (Paimon's
//! universal picker per bucket, or everything for a full compaction), rewrites the picked
//! files, and commits. Compaction keeps every row's sequence number, so appends may land
//! concurrently; `Table::commit` rejects the round if a file it replaces is no longer live
//! (another compaction got there first), and the round is then planned again.
//!
//! A compaction that writes the top level of a `changelog-producer` = `full-compaction`
//! table also writes that table's changelog (`compact_changelog`), committed in its
//! COMPACT snapshot, whoever runs it: the writer's periodic full compaction, the
//! universal picker merging every run, or `lakejoin table compact`.
//!
//! Retractions are dropped only when the output goes to the highest non-empty level, so
//! that nothing older is left for them to hide (Java's `dropDelete` rule), and never for
//! tables with `sequence.field`, where a change arriving later can still be older.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use super::compact_changelog::{MergedWithChangelog, merge_with_changelog};
use super::compact_steps::{CompactStep, StepRules, disjoint_in_key_order, plan_steps, upgraded};
use super::flush::{ColumnStream, FileTarget, RowStream, delete_data_files};
use super::levels::Levels;
use super::merge::{MergeEngine, MergedRuns, SequenceOrder, key_order};
use super::reader::{group_by_bucket, open_runs};
use super::universal::{CompactUnit, UniversalCompaction};
use crate::error::{Error, Result};
use crate::table::changelog_options::ChangelogProducer;
use crate::table::commit::CommitRequest;
use crate::table::data_file::{DataFileWriteOptions, KeyValue};
use crate::table::datum::Row;
use crate::table::{IO_CONCURRENCY, Table};

use crate::table::deletion_vector::DeletionFiles;
use crate::table::manifest::{FileKind, FileSource, ManifestEntry};
use crate::table::options::MergeEngineKind;
use crate::table::snapshot::{BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot};

/// Highest level of Paimon's default LSM (`num-levels` = 6); full compaction writes the
/// highest level of the table's `num-levels`, which is this one by default.
pub const MAX_LEVEL: i32 = 5;

/// A bucket of a table: (serialized partition row, bucket number).
pub(crate) type BucketId = (Vec<u8>, i32);

/// How many buckets one round rewrites at the same time (each is merged in memory).
const BUCKET_CONCURRENCY: usize = 4;

/// How often a round is planned again after its commit conflicted with another change.
const MAX_PLAN_ATTEMPTS: usize = 5;

/// Which buckets a round looks at, and how it picks files.
#[derive(Debug, Clone, Default)]
pub struct CompactScope {
    /// Only these buckets; every bucket when `None`.
    pub(crate) buckets: Option<BTreeSet<BucketId>>,
    /// Rewrite every file of a bucket into one sorted run on the highest level (unless
    /// it already is one) instead of asking the universal picker.
    pub(crate) full: bool,
}

impl CompactScope {
    /// Every bucket, files picked by the universal strategy.
    pub fn all() -> Self {
        CompactScope::default()
    }

    /// Every bucket, fully compacted.
    pub fn full() -> Self {
        CompactScope {
            buckets: None,
            full: true,
        }
    }

    /// The given buckets, files picked by the universal strategy.
    pub(crate) fn buckets(buckets: impl IntoIterator<Item = BucketId>) -> Self {
        CompactScope {
            buckets: Some(buckets.into_iter().collect()),
            full: false,
        }
    }

    fn includes(&self, id: &BucketId) -> bool {
        self.buckets.as_ref().is_none_or(|b| b.contains(id))
    }
}

/// What a compaction round did.
#[derive(Debug, Clone, Default)]
pub struct CompactionReport {
    /// The COMPACT snapshot committed, `None` when no bucket needed compaction.
    pub snapshot: Option<Snapshot>,
    /// Id of the snapshot the round was planned on (`None` for a table without one).
    pub based_on: Option<i64>,
    /// Buckets rewritten.
    pub buckets_compacted: usize,
    /// Data files merged into new ones.
    pub files_rewritten: usize,
    /// Of the files rewritten, those whose rows needed no merge (no other file of theirs
    /// shares a key) and were copied into the new files a batch of columns at a time.
    pub files_copied: usize,
    /// Data files moved up a level as they are (see `compact_steps`).
    pub files_upgraded: usize,
    /// Data files written.
    pub files_written: usize,
    /// Sorted runs of every bucket the round looked at, after the round.
    pub(crate) sorted_runs: BTreeMap<BucketId, usize>,
}

impl CompactionReport {
    /// The largest number of sorted runs any looked-at bucket has after the round.
    pub fn max_sorted_runs(&self) -> usize {
        self.sorted_runs.values().copied().max().unwrap_or(0)
    }
}

/// Everything a round needs besides the table, derived from the table's options.
#[derive(Debug, Clone)]
struct CompactContext {
    engine: MergeEngine,
    order: SequenceOrder,
    file_options: DataFileWriteOptions,
    strategy: UniversalCompaction,
    num_levels: usize,
    /// Files this large that overlap nothing else in a unit move up instead of being
    /// merged (Java's `compactionFileSize`).
    min_file_size: i64,
    force_level0_up: bool,
    /// Whether retractions may be dropped at all (see [`CompactContext::new`]).
    may_drop_retractions: bool,
    /// Every compaction merges the whole bucket into one run (deletion-vector tables).
    single_run: bool,
    /// Outputs drop keys that an older level already holds (first-row tables).
    keep_keys_unique_across_levels: bool,
    /// `changelog-producer` = `full-compaction`: compactions to the top level write the
    /// changelog, with `changelog-producer.row-deduplicate` as the value.
    full_changelog: Option<bool>,
}

impl CompactContext {
    fn new(table: &Table) -> Result<Self> {
        let options = table.options();
        Ok(CompactContext {
            engine: MergeEngine::new(table.schema(), options)?,
            order: SequenceOrder::new(table.schema(), options)?,
            file_options: DataFileWriteOptions::for_table(options)?,
            strategy: UniversalCompaction::new(&options.maintenance),
            num_levels: options.maintenance.num_levels,
            min_file_size: StepRules::min_file_size(options.target_file_size),
            force_level0_up: options.force_up_level0(),
            // With `sequence.field`, a change arriving later may still be older than a
            // dropped retraction and would come back to life; keeping the retraction in
            // the top level costs one row per deleted key and keeps the merge exact.
            may_drop_retractions: options.sequence_fields.is_empty(),
            // Java and pypaimon read the levels ≥ 1 of first-row and deletion-vector tables
            // by plain concatenation (no merge), so no key may live in two of them. Java
            // keeps that with lookups (first-row) and deletion vectors; lakejoin writes no
            // deletion vectors, so it keeps such a table at one run per bucket, and for
            // first-row drops new rows whose key an older level already has (the first
            // row is the one that stays).
            single_run: options.maintenance.deletion_vectors
                && options.merge_engine != MergeEngineKind::FirstRow,
            keep_keys_unique_across_levels: options.merge_engine == MergeEngineKind::FirstRow,
            full_changelog: (options.changelog.producer == ChangelogProducer::FullCompaction)
                .then_some(options.changelog.row_deduplicate),
        })
    }
}

/// Compacts one table, one round at a time, committing as its own commit user. Owns an
/// `Arc<Table>` so it can run on a tokio task (see
/// `compact_task::BackgroundCompactor`) while a writer keeps appending.
#[derive(Debug)]
pub struct Compactor {
    table: Arc<Table>,
    commit_user: String,
    next_identifier: i64,
    ctx: CompactContext,
}

impl Compactor {
    /// A compactor for `table`. `commit_user` should be unique to this compactor: it must
    /// not be a writer's user (a writer resumes from its own latest snapshot's properties).
    pub fn new(table: Arc<Table>, commit_user: impl Into<String>) -> Result<Self> {
        let ctx = CompactContext::new(&table)?;
        Ok(Compactor {
            table,
            commit_user: commit_user.into(),
            next_identifier: 1,
            ctx,
        })
    }

    /// The table compacted.
    pub(crate) fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// The commit user of this compactor's COMPACT snapshots.
    pub fn commit_user(&self) -> &str {
        &self.commit_user
    }

    /// Runs one round over `scope` on the latest snapshot and commits it.
    pub async fn compact(&mut self, scope: &CompactScope) -> Result<CompactionReport> {
        self.compact_as(scope, self.next_identifier).await
    }

    /// [`Self::compact`], committing with `identifier` (at least the next one of this
    /// compactor, so its identifiers keep increasing): a writer's full compaction after
    /// its commit `N` commits as `N`, as Java's writers do, which Java's
    /// `scan.mode` = `compacted-full` looks for.
    pub(crate) async fn compact_as(
        &mut self,
        scope: &CompactScope,
        identifier: i64,
    ) -> Result<CompactionReport> {
        let identifier = identifier.max(self.next_identifier);
        let report =
            compact_round(&self.table, &self.ctx, scope, &self.commit_user, identifier).await?;
        if report.snapshot.is_some() {
            self.next_identifier = identifier.saturating_add(1);
        }
        Ok(report)
    }
}

/// Compacts every bucket that has more than one file, or any level-0 file or (droppable)
/// retraction, into one sorted run on the highest level. Returns the COMPACT snapshot, or `None` when
/// the table was already compact.
pub async fn full_compact(table: &Table, commit_user: &str) -> Result<Option<Snapshot>> {
    let ctx = CompactContext::new(table)?;
    let report = compact_round(
        table,
        &ctx,
        &CompactScope::full(),
        commit_user,
        BATCH_COMMIT_IDENTIFIER,
    )
    .await?;
    Ok(report.snapshot)
}

/// The compaction picked for one bucket.
struct BucketPlan {
    id: BucketId,
    unit: CompactUnit,
    drop_retractions: bool,
    runs_before: usize,
    /// Files on levels above the output level, whose keys the output must not repeat
    /// (first-row tables only; empty otherwise).
    older_files: Vec<ManifestEntry>,
    /// The output is the bucket's top level and the table's changelog is written with it
    /// (`full-compaction` tables): `Some(row_deduplicate)`.
    changelog: Option<bool>,
    /// What is merged and what moves, in key order (never empty).
    steps: Vec<CompactStep>,
}

impl BucketPlan {
    /// The files merged into new ones.
    fn rewritten(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.steps.iter().flat_map(|s| match s {
            CompactStep::Rewrite(files) => files.as_slice(),
            CompactStep::Upgrade(_) => &[],
        })
    }

    /// The files moved up a level.
    fn upgraded(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.steps.iter().filter_map(|s| match s {
            CompactStep::Upgrade(file) => Some(file.as_ref()),
            CompactStep::Rewrite(_) => None,
        })
    }
}

/// Plans on the latest snapshot, rewrites, commits; plans again after a conflict.
async fn compact_round(
    table: &Table,
    ctx: &CompactContext,
    scope: &CompactScope,
    commit_user: &str,
    commit_identifier: i64,
) -> Result<CompactionReport> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let (latest, live) = match latest_live_files(table).await {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(CompactionReport::default()),
            // Expired while being read: a newer snapshot exists, plan on that.
            Err(e) if e.is_not_found() && attempt < MAX_PLAN_ATTEMPTS => continue,
            Err(e) => return Err(e),
        };
        if !table.deletion_files(&latest).await?.is_empty() {
            // Java wrote deletion vectors. Rewriting the files they apply to would leave
            // the vectors naming files that are gone, and lakejoin writes no index
            // manifest of its own; Java's compaction keeps both in step.
            return Err(Error::Config(format!(
                "table {} has deletion vectors (index manifest {}); lakejoin reads such \
                 tables but does not compact them: compact it with Paimon's Java compaction",
                table.identifier(),
                latest.index_manifest.as_deref().unwrap_or_default()
            )));
        }
        let mut report = CompactionReport {
            based_on: Some(latest.id),
            ..CompactionReport::default()
        };
        let mut plans = Vec::new();
        let key_types = table
            .schema()
            .types_of(&table.schema().trimmed_key_indices());
        for (id, files) in group_by_bucket(live) {
            if !scope.includes(&id) {
                continue;
            }
            let levels = Levels::new(files, ctx.num_levels);
            let runs_before = levels.number_of_sorted_runs();
            let Some((unit, drop_retractions)) = plan_bucket(ctx, &levels, scope.full) else {
                report.sorted_runs.insert(id, runs_before);
                continue;
            };
            let changelog = ctx
                .full_changelog
                .filter(|_| unit.output_level == levels.max_level());
            let steps = if changelog.is_some() {
                // The changelog is the merge compared with the old top level, all of it.
                vec![CompactStep::Rewrite(unit.files.clone())]
            } else {
                let rules = StepRules {
                    output_level: unit.output_level,
                    max_level: levels.max_level(),
                    min_file_size: ctx.min_file_size,
                    drop_retractions,
                    merge_level0: ctx.keep_keys_unique_across_levels,
                };
                plan_steps(&unit.files, &key_types, rules)
            };
            if steps.is_empty() {
                // Everything already sits on the output level as it should.
                report.sorted_runs.insert(id, runs_before);
                continue;
            }
            plans.push(BucketPlan {
                changelog,
                older_files: if ctx.keep_keys_unique_across_levels {
                    levels.files_above(unit.output_level)
                } else {
                    Vec::new()
                },
                id,
                unit,
                drop_retractions,
                runs_before,
                steps,
            });
        }
        if plans.is_empty() {
            return Ok(report);
        }
        let rewrites: Vec<_> = plans.iter().map(|p| rewrite(table, ctx, p)).collect();
        let results: Vec<Result<Rewritten>> = futures::stream::iter(rewrites)
            .buffered(BUCKET_CONCURRENCY)
            .collect()
            .await;
        let mut outputs = Vec::with_capacity(results.len());
        let mut failure = None;
        for result in results {
            match result {
                Ok(written) => outputs.push(written),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if let Some(e) = failure {
            // Nothing will reference what the other buckets wrote.
            delete_data_files(table, outputs.iter().flat_map(Rewritten::files)).await;
            if e.is_not_found() && attempt < MAX_PLAN_ATTEMPTS {
                // An input vanished: another compaction replaced it and an expiry
                // removed it. Plan again on the newer snapshot.
                continue;
            }
            return Err(e);
        }
        let mut entries = Vec::new();
        let mut changelog = Vec::new();
        for (plan, output) in plans.iter().zip(&outputs) {
            let written = &output.data;
            changelog.extend(output.changelog.iter().cloned());
            // A bucket's DELETEs before its ADDs, as Java commits them: Java's expiry
            // reads a delta in order and keeps a file that a later ADD names again (a
            // moved file), but deletes one whose DELETE comes last.
            let replaced = plan.rewritten().chain(plan.upgraded());
            entries.extend(replaced.map(|f| ManifestEntry {
                kind: FileKind::Delete,
                ..f.clone()
            }));
            entries.extend(written.iter().cloned());
            entries.extend(plan.upgraded().map(|f| upgraded(f, plan.unit.output_level)));
            let rewritten = plan.rewritten().count();
            // The output level holds nothing but the unit's files (picker invariant), so
            // the unit's runs become one run: the new files, the moved ones and those
            // that stayed. None if every row was dropped and nothing else is left.
            let left = !written.is_empty() || rewritten < plan.unit.files.len();
            let runs_after = plan.runs_before.saturating_sub(plan.unit.runs) + usize::from(left);
            report.sorted_runs.insert(plan.id.clone(), runs_after);
            report.files_rewritten += rewritten;
            report.files_copied += output.copied;
            report.files_upgraded += plan.upgraded().count();
            report.files_written += written.len();
        }
        report.buckets_compacted = plans.len();
        let request = CommitRequest {
            commit_user: commit_user.to_string(),
            commit_identifier,
            kind: CommitKind::Compact,
            entries,
            changelog,
            properties: BTreeMap::new(),
        };
        match table.commit(request).await {
            Ok(snapshot) => {
                tracing::debug!(
                    table = %table.identifier(),
                    snapshot = snapshot.id,
                    buckets = report.buckets_compacted,
                    "committed compaction"
                );
                report.snapshot = Some(snapshot);
                return Ok(report);
            }
            Err(e @ Error::CommitConflict { .. }) => {
                // The commit certainly did not land, so its files are garbage.
                delete_data_files(table, outputs.iter().flat_map(Rewritten::files)).await;
                if attempt >= MAX_PLAN_ATTEMPTS {
                    return Err(e);
                }
                tracing::info!(table = %table.identifier(), error = %e, "compaction conflicted; planning again");
            }
            // Whether the snapshot landed is unknown: leave the files (orphan cleaning
            // removes them if it did not).
            Err(e) => return Err(e),
        }
    }
}

/// The latest snapshot and its live files, `None` for a table without snapshots.
async fn latest_live_files(table: &Table) -> Result<Option<(Snapshot, Vec<ManifestEntry>)>> {
    let Some(latest) = table.latest_snapshot().await? else {
        return Ok(None);
    };
    let live = table.live_files(&latest).await?;
    Ok(Some((latest, live)))
}

/// The unit to compact in one bucket and whether it may drop retractions, or `None`.
fn plan_bucket(ctx: &CompactContext, levels: &Levels, full: bool) -> Option<(CompactUnit, bool)> {
    let max_level = levels.max_level();
    let whole_bucket = || {
        let files = levels.all_files();
        // One sorted run on the top level already (Java's `pickFullCompaction`), unless
        // it holds retractions to drop.
        let already_compact = files.iter().all(|f| {
            f.file.level == max_level
                && (f.file.delete_row_count.unwrap_or(0) == 0 || !ctx.may_drop_retractions)
        });
        if files.is_empty() || already_compact {
            return None;
        }
        let unit = CompactUnit {
            output_level: max_level,
            runs: levels.number_of_sorted_runs(),
            files,
        };
        // Every version of every key is in the unit: retractions have nothing to hide.
        Some((unit, ctx.may_drop_retractions))
    };
    if full {
        return whole_bucket();
    }
    let runs = levels.sorted_runs();
    let unit = if ctx.force_level0_up {
        ctx.strategy.pick_forcing_level0_up(max_level, &runs)
    } else {
        ctx.strategy.pick(max_level, &runs)
    }?;
    if !unit.is_useful() {
        return None;
    }
    if ctx.single_run {
        return whole_bucket();
    }
    // Outputs on the highest non-empty level are the oldest data of the bucket (newer
    // runs are never left below older ones), so nothing older remains to be hidden.
    let drop_retractions = ctx.may_drop_retractions
        && unit.output_level != 0
        && unit.output_level >= levels.non_empty_highest_level();
    Some((unit, drop_retractions))
}

/// What a bucket's rewrite wrote: data files, and changelog files when its output is
/// the top level of a `full-compaction` table.
struct Rewritten {
    data: Vec<ManifestEntry>,
    changelog: Vec<ManifestEntry>,
    /// Input files copied rather than merged ([`copyable`]).
    copied: usize,
}

impl Rewritten {
    fn files(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.data.iter().chain(&self.changelog)
    }
}

/// Carries out a plan's merges, one stretch of files at a time (moved files need no I/O);
/// returns what they wrote. On an error, nothing written stays behind.
async fn rewrite(table: &Table, ctx: &CompactContext, plan: &BucketPlan) -> Result<Rewritten> {
    let mut done = Rewritten {
        data: Vec::new(),
        changelog: Vec::new(),
        copied: 0,
    };
    for step in &plan.steps {
        let CompactStep::Rewrite(files) = step else {
            continue;
        };
        match merge_files(table, ctx, plan, files).await {
            Ok(written) => {
                done.data.extend(written.data);
                done.changelog.extend(written.changelog);
                done.copied += written.copied;
            }
            Err(e) => {
                delete_data_files(table, done.files()).await;
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// Merges `files` (of `plan`) and writes the result at the plan's output level (with the
/// changelog, see `compact_changelog`); returns the ADDs. Files whose rows need no merge
/// ([`copyable`]) are copied instead. The merge streams from the
/// input files into the output files (`MergedRuns` into `FileTarget::write_stream`), so
/// memory holds the files' compressed bytes and a batch per sorted run, not the bucket's
/// rows; a `full-compaction` changelog still compares the merge with the old top level in
/// memory.
async fn merge_files(
    table: &Table,
    ctx: &CompactContext,
    plan: &BucketPlan,
    files: &[ManifestEntry],
) -> Result<Rewritten> {
    if let Some(in_order) = copyable(table, plan, files) {
        let data = copy_files(table, ctx, plan, &in_order).await?;
        return Ok(Rewritten {
            data,
            changelog: Vec::new(),
            copied: in_order.len(),
        });
    }
    // No deletion vectors: compaction refuses tables that have them.
    let none = DeletionFiles::default();
    let key_indices = table.schema().trimmed_key_indices();
    let merge = |runs| {
        MergedRuns::new(
            runs,
            key_indices.clone(),
            ctx.order.clone(),
            ctx.engine.clone(),
        )
    };
    let (merged, changes): (RowStream, Vec<KeyValue>) = match plan.changelog {
        Some(row_deduplicate) => {
            let MergedWithChangelog { rows, changes } = merge_with_changelog(
                table,
                files,
                plan.unit.output_level,
                &ctx.engine,
                &ctx.order,
                row_deduplicate,
            )
            .await?;
            (Box::new(rows.into_iter().map(Ok)), changes)
        }
        None => {
            let runs = open_runs(table, files, &none).await?;
            (Box::new(merge(runs)), Vec::new())
        }
    };
    let merged: RowStream = if plan.older_files.is_empty() {
        merged
    } else {
        let older = merge(open_runs(table, &plan.older_files, &none).await?);
        Box::new(WithoutKeysOf {
            rows: merged,
            older: older.peekable(),
            key_indices: key_indices.clone(),
        })
    };
    let rows: RowStream = if plan.drop_retractions {
        Box::new(merged.filter(|row| !matches!(row, Ok(kv) if kv.kind.is_retract())))
    } else {
        merged
    };
    let partition = table.partition_values(&plan.id.0)?;
    let target = output_target(table, ctx, plan, &partition);
    let changelog = if changes.is_empty() {
        Vec::new()
    } else {
        // At the output level, with source APPEND, as Java's changelog writer names them.
        FileTarget {
            changelog: true,
            source: FileSource::Append,
            ..target
        }
        .write(changes)
        .await?
    };
    match target.write_stream(rows, row_count(files)).await {
        Ok(data) => Ok(Rewritten {
            data,
            changelog,
            copied: 0,
        }),
        Err(e) => {
            delete_data_files(table, changelog.iter()).await;
            Err(e)
        }
    }
}

/// Where a plan's merged data files go: its bucket, at its output level.
fn output_target<'a>(
    table: &'a Table,
    ctx: &CompactContext,
    plan: &'a BucketPlan,
    partition: &'a Row,
) -> FileTarget<'a> {
    FileTarget {
        table,
        partition_bytes: &plan.id.0,
        partition,
        bucket: plan.id.1,
        level: plan.unit.output_level,
        source: FileSource::Compact,
        options: ctx.file_options,
        changelog: false,
    }
}

/// The rows `files` hold, at most (an upper bound sizes the key's bloom filters).
fn row_count(files: &[ManifestEntry]) -> usize {
    files
        .iter()
        .map(|f| usize::try_from(f.file.row_count).unwrap_or(0))
        .sum()
}

/// `files` in key order when their merge is only reading them one after the other: no
/// two share a key (so every key has one version, which a merge keeps as it is), none
/// has a retraction the merge would drop, and the merge is compared with nothing (no
/// changelog, no older levels' keys). Java merges such files row by row; copying them
/// gives the same rows.
fn copyable(
    table: &Table,
    plan: &BucketPlan,
    files: &[ManifestEntry],
) -> Option<Vec<ManifestEntry>> {
    let keeps_every_row =
        !plan.drop_retractions || files.iter().all(|f| f.file.delete_row_count == Some(0));
    if plan.changelog.is_some() || !plan.older_files.is_empty() || !keeps_every_row {
        return None;
    }
    let schema = table.schema();
    disjoint_in_key_order(files, &schema.types_of(&schema.trimmed_key_indices()))
}

/// Writes the rows of `files` ([`copyable`], in key order) into new files at the plan's
/// output level, a batch of columns at a time, and returns their ADDs.
async fn copy_files(
    table: &Table,
    ctx: &CompactContext,
    plan: &BucketPlan,
    files: &[ManifestEntry],
) -> Result<Vec<ManifestEntry>> {
    let opens: Vec<_> = files
        .iter()
        .map(|e| table.open_data_file(e, None))
        .collect();
    let batches = futures::stream::iter(opens)
        .buffered(IO_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?
        .into_iter()
        .map(|rows| {
            rows.into_batches()
                .ok_or_else(|| Error::Data("a data file opened to copy was read already".into()))
        })
        .collect::<Result<Vec<_>>>()?;
    let partition = table.partition_values(&plan.id.0)?;
    let batches: ColumnStream = Box::new(batches.into_iter().flatten());
    output_target(table, ctx, plan, &partition)
        .write_columns(batches, row_count(files))
        .await
}

/// Merged rows without those whose key occurs in `older` (both sorted by key): a
/// first-row table keeps a key's first row, which an older level may already hold.
struct WithoutKeysOf<O: Iterator<Item = Result<KeyValue>>> {
    rows: RowStream,
    older: std::iter::Peekable<O>,
    key_indices: Vec<usize>,
}

impl<O: Iterator<Item = Result<KeyValue>>> Iterator for WithoutKeysOf<O> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Result<KeyValue>> {
        'rows: loop {
            let kv = match self.rows.next()? {
                Ok(kv) => kv,
                Err(e) => return Some(Err(e)),
            };
            loop {
                match self.older.peek() {
                    None => return Some(Ok(kv)),
                    Some(Err(_)) => return self.older.next(),
                    Some(Ok(o)) => match key_order(o, &kv, &self.key_indices) {
                        Ordering::Less => {
                            self.older.next();
                        }
                        Ordering::Equal => continue 'rows,
                        Ordering::Greater => return Some(Ok(kv)),
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::Datum;
    use crate::table::row_kind::RowKind;

    fn kv(key: i32, value: i32) -> KeyValue {
        KeyValue {
            sequence_number: 0,
            kind: RowKind::Insert,
            row: vec![Datum::Int(key), Datum::Int(value)],
        }
    }

    #[test]
    fn first_row_outputs_skip_keys_older_levels_hold() {
        let rows = vec![kv(1, 10), kv(2, 20), kv(4, 40), kv(7, 70)];
        let older = vec![kv(0, 0), kv(2, 2), kv(3, 3), kv(7, 7), kv(9, 9)];
        let without = |rows: Vec<KeyValue>, older: Vec<KeyValue>| -> Vec<i32> {
            WithoutKeysOf {
                rows: Box::new(rows.into_iter().map(Ok)),
                older: older.into_iter().map(Ok).peekable(),
                key_indices: vec![0],
            }
            .map(|kv| match kv.map(|kv| kv.row[0].clone()) {
                Ok(Datum::Int(k)) => k,
                _ => -1,
            })
            .collect()
        };
        assert_eq!(without(rows, older), vec![1, 4]);
        assert_eq!(without(vec![kv(1, 1)], vec![]), vec![1]);
    }
}
