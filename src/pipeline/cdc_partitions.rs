//! Which partitions a CDC pipeline reads, and from where.
//!
//! A CDC consumer assigns its partitions itself: one writer per table reads every
//! partition, and positions come from the table's snapshot, not from a consumer group.
//! So what a group member gets from Kafka for free is done here:
//!
//! - Once snapshot expiry has removed every snapshot of the writer (the table kept busy
//!   by other committers while the pipeline's topics were quiet), the table no longer
//!   says where it stopped. The consumer group's committed offsets, which lakejoin sets
//!   after each commit, do when they are this writer's for this table (`cdc_mirror`):
//!   they are used before `start_from`. They may lag the lost snapshot by the commits
//!   whose mirroring failed; those changes are applied again, which only an
//!   `aggregation` table would count twice.
//! - A saved position is checked against the log before it is used. Below the log's
//!   start, the records in between were deleted by retention before this pipeline read
//!   them; librdkafka would quietly move to the start (`auto.offset.reset`) and the table
//!   would miss those changes. That is an error unless `on_offset_out_of_range` accepts
//!   the loss; the consumer runs with `auto.offset.reset = error` for the same case at
//!   run time (a pipeline lagging behind retention), see [`recover_from_reset`]. A saved
//!   position past the log's end means the topic was created again: nothing in the new
//!   log was read, so it is read from its beginning, as before.
//! - Partitions added to a topic later are looked up every `partition_discovery_interval`
//!   and assigned from their beginning, as Flink's Kafka source does: every record in a
//!   partition created after the pipeline started is new to it.
//!
//! Assignment is incremental throughout (`incremental_assign`), so adding partitions
//! never resets the positions of those already being read.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::Consumer as _;
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::watch;

use super::cdc::{Offsets, Resume};
use super::cdc_mirror::group_offsets;
use super::cdc_progress::CdcProgress;
use crate::config::{CdcConfig, OffsetOutOfRange, StartFrom};
use crate::error::{Error, Result};
use crate::kafka::{ATTEMPT_TIMEOUT, Consumer, RETRY_BACKOFF};
use crate::observe::AbortOnDrop;

/// How often high watermarks are read for `wait_for_cdc` (a metadata round trip each).
const WATERMARK_INTERVAL: Duration = Duration::from_millis(250);

/// Where a partition with a saved position resumes, given the offsets its log still
/// holds (`low..high`, `high` being the next offset to be written):
/// - inside the log: there;
/// - past its end: the topic was deleted and created again (or truncated), and nothing
///   in the new log was read, so from its beginning;
/// - before its start: retention deleted records never read. `Err` when
///   `on_offset_out_of_range` is `fail`; else the log's start or end, logged.
pub(crate) fn resume_position(
    config: &CdcConfig,
    topic: &str,
    partition: i32,
    saved: i64,
    (low, high): (i64, i64),
) -> Result<Offset> {
    if (low..=high).contains(&saved) {
        return Ok(Offset::Offset(saved));
    }
    if saved > high {
        tracing::warn!(pipeline = %config.name, topic, partition, saved, low, high,
            "the partition's log ends before the saved position (was the topic deleted and \
             created again?); reading it from its beginning");
        return Ok(Offset::Offset(low));
    }
    let error = Error::OffsetOutOfRange {
        pipeline: config.name.clone(),
        topic: topic.to_string(),
        partition,
        saved,
        low,
        high,
        consequence: format!(
            "offsets {saved}..{low} were deleted before this pipeline read them, so table {} \
             may miss their changes",
            config.table
        ),
    };
    let (offset, to) = match config.on_offset_out_of_range {
        OffsetOutOfRange::Fail => return Err(error),
        OffsetOutOfRange::Earliest => (Offset::Offset(low), low),
        OffsetOutOfRange::Latest => (Offset::Offset(high), high),
    };
    tracing::warn!(pipeline = %config.name, topic, partition, saved, resume_at = to,
        error = %error, "on_offset_out_of_range accepts the loss: resuming where the log allows");
    Ok(offset)
}

/// The offsets `topic`/`partition` still holds, retried with backoff while the broker
/// does not answer; `None` when `stop` fires first.
async fn watermarks(
    consumer: &Arc<Consumer>,
    topic: &str,
    partition: i32,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<(i64, i64)>> {
    let t = topic.to_string();
    let what = format!("the offsets of {topic}/{partition} to check the saved position");
    retry_blocking(
        consumer,
        &what,
        stop,
        |_| false,
        move |c| c.fetch_watermarks(&t, partition, ATTEMPT_TIMEOUT),
    )
    .await
}

/// Runs the blocking client call `read` until it succeeds, with backoff between
/// attempts; `None` when `stop` fires first. An error `permanent` accepts is returned.
pub(crate) async fn retry_blocking<T: Send + 'static>(
    consumer: &Arc<Consumer>,
    what: &str,
    stop: &mut watch::Receiver<bool>,
    permanent: fn(&KafkaError) -> bool,
    read: impl Fn(&Consumer) -> rdkafka::error::KafkaResult<T> + Clone + Send + 'static,
) -> Result<Option<T>> {
    let mut backoff = RETRY_BACKOFF.0;
    loop {
        let (c, f) = (consumer.clone(), read.clone());
        let result = tokio::task::spawn_blocking(move || f(&c));
        let result = tokio::select! {
            r = result => r.map_err(|e| Error::task("Kafka client task", e))?,
            _ = stop.changed() => return Ok(None),
        };
        match result {
            Ok(value) => return Ok(Some(value)),
            Err(e) if permanent(&e) => return Err(Error::kafka(format!("reading {what}"), e)),
            Err(e) => tracing::warn!(error = %e, retry_in = %format!("{}s", backoff.as_secs()),
                "cannot read {what}; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return Ok(None),
        }
        backoff = (backoff * 2).min(RETRY_BACKOFF.1);
    }
}

/// Assigns every partition of the pipeline's topics (waiting while the broker or a
/// topic is missing): at its saved position, checked against the log, or at
/// `start_from`. Returns what was assigned; `None` when `stop` fires first.
pub(crate) async fn assign_initial(
    consumer: &Arc<Consumer>,
    config: &CdcConfig,
    bootstrap: &str,
    resume: &Resume,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<TopicPartitionList>> {
    let mut found = Vec::new();
    for topic in &config.topics {
        let Some(partitions) =
            crate::kafka::partitions_with_retry(consumer, topic, &config.name, bootstrap, stop)
                .await?
        else {
            return Ok(None);
        };
        found.extend(partitions.into_iter().map(|p| (topic.as_str(), p)));
    }
    let saved_of = |offsets: &Offsets, topic: &str, p: i32| {
        offsets.get(topic).and_then(|m| m.get(&p)).copied()
    };
    let mut group = Offsets::new();
    if let Some(fallback) = &resume.group_fallback {
        let mut unsaved = TopicPartitionList::new();
        for &(topic, p) in &found {
            if saved_of(&resume.offsets, topic, p).is_none() {
                unsaved.add_partition(topic, p);
            }
        }
        if unsaved.count() > 0 {
            let Some(committed) =
                group_offsets(consumer, fallback, &config.name, &unsaved, stop).await?
            else {
                return Ok(None);
            };
            if !committed.is_empty() {
                tracing::warn!(pipeline = %config.name, table = %config.table, offsets = ?committed,
                    "the table keeps no snapshot of this writer any more (expired): resuming \
                     from the offsets the consumer group holds, which lakejoin sets after \
                     each commit");
            }
            group = committed;
        }
    }
    let mut assignment = TopicPartitionList::new();
    for (topic, p) in found {
        let saved = saved_of(&resume.offsets, topic, p).or_else(|| saved_of(&group, topic, p));
        let offset = match saved {
            Some(saved) => {
                let Some(range) = watermarks(consumer, topic, p, stop).await? else {
                    return Ok(None);
                };
                resume_position(config, topic, p, saved, range)?
            }
            None => match config.start_from {
                StartFrom::Earliest => Offset::Beginning,
                StartFrom::Latest => Offset::End,
            },
        };
        assignment
            .add_partition_offset(topic, p, offset)
            .map_err(|e| Error::kafka(format!("assigning {topic}/{p}"), e))?;
    }
    consumer
        .incremental_assign(&assignment)
        .map_err(|e| Error::kafka(format!("assigning partitions of {}", config.name), e))?;
    Ok(Some(assignment))
}

/// Looks the topics up every `partition_discovery_interval` and assigns the partitions
/// that appeared since, from their beginning, registering them with `progress`. A failed
/// lookup is logged and tried again at the next interval.
pub(crate) fn spawn_discovery(
    consumer: Arc<Consumer>,
    config: &CdcConfig,
    assigned: &TopicPartitionList,
    progress: Option<Arc<CdcProgress>>,
    mut stop: watch::Receiver<bool>,
) -> AbortOnDrop {
    let mut known: BTreeSet<(String, i32)> = assigned
        .elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect();
    let pipeline = config.name.clone();
    let topics = config.topics.clone();
    let interval = config.partition_discovery_interval;
    AbortOnDrop(tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let c = consumer.clone();
            let t = topics.clone();
            let looked = tokio::task::spawn_blocking(move || {
                t.iter()
                    .map(|topic| {
                        crate::kafka::partitions(&c, topic, ATTEMPT_TIMEOUT)
                            .map(|ps| (topic.clone(), ps))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .await;
            let found = match looked {
                Ok(Ok(found)) => found,
                Ok(Err(e)) => {
                    tracing::debug!(pipeline = %pipeline, error = %e, "partition discovery failed; trying again later");
                    continue;
                }
                Err(e) => {
                    tracing::debug!(pipeline = %pipeline, error = %e, "partition discovery task failed");
                    continue;
                }
            };
            let mut added = TopicPartitionList::new();
            for (topic, partitions) in found {
                for p in partitions {
                    if !known.contains(&(topic.clone(), p))
                        && added
                            .add_partition_offset(&topic, p, Offset::Beginning)
                            .is_ok()
                    {
                        known.insert((topic.clone(), p));
                    }
                }
            }
            if added.count() == 0 {
                continue;
            }
            if let Some(progress) = &progress {
                for e in added.elements() {
                    progress.register((pipeline.clone(), e.topic().to_string(), e.partition()), 0);
                }
            }
            match consumer.incremental_assign(&added) {
                Ok(()) => {
                    for e in added.elements() {
                        tracing::info!(pipeline = %pipeline, topic = e.topic(), partition = e.partition(),
                            "new partition found; reading it from its beginning");
                    }
                }
                Err(e) => {
                    tracing::warn!(pipeline = %pipeline, error = %e, "could not assign new partitions; trying again later");
                    for e in added.elements() {
                        known.remove(&(e.topic().to_string(), e.partition()));
                    }
                }
            }
        }
    }))
}

/// After librdkafka reported a position outside its log (`auto.offset.reset = error`):
/// each assigned partition's position (the next offset to deliver, else where it was
/// assigned) is checked as [`resume_position`] checks a saved one, its log's offsets
/// read with retries while the broker does not answer (it may be restarting). A
/// partition past its log's end is read again from the beginning (its topic was created
/// again); one before its log's start is the error that stops the pipeline. librdkafka
/// has stopped fetching the partition it reported, and a stopped partition cannot be
/// seeked ("erroneous state"), so every partition is assigned again at its position:
/// also one whose position is inside its log, as a broker that is restarting can report
/// (else that partition would stay stopped for good). `false` when `stop` fires first.
pub(crate) async fn recover_from_reset(
    consumer: &Arc<Consumer>,
    config: &CdcConfig,
    assigned: &TopicPartitionList,
    stop: &mut watch::Receiver<bool>,
) -> Result<bool> {
    let positions: Vec<(String, i32, i64)> = consumer
        .position()
        .map_err(|e| Error::kafka(format!("{}: reading positions", config.name), e))?
        .elements()
        .iter()
        .filter_map(|e| {
            let position = match e.offset() {
                Offset::Offset(n) => n,
                _ => match assigned
                    .find_partition(e.topic(), e.partition())
                    .map(|a| a.offset())
                {
                    Some(Offset::Offset(n)) => n,
                    _ => return None,
                },
            };
            Some((e.topic().to_string(), e.partition(), position))
        })
        .collect();
    for (topic, partition, position) in positions {
        let Some(range) = watermarks(consumer, &topic, partition, stop).await? else {
            return Ok(false);
        };
        let to = resume_position(config, &topic, partition, position, range)?;
        let moved = |err: rdkafka::error::KafkaError| {
            let pipeline = &config.name;
            Error::kafka(
                format!("{pipeline}: assigning {topic}/{partition} again at {to:?}"),
                err,
            )
        };
        let mut list = TopicPartitionList::new();
        list.add_partition(&topic, partition);
        consumer.incremental_unassign(&list).map_err(moved)?;
        list.set_all_offsets(to).map_err(moved)?;
        consumer.incremental_assign(&list).map_err(moved)?;
    }
    Ok(true)
}

/// Keeps the high watermarks of the pipeline's assigned partitions current in
/// `progress`, so a partition without lag releases waiting facts.
pub(crate) fn spawn_watermark_watch(
    consumer: Arc<Consumer>,
    pipeline: &str,
    progress: Arc<CdcProgress>,
    mut stop: watch::Receiver<bool>,
) -> AbortOnDrop {
    let pipeline = pipeline.to_string();
    AbortOnDrop(tokio::spawn(async move {
        let mut tick = tokio::time::interval(WATERMARK_INTERVAL);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => break,
            }
            let c = consumer.clone();
            let read_ms = chrono::Utc::now().timestamp_millis();
            let p = pipeline.clone();
            let read = tokio::task::spawn_blocking(move || {
                let Ok(assigned) = c.assignment() else {
                    return Vec::new();
                };
                assigned
                    .elements()
                    .iter()
                    .filter_map(|e| {
                        c.fetch_watermarks(e.topic(), e.partition(), WATERMARK_INTERVAL * 4)
                            .ok()
                            .map(|(_, high)| {
                                ((p.clone(), e.topic().to_string(), e.partition()), high)
                            })
                    })
                    .collect::<Vec<_>>()
            })
            .await;
            for (id, high) in read.unwrap_or_default() {
                progress.set_high_watermark(&id, high, read_ms);
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(choice: OffsetOutOfRange) -> CdcConfig {
        let mut c = crate::config::from_toml(
            "test.toml",
            r#"
[kafka]
bootstrap_servers = "unused:9092"
[warehouse]
uri = "memory://"
[[table]]
name = "db.t"
columns = [{ name = "id", type = "INT NOT NULL" }]
primary_key = ["id"]
buckets = 1
[[cdc]]
name = "p"
topics = ["changes"]
format = "json"
table = "db.t"
"#,
        )
        .expect("config")
        .cdc
        .remove(0);
        c.on_offset_out_of_range = choice;
        c
    }

    #[test]
    fn a_position_inside_the_log_is_used_as_is() {
        let c = config(OffsetOutOfRange::Fail);
        for saved in [10, 15, 20] {
            let at = resume_position(&c, "changes", 0, saved, (10, 20)).expect("inside");
            assert_eq!(at, Offset::Offset(saved));
        }
    }

    #[test]
    fn a_position_retention_deleted_fails_naming_the_gap() {
        let c = config(OffsetOutOfRange::Fail);
        let Err(e) = resume_position(&c, "changes", 3, 5, (40, 90)) else {
            panic!("a position below the log start is an error")
        };
        let text = e.to_string();
        for part in [
            "pipeline p",
            "topic changes partition 3",
            "offset 5",
            "40..90",
            "offsets 5..40 were deleted",
            "db.t",
            "on_offset_out_of_range",
        ] {
            assert!(text.contains(part), "{part:?} missing in: {text}");
        }
    }

    #[test]
    fn a_position_past_the_log_end_reads_the_new_log_from_its_beginning() {
        for choice in [
            OffsetOutOfRange::Fail,
            OffsetOutOfRange::Earliest,
            OffsetOutOfRange::Latest,
        ] {
            let at = resume_position(&config(choice), "changes", 0, 91, (3, 90)).expect("reset");
            assert_eq!(at, Offset::Offset(3));
        }
    }

    #[test]
    fn the_option_accepts_the_loss() {
        let earliest = config(OffsetOutOfRange::Earliest);
        let at = resume_position(&earliest, "changes", 0, 5, (40, 90)).expect("accepted");
        assert_eq!(at, Offset::Offset(40));
        let latest = config(OffsetOutOfRange::Latest);
        let at = resume_position(&latest, "changes", 0, 5, (40, 90)).expect("accepted");
        assert_eq!(at, Offset::Offset(90));
    }
}
