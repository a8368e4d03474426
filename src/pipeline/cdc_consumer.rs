//! The consumer of a CDC pipeline: takes records a poll batch at a time, decodes each
//! batch on a task of its own (batches decode on every core, their outcomes taken in
//! order), and gives the changes to the table's sink, gathered per partition run.
//!
//! Records that cannot be decoded for now (a schema registry outage) are decoded again
//! in order by the consumer itself, held until they succeed; records with fields the
//! table lacks evolve the table first; bad records go to the dead-letter topic.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::StreamExt as _;
use futures::stream::FuturesOrdered;
use rdkafka::Offset;
use rdkafka::consumer::CommitMode;
use rdkafka::consumer::Consumer as _;
use rdkafka::error::RDKafkaErrorCode;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinError;

use super::cdc::{ChangeBatch, Committed, Resume};
use super::cdc_mirror;
use super::cdc_partitions;
use super::cdc_progress::CdcProgress;
use super::cdc_schema::{self, EvolveRequest};
use super::dead_letter::DeadLetters;
use crate::codec::{CdcDecoder, DecodeError, Decoded};
use crate::config::{CdcConfig, KafkaConfig};
use crate::error::{Error, Result};
use crate::kafka::{Consumed, Consumer};
use crate::lsm::row_check::{CheckedChange, RowCheck, RowRejected};
use crate::observe::{AbortOnDrop, PipelineMetrics};
use crate::table::Table;

/// Most records a consumer takes into one batch (and gathers into one [`ChangeBatch`]).
const GATHER_RECORDS: usize = 512;

/// Batches being decoded at once.
const BATCHES_DECODING: usize = 4;

/// Longest wait between attempts to decode a held record.
const MAX_HOLD_BACKOFF: Duration = Duration::from_secs(30);

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
    message: &Consumed,
) -> Result<std::result::Result<Vec<CheckedChange>, BadRecord>> {
    let record = message.record();
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
/// `failed`: how its first attempt (on a decoding task) failed, if it was tried.
async fn decode_held(
    config: &CdcConfig,
    decoder: &CdcDecoder,
    check: &RowCheck,
    message: &Consumed,
    metrics: &PipelineMetrics,
    shutdown: &mut watch::Receiver<bool>,
    mut failed: Option<Error>,
) -> Option<std::result::Result<Vec<CheckedChange>, BadRecord>> {
    let mut wait = Duration::from_millis(100);
    let mut held = false;
    loop {
        let attempt = match failed.take() {
            Some(e) => Err(e),
            None => decode_record(config, decoder, check, message).await,
        };
        let error = match attempt {
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
        wait = (wait * 2).min(MAX_HOLD_BACKOFF);
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
    resume: Resume,
    sink: mpsc::Sender<ChangeBatch>,
    evolutions: mpsc::Sender<EvolveRequest>,
    dead_letters: DeadLetters,
    metrics: Arc<PipelineMetrics>,
    mut committed: watch::Receiver<Option<Arc<Committed>>>,
    schema: watch::Receiver<Arc<Table>>,
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
    let config_name = config.name.clone();
    let mut state = Decoding {
        decoder: Arc::new(decoder),
        check: Arc::new(RowCheck::new(&table)?),
        schema_id: table.schema().id,
        schema,
        config: Arc::new(config),
        gathered: None,
        sink,
        evolutions,
        dead_letters,
        metrics,
    };
    let mut decoding = FuturesOrdered::new();
    loop {
        tokio::select! {
            message = consumer.recv(), if decoding.len() < BATCHES_DECODING => {
                // The record, and whatever else the client has already fetched.
                let mut batch = Vec::new();
                let mut error = None;
                match message {
                    Ok(m) => batch.push(Consumed::of(&m)),
                    Err(e) => error = Some(e),
                }
                while error.is_none() && !batch.is_empty() && batch.len() < GATHER_RECORDS {
                    match consumer.recv().now_or_never() {
                        Some(Ok(m)) => batch.push(Consumed::of(&m)),
                        Some(Err(e)) => error = Some(e),
                        None => break,
                    }
                }
                if !batch.is_empty() {
                    state.follow_schema()?;
                    // Aborted when the loop stops (dropped right after it): what they
                    // decode is not taken then.
                    decoding.push_back(AbortOnDrop(tokio::spawn(decode_batch(
                        state.config.clone(), state.decoder.clone(), state.check.clone(), batch,
                    ))));
                }
                let Some(e) = error else { continue };
                if e.rdkafka_error_code() == Some(RDKafkaErrorCode::AutoOffsetReset) {
                    // A position outside its log: retention overtook this pipeline (an
                    // error), or the topic was created again (read it anew). What was
                    // taken before it goes first.
                    tracing::info!(pipeline = %state.config.name, error = %e, "a partition's position is outside its log");
                    let mut stopped = false;
                    while let Some(done) = decoding.next().await {
                        if !state.take(done, &mut shutdown).await? {
                            stopped = true;
                            break;
                        }
                    }
                    if stopped {
                        break;
                    }
                    if !cdc_partitions::recover_from_reset(
                        &consumer, &state.config, &assignment, &mut shutdown,
                    ).await? {
                        break;
                    }
                } else {
                    consumer.context().consumer_error(&e);
                }
            }
            Some(done) = decoding.next() => {
                if !state.take(done, &mut shutdown).await? {
                    break;
                }
            }
            changed = committed.changed() => {
                if changed.is_err() { break; }
                let snapshot = committed.borrow().as_ref().map(|c| c.snapshot.clone());
                if let Some(snapshot) = snapshot {
                    cdc_mirror::mirror(&consumer, &state.config.name, &resume.writer, &snapshot,
                        CommitMode::Async);
                }
            }
            _ = shutdown.changed() => break,
        }
    }
    // Batches still decoding are abandoned now, not after the final commits below.
    drop(decoding);
    // What was gathered before a stop (a stopped sink refuses it: nothing is lost, the
    // next start resumes from the table's offsets).
    if let Some(batch) = state.gathered.take() {
        let _ = state.sink.send(batch).await;
    }
    drop(state);
    cdc_mirror::mirror_final_commits(&consumer, &config_name, &resume.writer, &mut committed).await;
    Ok(())
}

/// The outcome of decoding one record on a decoding task.
enum Outcome {
    Decoded(std::result::Result<Vec<CheckedChange>, BadRecord>),
    /// It failed transiently: the consumer's loop decodes it again, held.
    Failed(Error),
    /// A record before it failed transiently: the consumer's loop decodes it.
    NotTried,
}

/// Decodes a batch of records on a task of its own, so that batches decode on every core
/// while the consumer's loop takes the next ones.
async fn decode_batch(
    config: Arc<CdcConfig>,
    decoder: Arc<CdcDecoder>,
    check: Arc<RowCheck>,
    batch: Vec<Consumed>,
) -> Vec<(Consumed, Outcome)> {
    let mut out = Vec::with_capacity(batch.len());
    // After a transient failure (the registry is unreachable) the rest wait for the
    // consumer's held decoding instead of each waiting out the outage here.
    let mut failed = false;
    for message in batch {
        let outcome = match failed {
            true => Outcome::NotTried,
            false => match decode_record(&config, &decoder, &check, &message).await {
                Ok(decoded) => Outcome::Decoded(decoded),
                Err(e) => {
                    failed = true;
                    Outcome::Failed(e)
                }
            },
        };
        out.push((message, outcome));
    }
    out
}

/// The consumer's side of decoding: the decoder of the table's current schema, and the
/// records decoded and not yet given to the sink.
struct Decoding {
    config: Arc<CdcConfig>,
    decoder: Arc<CdcDecoder>,
    check: Arc<RowCheck>,
    schema_id: i64,
    schema: watch::Receiver<Arc<Table>>,
    /// Changes of the records taken so far that the sink has not been given yet.
    gathered: Option<ChangeBatch>,
    sink: mpsc::Sender<ChangeBatch>,
    evolutions: mpsc::Sender<EvolveRequest>,
    dead_letters: DeadLetters,
    metrics: Arc<PipelineMetrics>,
}

impl Decoding {
    /// Decodes in the table's newest schema when another pipeline of the table (or this
    /// one) evolved it.
    fn follow_schema(&mut self) -> Result<()> {
        if self.schema.has_changed().unwrap_or(false) {
            let evolved = self.schema.borrow_and_update().clone();
            if evolved.schema().id > self.schema_id {
                self.use_schema(&evolved)?;
            }
        }
        Ok(())
    }

    fn use_schema(&mut self, table: &Table) -> Result<()> {
        self.decoder = Arc::new(super::build::cdc_decoder(&self.config, table)?);
        self.check = Arc::new(RowCheck::new(table)?);
        self.schema_id = self.schema_id.max(table.schema().id);
        Ok(())
    }

    /// Takes a decoded batch in order: evolves the table for records that need it,
    /// decodes again (held) those that failed transiently, dead-letters bad ones, and
    /// gives the changes to the sink. `false` when the pipeline stops.
    async fn take(
        &mut self,
        done: std::result::Result<Vec<(Consumed, Outcome)>, JoinError>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<bool> {
        let done = done.map_err(|source| Error::Task {
            what: format!("decoding changes of {}", self.config.name),
            source,
        })?;
        PipelineMetrics::add(&self.metrics.records_in, done.len() as u64);
        for (message, outcome) in done {
            let decoded = match outcome {
                Outcome::Decoded(decoded) => decoded,
                Outcome::Failed(_) | Outcome::NotTried => {
                    let failure = match outcome {
                        Outcome::Failed(e) => Some(e),
                        _ => None,
                    };
                    let held = decode_held(
                        &self.config,
                        &self.decoder,
                        &self.check,
                        &message,
                        &self.metrics,
                        shutdown,
                        failure,
                    );
                    let Some(decoded) = held.await else {
                        return Ok(false);
                    };
                    decoded
                }
            };
            let Some(decoded) = self.fit(decoded, &message, shutdown).await? else {
                return Ok(false);
            };
            let changes = match decoded {
                Ok(c) => c,
                Err(reason) => {
                    PipelineMetrics::add(&self.metrics.dead_lettered, 1);
                    self.dead_letters
                        .send(&self.config.name, &message, &reason.to_string())
                        .await?;
                    Vec::new()
                }
            };
            if !self.gather(&message, changes).await {
                return Ok(false);
            }
        }
        Ok(match self.gathered.take() {
            Some(batch) => self.sink.send(batch).await.is_ok(),
            None => true,
        })
    }

    /// A record that has fields the table lacks: the table takes them first (or the
    /// pipeline stops), after the changes gathered before it, and the record is decoded
    /// again in the new schema. `None` when the pipeline stops.
    async fn fit(
        &mut self,
        decoded: std::result::Result<Vec<CheckedChange>, BadRecord>,
        message: &Consumed,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Option<std::result::Result<Vec<CheckedChange>, BadRecord>>> {
        let Err(BadRecord::Decode(DecodeError::SchemaChanged { columns, .. })) = decoded else {
            return Ok(Some(decoded));
        };
        if let Some(batch) = self.gathered.take()
            && self.sink.send(batch).await.is_err()
        {
            return Ok(None);
        }
        let evolved = cdc_schema::evolve(
            &self.evolutions,
            &self.config.name,
            columns,
            self.config.schema_evolution,
            &self.metrics,
            shutdown,
        )
        .await?;
        let Some(evolved) = evolved else {
            return Ok(None);
        };
        self.use_schema(&evolved)?;
        let again = decode_held(
            &self.config,
            &self.decoder,
            &self.check,
            message,
            &self.metrics,
            shutdown,
            None,
        );
        let Some(again) = again.await else {
            return Ok(None);
        };
        if let Err(BadRecord::Decode(e @ DecodeError::SchemaChanged { .. })) = &again {
            return Err(Error::format(format!(
                "pipeline {}: a record still does not fit table {} after its schema \
                 evolved to schema {}: {e}",
                self.config.name,
                evolved.identifier(),
                evolved.schema().id
            )));
        }
        Ok(Some(again))
    }

    /// Adds a record's changes to the gathered batch (a batch holds one partition's
    /// records). `false` when the sink stopped.
    async fn gather(&mut self, message: &Consumed, changes: Vec<CheckedChange>) -> bool {
        let (next_offset, timestamp_ms) = (message.offset() + 1, message.timestamp().to_millis());
        if let Some(batch) = &mut self.gathered
            && batch.partition == message.partition()
            && batch.topic == message.topic()
        {
            batch.push_record(next_offset, timestamp_ms, changes);
            return true;
        }
        if let Some(batch) = self.gathered.take()
            && self.sink.send(batch).await.is_err()
        {
            return false;
        }
        self.gathered = Some(ChangeBatch::of_record(
            self.config.name.clone(),
            message.topic(),
            message.partition(),
            next_offset,
            timestamp_ms,
            changes,
        ));
        true
    }
}
