//! Watches a pipeline's consumer off the hot path: whether it has partitions and whether
//! its client has a fault (readiness), its lag per partition (high watermark minus
//! position), and whether the broker answers (a clear log line when it goes away and when
//! it is back).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer as _;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::Consumer;
use rdkafka::{Offset, TopicPartitionList};

use crate::error::{Error, Result};
use crate::observe::{AbortOnDrop, PartitionLag, PipelineMetrics};

/// How often the assignment is checked (a local call).
pub(crate) const ASSIGNMENT_INTERVAL: Duration = Duration::from_secs(1);
/// How often lag is measured (requests to the broker).
pub(crate) const LAG_INTERVAL: Duration = Duration::from_secs(5);

/// What one look at a consumer found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConsumerSample {
    pub(crate) assigned: bool,
    pub(crate) lag: Vec<PartitionLag>,
    /// The group's coordinator did not answer yet (see [`coordinator_pending`]): the
    /// partitions without a position are left out of `lag`.
    pub(crate) coordinator_pending: bool,
}

fn kafka(what: &str, e: KafkaError) -> Error {
    Error::kafka(what, e)
}

/// Whether `e` says the group's coordinator is not ready rather than the broker being
/// away: on a fresh cluster Kafka creates `__consumer_offsets` and elects coordinators
/// for a few seconds after the first group appears, and answers committed-offset
/// requests with these codes meanwhile, while fetching already works.
pub(crate) fn coordinator_pending(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::CoordinatorLoadInProgress
        )
    )
}

/// Measures the lag of every assigned partition (blocking: run it off the async
/// workers). Without a position yet (nothing consumed since start) the committed offset
/// counts; partitions with neither are left out. Without an assignment it only checks
/// that the broker answers.
pub(crate) fn sample(consumer: &Consumer, timeout: Duration) -> Result<ConsumerSample> {
    let assignment = consumer
        .assignment()
        .map_err(|e| kafka("reading the assignment", e))?;
    if assignment.count() == 0 {
        let subscription = consumer
            .subscription()
            .map_err(|e| kafka("reading the subscription", e))?;
        if let Some(topic) = subscription.elements().first() {
            consumer
                .fetch_metadata(Some(topic.topic()), timeout)
                .map_err(|e| kafka("fetching metadata", e))?;
        }
        return Ok(ConsumerSample {
            assigned: false,
            lag: Vec::new(),
            coordinator_pending: false,
        });
    }
    let positions = consumer
        .position()
        .map_err(|e| kafka("reading positions", e))?;
    let mut known: Vec<(String, i32, i64)> = Vec::new();
    let mut unknown = TopicPartitionList::new();
    for e in positions.elements() {
        match e.offset() {
            Offset::Offset(n) => known.push((e.topic().to_string(), e.partition(), n)),
            _ => {
                unknown.add_partition(e.topic(), e.partition());
            }
        }
    }
    let mut coordinator_pending = false;
    if unknown.count() > 0 {
        match consumer.committed_offsets(unknown, timeout) {
            Ok(committed) => {
                for e in committed.elements() {
                    if let Offset::Offset(n) = e.offset() {
                        known.push((e.topic().to_string(), e.partition(), n));
                    }
                }
            }
            Err(e) if self::coordinator_pending(&e) => coordinator_pending = true,
            Err(e) => return Err(kafka("reading committed offsets", e)),
        }
    }
    let mut lag = Vec::with_capacity(known.len());
    for (topic, partition, position) in known {
        let (_, high) = consumer
            .fetch_watermarks(&topic, partition, timeout)
            .map_err(|e| kafka(&format!("fetching watermarks of {topic}/{partition}"), e))?;
        lag.push(PartitionLag {
            topic,
            partition,
            lag: (high - position).max(0),
        });
    }
    lag.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(ConsumerSample {
        assigned: true,
        lag,
        coordinator_pending,
    })
}

/// Starts watching `consumer` for `pipeline`; stops when the guard is dropped or the
/// consumer is gone. Holds the consumer only while measuring, so the pipeline's own drop
/// closes it (and leaves the group) promptly.
pub(crate) fn spawn(
    pipeline: &str,
    consumer: &Arc<Consumer>,
    metrics: Arc<PipelineMetrics>,
    bootstrap: &str,
) -> AbortOnDrop {
    let pipeline = pipeline.to_string();
    let bootstrap = bootstrap.to_string();
    let consumer: Weak<Consumer> = Arc::downgrade(consumer);
    AbortOnDrop(tokio::spawn(async move {
        let mut tick = tokio::time::interval(ASSIGNMENT_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_sample: Option<Instant> = None;
        let mut broker_down = false;
        let mut coordinator_waited = false;
        loop {
            tick.tick().await;
            let Some(c) = consumer.upgrade() else { return };
            let assigned = c.assignment().map(|a| a.count() > 0).unwrap_or(false);
            metrics
                .assigned
                .store(assigned, std::sync::atomic::Ordering::Relaxed);
            metrics
                .joined
                .store(c.context().joined(), std::sync::atomic::Ordering::Relaxed);
            metrics.set_kafka_fault(c.context().fault());
            drop(c);
            if last_sample.is_some_and(|at| at.elapsed() < LAG_INTERVAL) {
                continue;
            }
            last_sample = Some(Instant::now());
            let weak = consumer.clone();
            let measured = tokio::task::spawn_blocking(move || {
                weak.upgrade().map(|c| sample(&c, super::ATTEMPT_TIMEOUT))
            })
            .await;
            match measured {
                Ok(Some(Ok(s))) => {
                    if broker_down {
                        tracing::info!(pipeline = %pipeline, bootstrap = %bootstrap, "Kafka broker reachable again");
                        broker_down = false;
                    }
                    if s.coordinator_pending && !coordinator_waited {
                        tracing::info!(
                            pipeline = %pipeline, bootstrap = %bootstrap,
                            "Kafka group coordinator not ready yet (a new cluster creates its offsets \
                             topic first); consuming goes on, lag is reported once it answers"
                        );
                    }
                    coordinator_waited = s.coordinator_pending;
                    metrics
                        .assigned
                        .store(s.assigned, std::sync::atomic::Ordering::Relaxed);
                    metrics.set_lag(s.lag);
                }
                Ok(Some(Err(e))) => {
                    if !broker_down {
                        tracing::warn!(
                            pipeline = %pipeline, bootstrap = %bootstrap, error = %e,
                            "Kafka broker unavailable; waiting for it (the client reconnects with backoff, \
                             consuming and producing resume when it is back)"
                        );
                        broker_down = true;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!(pipeline = %pipeline, error = %e, "lag sampling task failed")
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinator_codes_are_not_a_broker_outage() {
        for code in [
            RDKafkaErrorCode::NotCoordinator,
            RDKafkaErrorCode::CoordinatorNotAvailable,
            RDKafkaErrorCode::CoordinatorLoadInProgress,
        ] {
            // What `committed_offsets` returns on a failed request.
            assert!(
                coordinator_pending(&KafkaError::MetadataFetch(code)),
                "{code:?}"
            );
        }
        for code in [
            RDKafkaErrorCode::BrokerTransportFailure,
            RDKafkaErrorCode::AllBrokersDown,
            RDKafkaErrorCode::OperationTimedOut,
        ] {
            assert!(
                !coordinator_pending(&KafkaError::MetadataFetch(code)),
                "{code:?}"
            );
        }
        assert!(!coordinator_pending(&KafkaError::Canceled));
    }
}
