//! Producing to librdkafka's mock cluster, and reading back what a pipeline produced: a
//! topic from its start, until a condition on what arrived holds. The wait has a deadline
//! instead of a fixed sleep, and a timeout names the topic and shows what did arrive.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{FutureProducer, FutureRecord};

/// How long a test waits for a topic to reach what it expects.
const DEADLINE: Duration = Duration::from_secs(60);

/// A consumer of `topic` from its start, in a consumer group of its own.
pub fn reader(bootstrap: &str, topic: &str) -> StreamConsumer {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set(
            "group.id",
            format!("reader-{topic}-{}", uuid::Uuid::new_v4()),
        )
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("a mock-cluster consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    consumer
}

/// Receives records from `consumer` (reading `topic`), each as `decode` makes it, into
/// `out` until `done(out)` holds; panics after 60 s.
pub async fn read_until<T: Debug>(
    consumer: &StreamConsumer,
    topic: &str,
    out: &mut Vec<T>,
    decode: impl Fn(&BorrowedMessage<'_>) -> T,
    done: impl Fn(&[T]) -> bool,
) {
    let deadline = Instant::now() + DEADLINE;
    while !done(out) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{topic} did not get there in {DEADLINE:?}; {} records arrived: {out:#?}",
            out.len()
        );
        if let Ok(Ok(m)) = tokio::time::timeout(left, consumer.recv()).await {
            out.push(decode(&m));
        }
    }
}

/// A payload as JSON, or as a JSON string when it is not JSON; a missing one as null.
pub fn payload_json(m: &BorrowedMessage<'_>) -> serde_json::Value {
    use rdkafka::message::Message;
    m.payload()
        .map(|p| {
            serde_json::from_slice(p)
                .unwrap_or(serde_json::Value::String(String::from_utf8_lossy(p).into()))
        })
        .unwrap_or(serde_json::Value::Null)
}

/// Produces one record and waits until the broker has it.
pub async fn send(producer: &FutureProducer, topic: &str, key: &str, payload: &str) {
    producer
        .send(
            FutureRecord::to(topic).key(key).payload(payload),
            Duration::from_secs(10),
        )
        .await
        .expect("produce");
}
