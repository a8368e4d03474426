//! From a `connectors.toml` to the parts the pipelines run on: the tables (opened or
//! created and checked against their definitions), each CDC pipeline's decoder, each
//! enrich pipeline's fact decoder and output encoder, and the lookups: one
//! [`TableLookups`] per joined table, one [`LookupTable`] (cache) per join, and the
//! [`Join`]s of every enrich pipeline. Nothing here runs; `pipeline::start_on` spawns
//! the tasks that use these parts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::cdc_progress::CdcProgress;
use super::enrich::{Join, JoinPlan};
use crate::codec::{
    AvroSchema, AvroSchemas, CdcDecoder, CdcOptions, FactDecoder, Format, Metadata, OutputEncoder,
    SchemaResolver, UpdateMode,
};
use crate::config::{
    CacheKind, CdcConfig, Config, EnrichConfig, JoinConfig, OutputConfig, PartitionSelection,
};
use crate::error::{Error, Result};
use crate::lookup::{
    LookupSpec, LookupTable, PartialOptions, PartitionChoice, Strategy, TableLookups,
};
use crate::lsm::point_lookup::{LookupOptions, PointLookup};
use crate::observe::JoinMetrics;
use crate::secret::SecretUri;
use crate::table::options::{MergeEngineKind, TableOptions};
use crate::table::schema::TableSchema;
use crate::table::{Table, TableIdentifier, Warehouse};

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
pub(crate) fn cdc_decoder(config: &CdcConfig, table: &Table) -> Result<CdcDecoder> {
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
        // Fields the table lacks are reported (the pipeline adds them or stops), unless
        // the pipeline asked to drop them.
        strict: !config.schema_evolution.ignore_unknown_fields,
        ..CdcOptions::default()
    };
    CdcDecoder::new(
        parse_format(&config.format)?,
        table.schema().clone(),
        options,
    )
}

/// The fact decoder of an enrich pipeline.
pub(crate) fn fact_decoder(config: &EnrichConfig) -> Result<FactDecoder> {
    FactDecoder::new(
        parse_format(&config.format)?,
        avro_schemas(&config.schema_file, &config.schema_registry)?,
    )
}

/// The output encoder of an enrich pipeline.
pub(crate) fn output_encoder(config: &OutputConfig) -> Result<OutputEncoder> {
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
/// columns (each with its configured type or a wider one: schema evolution may have
/// widened it, and may have added columns the configuration does not name), keys and
/// merge engine.
pub(crate) async fn open_or_create(
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
            let fits = wanted.fields.iter().all(|w| {
                have.field(&w.name).is_some_and(|h| {
                    h.nullable == w.nullable
                        && crate::table::schema_change::widens(w.data_type, h.data_type)
                })
            });
            if !fits {
                let missing: Vec<String> = wanted
                    .fields
                    .iter()
                    .filter(|w| have.field(&w.name).is_none())
                    .map(|w| format!("'{} {}'", w.name, w.data_type))
                    .collect();
                let hint = if missing.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; to add the missing columns to the table: `lakejoin table alter \
                         --add-column {}`",
                        missing.join(" --add-column ")
                    )
                };
                problems.push(format!(
                    "columns are [{}], configured [{}] (each configured column must be in the \
                     table with its type or a wider one){hint}",
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
        Err(Error::TableNotFound(_)) => {
            match crate::lsm::create_table(warehouse, &id, wanted.clone()).await {
                Ok(t) => Ok(Arc::new(t)),
                // Another process created it first: check it like an existing one.
                Err(Error::TableExists(_)) => {
                    Box::pin(open_or_create(warehouse, name, wanted)).await
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// The cache strategy of a join.
fn lookup_strategy(join: &JoinConfig) -> Strategy {
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

/// Every `[[table]]`, by name, opened or created.
pub(crate) async fn open_tables(
    config: &Config,
    warehouse: &Warehouse,
) -> Result<BTreeMap<String, Arc<Table>>> {
    let mut tables = BTreeMap::new();
    for t in &config.tables {
        tables.insert(
            t.name.clone(),
            open_or_create(warehouse, &t.name, t.to_schema()?).await?,
        );
    }
    Ok(tables)
}

/// A table by its configured name.
pub(crate) fn table(tables: &BTreeMap<String, Arc<Table>>, name: &str) -> Result<Arc<Table>> {
    tables
        .get(name)
        .cloned()
        .ok_or_else(|| Error::Config(format!("table {name} is not defined")))
}

/// The CDC progress that `wait_for_cdc` joins follow, one per table they join.
pub(crate) fn cdc_progress(config: &Config) -> BTreeMap<String, Arc<CdcProgress>> {
    let mut progress: BTreeMap<String, Arc<CdcProgress>> = BTreeMap::new();
    for j in config.enrich.iter().flat_map(|e| &e.join) {
        if j.wait_for_cdc {
            progress.entry(j.table.clone()).or_default();
        }
    }
    progress
}

/// The lookups of one joined table and how often they look for changes.
pub(crate) struct JoinedTable {
    pub(crate) lookups: Arc<TableLookups>,
    /// The shortest `refresh_interval` of its joins.
    pub(crate) refresh_interval: Duration,
    /// The shortest `partition_refresh_interval` of its `max_pt()` joins, if any.
    pub(crate) partition_refresh_interval: Option<Duration>,
}

/// The joins of one enrich pipeline, in order, with their metrics.
pub(crate) struct EnrichJoins {
    pub(crate) joins: Vec<Join>,
    pub(crate) metrics: Vec<JoinMetrics>,
}

/// Every joined table's lookups (by table name) and every enrich pipeline's joins (in
/// `[[enrich]]` order).
pub(crate) struct Lookups {
    pub(crate) tables: BTreeMap<String, JoinedTable>,
    pub(crate) enrich: Vec<EnrichJoins>,
}

/// Builds the lookups: one point lookup per joined table, shared by its joins, and one
/// lookup table (cache) per join.
pub(crate) async fn lookups(
    config: &Config,
    tables: &BTreeMap<String, Arc<Table>>,
    progress: &BTreeMap<String, Arc<CdcProgress>>,
) -> Result<Lookups> {
    struct Assembling {
        point: Arc<PointLookup>,
        joins: Vec<Arc<LookupTable>>,
        refresh_interval: Duration,
        partition_refresh_interval: Option<Duration>,
    }
    let mut joined: BTreeMap<String, Assembling> = BTreeMap::new();
    let mut enrich = Vec::new();
    for e in &config.enrich {
        let mut pipeline = EnrichJoins {
            joins: Vec::new(),
            metrics: Vec::new(),
        };
        for j in &e.join {
            let t = table(tables, &j.table)?;
            let entry = match joined.entry(j.table.clone()) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => v.insert(Assembling {
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
            // Planned in the schema the lookups read (opening them moves to the newest
            // one), so the field ids the join keeps are those of the planned positions.
            let plan = JoinPlan::new(j, entry.point.table().schema())?;
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
            let (ready, cached) = (lookup.clone(), lookup.clone());
            pipeline
                .metrics
                .push(JoinMetrics::new(&j.table).with_lookup(
                    lookup.metrics().clone(),
                    move || ready.is_ready(),
                    move || cached.cached_rows(),
                ));
            pipeline
                .joins
                .push(Join::new(j, plan, lookup, progress.get(&j.table).cloned()));
        }
        enrich.push(pipeline);
    }
    let tables = joined
        .into_iter()
        .map(|(name, j)| {
            let joined = JoinedTable {
                lookups: Arc::new(TableLookups::new(j.point, j.joins)),
                refresh_interval: j.refresh_interval,
                partition_refresh_interval: j.partition_refresh_interval,
            };
            (name, joined)
        })
        .collect();
    Ok(Lookups { tables, enrich })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testkit::GOOD;
    use crate::table::datum::{Datum, Timestamp};

    /// The config tests' sample, its CDC pipeline filling `updated_at` from the record's
    /// ingestion timestamp.
    fn config_text() -> String {
        GOOD.replace(
            "commit_interval = \"2s\"",
            "commit_interval = \"2s\"\nmetadata = { updated_at = \"ingestion-timestamp\" }",
        )
    }

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
        let config = crate::config::from_toml("test", &config_text()).unwrap();
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
                    Datum::Timestamp(Timestamp::from_millis(42)),
                    "ts_ms fills `updated_at`"
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
        let config = crate::config::from_toml("test", &config_text()).unwrap();
        let warehouse = Warehouse::in_memory();
        let schema = config.tables[0].to_schema().unwrap();
        open_or_create(&warehouse, "shop.customers", schema.clone())
            .await
            .unwrap();
        open_or_create(&warehouse, "shop.customers", schema)
            .await
            .unwrap();
        let text = config_text().replace(
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

    /// After schema evolution the table has more columns than the config names: it still
    /// opens (the config's columns are all there), at its own schema.
    #[tokio::test]
    async fn an_evolved_table_opens_with_the_configuration_it_was_created_from() {
        use crate::table::schema_change::SchemaChange;
        use crate::table::types::DataType;
        let config = crate::config::from_toml("test", &config_text()).unwrap();
        let warehouse = Warehouse::in_memory();
        let schema = config.tables[0].to_schema().unwrap();
        let table = open_or_create(&warehouse, "shop.customers", schema.clone())
            .await
            .unwrap();
        let changes = vec![SchemaChange::AddColumn {
            name: "city".into(),
            data_type: DataType::Varchar(32),
        }];
        crate::lsm::evolve_table(&table, |_| Ok(changes.clone()))
            .await
            .unwrap();
        let reopened = open_or_create(&warehouse, "shop.customers", schema)
            .await
            .unwrap();
        assert_eq!(reopened.schema().id, 1);
        assert_eq!(reopened.schema().fields.last().unwrap().name, "city");
        // A column the config names before the table has it: refused, with the command.
        let text = config_text().replace(
            r#"{ name = "name", type = "STRING" },"#,
            r#"{ name = "name", type = "STRING" }, { name = "zip", type = "INT" },"#,
        );
        let ahead = crate::config::from_toml("test", &text).unwrap();
        let err = open_or_create(
            &warehouse,
            "shop.customers",
            ahead.tables[0].to_schema().unwrap(),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("--add-column 'zip INT'"), "{err}");
    }
}
