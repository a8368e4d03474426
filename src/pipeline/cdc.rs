//! CDC pipelines: change topics → decode → one writer per table → snapshot commits that
//! record the consumed offsets → Kafka offset commit.
//!
//! Delivery: a change is in the table exactly once. Every snapshot's properties hold,
//! for every pipeline feeding the table, the next offset of each partition it covers; on
//! start each pipeline resumes from there (not from Kafka's committed offsets, which are
//! only informational), so a crash at any moment neither loses nor repeats a change.
//! Files flushed after the last commit are orphans and are cleaned by `clean-orphans`.
//!
//! This module is the table's side (the sink, [`TableSink`]); the consumers that decode
//! and feed it are in `cdc_consumer`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::cdc_mirror::{GroupFallback, WriterIdentity};
use super::cdc_progress::{CommittedPosition, PartitionId};
use super::cdc_schema::{self, EvolveRequest};
use crate::config::CdcConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::lsm::row_check::CheckedChange;
use crate::lsm::writer::TableWriter;
use crate::observe::PipelineMetrics;
use crate::table::Table;
use crate::table::fence::WriterFence;
use crate::table::schema::TableSchema;
use crate::table::snapshot::Snapshot;

/// Snapshot property holding a pipeline's offsets: `lakejoin.offsets.<pipeline>`.
pub const OFFSETS_PROPERTY_PREFIX: &str = "lakejoin.offsets.";

/// Consecutive failed commits (each already retried inside the commit) after which a sink
/// gives up and stops its pipeline. Until then the changes stay buffered and the commit is
/// tried again after a backoff; a commit whose outcome was unknown is resolved first.
/// Failures of a full, over-quota, read-only or access-denied warehouse
/// ([`Error::is_storage_unwritable`]) do not count: they are retried until they clear.
const MAX_FAILED_COMMITS: u32 = 10;

/// Longest wait between attempts of a failing commit. The first wait is the commit
/// interval (at most a second); each failure doubles it up to this.
const MAX_COMMIT_BACKOFF: Duration = Duration::from_secs(30);

/// topic → partition → next offset to consume.
pub type Offsets = BTreeMap<String, BTreeMap<i32, i64>>;

/// Decoded changes of consecutive records of one partition, and the position after each.
///
/// A consumer gathers what its client has already fetched into one batch (a partition's
/// records arrive in runs), so the sink's per-batch work (offsets, timestamps, metrics) is
/// paid once per run instead of once per record. The record boundaries stay, so a commit
/// triggered by `commit_max_rows` still ends exactly at a record.
#[derive(Debug)]
pub struct ChangeBatch {
    pub pipeline: String,
    pub topic: String,
    pub partition: i32,
    /// One entry per record, in offset order.
    pub records: Vec<RecordEnd>,
    /// The changes of every record, in order; `records` says where each record's end.
    pub changes: Vec<CheckedChange>,
}

/// Where one record of a [`ChangeBatch`] ends.
#[derive(Debug, Clone, Copy)]
pub struct RecordEnd {
    /// The number of the batch's changes up to and including this record's.
    pub changes_end: usize,
    /// The offset after this record.
    pub next_offset: i64,
    pub timestamp_ms: Option<i64>,
}

impl ChangeBatch {
    /// The batch of one record.
    pub fn of_record(
        pipeline: impl Into<String>,
        topic: impl Into<String>,
        partition: i32,
        next_offset: i64,
        timestamp_ms: Option<i64>,
        changes: Vec<CheckedChange>,
    ) -> Self {
        ChangeBatch {
            pipeline: pipeline.into(),
            topic: topic.into(),
            partition,
            records: vec![RecordEnd {
                changes_end: changes.len(),
                next_offset,
                timestamp_ms,
            }],
            changes,
        }
    }

    /// Appends the next record of the same partition.
    pub(crate) fn push_record(
        &mut self,
        next_offset: i64,
        timestamp_ms: Option<i64>,
        changes: Vec<CheckedChange>,
    ) {
        self.changes.extend(changes);
        self.records.push(RecordEnd {
            changes_end: self.changes.len(),
            next_offset,
            timestamp_ms,
        });
    }
}

/// A table commit and the position of every pipeline partition it covers.
#[derive(Debug, Clone)]
pub struct Committed {
    pub(crate) snapshot: Snapshot,
    pub(crate) positions: Vec<CommittedPosition>,
}

/// The single writer of one table, fed by every CDC pipeline of that table.
pub struct TableSink {
    writer: TableWriter,
    /// Offsets of every pipeline, carried forward in every commit.
    offsets: BTreeMap<String, Offsets>,
    /// See [`Resume`].
    writer_identity: WriterIdentity,
    group_fallback: Option<GroupFallback>,
    pending_changes: usize,
    commit_interval: Duration,
    /// When the last commit was made (or tried): the interval counts from it, whichever
    /// way the commit came (row count, interval, evolution, retry), so a row-count commit
    /// inside a batch is not followed at once by an interval commit of a few rows.
    last_commit: Instant,
    commit_max_rows: usize,
    metrics: BTreeMap<String, Arc<PipelineMetrics>>,
    /// Kafka timestamp of the last change applied per pipeline partition.
    last_timestamps: BTreeMap<PartitionId, i64>,
    committed: watch::Sender<Option<Arc<Committed>>>,
    /// Commits that failed in a row.
    failed_commits: u32,
    /// While commits fail: when the next attempt is due. No changes are taken meanwhile
    /// (the consumers wait on the full channel), so memory stays bounded.
    retry_at: Option<Instant>,
    /// The error of the last failed commit, while commits fail.
    last_failure: Option<Error>,
    /// Schema evolutions the consumers ask for (see `cdc_schema`).
    evolutions: Option<mpsc::Receiver<EvolveRequest>>,
    evolution_sender: Option<mpsc::Sender<EvolveRequest>>,
    /// An evolution that waits for the failing commits before it to succeed.
    waiting_evolution: Option<EvolveRequest>,
    /// Every schema the writer had, by id: changes decoded in an older one are laid out
    /// in the current one before they are written.
    schemas: HashMap<i64, Arc<TableSchema>>,
    /// The table at the writer's schema, for every consumer: one that did not ask for an
    /// evolution decodes in the new schema from its next record on, instead of dropping
    /// a column another pipeline added (or narrowing one it widened) until it restarts.
    schema: watch::Sender<Arc<Table>>,
}

/// Where a CDC pipeline resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The next offset of each topic partition, from the newest snapshot of the
    /// pipeline's writer.
    pub offsets: Offsets,
    /// The writer, as its offsets mirrored into the consumer group name it.
    pub writer: WriterIdentity,
    /// Set when the table keeps no snapshot of the writer and the oldest snapshot it
    /// keeps is not its first: the writer's snapshots may all have been expired. A
    /// partition without an offset above then resumes at the consumer group's offset
    /// that this writer mirrored from an expired snapshot, before `start_from`
    /// (`cdc_mirror`).
    pub group_fallback: Option<GroupFallback>,
}

/// Commit user of this process's writer of `table`: stable across restarts.
pub fn commit_user(group_id: &str, table: &str) -> String {
    format!("lakejoin:{group_id}:{table}")
}

impl TableSink {
    /// Opens the writer and reads where each pipeline left off from the latest snapshot
    /// this writer committed. With a `fence` (claimed before this is called, so nobody
    /// else commits as this user afterwards) every commit checks it before publishing.
    pub async fn open(
        table: Arc<Table>,
        commit_user: &str,
        pipelines: &[(CdcConfig, Arc<PipelineMetrics>)],
        fence: Option<Arc<WriterFence>>,
    ) -> Result<(Self, watch::Receiver<Option<Arc<Committed>>>)> {
        let (last, seen) = table.resume_point(commit_user).await?;
        let writer_identity = WriterIdentity::of(&table, commit_user).await?;
        let earliest = table.snapshot_ids().await?.first().copied();
        let group_fallback = earliest
            .filter(|&earliest| last.is_none() && earliest > 1)
            .map(|earliest| GroupFallback {
                writer: writer_identity.clone(),
                earliest,
            });
        let mut offsets = BTreeMap::new();
        if let Some(properties) = last.as_ref().and_then(|s| s.properties.as_ref()) {
            for (key, value) in properties {
                if let Some(pipeline) = key.strip_prefix(OFFSETS_PROPERTY_PREFIX) {
                    let parsed: Offsets = serde_json::from_str(value).map_err(|e| {
                        Error::format(format!(
                            "snapshot property {key} of {} is not valid: {e}",
                            table.identifier()
                        ))
                    })?;
                    offsets.insert(pipeline.to_string(), parsed);
                }
            }
        }
        for (_, m) in pipelines {
            m.snapshot_id.store(
                last.as_ref().map_or(0, |s| s.id.max(0) as u64),
                Ordering::Relaxed,
            );
        }
        let schemas = HashMap::from([(table.schema().id, table.schema().clone())]);
        let (schema, _) = watch::channel(table.clone());
        let mut writer = TableWriter::new(table, commit_user).await?;
        // The offsets are those of `last`; a snapshot of ours after `seen` is not.
        writer.resumed_from(seen);
        if let Some(fence) = fence {
            writer.set_fence(fence);
        }
        let (tx, rx) = watch::channel(None);
        Ok((
            TableSink {
                writer,
                offsets,
                writer_identity,
                group_fallback,
                pending_changes: 0,
                last_commit: Instant::now(),
                commit_interval: pipelines
                    .iter()
                    .map(|(c, _)| c.commit_interval)
                    .min()
                    .unwrap_or(Duration::from_secs(5)),
                commit_max_rows: pipelines
                    .iter()
                    .map(|(c, _)| c.commit_max_rows)
                    .min()
                    .unwrap_or(100_000),
                metrics: pipelines
                    .iter()
                    .map(|(c, m)| (c.name.clone(), m.clone()))
                    .collect(),
                last_timestamps: BTreeMap::new(),
                committed: tx,
                failed_commits: 0,
                retry_at: None,
                last_failure: None,
                evolutions: None,
                evolution_sender: None,
                waiting_evolution: None,
                schemas,
                schema,
            },
            rx,
        ))
    }

    /// Where this sink's consumers ask for schema evolutions; every call shares one
    /// channel, served between batches.
    pub(crate) fn evolution_requests(&mut self) -> mpsc::Sender<EvolveRequest> {
        if let Some(sender) = &self.evolution_sender {
            return sender.clone();
        }
        let (tx, rx) = mpsc::channel(16);
        self.evolutions = Some(rx);
        self.evolution_sender = Some(tx.clone());
        tx
    }

    /// The table at the schema the writer writes, updated when it evolves.
    pub(crate) fn schema_updates(&self) -> watch::Receiver<Arc<Table>> {
        self.schema.subscribe()
    }

    /// Where `pipeline` resumes (no offsets when it never committed).
    pub fn resume(&self, pipeline: &str) -> Resume {
        Resume {
            offsets: self.offsets.get(pipeline).cloned().unwrap_or_default(),
            writer: self.writer_identity.clone(),
            group_fallback: self.group_fallback.clone(),
        }
    }

    /// Applies batches until every sender is gone or `shutdown` fires, committing every
    /// `commit_interval` or `commit_max_rows`, and once more at the end.
    pub async fn run(
        mut self,
        mut batches: mpsc::Receiver<ChangeBatch>,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<()> {
        self.last_commit = Instant::now();
        let mut tick = tokio::time::interval(
            self.commit_interval
                .min(Duration::from_secs(1))
                .max(Duration::from_millis(10)),
        );
        // Only the consumers hold senders now: the channel closes when they stop.
        self.evolution_sender = None;
        let mut evolutions = self.evolutions.take();
        loop {
            let retry_at = self.retry_at;
            tokio::select! {
                request = next_request(&mut evolutions), if retry_at.is_none() => {
                    match request {
                        Some(request) => {
                            self.evolve(request).await?;
                        }
                        None => evolutions = None,
                    }
                }
                batch = batches.recv(), if retry_at.is_none() => {
                    let Some(batch) = batch else { break };
                    self.apply(batch).await?;
                    if self.pending_changes >= self.commit_max_rows || self.writer.needs_flush() {
                        self.commit().await?;
                    }
                }
                _ = tick.tick(), if retry_at.is_none() => {
                    if self.last_commit.elapsed() >= self.commit_interval {
                        self.commit().await?;
                    }
                }
                _ = sleep_until(retry_at) => {
                    self.commit().await?;
                    if self.retry_at.is_none()
                        && let Some(request) = self.waiting_evolution.take()
                    {
                        self.evolve(request).await?;
                    }
                }
                _ = shutdown.changed() => break,
            }
        }
        // Take what the consumers already sent, then commit it: one more attempt when
        // commits were failing, and its error when it fails too (nothing was lost: a
        // restart resumes from the last snapshot's offsets).
        while let Ok(batch) = batches.try_recv() {
            self.apply(batch).await?;
        }
        self.commit().await?;
        match (self.retry_at, self.last_failure.take()) {
            (Some(_), Some(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Buffers a batch's changes record by record, committing in between when a record
    /// brings the buffer to `commit_max_rows` (or the writer's memory limit), so a commit
    /// covers whole records and its offsets say exactly where they end.
    async fn apply(&mut self, batch: ChangeBatch) -> Result<()> {
        let metrics = self.metrics.get(&batch.pipeline).cloned();
        let mut written = 0u64;
        let mut changes = batch.changes.into_iter();
        let mut taken = 0;
        for (i, record) in batch.records.iter().enumerate() {
            let count = record.changes_end.saturating_sub(taken);
            taken = record.changes_end;
            for change in changes.by_ref().take(count) {
                if self.write_change(
                    change,
                    &batch.pipeline,
                    &batch.topic,
                    batch.partition,
                    record,
                )? {
                    written += 1;
                    self.pending_changes += 1;
                }
            }
            // Offsets moved even without changes (skipped or dead-lettered records).
            self.pending_changes = self.pending_changes.max(1);
            let last = i + 1 == batch.records.len();
            let full = self.pending_changes >= self.commit_max_rows || self.writer.needs_flush();
            if last || (full && self.retry_at.is_none()) {
                self.record_position(&batch.pipeline, &batch.topic, batch.partition, record);
            }
            if !last && full && self.retry_at.is_none() {
                self.commit().await?;
            }
        }
        if let Some(m) = &metrics {
            PipelineMetrics::add(&m.rows_written, written);
        }
        Ok(())
    }

    /// Writes one change: `true` when buffered, `false` when the current schema drops it.
    ///
    /// The pipeline checked the change against the table before queueing it, so the
    /// writer takes whatever passed (the check covers everything its encodings refuse).
    /// A change it still refuses (one laid out in a schema the writer never had, or one
    /// the current schema rejects after an evolution) stops the pipeline with the
    /// writer's error, its kind kept: its offset is not committed, so the record is not
    /// lost, and the log names the record to look at. Counting it as dead-lettered would
    /// drop it, as nothing here holds the record to send.
    fn write_change(
        &mut self,
        change: CheckedChange,
        pipeline: &str,
        topic: &str,
        partition: i32,
        record: &RecordEnd,
    ) -> Result<bool> {
        let result = match self.in_current_schema(change) {
            Ok(Some(change)) => self.writer.write_checked(change),
            Ok(None) => return Ok(false),
            Err(e) => Err(e),
        };
        result.map(|()| true).inspect_err(|e| {
            // The error keeps its own kind (and so the exit code); the log names the record.
            tracing::error!(
                pipeline,
                table = %self.writer.table().identifier(),
                topic,
                partition,
                offset = record.next_offset - 1,
                error = %e,
                "the table writer refused a change; stopping without committing its offset"
            );
        })
    }

    /// The next commit covers `pipeline`'s partition up to the end of `record`.
    fn record_position(&mut self, pipeline: &str, topic: &str, partition: i32, record: &RecordEnd) {
        if let Some(ts) = record.timestamp_ms {
            match self.last_timestamps.get_mut(&(
                pipeline.to_string(),
                topic.to_string(),
                partition,
            )) {
                Some(last) => *last = ts,
                None => {
                    self.last_timestamps
                        .insert((pipeline.to_string(), topic.to_string(), partition), ts);
                }
            }
        }
        let offsets = match self.offsets.get_mut(pipeline) {
            Some(o) => o,
            None => self.offsets.entry(pipeline.to_string()).or_default(),
        };
        let partitions = match offsets.get_mut(topic) {
            Some(p) => p,
            None => offsets.entry(topic.to_string()).or_default(),
        };
        partitions.insert(partition, record.next_offset);
    }

    /// A change decoded before the table's schema changed, laid out in the current one.
    fn in_current_schema(&self, change: CheckedChange) -> Result<Option<CheckedChange>> {
        let check = self.writer.row_check();
        if change.schema_id() == check.schema_id() {
            return Ok(Some(change));
        }
        let from = self.schemas.get(&change.schema_id()).ok_or_else(|| {
            Error::format(format!(
                "a change of schema {} reached the writer of {}, which never had it",
                change.schema_id(),
                self.writer.table().identifier()
            ))
        })?;
        Ok(check.upgrade(change, from)?)
    }

    /// Serves a consumer's schema evolution: commits what is buffered (it is laid out in
    /// the old schema), publishes the next schema as the pipeline's policy allows, moves
    /// the writer to it, and answers with the table at the newest schema (or why not).
    /// While commits fail the request waits for them.
    async fn evolve(&mut self, request: EvolveRequest) -> Result<()> {
        self.commit().await?;
        if self.retry_at.is_some() {
            self.waiting_evolution = Some(request);
            return Ok(());
        }
        let EvolveRequest {
            pipeline,
            columns,
            policy,
            reply,
        } = request;
        let current = self.writer.table().clone();
        let evolved = crate::lsm::evolve_table(&current, |schema| {
            cdc_schema::plan(schema, &columns, policy, &pipeline)
        })
        .await;
        let evolved = match evolved {
            Ok(table) => table,
            Err(e) => {
                let _ = reply.send(Err(e));
                return Ok(());
            }
        };
        if evolved.schema().id != current.schema().id {
            let table = Arc::new(evolved);
            self.schemas
                .insert(table.schema().id, table.schema().clone());
            // A store that fails here (the writer reads the latest snapshot) is the
            // consumer's to wait out: it asks again, and the writer, still on the old
            // schema, moves then. It must not end the table's sink.
            if let Err(e) = self.writer.move_to_schema(table.clone()).await {
                let _ = reply.send(Err(e));
                return Ok(());
            }
            tracing::info!(table = %table.identifier(), schema = table.schema().id, pipeline = %pipeline,
                "the writer writes the new schema");
            self.schema.send_replace(table);
        }
        let _ = reply.send(Ok(self.writer.table().clone()));
        Ok(())
    }

    /// Commits what is buffered (see [`TableSink::publish`]); the commit interval counts
    /// from its end.
    async fn commit(&mut self) -> Result<()> {
        let result = self.publish().await;
        self.last_commit = Instant::now();
        result
    }

    async fn publish(&mut self) -> Result<()> {
        if self.pending_changes == 0 {
            return Ok(());
        }
        let mut properties = BTreeMap::new();
        for (pipeline, offsets) in &self.offsets {
            let text = serde_json::to_string(offsets).map_err(|e| Error::json("offsets", e))?;
            properties.insert(format!("{OFFSETS_PROPERTY_PREFIX}{pipeline}"), text);
        }
        let started = Instant::now();
        let committed = match self.writer.commit(properties).await {
            Ok(committed) => committed,
            Err(e) => return self.commit_failed(e),
        };
        if self.failed_commits > 0 {
            tracing::info!(table = %self.writer.table().identifier(),
                failed_attempts = self.failed_commits,
                "table commits succeed again; taking changes again");
            for m in self.metrics.values() {
                m.set_table_fault(None);
            }
        }
        self.failed_commits = 0;
        self.retry_at = None;
        self.last_failure = None;
        if let Some(snapshot) = committed {
            let elapsed = started.elapsed();
            tracing::debug!(table = %self.writer.table().identifier(), snapshot = snapshot.id, rows = self.pending_changes, "committed");
            for m in self.metrics.values() {
                PipelineMetrics::add(&m.commits, 1);
                m.commit_latency.observe(elapsed);
                m.snapshot_id
                    .store(snapshot.id.max(0) as u64, Ordering::Relaxed);
            }
            let mut positions = Vec::new();
            for (pipeline, offsets) in &self.offsets {
                for (topic, partitions) in offsets {
                    for (&partition, &next_offset) in partitions {
                        let id = (pipeline.clone(), topic.clone(), partition);
                        positions.push(CommittedPosition {
                            last_timestamp_ms: self.last_timestamps.get(&id).copied(),
                            partition: id,
                            next_offset,
                        });
                    }
                }
            }
            self.committed.send_replace(Some(Arc::new(Committed {
                snapshot,
                positions,
            })));
        }
        self.pending_changes = 0;
        Ok(())
    }
}

impl TableSink {
    /// After a failed commit: the changes stay buffered (and flushed files stay pending),
    /// nothing more is taken, and the commit is tried again after a backoff. A full or
    /// read-only warehouse is retried until it clears, other transient errors up to
    /// [`MAX_FAILED_COMMITS`] times in a row; anything else stops the pipeline.
    fn commit_failed(&mut self, e: Error) -> Result<()> {
        let unwritable = e.is_storage_unwritable();
        if e.kind() != ErrorKind::Transient
            || (!unwritable && self.failed_commits >= MAX_FAILED_COMMITS)
        {
            return Err(e);
        }
        self.failed_commits = self.failed_commits.saturating_add(1);
        let first = self
            .commit_interval
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        let backoff = first
            .saturating_mul(1 << (self.failed_commits - 1).min(16))
            .min(MAX_COMMIT_BACKOFF);
        self.retry_at = Some(Instant::now() + backoff);
        let table = self.writer.table().identifier().to_string();
        let retry_in = format!("{backoff:?}");
        let os_error = e.os_error().map(ToString::to_string);
        if unwritable {
            tracing::error!(
                table = %table,
                file = e.store_location().unwrap_or(""),
                os_error = os_error.as_deref().unwrap_or(""),
                error = %e,
                attempt = self.failed_commits,
                retry_in,
                "cannot write the table: the warehouse is full, read-only or denies access; \
                 its changes are kept (no offsets are committed for them) and the commit is \
                 retried until it succeeds"
            );
        } else {
            tracing::warn!(table = %table, error = %e, attempt = self.failed_commits, retry_in,
                "commit failed; retrying");
        }
        let fault = format!(
            "commits failing ({} attempt(s), next in {retry_in}): {e}",
            self.failed_commits
        );
        for m in self.metrics.values() {
            PipelineMetrics::add(&m.commit_failures, 1);
            m.set_table_fault(Some(fault.clone()));
        }
        self.last_failure = Some(e);
        Ok(())
    }
}

/// The next evolution request; never returns while there is no channel.
async fn next_request(
    requests: &mut Option<mpsc::Receiver<EvolveRequest>>,
) -> Option<EvolveRequest> {
    match requests {
        Some(rx) => rx.recv().await,
        None => futures::future::pending().await,
    }
}

/// Sleeps until `at`; never returns without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => futures::future::pending().await,
    }
}
