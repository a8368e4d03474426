//! The `connectors.toml` model. Every struct rejects unknown keys (reported all at once
//! by [`super::load`]); defaults are the documented ones.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::duration;
use crate::secret::SecretUri;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub kafka: KafkaConfig,
    pub warehouse: WarehouseConfig,
    #[serde(default, rename = "table")]
    pub tables: Vec<TableConfig>,
    #[serde(default)]
    pub cdc: Vec<CdcConfig>,
    /// `[[cdc]]` entries with `topics_pattern` and `database`: whole databases followed.
    #[serde(skip)]
    pub database_sync: Vec<super::DatabaseSync>,
    #[serde(default)]
    pub(crate) enrich: Vec<EnrichConfig>,
    /// `[[changelog]]`: tables' changes produced to Kafka.
    #[serde(default)]
    pub(crate) changelog: Vec<ChangelogConfig>,
    /// `[observe]` (optional).
    #[serde(default)]
    pub observe: ObserveConfig,
    /// `[run]` (optional).
    #[serde(default)]
    pub run: RunConfig,
    /// `[writer]` (optional): how CDC writers share tables with other processes.
    #[serde(default)]
    pub(crate) writer: WriterConfig,
}

/// `[writer]`: one writer per table (the fence in `<table>/_lakejoin/writer/`). A second
/// process configured to write a table either refuses to start or stands by.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct WriterConfig {
    /// `fail` (default): refuse to start, naming the process that holds the table.
    /// `standby`: wait and take over once the holder stops heartbeating (within
    /// `lease_timeout` + `heartbeat_interval` of its death; at once after a clean stop).
    /// A table's `writer_on_conflict` overrides this.
    pub(crate) on_conflict: OnConflict,
    /// A holder that has not heartbeated for this long (default 30s) is taken to be dead.
    /// Hosts and the object store must agree on the time to well within it.
    #[serde(deserialize_with = "duration::deserialize")]
    pub(crate) lease_timeout: Duration,
    /// How often the holder renews its lease (default 5s); at most half the lease.
    #[serde(deserialize_with = "duration::deserialize")]
    pub(crate) heartbeat_interval: Duration,
    /// Names this deployment as a table's writer: a process that finds the table held by
    /// its own instance (a restart after a crash) takes it over at once instead of waiting
    /// out the lease. Default `group <kafka.group_id> on host <hostname>`. Set it where the
    /// hostname changes on every restart (a Kubernetes Deployment), e.g. to the
    /// Deployment's name; two processes running at once must never share it.
    pub(crate) instance: Option<String>,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            on_conflict: OnConflict::Fail,
            lease_timeout: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(5),
            instance: None,
        }
    }
}

/// `[writer] on_conflict`: what a writer does when another one holds its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnConflict {
    #[default]
    Fail,
    Standby,
}

/// `[observe]`: the HTTP endpoint (`/metrics`, `/health/live`, `/health/ready`), log
/// format and progress lines.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ObserveConfig {
    /// `host:port` of the HTTP endpoint. Loopback by default, so nothing is exposed unless
    /// configured (`0.0.0.0:9464` in a container); port 0 picks a free port.
    pub(crate) listen: String,
    /// `human` (default) or `json` (one JSON object per line).
    pub(crate) log_format: LogFormat,
    /// One progress line per pipeline this often (default 10s).
    #[serde(deserialize_with = "duration::deserialize")]
    pub(crate) progress_interval: Duration,
}

impl Default for ObserveConfig {
    fn default() -> Self {
        ObserveConfig {
            listen: DEFAULT_LISTEN.into(),
            log_format: LogFormat::default(),
            progress_interval: Duration::from_secs(10),
        }
    }
}

/// Default `[observe] listen`.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// How log lines are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// `[run]`: the lifecycle of `lakejoin run`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RunConfig {
    /// After SIGTERM/SIGINT, pipelines have this long (default 30s) to finish in-flight
    /// work, commit tables and offsets; then the process exits anyway.
    #[serde(deserialize_with = "duration::deserialize")]
    pub shutdown_timeout: Duration,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            shutdown_timeout: Duration::from_secs(30),
        }
    }
}

/// `[kafka]`: typed settings plus librdkafka properties passed verbatim.
#[derive(Clone, Deserialize)]
pub struct KafkaConfig {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// Consumer group of every pipeline (each pipeline appends its name).
    #[serde(default = "default_group_id")]
    pub(crate) group_id: String,
    /// Static group membership (`group.instance.id`, KIP-345) of the enrich consumers: a
    /// process restarted under the same id (after a crash or `kill -9`) gets its
    /// partitions back at once, without a rebalance and without waiting out
    /// `session.timeout.ms`. Default: `[writer] instance` when set (characters Kafka does
    /// not allow become `_`), else dynamic membership. Two processes running at once must
    /// never share it: the broker fences the older one. Set it where a process's identity
    /// survives its restarts (a StatefulSet's pod name, a systemd unit); leave it unset in
    /// a Deployment whose pods get new names, where a departed static member would hold
    /// its partitions for `session.timeout.ms`.
    pub(crate) group_instance_id: Option<String>,
    /// Any librdkafka property (`security.protocol`, `sasl.*`, `ssl.*`, …); wins over the
    /// typed fields. Values are never logged.
    #[serde(default)]
    pub(crate) properties: BTreeMap<String, String>,
}

impl std::fmt::Debug for KafkaConfig {
    /// Prints property names only: values may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaConfig")
            .field(
                "bootstrap_servers",
                &crate::secret::redact_uri(&self.bootstrap_servers),
            )
            .field("group_id", &self.group_id)
            .field("group_instance_id", &self.group_instance_id)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn default_group_id() -> String {
    "lakejoin".into()
}

/// `[warehouse]`.
#[derive(Clone, Deserialize)]
pub struct WarehouseConfig {
    /// `file:///dir`, a directory, `memory://`, `s3://bucket/prefix`.
    pub uri: String,
    /// object_store options (`aws_endpoint`, `aws_access_key_id`, …). Values never logged.
    #[serde(default)]
    pub(crate) options: BTreeMap<String, String>,
}

impl std::fmt::Debug for WarehouseConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarehouseConfig")
            .field("uri", &crate::secret::redact_uri(&self.uri))
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// `[[table]]`: a primary-key table, created on start when absent.
#[derive(Debug, Clone, Deserialize)]
pub struct TableConfig {
    /// `database.table`.
    pub(crate) name: String,
    pub(crate) columns: Vec<ColumnConfig>,
    pub(crate) primary_key: Vec<String>,
    #[serde(default)]
    pub(crate) partition_by: Vec<String>,
    pub(crate) buckets: i32,
    #[serde(default)]
    pub(crate) merge_engine: Option<String>,
    #[serde(default)]
    pub(crate) sequence_field: Vec<String>,
    /// Further Paimon table options, stored in the schema.
    #[serde(default)]
    pub(crate) options: BTreeMap<String, String>,
    /// `fail` or `standby` for this table's writer (default: `[writer] on_conflict`).
    #[serde(default)]
    pub(crate) writer_on_conflict: Option<OnConflict>,
}

/// One column: `{ name = "id", type = "INT" }`, optionally with `comment = "…"`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ColumnConfig {
    pub(crate) name: String,
    #[serde(rename = "type")]
    pub(crate) data_type: String,
    /// The column's comment (Flink's `COMMENT`), written to the schema when lakejoin
    /// creates the table; an existing table keeps its own.
    #[serde(default)]
    pub(crate) comment: Option<String>,
}

/// Where a pipeline starts when it has no committed position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum StartFrom {
    #[default]
    Earliest,
    Latest,
}

/// What a CDC pipeline does when a partition's saved position is outside the log, as
/// Kafka's `auto.offset.reset` with `none` as the default: the table would otherwise miss
/// changes silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OffsetOutOfRange {
    /// Stop the pipeline with an error naming the partition, the saved offset and the log.
    #[default]
    Fail,
    /// Accept the loss and go on from the oldest record still in the log.
    Earliest,
    /// Accept the loss and go on from the end of the log.
    Latest,
}

/// `[[cdc]]`: change topics upserted into one table.
#[derive(Debug, Clone, Deserialize)]
pub struct CdcConfig {
    pub(crate) name: String,
    pub(crate) topics: Vec<String>,
    /// json, debezium-json, canal-json, maxwell-json, upsert-json, avro, debezium-avro.
    pub(crate) format: String,
    pub(crate) table: String,
    /// Commit to the table at least this often (default 5s).
    #[serde(
        default = "default_commit_interval",
        deserialize_with = "duration::deserialize"
    )]
    pub(crate) commit_interval: Duration,
    /// …or after this many changes (default 100,000).
    #[serde(default = "default_commit_max_rows")]
    pub(crate) commit_max_rows: usize,
    #[serde(default)]
    pub(crate) dead_letter_topic: Option<String>,
    #[serde(default)]
    pub(crate) start_from: StartFrom,
    /// What to do when a partition's position saved in the table is no longer in the
    /// topic (retention deleted records this pipeline never read, or the topic was
    /// recreated): `fail` (default) stops the pipeline naming the partition and the gap.
    #[serde(default)]
    pub(crate) on_offset_out_of_range: OffsetOutOfRange,
    /// How often the topics are looked up for partitions added since start; new ones are
    /// read from their beginning (default 30s).
    #[serde(
        default = "default_partition_discovery_interval",
        deserialize_with = "duration::deserialize"
    )]
    pub(crate) partition_discovery_interval: Duration,
    /// Member holding the row kind for `json` (e.g. `op` with +I/-U/+U/-D).
    #[serde(default)]
    pub(crate) row_kind_field: Option<String>,
    /// Avro schema file (`avro`, `debezium-avro` without a registry).
    #[serde(default)]
    pub(crate) schema_file: Option<String>,
    /// Confluent schema registry URL (its credentials masked in Debug output).
    #[serde(default)]
    pub(crate) schema_registry: Option<SecretUri>,
    /// Column → message metadata filling it: `ingestion-timestamp` (Debezium `ts_ms`,
    /// Canal/Maxwell `ts`; usable as a sequence field), `source-timestamp`, `database`,
    /// `table`, `topic`, `partition`, `offset`, `timestamp`.
    #[serde(default)]
    pub(crate) metadata: BTreeMap<String, String>,
    /// Column → dotted path of its field when named differently or nested.
    #[serde(default)]
    pub(crate) fields: BTreeMap<String, String>,
    /// Updates as `-D`/`+I` (`delete-insert`, Paimon's CDC default; follows key changes),
    /// `-U`/`+U` (`update-before-after`) or `+U` alone (`upsert`). Default: delete-insert
    /// for deduplicate and first-row tables, update-before-after for aggregation tables
    /// and partial-update tables with sequence groups (they retract), upsert for other
    /// partial-update tables (they reject retractions, and a delete would drop the other
    /// sources' columns).
    #[serde(default)]
    pub(crate) update_mode: Option<String>,
    /// What happens when a record brings a column the table lacks or a wider type:
    /// `{ add_columns = true, widen_types = true }` by default (see
    /// [`SchemaEvolutionConfig`]).
    #[serde(default)]
    pub(crate) schema_evolution: SchemaEvolutionConfig,
}

/// `schema_evolution = { add_columns, widen_types, ignore_unknown_fields }` of a
/// `[[cdc]]`: what a record that does not fit the table does to it.
///
/// The defaults are what Paimon's `kafka_sync_table` (and `mysql_sync_table`) do, which
/// is what a user moving from them expects: a column the source gains is added to the
/// table, nullable, at the end, with a new field id; a column whose type the source
/// widens is widened in the table (INT → BIGINT, VARCHAR(n) → longer, DECIMAL precision
/// up); a source type narrower than the table's keeps the table's (every value fits).
/// Paimon has no switch for either; the two switches here are for tables whose schema
/// is managed by hand (`lakejoin table alter`). Whatever is not allowed stops the
/// pipeline with the reason, before any of that record is written: a field is never
/// dropped silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct SchemaEvolutionConfig {
    /// Add a column the table lacks (default true). With false, such a field stops the
    /// pipeline, unless `ignore_unknown_fields`.
    pub(crate) add_columns: bool,
    /// Widen a column whose type the record's schema gives wider, of the same family
    /// (default true). With false, it stops the pipeline.
    pub(crate) widen_types: bool,
    /// Drop fields that are not columns, as lakejoin did before schema evolution (default
    /// false). Only with `add_columns = false`: the two contradict each other.
    pub(crate) ignore_unknown_fields: bool,
}

impl Default for SchemaEvolutionConfig {
    fn default() -> Self {
        SchemaEvolutionConfig {
            add_columns: true,
            widen_types: true,
            ignore_unknown_fields: false,
        }
    }
}

fn default_partition_discovery_interval() -> Duration {
    Duration::from_secs(30)
}

fn default_commit_interval() -> Duration {
    Duration::from_secs(5)
}

fn default_commit_max_rows() -> usize {
    100_000
}

/// `[[enrich]]`: fact topics enriched by lookup joins and produced to an output topic.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct EnrichConfig {
    pub(crate) name: String,
    pub(crate) topics: Vec<String>,
    /// json or avro.
    #[serde(default = "default_fact_format")]
    pub(crate) format: String,
    pub(crate) output: OutputConfig,
    #[serde(default)]
    pub(crate) dead_letter_topic: Option<String>,
    #[serde(default)]
    pub(crate) start_from: StartFrom,
    #[serde(default)]
    pub(crate) schema_file: Option<String>,
    /// Confluent schema registry URL (its credentials masked in Debug output).
    #[serde(default)]
    pub(crate) schema_registry: Option<SecretUri>,
    #[serde(default)]
    pub(crate) join: Vec<JoinConfig>,
    /// Keep the output order of each input partition (default true); `false` lets later
    /// facts pass one whose lookup is retrying or waiting.
    #[serde(default = "default_true")]
    pub(crate) ordered: bool,
    /// Facts whose lookups run at the same time (bounds memory; default 1,000).
    #[serde(default = "default_max_in_flight")]
    pub(crate) max_in_flight: usize,
}

fn default_true() -> bool {
    true
}

fn default_max_in_flight() -> usize {
    1_000
}

fn default_fact_format() -> String {
    "json".into()
}

/// `output = { topic, format, key }`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct OutputConfig {
    pub(crate) topic: String,
    #[serde(default = "default_fact_format")]
    pub(crate) format: String,
    /// Field (dotted path) of the enriched record used as the Kafka key; the input key
    /// is kept when absent.
    #[serde(default)]
    pub(crate) key: Option<String>,
    #[serde(default)]
    pub(crate) schema_file: Option<String>,
}

/// LEFT keeps unmatched facts with null columns; INNER drops them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum JoinKind {
    #[default]
    Left,
    Inner,
}

/// Cache strategy of a join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CacheKind {
    Full,
    #[default]
    Partial,
    None,
}

/// `[[enrich.join]]`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct JoinConfig {
    pub(crate) table: String,
    #[serde(default)]
    pub(crate) kind: JoinKind,
    /// Fact field (dotted path) → table column.
    pub(crate) on: BTreeMap<String, String>,
    /// Table columns added to the fact (default: every column not in `on`).
    #[serde(default)]
    pub(crate) select: Vec<String>,
    /// Prefix of the added fields.
    #[serde(default)]
    pub(crate) prefix: String,
    /// Per-column output names, applied instead of the prefix.
    #[serde(default)]
    pub(crate) rename: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) cache: CacheKind,
    #[serde(default = "default_cache_max_rows")]
    pub(crate) cache_max_rows: u64,
    #[serde(default, deserialize_with = "duration::deserialize_option")]
    pub(crate) cache_expire_after_write: Option<Duration>,
    #[serde(default, deserialize_with = "duration::deserialize_option")]
    pub(crate) cache_expire_after_access: Option<Duration>,
    /// `partial`: bound the cache by the rows' estimated bytes instead of their number.
    #[serde(default)]
    pub(crate) cache_max_bytes: Option<u64>,
    /// `partial`: remember keys the table does not have (default true), so a stream of
    /// unknown keys does not read the table each time.
    #[serde(default = "default_true")]
    pub(crate) cache_missing_keys: bool,
    /// How often snapshots written by other processes are picked up (default 10s); this
    /// process's own commits are visible right after each commit.
    #[serde(
        default = "default_refresh_interval",
        deserialize_with = "duration::deserialize"
    )]
    pub(crate) refresh_interval: Duration,
    #[serde(default)]
    pub(crate) retry: Option<RetryConfig>,
    /// Join one partition only: `"max_pt()"` (the newest, followed as new ones appear) or
    /// a fixed spec `{ dt = "2026-11-29" }`. The partition columns are then not part of `on`.
    #[serde(default)]
    pub(crate) partition: Option<PartitionSelection>,
    /// How often `max_pt()` looks for a newer partition (default 60s).
    #[serde(
        default = "default_partition_refresh_interval",
        deserialize_with = "duration::deserialize"
    )]
    pub(crate) partition_refresh_interval: Duration,
    /// Hold a fact until this process's CDC pipelines writing the table have made every
    /// change with a Kafka timestamp up to the fact's visible (or have no lag).
    #[serde(default)]
    pub(crate) wait_for_cdc: bool,
    /// Upper bound of that wait (default 30s); the fact is then joined with what is there.
    #[serde(
        default = "default_max_wait",
        deserialize_with = "duration::deserialize"
    )]
    pub(crate) max_wait: Duration,
}

fn default_cache_max_rows() -> u64 {
    100_000
}

fn default_refresh_interval() -> Duration {
    Duration::from_secs(10)
}

fn default_partition_refresh_interval() -> Duration {
    Duration::from_secs(60)
}

fn default_max_wait() -> Duration {
    Duration::from_secs(30)
}

/// `partition = "max_pt()"` or `partition = { column = value, … }`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub(crate) enum PartitionSelection {
    /// Must be `max_pt()`.
    Function(String),
    Fixed(BTreeMap<String, serde_json::Value>),
}

impl PartitionSelection {
    pub(crate) const MAX_PT: &str = "max_pt()";
}

/// `retry = { on = "miss", delay = "1s", max_attempts = 10 }`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RetryConfig {
    pub(crate) on: String,
    #[serde(deserialize_with = "duration::deserialize")]
    pub(crate) delay: Duration,
    pub(crate) max_attempts: u32,
}

/// `[[changelog]]`: the changes of one table, snapshot after snapshot, produced to a
/// topic. Its position is the Paimon consumer `consumer_id` of the table.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ChangelogConfig {
    pub(crate) name: String,
    pub(crate) table: String,
    pub(crate) topic: String,
    /// `debezium-json` (default), `json` (the row with an `op` of +I/-U/+U/-D) or `avro`
    /// (the same as an Avro record with Flink's schema).
    #[serde(default = "default_changelog_format")]
    pub(crate) format: String,
    /// `avro`: the Confluent schema registry where the key and value schemas are
    /// registered (`<topic>-key`, `<topic>-value`); records are then Confluent-framed.
    /// Without one, records are plain Avro binary (Flink's `avro` format).
    #[serde(default)]
    pub(crate) schema_registry: Option<SecretUri>,
    /// Columns whose values, as an object (JSON, or an Avro record for `avro`), are each
    /// record's key (default: the primary key).
    #[serde(default)]
    pub(crate) key: Vec<String>,
    /// Where a pipeline without a consumer file starts: `"earliest"` (default: the
    /// oldest snapshot still readable), `"latest"` (changes committed from now on) or a
    /// snapshot id (its changes and every later one's).
    #[serde(default)]
    pub(crate) start_from: ChangelogStart,
    /// How often the table is looked at for new snapshots (default 1s; Java's
    /// `continuous.discovery-interval`, whose default is 10s).
    #[serde(
        default = "default_discovery_interval",
        deserialize_with = "duration::deserialize"
    )]
    pub(crate) discovery_interval: Duration,
    /// The Paimon consumer holding the position (`consumer/consumer-<id>`; default the
    /// pipeline's name). Expiry keeps every snapshot it has not read.
    #[serde(default)]
    pub(crate) consumer_id: Option<String>,
}

impl ChangelogConfig {
    /// The consumer id: `consumer_id`, else the pipeline's name.
    pub(crate) fn consumer_id(&self) -> &str {
        self.consumer_id.as_deref().unwrap_or(&self.name)
    }
}

fn default_changelog_format() -> String {
    "debezium-json".into()
}

fn default_discovery_interval() -> Duration {
    Duration::from_secs(1)
}

/// `start_from` of a `[[changelog]]`: `"earliest"`, `"latest"` or a snapshot id.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub(crate) enum ChangelogStart {
    Snapshot(i64),
    Named(String),
}

impl Default for ChangelogStart {
    fn default() -> Self {
        ChangelogStart::Named("earliest".into())
    }
}
