//! The table position of a CDC pipeline, mirrored into its consumer group.
//!
//! The table's snapshots are where a pipeline resumes (kafka-delta-ingest's rule: the
//! offsets live in the commit). After each commit lakejoin also commits those offsets to
//! the pipeline's consumer group: monitoring tools read lag there, and it is the position
//! of last resort once snapshot expiry has removed every snapshot of the writer (other
//! committers kept the table busy while the pipeline's topics were quiet).
//!
//! A group's offsets say nothing of which table they were written for: the group is
//! `<group_id>-<pipeline>`, and a table dropped and created again, or a pipeline pointed
//! at another table, keeps it. So each mirrored offset carries, as its commit metadata,
//! the writer (commit user), the table's creation time (schema 0's `timeMillis`) and the
//! snapshot it mirrors. A group offset stands in for the table only when all three fit:
//! the same writer of the same table, at a snapshot that has since been expired.

use std::sync::Arc;

use rdkafka::consumer::{CommitMode, Consumer as _};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::cdc::{OFFSETS_PROPERTY_PREFIX, Offsets};
use crate::error::Result;
use crate::kafka::{ATTEMPT_TIMEOUT, Consumer};
use crate::table::Table;
use crate::table::snapshot::Snapshot;

/// Which writer of which table a mirrored offset belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterIdentity {
    /// The writer's commit user.
    pub user: String,
    /// When the table was created (schema 0's `timeMillis`; 0 when it has none).
    pub table_created: i64,
}

impl WriterIdentity {
    /// The identity of `user`'s writer of `table`.
    pub(crate) async fn of(table: &Table, user: &str) -> Result<Self> {
        let first = table.schema_by_id(0).await?;
        Ok(WriterIdentity {
            user: user.to_string(),
            table_created: first.time_millis.unwrap_or(0),
        })
    }
}

/// The commit metadata of a mirrored offset.
#[derive(Debug, Serialize, Deserialize)]
struct MirrorTag {
    lakejoin: WriterIdentity,
    snapshot: i64,
}

/// When the group's offsets may stand in for the table's: the writer has no snapshot
/// left, and every snapshot before `earliest` was expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFallback {
    pub writer: WriterIdentity,
    /// The oldest snapshot the table keeps.
    pub earliest: i64,
}

impl GroupFallback {
    /// Whether an offset committed with `metadata` stands in for the table's: mirrored
    /// by this writer of this table, from a snapshot since expired.
    fn accepts(&self, metadata: &str) -> bool {
        serde_json::from_str::<MirrorTag>(metadata)
            .is_ok_and(|tag| tag.lakejoin == self.writer && tag.snapshot < self.earliest)
    }
}

/// Commits `pipeline`'s offsets in `snapshot` to the consumer group, tagged with
/// `writer` and the snapshot. A failure is logged: the table stays the position, and
/// the next commit mirrors again.
pub(crate) fn mirror(
    consumer: &Consumer,
    pipeline: &str,
    writer: &WriterIdentity,
    snapshot: &Snapshot,
    mode: CommitMode,
) {
    let Some(value) = snapshot
        .properties
        .as_ref()
        .and_then(|p| p.get(&format!("{OFFSETS_PROPERTY_PREFIX}{pipeline}")))
    else {
        return;
    };
    let Ok(offsets) = serde_json::from_str::<Offsets>(value) else {
        return;
    };
    let tag = MirrorTag {
        lakejoin: writer.clone(),
        snapshot: snapshot.id,
    };
    let Ok(tag) = serde_json::to_string(&tag) else {
        return;
    };
    let mut list = TopicPartitionList::new();
    for (topic, partitions) in &offsets {
        for (&p, &next) in partitions {
            let mut element = list.add_partition(topic, p);
            if element.set_offset(Offset::Offset(next)).is_ok() {
                element.set_metadata(tag.as_str());
            }
        }
    }
    if let Err(e) = consumer.commit(&list, mode) {
        tracing::warn!(pipeline, error = %e, snapshot = snapshot.id,
            "could not mirror the table's offsets to the consumer group");
    }
}

/// After the consumer stopped: waits (a minute at most) until the sink, which makes its
/// last commit after the consumers stopped, is gone, then mirrors the newest commit it
/// announced synchronously, so that it is in the group before the consumer closes. The
/// synchronous commit runs off the runtime's workers, bounded too: a broker that is away
/// at a stop must not hold the process.
pub(crate) async fn mirror_final_commits(
    consumer: &Arc<Consumer>,
    pipeline: &str,
    writer: &WriterIdentity,
    committed: &mut watch::Receiver<Option<Arc<super::cdc::Committed>>>,
) {
    const WAIT: std::time::Duration = std::time::Duration::from_secs(60);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, committed.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => break,
            Err(_) => {
                tracing::warn!(
                    pipeline,
                    "the table's last commit did not come within a minute \
                    of the stop; mirroring the newest one"
                );
                break;
            }
        }
    }
    let Some(snapshot) = committed.borrow().as_ref().map(|c| c.snapshot.clone()) else {
        return;
    };
    let (consumer, pipeline_name, writer) =
        (consumer.clone(), pipeline.to_string(), writer.clone());
    let commit = tokio::task::spawn_blocking(move || {
        mirror(
            &consumer,
            &pipeline_name,
            &writer,
            &snapshot,
            CommitMode::Sync,
        );
    });
    if tokio::time::timeout(std::time::Duration::from_secs(30), commit)
        .await
        .is_err()
    {
        tracing::warn!(
            pipeline,
            "mirroring the last commit to the consumer group timed out"
        );
    }
}

/// The group's committed offsets of `partitions` that may stand in for the table's (see
/// the module docs); `None` when `stop` fires first. A group this client may not read
/// (no ACL for it) gives none, with an error in the log: the pipeline then starts at
/// `start_from`, as it did before the group was consulted.
pub(crate) async fn group_offsets(
    consumer: &Arc<Consumer>,
    fallback: &GroupFallback,
    pipeline: &str,
    partitions: &TopicPartitionList,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<Offsets>> {
    let list = partitions.clone();
    let read = super::cdc_partitions::retry_blocking(
        consumer,
        "the consumer group's offsets",
        stop,
        refused,
        move |c| c.committed_offsets(list.clone(), ATTEMPT_TIMEOUT),
    )
    .await;
    let committed = match read {
        Ok(Some(committed)) => committed,
        Ok(None) => return Ok(None),
        Err(e) => {
            tracing::error!(pipeline, error = %e,
                "cannot read the consumer group's offsets; the writer's snapshots were \
                 expired, so the pipeline starts at start_from");
            return Ok(Some(Offsets::new()));
        }
    };
    let mut offsets = Offsets::new();
    for e in committed.elements() {
        let Offset::Offset(next) = e.offset() else {
            continue;
        };
        if let Err(error) = e.error() {
            tracing::info!(pipeline, topic = e.topic(), partition = e.partition(), %error,
                "the consumer group's offset could not be read; not used");
            continue;
        }
        if fallback.accepts(&metadata_of(&e)) {
            offsets
                .entry(e.topic().to_string())
                .or_default()
                .insert(e.partition(), next);
        } else {
            tracing::info!(
                pipeline,
                topic = e.topic(),
                partition = e.partition(),
                offset = next,
                "the consumer group's offset is not this writer's for this table; not used"
            );
        }
    }
    Ok(Some(offsets))
}

/// The commit metadata of `element`, empty when it is not text: rdkafka panics on
/// metadata that is not UTF-8, which any client of the group could have committed.
fn metadata_of(element: &rdkafka::topic_partition_list::TopicPartitionListElem<'_>) -> String {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        element.metadata().to_string()
    }))
    .unwrap_or_default()
}

/// Errors retrying cannot mend: the group may not be read, or not be named so.
fn refused(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::GroupAuthorizationFailed
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::InvalidGroupId
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_writers_offsets_of_this_table_from_an_expired_snapshot_are_used() {
        let writer = WriterIdentity {
            user: "lakejoin:g:shop.items".into(),
            table_created: 1_700_000_000_000,
        };
        let fallback = GroupFallback {
            writer: writer.clone(),
            earliest: 10,
        };
        let tag = |writer: &WriterIdentity, snapshot| {
            serde_json::to_string(&MirrorTag {
                lakejoin: writer.clone(),
                snapshot,
            })
            .unwrap()
        };
        assert!(
            tag(&writer, 9).len() < 4096,
            "Kafka's offset.metadata.max.bytes"
        );
        assert!(fallback.accepts(&tag(&writer, 9)));
        // A snapshot the table still keeps would have been found there.
        assert!(!fallback.accepts(&tag(&writer, 10)));
        // The same table name created again.
        let recreated = WriterIdentity {
            table_created: writer.table_created + 1,
            ..writer.clone()
        };
        assert!(!fallback.accepts(&tag(&recreated, 9)));
        // Another writer (group id) of the table.
        let other = WriterIdentity {
            user: "lakejoin:h:shop.items".into(),
            ..writer
        };
        assert!(!fallback.accepts(&tag(&other, 9)));
        // Offsets committed without a tag (other tools, older lakejoin).
        assert!(!fallback.accepts(""));
        assert!(!fallback.accepts("{\"snapshot\":1}"));
    }

    #[test]
    fn authorization_refusals_are_not_retried() {
        assert!(refused(&KafkaError::MetadataFetch(
            RDKafkaErrorCode::GroupAuthorizationFailed
        )));
        assert!(!refused(&KafkaError::MetadataFetch(
            RDKafkaErrorCode::CoordinatorNotAvailable
        )));
    }
}
