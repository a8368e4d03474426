//! Dead-letter topics: a record that cannot be decoded, coerced or joined is produced,
//! unchanged, to the pipeline's dead-letter topic with the reason and its origin in
//! headers, and the pipeline goes on. Without a dead-letter topic it is logged.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Header;

use crate::kafka::{Consumed, OutRecord, Producer};

use crate::error::{Error, Result};

/// Header names set on dead-lettered records.
pub(crate) const ERROR_HEADER: &str = "lakejoin.error";
pub(crate) const SOURCE_TOPIC_HEADER: &str = "lakejoin.source.topic";
pub(crate) const SOURCE_PARTITION_HEADER: &str = "lakejoin.source.partition";
pub(crate) const SOURCE_OFFSET_HEADER: &str = "lakejoin.source.offset";
pub(crate) const PIPELINE_HEADER: &str = "lakejoin.pipeline";
/// Set when the dead-letter topic refused the whole record: the payload's original size.
pub(crate) const TRUNCATED_HEADER: &str = "lakejoin.payload.truncated-from";

/// Bytes of the payload kept when the dead-letter topic refuses the whole record.
pub(crate) const TRUNCATED_PAYLOAD: usize = 1024;

/// Where a pipeline's bad records go.
#[derive(Clone)]
pub(crate) struct DeadLetters {
    topic: Option<String>,
    producer: Producer,
}

impl DeadLetters {
    pub(crate) fn new(topic: Option<String>, producer: Producer) -> Self {
        DeadLetters { topic, producer }
    }

    /// Sends `message` with `reason`; waits for delivery so the source offset is only
    /// committed after the record is safe. When the dead-letter topic refuses the record
    /// itself (too large for it), the reason is sent again with the payload cut to
    /// [`TRUNCATED_PAYLOAD`] bytes and its original size in a header: the record is lost
    /// from Kafka either way, and the reason and origin are what an operator needs.
    pub(crate) async fn send(
        &self,
        pipeline: &str,
        message: &Consumed,
        reason: &str,
    ) -> Result<()> {
        let Some(topic) = &self.topic else {
            tracing::warn!(
                pipeline,
                topic = message.topic(),
                partition = message.partition(),
                offset = message.offset(),
                reason,
                "bad record (no dead_letter_topic configured)"
            );
            return Ok(());
        };
        let payload = message.payload();
        match self
            .produce(topic, pipeline, message, reason, payload, None)
            .await
        {
            Err(KafkaError::MessageProduction(
                RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize,
            )) if payload.is_some_and(|p| p.len() > TRUNCATED_PAYLOAD) => {
                let payload = payload.map(|p| &p[..TRUNCATED_PAYLOAD]);
                let size = message.payload().map_or(0, <[u8]>::len);
                tracing::warn!(
                    pipeline,
                    dead_letter_topic = %topic,
                    bytes = size,
                    "the dead-letter topic refused the record; sending it truncated"
                );
                self.produce(topic, pipeline, message, reason, payload, Some(size))
                    .await
                    .map_err(|e| {
                        Error::kafka(
                            format!("producing to dead-letter topic {topic} (truncated)"),
                            e,
                        )
                    })
            }
            Err(e) => Err(Error::kafka(
                format!("producing to dead-letter topic {topic}"),
                e,
            )),
            Ok(()) => Ok(()),
        }
    }

    async fn produce(
        &self,
        topic: &str,
        pipeline: &str,
        message: &Consumed,
        reason: &str,
        payload: Option<&[u8]>,
        truncated_from: Option<usize>,
    ) -> std::result::Result<(), KafkaError> {
        let partition = message.partition().to_string();
        let offset = message.offset().to_string();
        let original_size = truncated_from.map(|n| n.to_string());
        let mut headers = message
            .headers()
            .cloned()
            .unwrap_or_default()
            .insert(Header {
                key: ERROR_HEADER,
                value: Some(reason),
            })
            .insert(Header {
                key: SOURCE_TOPIC_HEADER,
                value: Some(message.topic()),
            })
            .insert(Header {
                key: SOURCE_PARTITION_HEADER,
                value: Some(&partition),
            })
            .insert(Header {
                key: SOURCE_OFFSET_HEADER,
                value: Some(&offset),
            })
            .insert(Header {
                key: PIPELINE_HEADER,
                value: Some(pipeline),
            });
        if let Some(size) = &original_size {
            headers = headers.insert(Header {
                key: TRUNCATED_HEADER,
                value: Some(size),
            });
        }
        let record = OutRecord {
            topic,
            key: message.key(),
            payload,
        };
        self.producer.send_one(record, Some(headers)).await
    }
}
