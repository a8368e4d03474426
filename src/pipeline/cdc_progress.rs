//! How far each table's CDC changes are visible to this process's lookups, so that
//! `wait_for_cdc` joins can hold a fact until the dimension has caught up with it.
//!
//! A partition covers a fact with Kafka timestamp `t` when the last change visible to
//! lookups has a timestamp ≥ `t` (timestamps grow within a partition, so every earlier
//! change is visible too), or when everything up to the partition's high watermark is
//! visible and that watermark was read after time `t` (no lag: a change stamped before
//! the fact was already in the log when the watermark was read). A fact on an idle
//! dimension therefore waits for the next watermark read, at most `WATERMARK_INTERVAL`.
//! Timestamps are the producers' clocks; skew between producers shifts the bound.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::watch;

/// (pipeline, topic, partition)
pub(crate) type PartitionId = (String, String, i32);

#[derive(Debug, Clone, Copy)]
struct PartitionProgress {
    /// Next offset whose change is not visible yet.
    visible_next: i64,
    /// Kafka timestamp of the last visible change (`i64::MIN` when none yet).
    visible_timestamp: i64,
    high_watermark: Option<i64>,
    /// Wall-clock time the high watermark was read (epoch millis).
    high_watermark_read_ms: i64,
}

#[derive(Debug, Default)]
struct ProgressState {
    partitions: HashMap<PartitionId, PartitionProgress>,
}

impl ProgressState {
    fn covers(&self, timestamp_ms: i64) -> bool {
        !self.partitions.is_empty()
            && self.partitions.values().all(|p| {
                p.visible_timestamp >= timestamp_ms
                    || (p.high_watermark_read_ms > timestamp_ms
                        && p.high_watermark.is_some_and(|hw| p.visible_next >= hw))
            })
    }
}

/// One table's CDC progress.
#[derive(Debug)]
pub(crate) struct CdcProgress {
    state: watch::Sender<ProgressState>,
}

impl Default for CdcProgress {
    fn default() -> Self {
        CdcProgress {
            state: watch::Sender::new(ProgressState::default()),
        }
    }
}

/// A committed position: the next offset and the timestamp of the last change before it.
#[derive(Debug, Clone)]
pub(crate) struct CommittedPosition {
    pub(crate) partition: PartitionId,
    pub(crate) next_offset: i64,
    pub(crate) last_timestamp_ms: Option<i64>,
}

impl CdcProgress {
    /// A partition a CDC pipeline reads, starting at `next_offset` (already visible).
    pub(crate) fn register(&self, partition: PartitionId, next_offset: i64) {
        self.state.send_modify(|s| {
            s.partitions.entry(partition).or_insert(PartitionProgress {
                visible_next: next_offset,
                visible_timestamp: i64::MIN,
                high_watermark: None,
                high_watermark_read_ms: i64::MIN,
            });
        });
    }

    /// The partition's high watermark as read at `read_ms` (epoch millis).
    pub(crate) fn set_high_watermark(
        &self,
        partition: &PartitionId,
        high_watermark: i64,
        read_ms: i64,
    ) {
        self.state
            .send_if_modified(|s| match s.partitions.get_mut(partition) {
                Some(p) => {
                    p.high_watermark = Some(high_watermark);
                    p.high_watermark_read_ms = p.high_watermark_read_ms.max(read_ms);
                    true
                }
                None => false,
            });
    }

    /// Records that the changes before these positions are visible to lookups.
    pub(crate) fn mark_visible(&self, positions: &[CommittedPosition]) {
        self.state.send_modify(|s| {
            for position in positions {
                let p =
                    s.partitions
                        .entry(position.partition.clone())
                        .or_insert(PartitionProgress {
                            visible_next: 0,
                            visible_timestamp: i64::MIN,
                            high_watermark: None,
                            high_watermark_read_ms: i64::MIN,
                        });
                p.visible_next = p.visible_next.max(position.next_offset);
                if let Some(ts) = position.last_timestamp_ms {
                    p.visible_timestamp = p.visible_timestamp.max(ts);
                }
            }
        });
    }

    pub(crate) fn covers(&self, timestamp_ms: i64) -> bool {
        self.state.borrow().covers(timestamp_ms)
    }

    /// Waits until the changes up to `timestamp_ms` are visible, at most `max_wait`.
    /// Returns false when the wait timed out.
    pub(crate) async fn wait_for(&self, timestamp_ms: i64, max_wait: Duration) -> bool {
        let mut state = self.state.subscribe();
        matches!(
            tokio::time::timeout(max_wait, state.wait_for(|s| s.covers(timestamp_ms))).await,
            Ok(Ok(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(partition: i32) -> PartitionId {
        ("customers-cdc".into(), "customers".into(), partition)
    }

    #[test]
    fn a_partition_covers_by_timestamp_or_by_having_no_lag() {
        let progress = CdcProgress::default();
        assert!(!progress.covers(0), "nothing registered yet");
        progress.register(id(0), 0);
        progress.register(id(1), 0);
        assert!(!progress.covers(100));
        progress.mark_visible(&[CommittedPosition {
            partition: id(0),
            next_offset: 10,
            last_timestamp_ms: Some(150),
        }]);
        assert!(
            !progress.covers(100),
            "partition 1 may still hold older changes"
        );
        progress.set_high_watermark(&id(1), 0, 90);
        assert!(
            !progress.covers(100),
            "partition 1 was empty before the fact, which says nothing about after"
        );
        progress.set_high_watermark(&id(1), 0, 300);
        assert!(progress.covers(100), "partition 1 is empty");
        assert!(!progress.covers(200), "partition 0 has only reached 150");
        progress.set_high_watermark(&id(0), 10, 300);
        assert!(progress.covers(200), "partition 0 has no lag");
        progress.set_high_watermark(&id(0), 12, 400);
        assert!(!progress.covers(200), "two more changes arrived");
    }

    #[tokio::test]
    async fn waiting_ends_when_covered_or_after_max_wait() {
        let progress = std::sync::Arc::new(CdcProgress::default());
        progress.register(id(0), 0);
        assert!(!progress.wait_for(5, Duration::from_millis(20)).await);
        let waiter = {
            let progress = progress.clone();
            tokio::spawn(async move { progress.wait_for(5, Duration::from_secs(60)).await })
        };
        progress.mark_visible(&[CommittedPosition {
            partition: id(0),
            next_offset: 1,
            last_timestamp_ms: Some(5),
        }]);
        assert!(waiter.await.unwrap());
    }
}
