//! The harness's own consume → produce loops: the plain passthrough (the machine's limit)
//! and the Redis design (one pipelined HGET round trip per poll batch). Both consume
//! every partition of the input from the beginning, produce with lakejoin's producer
//! settings (the passthrough also with lean ones), and return once `n` input records were consumed and every output
//! acknowledged.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Map, Value};

use crate::data::CUSTOMER_SELECT;
use crate::kafka::{PRODUCER_SETTINGS, partitions};

/// A producer's librdkafka settings.
pub type ProducerSettings<'a> = &'a [(&'a str, &'a str)];
use crate::redis::{Redis, Reply};

/// Largest poll batch of the Redis design.
const MAX_BATCH: usize = 1000;

/// lakejoin's `fetch.queue.backoff.ms` (src/kafka/mod.rs): with librdkafka's default (1 s)
/// a consumer that is behind idles between prefetches, and the loops would be slower than
/// lakejoin's own consumer.
const FETCH_QUEUE_BACKOFF_MS: &str = "10";

fn consumer(bootstrap: &str, topic: &str) -> Result<BaseConsumer> {
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
fn poll_batch<'c>(
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
/// order (one round trip), the customer's fields merged into the order as
/// `customer_<field>` (nulls on a miss, as a LEFT join), produced keyed by the order key.
pub fn redis_enrich(
    bootstrap: &str,
    redis: &mut Redis,
    input: &str,
    output: &str,
    n: u64,
) -> Result<()> {
    let consumer = consumer(bootstrap, input)?;
    let producer = producer(bootstrap, &PRODUCER_SETTINGS)?;
    let mut consumed = 0u64;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut facts: Vec<Option<Map<String, Value>>> = Vec::with_capacity(MAX_BATCH);
    let mut id = String::new();
    while consumed < n {
        poll_batch(&consumer, MAX_BATCH, &mut batch)?;
        facts.clear();
        let mut queued = 0;
        for m in &batch {
            let fact =
                serde_json::from_slice::<Map<String, Value>>(m.payload().unwrap_or_default()).ok();
            // A fact without a usable key is produced without a lookup.
            if let Some(customer) = fact.as_ref().and_then(|f| f.get("customer_id")) {
                id.clear();
                match customer {
                    Value::String(s) => id.push_str(s),
                    other => id.push_str(&other.to_string()),
                }
                redis.command(&[b"HGET", b"customers", id.as_bytes()])?;
                queued += 1;
            }
            facts.push(fact);
        }
        redis.flush()?;
        let mut replies = Vec::with_capacity(queued);
        for _ in 0..queued {
            replies.push(redis.reply()?);
        }
        let mut replies = replies.into_iter();
        for (m, fact) in batch.iter().zip(facts.drain(..)) {
            let payload = match fact {
                None => m.payload().unwrap_or_default().to_vec(),
                Some(mut fact) => {
                    if fact.contains_key("customer_id") {
                        let customer = match replies.next() {
                            Some(Reply::Bulk(Some(bytes))) => Some(
                                serde_json::from_slice::<Map<String, Value>>(&bytes)
                                    .context("a customer in redis is not a JSON object")?,
                            ),
                            Some(Reply::Bulk(None)) => None,
                            other => bail!("HGET answered {other:?}"),
                        };
                        for field in CUSTOMER_SELECT {
                            let value = customer
                                .as_ref()
                                .and_then(|c| c.get(field).cloned())
                                .unwrap_or(Value::Null);
                            fact.insert(format!("customer_{field}"), value);
                        }
                    }
                    serde_json::to_vec(&fact)?
                }
            };
            produce(&producer, output, m.key(), &payload)?;
            consumed += 1;
        }
        batch.clear();
        producer.poll(Duration::ZERO);
    }
    finish(&producer)
}

/// Loads the customers into the hash `customers` (field = id, value = the selected
/// columns as JSON), 1,000 pipelined HSETs per round trip.
pub fn redis_load(redis: &mut Redis, customers: u64, value: impl Fn(u64) -> String) -> Result<()> {
    let mut id = 1;
    while id <= customers {
        let end = (id + 1000).min(customers + 1);
        for i in id..end {
            redis.command(&[
                b"HSET",
                b"customers",
                i.to_string().as_bytes(),
                value(i).as_bytes(),
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
