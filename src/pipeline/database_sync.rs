//! Whole-database sync: one `[[cdc]]` entry with `topics_pattern` follows every matching
//! Debezium topic into a table of one database, creating the tables it needs.
//!
//! Each followed table runs exactly as a single-table `[[cdc]]` pipeline: its own writer
//! (fence, sink, commits) and consumer, started by the same code
//! ([`super::spawn_table_writer`]), so each table is written exactly once per change
//! with its offsets in its own snapshots. What this adds:
//! - discovery: the cluster's topics are listed every `partition_discovery_interval`; a
//!   matching topic that appears later is followed from then on, without a restart;
//! - creation: a table that does not exist yet is created from the first record of its
//!   topic that carries a row (its Connect schema and key, as Paimon's
//!   `kafka_sync_database` does), with the sync's defaults and the table's overrides.
//!   Later records reach it from the start of the topic, the first one included. A
//!   `[[table]]` of the same name is its definition instead, and a topic that a
//!   single-table `[[cdc]]` reads is left to that pipeline.
//!
//! A table that cannot be created (no key, a definition Paimon refuses) stops the sync,
//! and with it the process, naming the table and the key to set: the alternative, a
//! topic silently not followed, loses its changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rdkafka::consumer::Consumer as _;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{TableWriterParts, Tasks, spawn_table_writer};
use crate::codec::{NoShape, SourceTable, source_table};
use crate::config::{Config, DatabaseSync};
use crate::error::{Error, Result};
use crate::kafka::{Consumer, OffsetReset, Producer};
use crate::observe::{PipelineKind, PipelineMetrics, Registry};
use crate::table::{Table, TableIdentifier, Warehouse};

/// What a sync needs from the process: its configuration, the warehouse, the tables
/// `[[table]]` defines (opened at start), the shared producer and the metrics registry.
pub(super) struct SyncContext {
    pub(super) config: Arc<Config>,
    pub(super) warehouse: Warehouse,
    pub(super) declared: BTreeMap<String, Arc<Table>>,
    pub(super) producer: Producer,
    pub(super) registry: Arc<Registry>,
}

/// A table found to follow: the topic, and the table once opened or created (`None`
/// when the sync stopped before its first record came).
type Opened = (String, String, Result<Option<Arc<Table>>>);

/// Runs one sync until `stop` fires (then waits for its tables' pipelines to finish
/// their last commits) or one of its tables fails.
pub(super) async fn run(
    sync: DatabaseSync,
    cx: SyncContext,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let name = sync.pipeline.name.clone();
    let pattern = sync
        .pattern()
        .map_err(|e| Error::Config(format!("cdc[{}] ({name}).topics_pattern: {e}", sync.index)))?;
    let kafka = &cx.config.kafka;
    let lister = Arc::new(crate::kafka::consumer(
        kafka,
        &format!("{}-{name}", kafka.group_id),
        None,
        OffsetReset::Error,
        &name,
    )?);
    // Topics a single-table pipeline reads are that pipeline's.
    let claimed: BTreeSet<String> = cx
        .config
        .cdc
        .iter()
        .flat_map(|c| c.topics.clone())
        .collect();
    let mut tasks = Tasks {
        set: JoinSet::new(),
        shutdown: stop.clone(),
    };
    let mut opening: JoinSet<Opened> = JoinSet::new();
    // Table → the topic it follows.
    let mut followed: BTreeMap<String, String> = BTreeMap::new();
    // Each table's commit announcements, held so that its consumer always has them.
    let mut commits = Vec::new();
    let mut tick = tokio::time::interval(sync.pipeline.partition_discovery_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = 'sync: loop {
        tokio::select! {
            _ = tick.tick() => {
                let topics = match list_topics(&lister).await {
                    Ok(topics) => topics,
                    Err(e) => {
                        tracing::warn!(pipeline = %name, error = %e,
                            "could not list the topics; trying again at the next interval");
                        continue;
                    }
                };
                for topic in topics {
                    if !pattern.is_match(&topic) || claimed.contains(&topic) {
                        continue;
                    }
                    let table = sync.table_for(&topic);
                    match followed.get(&table) {
                        Some(t) if *t == topic => continue,
                        Some(other) => {
                            break 'sync Err(Error::Config(format!(
                                "cdc[{}] ({name}): topics {other} and {topic} both go to table \
                                 {table}; narrow topics_pattern so that each table has one topic",
                                sync.index
                            )));
                        }
                        None => {}
                    }
                    tracing::info!(pipeline = %name, topic = %topic, table = %table,
                        "following a topic of the database");
                    followed.insert(table.clone(), topic.clone());
                    let (sync, cx_table) = (sync.clone(), cx.declared.get(&table).cloned());
                    let (warehouse, kafka, stop) = (cx.warehouse.clone(), kafka.clone(), stop.clone());
                    opening.spawn(async move {
                        let opened = match cx_table {
                            Some(declared) => Ok(Some(declared)),
                            None => open_or_create(&sync, &topic, &table, &warehouse, &kafka, stop).await,
                        };
                        (topic, table, opened)
                    });
                }
            }
            Some(done) = opening.join_next() => {
                let (topic, table_name, opened) = match done {
                    Ok(d) => d,
                    Err(e) => break 'sync Err(Error::task("opening a table of the sync", e)),
                };
                let table = match opened {
                    Ok(Some(t)) => t,
                    Ok(None) => continue,
                    Err(e) => break 'sync Err(e),
                };
                let c = sync.pipeline_for(&topic, &table_name);
                let metrics = Arc::new(PipelineMetrics::default());
                cx.registry.register(&c.name, PipelineKind::Cdc, Some(&table_name), metrics.clone());
                let pipelines = [(c, metrics)];
                let parts = TableWriterParts {
                    name: &table_name,
                    table: &table,
                    pipelines: &pipelines,
                    progress: None,
                };
                match spawn_table_writer(&mut tasks, &cx.config, parts, &cx.producer).await {
                    Ok(committed) => commits.push(committed),
                    Err(e) => break 'sync Err(e),
                }
            }
            Some(ended) = tasks.set.join_next() => match ended {
                Ok((_, Ok(()))) => {}
                Ok((task, Err(e))) => {
                    tracing::error!(pipeline = %name, task = %task, error = %e, "a table of the sync failed");
                    break 'sync Err(e);
                }
                Err(e) => break 'sync Err(Error::task("a table of the sync", e)),
            },
            _ = stop.changed() => break 'sync Ok(()),
        }
    };
    opening.abort_all();
    // Every table's tasks stop on the same signal as this one: wait for their last
    // commits. After a failure the others stop with the process.
    if result.is_ok() {
        while let Some(ended) = tasks.set.join_next().await {
            if let Ok((task, Err(e))) = ended {
                tracing::error!(pipeline = %name, task = %task, error = %e, "a table of the sync failed while stopping");
            }
        }
    }
    drop(commits);
    result
}

/// The cluster's topic names, listed off the async workers.
async fn list_topics(consumer: &Arc<Consumer>) -> Result<Vec<String>> {
    let c = consumer.clone();
    tokio::task::spawn_blocking(move || {
        crate::kafka::topic_names(&c, crate::kafka::ATTEMPT_TIMEOUT)
    })
    .await
    .map_err(|e| Error::task("listing topics", e))?
}

/// The table `topic` goes to: opened when it exists, else created from the topic's first
/// record that carries a row (waiting for one). `None` when `stop` fires first.
async fn open_or_create(
    sync: &DatabaseSync,
    topic: &str,
    table: &str,
    warehouse: &Warehouse,
    kafka: &crate::config::KafkaConfig,
    mut stop: watch::Receiver<bool>,
) -> Result<Option<Arc<Table>>> {
    let id = TableIdentifier::parse(table)?;
    match Table::open(warehouse, &id).await {
        Ok(t) => return Ok(Some(Arc::new(t))),
        Err(Error::TableNotFound(_)) => {}
        Err(e) => return Err(e),
    }
    let pipeline = format!("{}/{}", sync.pipeline.name, id.name);
    let Some(shape) = first_shape(kafka, topic, &pipeline, &mut stop).await? else {
        return Ok(None);
    };
    let schema = sync.table_schema(&id.name, shape.columns, shape.primary_key)?;
    tracing::info!(pipeline = %pipeline, table = %table,
        columns = %schema.fields.iter().map(|f| format!("{} {}", f.name, f.type_string())).collect::<Vec<_>>().join(", "),
        primary_key = %schema.primary_keys.join(", "),
        "creating the table from its topic's first record");
    match crate::lsm::create_table(warehouse, &id, schema).await {
        Ok(t) => Ok(Some(Arc::new(t))),
        // Another instance created it first (from the same topic): write that one.
        Err(Error::TableExists(_)) => Ok(Some(Arc::new(Table::open(warehouse, &id).await?))),
        Err(e) => Err(e),
    }
}

/// The table the first record of `topic` with a row describes, read from the start of
/// every partition; waits for one when there is none yet. `None` when `stop` fires.
/// Records that are no Debezium change event are passed over here (the pipeline
/// dead-letters them once the table exists).
pub(crate) async fn first_shape(
    kafka: &crate::config::KafkaConfig,
    topic: &str,
    pipeline: &str,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<SourceTable>> {
    let consumer = Arc::new(crate::kafka::consumer(
        kafka,
        &format!("{}-{pipeline}-probe", kafka.group_id),
        None,
        OffsetReset::Earliest,
        pipeline,
    )?);
    let Some(partitions) = crate::kafka::partitions_with_retry(
        &consumer,
        topic,
        pipeline,
        &kafka.bootstrap_servers,
        stop,
    )
    .await?
    else {
        return Ok(None);
    };
    let mut assignment = TopicPartitionList::new();
    for p in partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .map_err(|e| Error::kafka(format!("assigning {topic}/{p}"), e))?;
    }
    consumer
        .assign(&assignment)
        .map_err(|e| Error::kafka(format!("assigning the partitions of {topic}"), e))?;
    loop {
        tokio::select! {
            message = consumer.recv() => {
                let message = match message {
                    Ok(m) => m,
                    Err(e) => {
                        consumer.context().consumer_error(&e);
                        continue;
                    }
                };
                match source_table(message.key(), message.payload()) {
                    Ok(shape) => return Ok(Some(shape)),
                    Err(NoShape::NoRow) => {}
                    Err(NoShape::Malformed(why)) => {
                        tracing::warn!(pipeline = %pipeline, topic = %topic,
                            partition = message.partition(), offset = message.offset(), reason = %why,
                            "a record that describes no table; looking at the next one");
                    }
                }
            }
            _ = stop.changed() => return Ok(None),
        }
    }
}

/// What a sync would do with one matching topic, for `lakejoin validate`.
#[derive(Debug)]
pub(crate) enum Preview {
    /// The table exists: the sync writes it as it is (and evolves it).
    Exists(Arc<crate::table::schema::TableSchema>),
    /// A `[[table]]` defines it.
    Declared,
    /// A single-table `[[cdc]]` reads the topic: the sync leaves it alone.
    Claimed,
    /// It would be created so, from the topic's first record with a row.
    Create(crate::table::schema::TableSchema),
    /// No record with a row came within the wait: created when one arrives.
    NoRecordYet,
    /// It could not be created: why.
    Refused(String),
}

/// Each topic `sync` would follow now, the table it goes to and what would happen to
/// it; reading a topic's first record waits at most `wait`.
pub(crate) async fn preview(
    sync: &DatabaseSync,
    config: &Config,
    warehouse: &Warehouse,
    wait: std::time::Duration,
) -> Result<Vec<(String, String, Preview)>> {
    let name = &sync.pipeline.name;
    let pattern = sync.pattern().map_err(|e| Error::Config(e.to_string()))?;
    let kafka = &config.kafka;
    let lister = Arc::new(crate::kafka::consumer(
        kafka,
        &format!("{}-{name}", kafka.group_id),
        None,
        OffsetReset::Error,
        name,
    )?);
    let mut topics = list_topics(&lister).await?;
    topics.retain(|t| pattern.is_match(t));
    topics.sort();
    let mut previews = Vec::new();
    for topic in topics {
        let table = sync.table_for(&topic);
        let preview = if config.cdc.iter().any(|c| c.topics.contains(&topic)) {
            Preview::Claimed
        } else if config.table(&table).is_some() {
            Preview::Declared
        } else {
            let id = TableIdentifier::parse(&table)?;
            match Table::open(warehouse, &id).await {
                Ok(t) => Preview::Exists(t.schema().clone()),
                Err(Error::TableNotFound(_)) => {
                    let (_never, mut stop) = watch::channel(false);
                    let pipeline = format!("{name}/{}", id.name);
                    let shape = tokio::time::timeout(
                        wait,
                        first_shape(kafka, &topic, &pipeline, &mut stop),
                    )
                    .await;
                    match shape {
                        Ok(Ok(Some(shape))) => {
                            match sync.table_schema(&id.name, shape.columns, shape.primary_key) {
                                Ok(schema) => Preview::Create(schema),
                                Err(e) => Preview::Refused(e.to_string()),
                            }
                        }
                        Ok(Ok(None)) | Err(_) => Preview::NoRecordYet,
                        Ok(Err(e)) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        previews.push((topic, table, preview));
    }
    Ok(previews)
}
