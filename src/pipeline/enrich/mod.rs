//! Enrich pipelines: facts → lookup joins in order → encode → produce → commit offsets
//! after delivery.
//!
//! Delivery: at least once. A fact's offset is committed only after its enriched record
//! (or its dead letter) is acknowledged by the broker, and in input order per partition,
//! so a crash replays from the oldest unacknowledged fact.
//!
//! Facts are taken from the consumer a poll batch at a time (what the client has already
//! fetched, up to `FACT_BATCH`) and joined with one lookup per join per batch. Each batch
//! is decoded, joined and encoded in a task of its own, so batches use every core of the
//! runtime while this loop consumes, produces and commits; their outcomes are still taken
//! in input order (`ordered`).

mod facts;
mod join;
mod offsets;
mod produce;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, FuturesUnordered};
use futures::{FutureExt, StreamExt};
use rdkafka::consumer::{CommitMode, Consumer as _};
use tokio::sync::watch;

use super::dead_letter::DeadLetters;
use crate::codec::{FactDecoder, OutputEncoder};
use crate::config::{EnrichConfig, KafkaConfig};
use crate::error::{Error, Result};
use crate::kafka::{Consumed, Consumer, Deliveries, Producer};
use crate::observe::PipelineMetrics;
use facts::{BatchOutcome, Enriched, Enricher, FactError};
pub(crate) use join::{Join, JoinPlan};
pub(crate) use offsets::OffsetTracker;
use produce::Refused;

/// Facts whose records are not yet acknowledged, per pipeline (bounds memory next to
/// `max_in_flight` facts in lookups). Enough for a quarter second of output at 200k
/// records/s: with `acks=all` a delivery takes a broker round trip plus `linger.ms`, and
/// the consumer stops taking facts while the bound is reached.
const MAX_UNACKNOWLEDGED: usize = 50_000;
/// Most facts taken from the consumer into one batch.
const FACT_BATCH: usize = 256;

/// A batch's (or a lone fact's) task; fails only if the task panicked.
type Lookups = BoxFuture<'static, Result<BatchOutcome>>;

/// Batches (and facts on their own) in flight, completing in input order (`ordered`) or
/// as they finish.
enum InFlight {
    Ordered(FuturesOrdered<Lookups>),
    Unordered(FuturesUnordered<Lookups>),
}

impl InFlight {
    /// Runs `lookups` in a task of its own (on any worker of the runtime).
    fn push(&mut self, lookups: impl Future<Output = BatchOutcome> + Send + 'static) {
        let future = tokio::spawn(lookups)
            .map(|joined| {
                joined.map_err(|source| Error::Task {
                    what: "enriching a batch of facts".into(),
                    source,
                })
            })
            .boxed();
        match self {
            InFlight::Ordered(f) => f.push_back(future),
            InFlight::Unordered(f) => f.push(future),
        }
    }

    async fn next(&mut self) -> Option<Result<BatchOutcome>> {
        match self {
            InFlight::Ordered(f) => f.next().await,
            InFlight::Unordered(f) => f.next().await,
        }
    }
}

/// A delivery group in flight: once every record is acknowledged, resolves to how many
/// facts it was given and those whose offsets are done.
type Delivery = BoxFuture<'static, Result<(usize, Vec<Consumed>)>>;

/// Runs one enrich pipeline until `shutdown`. Joins with a `full` cache are loaded before
/// the first fact is consumed.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    config: EnrichConfig,
    kafka: KafkaConfig,
    joins: Vec<Join>,
    decoder: FactDecoder,
    encoder: OutputEncoder,
    producer: Producer,
    dead_letters: DeadLetters,
    metrics: Arc<PipelineMetrics>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    for join in &joins {
        tokio::select! {
            _ = join.lookup().wait_ready() => {}
            _ = shutdown.changed() => return Ok(()),
        }
    }
    let consumer: Consumer = crate::kafka::consumer(
        &kafka,
        &format!("{}-{}", kafka.group_id, config.name),
        kafka.group_instance_id.as_deref(),
        config.start_from.into(),
        &config.name,
    )?;
    let consumer = Arc::new(consumer);
    let _watch = crate::kafka::watch::spawn(
        &config.name,
        &consumer,
        metrics.clone(),
        &kafka.bootstrap_servers,
    );
    let topics: Vec<&str> = config.topics.iter().map(String::as_str).collect();
    consumer
        .subscribe(&topics)
        .map_err(|e| Error::kafka(format!("subscribing {}", config.name), e))?;
    let max_in_flight = config.max_in_flight.max(1);
    let mut lookups = if config.ordered {
        InFlight::Ordered(FuturesOrdered::new())
    } else {
        InFlight::Unordered(FuturesUnordered::new())
    };
    let enricher = Arc::new(Enricher {
        config: config.clone(),
        joins,
        decoder,
        encoder,
        metrics: metrics.clone(),
        shutdown: shutdown.clone(),
    });
    let sink = Sink {
        producer: &producer,
        dead_letters: &dead_letters,
        config: &config,
        metrics: &metrics,
        alone: Arc::new(tokio::sync::Mutex::new(())),
    };
    let mut deliveries = FuturesUnordered::<Delivery>::new();
    // Facts in `deliveries`.
    let mut unacknowledged = 0usize;
    let mut offsets = OffsetTracker::default();
    let mut commit_tick = tokio::time::interval(Duration::from_secs(1));
    let mut stored = false;
    // Facts consumed and not yet handed to a delivery.
    let mut in_flight = 0usize;
    loop {
        tokio::select! {
            message = consumer.recv(), if in_flight < max_in_flight && unacknowledged < MAX_UNACKNOWLEDGED => {
                let first = match message {
                    Ok(m) => Consumed::of(&m),
                    Err(e) => {
                        consumer.context().consumer_error(&e);
                        continue;
                    }
                };
                // Whatever else the client has already fetched joins the batch.
                let room = FACT_BATCH.min(max_in_flight - in_flight);
                let mut batch = Vec::with_capacity(room);
                batch.push(first);
                // One stream for the batch: each `recv` makes and drops a stream, which
                // registers and unregisters a waker under a mutex, per record.
                let mut fetched = consumer.stream();
                while batch.len() < room {
                    match fetched.next().now_or_never().flatten() {
                        Some(Ok(m)) => batch.push(Consumed::of(&m)),
                        Some(Err(e)) => {
                            consumer.context().consumer_error(&e);
                            break;
                        }
                        None => break,
                    }
                }
                PipelineMetrics::add(&metrics.records_in, batch.len() as u64);
                PipelineMetrics::add(&metrics.fact_batches, 1);
                in_flight += batch.len();
                for m in &batch {
                    offsets.begin(m.topic(), m.partition(), m.offset());
                }
                if batch.len() == 1 {
                    lookups.push(enricher.clone().enrich(batch.remove(0)));
                } else {
                    lookups.push(enricher.clone().enrich_batch(batch));
                }
            }
            Some(outcome) = lookups.next() => {
                let outcome = outcome?;
                for message in outcome.deferred {
                    lookups.push(enricher.clone().enrich(message));
                }
                in_flight -= outcome.done.len();
                unacknowledged += outcome.done.len();
                let delivery = sink.deliver(outcome.done).await?;
                deliveries.push(delivery);
            }
            Some(done) = deliveries.next() => {
                unacknowledged -= done_facts(&mut offsets, done?, &mut stored);
            }
            _ = commit_tick.tick() => {
                if stored {
                    store_moved(&consumer, &mut offsets, &config.name);
                    if let Err(e) = consumer.commit_consumer_state(CommitMode::Async) {
                        tracing::debug!(pipeline = %config.name, error = %e, "offset commit failed; will retry");
                    }
                    stored = false;
                }
            }
            _ = shutdown.changed() => break,
        }
    }
    // Finish the facts in flight (their lookups, then their deliveries), then commit
    // synchronously what was stored since the last periodic commit.
    while let Some(outcome) = lookups.next().await {
        let outcome = outcome?;
        for message in outcome.deferred {
            lookups.push(enricher.clone().enrich(message));
        }
        let delivery = sink.deliver(outcome.done).await?;
        deliveries.push(delivery);
    }
    while let Some(done) = deliveries.next().await {
        done_facts(&mut offsets, done?, &mut stored);
    }
    if stored {
        store_moved(&consumer, &mut offsets, &config.name);
    }
    if stored && let Err(e) = consumer.commit_consumer_state(CommitMode::Sync) {
        tracing::warn!(pipeline = %config.name, error = %e, "final offset commit failed");
    }
    Ok(())
}

/// Where finished facts go: the output topic, or the dead-letter topic.
struct Sink<'a> {
    producer: &'a Producer,
    dead_letters: &'a DeadLetters,
    config: &'a EnrichConfig,
    metrics: &'a Arc<PipelineMetrics>,
    /// Records refused as too large are sent again one at a time (see
    /// `produce::redeliver`).
    alone: Arc<tokio::sync::Mutex<()>>,
}

/// A fact whose records were sent: once they are all acknowledged, its offset is done.
struct SentFact {
    message: Consumed,
    /// Its records in the delivery group.
    records: u64,
    /// It went to the dead-letter topic instead (a record of it was refused at once):
    /// its other records' failures do not matter.
    dead_lettered: bool,
}

impl Sink<'_> {
    /// Sends the records of a batch's finished facts (or their dead letters) in one
    /// delivery group; the returned delivery resolves to the facts whose offsets are done
    /// once the broker acknowledged every record. A fact left unfinished at shutdown is
    /// not among them: its offset must not be committed.
    ///
    /// A record the broker refuses for what it is (too large for the topic, invalid)
    /// turns its fact into a dead letter, with the reason; an error that no record could
    /// get past (the topic is gone, the pipeline may not write it) stops the pipeline.
    async fn deliver(&self, done: Vec<Enriched>) -> Result<Delivery> {
        let group = Deliveries::new();
        let given = done.len();
        let topic = &self.config.output.topic;
        let mut sent = Vec::with_capacity(done.len());
        for (message, result) in done {
            let tag = u32::try_from(sent.len()).unwrap_or(u32::MAX);
            let (records, dead_lettered) = match result {
                Ok(outputs) if outputs.is_empty() => {
                    PipelineMetrics::add(&self.metrics.dropped, 1);
                    (0, false)
                }
                Ok(outputs) => {
                    match produce::send_all(self.producer, topic, &group, tag, &message, outputs)
                        .await
                    {
                        Ok(records) => (records, false),
                        Err(Refused::Record(reason)) => {
                            self.dead_letter(&message, &reason).await?;
                            (0, true)
                        }
                        Err(Refused::Pipeline(e)) => return Err(e),
                    }
                }
                Err(FactError::Bad(reason)) => {
                    self.dead_letter(&message, &reason).await?;
                    (0, true)
                }
                // Held facts come back only once they succeed, fail on their own, or are
                // given up at shutdown.
                Err(FactError::Held(_) | FactError::Unfinished) => continue,
            };
            sent.push(SentFact {
                message,
                records,
                dead_lettered,
            });
        }
        let metrics = self.metrics.clone();
        let topic = topic.clone();
        let dead_letters = self.dead_letters.clone();
        let pipeline = self.config.name.clone();
        let producer = self.producer.clone();
        let alone = self.alone.clone();
        Ok(async move {
            let mut failures = group.all_delivered().await;
            failures.sort_by_key(|f| f.tag);
            for failure in failures {
                let Some(fact) = usize::try_from(failure.tag)
                    .ok()
                    .and_then(|i| sent.get_mut(i))
                else {
                    continue;
                };
                if fact.dead_lettered {
                    continue;
                }
                match produce::redeliver(failure, &producer, &topic, &alone).await {
                    Ok(()) => {}
                    Err(Refused::Record(reason)) => {
                        fact.dead_lettered = true;
                        PipelineMetrics::add(&metrics.dead_lettered, 1);
                        dead_letters.send(&pipeline, &fact.message, &reason).await?;
                    }
                    Err(Refused::Pipeline(e)) => return Err(e),
                }
            }
            let delivered = sent
                .iter()
                .filter(|f| !f.dead_lettered)
                .map(|f| f.records)
                .sum();
            PipelineMetrics::add(&metrics.records_out, delivered);
            Ok((given, sent.into_iter().map(|f| f.message).collect()))
        }
        .boxed())
    }

    async fn dead_letter(&self, message: &Consumed, reason: &str) -> Result<()> {
        PipelineMetrics::add(&self.metrics.dead_lettered, 1);
        self.dead_letters
            .send(&self.config.name, message, reason)
            .await
    }
}

/// Marks a delivered group's facts done; `stored` says whether a committable offset moved.
/// Returns how many facts the group was given.
fn done_facts(
    offsets: &mut OffsetTracker,
    (given, facts): (usize, Vec<Consumed>),
    stored: &mut bool,
) -> usize {
    for m in &facts {
        *stored |= offsets
            .finish(m.topic(), m.partition(), m.offset())
            .is_some();
    }
    given
}

/// Stores, before a commit, each partition's committable offset that moved since the
/// last one. A store can fail after a rebalance took the partition away; the new owner
/// then replays from the last commit (at least once), so that is not an error.
fn store_moved(consumer: &Consumer, offsets: &mut OffsetTracker, pipeline: &str) {
    for (topic, partition, done_through) in offsets.take_moved() {
        if let Err(e) = consumer.store_offset(topic, partition, done_through) {
            tracing::debug!(pipeline, topic, partition, error = %e, "offset not stored");
        }
    }
}
