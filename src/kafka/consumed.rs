//! A consumed record, owned: what a pipeline keeps of a message once the consumer has
//! moved on (its facts are decoded, joined and produced in other tasks).
//!
//! Why not rdkafka's `OwnedMessage`: its topic, key and payload are three allocations per
//! record, made on the consuming thread and mostly freed on another, and in a profile of
//! an enrich pipeline `detach()` was the largest share of the consuming loop, most of it
//! in the allocator. Here they are one allocation.

use rdkafka::Timestamp;
use rdkafka::message::{Headers as _, Message, OwnedHeaders};

use crate::codec::KafkaRecord;

/// A consumed record: topic, key and payload in one buffer, plus where it was consumed.
#[derive(Debug, Clone)]
pub(crate) struct Consumed {
    /// The topic's name, then the key, then the payload.
    bytes: Box<[u8]>,
    topic_len: usize,
    /// `None`: the record has no key (not an empty one).
    key_len: Option<usize>,
    /// The record has a payload (`false`: a tombstone).
    has_payload: bool,
    partition: i32,
    offset: i64,
    timestamp: Timestamp,
    /// `None` when the record has no headers, the usual case.
    headers: Option<OwnedHeaders>,
}

impl Consumed {
    /// An owned copy of `message`.
    pub(crate) fn of(message: &impl Message) -> Self {
        let topic = message.topic().as_bytes();
        let key = message.key();
        let payload = message.payload();
        let len = topic.len() + key.map_or(0, <[u8]>::len) + payload.map_or(0, <[u8]>::len);
        let mut bytes = Vec::with_capacity(len);
        bytes.extend_from_slice(topic);
        bytes.extend_from_slice(key.unwrap_or_default());
        bytes.extend_from_slice(payload.unwrap_or_default());
        Consumed {
            bytes: bytes.into_boxed_slice(),
            topic_len: topic.len(),
            key_len: key.map(<[u8]>::len),
            has_payload: payload.is_some(),
            partition: message.partition(),
            offset: message.offset(),
            timestamp: message.timestamp(),
            headers: message
                .headers()
                .is_some_and(|h| h.count() > 0)
                .then(|| super::copied_headers(message)),
        }
    }

    pub(crate) fn topic(&self) -> &str {
        // Copied from a `&str`: always UTF-8.
        std::str::from_utf8(self.bytes.get(..self.topic_len).unwrap_or_default())
            .unwrap_or_default()
    }

    pub(crate) fn key(&self) -> Option<&[u8]> {
        let len = self.key_len?;
        self.bytes.get(self.topic_len..self.topic_len + len)
    }

    pub(crate) fn payload(&self) -> Option<&[u8]> {
        if !self.has_payload {
            return None;
        }
        self.bytes.get(self.topic_len + self.key_len.unwrap_or(0)..)
    }

    pub(crate) fn partition(&self) -> i32 {
        self.partition
    }

    pub(crate) fn offset(&self) -> i64 {
        self.offset
    }

    pub(crate) fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The record's headers; `None` when it has none.
    pub(crate) fn headers(&self) -> Option<&OwnedHeaders> {
        self.headers.as_ref()
    }

    /// The record as the codecs see it.
    pub(crate) fn record(&self) -> KafkaRecord<'_> {
        KafkaRecord {
            topic: self.topic(),
            partition: self.partition,
            offset: self.offset,
            timestamp_ms: self.timestamp.to_millis(),
            key: self.key(),
            payload: self.payload(),
        }
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::message::{Header, OwnedMessage};

    use super::*;

    fn owned(
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        headers: Option<OwnedHeaders>,
    ) -> OwnedMessage {
        OwnedMessage::new(
            payload.map(<[u8]>::to_vec),
            key.map(<[u8]>::to_vec),
            "orders".into(),
            Timestamp::CreateTime(1_000),
            3,
            42,
            headers,
        )
    }

    /// Every combination of a missing, empty and present key and payload reads back as
    /// it was consumed, and so do the topic, position, timestamp and headers.
    #[test]
    fn a_copy_reads_back_as_the_message() {
        let parts: [Option<&[u8]>; 3] = [None, Some(b""), Some(b"bytes")];
        for key in parts {
            for payload in parts {
                let message = owned(key, payload, None);
                let consumed = Consumed::of(&message);
                assert_eq!(consumed.key(), key, "key {key:?}, payload {payload:?}");
                assert_eq!(
                    consumed.payload(),
                    payload,
                    "key {key:?}, payload {payload:?}"
                );
                assert_eq!(consumed.topic(), "orders");
                assert_eq!((consumed.partition(), consumed.offset()), (3, 42));
                assert_eq!(consumed.timestamp(), Timestamp::CreateTime(1_000));
                assert!(consumed.headers().is_none());
                let record = consumed.record();
                assert_eq!((record.key, record.payload), (key, payload));
                assert_eq!(record.timestamp_ms, Some(1_000));
            }
        }
        let headers = OwnedHeaders::new().insert(Header {
            key: "trace",
            value: Some("t-1"),
        });
        let consumed = Consumed::of(&owned(None, Some(b"{}"), Some(headers)));
        let got = consumed.headers().map(|h| h.get(0));
        assert_eq!(
            got.map(|h| (h.key, h.value)),
            Some(("trace", Some(b"t-1".as_slice())))
        );
        let empty = Consumed::of(&owned(None, Some(b"{}"), Some(OwnedHeaders::new())));
        assert!(
            empty.headers().is_none(),
            "an empty header list is no headers"
        );
    }
}
