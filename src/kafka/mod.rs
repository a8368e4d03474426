//! Kafka clients built from `[kafka]`: typed fields plus librdkafka properties passed
//! through verbatim (SASL/SSL work through them; their values are never logged).
//!
//! An unreachable broker is waited for, never fatal: librdkafka reconnects with backoff,
//! produced records wait for delivery without a deadline, the CDC assignment retries
//! ([`partitions_with_retry`]), and [`watch`] logs when the broker goes away and comes back.

mod client_log;
mod consumed;
mod produce;
pub(crate) mod watch;

pub(crate) use client_log::ClientLog;
pub(crate) use consumed::Consumed;
pub(crate) use produce::{Deliveries, Failure, OutRecord, Producer};

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::message::{Header, Headers as _, Message, OwnedHeaders};

use crate::config::{KafkaConfig, OffsetOutOfRange, StartFrom};
use crate::error::{Error, Result};
use crate::secret::Redactor;

/// A lakejoin consumer: its librdkafka logs go through [`ClientLog`].
pub(crate) type Consumer = StreamConsumer<ClientLog>;

/// How long one attempt of a retried request waits for the broker.
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// First and longest wait between attempts of [`partitions_with_retry`].
pub(crate) const RETRY_BACKOFF: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(30));

/// A consumed record's headers, for a record produced from it (an enriched record, a
/// dead letter): tracing and lineage headers survive the pipeline.
pub(crate) fn copied_headers(message: &impl Message) -> OwnedHeaders {
    let mut headers = OwnedHeaders::new();
    if let Some(original) = message.headers() {
        for h in original.iter() {
            headers = headers.insert(Header {
                key: h.key,
                value: h.value,
            });
        }
    }
    headers
}

fn base_config(kafka: &KafkaConfig) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &kafka.bootstrap_servers);
    // rdkafka derives the level from the `log` crate, which lakejoin does not use (it would
    // pass errors only); [`ClientLog`] decides what each line is worth.
    config.set_log_level(RDKafkaLogLevel::Info);
    config
}

fn apply_properties(config: &mut ClientConfig, kafka: &KafkaConfig) {
    // User properties win over lakejoin's defaults.
    for (k, v) in &kafka.properties {
        config.set(k, v);
    }
}

/// librdkafka quotes a property's value when it rejects it: secret values are masked.
fn kafka_error(kafka: &KafkaConfig, what: &str, e: rdkafka::error::KafkaError) -> Error {
    let redactor = Redactor::from_pairs(&kafka.properties);
    Error::Config(redactor.redact(&format!("{what}: {e}")))
}

/// librdkafka's `auto.offset.reset`: where a partition without a valid position starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OffsetReset {
    Earliest,
    Latest,
    /// Deliver an `AutoOffsetReset` error instead of moving (Kafka's `none`).
    Error,
}

impl From<StartFrom> for OffsetReset {
    fn from(start_from: StartFrom) -> Self {
        match start_from {
            StartFrom::Earliest => OffsetReset::Earliest,
            StartFrom::Latest => OffsetReset::Latest,
        }
    }
}

impl From<OffsetOutOfRange> for OffsetReset {
    fn from(choice: OffsetOutOfRange) -> Self {
        match choice {
            OffsetOutOfRange::Fail => OffsetReset::Error,
            OffsetOutOfRange::Earliest => OffsetReset::Earliest,
            OffsetOutOfRange::Latest => OffsetReset::Latest,
        }
    }
}

/// lakejoin's `fetch.queue.backoff.ms` (see [`consumer`]). The benchmark's own loops
/// (benches/throughput/loops.rs) set the same, so that the passthrough lakejoin is
/// measured against is not slowed by librdkafka's default.
const FETCH_QUEUE_BACKOFF_MS: &str = "10";

/// lakejoin's `queued.max.messages.kbytes` and `queued.min.messages` (see [`consumer`]).
const QUEUED_MAX_KBYTES: &str = "16384";
const QUEUED_MIN_MESSAGES: &str = "10000";

/// A consumer that never commits on its own: positions are taken from table snapshots
/// (CDC) or committed after delivery (enrich). `static_member` is the
/// `group.instance.id` of a consumer that subscribes (KIP-345): a restart under the same id
/// takes its partitions back without a rebalance.
pub(crate) fn consumer(
    kafka: &KafkaConfig,
    group_id: &str,
    static_member: Option<&str>,
    reset: OffsetReset,
    pipeline: &str,
) -> Result<Consumer> {
    consumer_config(kafka, group_id, static_member, reset)
        .create_with_context(ClientLog::new(pipeline, kafka))
        .map_err(|e| kafka_error(kafka, "creating the Kafka consumer", e))
}

/// The librdkafka configuration of [`consumer`]: lakejoin's settings, then the user's.
fn consumer_config(
    kafka: &KafkaConfig,
    group_id: &str,
    static_member: Option<&str>,
    reset: OffsetReset,
) -> ClientConfig {
    let mut config = base_config(kafka);
    if let Some(id) = static_member {
        config.set("group.instance.id", id);
    }
    // Where a partition without a valid position starts: a new group's partitions, and
    // a position retention has deleted meanwhile.
    let reset = match reset {
        OffsetReset::Earliest => "earliest",
        OffsetReset::Latest => "latest",
        OffsetReset::Error => "error",
    };
    config
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", reset)
        .set("enable.partition.eof", "false")
        // librdkafka postpones a partition's next fetch by this much whenever its prefetch
        // queue is over its thresholds. Its default (1 s) is longer than a pipeline that is
        // behind takes to drain the queue, so the consumer sat idle for ~0.5 s of every
        // second: CDC ingest ran at 142k rows/s with it and 253k with 10 ms.
        .set("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
        // The prefetch queue's bounds. librdkafka's (64 MiB, and at least 100,000 records
        // per partition) held 35-50 MiB more at peak than these in the benchmark's joins,
        // a sixth of the process, for no throughput: 16 MiB is still tens of thousands of
        // records, hundreds of poll batches, ahead of the pipeline.
        .set("queued.max.messages.kbytes", QUEUED_MAX_KBYTES)
        .set("queued.min.messages", QUEUED_MIN_MESSAGES);
    apply_properties(&mut config, kafka);
    config
}

/// An idempotent producer (no duplicates from internal retries). Records wait for
/// delivery as long as the broker is away (`message.timeout.ms = 0`): offsets are only
/// committed after delivery, so a long outage stalls the pipeline instead of failing it.
///
/// Also returns a handle on the producer's [`ClientLog`], for its faults.
pub(crate) fn producer(kafka: &KafkaConfig) -> Result<(Producer, ClientLog)> {
    let mut config = base_config(kafka);
    config
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "0")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("compression.type", "lz4")
        // The Java client's partitioner (murmur2 of the key), not librdkafka's CRC32: a
        // keyed output record lands where a Java producer puts the same key, so Kafka
        // Streams, Flink or ksqlDB can join the output with other topics partition by
        // partition (integration-tests/kafka_partitioning.rs).
        .set("partitioner", "murmur2_random");
    apply_properties(&mut config, kafka);
    let log = ClientLog::new("producer", kafka);
    let producer = Producer::create(&config, log.clone())
        .map_err(|e| kafka_error(kafka, "creating the Kafka producer", e))?;
    Ok((producer, log))
}

/// Names of every topic in the cluster that has no metadata error (blocking metadata
/// call; run it off the async workers).
pub(crate) fn topic_names(consumer: &Consumer, timeout: Duration) -> Result<Vec<String>> {
    let metadata = consumer
        .fetch_metadata(None, timeout)
        .map_err(|e| Error::kafka("fetching the cluster's topics", e))?;
    Ok(metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| t.name().to_string())
        .collect())
}

/// Partition ids of `topic` (blocking metadata call; run it off the async workers).
pub(crate) fn partitions(consumer: &Consumer, topic: &str, timeout: Duration) -> Result<Vec<i32>> {
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| Error::kafka(format!("fetching metadata of topic {topic}"), e))?;
    let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(Error::Config(format!("topic {topic} does not exist")));
    };
    if let Some(err) = t.error() {
        return Err(Error::Config(format!("topic {topic}: {err:?}")));
    }
    Ok(t.partitions().iter().map(|p| p.id()).collect())
}

/// Partition ids of `topic`, retried with backoff while the broker is unreachable or the
/// topic does not exist yet (one log line per attempt says which); `None` when `stop`
/// fires first.
pub(crate) async fn partitions_with_retry(
    consumer: &std::sync::Arc<Consumer>,
    topic: &str,
    pipeline: &str,
    bootstrap: &str,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Result<Option<Vec<i32>>> {
    let mut backoff = RETRY_BACKOFF.0;
    let mut failed = false;
    loop {
        let c = consumer.clone();
        let t = topic.to_string();
        let attempt = tokio::task::spawn_blocking(move || partitions(&c, &t, ATTEMPT_TIMEOUT));
        let result = tokio::select! {
            r = attempt => r.map_err(|e| Error::task("metadata task", e))?,
            _ = stop.changed() => return Ok(None),
        };
        let error = match result {
            Ok(partitions) if !partitions.is_empty() => {
                if failed {
                    tracing::info!(
                        pipeline,
                        topic,
                        bootstrap,
                        "Kafka topic metadata available again; assigning partitions"
                    );
                }
                return Ok(Some(partitions));
            }
            Ok(_) => Error::Config(format!("topic {topic} has no partitions")),
            Err(e) => e,
        };
        failed = true;
        let retry_in = format!("{}s", backoff.as_secs());
        match error {
            Error::Kafka { .. } => tracing::warn!(
                pipeline, topic, bootstrap, error = %error, retry_in,
                "Kafka broker unavailable: cannot read topic metadata; retrying"
            ),
            _ => tracing::warn!(
                pipeline, topic, bootstrap, error = %error, retry_in,
                "Kafka topic not available (yet); retrying"
            ),
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return Ok(None),
        }
        backoff = (backoff * 2).min(RETRY_BACKOFF.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kafka_with(properties: &[(&str, &str)]) -> KafkaConfig {
        KafkaConfig {
            bootstrap_servers: "localhost:9092".into(),
            group_id: "g".into(),
            group_instance_id: None,
            properties: properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[tokio::test]
    async fn the_consumer_bounds_its_prefetch_queue_unless_the_user_says_otherwise() {
        let config = consumer_config(&kafka_with(&[]), "g", None, OffsetReset::Earliest);
        assert_eq!(
            config.get("queued.max.messages.kbytes"),
            Some(QUEUED_MAX_KBYTES)
        );
        assert_eq!(config.get("queued.min.messages"), Some(QUEUED_MIN_MESSAGES));
        assert_eq!(
            config.get("fetch.queue.backoff.ms"),
            Some(FETCH_QUEUE_BACKOFF_MS)
        );
        assert_eq!(config.get("enable.auto.commit"), Some("false"));

        let user = kafka_with(&[
            ("queued.max.messages.kbytes", "65536"),
            ("queued.min.messages", "100000"),
        ]);
        let config = consumer_config(&user, "g", None, OffsetReset::Earliest);
        assert_eq!(config.get("queued.max.messages.kbytes"), Some("65536"));
        assert_eq!(config.get("queued.min.messages"), Some("100000"));
        // librdkafka accepts the bounds: a consumer is created with them.
        assert!(consumer(&kafka_with(&[]), "g", None, OffsetReset::Earliest, "test").is_ok());
    }

    #[test]
    fn client_errors_mask_secret_property_values() {
        let kafka = KafkaConfig {
            bootstrap_servers: "localhost:9092".into(),
            group_id: "g".into(),
            group_instance_id: None,
            properties: [
                ("sasl.password".to_string(), "hunter2-pass".to_string()),
                ("sasl.mechanism".to_string(), "PLAIN".to_string()),
            ]
            .into(),
        };
        let rejected = rdkafka::error::KafkaError::ClientCreation(
            "Invalid value \"hunter2-pass\" for configuration property \"sasl.password\"".into(),
        );
        let message = kafka_error(&kafka, "creating the Kafka consumer", rejected).to_string();
        assert!(!message.contains("hunter2-pass"), "{message}");
        assert!(message.contains("sasl.password"), "{message}");
        // A real client: a secret value librdkafka rejects stays masked too.
        let mut bad = kafka.clone();
        bad.properties
            .insert("sasl.mechanism".into(), "hunter2-mechanism".into());
        bad.properties.insert(
            "sasl.oauthbearer.client.secret".into(),
            "hunter2-mechanism".into(),
        );
        let Err(err) = consumer(&bad, "g", None, OffsetReset::Earliest, "test") else {
            panic!("an unknown SASL mechanism is rejected")
        };
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
