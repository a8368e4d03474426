//! Builds the CDC, enrich and changelog pipelines of a `connectors.toml`, runs them, and
//! stops them gracefully (final table commits, in-flight output delivered, offsets and
//! changelog positions committed).

pub(crate) mod build;
pub mod cdc;
pub(crate) mod cdc_consumer;
pub mod cdc_mirror;
pub(crate) mod cdc_partitions;
pub(crate) mod cdc_progress;
pub(crate) mod cdc_schema;
pub(crate) mod changelog;
pub(crate) mod database_sync;
pub(crate) mod dead_letter;
pub(crate) mod enrich;

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::config::{CdcConfig, Config, KafkaConfig};
use crate::error::{Error, Result};
use crate::observe::{FaultSource, PipelineKind, PipelineMetrics, Registry};
use crate::table::fence::WriterFence;
use crate::table::{Table, Warehouse};
use cdc_progress::CdcProgress;
use dead_letter::DeadLetters;

#[cfg(test)]
pub(crate) use build::{fact_decoder, open_or_create, output_encoder};

/// Running pipelines.
pub struct Running {
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<(String, Result<()>)>,
    metrics: BTreeMap<String, Arc<PipelineMetrics>>,
    registry: Arc<Registry>,
    /// Pipelines (by name, as in `metrics`) whose task has ended.
    ended: std::collections::BTreeSet<String>,
}

impl Running {
    /// The pipelines' metrics and readiness, as the HTTP endpoint serves them.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Counters of every pipeline, by name.
    pub fn metrics(&self) -> &BTreeMap<String, Arc<PipelineMetrics>> {
        &self.metrics
    }

    /// How many of the configured pipelines still run. The tasks that serve them (table
    /// sinks, writer fences, lookup loads and refreshes) do not count: without a pipeline
    /// they have nothing to do.
    pub(crate) fn pipelines_left(&self) -> usize {
        self.metrics
            .keys()
            .filter(|name| !self.ended.contains(*name))
            .count()
    }

    /// Waits until a pipeline stops on its own (an error), returning its name and result.
    pub async fn next_exit(&mut self) -> Option<(String, Result<()>)> {
        match self.tasks.join_next().await {
            Some(Ok(exit)) => {
                self.ended.insert(exit.0.clone());
                Some(exit)
            }
            Some(Err(e)) => Some(("?".into(), Err(Error::task("pipeline task", e)))),
            None => None,
        }
    }

    /// Stops every pipeline: consumers stop, sinks commit what they have, enrichers
    /// finish the fact in hand, deliver what is in flight and commit offsets. Returns the
    /// first error. Dropping the future part-way aborts the remaining tasks, which is safe
    /// for the tables: a commit publishes its snapshot atomically or not at all.
    pub async fn shutdown(mut self) -> Result<()> {
        self.registry.set_stopping();
        self.shutdown.send_replace(true);
        let mut first_error = None;
        while let Some(exit) = self.next_exit().await {
            if let (name, Err(e)) = exit {
                tracing::error!(pipeline = %name, error = %e, "pipeline failed");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// This host's name, as the writer fence records it.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".into())
}

/// How this process names itself as a table's writer (shown to a writer it fences out).
fn writer_holder(group_id: &str) -> String {
    format!(
        "lakejoin (group {group_id}, pid {}, host {})",
        std::process::id(),
        host_name()
    )
}

/// The deployment this process is one run of: a restart takes the table over from an
/// earlier run at once (see `WriterFence::acquire_as`).
fn writer_instance(group_id: &str) -> String {
    format!("group {group_id} on host {}", host_name())
}

/// Builds and starts every pipeline of `config`.
pub async fn start(config: Config) -> Result<Running> {
    start_with(config, Arc::new(Registry::default())).await
}

/// [`start`], registering every pipeline's metrics in `registry` (served by the HTTP
/// endpoint while this runs); marks the registry started at the end.
pub(crate) async fn start_with(config: Config, registry: Arc<Registry>) -> Result<Running> {
    let warehouse = Warehouse::from_uri(&config.warehouse.uri, &config.warehouse.options)?;
    start_on(config, registry, warehouse).await
}

/// The tasks of the running pipelines and the signal that stops them. Each task ends
/// with its name and result; one that ends on its own stops the process.
struct Tasks {
    set: JoinSet<(String, Result<()>)>,
    shutdown: watch::Receiver<bool>,
}

impl Tasks {
    fn spawn(
        &mut self,
        name: String,
        task: impl std::future::Future<Output = Result<()>> + Send + 'static,
    ) {
        self.set.spawn(async move { (name, task.await) });
    }

    /// Fires at shutdown.
    fn stop(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }
}

/// `start_with` on a warehouse built by the caller instead of from `[warehouse]` (the
/// tests put a store that fails on purpose under running pipelines).
pub async fn start_on(
    config: Config,
    registry: Arc<Registry>,
    warehouse: Warehouse,
) -> Result<Running> {
    let (shutdown_tx, shutdown) = watch::channel(false);
    let mut tasks = Tasks {
        set: JoinSet::new(),
        shutdown,
    };
    let mut metrics = BTreeMap::new();
    let (producer, producer_log) = crate::kafka::producer(&config.kafka)?;
    registry.set_producer_fault(FaultSource(Arc::new(move || producer_log.fault())));

    let tables = build::open_tables(&config, &warehouse).await?;
    let progress = build::cdc_progress(&config);
    let lookups = build::lookups(&config, &tables, &progress).await?;

    for (table_name, joined) in &lookups.tables {
        spawn_lookups(&mut tasks, table_name, joined);
    }

    // CDC: one sink (writer) per table, fed by all of that table's pipelines.
    let mut by_table: BTreeMap<String, Vec<CdcConfig>> = BTreeMap::new();
    for c in &config.cdc {
        by_table.entry(c.table.clone()).or_default().push(c.clone());
    }
    for (table_name, pipelines) in by_table {
        let t = build::table(&tables, &table_name)?;
        let with_metrics: Vec<_> = pipelines
            .into_iter()
            .map(|c| {
                let m = Arc::new(PipelineMetrics::default());
                metrics.insert(c.name.clone(), m.clone());
                registry.register(&c.name, PipelineKind::Cdc, Some(&table_name), m.clone());
                (c, m)
            })
            .collect();
        let writer = TableWriterParts {
            name: &table_name,
            table: &t,
            pipelines: &with_metrics,
            progress: progress.get(&table_name),
        };
        let committed = spawn_table_writer(&mut tasks, &config, writer, &producer).await?;
        // This process's commits reach its lookups right away; then `wait_for_cdc`
        // joins learn that those changes are visible.
        if let Some(joined) = lookups.tables.get(&table_name) {
            let lookups = joined.lookups.clone();
            let progress = progress.get(&table_name).cloned();
            let stop = tasks.stop();
            tasks.spawn(format!("refresh {table_name}"), async move {
                let visible = |commit: Option<Arc<cdc::Committed>>| {
                    if let (Some(progress), Some(commit)) = (&progress, commit) {
                        progress.mark_visible(&commit.positions);
                    }
                };
                lookups.follow_commits(committed, visible, stop).await;
                Ok(())
            });
        }
    }

    for (e, joins) in config.enrich.iter().zip(lookups.enrich) {
        let m = Arc::new(PipelineMetrics::with_joins(joins.metrics));
        metrics.insert(e.name.clone(), m.clone());
        registry.register(&e.name, PipelineKind::Enrich, None, m.clone());
        let run = enrich::run(
            e.clone(),
            KafkaConfig {
                group_instance_id: config.group_instance_id(),
                ..config.kafka.clone()
            },
            joins.joins,
            build::fact_decoder(e)?,
            build::output_encoder(&e.output)?,
            producer.clone(),
            DeadLetters::new(e.dead_letter_topic.clone(), producer.clone()),
            m,
            tasks.stop(),
        );
        tasks.spawn(e.name.clone(), run);
    }

    // Whole-database syncs: each starts a writer and a consumer per table it follows.
    if !config.database_sync.is_empty() {
        let shared = Arc::new(config.clone());
        for sync in &config.database_sync {
            let cx = database_sync::SyncContext {
                config: shared.clone(),
                warehouse: warehouse.clone(),
                declared: tables.clone(),
                producer: producer.clone(),
                registry: registry.clone(),
            };
            let run = database_sync::run(sync.clone(), cx, tasks.stop());
            tasks.spawn(sync.pipeline.name.clone(), run);
        }
    }

    // Changelog: each reads its table's snapshots on its own (this process's CDC commits
    // included) and produces through the shared producer.
    for c in &config.changelog {
        let t = build::table(&tables, &c.table)?;
        let m = Arc::new(PipelineMetrics::default());
        metrics.insert(c.name.clone(), m.clone());
        registry.register(&c.name, PipelineKind::Changelog, Some(&c.table), m.clone());
        let run = changelog::run(c.clone(), t, producer.clone(), m, tasks.stop());
        tasks.spawn(c.name.clone(), run);
    }
    registry.set_started();
    Ok(Running {
        shutdown: shutdown_tx,
        tasks: tasks.set,
        metrics,
        registry,
        ended: Default::default(),
    })
}

/// The tasks that keep one joined table's lookups current: the `full` caches' load (its
/// pipelines start consuming once loaded), then the poll for other writers' snapshots
/// and newer partitions. Both stay until shutdown.
fn spawn_lookups(tasks: &mut Tasks, table_name: &str, joined: &build::JoinedTable) {
    let lookups = joined.lookups.clone();
    let mut stop = tasks.stop();
    tasks.spawn(format!("load {table_name}"), async move {
        lookups.load().await?;
        let _ = stop.changed().await;
        Ok(())
    });
    let lookups = joined.lookups.clone();
    let (refresh, partitions) = (joined.refresh_interval, joined.partition_refresh_interval);
    let stop = tasks.stop();
    tasks.spawn(format!("poll {table_name}"), async move {
        lookups.poll(refresh, partitions, stop).await;
        Ok(())
    });
}

/// One table's writer, as [`spawn_table_writer`] starts it.
struct TableWriterParts<'a> {
    /// The table's configured name (its commit user derives from it).
    name: &'a str,
    table: &'a Arc<Table>,
    /// Its CDC pipelines.
    pipelines: &'a [(CdcConfig, Arc<PipelineMetrics>)],
    /// The progress its `wait_for_cdc` joins follow, if any.
    progress: Option<&'a Arc<CdcProgress>>,
}

/// The writer of one table and the CDC pipelines feeding it: claims the writer fence
/// (a standby waits here for the holder to stop) and keeps it alive, opens the sink where
/// the table's snapshots say to resume, and starts one consumer per pipeline. Returns
/// the sink's announcements of each commit.
async fn spawn_table_writer(
    tasks: &mut Tasks,
    config: &Config,
    writer: TableWriterParts<'_>,
    producer: &crate::kafka::Producer,
) -> Result<watch::Receiver<Option<Arc<cdc::Committed>>>> {
    let TableWriterParts {
        name: table_name,
        table,
        pipelines,
        progress,
    } = writer;
    let user = cdc::commit_user(&config.kafka.group_id, table_name);
    // Claimed before the sink reads where to resume: from here on nobody else commits
    // as this table's writer.
    let fence = Arc::new(
        WriterFence::acquire_as(
            table,
            &writer_holder(&config.kafka.group_id),
            &config
                .writer
                .instance
                .clone()
                .unwrap_or_else(|| writer_instance(&config.kafka.group_id)),
            config.fence_options(table_name),
        )
        .await?,
    );
    let (mut sink, committed) =
        cdc::TableSink::open(table.clone(), &user, pipelines, Some(fence.clone())).await?;
    let evolutions = sink.evolution_requests();
    // Ends with an error once another writer took over: the process stops.
    let (keep_alive, stop) = (fence.clone(), tasks.stop());
    tasks.spawn(format!("writer fence {table_name}"), async move {
        keep_alive.keep_alive(stop).await
    });
    // Batches of up to 512 records (cdc_consumer::GATHER_RECORDS): the consumers may run this far ahead of
    // a commit (tens of thousands of changes), which keeps them decoding while it flushes.
    let (tx, rx) = mpsc::channel(128);
    for (c, m) in pipelines {
        let run = cdc_consumer::run_consumer(
            c.clone(),
            config.kafka.clone(),
            table.clone(),
            build::cdc_decoder(c, table)?,
            sink.resume(&c.name),
            tx.clone(),
            evolutions.clone(),
            DeadLetters::new(c.dead_letter_topic.clone(), producer.clone()),
            m.clone(),
            committed.clone(),
            sink.schema_updates(),
            progress.cloned(),
            tasks.stop(),
        );
        tasks.spawn(c.name.clone(), run);
    }
    drop((tx, evolutions));
    let (stop, name) = (tasks.stop(), format!("table {table_name}"));
    tasks.spawn(name.clone(), async move {
        let result = sink.run(rx, stop).await;
        // After the last commit: a standby may take over at once.
        if let Err(e) = fence.release().await {
            tracing::warn!(table = %name, error = %e, "could not release the writer fence");
        }
        result
    });
    Ok(committed)
}
