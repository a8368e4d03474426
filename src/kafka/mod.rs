//! Kafka clients built from `[kafka]`: typed fields plus librdkafka properties passed
//! through verbatim (SASL/SSL work through them; their values are never logged).

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::FutureProducer;

use crate::config::KafkaConfig;
use crate::error::{Error, Result};

/// How long metadata requests wait for the broker.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(30);

fn base_config(kafka: &KafkaConfig) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &kafka.bootstrap_servers);
    config
}

fn apply_properties(config: &mut ClientConfig, kafka: &KafkaConfig) {
    // User properties win over lakejoin's defaults.
    for (k, v) in &kafka.properties {
        config.set(k, v);
    }
}

fn kafka_error(what: &str, e: rdkafka::error::KafkaError) -> Error {
    Error::Config(format!("{what}: {e}"))
}

/// A consumer that never commits on its own: positions are taken from table snapshots
/// (CDC) or committed after delivery (enrich).
pub fn consumer(kafka: &KafkaConfig, group_id: &str) -> Result<StreamConsumer> {
    let mut config = base_config(kafka);
    config
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false");
    apply_properties(&mut config, kafka);
    config
        .create()
        .map_err(|e| kafka_error("creating the Kafka consumer", e))
}

/// An idempotent producer (no duplicates from internal retries).
pub fn producer(kafka: &KafkaConfig) -> Result<FutureProducer> {
    let mut config = base_config(kafka);
    config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("compression.type", "lz4");
    apply_properties(&mut config, kafka);
    config
        .create()
        .map_err(|e| kafka_error("creating the Kafka producer", e))
}

/// Partition ids of `topic` (blocking metadata call; run it off the async workers).
pub fn partitions(consumer: &StreamConsumer, topic: &str) -> Result<Vec<i32>> {
    let metadata = consumer
        .fetch_metadata(Some(topic), METADATA_TIMEOUT)
        .map_err(|e| Error::Kafka(format!("fetching metadata of topic {topic}: {e}")))?;
    let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(Error::Config(format!("topic {topic} does not exist")));
    };
    if let Some(err) = t.error() {
        return Err(Error::Config(format!("topic {topic}: {err:?}")));
    }
    Ok(t.partitions().iter().map(|p| p.id()).collect())
}
