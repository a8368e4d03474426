//! `connectors.toml`: loading (TOML plus `LAKEJOIN__SECTION__KEY` environment overrides),
//! and validation that reports every problem at once, each with its key path.

mod changelog;
mod database_sync;
pub(crate) mod duration;
mod model;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use database_sync::DatabaseSync;
pub use model::*;

use crate::error::{Error, Result};

use crate::secret::{Redactor, redact_uri};
use crate::table::TableIdentifier;
use crate::table::datum::datum_from_json;
use crate::table::options::TableOptions;
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// Decoder formats of CDC pipelines.
pub(crate) const CDC_FORMATS: [&str; 7] = [
    "json",
    "debezium-json",
    "canal-json",
    "maxwell-json",
    "upsert-json",
    "avro",
    "debezium-avro",
];
/// Top-level sections of `connectors.toml`.
pub(crate) const SECTIONS: [&str; 9] = [
    "kafka",
    "warehouse",
    "table",
    "cdc",
    "enrich",
    "changelog",
    "observe",
    "run",
    "writer",
];
/// Formats of fact and output records.
pub(crate) const FACT_FORMATS: [&str; 2] = ["json", "avro"];

/// Loads and validates `path`; environment variables `LAKEJOIN__SECTION__KEY` override
/// file values. Every problem is reported in one `Error::Config`, one per line.
pub(crate) fn load(path: &Path) -> Result<Config> {
    load_with_env(path, None)
}

/// `load` with the environment given as a map (`None`: the process environment).
pub fn load_with_env(path: &Path, env: Option<config::Map<String, String>>) -> Result<Config> {
    let file = path.display().to_string();
    let raw = config::Config::builder()
        .add_source(config::File::from(path).format(config::FileFormat::Toml))
        .add_source(
            config::Environment::with_prefix("LAKEJOIN")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .source(env),
        )
        .build()
        .map_err(|e| Error::Config(redact_uri(&format!("{file}: {e}"))))?;
    let value: Value = raw
        .try_deserialize()
        .map_err(|e| Error::Config(redact_uri(&format!("{file}: {e}"))))?;
    from_value_redacted(&file, value)
}

/// Parses TOML text (no environment overrides); `origin` names it in messages.
pub fn from_toml(origin: &str, text: &str) -> Result<Config> {
    let raw = config::Config::builder()
        .add_source(config::File::from_str(text, config::FileFormat::Toml))
        .build()
        .map_err(|e| Error::Config(redact_uri(&format!("{origin}: {e}"))))?;
    let value: Value = raw
        .try_deserialize()
        .map_err(|e| Error::Config(redact_uri(&format!("{origin}: {e}"))))?;
    from_value_redacted(origin, value)
}

/// [`from_value`] with every secret of the configuration masked in its messages: a
/// wrongly typed value is quoted by the parse error (`invalid type: integer `1234``).
fn from_value_redacted(origin: &str, value: Value) -> Result<Config> {
    let redactor = Redactor::from_config(&value);
    from_value(origin, value).map_err(|e| match e {
        Error::Config(message) => Error::Config(redactor.redact(&message)),
        other => other,
    })
}

/// Deserializes each section and each `[[…]]` entry on its own, so one bad entry does not
/// hide the next one's problems; reports every unknown key of an entry up to its first
/// wrongly typed value (keys in file order), then checks references and semantics of the
/// entries that parsed ([`Config::problems`]).
fn from_value(origin: &str, value: Value) -> Result<Config> {
    let mut problems = Vec::new();
    let Value::Object(mut top) = value else {
        return Err(Error::Config(format!(
            "{origin}: the file is not a TOML table"
        )));
    };
    for key in top.keys() {
        if !SECTIONS.contains(&key.as_str()) {
            problems.push(format!("{key}: unknown section"));
        }
    }
    let kafka: Option<KafkaConfig> = section(&mut top, "kafka", &mut problems, true);
    let warehouse: Option<WarehouseConfig> = section(&mut top, "warehouse", &mut problems, true);
    let tables: Vec<TableConfig> = list(&mut top, "table", &mut problems);
    let (cdc, database_sync) = database_sync::cdc_entries(&mut top, &mut problems);
    let enrich: Vec<EnrichConfig> = list(&mut top, "enrich", &mut problems);
    let changelog: Vec<ChangelogConfig> = list(&mut top, "changelog", &mut problems);
    // Optional sections: when one fails to parse its problems are reported (so no config
    // comes out) and the default only stands in for the checks of the other sections.
    let observe: ObserveConfig =
        section(&mut top, "observe", &mut problems, false).unwrap_or_default();
    let run: RunConfig = section(&mut top, "run", &mut problems, false).unwrap_or_default();
    let writer: WriterConfig =
        section(&mut top, "writer", &mut problems, false).unwrap_or_default();
    let config = match (kafka, warehouse) {
        (Some(kafka), Some(warehouse)) => Some(Config {
            kafka,
            warehouse,
            tables,
            cdc,
            database_sync,
            enrich,
            changelog,
            observe,
            run,
            writer,
        }),
        _ => None,
    };
    if let Some(c) = &config {
        problems.extend(c.problems());
    }
    match config {
        Some(c) if problems.is_empty() => Ok(c),
        _ => Err(Error::Config(
            problems
                .iter()
                .map(|p| format!("{origin}: {p}"))
                .collect::<Vec<_>>()
                .join("\n"),
        )),
    }
}

/// Deserializes `value`, reporting every unknown key and the first type error, each with
/// its path under `prefix`.
fn parse<T: DeserializeOwned>(prefix: &str, value: Value, problems: &mut Vec<String>) -> Option<T> {
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(value, &mut track);
    // Unknown keys are collected rather than failing on the first, so all are reported.
    let result: std::result::Result<T, _> =
        serde_ignored::deserialize(tracked, |path| unknown.push(path.to_string()));
    for key in &unknown {
        problems.push(format!("{prefix}.{key}: unknown key"));
    }
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            let path = track.path().to_string();
            let at = if path == "." || path.is_empty() {
                prefix.to_string()
            } else {
                format!("{prefix}.{path}")
            };
            problems.push(format!("{at}: {e}"));
            None
        }
    }
}

fn section<T: DeserializeOwned>(
    top: &mut serde_json::Map<String, Value>,
    key: &str,
    problems: &mut Vec<String>,
    required: bool,
) -> Option<T> {
    match top.remove(key) {
        Some(v) => parse(key, v, problems),
        None => {
            if required {
                problems.push(format!("[{key}]: missing section"));
            }
            None
        }
    }
}

fn list<T: DeserializeOwned>(
    top: &mut serde_json::Map<String, Value>,
    key: &str,
    problems: &mut Vec<String>,
) -> Vec<T> {
    match top.remove(key) {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let label = match item.get("name").and_then(Value::as_str) {
                    Some(name) => format!("{key}[{i}] ({name})"),
                    None => format!("{key}[{i}]"),
                };
                parse(&label, item, problems)
            })
            .collect(),
        Some(_) => {
            problems.push(format!("{key}: must be an array of tables ([[{key}]])"));
            Vec::new()
        }
    }
}

/// An `[observe] listen` that is no socket address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an address like 127.0.0.1:9464 or 0.0.0.0:9464")]
pub struct NotAnAddress(String);

impl ObserveConfig {
    /// `listen` as a socket address (`host:port` with an IP address; `localhost` is
    /// accepted for the loopback address).
    pub fn listen_address(&self) -> std::result::Result<std::net::SocketAddr, NotAnAddress> {
        let text = self.listen.trim();
        let resolved = match text.strip_prefix("localhost:") {
            Some(port) => format!("127.0.0.1:{port}"),
            None => text.to_string(),
        };
        resolved
            .parse()
            .map_err(|_| NotAnAddress(self.listen.clone()))
    }
}

impl TableConfig {
    /// The Paimon schema this entry declares.
    pub fn to_schema(&self) -> Result<TableSchema> {
        let mut problems = Vec::new();
        let mut columns = Vec::new();
        for c in &self.columns {
            match DataType::parse(&c.data_type) {
                Ok((t, nullable)) => columns.push((c.name.clone(), t, nullable)),
                Err(e) => problems.push(format!("column `{}`: {e}", c.name)),
            }
        }
        if !problems.is_empty() {
            return Err(Error::Config(problems.join("; ")));
        }
        let mut schema = schema_of(TableParts {
            columns,
            partition_by: self.partition_by.clone(),
            primary_key: self.primary_key.clone(),
            buckets: self.buckets,
            merge_engine: self.merge_engine.clone(),
            sequence_field: self.sequence_field.clone(),
            options: self.options.clone(),
        })?;
        // The schema's fields are the columns, in their order.
        for (field, column) in schema.fields.iter_mut().zip(&self.columns) {
            field.description = column.comment.clone();
        }
        Ok(schema)
    }
}

/// A table's definition: a `[[table]]`, or one a whole-database sync creates.
pub(crate) struct TableParts {
    pub(crate) columns: Vec<(String, DataType, bool)>,
    pub(crate) partition_by: Vec<String>,
    pub(crate) primary_key: Vec<String>,
    pub(crate) buckets: i32,
    pub(crate) merge_engine: Option<String>,
    pub(crate) sequence_field: Vec<String>,
    /// Further Paimon options.
    pub(crate) options: BTreeMap<String, String>,
}

/// The Paimon schema of a definition, checked as Paimon checks it at creation.
pub(crate) fn schema_of(parts: TableParts) -> Result<TableSchema> {
    let mut options = parts.options;
    options.insert("bucket".into(), parts.buckets.to_string());
    if let Some(engine) = parts.merge_engine {
        options.insert("merge-engine".into(), engine);
    }
    if !parts.sequence_field.is_empty() {
        options.insert("sequence.field".into(), parts.sequence_field.join(","));
    }
    let schema = TableSchema::new(
        parts.columns,
        parts.partition_by,
        parts.primary_key,
        options,
    )?;
    let table_options = TableOptions::from_map(&schema.options)?;
    crate::lsm::merge::validate(&schema, &table_options)?;
    if parts.buckets < 1 {
        return Err(Error::Config(format!(
            "buckets must be ≥ 1, got {}",
            parts.buckets
        )));
    }
    Ok(schema)
}

/// A `group.instance.id` Kafka would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadInstanceId {
    #[error("must be 1 to 249 characters, got {0}")]
    Length(usize),
    #[error("{0:?} is not allowed (only ASCII letters, digits, '.', '_' and '-')")]
    Character(char),
}

/// The checks of a CDC pipeline's settings that do not depend on its table (a
/// whole-database sync's tables are only known once their records arrive).
fn check_cdc_settings(c: &CdcConfig, at: &str, problems: &mut Vec<String>) {
    check_format(&format!("{at}.format"), &c.format, &CDC_FORMATS, problems);
    if (c.format == "avro" || c.format == "debezium-avro")
        && c.schema_file.is_none()
        && c.schema_registry.is_none()
    {
        problems.push(format!(
            "{at}: format `{}` needs schema_file or schema_registry",
            c.format
        ));
    }
    check_nonzero(
        at,
        &[
            ("commit_interval", c.commit_interval.is_zero()),
            (
                "partition_discovery_interval",
                c.partition_discovery_interval.is_zero(),
            ),
            ("commit_max_rows", c.commit_max_rows == 0),
        ],
        problems,
    );
    if let Some(mode) = &c.update_mode
        && !["delete-insert", "update-before-after", "upsert"].contains(&mode.as_str())
    {
        problems.push(format!(
            "{at}.update_mode: must be delete-insert, update-before-after or upsert, got `{mode}`"
        ));
    }
    if c.schema_evolution.add_columns && c.schema_evolution.ignore_unknown_fields {
        problems.push(format!(
            "{at}.schema_evolution: add_columns = true and ignore_unknown_fields = true \
             contradict each other (a field the table lacks is either added or dropped); \
             set add_columns = false to drop such fields"
        ));
    }
}

/// Adds `{at}.{key}: must be greater than zero` for each `(key, is_zero)` that is zero.
fn check_nonzero(at: &str, keys: &[(&str, bool)], problems: &mut Vec<String>) {
    for (key, is_zero) in keys {
        if *is_zero {
            problems.push(format!("{at}.{key}: must be greater than zero"));
        }
    }
}

/// Adds a problem at `at` (`cdc[0] (name).format`) unless `format` is one of `formats`.
fn check_format(at: &str, format: &str, formats: &[&str], problems: &mut Vec<String>) {
    if !formats.contains(&format) {
        problems.push(format!(
            "{at}: `{format}` is not one of {}",
            formats.join(", ")
        ));
    }
}

/// Kafka's rule for a `group.instance.id` (as for topic names): 1 to 249 of
/// `[a-zA-Z0-9._-]`.
fn check_group_instance_id(id: &str) -> std::result::Result<(), BadInstanceId> {
    if id.is_empty() || id.len() > 249 {
        return Err(BadInstanceId::Length(id.len()));
    }
    match id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(c) => Err(BadInstanceId::Character(c)),
        None => Ok(()),
    }
}

impl Config {
    /// The `group.instance.id` of the enrich consumers: `[kafka] group_instance_id`, else
    /// `[writer] instance` with the characters Kafka does not allow replaced by `_`, else
    /// none (dynamic membership).
    pub(crate) fn group_instance_id(&self) -> Option<String> {
        if let Some(id) = &self.kafka.group_instance_id {
            return Some(id.clone());
        }
        let instance = self.writer.instance.as_deref()?.trim();
        let id: String = instance
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .take(249)
            .collect();
        (!id.is_empty()).then_some(id)
    }

    /// Checks references and semantics; returns every problem (empty when valid).
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.kafka.bootstrap_servers.trim().is_empty() {
            problems.push("kafka.bootstrap_servers: must not be empty".into());
        }
        if self.warehouse.uri.trim().is_empty() {
            problems.push("warehouse.uri: must not be empty".into());
        }
        if let Err(e) = self.observe.listen_address() {
            problems.push(format!("observe.listen: {e}"));
        }
        if self.observe.progress_interval.is_zero() {
            problems.push("observe.progress_interval: must be greater than zero".into());
        }
        if self.run.shutdown_timeout.is_zero() {
            problems.push("run.shutdown_timeout: must be greater than zero".into());
        }
        if let Some(id) = &self.kafka.group_instance_id
            && let Err(e) = check_group_instance_id(id)
        {
            problems.push(format!("kafka.group_instance_id: {e}"));
        }
        if self
            .writer
            .instance
            .as_deref()
            .is_some_and(|i| i.trim().is_empty())
        {
            problems.push("writer.instance: must not be empty when set".into());
        }
        if self.writer.heartbeat_interval.is_zero() {
            problems.push("writer.heartbeat_interval: must be greater than zero".into());
        }
        if self.writer.heartbeat_interval * 2 > self.writer.lease_timeout {
            problems.push(format!(
                "writer.lease_timeout: must be at least twice writer.heartbeat_interval ({:?}), got {:?}",
                self.writer.heartbeat_interval, self.writer.lease_timeout
            ));
        }
        let mut schemas: BTreeMap<String, TableSchema> = BTreeMap::new();
        for (i, t) in self.tables.iter().enumerate() {
            let at = format!("table[{i}] ({})", t.name);
            if let Err(e) = TableIdentifier::parse(&t.name) {
                problems.push(format!("{at}.name: {e}"));
            }
            if schemas.contains_key(&t.name) {
                problems.push(format!("{at}.name: table `{}` is defined twice", t.name));
                continue;
            }
            match t.to_schema() {
                Ok(s) => {
                    schemas.insert(t.name.clone(), s);
                }
                Err(e) => {
                    for p in e.to_string().split("; ") {
                        problems.push(format!("{at}: {p}"));
                    }
                }
            }
        }
        let mut names = HashSet::new();
        // What every pipeline needs: a unique name and topics. Returns how problems name
        // the pipeline.
        let mut check_pipeline =
            |kind: &str, i: usize, name: &str, topics: &[String], problems: &mut Vec<String>| {
                if name.trim().is_empty() {
                    problems.push(format!("{kind}[{i}].name: must not be empty"));
                } else if !names.insert(name.to_string()) {
                    problems.push(format!(
                        "{kind}[{i}] ({name}).name: pipeline name `{name}` is used twice"
                    ));
                }
                let at = format!("{kind}[{i}] ({name})");
                if topics.is_empty() {
                    problems.push(format!("{at}.topics: at least one topic is required"));
                }
                at
            };
        for s in &self.database_sync {
            let c = &s.pipeline;
            let at = check_pipeline("cdc", s.index, &c.name, &c.topics, &mut problems);
            check_cdc_settings(c, &at, &mut problems);
            s.problems(&at, &mut problems);
        }
        for (i, c) in self.cdc.iter().enumerate() {
            let at = check_pipeline("cdc", i, &c.name, &c.topics, &mut problems);
            check_cdc_settings(c, &at, &mut problems);
            let Some(schema) = schemas.get(&c.table) else {
                problems.push(format!(
                    "{at}.table: `{}` is not defined by any [[table]]",
                    c.table
                ));
                continue;
            };
            for (column, name) in &c.metadata {
                if schema.field(column).is_none() {
                    problems.push(format!(
                        "{at}.metadata.{column}: `{column}` is not a column of {}",
                        c.table
                    ));
                }
                if let Err(e) = name.parse::<crate::codec::Metadata>() {
                    problems.push(format!("{at}.metadata.{column}: {e}"));
                }
            }
            for column in c.fields.keys() {
                if schema.field(column).is_none() {
                    problems.push(format!(
                        "{at}.fields.{column}: `{column}` is not a column of {}",
                        c.table
                    ));
                }
            }
            if let Some(field) = &c.row_kind_field
                && schema.field(field).is_some()
            {
                problems.push(format!(
                    "{at}.row_kind_field: `{field}` is a column of {}; the row kind is not stored",
                    c.table
                ));
            }
        }
        for (i, e) in self.enrich.iter().enumerate() {
            let at = check_pipeline("enrich", i, &e.name, &e.topics, &mut problems);
            for (key, format) in [("format", &e.format), ("output.format", &e.output.format)] {
                check_format(&format!("{at}.{key}"), format, &FACT_FORMATS, &mut problems);
            }
            if e.output.format == "avro" && e.output.schema_file.is_none() {
                problems.push(format!("{at}.output: format `avro` needs schema_file"));
            }
            if e.output.topic.trim().is_empty() {
                problems.push(format!("{at}.output.topic: must not be empty"));
            }
            if e.topics.contains(&e.output.topic) {
                problems.push(format!(
                    "{at}.output.topic: `{}` is also an input topic",
                    e.output.topic
                ));
            }
            if e.max_in_flight == 0 {
                problems.push(format!("{at}.max_in_flight: must be at least 1"));
            }
            for (j, join) in e.join.iter().enumerate() {
                let at = format!("{at}.join[{j}]");
                let Some(schema) = schemas.get(&join.table) else {
                    problems.push(format!(
                        "{at}.table: `{}` is not defined by any [[table]]",
                        join.table
                    ));
                    continue;
                };
                if join.on.is_empty() {
                    problems.push(format!(
                        "{at}.on: at least one fact field = table column pair is required"
                    ));
                }
                for (fact_field, column) in &join.on {
                    if schema.field(column).is_none() {
                        problems.push(format!(
                            "{at}.on.{fact_field}: `{column}` is not a column of {}",
                            join.table
                        ));
                    }
                }
                for column in join.select.iter().chain(join.rename.keys()) {
                    if schema.field(column).is_none() {
                        problems.push(format!(
                            "{at}.select: `{column}` is not a column of {}",
                            join.table
                        ));
                    }
                }
                let joined: HashSet<&String> = join.on.values().collect();
                // With a partition selection, the partition columns come from it.
                let key_columns: Vec<&String> = schema
                    .primary_keys
                    .iter()
                    .filter(|k| join.partition.is_none() || !schema.partition_keys.contains(k))
                    .collect();
                let is_point = key_columns.iter().all(|k| joined.contains(*k))
                    && joined.len() == key_columns.len();
                match &join.partition {
                    None => {}
                    Some(_) if schema.partition_keys.is_empty() => problems.push(format!(
                        "{at}.partition: {} is not partitioned",
                        join.table
                    )),
                    Some(PartitionSelection::Function(f)) if f != PartitionSelection::MAX_PT => {
                        problems.push(format!(
                            "{at}.partition: `{f}` is not `max_pt()` or a {{ column = value }} table"
                        ))
                    }
                    Some(PartitionSelection::Function(_)) => {}
                    Some(PartitionSelection::Fixed(spec)) => {
                        for column in spec.keys() {
                            if !schema.partition_keys.contains(column) {
                                problems.push(format!(
                                    "{at}.partition.{column}: not a partition column of {} ({})",
                                    join.table,
                                    schema.partition_keys.join(", ")
                                ));
                            }
                        }
                        for column in &schema.partition_keys {
                            match (spec.get(column), schema.field(column)) {
                                (None, _) => problems.push(format!(
                                    "{at}.partition: partition column `{column}` has no value"
                                )),
                                (Some(value), Some(field)) => {
                                    if let Err(e) = datum_from_json(value, &field.data_type) {
                                        problems.push(format!("{at}.partition.{column}: {e}"));
                                    }
                                }
                                (Some(_), None) => {}
                            }
                        }
                    }
                }
                for column in join.on.values() {
                    if join.partition.is_some() && schema.partition_keys.contains(column) {
                        problems.push(format!(
                            "{at}.on: `{column}` is a partition column, which `partition` selects"
                        ));
                    }
                }
                if join.wait_for_cdc && !self.cdc.iter().any(|c| c.table == join.table) {
                    problems.push(format!(
                        "{at}.wait_for_cdc: no [[cdc]] pipeline writes {}",
                        join.table
                    ));
                }
                check_nonzero(
                    &at,
                    &[
                        ("refresh_interval", join.refresh_interval.is_zero()),
                        (
                            "partition_refresh_interval",
                            join.partition_refresh_interval.is_zero(),
                        ),
                        ("cache_max_bytes", join.cache_max_bytes == Some(0)),
                    ],
                    &mut problems,
                );
                if !is_point
                    && join.cache != CacheKind::Full
                    && join.on.values().all(|c| schema.field(c).is_some())
                {
                    problems.push(format!(
                        "{at}.on: joins on columns other than the primary key ({}) need cache = \"full\"",
                        schema.primary_keys.join(", ")
                    ));
                }
                if let Some(retry) = &join.retry {
                    if retry.on != "miss" {
                        problems.push(format!(
                            "{at}.retry.on: only \"miss\" is supported, got `{}`",
                            retry.on
                        ));
                    }
                    if retry.max_attempts == 0 {
                        problems.push(format!("{at}.retry.max_attempts: must be at least 1"));
                    }
                }
                if join.cache == CacheKind::Partial && join.cache_max_rows == 0 {
                    problems.push(format!("{at}.cache_max_rows: must be greater than zero"));
                }
            }
        }
        let mut consumers = HashSet::new();
        for (i, c) in self.changelog.iter().enumerate() {
            let topics = std::slice::from_ref(&c.topic);
            let at = check_pipeline("changelog", i, &c.name, topics, &mut problems);
            changelog::check(c, &at, &schemas, &self.cdc, &mut problems);
            if !consumers.insert((&c.table, c.consumer_id())) {
                problems.push(format!(
                    "{at}.consumer_id: consumer `{}` of {} is used by another [[changelog]]",
                    c.consumer_id(),
                    c.table
                ));
            }
        }
        problems
    }

    /// How the writer of table `name` claims it: `[writer]`, with the table's
    /// `writer_on_conflict` when set.
    pub(crate) fn fence_options(&self, name: &str) -> crate::table::fence::FenceOptions {
        let on_conflict = self
            .table(name)
            .and_then(|t| t.writer_on_conflict)
            .unwrap_or(self.writer.on_conflict);
        crate::table::fence::FenceOptions {
            on_conflict: match on_conflict {
                OnConflict::Fail => crate::table::fence::OnConflict::Fail,
                OnConflict::Standby => crate::table::fence::OnConflict::Standby,
            },
            lease_timeout: self.writer.lease_timeout,
            heartbeat_interval: self.writer.heartbeat_interval,
        }
    }

    /// The schema of table `name` as configured.
    pub(crate) fn table(&self, name: &str) -> Option<&TableConfig> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// A one-line summary for `lakejoin validate`.
    pub(crate) fn summary(&self) -> String {
        let mut summary = format!(
            "ok: {} table(s), {} cdc pipeline(s), {} enrich pipeline(s), {} join(s)",
            self.tables.len(),
            self.cdc.len(),
            self.enrich.len(),
            self.enrich.iter().map(|e| e.join.len()).sum::<usize>()
        );
        if !self.database_sync.is_empty() {
            summary.push_str(&format!(
                ", {} whole-database sync(s)",
                self.database_sync.len()
            ));
        }
        if !self.changelog.is_empty() {
            summary.push_str(&format!(", {} changelog pipeline(s)", self.changelog.len()));
        }
        summary
    }
}

#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;
