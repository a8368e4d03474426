//! Dead-letter topics: a record that cannot be decoded, coerced or joined is produced,
//! unchanged, to the pipeline's dead-letter topic with the reason and its origin in
//! headers, and the pipeline goes on. Without a dead-letter topic it is logged.

use std::time::Duration;

use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::FutureRecord;

use crate::kafka::Producer;

use crate::error::{Error, Result};

/// Header names set on dead-lettered records.
pub const ERROR_HEADER: &str = "lakejoin.error";
pub const SOURCE_TOPIC_HEADER: &str = "lakejoin.source.topic";
pub const SOURCE_PARTITION_HEADER: &str = "lakejoin.source.partition";
pub const SOURCE_OFFSET_HEADER: &str = "lakejoin.source.offset";
pub const PIPELINE_HEADER: &str = "lakejoin.pipeline";

/// Where a pipeline's bad records go.
#[derive(Clone)]
pub struct DeadLetters {
    topic: Option<String>,
    producer: Producer,
}

impl DeadLetters {
    pub fn new(topic: Option<String>, producer: Producer) -> Self {
        DeadLetters { topic, producer }
    }

    /// Sends `message` with `reason`; waits for delivery so the source offset is only
    /// committed after the record is safe.
    pub async fn send<M: Message>(&self, pipeline: &str, message: &M, reason: &str) -> Result<()> {
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
        let partition = message.partition().to_string();
        let offset = message.offset().to_string();
        let mut headers = OwnedHeaders::new();
        if let Some(original) = message.headers() {
            for h in original.iter() {
                headers = headers.insert(Header {
                    key: h.key,
                    value: h.value,
                });
            }
        }
        let headers = headers
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
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).headers(headers);
        if let Some(k) = message.key() {
            record = record.key(k);
        }
        if let Some(p) = message.payload() {
            record = record.payload(p);
        }
        self.producer
            .send(record, Duration::from_secs(60))
            .await
            .map_err(|(e, _)| {
                Error::Kafka(format!("producing to dead-letter topic {topic}: {e}"))
            })?;
        Ok(())
    }
}
