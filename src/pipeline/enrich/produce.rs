//! Producing a fact's enriched records, and what a refusal means.
//!
//! Why a module of its own: a produce error is one of three things and each needs its own
//! answer. librdkafka's local queue being full (`QueueFull`) is backpressure: wait for
//! deliveries to drain and send again. A refusal of one record for what it is (larger than
//! the topic or the producer allows, invalid) is that fact's fault: a dead letter, so one
//! oversized record cannot stop the pipeline on every restart. Anything else (the topic
//! was deleted, the pipeline may not write it, the cluster is gone past the producer's own
//! retries) no record gets past, so the pipeline stops, saying why.

use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::producer::{DeliveryFuture, FutureRecord};

use super::facts::Output;
use crate::error::Error;
use crate::kafka::Producer;

/// How long a send waits before trying again while librdkafka's queue is full.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(5);

/// Why records were not produced.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The broker or producer refuses this record itself: dead-letter the fact.
    Record(String),
    /// No record can be produced: the pipeline stops.
    Pipeline(Error),
}

/// Whether a produce error refuses the record itself rather than every record.
fn refuses_the_record(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
    )
}

fn refused(topic: &str, error: KafkaError, size: Option<usize>) -> Refused {
    match error {
        KafkaError::MessageProduction(code) if refuses_the_record(code) => {
            Refused::Record(match size {
                Some(bytes) => format!(
                    "{topic} refused the enriched record ({bytes} bytes): {code} (see the \
                     topic's max.message.bytes and [kafka.properties] message.max.bytes)"
                ),
                None => format!("{topic} refused the enriched record: {code}"),
            })
        }
        other => Refused::Pipeline(Error::kafka(format!("producing to {topic}"), other)),
    }
}

/// A record sent and not yet acknowledged, kept to be sent again on its own.
pub(crate) struct Sent {
    delivery: DeliveryFuture,
    key: Option<Vec<u8>>,
    payload: Vec<u8>,
}

/// Sends every output record of a fact.
pub(crate) async fn produce_all(
    producer: &Producer,
    topic: &str,
    message: &OwnedMessage,
    outputs: Vec<Output>,
) -> Result<Vec<Sent>, Refused> {
    let mut sent = Vec::with_capacity(outputs.len());
    for (key, payload) in outputs {
        let key = key.or_else(|| message.key().map(<[u8]>::to_vec));
        let delivery = produce(producer, topic, message, key.as_deref(), &payload).await?;
        sent.push(Sent {
            delivery,
            key,
            payload,
        });
    }
    Ok(sent)
}

/// Waits until the broker acknowledged every record. A record the broker refused as too
/// large is sent once more on its own, one at a time per pipeline (`alone`), before it
/// counts as refused: the broker judges a whole batch against the topic's
/// `max.message.bytes`, so a small record batched with an oversized one is refused with
/// it, and must not become a dead letter for that.
pub(crate) async fn await_deliveries(
    sent: Vec<Sent>,
    producer: &Producer,
    topic: &str,
    message: &OwnedMessage,
    alone: &tokio::sync::Mutex<()>,
) -> Result<(), Refused> {
    for record in sent {
        let error = match record.delivery.await {
            Ok(Ok(_)) => continue,
            Ok(Err((e, _))) => e,
            Err(_) => {
                return Err(Refused::Pipeline(Error::kafka(
                    "delivery",
                    KafkaError::Canceled,
                )));
            }
        };
        let size = record.payload.len();
        match refused(topic, error, Some(size)) {
            Refused::Record(_) => {
                let _one_at_a_time = alone.lock().await;
                let again = produce(
                    producer,
                    topic,
                    message,
                    record.key.as_deref(),
                    &record.payload,
                )
                .await?;
                match again.await {
                    Ok(Ok(_)) => {}
                    Ok(Err((e, _))) => return Err(refused(topic, e, Some(size))),
                    Err(_) => {
                        return Err(Refused::Pipeline(Error::kafka(
                            "delivery",
                            KafkaError::Canceled,
                        )));
                    }
                }
            }
            pipeline => return Err(pipeline),
        }
    }
    Ok(())
}

/// Sends the enriched record with the fact's headers. Waits while librdkafka's queue is
/// full.
async fn produce(
    producer: &Producer,
    topic: &str,
    message: &OwnedMessage,
    key: Option<&[u8]>,
    payload: &[u8],
) -> Result<DeliveryFuture, Refused> {
    loop {
        let mut out: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).payload(payload);
        // Most facts carry no headers: then no (empty) header list is made for each.
        if message.headers().is_some() {
            out = out.headers(crate::kafka::copied_headers(message));
        }
        if let Some(k) = key {
            out = out.key(k);
        }
        match producer.send_result(out) {
            Ok(delivery) => return Ok(delivery),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                tokio::time::sleep(QUEUE_FULL_WAIT).await;
            }
            Err((e, _)) => return Err(refused(topic, e, Some(payload.len()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_validity_refuse_the_record_other_errors_the_pipeline() {
        for code in [
            RDKafkaErrorCode::MessageSizeTooLarge,
            RDKafkaErrorCode::InvalidRecord,
        ] {
            let r = refused("out", KafkaError::MessageProduction(code), Some(9));
            assert!(
                matches!(&r, Refused::Record(reason) if reason.contains("9 bytes")),
                "{r:?}"
            );
        }
        for code in [
            RDKafkaErrorCode::TopicAuthorizationFailed,
            RDKafkaErrorCode::UnknownTopicOrPartition,
            RDKafkaErrorCode::MessageTimedOut,
        ] {
            let r = refused("out", KafkaError::MessageProduction(code), Some(9));
            assert!(matches!(r, Refused::Pipeline(_)), "{code:?}: {r:?}");
        }
    }
}
