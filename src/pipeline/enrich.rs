//! Enrich pipelines: facts → lookup joins in order → encode → produce → commit offsets
//! after delivery.
//!
//! Delivery: at least once. A fact's offset is committed only after its enriched record
//! (or its dead letter) is acknowledged by the broker, and in input order per partition,
//! so a crash replays from the oldest unacknowledged fact.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::FuturesOrdered;
use futures::{FutureExt, StreamExt};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::dead_letter::DeadLetters;
use crate::codec::{FactDecoder, KafkaRecord, OutputEncoder, lookup_path};
use crate::config::{EnrichConfig, JoinConfig, JoinKind, KafkaConfig};
use crate::error::{Error, Result};
use crate::lookup::LookupTable;
use crate::observe::PipelineMetrics;
use crate::table::datum::{Datum, datum_from_json, datum_to_json};
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// Facts whose output is not yet acknowledged, per pipeline (bounds memory).
const MAX_IN_FLIGHT: usize = 10_000;

/// One configured join, resolved against its table.
pub struct Join {
    table_name: String,
    lookup: Arc<LookupTable>,
    kind: JoinKind,
    /// For each primary-key column, in key order: the fact field and the column type.
    key_fields: Vec<(String, DataType)>,
    /// Table column index → output field name.
    outputs: Vec<(usize, String, DataType)>,
    retry: Option<(Duration, u32)>,
}

/// What a join did to a fact.
#[derive(Debug, PartialEq, Eq)]
pub enum JoinOutcome {
    Matched,
    /// No row (or no key); LEFT joins fill nulls.
    Missed,
}

impl Join {
    pub fn new(
        config: &JoinConfig,
        schema: &TableSchema,
        lookup: Arc<LookupTable>,
    ) -> Result<Self> {
        let mut key_fields = Vec::new();
        for key in &schema.primary_keys {
            let Some((fact_field, _)) = config.on.iter().find(|(_, column)| *column == key) else {
                return Err(Error::Config(format!(
                    "join on {}: primary-key column `{key}` is not in `on`",
                    config.table
                )));
            };
            let ty = schema.field(key).map(|f| f.data_type).ok_or_else(|| {
                Error::Config(format!("join on {}: no column `{key}`", config.table))
            })?;
            key_fields.push((fact_field.clone(), ty));
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
        let mut outputs = Vec::new();
        for column in selected {
            let index = schema.field_index(column).ok_or_else(|| {
                Error::Config(format!("join on {}: no column `{column}`", config.table))
            })?;
            let name = config
                .rename
                .get(column)
                .cloned()
                .unwrap_or_else(|| format!("{}{column}", config.prefix));
            outputs.push((index, name, schema.fields[index].data_type));
        }
        Ok(Join {
            table_name: config.table.clone(),
            lookup,
            kind: config.kind,
            key_fields,
            outputs,
            retry: config.retry.as_ref().map(|r| (r.delay, r.max_attempts)),
        })
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

    /// Adds the joined columns to `fact` (nulls when there is no match).
    pub async fn apply(
        &self,
        fact: &mut Map<String, Value>,
        metrics: &PipelineMetrics,
    ) -> std::result::Result<JoinOutcome, String> {
        let row = match self.key(fact)? {
            None => None,
            Some(key) => {
                let mut row = self.lookup.get(&key).await.map_err(|e| e.to_string())?;
                if let Some((delay, attempts)) = self.retry {
                    let mut attempt = 1;
                    while row.is_none() && attempt < attempts {
                        PipelineMetrics::add(&metrics.join_retries, 1);
                        tokio::time::sleep(delay).await;
                        self.lookup.refresh().await.map_err(|e| e.to_string())?;
                        row = self.lookup.get(&key).await.map_err(|e| e.to_string())?;
                        attempt += 1;
                    }
                }
                row
            }
        };
        match &row {
            Some(_) => PipelineMetrics::add(&metrics.join_hits, 1),
            None => PipelineMetrics::add(&metrics.join_misses, 1),
        }
        for (index, name, ty) in &self.outputs {
            let value = row
                .as_ref()
                .and_then(|r| r.get(*index))
                .map_or(Value::Null, |d| datum_to_json(d, ty));
            fact.insert(name.clone(), value);
        }
        Ok(if row.is_some() {
            JoinOutcome::Matched
        } else {
            JoinOutcome::Missed
        })
    }

    pub fn kind(&self) -> JoinKind {
        self.kind
    }
}

/// Runs one enrich pipeline until `shutdown`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    config: EnrichConfig,
    kafka: KafkaConfig,
    joins: Vec<Join>,
    decoder: FactDecoder,
    encoder: OutputEncoder,
    producer: FutureProducer,
    dead_letters: DeadLetters,
    metrics: Arc<PipelineMetrics>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let consumer: StreamConsumer =
        crate::kafka::consumer(&kafka, &format!("{}-{}", kafka.group_id, config.name))?;
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
    let mut in_flight = FuturesOrdered::new();
    let mut commit_tick = tokio::time::interval(Duration::from_secs(1));
    let mut stored = false;
    loop {
        tokio::select! {
            message = consumer.recv(), if in_flight.len() < MAX_IN_FLIGHT => {
                let message = match message {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(pipeline = %config.name, error = %e, "Kafka consumer error");
                        continue;
                    }
                };
                PipelineMetrics::add(&metrics.records_in, 1);
                let position = (message.topic().to_string(), message.partition(), message.offset());
                let record = KafkaRecord {
                    topic: message.topic(),
                    partition: message.partition(),
                    offset: message.offset(),
                    timestamp_ms: message.timestamp().to_millis(),
                    key: message.key(),
                    payload: message.payload(),
                };
                match enrich_one(&record, &decoder, &joins, &encoder, &config, &metrics).await {
                    Ok(Some((key, payload))) => {
                        let mut headers = OwnedHeaders::new();
                        if let Some(original) = message.headers() {
                            for h in original.iter() {
                                headers = headers.insert(Header { key: h.key, value: h.value });
                            }
                        }
                        let key = key.or_else(|| message.key().map(<[u8]>::to_vec));
                        let mut out: FutureRecord<'_, [u8], [u8]> =
                            FutureRecord::to(&config.output.topic).payload(payload.as_slice()).headers(headers);
                        if let Some(k) = &key {
                            out = out.key(k);
                        }
                        let delivery = match producer.send_result(out) {
                            Ok(d) => d,
                            Err((e, _)) => return Err(Error::Kafka(format!("producing to {}: {e}", config.output.topic))),
                        };
                        let m = metrics.clone();
                        in_flight.push_back(async move {
                            match delivery.await {
                                Ok(Ok(_)) => { PipelineMetrics::add(&m.records_out, 1); Ok(position) }
                                Ok(Err((e, _))) => Err(Error::Kafka(format!("delivery failed: {e}"))),
                                Err(_) => Err(Error::Kafka("delivery was cancelled".into())),
                            }
                        }.boxed());
                    }
                    Ok(None) => {
                        PipelineMetrics::add(&metrics.dropped, 1);
                        in_flight.push_back(futures::future::ready(Ok(position)).boxed());
                    }
                    Err(reason) => {
                        PipelineMetrics::add(&metrics.dead_lettered, 1);
                        dead_letters.send(&config.name, &message, &reason).await?;
                        in_flight.push_back(futures::future::ready(Ok(position)).boxed());
                    }
                }
            }
            Some(done) = in_flight.next() => {
                let (topic, partition, offset) = done?;
                consumer
                    .store_offset(&topic, partition, offset)
                    .map_err(|e| Error::Kafka(format!("storing offset {topic}/{partition}@{offset}: {e}")))?;
                stored = true;
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
    // Drain what is in flight, then commit synchronously what was stored since the last
    // periodic commit.
    while let Some(done) = in_flight.next().await {
        let (topic, partition, offset) = done?;
        if consumer.store_offset(&topic, partition, offset).is_ok() {
            stored = true;
        }
    }
    if stored && let Err(e) = consumer.commit_consumer_state(CommitMode::Sync) {
        tracing::warn!(pipeline = %config.name, error = %e, "final offset commit failed");
    }
    Ok(())
}

/// Decodes and joins one fact; `Ok(None)` when an INNER join dropped it; `Err` is a bad
/// record for the dead-letter topic.
async fn enrich_one(
    record: &KafkaRecord<'_>,
    decoder: &FactDecoder,
    joins: &[Join],
    encoder: &OutputEncoder,
    config: &EnrichConfig,
    metrics: &PipelineMetrics,
) -> std::result::Result<Option<(Option<Vec<u8>>, Vec<u8>)>, String> {
    decoder.prepare(record).await.map_err(|e| e.to_string())?;
    let Some(mut fact) = decoder.decode(record).map_err(|e| e.to_string())? else {
        // A tombstone carries no fact.
        return Ok(None);
    };
    for (i, join) in joins.iter().enumerate() {
        let started = std::time::Instant::now();
        let outcome = join.apply(&mut fact, metrics).await?;
        if let Some(m) = metrics.joins.get(i) {
            m.record(outcome == JoinOutcome::Matched, started.elapsed());
        }
        if outcome == JoinOutcome::Missed && join.kind() == JoinKind::Inner {
            return Ok(None);
        }
    }
    let key = match &config.output.key {
        Some(path) => lookup_path(&fact, path).map(|v| match v {
            Value::String(s) => s.clone().into_bytes(),
            other => other.to_string().into_bytes(),
        }),
        None => None,
    };
    let payload = encoder.encode(&fact).map_err(|e| e.to_string())?;
    Ok(Some((key, payload)))
}

/// Join fields per table, for the pipeline summary.
pub fn describe(joins: &[Join]) -> BTreeMap<String, usize> {
    joins
        .iter()
        .map(|j| (j.table_name.clone(), j.outputs.len()))
        .collect()
}
