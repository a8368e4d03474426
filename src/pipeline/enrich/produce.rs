//! Producing a fact's enriched records, and what a refusal means.
//!
//! Why a module of its own: a produce error is one of three things and each needs its own
//! answer. librdkafka's local queue being full (`QueueFull`) is backpressure: wait for
//! deliveries to drain and send again. A refusal of one record for what it is (larger than
//! the topic or the producer allows, invalid) is that fact's fault: a dead letter, so one
//! oversized record cannot stop the pipeline on every restart. Anything else (the topic
//! was deleted, the pipeline may not write it, the cluster is gone past the producer's own
//! retries) no record gets past, so the pipeline stops, saying why.

use std::sync::Arc;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;

use super::facts::Outputs;
use crate::error::Error;
use crate::kafka::{Consumed, Deliveries, Failure, OutRecord, Producer};

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

/// Sends every output record of a fact in `group`, tagged `tag`: the fact's records
/// sent. A record refused at once refuses the fact (the records before it are sent).
pub(crate) async fn send_all(
    producer: &Producer,
    topic: &str,
    group: &Arc<Deliveries>,
    tag: u32,
    message: &Consumed,
    outputs: Outputs,
) -> Result<u64, Refused> {
    let mut sent = 0;
    for output in &outputs {
        let payload = output.payload();
        let record = OutRecord {
            topic,
            key: output.key().or(message.key()),
            payload: Some(payload),
        };
        // Most facts carry no headers: then no (empty) header list is made for each.
        let headers = message.headers().cloned();
        producer
            .send(group, tag, record, headers)
            .await
            .map_err(|e| refused(topic, e, Some(payload.len())))?;
        sent += 1;
    }
    Ok(sent)
}

/// What to do with a record the broker did not acknowledge. A record refused as too
/// large is sent once more on its own, one at a time per pipeline (`alone`), before it
/// counts as refused: the broker judges a whole batch against the topic's
/// `max.message.bytes`, so a small record batched with an oversized one is refused with
/// it, and must not become a dead letter for that.
pub(crate) async fn redeliver(
    failure: Failure,
    producer: &Producer,
    topic: &str,
    alone: &tokio::sync::Mutex<()>,
) -> Result<(), Refused> {
    let size = failure.record.payload().map(<[u8]>::len);
    let Failure { error, .. } = &failure;
    match refused(topic, error.clone(), size) {
        Refused::Record(_) => {
            let _one_at_a_time = alone.lock().await;
            producer
                .send_again(&failure)
                .await
                .map_err(|e| refused(topic, e, size))
        }
        pipeline => Err(pipeline),
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
