//! Builds the CDC and enrich pipelines of a `connectors.toml`, runs them, and stops them
//! gracefully (final table commits, in-flight output delivered, offsets committed).

pub mod cdc;
pub mod cdc_partitions;
pub mod dead_letter;
pub mod enrich;
pub mod progress;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::codec::{
    AvroSchema, AvroSchemas, CdcDecoder, CdcOptions, FactDecoder, Format, Metadata, OutputEncoder,
    RowChange, SchemaResolver, UpdateMode,
};
use crate::config::secret::SecretUri;
use crate::config::{
    CacheKind, CdcConfig, Config, EnrichConfig, KafkaConfig, OutputConfig, PartitionSelection,
};
use crate::error::{Error, Result};
use crate::lookup::{
    LookupSpec, LookupTable, PartialOptions, PartitionChoice, Strategy, TableLookups,
};
use crate::lsm::lookup::{LookupOptions, PointLookup};
use crate::lsm::merge::{Admission, MergeEngine};
use crate::observe::{FaultSource, JoinMetrics, PipelineKind, PipelineMetrics, Registry};
use crate::table::fence::WriterFence;
use crate::table::options::{MergeEngineKind, TableOptions};
use crate::table::schema::TableSchema;
use crate::table::{Table, TableIdentifier, Warehouse};
use dead_letter::DeadLetters;
use progress::CdcProgress;

/// Checks a decoded change against the table before it is queued, so that a bad record
/// is dead-lettered by its pipeline instead of failing the table's writer.
pub struct RowValidator {
    schema: Arc<TableSchema>,
    engine: MergeEngine,
    /// `rowkind.field`: the kind the writer applies comes from this column.
    row_kind_column: Option<usize>,
}

impl RowValidator {
    pub fn new(table: &Table) -> Result<Self> {
        Ok(RowValidator {
            schema: table.schema().clone(),
            engine: MergeEngine::new(table.schema(), table.options())?,
            row_kind_column: crate::lsm::writer::row_kind_column(table.schema()),
        })
    }

    /// `Err` with the reason when the table would reject the change.
    pub fn check(&self, change: &RowChange) -> std::result::Result<(), String> {
        crate::lsm::writer::check_row(&self.schema, &change.row)?;
        let kind = crate::lsm::writer::row_kind_of(
            &self.schema,
            self.row_kind_column,
            change.kind,
            &change.row,
        )?;
        match self.engine.admit(kind)? {
            Admission::Keep | Admission::Drop => Ok(()),
        }
    }
}

/// The update mode when `update_mode` is not set: what the table can take.
/// Aggregation tables retract the old values (`-U`); partial-update tables with sequence
/// groups retract their group; other partial-update tables reject retractions (as Paimon
/// does without `ignore-delete`), so they get the after image only; deduplicate and
/// first-row tables get Paimon's CDC default, `-D`/`+I`.
fn default_update_mode(options: &TableOptions) -> UpdateMode {
    match options.merge_engine {
        MergeEngineKind::Aggregation => UpdateMode::UpdateBeforeAfter,
        MergeEngineKind::PartialUpdate if !options.sequence_groups.is_empty() => {
            UpdateMode::UpdateBeforeAfter
        }
        MergeEngineKind::PartialUpdate => UpdateMode::Upsert,
        _ => UpdateMode::DeleteInsert,
    }
}

fn read_schema_file(path: &str) -> Result<Arc<AvroSchema>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Config(format!("schema_file {path}: {e}")))?;
    Ok(Arc::new(AvroSchema::parse(&text).map_err(|e| {
        Error::Config(format!("schema_file {path}: {e}"))
    })?))
}

fn avro_schemas(
    schema_file: &Option<String>,
    registry: &Option<SecretUri>,
) -> Result<Option<AvroSchemas>> {
    Ok(match (schema_file, registry) {
        (_, Some(url)) => Some(AvroSchemas::Confluent(Arc::new(
            SchemaResolver::new().with_registry(url.expose())?,
        ))),
        (Some(file), None) => Some(AvroSchemas::Plain(read_schema_file(file)?)),
        (None, None) => None,
    })
}

fn parse_format(name: &str) -> Result<Format> {
    name.parse::<Format>()
        .map_err(|e| Error::Config(format!("format `{name}`: {e}")))
}

/// The decoder of a CDC pipeline writing `table`.
pub fn cdc_decoder(config: &CdcConfig, table: &Table) -> Result<CdcDecoder> {
    let mut metadata = BTreeMap::new();
    for (column, name) in &config.metadata {
        let m = name
            .parse::<Metadata>()
            .map_err(|e| Error::Config(format!("cdc {}: metadata.{column}: {e}", config.name)))?;
        metadata.insert(column.clone(), m);
    }
    let update_mode = match config.update_mode.as_deref() {
        Some("delete-insert") => UpdateMode::DeleteInsert,
        Some("update-before-after") => UpdateMode::UpdateBeforeAfter,
        Some("upsert") => UpdateMode::Upsert,
        Some(other) => {
            return Err(Error::Config(format!(
                "cdc {}: update_mode must be delete-insert, update-before-after or upsert, \
                 got `{other}`",
                config.name
            )));
        }
        None => default_update_mode(table.options()),
    };
    let options = CdcOptions {
        field_paths: config.fields.clone(),
        metadata,
        row_kind_field: config.row_kind_field.clone(),
        update_mode,
        avro: avro_schemas(&config.schema_file, &config.schema_registry)?,
        ..CdcOptions::default()
    };
    CdcDecoder::new(
        parse_format(&config.format)?,
        table.schema().clone(),
        options,
    )
}

/// The fact decoder of an enrich pipeline.
pub fn fact_decoder(config: &EnrichConfig) -> Result<FactDecoder> {
    FactDecoder::new(
        parse_format(&config.format)?,
        avro_schemas(&config.schema_file, &config.schema_registry)?,
    )
}

/// The output encoder of an enrich pipeline.
pub fn output_encoder(config: &OutputConfig) -> Result<OutputEncoder> {
    match config.format.as_str() {
        "json" => Ok(OutputEncoder::Json),
        "avro" => {
            let file = config
                .schema_file
                .as_ref()
                .ok_or_else(|| Error::Config("output format avro needs schema_file".into()))?;
            Ok(OutputEncoder::Avro {
                schema: read_schema_file(file)?,
                confluent_id: None,
            })
        }
        other => Err(Error::Config(format!(
            "output format `{other}` is not json or avro"
        ))),
    }
}

/// Opens the table, creating it when absent; an existing table must have the configured
/// columns, keys and merge engine.
pub async fn open_or_create(
    warehouse: &Warehouse,
    name: &str,
    wanted: TableSchema,
) -> Result<Arc<Table>> {
    let id = TableIdentifier::parse(name)?;
    match Table::open(warehouse, &id).await {
        Ok(table) => {
            let have = table.schema();
            let mut problems = Vec::new();
            let describe = |s: &TableSchema| {
                s.fields
                    .iter()
                    .map(|f| format!("{} {}", f.name, f.type_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if describe(have) != describe(&wanted) {
                problems.push(format!(
                    "columns are [{}], configured [{}]",
                    describe(have),
                    describe(&wanted)
                ));
            }
            if have.primary_keys != wanted.primary_keys {
                problems.push(format!(
                    "primary key is {:?}, configured {:?}",
                    have.primary_keys, wanted.primary_keys
                ));
            }
            if have.partition_keys != wanted.partition_keys {
                problems.push(format!(
                    "partition keys are {:?}, configured {:?}",
                    have.partition_keys, wanted.partition_keys
                ));
            }
            for key in ["bucket", "merge-engine", "sequence.field"] {
                if have.options.get(key) != wanted.options.get(key) {
                    problems.push(format!(
                        "option `{key}` is {:?}, configured {:?}",
                        have.options.get(key),
                        wanted.options.get(key)
                    ));
                }
            }
            if problems.is_empty() {
                Ok(Arc::new(table))
            } else {
                Err(Error::Config(format!(
                    "table {name} exists with a different schema: {}",
                    problems.join("; ")
                )))
            }
        }
        Err(Error::TableNotFound(_)) => match Table::create(warehouse, &id, wanted.clone()).await {
            Ok(t) => Ok(Arc::new(t)),
            // Another process created it first: check it like an existing one.
            Err(Error::TableExists(_)) => Box::pin(open_or_create(warehouse, name, wanted)).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// A joined table while the pipelines are assembled.
struct JoinedTable {
    point: Arc<PointLookup>,
    joins: Vec<Arc<LookupTable>>,
    refresh_interval: Duration,
    partition_refresh_interval: Option<Duration>,
}

/// The cache strategy of a join.
fn lookup_strategy(join: &crate::config::JoinConfig) -> Strategy {
    match join.cache {
        CacheKind::None => Strategy::None,
        CacheKind::Full => Strategy::Full,
        CacheKind::Partial => Strategy::Partial(PartialOptions {
            max_rows: join.cache_max_rows,
            max_bytes: join.cache_max_bytes,
            expire_after_write: join.cache_expire_after_write,
            expire_after_access: join.cache_expire_after_access,
            cache_missing_keys: join.cache_missing_keys,
        }),
    }
}

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
    pub fn pipelines_left(&self) -> usize {
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
pub async fn start_with(config: Config, registry: Arc<Registry>) -> Result<Running> {
    let warehouse = Warehouse::from_uri(&config.warehouse.uri, &config.warehouse.options)?;
    start_on(config, registry, warehouse).await
}

/// [`start_with`] on a warehouse built by the caller instead of from `[warehouse]` (the
/// tests put a store that fails on purpose under running pipelines).
pub async fn start_on(
    config: Config,
    registry: Arc<Registry>,
    warehouse: Warehouse,
) -> Result<Running> {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut metrics = BTreeMap::new();
    let (producer, producer_log) = crate::kafka::producer(&config.kafka)?;
    registry.set_producer_fault(FaultSource(Arc::new(move || producer_log.fault())));

    let mut tables: BTreeMap<String, Arc<Table>> = BTreeMap::new();
    for t in &config.tables {
        tables.insert(
            t.name.clone(),
            open_or_create(&warehouse, &t.name, t.to_schema()?).await?,
        );
    }
    let table = |name: &str| {
        tables
            .get(name)
            .cloned()
            .ok_or_else(|| Error::Config(format!("table {name} is not defined")))
    };

    // `wait_for_cdc` joins follow the CDC progress of their table.
    let mut progress: BTreeMap<String, Arc<CdcProgress>> = BTreeMap::new();
    for j in config.enrich.iter().flat_map(|e| &e.join) {
        if j.wait_for_cdc {
            progress.entry(j.table.clone()).or_default();
        }
    }

    // Lookups: one point lookup per joined table, one lookup table (cache) per join.
    let mut joined: BTreeMap<String, JoinedTable> = BTreeMap::new();
    let mut enrich_joins = Vec::new();
    let mut enrich_join_metrics = Vec::new();
    for e in &config.enrich {
        let mut joins = Vec::new();
        let mut join_metrics = Vec::new();
        for j in &e.join {
            let t = table(&j.table)?;
            let entry = match joined.entry(j.table.clone()) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => v.insert(JoinedTable {
                    point: Arc::new(PointLookup::open(t.clone(), LookupOptions::default()).await?),
                    joins: Vec::new(),
                    refresh_interval: j.refresh_interval,
                    partition_refresh_interval: None,
                }),
            };
            entry.refresh_interval = entry.refresh_interval.min(j.refresh_interval);
            if matches!(&j.partition, Some(PartitionSelection::Function(_))) {
                entry.partition_refresh_interval = Some(
                    entry
                        .partition_refresh_interval
                        .map_or(j.partition_refresh_interval, |i| {
                            i.min(j.partition_refresh_interval)
                        }),
                );
            }
            let plan = enrich::JoinPlan::new(j, t.schema())?;
            let spec = LookupSpec {
                strategy: lookup_strategy(j),
                key_columns: plan.key_columns.clone(),
                projection: plan.projection.clone(),
                partition: j
                    .partition
                    .as_ref()
                    .map(|p| PartitionChoice::resolve(p, &t))
                    .transpose()?,
            };
            let lookup = Arc::new(LookupTable::new(entry.point.clone(), spec)?);
            entry.joins.push(lookup.clone());
            join_metrics.push(JoinMetrics::new(&j.table).with_lookup(lookup.clone()));
            joins.push(enrich::Join::new(
                j,
                plan,
                lookup,
                progress.get(&j.table).cloned(),
            ));
        }
        enrich_joins.push(joins);
        enrich_join_metrics.push(join_metrics);
    }
    let lookup_tables: BTreeMap<String, (Arc<TableLookups>, JoinedTable)> = joined
        .into_iter()
        .map(|(name, j)| {
            let lookups = Arc::new(TableLookups::new(j.point.clone(), j.joins.clone()));
            (name, (lookups, j))
        })
        .collect();

    // `full` caches load in the background; their pipelines start consuming once loaded.
    for (table_name, (lookups, _)) in &lookup_tables {
        let lookups = lookups.clone();
        let name = format!("load {table_name}");
        let mut stop = shutdown_rx.clone();
        // Stays until shutdown: a pipeline task that ends on its own stops the process.
        tasks.spawn(async move {
            if let Err(e) = lookups.load().await {
                return (name, Err(e));
            }
            let _ = stop.changed().await;
            (name, Ok(()))
        });
    }

    // CDC: one sink (writer) per table, fed by all of that table's pipelines.
    let mut by_table: BTreeMap<String, Vec<crate::config::CdcConfig>> = BTreeMap::new();
    for c in &config.cdc {
        by_table.entry(c.table.clone()).or_default().push(c.clone());
    }
    for (table_name, pipelines) in by_table {
        let t = table(&table_name)?;
        let with_metrics: Vec<_> = pipelines
            .iter()
            .map(|c| {
                let m = Arc::new(PipelineMetrics::default());
                metrics.insert(c.name.clone(), m.clone());
                registry.register(&c.name, PipelineKind::Cdc, Some(&table_name), m.clone());
                (c.clone(), m)
            })
            .collect();
        let user = cdc::commit_user(&config.kafka.group_id, &table_name);
        // Claimed before the sink reads where to resume: from here on nobody else
        // commits as this table's writer (standby: waits here for the holder to stop).
        let fence = Arc::new(
            WriterFence::acquire_as(
                &t,
                &writer_holder(&config.kafka.group_id),
                &config
                    .writer
                    .instance
                    .clone()
                    .unwrap_or_else(|| writer_instance(&config.kafka.group_id)),
                config.fence_options(&table_name),
            )
            .await?,
        );
        let (sink, committed) =
            cdc::TableSink::open(t.clone(), &user, &with_metrics, Some(fence.clone())).await?;
        tasks.spawn({
            let name = format!("writer fence {table_name}");
            let fence = fence.clone();
            let stop = shutdown_rx.clone();
            // Ends with an error once another writer took over: the process stops.
            async move { (name, fence.keep_alive(stop).await) }
        });
        let (tx, rx) = mpsc::channel(1024);
        for (c, m) in &with_metrics {
            let decoder = cdc_decoder(c, &t)?;
            let resume = sink.resume_offsets(&c.name);
            let dead = DeadLetters::new(c.dead_letter_topic.clone(), producer.clone());
            let name = c.name.clone();
            let run = cdc::run_consumer(
                c.clone(),
                config.kafka.clone(),
                t.clone(),
                decoder,
                resume,
                tx.clone(),
                dead,
                m.clone(),
                committed.clone(),
                progress.get(&table_name).cloned(),
                shutdown_rx.clone(),
            );
            tasks.spawn(async move { (name, run.await) });
        }
        drop(tx);
        let sink_shutdown = shutdown_rx.clone();
        tasks.spawn({
            let name = format!("table {table_name}");
            async move {
                let result = sink.run(rx, sink_shutdown).await;
                // After the last commit: a standby may take over at once.
                if let Err(e) = fence.release().await {
                    tracing::warn!(table = %name, error = %e, "could not release the writer fence");
                }
                (name, result)
            }
        });
        // This process's commits reach its lookups right away; then `wait_for_cdc`
        // joins learn that those changes are visible.
        if let Some((lookups, _)) = lookup_tables.get(&table_name) {
            let lookups = lookups.clone();
            let progress = progress.get(&table_name).cloned();
            let mut committed = committed.clone();
            let mut stop = shutdown_rx.clone();
            let name = format!("refresh {table_name}");
            tasks.spawn(async move {
                loop {
                    tokio::select! {
                        changed = committed.changed() => {
                            if changed.is_err() { break; }
                            let commit = committed.borrow_and_update().clone();
                            // A failed refresh (the store blinked) is tried again with
                            // backoff, not the end of the process: until it succeeds the
                            // lookups read the snapshot before, and `wait_for_cdc` joins
                            // wait (up to `max_wait`) rather than see the commit early.
                            let mut wait = Duration::from_millis(100);
                            while let Err(e) = lookups.refresh().await {
                                tracing::warn!(table = %table_name, error = %e, retry_in = ?wait, "lookup refresh after a commit failed; trying again");
                                tokio::select! {
                                    _ = tokio::time::sleep(wait) => {}
                                    _ = stop.changed() => return (name, Ok(())),
                                }
                                wait = (wait * 2).min(Duration::from_secs(30));
                            }
                            if let (Some(progress), Some(commit)) = (&progress, commit) {
                                progress.mark_visible(&commit.positions);
                            }
                        }
                        _ = stop.changed() => break,
                    }
                }
                (name, Ok(()))
            });
        }
    }

    // Snapshots written by other processes are picked up every `refresh_interval`;
    // `max_pt()` joins look for a newer partition every `partition_refresh_interval`.
    for (table_name, (lookups, joined)) in &lookup_tables {
        let lookups = lookups.clone();
        let table_name = table_name.clone();
        let mut stop = shutdown_rx.clone();
        let name = format!("poll {table_name}");
        let refresh_interval = joined.refresh_interval;
        let partition_interval = joined.partition_refresh_interval;
        tasks.spawn(async move {
            let mut refresh_tick = tokio::time::interval(refresh_interval);
            let mut partition_tick =
                tokio::time::interval(partition_interval.unwrap_or(Duration::from_secs(3600)));
            loop {
                tokio::select! {
                    _ = refresh_tick.tick() => {
                        if let Err(e) = lookups.refresh().await {
                            tracing::warn!(table = %table_name, error = %e, "lookup refresh failed; retrying later");
                        }
                    }
                    _ = partition_tick.tick(), if partition_interval.is_some() => {
                        if let Err(e) = lookups.refresh_partitions().await {
                            tracing::warn!(table = %table_name, error = %e, "partition refresh failed; retrying later");
                        }
                    }
                    _ = stop.changed() => break,
                }
            }
            (name, Ok(()))
        });
    }

    for ((e, joins), join_metrics) in config
        .enrich
        .iter()
        .zip(enrich_joins)
        .zip(enrich_join_metrics)
    {
        let m = Arc::new(PipelineMetrics::with_joins(join_metrics));
        metrics.insert(e.name.clone(), m.clone());
        registry.register(&e.name, PipelineKind::Enrich, None, m.clone());
        let decoder = fact_decoder(e)?;
        let encoder = output_encoder(&e.output)?;
        let dead = DeadLetters::new(e.dead_letter_topic.clone(), producer.clone());
        let name = e.name.clone();
        let run = enrich::run(
            e.clone(),
            KafkaConfig {
                group_instance_id: config.group_instance_id(),
                ..config.kafka.clone()
            },
            joins,
            decoder,
            encoder,
            producer.clone(),
            dead,
            m,
            shutdown_rx.clone(),
        );
        tasks.spawn(async move { (name, run.await) });
    }
    registry.set_started();
    Ok(Running {
        shutdown: shutdown_tx,
        tasks,
        metrics,
        registry,
        ended: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "localhost:9092"
[warehouse]
uri = "memory://"
[[table]]
name = "shop.customers"
columns = [{ name = "id", type = "INT" }, { name = "name", type = "STRING" }, { name = "ts", type = "BIGINT" }]
primary_key = ["id"]
buckets = 1
sequence_field = ["ts"]
[[cdc]]
name = "c"
topics = ["t"]
format = "debezium-json"
table = "shop.customers"
metadata = { ts = "ingestion-timestamp" }
"#;

    async fn table(config: &Config) -> Arc<Table> {
        let warehouse = Warehouse::in_memory();
        open_or_create(
            &warehouse,
            "shop.customers",
            config.tables[0].to_schema().unwrap(),
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn cdc_decoders_follow_the_pipeline_config() {
        let config = crate::config::from_toml("test", CONFIG).unwrap();
        let t = table(&config).await;
        let decoder = cdc_decoder(&config.cdc[0], &t).unwrap();
        let record = crate::codec::KafkaRecord {
            topic: "t",
            partition: 0,
            offset: 0,
            timestamp_ms: None,
            key: None,
            payload: Some(br#"{"op":"c","ts_ms":42,"before":null,"after":{"id":1,"name":"ada"}}"#),
        };
        match decoder.decode(&record).unwrap() {
            crate::codec::Decoded::Changes(changes) => {
                assert_eq!(
                    changes[0].row[2],
                    crate::table::datum::Datum::BigInt(42),
                    "ts_ms fills `ts`"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        let mut bad = config.cdc[0].clone();
        bad.update_mode = Some("sideways".into());
        assert!(
            cdc_decoder(&bad, &t)
                .unwrap_err()
                .to_string()
                .contains("update_mode")
        );
        bad.update_mode = None;
        bad.metadata.insert("name".into(), "moon_phase".into());
        assert!(
            cdc_decoder(&bad, &t)
                .unwrap_err()
                .to_string()
                .contains("metadata.name")
        );
    }

    #[tokio::test]
    async fn an_existing_table_must_match_its_definition() {
        let config = crate::config::from_toml("test", CONFIG).unwrap();
        let warehouse = Warehouse::in_memory();
        let schema = config.tables[0].to_schema().unwrap();
        open_or_create(&warehouse, "shop.customers", schema.clone())
            .await
            .unwrap();
        open_or_create(&warehouse, "shop.customers", schema)
            .await
            .unwrap();
        let text = CONFIG.replace(
            r#"{ name = "name", type = "STRING" }"#,
            r#"{ name = "name", type = "INT" }"#,
        );
        let changed = crate::config::from_toml("test", &text).unwrap();
        let err = open_or_create(
            &warehouse,
            "shop.customers",
            changed.tables[0].to_schema().unwrap(),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("exists with a different schema") && err.contains("name INT"),
            "{err}"
        );
    }
}
