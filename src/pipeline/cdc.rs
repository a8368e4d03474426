//! CDC pipelines: change topics → decode → one writer per table → snapshot commits that
//! record the consumed offsets → Kafka offset commit.
//!
//! Delivery: a change is in the table exactly once. Every snapshot's properties hold,
//! for every pipeline feeding the table, the next offset of each partition it covers; on
//! start each pipeline resumes from there (not from Kafka's committed offsets, which are
//! only informational), so a crash at any moment neither loses nor repeats a change.
//! Files flushed after the last commit are orphans and are cleaned by `clean-orphans`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer as _;

use crate::kafka::Consumer;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{mpsc, watch};

use super::cdc_partitions;
use super::cdc_progress::{CdcProgress, CommittedPosition, PartitionId};
use super::cdc_schema::{self, EvolveRequest};
use super::dead_letter::DeadLetters;
use crate::codec::{CdcDecoder, DecodeError, Decoded};
use crate::config::{CdcConfig, KafkaConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::lsm::row_check::{CheckedChange, RowCheck, RowRejected};
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

/// Decoded changes of one Kafka record, and the position after it.
#[derive(Debug)]
pub struct ChangeBatch {
    pub pipeline: String,
    pub topic: String,
    pub partition: i32,
    pub next_offset: i64,
    pub timestamp_ms: Option<i64>,
    pub changes: Vec<CheckedChange>,
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
    pending_changes: usize,
    commit_interval: Duration,
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
                pending_changes: 0,
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

    /// Where `pipeline` resumes (empty when it never committed).
    pub fn resume_offsets(&self, pipeline: &str) -> Offsets {
        self.offsets.get(pipeline).cloned().unwrap_or_default()
    }

    /// Applies batches until every sender is gone or `shutdown` fires, committing every
    /// `commit_interval` or `commit_max_rows`, and once more at the end.
    pub async fn run(
        mut self,
        mut batches: mpsc::Receiver<ChangeBatch>,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<()> {
        let mut last_commit = Instant::now();
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
                            last_commit = Instant::now();
                        }
                        None => evolutions = None,
                    }
                }
                batch = batches.recv(), if retry_at.is_none() => {
                    let Some(batch) = batch else { break };
                    self.apply(batch);
                    if self.pending_changes >= self.commit_max_rows || self.writer.needs_flush() {
                        self.commit().await?;
                        last_commit = Instant::now();
                    }
                }
                _ = tick.tick(), if retry_at.is_none() => {
                    if last_commit.elapsed() >= self.commit_interval {
                        self.commit().await?;
                        last_commit = Instant::now();
                    }
                }
                _ = sleep_until(retry_at) => {
                    self.commit().await?;
                    last_commit = Instant::now();
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
            self.apply(batch);
        }
        self.commit().await?;
        match (self.retry_at, self.last_failure.take()) {
            (Some(_), Some(e)) => Err(e),
            _ => Ok(()),
        }
    }

    fn apply(&mut self, batch: ChangeBatch) {
        let metrics = self.metrics.get(&batch.pipeline).cloned();
        for change in batch.changes {
            let change = match self.in_current_schema(change) {
                Ok(Some(change)) => change,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(pipeline = %batch.pipeline, error = %e, "change rejected by the table writer");
                    if let Some(m) = &metrics {
                        PipelineMetrics::add(&m.dead_lettered, 1);
                    }
                    continue;
                }
            };
            match self.writer.write_checked(change) {
                Ok(()) => {
                    self.pending_changes += 1;
                    if let Some(m) = &metrics {
                        PipelineMetrics::add(&m.rows_written, 1);
                    }
                }
                // A row whose partition or bucket key cannot be serialized.
                Err(e) => {
                    tracing::error!(pipeline = %batch.pipeline, error = %e, "change rejected by the table writer");
                    if let Some(m) = &metrics {
                        PipelineMetrics::add(&m.dead_lettered, 1);
                    }
                }
            }
        }
        if let Some(ts) = batch.timestamp_ms {
            self.last_timestamps.insert(
                (batch.pipeline.clone(), batch.topic.clone(), batch.partition),
                ts,
            );
        }
        self.offsets
            .entry(batch.pipeline)
            .or_default()
            .entry(batch.topic)
            .or_default()
            .insert(batch.partition, batch.next_offset);
        // Offsets moved even without changes (skipped or dead-lettered records).
        self.pending_changes = self.pending_changes.max(1);
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

    async fn commit(&mut self) -> Result<()> {
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

/// Why a CDC record goes to the dead-letter topic (the reason its headers carry).
#[derive(Debug, thiserror::Error)]
enum BadRecord {
    /// It does not decode as the pipeline's format.
    #[error("{0}")]
    Decode(DecodeError),
    /// It decodes to a change the table does not take.
    #[error("{0}")]
    Rejected(RowRejected),
}

/// The validated changes of one record, or why it goes to the dead-letter topic.
/// `Err` only for a transient failure (a schema registry outage), which must not turn
/// good records into dead letters.
async fn decode_record(
    config: &CdcConfig,
    decoder: &CdcDecoder,
    check: &RowCheck,
    message: &impl Message,
) -> Result<std::result::Result<Vec<CheckedChange>, BadRecord>> {
    let record = crate::kafka::record_of(message);
    let decoded = match decoder.prepare(&record).await {
        Ok(()) => decoder.decode(&record),
        Err(e) => Err(e),
    };
    Ok(match decoded {
        Ok(Decoded::Changes(changes)) => changes
            .into_iter()
            .filter_map(|c| check.check(c.kind, c.row).transpose())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(BadRecord::Rejected),
        Ok(Decoded::Skipped(reason)) => {
            tracing::debug!(pipeline = %config.name, %reason, "record skipped");
            Ok(Vec::new())
        }
        Err(e) if e.is_transient() => {
            return Err(Error::SchemaRegistry(format!("{}: {e}", config.name)));
        }
        Err(e) => Err(BadRecord::Decode(e)),
    })
}

/// [`decode_record`], holding the record while decoding it fails transiently (the schema
/// registry is unreachable): tried again with backoff (100 ms doubling to 30 s), the
/// pipeline unready meanwhile with the reason, as a held fact is; its offset is not
/// passed on, so nothing after it is committed either. `None` when `shutdown` fires first.
async fn decode_held(
    config: &CdcConfig,
    decoder: &CdcDecoder,
    check: &RowCheck,
    message: &impl Message,
    metrics: &PipelineMetrics,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<std::result::Result<Vec<CheckedChange>, BadRecord>> {
    let mut wait = Duration::from_millis(100);
    let mut held = false;
    loop {
        let error = match decode_record(config, decoder, check, message).await {
            Ok(decoded) => {
                if held {
                    tracing::info!(pipeline = %config.name, "the held change decodes again; going on");
                    metrics.set_hold_fault(None);
                }
                return Some(decoded);
            }
            Err(e) => e,
        };
        if !held {
            tracing::warn!(pipeline = %config.name, error = %error, topic = message.topic(),
                partition = message.partition(), offset = message.offset(),
                "a change cannot be decoded for now; holding it and trying again");
        }
        held = true;
        PipelineMetrics::add(&metrics.held_retries, 1);
        metrics.set_hold_fault(Some(format!("changes held, trying again: {error}")));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return None,
        }
        wait = (wait * 2).min(MAX_COMMIT_BACKOFF);
    }
}

/// Consumes one CDC pipeline's topics from `resume` (or `start_from`), decodes, and sends
/// the changes to the table's sink. Bad records go to the dead-letter topic.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_consumer(
    config: CdcConfig,
    kafka: KafkaConfig,
    table: Arc<Table>,
    decoder: CdcDecoder,
    resume: Offsets,
    sink: mpsc::Sender<ChangeBatch>,
    evolutions: mpsc::Sender<EvolveRequest>,
    dead_letters: DeadLetters,
    metrics: Arc<PipelineMetrics>,
    mut committed: watch::Receiver<Option<Arc<Committed>>>,
    mut schema: watch::Receiver<Arc<Table>>,
    progress: Option<Arc<CdcProgress>>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let consumer: Consumer = crate::kafka::consumer(
        &kafka,
        &format!("{}-{}", kafka.group_id, config.name),
        None,
        // Partitions start at explicit positions; this decides only what happens when
        // one is outside the log (see cdc_partitions).
        config.on_offset_out_of_range.into(),
        &config.name,
    )?;
    let consumer = Arc::new(consumer);
    let Some(assignment) = cdc_partitions::assign_initial(
        &consumer,
        &config,
        &kafka.bootstrap_servers,
        &resume,
        &mut shutdown,
    )
    .await?
    else {
        return Ok(());
    };
    let mut _watermarks = None;
    if let Some(progress) = &progress {
        for element in assignment.elements() {
            let start = match element.offset() {
                Offset::Offset(next) => next,
                // Starting at the end: nothing before the start is waited for.
                Offset::End => i64::MAX,
                _ => 0,
            };
            progress.register(
                (
                    config.name.clone(),
                    element.topic().to_string(),
                    element.partition(),
                ),
                start,
            );
        }
        _watermarks = Some(cdc_partitions::spawn_watermark_watch(
            consumer.clone(),
            &config.name,
            progress.clone(),
            shutdown.clone(),
        ));
    }
    let _discovery = cdc_partitions::spawn_discovery(
        consumer.clone(),
        &config,
        &assignment,
        progress.clone(),
        shutdown.clone(),
    );
    let _watch = crate::kafka::watch::spawn(
        &config.name,
        &consumer,
        metrics.clone(),
        &kafka.bootstrap_servers,
    );
    let (mut decoder, mut check) = (decoder, RowCheck::new(&table)?);
    let mut schema_id = table.schema().id;
    loop {
        tokio::select! {
            message = consumer.recv() => {
                let message = match message {
                    Ok(m) => m,
                    Err(e) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::AutoOffsetReset) => {
                        // A position outside its log: retention overtook this pipeline
                        // (an error), or the topic was created again (read it anew).
                        tracing::info!(pipeline = %config.name, error = %e, "a partition's position is outside its log");
                        if !cdc_partitions::recover_from_reset(&consumer, &config, &assignment, &mut shutdown).await? {
                            break;
                        }
                        continue;
                    }
                    Err(e) => {
                        consumer.context().consumer_error(&e);
                        continue;
                    }
                };
                PipelineMetrics::add(&metrics.records_in, 1);
                if schema.has_changed().unwrap_or(false) {
                    // Another pipeline of the table (or this one) evolved it.
                    let evolved = schema.borrow_and_update().clone();
                    if evolved.schema().id > schema_id {
                        decoder = super::build::cdc_decoder(&config, &evolved)?;
                        check = RowCheck::new(&evolved)?;
                        schema_id = evolved.schema().id;
                    }
                }
                let decoded = decode_held(&config, &decoder, &check, &message, &metrics, &mut shutdown);
                let Some(mut decoded) = decoded.await else { break };
                if let Err(BadRecord::Decode(DecodeError::SchemaChanged { columns, .. })) = decoded {
                    // The table takes the record's columns first (or the pipeline stops).
                    let evolved = cdc_schema::evolve(&evolutions, &config.name, columns,
                        config.schema_evolution, &metrics, &mut shutdown).await?;
                    let Some(evolved) = evolved else { break };
                    decoder = super::build::cdc_decoder(&config, &evolved)?;
                    check = RowCheck::new(&evolved)?;
                    schema_id = schema_id.max(evolved.schema().id);
                    let again = decode_held(&config, &decoder, &check, &message, &metrics, &mut shutdown);
                    let Some(again) = again.await else { break };
                    if let Err(BadRecord::Decode(e @ DecodeError::SchemaChanged { .. })) = &again {
                        return Err(Error::format(format!(
                            "pipeline {}: a record still does not fit table {} after its schema \
                             evolved to schema {}: {e}",
                            config.name, evolved.identifier(), evolved.schema().id
                        )));
                    }
                    decoded = again;
                }
                let changes = match decoded {
                    Ok(c) => c,
                    Err(reason) => {
                        PipelineMetrics::add(&metrics.dead_lettered, 1);
                        dead_letters
                            .send(&config.name, &message, &reason.to_string())
                            .await?;
                        Vec::new()
                    }
                };
                let batch = ChangeBatch {
                    pipeline: config.name.clone(),
                    topic: message.topic().to_string(),
                    partition: message.partition(),
                    next_offset: message.offset() + 1,
                    timestamp_ms: message.timestamp().to_millis(),
                    changes,
                };
                if sink.send(batch).await.is_err() {
                    // The sink stopped (shutdown or a fatal error it reports itself).
                    break;
                }
            }
            changed = committed.changed() => {
                if changed.is_err() { break; }
                let snapshot = committed.borrow().as_ref().map(|c| c.snapshot.clone());
                commit_kafka_offsets(&consumer, &config.name, snapshot.as_ref());
            }
            _ = shutdown.changed() => break,
        }
    }
    Ok(())
}

/// Mirrors the committed table position into the consumer group, for monitoring tools.
fn commit_kafka_offsets(consumer: &Consumer, pipeline: &str, snapshot: Option<&Snapshot>) {
    let Some(value) = snapshot
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get(&format!("{OFFSETS_PROPERTY_PREFIX}{pipeline}")))
    else {
        return;
    };
    let Ok(offsets) = serde_json::from_str::<Offsets>(value) else {
        return;
    };
    let mut list = TopicPartitionList::new();
    for (topic, partitions) in &offsets {
        for (p, next) in partitions {
            let _ = list.add_partition_offset(topic, *p, Offset::Offset(*next));
        }
    }
    if let Err(e) = consumer.commit(&list, rdkafka::consumer::CommitMode::Async) {
        tracing::debug!(pipeline, error = %e, "could not mirror offsets to the consumer group");
    }
}
