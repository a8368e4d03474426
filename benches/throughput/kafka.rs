//! The broker: Apache Kafka started by the harness (as `scripts/test.sh` starts it) unless
//! `KAFKA_BOOTSTRAP` names one; topics, bulk producing, and reading an output topic back
//! for its record timestamps. Cases count the records they read back.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, Timestamp};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::util::wait_for;

/// The producer settings lakejoin uses for its output (src/kafka/mod.rs), used by the
/// harness's own loops too so every case produces the same way.
pub const PRODUCER_SETTINGS: [(&str, &str); 6] = [
    ("enable.idempotence", "true"),
    ("message.timeout.ms", "0"),
    ("acks", "all"),
    ("linger.ms", "5"),
    ("compression.type", "lz4"),
    ("partitioner", "murmur2_random"),
];

/// The lean producer of the fastest passthrough: librdkafka's defaults (no idempotence)
/// with a 5 ms linger and no compression.
pub const LEAN_PRODUCER_SETTINGS: [(&str, &str); 2] =
    [("linger.ms", "5"), ("compression.type", "none")];

/// An Apache Kafka broker of the harness's own (`scripts/kafka/broker.sh`, as
/// `scripts/test.sh` starts one), stopped when dropped.
pub struct KafkaBroker {
    dir: PathBuf,
}

impl KafkaBroker {
    /// The broker's JVM (`scripts/kafka/broker.sh` writes its pid), for its CPU time.
    pub fn pid(&self) -> Result<u32> {
        let path = self.dir.join("pid");
        std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .trim()
            .parse()
            .with_context(|| format!("{} holds no pid", path.display()))
    }

    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka/broker.sh")
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Self::script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// The broker to use: `KAFKA_BOOTSTRAP`, or an Apache Kafka started here in `dir` (returned
/// to keep alive).
pub fn broker(dir: &Path) -> Result<(String, Option<KafkaBroker>)> {
    if let Ok(bootstrap) = std::env::var("KAFKA_BOOTSTRAP") {
        return Ok((bootstrap, None));
    }
    let _ = std::fs::remove_dir_all(dir);
    let status = Command::new("bash")
        .arg(KafkaBroker::script())
        .arg("start")
        .arg(dir)
        .stdin(Stdio::null())
        .status()
        .context("running scripts/kafka/broker.sh")?;
    let broker = KafkaBroker {
        dir: dir.to_owned(),
    };
    if !status.success() {
        bail!(
            "scripts/kafka/broker.sh start {} failed; see {}/logs/broker.log",
            dir.display(),
            dir.display()
        );
    }
    let env = std::fs::read_to_string(dir.join("broker.env"))
        .with_context(|| format!("reading {}/broker.env", dir.display()))?;
    let bootstrap = env
        .lines()
        .find_map(|l| l.strip_prefix("export KAFKA_BOOTSTRAP="))
        .ok_or_else(|| anyhow!("no KAFKA_BOOTSTRAP in {}/broker.env", dir.display()))?
        .to_owned();
    Ok((bootstrap, Some(broker)))
}

/// Creates the topics and waits until their metadata shows every partition.
pub fn create_topics(bootstrap: &str, topics: &[(&str, i32)]) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let new_topics: Vec<NewTopic> = topics
        .iter()
        .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1)))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results = runtime
        .block_on(admin.create_topics(
            &new_topics,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .with_context(|| format!("creating topics on {bootstrap}"))?;
    for result in results {
        if let Err((topic, code)) = result {
            bail!("creating topic {topic} on {bootstrap}: {code:?}");
        }
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    for (name, partitions) in topics {
        wait_for(
            &format!("topic {name} with {partitions} partitions"),
            Duration::from_secs(60),
            || {
                Ok(consumer
                    .fetch_metadata(Some(name), Duration::from_secs(5))
                    .ok()
                    .and_then(|m| {
                        m.topics().iter().find(|t| t.name() == *name).map(|t| {
                            t.error().is_none() && t.partitions().len() == *partitions as usize
                        })
                    })
                    .unwrap_or(false))
            },
        )?;
    }
    Ok(())
}

/// A batching producer for loading the data; [`BulkProducer::flush`] waits for every ack.
pub struct BulkProducer {
    producer: ThreadedProducer<DefaultProducerContext>,
}

impl BulkProducer {
    pub fn new(bootstrap: &str) -> Result<Self> {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "20")
            .set("batch.size", "1000000")
            .set("compression.type", "lz4")
            .create()
            .context("creating the loading producer")?;
        Ok(BulkProducer { producer })
    }

    pub fn send(&self, topic: &str, key: &str, value: &str) -> Result<()> {
        let mut record = BaseRecord::to(topic).key(key).payload(value);
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((e, returned))
                    if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) =>
                {
                    record = returned;
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => bail!("producing to {topic}: {e}"),
            }
        }
    }

    pub fn flush(&self) -> Result<()> {
        self.producer
            .flush(Duration::from_secs(300))
            .context("waiting for the loaded records to be acknowledged")
    }
}

/// Partition ids of `topic`.
/// Counts the records in a topic the harness created empty (the sum of its partitions'
/// high watermarks), for cases whose process has no metrics endpoint.
pub struct TopicCount {
    consumer: BaseConsumer,
    topic: String,
    partitions: Vec<i32>,
}

impl TopicCount {
    pub fn new(bootstrap: &str, topic: &str) -> Result<Self> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()?;
        let partitions = partitions(&consumer, topic)?;
        Ok(TopicCount {
            consumer,
            topic: topic.to_owned(),
            partitions,
        })
    }

    pub fn records(&self) -> Result<u64> {
        let mut total = 0;
        for &p in &self.partitions {
            let (_, high) = self
                .consumer
                .fetch_watermarks(&self.topic, p, Duration::from_secs(10))
                .with_context(|| format!("watermarks of {}/{p}", self.topic))?;
            total += high.max(0) as u64;
        }
        Ok(total)
    }
}

pub fn partitions(consumer: &BaseConsumer, topic: &str) -> Result<Vec<i32>> {
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .with_context(|| format!("metadata of {topic}"))?;
    let t = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or_else(|| anyhow!("topic {topic} does not exist"))?;
    if t.partitions().is_empty() {
        bail!("topic {topic} has no partitions");
    }
    Ok(t.partitions().iter().map(|p| p.id()).collect())
}

/// What an output topic holds: record count, the first and last record timestamps, and
/// how many records `check` accepted.
#[derive(Debug)]
pub struct OutputScan {
    pub records: u64,
    pub first_ms: i64,
    pub last_ms: i64,
    pub accepted: u64,
    pub timestamp_kind: &'static str,
}

impl OutputScan {
    /// Records per second between the first and the last output timestamp.
    pub fn rate(&self) -> Result<f64> {
        let span = self.last_ms - self.first_ms;
        if span <= 0 {
            bail!(
                "{} output records all carry the same millisecond timestamp: too few records \
                 to measure (raise ORDERS)",
                self.records
            );
        }
        Ok(self.records as f64 * 1000.0 / span as f64)
    }
}

/// Reads `topic` from the beginning until `expected` records arrived (an error when
/// nothing arrives for 60 s), then checks for a further second that no more follow;
/// passes each payload to `check`.
pub fn scan_output(
    bootstrap: &str,
    topic: &str,
    expected: u64,
    mut check: impl FnMut(&[u8]) -> bool,
) -> Result<OutputScan> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("bench-reader-{topic}"))
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "10485760")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for p in partitions(&consumer, topic)? {
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut scan = OutputScan {
        records: 0,
        first_ms: i64::MAX,
        last_ms: i64::MIN,
        accepted: 0,
        timestamp_kind: "none",
    };
    let mut last_progress = Instant::now();
    loop {
        let timeout = if scan.records < expected { 500 } else { 1000 };
        match consumer.poll(Duration::from_millis(timeout)) {
            None if scan.records >= expected => break,
            None => {
                if last_progress.elapsed() > Duration::from_secs(60) {
                    bail!(
                        "reading {topic}: nothing arrived for 60 s after {} of {expected} records",
                        scan.records
                    );
                }
            }
            Some(Err(e)) => bail!("reading {topic}: {e}"),
            Some(Ok(message)) => {
                last_progress = Instant::now();
                scan.records += 1;
                let (kind, ms) = match message.timestamp() {
                    Timestamp::CreateTime(ms) => ("CreateTime", ms),
                    Timestamp::LogAppendTime(ms) => ("LogAppendTime", ms),
                    Timestamp::NotAvailable => bail!("{topic}: a record without a timestamp"),
                };
                scan.timestamp_kind = kind;
                scan.first_ms = scan.first_ms.min(ms);
                scan.last_ms = scan.last_ms.max(ms);
                if check(message.payload().unwrap_or_default()) {
                    scan.accepted += 1;
                }
            }
        }
    }
    Ok(scan)
}
