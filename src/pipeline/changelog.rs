//! `[[changelog]]` pipelines: a table's changes, snapshot after snapshot, produced to a
//! Kafka topic in commit order, at least once.
//!
//! - **Reading.** Every `discovery_interval` the table's latest snapshot is looked up
//!   (Java's `continuous.discovery-interval`); each snapshot from the position on is
//!   read through the incremental reader ([`read_changes`]: its changelog files, or the
//!   delta files of a table without a producer) and encoded ([`ChangeEncoder`]).
//! - **Position.** A Paimon consumer, `consumer/consumer-<id>` with `nextSnapshot`, as
//!   Java's `ConsumerManager` writes it. It moves past snapshot N only once the broker
//!   acknowledged every record of N, so a crash replays at most the snapshot in flight
//!   (the replay window) and loses nothing; snapshot and changelog expiry keep every
//!   snapshot from it on. The consumer is written at start too, so that a pipeline that
//!   starts from `earliest` holds its snapshots from the first moment. An expiry that
//!   read the consumer files just before may still remove that first snapshot; the
//!   pipeline then starts at the oldest one left, which is what `earliest` means.
//! - **Avro.** With `format = "avro"` and a `schema_registry`, the key and value schemas
//!   are registered under `<topic>-key` and `<topic>-value` (Confluent's
//!   TopicNameStrategy, Flink's `avro-confluent` default) before the first record, and
//!   again when the table's schema changes; records carry their ids.
//! - **Faults.** A store or registry that fails is waited out with backoff (the pipeline unready with
//!   the reason meanwhile); a broker that is away is waited for (the producer never
//!   times out; a full local queue is waited out by `kafka::Producer::send`). A record
//!   the broker refuses (too large for the topic, not authorised) stops the pipeline
//!   with the reason: its position stays before that snapshot.
//!
//! Why its own module: it shares nothing with the CDC and enrich loops but the producer
//! and the metrics; it reads tables where they read topics.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::error::KafkaError;
use tokio::sync::watch;

use crate::codec::SchemaRegistrar;
use crate::codec::changelog::{ChangeEncoder, ChangeFormat, ChangeRecord, ChangeSource};
use crate::config::{ChangelogConfig, ChangelogStart};
use crate::error::{Error, ErrorKind, Result};
use crate::kafka::{Deliveries, OutRecord, Producer};
use crate::lsm::changes::{read_changes, unfaithful_changes};
use crate::observe::PipelineMetrics;
use crate::table::Table;

/// First and longest wait between attempts of a failing table read.
const STORE_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(30));

/// Runs one changelog pipeline until `stop` fires (the snapshot in flight is delivered
/// and recorded first) or it cannot go on.
pub(crate) async fn run(
    config: ChangelogConfig,
    table: Arc<Table>,
    producer: Producer,
    metrics: Arc<PipelineMetrics>,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    let result = Changelog::open(config, table, producer, metrics.clone(), stop)
        .await?
        .follow()
        .await;
    if let Err(e) = &result {
        metrics.set_stopped(e.to_string());
    }
    result
}

/// A running changelog pipeline.
struct Changelog {
    config: ChangelogConfig,
    table: Arc<Table>,
    encoder: ChangeEncoder,
    /// Where `avro` schemas are registered (`schema_registry`).
    registrar: Option<Arc<SchemaRegistrar>>,
    producer: Producer,
    metrics: Arc<PipelineMetrics>,
    stop: watch::Receiver<bool>,
    /// The next snapshot to produce (what the consumer file says).
    next: i64,
    /// The position is `start_from = "earliest"`'s (there was no consumer file) and
    /// nothing has been produced yet: if expiry removes that snapshot before the
    /// consumer file protects it, the pipeline moves on to the new oldest one.
    at_unproduced_earliest: bool,
}

impl Changelog {
    /// Checks the table, finds the position (the consumer file, else `start_from`) and
    /// records it as the consumer.
    async fn open(
        config: ChangelogConfig,
        table: Arc<Table>,
        producer: Producer,
        metrics: Arc<PipelineMetrics>,
        stop: watch::Receiver<bool>,
    ) -> Result<Self> {
        let name = &config.name;
        // The stored options decide, not the configured ones: an existing table may
        // have been created with others.
        if let Some(reason) = unfaithful_changes(table.options()) {
            return Err(Error::Config(format!(
                "changelog {name}: table {} cannot feed a changelog: {reason}",
                table.identifier()
            )));
        }
        let format = ChangeFormat::parse(&config.format).ok_or_else(|| {
            Error::Config(format!(
                "changelog {name}: format `{}` is not debezium-json, json or avro",
                config.format
            ))
        })?;
        let registrar = match &config.schema_registry {
            Some(url) => Some(Arc::new(
                SchemaRegistrar::new(url.expose())
                    .map_err(|e| Error::Config(format!("changelog {name}: {e}")))?,
            )),
            None => None,
        };
        let encoder = ChangeEncoder::new(
            format,
            (**table.schema()).clone(),
            &config.key,
            table.identifier(),
        )
        .map_err(|e| Error::Config(format!("changelog {name}: {e}")))?;
        let mut pipeline = Changelog {
            config,
            table,
            encoder,
            registrar,
            producer,
            metrics,
            stop,
            next: 0,
            at_unproduced_earliest: false,
        };
        if !pipeline.register_schemas().await? {
            return Ok(pipeline);
        }
        let id = pipeline.config.consumer_id().to_string();
        let table = pipeline.table.clone();
        // `None` below: stopped while the table could not be read; nothing was produced.
        let Some(saved) = pipeline.retrying(|| table.consumer(&id)).await? else {
            return Ok(pipeline);
        };
        let earliest_start = saved.is_none()
            && matches!(&pipeline.config.start_from, ChangelogStart::Named(n) if n != "latest");
        let mut next = match saved {
            Some(next) => next,
            None => match pipeline.start_position().await? {
                Some(next) => next,
                None => return Ok(pipeline),
            },
        };
        loop {
            if pipeline
                .retrying(|| table.write_consumer(&id, next))
                .await?
                .is_none()
            {
                return Ok(pipeline);
            }
            if !earliest_start {
                break;
            }
            // An expiry that read the consumer files just before this one was written
            // may have removed that snapshot meanwhile. Checked here too, so that a
            // restart finds a consumer file it can read from.
            match pipeline.start_position().await? {
                Some(first) if first > next => next = first,
                Some(_) => break,
                None => return Ok(pipeline),
            }
        }
        pipeline.next = next;
        pipeline.at_unproduced_earliest = earliest_start;
        if let Some(Some(latest)) = pipeline.retrying(|| table.latest_snapshot_id()).await?
            && next > latest + 1
        {
            // Nothing is lost waiting, but nothing comes either until the table gets
            // there: a consumer file of an earlier table of the same name, say.
            tracing::warn!(pipeline = %pipeline.config.name, table = %pipeline.table.identifier(),
                consumer = %id, next_snapshot = next, latest,
                "the consumer is ahead of the table's latest snapshot; waiting for it");
        }
        tracing::info!(pipeline = %pipeline.config.name, table = %pipeline.table.identifier(),
            consumer = %id, next_snapshot = next, resumed = saved.is_some(), "changelog starts");
        pipeline.metrics.joined.store(true, Ordering::Relaxed);
        pipeline.metrics.assigned.store(true, Ordering::Relaxed);
        Ok(pipeline)
    }

    /// The first snapshot to produce without a consumer file (`None`: stopped first).
    async fn start_position(&self) -> Result<Option<i64>> {
        let table = self.table.clone();
        Ok(match &self.config.start_from {
            ChangelogStart::Snapshot(id) => Some(*id),
            ChangelogStart::Named(name) if name == "latest" => self
                .retrying(|| table.latest_snapshot_id())
                .await?
                .map(|latest| latest.unwrap_or(0) + 1),
            ChangelogStart::Named(_) => {
                // The oldest snapshot still readable: a long-lived changelog outlives
                // its snapshot.
                let Some(snapshots) = self.retrying(|| table.snapshot_ids()).await? else {
                    return Ok(None);
                };
                let Some(changelogs) = self.retrying(|| table.long_lived_changelog_ids()).await?
                else {
                    return Ok(None);
                };
                let first = [snapshots.first(), changelogs.first()];
                Some(first.into_iter().flatten().copied().min().unwrap_or(1))
            }
        })
    }

    /// Moves to the table's newest schema (a CDC pipeline added or widened columns), so
    /// that changes carry its columns from then on; `false` when stopped first.
    async fn follow_schema(&mut self) -> Result<bool> {
        let table = self.table.clone();
        let Some(evolved) = self.retrying(|| table.at_newest_schema()).await? else {
            return Ok(false);
        };
        let name = &self.config.name;
        self.encoder = ChangeEncoder::new(
            self.encoder.format(),
            (**evolved.schema()).clone(),
            &self.config.key,
            evolved.identifier(),
        )
        .map_err(|e| Error::Config(format!("changelog {name}: {e}")))?;
        tracing::info!(pipeline = %name, table = %evolved.identifier(), schema = evolved.schema().id,
            "changes follow the table's new schema");
        self.table = Arc::new(evolved);
        self.register_schemas().await
    }

    /// Registers the `avro` key and value schemas when there is a registry, and frames
    /// the records with their ids; `false` when stopped while the registry was away.
    async fn register_schemas(&mut self) -> Result<bool> {
        let (Some(registrar), Some(schemas)) =
            (self.registrar.clone(), self.encoder.avro_schemas_mut())
        else {
            return Ok(true);
        };
        let (key_text, value_text) = (
            schemas.key_text().to_string(),
            schemas.value_text().to_string(),
        );
        let topic = &self.config.topic;
        let (key_subject, value_subject) = (format!("{topic}-key"), format!("{topic}-value"));
        let registered = self
            .retrying(|| async {
                let key = registrar.register(&key_subject, &key_text).await?;
                let value = registrar.register(&value_subject, &value_text).await?;
                Ok((key, value))
            })
            .await
            .map_err(|e| Error::Config(format!("changelog {}: {e}", self.config.name)))?;
        let Some((key, value)) = registered else {
            return Ok(false);
        };
        tracing::info!(pipeline = %self.config.name, %key_subject, key_id = key, %value_subject,
            value_id = value, "Avro schemas registered");
        if let Some(schemas) = self.encoder.avro_schemas_mut() {
            schemas.set_ids(key, value);
        }
        Ok(true)
    }

    fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Produces every new snapshot's changes, then waits for the next one, until stopped.
    async fn follow(mut self) -> Result<()> {
        let table = self.table.clone();
        loop {
            if self.stopping() {
                return Ok(());
            }
            let Some(latest) = self.retrying(|| table.latest_snapshot_id()).await? else {
                return Ok(());
            };
            let latest = latest.unwrap_or(0);
            let behind = latest.saturating_sub(self.next.saturating_sub(1)).max(0);
            self.metrics
                .snapshot_lag
                .store(u64::try_from(behind).unwrap_or(0), Ordering::Relaxed);
            if self.next > latest {
                let mut stop = self.stop.clone();
                tokio::select! {
                    _ = tokio::time::sleep(self.config.discovery_interval) => {}
                    changed = stop.changed() => if changed.is_err() { return Ok(()); },
                }
                continue;
            }
            // A snapshot in flight is finished even when a stop comes meanwhile: its
            // records are out, and recording the position spares their replay.
            let stopped_before_recording = !self.produce_snapshot(self.next).await?;
            if stopped_before_recording {
                return Ok(());
            }
        }
    }

    /// Produces the changes of snapshot `id`, waits for the broker to acknowledge each,
    /// and moves the consumer past it; `false` when stopped before that (the table could
    /// not be read or written meanwhile).
    async fn produce_snapshot(&mut self, id: i64) -> Result<bool> {
        let (time_millis, changes) = loop {
            let table = self.table.clone();
            let read = self
                .retrying(|| async {
                    let snapshot = table.snapshot_or_changelog(id).await?;
                    if snapshot.schema_id > table.schema().id {
                        // Read in the schema it was written in, or its new columns
                        // would be left out of the changes.
                        return Ok(None);
                    }
                    let changes = read_changes(&table, id - 1, id).await?;
                    Ok(Some((snapshot.time_millis, changes)))
                })
                .await;
            match read {
                Ok(Some(Some(read))) => break read,
                Ok(Some(None)) => {
                    if !self.follow_schema().await? {
                        return Ok(false);
                    }
                }
                Ok(None) => return Ok(false),
                Err(e) if e.is_not_found() => {
                    if self.at_unproduced_earliest
                        && let Some(moved) = self.move_to_new_earliest(id).await?
                    {
                        return Ok(moved);
                    }
                    return Err(self.expired(id, e).await);
                }
                Err(e) => return Err(e),
            }
        };
        let table = self.table.clone();
        let rows: Vec<_> = changes.iter().map(|c| (c.kind, &c.row)).collect();
        let source = ChangeSource {
            snapshot: id,
            time_millis,
        };
        let records = self.encoder.encode(&rows, source).map_err(|e| {
            Error::Data(format!(
                "changelog {}: snapshot {id} of {}: Avro output: {e}",
                self.config.name,
                self.table.identifier()
            ))
        })?;
        self.send_all(&records).await?;
        PipelineMetrics::add(&self.metrics.records_out, records.len() as u64);
        let (consumer, next) = (self.config.consumer_id().to_string(), id + 1);
        if self
            .retrying(|| table.write_consumer(&consumer, next))
            .await?
            .is_none()
        {
            // Stopped before the position was recorded: the snapshot is produced again
            // after the restart (within the replay window).
            return Ok(false);
        }
        self.next = next;
        self.at_unproduced_earliest = false;
        self.metrics
            .snapshot_id
            .store(u64::try_from(id).unwrap_or(0), Ordering::Relaxed);
        tracing::debug!(pipeline = %self.config.name, snapshot = id, records = records.len(),
            "snapshot produced");
        Ok(true)
    }

    /// After snapshot `gone`, the pipeline's `earliest` start, could not be read: an
    /// expiry that had read the consumer files before this pipeline wrote its own removed
    /// it. "Earliest" is then the oldest snapshot now, recorded as the position before
    /// anything is produced. `Some(false)`: stopped first; `None`: `gone` is not older
    /// than the table's history (a file of it is missing), which stays an error.
    async fn move_to_new_earliest(&mut self, gone: i64) -> Result<Option<bool>> {
        let Some(first) = self.start_position().await? else {
            return Ok(Some(false));
        };
        if first <= gone {
            return Ok(None);
        }
        let (table, consumer) = (self.table.clone(), self.config.consumer_id().to_string());
        if self
            .retrying(|| table.write_consumer(&consumer, first))
            .await?
            .is_none()
        {
            return Ok(Some(false));
        }
        tracing::info!(pipeline = %self.config.name, table = %self.table.identifier(),
            expired = gone, next_snapshot = first,
            "the earliest snapshot was expired as the changelog started; starting at the oldest left");
        self.next = first;
        Ok(Some(true))
    }

    /// The error for a snapshot that no longer exists: expiry removed it before this
    /// consumer held it (a `start_from` older than the table's history, or a consumer
    /// file deleted or expired meanwhile).
    async fn expired(&self, id: i64, e: Error) -> Error {
        let earliest = self
            .table
            .snapshot_ids()
            .await
            .ok()
            .and_then(|ids| ids.first().copied());
        Error::Config(format!(
            "changelog {}: snapshot {id} of {} can no longer be read ({e}); the oldest \
             snapshot is {}. Set start_from to a snapshot that exists, or delete \
             consumer/consumer-{} to start from start_from",
            self.config.name,
            self.table.identifier(),
            earliest.map_or_else(|| "none".into(), |i| i.to_string()),
            self.config.consumer_id()
        ))
    }

    /// Sends `records` in order, as one delivery group, and waits until the broker has
    /// acknowledged every one.
    async fn send_all(&self, records: &[ChangeRecord]) -> Result<()> {
        let group = Deliveries::new();
        for (tag, record) in records.iter().enumerate() {
            let out = OutRecord {
                topic: &self.config.topic,
                key: Some(&record.key),
                payload: record.value.as_deref(),
            };
            // The tag is the record's index (a snapshot of more than 4 billion changes
            // would only name the wrong one in the error).
            let tag = u32::try_from(tag).unwrap_or(u32::MAX);
            if let Err(e) = self.producer.send(&group, tag, out, None).await {
                return Err(self.refused(e, record));
            }
        }
        let failures = group.all_delivered().await;
        match failures.into_iter().min_by_key(|f| f.tag) {
            Some(failure) => {
                let index = usize::try_from(failure.tag).unwrap_or(usize::MAX);
                let record = records.get(index).or(records.last());
                Err(match record {
                    Some(record) => self.refused(failure.error, record),
                    None => {
                        Error::kafka(format!("producing to {}", self.config.topic), failure.error)
                    }
                })
            }
            None => Ok(()),
        }
    }

    /// The error that stops the pipeline when the broker refuses a record.
    fn refused(&self, e: KafkaError, record: &ChangeRecord) -> Error {
        Error::Config(format!(
            "changelog {}: topic {} refused the change of key {} ({} bytes): {e}; \
             nothing after it is produced, and the pipeline resumes at this snapshot",
            self.config.name,
            self.config.topic,
            String::from_utf8_lossy(&record.key),
            record.value.as_ref().map_or(0, Vec::len)
        ))
    }

    /// Runs `attempt` until it succeeds, waiting out transient failures (100 ms doubling
    /// to 30 s; the pipeline unready with the reason meanwhile). `None` when stopped
    /// while waiting; a failure that is not transient is returned.
    async fn retrying<T, F, Fut>(&self, mut attempt: F) -> Result<Option<T>>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut wait = STORE_BACKOFF.0;
        let mut failing = false;
        loop {
            match attempt().await {
                Ok(value) => {
                    if failing {
                        tracing::info!(pipeline = %self.config.name, "the table or registry answers again");
                        self.metrics.set_table_fault(None);
                    }
                    return Ok(Some(value));
                }
                Err(e) if e.kind() == ErrorKind::Transient => {
                    tracing::warn!(pipeline = %self.config.name, table = %self.table.identifier(),
                        error = %e, retry_in = ?wait, "table or registry access failed; retrying");
                    self.metrics.set_table_fault(Some(e.to_string()));
                    failing = true;
                }
                Err(e) => return Err(e),
            }
            let mut stop = self.stop.clone();
            if *stop.borrow() {
                return Ok(None);
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return Ok(None),
            }
            wait = (wait * 2).min(STORE_BACKOFF.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::path::Path;

    use super::*;
    use crate::config::KafkaConfig;
    use crate::lsm::expire::{ExpireConfig, expire_snapshots};
    use crate::lsm::writer::TableWriter;
    use crate::table::datum::Datum;
    use crate::table::row_kind::RowKind;
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;
    use crate::table::{TableIdentifier, Warehouse};

    /// A deduplicate table with snapshots 1..=3, and a `start_from = "earliest"`
    /// changelog pipeline opened on it (at snapshot 1). Its producer never sends here.
    async fn opened() -> (Arc<Table>, Changelog, watch::Sender<bool>) {
        let wh = Warehouse::new(Arc::new(InMemory::new()), Path::from("wh"));
        let id = TableIdentifier::parse("db.t").unwrap();
        let schema = keyed_schema(&[("id", DataType::Int)], &["id"], &[("bucket", "1")]);
        let table = Arc::new(Table::create(&wh, &id, schema).await.unwrap());
        for key in 1..=3 {
            let mut writer = TableWriter::new(table.clone(), "w").await.unwrap();
            writer
                .write(RowKind::Insert, vec![Datum::Int(key)])
                .unwrap();
            writer.commit(Default::default()).await.unwrap().unwrap();
            writer.close().await.unwrap();
        }
        let config = ChangelogConfig {
            name: "c".into(),
            table: "db.t".into(),
            topic: "changes".into(),
            format: "json".into(),
            schema_registry: None,
            key: Vec::new(),
            start_from: ChangelogStart::default(),
            discovery_interval: Duration::from_millis(10),
            consumer_id: None,
        };
        let kafka = KafkaConfig {
            bootstrap_servers: "127.0.0.1:9".into(),
            group_id: "g".into(),
            group_instance_id: None,
            properties: Default::default(),
        };
        let (producer, _) = crate::kafka::producer(&kafka).unwrap();
        let (stop_tx, stop) = watch::channel(false);
        let metrics = Arc::new(PipelineMetrics::default());
        let pipeline = Changelog::open(config, table.clone(), producer, metrics, stop)
            .await
            .unwrap();
        assert_eq!(pipeline.next, 1);
        (table, pipeline, stop_tx)
    }

    /// What an expiry that read the consumer files just before the pipeline wrote its
    /// own does: snapshots 1 and 2 go although the consumer file names 1.
    async fn expire_behind_the_consumer(table: &Table) {
        table.write_consumer("c", 3).await.unwrap();
        let keep_newest = ExpireConfig {
            retain_min: 1,
            retain_max: 1,
            time_retained: Duration::ZERO,
            max_deletes: usize::MAX,
        };
        let report = expire_snapshots(table, &keep_newest).await.unwrap();
        assert_eq!(report.expired, vec![1, 2]);
        table.write_consumer("c", 1).await.unwrap();
    }

    #[tokio::test]
    async fn an_earliest_start_expired_before_its_consumer_file_held_it_moves_on() {
        let (table, mut pipeline, _stop) = opened().await;
        expire_behind_the_consumer(&table).await;
        assert!(pipeline.produce_snapshot(1).await.unwrap());
        assert_eq!(pipeline.next, 3);
        assert_eq!(table.consumer("c").await.unwrap(), Some(3));
    }

    #[tokio::test]
    async fn a_position_expired_after_something_was_produced_stays_an_error() {
        let (table, mut pipeline, _stop) = opened().await;
        // As after producing a snapshot (or resuming from a consumer file).
        pipeline.at_unproduced_earliest = false;
        expire_behind_the_consumer(&table).await;
        let err = pipeline.produce_snapshot(1).await.unwrap_err();
        assert!(err.to_string().contains("can no longer be read"), "{err}");
        assert_eq!(table.consumer("c").await.unwrap(), Some(1));
    }
}
