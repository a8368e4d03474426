//! The test's own Kafka clients: a producer whose every record is acknowledged by
//! `flush`, and a reader that accumulates a topic's records from its beginning without a
//! consumer group, so reading the output never disturbs the groups lakejoin commits.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::Value;

use super::{bootstrap, unique};

/// A producer whose every `send` is acknowledged before `flush` returns.
pub struct TestProducer {
    producer: ThreadedProducer<DefaultProducerContext>,
}

impl TestProducer {
    pub fn new() -> Self {
        Self::on(&bootstrap())
    }

    /// A producer to the broker at `bootstrap`.
    pub fn on(bootstrap: &str) -> Self {
        Self::configured(bootstrap, &[])
    }

    /// A producer with extra librdkafka properties (`compression.type`, …).
    pub fn with_properties(properties: &[(&str, &str)]) -> Self {
        Self::configured(&bootstrap(), properties)
    }

    fn configured(bootstrap: &str, properties: &[(&str, &str)]) -> Self {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5");
        for (key, value) in properties {
            config.set(*key, *value);
        }
        let producer = config.create().expect("producer");
        TestProducer { producer }
    }

    pub fn send(&self, topic: &str, key: &str, payload: &str) {
        self.enqueue(BaseRecord::to(topic).key(key).payload(payload.as_bytes()));
    }

    /// A record to one partition of `topic`.
    pub fn send_to(&self, topic: &str, partition: i32, key: &str, payload: &str) {
        self.enqueue(
            BaseRecord::to(topic)
                .partition(partition)
                .key(key)
                .payload(payload.as_bytes()),
        );
    }

    /// A record with a key and no value (a delete for `upsert-json`).
    pub fn send_tombstone(&self, topic: &str, key: &str) {
        self.enqueue(BaseRecord::to(topic).key(key));
    }

    fn enqueue(&self, mut record: BaseRecord<'_, str, [u8]>) {
        loop {
            match self.producer.send(record) {
                Ok(()) => return,
                Err((e, returned)) => {
                    // Only a full local queue is worth waiting for.
                    assert!(
                        matches!(
                            e.rdkafka_error_code(),
                            Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                        ),
                        "producing to {}: {e}",
                        returned.topic
                    );
                    record = returned;
                    self.producer.poll(Duration::from_millis(50));
                }
            }
        }
    }

    pub fn flush(&self) {
        self.producer
            .flush(Duration::from_secs(60))
            .expect("all produced records acknowledged");
    }
}

impl Default for TestProducer {
    fn default() -> Self {
        Self::new()
    }
}

/// One record read back from a topic.
#[derive(Clone, Debug)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    /// The payload parsed as JSON, or a JSON string of the raw text when it is not JSON.
    pub value: Value,
    /// The key and payload as they are (Avro is not text).
    pub raw_key: Option<Vec<u8>>,
    pub raw_value: Option<Vec<u8>>,
    pub headers: BTreeMap<String, String>,
}

/// Reads a topic from its beginning (all partitions, no consumer group), accumulating
/// records across calls.
pub struct TopicReader {
    topic: String,
    consumer: BaseConsumer,
    pub records: Vec<Record>,
}

impl TopicReader {
    pub fn new(topic: &str) -> Self {
        Self::on(&bootstrap(), topic)
    }

    /// A reader of `topic` on the broker at `bootstrap`.
    pub fn on(bootstrap: &str, topic: &str) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", unique("reader"))
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(30))
            .expect("topic metadata");
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map(|t| t.partitions().len())
            .unwrap_or(0);
        assert!(partitions > 0, "topic {topic} has no partitions");
        let mut assignment = TopicPartitionList::new();
        for partition in 0..partitions as i32 {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .expect("assignment");
        }
        consumer.assign(&assignment).expect("assign");
        TopicReader {
            topic: topic.to_owned(),
            consumer,
            records: Vec::new(),
        }
    }

    /// Polls until `done(records so far)` holds; panics after 90 s with what arrived.
    pub fn read_until(&mut self, what: &str, mut done: impl FnMut(&[Record]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !done(&self.records) {
            assert!(
                Instant::now() < deadline,
                "timed out reading {} until {what}; {} records arrived, the last ones: {:#?}",
                self.topic,
                self.records.len(),
                &self.records[self.records.len().saturating_sub(5)..]
            );
            self.poll(Duration::from_millis(200));
        }
    }

    /// Reads until at least `n` records arrived.
    pub fn read_at_least(&mut self, n: usize) -> &[Record] {
        self.read_until(&format!("{n} records arrived"), |r| r.len() >= n);
        &self.records
    }

    /// Everything that arrives within `quiet` of the last record (to check nothing more
    /// comes after the expected records).
    pub fn drain(&mut self, quiet: Duration) -> &[Record] {
        while self.poll(quiet) {}
        &self.records
    }

    /// Reads what arrives within `timeout`.
    pub fn poll_for(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.poll(deadline.saturating_duration_since(Instant::now())) {}
    }

    /// One poll; whether a record arrived.
    fn poll(&mut self, timeout: Duration) -> bool {
        match self.consumer.poll(timeout) {
            None => false,
            Some(Err(e)) => panic!("reading {}: {e}", self.topic),
            Some(Ok(message)) => {
                let value = message
                    .payload()
                    .map(|p| {
                        serde_json::from_slice(p).unwrap_or_else(|_| {
                            Value::String(String::from_utf8_lossy(p).into_owned())
                        })
                    })
                    .unwrap_or(Value::Null);
                let headers = message
                    .headers()
                    .map(|headers| {
                        headers
                            .iter()
                            .map(|h| {
                                (
                                    h.key.to_owned(),
                                    h.value
                                        .map(|v| String::from_utf8_lossy(v).into_owned())
                                        .unwrap_or_default(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.records.push(Record {
                    partition: message.partition(),
                    offset: message.offset(),
                    key: message
                        .key()
                        .map(|k| String::from_utf8_lossy(k).into_owned()),
                    value,
                    raw_key: message.key().map(<[u8]>::to_vec),
                    raw_value: message.payload().map(<[u8]>::to_vec),
                    headers,
                });
                true
            }
        }
    }
}
