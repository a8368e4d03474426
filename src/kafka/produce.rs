//! Producing records and learning of their delivery a group at a time.
//!
//! Why not rdkafka's `FutureProducer`: it makes a channel and a future per record, and each
//! delivery wakes that future from librdkafka's polling thread, so every record costs
//! allocations and a cross-thread wake-up. A pipeline only needs to know when a group of
//! records (a poll batch of facts' outputs) has been acknowledged, and which of them
//! failed. So records are sent through a [`ThreadedProducer`], whose own thread serves the
//! delivery callbacks, and counted down in a [`Deliveries`] group that wakes its one
//! waiter once, when its last record is acknowledged. A record that succeeds costs nothing
//! after it is sent (librdkafka copied it); a failed one comes back as an owned copy with
//! its error, to be sent again or dead-lettered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};
use tokio::sync::Notify;

use super::ClientLog;

/// How long a send waits before trying again while librdkafka's queue is full.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(5);

/// A lakejoin producer (cheap to clone): its librdkafka logs go through [`ClientLog`],
/// its deliveries to the [`Deliveries`] group each record was sent in.
#[derive(Clone)]
pub(crate) struct Producer(Arc<ThreadedProducer<ClientLog>>);

/// A record to produce.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutRecord<'a> {
    pub(crate) topic: &'a str,
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) payload: Option<&'a [u8]>,
}

/// A record of a group that was not delivered.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The tag it was sent with (which fact it belongs to, say).
    pub(crate) tag: u32,
    pub(crate) error: KafkaError,
    /// The record as sent: topic, key, payload and headers.
    pub(crate) record: OwnedMessage,
}

/// Records whose deliveries are awaited together: [`Producer::send`] adds to it,
/// [`Deliveries::all_delivered`] waits for every one and gives the failures.
#[derive(Debug)]
pub(crate) struct Deliveries {
    /// Records sent and not yet delivered, plus one until the group is awaited.
    pending: AtomicUsize,
    failures: Mutex<Vec<Failure>>,
    done: Notify,
}

/// What each record carries to its delivery callback.
pub(crate) struct Tracked {
    group: Arc<Deliveries>,
    tag: u32,
}

impl Deliveries {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Deliveries {
            pending: AtomicUsize::new(1),
            failures: Mutex::new(Vec::new()),
            done: Notify::new(),
        })
    }

    /// One record of the group is done with, delivered or not.
    fn finished(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            // A permit: the waiter returns at once, whether it waits already or not yet.
            self.done.notify_one();
        }
    }

    /// Waits until every record sent in the group is delivered or failed, and returns
    /// the failures (in no particular order). No record may be sent in it afterwards.
    pub(crate) async fn all_delivered(self: Arc<Self>) -> Vec<Failure> {
        if self.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
            self.done.notified().await;
        }
        std::mem::take(&mut *self.failures.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl ProducerContext for ClientLog {
    type DeliveryOpaque = Box<Tracked>;

    fn delivery(&self, result: &DeliveryResult<'_>, tracked: Box<Tracked>) {
        if let Err((error, message)) = result {
            tracked
                .group
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Failure {
                    tag: tracked.tag,
                    error: error.clone(),
                    record: message.detach(),
                });
        }
        tracked.group.finished();
    }
}

impl Producer {
    pub(crate) fn create(config: &ClientConfig, log: ClientLog) -> KafkaResult<Self> {
        Ok(Producer(Arc::new(config.create_with_context(log)?)))
    }

    /// Sends `record` as part of `group`, tagged `tag`; waits while librdkafka's queue is
    /// full. `Err`: librdkafka refused the record at once (it is not part of the group).
    pub(crate) async fn send(
        &self,
        group: &Arc<Deliveries>,
        tag: u32,
        record: OutRecord<'_>,
        headers: Option<OwnedHeaders>,
    ) -> Result<(), KafkaError> {
        let tracked = Box::new(Tracked {
            group: group.clone(),
            tag,
        });
        let mut out = BaseRecord::with_opaque_to(record.topic, tracked);
        if let Some(key) = record.key {
            out = out.key(key);
        }
        if let Some(payload) = record.payload {
            out = out.payload(payload);
        }
        if let Some(headers) = headers {
            out = out.headers(headers);
        }
        group.pending.fetch_add(1, Ordering::AcqRel);
        loop {
            match self.0.send(out) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    out = back;
                    tokio::time::sleep(QUEUE_FULL_WAIT).await;
                }
                Err((error, _)) => {
                    // Never queued: no callback will count it.
                    group.finished();
                    return Err(error);
                }
            }
        }
    }

    /// Sends one record and waits for its delivery.
    pub(crate) async fn send_one(
        &self,
        record: OutRecord<'_>,
        headers: Option<OwnedHeaders>,
    ) -> Result<(), KafkaError> {
        let group = Deliveries::new();
        self.send(&group, 0, record, headers).await?;
        match group.all_delivered().await.pop() {
            Some(failure) => Err(failure.error),
            None => Ok(()),
        }
    }

    /// Sends a failed record again, alone, and waits for its delivery.
    pub(crate) async fn send_again(&self, failure: &Failure) -> Result<(), KafkaError> {
        let record = &failure.record;
        let headers = record.headers().map(|_| super::copied_headers(record));
        self.send_one(
            OutRecord {
                topic: record.topic(),
                key: record.key(),
                payload: record.payload(),
            },
            headers,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::KafkaConfig;

    /// A producer of a broker that is not there: every record fails at its timeout.
    fn unreachable_producer() -> Producer {
        let kafka = KafkaConfig {
            bootstrap_servers: "127.0.0.1:9".into(),
            group_id: "g".into(),
            group_instance_id: None,
            properties: BTreeMap::new(),
        };
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", "127.0.0.1:9")
            .set("message.timeout.ms", "300");
        Producer::create(&config, ClientLog::new("test", &kafka)).unwrap()
    }

    #[tokio::test]
    async fn an_empty_group_is_delivered_at_once() {
        assert!(Deliveries::new().all_delivered().await.is_empty());
    }

    #[tokio::test]
    async fn every_failed_record_comes_back_with_its_tag_and_bytes() {
        let producer = unreachable_producer();
        let group = Deliveries::new();
        for tag in 0..3u32 {
            let payload = format!("p{tag}");
            producer
                .send(
                    &group,
                    tag,
                    OutRecord {
                        topic: "t",
                        key: Some(b"k"),
                        payload: Some(payload.as_bytes()),
                    },
                    None,
                )
                .await
                .unwrap();
        }
        let mut failures = group.all_delivered().await;
        failures.sort_by_key(|f| f.tag);
        let got: Vec<(u32, Option<&[u8]>)> = failures
            .iter()
            .map(|f| (f.tag, f.record.payload()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, Some(&b"p0"[..])),
                (1, Some(&b"p1"[..])),
                (2, Some(&b"p2"[..]))
            ]
        );
        assert!(
            failures.iter().all(|f| matches!(
                f.error,
                KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut)
            )),
            "{failures:?}"
        );
    }

    #[tokio::test]
    async fn a_record_refused_at_once_is_not_awaited() {
        let producer = unreachable_producer();
        let group = Deliveries::new();
        let huge = vec![0u8; 2_000_000];
        let refused = producer
            .send(
                &group,
                0,
                OutRecord {
                    topic: "t",
                    key: None,
                    payload: Some(&huge),
                },
                None,
            )
            .await;
        assert!(
            matches!(
                refused,
                Err(KafkaError::MessageProduction(
                    RDKafkaErrorCode::MessageSizeTooLarge
                ))
            ),
            "{refused:?}"
        );
        assert!(group.all_delivered().await.is_empty());
    }
}
