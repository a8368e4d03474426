//! Enrich pipelines: facts → lookup joins in order → encode → produce → commit offsets
//! after delivery.
//!
//! Delivery: at least once. A fact's offset is committed only after its enriched record
//! (or its dead letter) is acknowledged by the broker, and in input order per partition,
//! so a crash replays from the oldest unacknowledged fact.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, FuturesUnordered};
use futures::{FutureExt, StreamExt};
use rdkafka::consumer::{CommitMode, Consumer as _};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{DeliveryFuture, FutureRecord};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::dead_letter::DeadLetters;
use super::progress::CdcProgress;
use crate::codec::{FactDecoder, KafkaRecord, OutputEncoder, lookup_path};
use crate::config::{EnrichConfig, JoinConfig, JoinKind, KafkaConfig};
use crate::error::{Error, Result};
use crate::kafka::{Consumer, Producer};
use crate::lookup::{LookupMetrics, LookupTable};
use crate::observe::PipelineMetrics;
use crate::table::datum::{Datum, Row, datum_from_json, datum_to_json};
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// Deliveries not yet acknowledged, per pipeline (bounds memory next to `max_in_flight`
/// facts in lookups).
const MAX_UNACKNOWLEDGED: usize = 10_000;

/// How a join's key and output map onto its table, from `[[enrich.join]]`.
#[derive(Debug, Clone)]
pub struct JoinPlan {
    /// Fact field and column type of each join-key value, in `on` order.
    pub key_fields: Vec<(String, DataType)>,
    /// Table column of each join-key value, in the same order.
    pub key_columns: Vec<usize>,
    /// Table columns added to the fact.
    pub projection: Vec<usize>,
    /// Output field name and type of each projected column.
    pub outputs: Vec<(String, DataType)>,
}

impl JoinPlan {
    pub fn new(config: &JoinConfig, schema: &TableSchema) -> Result<Self> {
        let column = |name: &str| {
            schema.field_index(name).ok_or_else(|| {
                Error::Config(format!("join on {}: no column `{name}`", config.table))
            })
        };
        let mut key_fields = Vec::new();
        let mut key_columns = Vec::new();
        for (fact_field, name) in &config.on {
            let index = column(name)?;
            key_fields.push((fact_field.clone(), schema.fields[index].data_type));
            key_columns.push(index);
        }
        let selected: Vec<&String> = if config.select.is_empty() {
            schema
                .fields
                .iter()
                .map(|f| &f.name)
                .filter(|n| !config.on.values().any(|c| c == *n))
                .collect()
        } else {
            config.select.iter().collect()
        };
        let mut projection = Vec::new();
        let mut outputs = Vec::new();
        for name in selected {
            let index = column(name)?;
            let output = config
                .rename
                .get(name)
                .cloned()
                .unwrap_or_else(|| format!("{}{name}", config.prefix));
            projection.push(index);
            outputs.push((output, schema.fields[index].data_type));
        }
        Ok(JoinPlan {
            key_fields,
            key_columns,
            projection,
            outputs,
        })
    }
}

/// One configured join, resolved against its table.
pub struct Join {
    table_name: String,
    lookup: Arc<LookupTable>,
    kind: JoinKind,
    key_fields: Vec<(String, DataType)>,
    outputs: Vec<(String, DataType)>,
    retry: Option<(Duration, u32)>,
    /// `wait_for_cdc`: the table's CDC progress and `max_wait`.
    wait: Option<(Arc<CdcProgress>, Duration)>,
}

impl Join {
    pub fn new(
        config: &JoinConfig,
        plan: JoinPlan,
        lookup: Arc<LookupTable>,
        progress: Option<Arc<CdcProgress>>,
    ) -> Self {
        Join {
            table_name: config.table.clone(),
            lookup,
            kind: config.kind,
            key_fields: plan.key_fields,
            outputs: plan.outputs,
            retry: config.retry.as_ref().map(|r| (r.delay, r.max_attempts)),
            wait: progress
                .filter(|_| config.wait_for_cdc)
                .map(|p| (p, config.max_wait)),
        }
    }

    pub fn lookup(&self) -> &Arc<LookupTable> {
        &self.lookup
    }

    /// The lookup key of a fact: `Ok(None)` when a key field is missing or null; `Err`
    /// when present but not convertible (a bad record).
    fn key(&self, fact: &Map<String, Value>) -> std::result::Result<Option<Vec<Datum>>, String> {
        let mut key = Vec::with_capacity(self.key_fields.len());
        for (field, ty) in &self.key_fields {
            match lookup_path(fact, field) {
                None | Some(Value::Null) => return Ok(None),
                Some(v) => {
                    key.push(datum_from_json(v, ty).map_err(|e| {
                        format!("join on {}: field `{field}`: {e}", self.table_name)
                    })?)
                }
            }
        }
        Ok(Some(key))
    }

    /// Joins `fact` and pushes the result to `out`: one fact per matching row (a join by
    /// primary key matches at most one; a join on other columns may match several, as in
    /// Flink), the fact with nulls when nothing matches and the join is LEFT, nothing when
    /// it is INNER. Returns whether a row matched. `timestamp_ms` is the fact's Kafka timestamp, which `wait_for_cdc`
    /// compares with the CDC progress.
    pub async fn apply(
        &self,
        fact: Map<String, Value>,
        timestamp_ms: Option<i64>,
        metrics: &PipelineMetrics,
        out: &mut Vec<Map<String, Value>>,
    ) -> std::result::Result<bool, String> {
        let join_metrics = self.lookup.metrics();
        let rows: Vec<Arc<Row>> = match self.key(&fact)? {
            None => Vec::new(),
            Some(key) => {
                if let (Some((progress, max_wait)), Some(ts)) = (&self.wait, timestamp_ms)
                    && !progress.covers(ts)
                {
                    LookupMetrics::add(&join_metrics.waits, 1);
                    if !progress.wait_for(ts, *max_wait).await {
                        LookupMetrics::add(&join_metrics.wait_timeouts, 1);
                    }
                }
                let mut rows = self.find(&key).await?;
                if let Some((delay, attempts)) = self.retry {
                    let mut attempt = 1;
                    while rows.is_empty() && attempt < attempts {
                        PipelineMetrics::add(&metrics.join_retries, 1);
                        LookupMetrics::add(&join_metrics.retries, 1);
                        // Refreshes run on commits and on the refresh interval; a retry
                        // only looks again.
                        tokio::time::sleep(delay).await;
                        rows = self.find(&key).await?;
                        attempt += 1;
                    }
                }
                rows
            }
        };
        if rows.is_empty() {
            PipelineMetrics::add(&metrics.join_misses, 1);
            if self.kind == JoinKind::Left {
                out.push(self.with_columns(fact, None));
            }
            return Ok(false);
        }
        PipelineMetrics::add(&metrics.join_hits, 1);
        let last = rows.len() - 1;
        let mut fact = Some(fact);
        for (i, row) in rows.iter().enumerate() {
            let base = if i == last {
                fact.take().unwrap_or_default()
            } else {
                fact.clone().unwrap_or_default()
            };
            out.push(self.with_columns(base, Some(row)));
        }
        Ok(true)
    }

    /// The matching rows (projected): at most one by primary key, any number otherwise.
    async fn find(&self, key: &[Datum]) -> std::result::Result<Vec<Arc<Row>>, String> {
        if self.lookup.by_primary_key() {
            let row = self.lookup.get(key).await.map_err(|e| e.to_string())?;
            Ok(row.into_iter().collect())
        } else {
            let rows = self.lookup.get_all(key).map_err(|e| e.to_string())?;
            Ok(rows.into_iter().map(Arc::new).collect())
        }
    }

    /// The fact with the joined columns added (nulls without a row).
    fn with_columns(
        &self,
        mut fact: Map<String, Value>,
        row: Option<&Arc<Row>>,
    ) -> Map<String, Value> {
        for (i, (name, ty)) in self.outputs.iter().enumerate() {
            let value = row
                .and_then(|r| r.get(i))
                .map_or(Value::Null, |d| datum_to_json(d, ty));
            fact.insert(name.clone(), value);
        }
        fact
    }

    pub fn kind(&self) -> JoinKind {
        self.kind
    }
}

/// Offsets consumed but not finished (produced and acknowledged, dropped or
/// dead-lettered), per partition. Facts may finish out of order (`ordered = false`,
/// deliveries acknowledged out of order); the committable position of a partition is just
/// before its oldest unfinished offset.
#[derive(Debug, Default)]
pub struct OffsetTracker {
    partitions: HashMap<(String, i32), PartitionOffsets>,
}

#[derive(Debug, Default)]
struct PartitionOffsets {
    pending: BTreeSet<i64>,
    /// Highest finished offset.
    finished: Option<i64>,
    /// Lowest offset ever begun: nothing below it is ours to store.
    lowest_begun: Option<i64>,
    /// Last offset handed out for storing.
    stored: Option<i64>,
}

impl OffsetTracker {
    pub fn begin(&mut self, topic: &str, partition: i32, offset: i64) {
        let p = self
            .partitions
            .entry((topic.to_string(), partition))
            .or_default();
        p.pending.insert(offset);
        p.lowest_begun = Some(p.lowest_begun.map_or(offset, |l| l.min(offset)));
    }

    /// Marks an offset finished; returns the offset to store (every offset up to and
    /// including it is finished) when that moved forward.
    pub fn finish(&mut self, topic: &str, partition: i32, offset: i64) -> Option<i64> {
        let p = self.partitions.get_mut(&(topic.to_string(), partition))?;
        p.pending.remove(&offset);
        p.finished = p.finished.max(Some(offset));
        let done_through = match p.pending.first() {
            Some(&oldest) => oldest.checked_sub(1).filter(|o| *o >= 0),
            None => p.finished,
        };
        match done_through {
            Some(o) if p.stored.is_none_or(|s| o > s) && p.lowest_begun.is_some_and(|l| o >= l) => {
                p.stored = Some(o);
                Some(o)
            }
            _ => None,
        }
    }

    pub fn pending(&self) -> usize {
        self.partitions.values().map(|p| p.pending.len()).sum()
    }
}

/// What a pipeline's fact futures share.
struct Enricher {
    config: EnrichConfig,
    joins: Vec<Join>,
    decoder: FactDecoder,
    encoder: OutputEncoder,
    metrics: Arc<PipelineMetrics>,
}

/// An output record: key (`None`: the fact's own) and payload.
type Output = (Option<Vec<u8>>, Vec<u8>);

/// A fact whose lookups finished: what to produce (nothing: dropped), or why it is a
/// dead letter.
type Enriched = (OwnedMessage, std::result::Result<Vec<Output>, String>);

impl Enricher {
    async fn enrich(self: Arc<Self>, message: OwnedMessage) -> Enriched {
        let record = KafkaRecord {
            topic: message.topic(),
            partition: message.partition(),
            offset: message.offset(),
            timestamp_ms: message.timestamp().to_millis(),
            key: message.key(),
            payload: message.payload(),
        };
        let result = enrich_one(
            &record,
            &self.decoder,
            &self.joins,
            &self.encoder,
            &self.config,
            &self.metrics,
        )
        .await;
        (message, result)
    }
}

/// Lookups in flight, completing in input order (`ordered`) or as they finish.
enum InFlight {
    Ordered(FuturesOrdered<BoxFuture<'static, Enriched>>),
    Unordered(FuturesUnordered<BoxFuture<'static, Enriched>>),
}

impl InFlight {
    fn push(&mut self, future: BoxFuture<'static, Enriched>) {
        match self {
            InFlight::Ordered(f) => f.push_back(future),
            InFlight::Unordered(f) => f.push(future),
        }
    }

    fn len(&self) -> usize {
        match self {
            InFlight::Ordered(f) => f.len(),
            InFlight::Unordered(f) => f.len(),
        }
    }

    async fn next(&mut self) -> Option<Enriched> {
        match self {
            InFlight::Ordered(f) => f.next().await,
            InFlight::Unordered(f) => f.next().await,
        }
    }
}

/// Runs one enrich pipeline until `shutdown`. Joins with a `full` cache are loaded before
/// the first fact is consumed.
#[allow(clippy::too_many_arguments)]
pub async fn run(
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
        .map_err(|e| Error::Kafka(format!("subscribing {}: {e}", config.name)))?;
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
    });
    let mut deliveries: FuturesUnordered<BoxFuture<'static, Result<(String, i32, i64)>>> =
        FuturesUnordered::new();
    let mut offsets = OffsetTracker::default();
    let mut commit_tick = tokio::time::interval(Duration::from_secs(1));
    let mut stored = false;
    loop {
        tokio::select! {
            message = consumer.recv(), if lookups.len() < max_in_flight && deliveries.len() < MAX_UNACKNOWLEDGED => {
                let message = match message {
                    Ok(m) => m.detach(),
                    Err(e) => {
                        crate::kafka::log_consumer_error(&config.name, &e);
                        continue;
                    }
                };
                PipelineMetrics::add(&metrics.records_in, 1);
                offsets.begin(message.topic(), message.partition(), message.offset());
                lookups.push(enricher.clone().enrich(message).boxed());
            }
            Some((message, result)) = lookups.next() => {
                let position = (message.topic().to_string(), message.partition(), message.offset());
                match result {
                    Ok(outputs) if outputs.is_empty() => {
                        PipelineMetrics::add(&metrics.dropped, 1);
                        deliveries.push(futures::future::ready(Ok(position)).boxed());
                    }
                    Ok(outputs) => {
                        let sent = produce_all(&producer, &config.output.topic, &message, outputs)?;
                        let m = metrics.clone();
                        deliveries.push(async move {
                            let n = sent.len() as u64;
                            await_deliveries(sent).await?;
                            PipelineMetrics::add(&m.records_out, n);
                            Ok(position)
                        }.boxed());
                    }
                    Err(reason) => {
                        PipelineMetrics::add(&metrics.dead_lettered, 1);
                        dead_letters.send(&config.name, &message, &reason).await?;
                        deliveries.push(futures::future::ready(Ok(position)).boxed());
                    }
                }
            }
            Some(done) = deliveries.next() => {
                let (topic, partition, offset) = done?;
                stored |= store(&consumer, &mut offsets, &config.name, &topic, partition, offset);
            }
            _ = commit_tick.tick() => {
                if stored {
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
    while let Some((message, result)) = lookups.next().await {
        let position = (
            message.topic().to_string(),
            message.partition(),
            message.offset(),
        );
        match result {
            Ok(outputs) if outputs.is_empty() => {
                deliveries.push(futures::future::ready(Ok(position)).boxed())
            }
            Ok(outputs) => {
                let sent = produce_all(&producer, &config.output.topic, &message, outputs)?;
                deliveries.push(
                    async move {
                        await_deliveries(sent).await?;
                        Ok(position)
                    }
                    .boxed(),
                );
            }
            Err(reason) => {
                dead_letters.send(&config.name, &message, &reason).await?;
                deliveries.push(futures::future::ready(Ok(position)).boxed());
            }
        }
    }
    while let Some(done) = deliveries.next().await {
        let (topic, partition, offset) = done?;
        stored |= store(
            &consumer,
            &mut offsets,
            &config.name,
            &topic,
            partition,
            offset,
        );
    }
    if stored && let Err(e) = consumer.commit_consumer_state(CommitMode::Sync) {
        tracing::warn!(pipeline = %config.name, error = %e, "final offset commit failed");
    }
    Ok(())
}

/// Sends every output record of a fact.
fn produce_all(
    producer: &Producer,
    topic: &str,
    message: &OwnedMessage,
    outputs: Vec<Output>,
) -> Result<Vec<DeliveryFuture>> {
    outputs
        .into_iter()
        .map(|(key, payload)| produce(producer, topic, message, key, payload))
        .collect()
}

/// Waits until the broker acknowledged every record.
async fn await_deliveries(sent: Vec<DeliveryFuture>) -> Result<()> {
    for delivery in sent {
        match delivery.await {
            Ok(Ok(_)) => {}
            Ok(Err((e, _))) => return Err(Error::Kafka(format!("delivery failed: {e}"))),
            Err(_) => return Err(Error::Kafka("delivery was cancelled".into())),
        }
    }
    Ok(())
}

/// Sends the enriched record with the fact's headers; the key is the configured output
/// key or the fact's own.
fn produce(
    producer: &Producer,
    topic: &str,
    message: &OwnedMessage,
    key: Option<Vec<u8>>,
    payload: Vec<u8>,
) -> Result<DeliveryFuture> {
    let mut headers = OwnedHeaders::new();
    if let Some(original) = message.headers() {
        for h in original.iter() {
            headers = headers.insert(Header {
                key: h.key,
                value: h.value,
            });
        }
    }
    let key = key.or_else(|| message.key().map(<[u8]>::to_vec));
    let mut out: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic)
        .payload(payload.as_slice())
        .headers(headers);
    if let Some(k) = &key {
        out = out.key(k);
    }
    producer
        .send_result(out)
        .map_err(|(e, _)| Error::Kafka(format!("producing to {topic}: {e}")))
}

/// Marks a fact finished and stores the partition's committable offset when it moved.
/// A store can fail after a rebalance took the partition away; the new owner then
/// replays from the last commit (at least once), so that is not an error.
fn store(
    consumer: &Consumer,
    offsets: &mut OffsetTracker,
    pipeline: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> bool {
    let Some(done_through) = offsets.finish(topic, partition, offset) else {
        return false;
    };
    match consumer.store_offset(topic, partition, done_through) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(pipeline, topic, partition, error = %e, "offset not stored");
            false
        }
    }
}

/// Decodes and joins one fact: the records to produce (none when an INNER join dropped
/// it, several when a join matched several rows); `Err` is a bad record for the
/// dead-letter topic.
async fn enrich_one(
    record: &KafkaRecord<'_>,
    decoder: &FactDecoder,
    joins: &[Join],
    encoder: &OutputEncoder,
    config: &EnrichConfig,
    metrics: &PipelineMetrics,
) -> std::result::Result<Vec<Output>, String> {
    decoder.prepare(record).await.map_err(|e| e.to_string())?;
    let Some(fact) = decoder.decode(record).map_err(|e| e.to_string())? else {
        // A tombstone carries no fact.
        return Ok(Vec::new());
    };
    let mut facts = vec![fact];
    for (i, join) in joins.iter().enumerate() {
        let mut joined = Vec::with_capacity(facts.len());
        for fact in facts {
            let started = std::time::Instant::now();
            let matched = join
                .apply(fact, record.timestamp_ms, metrics, &mut joined)
                .await?;
            if let Some(m) = metrics.joins.get(i) {
                m.record(matched, started.elapsed());
            }
        }
        facts = joined;
    }
    facts
        .iter()
        .map(|fact| {
            let key = config.output.key.as_ref().and_then(|path| {
                lookup_path(fact, path).map(|v| match v {
                    Value::String(s) => s.clone().into_bytes(),
                    other => other.to_string().into_bytes(),
                })
            });
            let payload = encoder.encode(fact).map_err(|e| e.to_string())?;
            Ok((key, payload))
        })
        .collect()
}

/// Join fields per table, for the pipeline summary.
pub fn describe(joins: &[Join]) -> BTreeMap<String, usize> {
    joins
        .iter()
        .map(|j| (j.table_name.clone(), j.outputs.len()))
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn offsets_are_stored_only_below_the_oldest_unfinished_fact() {
        let mut t = OffsetTracker::default();
        for o in 10..14 {
            t.begin("facts", 0, o);
        }
        t.begin("facts", 1, 5);
        assert_eq!(t.finish("facts", 0, 11), None, "10 is still in flight");
        assert_eq!(t.finish("facts", 0, 12), None);
        assert_eq!(t.finish("facts", 0, 10), Some(12), "10, 11 and 12 are done");
        assert_eq!(
            t.finish("facts", 1, 5),
            Some(5),
            "partitions are independent"
        );
        assert_eq!(t.finish("facts", 0, 13), Some(13));
        assert_eq!(t.pending(), 0);
        assert_eq!(
            t.finish("other", 0, 1),
            None,
            "an unknown partition stores nothing"
        );
    }

    proptest! {
        /// Whatever order facts finish in, a stored offset never passes an unfinished
        /// fact, stored offsets only grow, and the last one covers everything.
        #[test]
        fn stored_offsets_never_pass_an_unfinished_fact(order in Just((0..40_i64).collect::<Vec<_>>()).prop_shuffle()) {
            let mut t = OffsetTracker::default();
            for o in 0..40 {
                t.begin("t", 0, o);
            }
            let mut finished = BTreeSet::new();
            let mut last = -1;
            for o in order {
                finished.insert(o);
                if let Some(stored) = t.finish("t", 0, o) {
                    prop_assert!(stored > last);
                    prop_assert!((0..=stored).all(|x| finished.contains(&x)));
                    last = stored;
                }
            }
            prop_assert_eq!(last, 39);
        }
    }
}
