//! The harness's own consume → produce loops: the plain passthrough (the machine's limit),
//! the Redis design (one pipelined HGET round trip per poll batch), and a hand-written
//! join against an in-process hash map (the floor of any enrichment of this data). All
//! consume every partition of the input from the beginning, produce with lakejoin's
//! producer settings (the passthrough also with lean ones), and return once `n` input
//! records were consumed and every output acknowledged.
//!
//! Both joins read an order with a derived deserializer and splice the customer's
//! pre-rendered columns in before its closing brace: the cheapest correct way to enrich
//! this JSON, so that neither baseline is slowed by work lakejoin avoids.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::data::CUSTOMER_SELECT;
use crate::kafka::{PRODUCER_SETTINGS, partitions};

use crate::redis::{Redis, Reply};

/// A producer's librdkafka settings.
pub type ProducerSettings<'a> = &'a [(&'a str, &'a str)];

/// Largest poll batch of the loops.
pub const MAX_BATCH: usize = 1000;

/// lakejoin's `fetch.queue.backoff.ms` (src/kafka/mod.rs): with librdkafka's default (1 s)
/// a consumer that is behind idles between prefetches, and the loops would be slower than
/// lakejoin's own consumer.
const FETCH_QUEUE_BACKOFF_MS: &str = "10";

pub fn consumer(bootstrap: &str, topic: &str) -> Result<BaseConsumer> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("bench-loop-{topic}"))
        .set("enable.auto.commit", "false")
        .set("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        .create()
        .context("creating the loop's consumer")?;
    let mut assignment = TopicPartitionList::new();
    for p in partitions(&consumer, topic)? {
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    Ok(consumer)
}

fn producer(bootstrap: &str, settings: ProducerSettings<'_>) -> Result<BaseProducer> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for &(k, v) in settings {
        config.set(k, v);
    }
    config.create().context("creating the loop's producer")
}

fn produce(producer: &BaseProducer, topic: &str, key: Option<&[u8]>, payload: &[u8]) -> Result<()> {
    let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).payload(payload);
    if let Some(key) = key {
        record = record.key(key);
    }
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((e, returned)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                record = returned;
                producer.poll(Duration::from_millis(1));
            }
            Err((e, _)) => bail!("producing to {topic}: {e}"),
        }
    }
}

/// Polls the next batch: one blocking poll, then whatever is already fetched (up to
/// `max`). Errors when nothing arrives for 60 s.
pub fn poll_batch<'c>(
    consumer: &'c BaseConsumer,
    max: usize,
    batch: &mut Vec<BorrowedMessage<'c>>,
) -> Result<()> {
    let started = Instant::now();
    loop {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                batch.push(m);
                break;
            }
            Some(Err(e)) => bail!("consuming: {e}"),
            None if started.elapsed() > Duration::from_secs(60) => {
                bail!("no input record for 60 s")
            }
            None => {}
        }
    }
    while batch.len() < max {
        match consumer.poll(Duration::ZERO) {
            Some(Ok(m)) => batch.push(m),
            Some(Err(e)) => bail!("consuming: {e}"),
            None => break,
        }
    }
    Ok(())
}

fn finish(producer: &BaseProducer) -> Result<()> {
    producer
        .flush(Duration::from_secs(120))
        .context("waiting for the outputs to be acknowledged")
}

/// Plain consume → produce of `n` records from `input` to `output`, payload and key as is,
/// with the producer `settings`.
pub fn passthrough(
    bootstrap: &str,
    input: &str,
    output: &str,
    n: u64,
    settings: ProducerSettings<'_>,
) -> Result<()> {
    let consumer = consumer(bootstrap, input)?;
    let producer = producer(bootstrap, settings)?;
    let mut consumed = 0u64;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while consumed < n {
        poll_batch(&consumer, MAX_BATCH, &mut batch)?;
        for m in batch.drain(..) {
            produce(&producer, output, m.key(), m.payload().unwrap_or_default())?;
            consumed += 1;
        }
        producer.poll(Duration::ZERO);
    }
    finish(&producer)
}

/// The Redis design: per poll batch, one pipelined `HGET customers <customer_id>` per
/// order (one round trip); the value is the customer's columns as the JSON text to splice
/// into the order (see [`JoinedText`]; nulls on a miss, as a LEFT join), produced keyed by
/// the order key. Each order is read as the hand-written join reads it, so the two differ
/// only in where the columns are kept.
pub fn redis_enrich(
    bootstrap: &str,
    redis: &mut Redis,
    input: &str,
    output: &str,
    n: u64,
) -> Result<()> {
    let consumer = consumer(bootstrap, input)?;
    let producer = producer(bootstrap, &PRODUCER_SETTINGS)?;
    let miss = rendered_columns(None)?;
    let mut consumed = 0u64;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut asked: Vec<bool> = Vec::with_capacity(MAX_BATCH);
    let mut id = String::new();
    let mut out = Vec::with_capacity(512);
    while consumed < n {
        poll_batch(&consumer, MAX_BATCH, &mut batch)?;
        asked.clear();
        for m in &batch {
            // An order without a customer id is produced with nulls, without a lookup.
            let customer = order_customer(m)?;
            if let Some(customer) = customer {
                id.clear();
                write!(id, "{customer}")?;
                redis.command(&[b"HGET", b"customers", id.as_bytes()])?;
            }
            asked.push(customer.is_some());
        }
        redis.flush()?;
        for (m, asked) in batch.drain(..).zip(&asked) {
            let reply = if *asked { Some(redis.reply()?) } else { None };
            let columns = match &reply {
                None | Some(Reply::Bulk(None)) => &miss[..],
                Some(Reply::Bulk(Some(bytes))) => &bytes[..],
                Some(other) => bail!("HGET answered {other:?}"),
            };
            splice(m.payload().unwrap_or_default(), columns, &mut out)?;
            produce(&producer, output, m.key(), &out)?;
            consumed += 1;
        }
        producer.poll(Duration::ZERO);
    }
    finish(&producer)
}

/// What both joins read of an order: its customer id. The derived deserializer still
/// reads, and so validates, every other field (as `IgnoredAny`).
#[derive(Deserialize)]
struct OrderKey {
    customer_id: Option<u64>,
}

/// The customer id of order `m`; an error if its payload is not a JSON object.
fn order_customer(m: &BorrowedMessage<'_>) -> Result<Option<u64>> {
    let order: OrderKey = serde_json::from_slice(m.payload().unwrap_or_default())
        .with_context(|| format!("the order at offset {} is not a JSON object", m.offset()))?;
    Ok(order.customer_id)
}

/// `out` = the order `payload` with `columns` (which end with the closing brace) in place
/// of its closing brace.
fn splice(payload: &[u8], columns: &[u8], out: &mut Vec<u8>) -> Result<()> {
    // A JSON object ends with its closing brace, then only whitespace.
    let end = payload
        .iter()
        .rposition(|b| *b == b'}')
        .context("an order without a closing brace")?;
    out.clear();
    out.extend_from_slice(&payload[..end]);
    out.extend_from_slice(columns);
    Ok(())
}

/// A customer's selected columns (`row`; `None`: nulls) as the JSON text both joins put
/// in place of an order's closing brace: `,"customer_name":…,"customer_segment":…}`.
fn rendered_columns(row: Option<&Map<String, Value>>) -> Result<Vec<u8>> {
    let mut text = Vec::with_capacity(160);
    for field in CUSTOMER_SELECT {
        text.extend_from_slice(b",\"customer_");
        text.extend_from_slice(field.as_bytes());
        text.extend_from_slice(b"\":");
        serde_json::to_writer(
            &mut text,
            row.and_then(|r| r.get(field)).unwrap_or(&Value::Null),
        )?;
    }
    text.push(b'}');
    Ok(text)
}

/// Customer `id`'s rendered columns, from `cached` (its selected columns as a JSON object).
pub fn customer_columns(cached: &str) -> Result<Vec<u8>> {
    let row: Map<String, Value> = serde_json::from_str(cached)?;
    rendered_columns(Some(&row))
}

/// The hand-written join's table: every customer's rendered columns by id, and the
/// all-null text of a miss.
pub struct JoinedText {
    by_customer: HashMap<u64, Box<[u8]>, foldhash::fast::RandomState>,
    miss: Box<[u8]>,
}

impl JoinedText {
    /// Renders customers 1..=`customers` from `cached` (their selected columns as a JSON
    /// object, as `data::customer_cached` gives them).
    pub fn load(customers: u64, cached: impl Fn(u64) -> String) -> Result<Self> {
        let mut by_customer = HashMap::with_capacity_and_hasher(
            usize::try_from(customers)?,
            foldhash::fast::RandomState::default(),
        );
        for id in 1..=customers {
            by_customer.insert(id, customer_columns(&cached(id))?.into_boxed_slice());
        }
        Ok(JoinedText {
            by_customer,
            miss: rendered_columns(None)?.into_boxed_slice(),
        })
    }
}

/// The fastest honest enrichment of this data, written by hand for it: per order, the
/// payload is validated and its `customer_id` read by a derived deserializer, the
/// customer's rendered columns are found in an in-process hash map (nulls on a miss, as
/// a LEFT join) and spliced in before the closing brace; produced with lakejoin's
/// producer settings, keyed by the order key. It knows the data (no field of an order
/// clashes with the joined names, the key is a number) and keeps no table, offsets, dead
/// letters or metrics: a floor under what a general pipeline can reach.
pub fn hand_written_enrich(
    bootstrap: &str,
    joined: &JoinedText,
    input: &str,
    output: &str,
    n: u64,
) -> Result<()> {
    let consumer = consumer(bootstrap, input)?;
    let producer = producer(bootstrap, &PRODUCER_SETTINGS)?;
    let mut consumed = 0u64;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut out = Vec::with_capacity(512);
    while consumed < n {
        poll_batch(&consumer, MAX_BATCH, &mut batch)?;
        for m in batch.drain(..) {
            let columns = order_customer(&m)?
                .and_then(|id| joined.by_customer.get(&id))
                .unwrap_or(&joined.miss);
            splice(m.payload().unwrap_or_default(), columns, &mut out)?;
            produce(&producer, output, m.key(), &out)?;
            consumed += 1;
        }
        producer.poll(Duration::ZERO);
    }
    finish(&producer)
}

/// Loads the customers into the hash `customers` (field = id, value = the selected
/// columns as the JSON text to splice, see [`customer_columns`]), 1,000 pipelined HSETs
/// per round trip.
pub fn redis_load(redis: &mut Redis, customers: u64, cached: impl Fn(u64) -> String) -> Result<()> {
    let mut id = 1;
    while id <= customers {
        let end = (id + 1000).min(customers + 1);
        for i in id..end {
            redis.command(&[
                b"HSET",
                b"customers",
                i.to_string().as_bytes(),
                &customer_columns(&cached(i))?,
            ])?;
        }
        redis.flush()?;
        for _ in id..end {
            match redis.reply()? {
                Reply::Integer(n) if n >= 0 => {}
                other => bail!("HSET answered {other:?}"),
            }
        }
        id = end;
    }
    Ok(())
}
