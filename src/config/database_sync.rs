//! `[[cdc]]` entries that follow a whole database: `topics_pattern` and `database`
//! instead of `topics` and `table`, as Paimon's `kafka_sync_database` action.
//!
//! Such an entry is split in two when the file is read: the keys that only a sync has
//! (the pattern, the database, the defaults and per-table overrides of the tables it
//! creates) go to [`SyncTables`]; the rest are the settings every table's pipeline
//! shares (format, commit interval, dead-letter topic, schema evolution, …) and parse
//! as an ordinary [`CdcConfig`], checked by the same code as a single-table `[[cdc]]`.
//! Each table followed gets a copy of those settings with its topic and table filled
//! in, so it commits on its own, with its offsets in its own snapshots: exactly once
//! per table, as a single-table pipeline.

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{CdcConfig, parse};
use crate::error::Result;
use crate::table::TableIdentifier;
use crate::table::options::TableOptions;
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// The keys of a `[[cdc]]` entry that belong to the sync itself; an entry with
/// `topics_pattern` or `database` is a sync.
const SYNC_KEYS: [&str; 7] = [
    "topics_pattern",
    "database",
    "buckets",
    "merge_engine",
    "sequence_field",
    "table_options",
    "tables",
];

/// The only format whose records describe their table (Connect schemas, record keys).
const SYNC_FORMAT: &str = "debezium-json";

/// A `[[cdc]]` entry following every topic that matches a pattern into one database.
#[derive(Debug, Clone)]
pub struct DatabaseSync {
    /// Position among the `[[cdc]]` entries, for messages.
    pub(crate) index: usize,
    pub(crate) tables: SyncTables,
    /// The settings of every table's pipeline; `topics` holds the pattern and `table`
    /// `<database>.*` until [`Self::pipeline_for`] fills them in.
    pub(crate) pipeline: CdcConfig,
}

/// What a sync creates: which topics, which database, and the tables' definition
/// beyond the columns and key the records give.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SyncTables {
    /// Regular expression a topic's whole name must match (as Kafka's pattern
    /// subscriptions match), e.g. `dbserver1\.shop\..*`.
    pub(crate) topics_pattern: String,
    /// Database of the warehouse the tables go to; a topic's table is named after the
    /// last `.`-separated part of the topic (Debezium's `<prefix>.<database>.<table>`).
    pub(crate) database: String,
    /// Buckets of each created table (default 1).
    #[serde(default = "default_buckets")]
    pub(crate) buckets: i32,
    /// Merge engine of each created table (default: deduplicate).
    #[serde(default)]
    pub(crate) merge_engine: Option<String>,
    /// Sequence field of each created table that has these columns.
    #[serde(default)]
    pub(crate) sequence_field: Vec<String>,
    /// Further Paimon options of each created table (Paimon's `--table_conf`).
    #[serde(default)]
    pub(crate) table_options: BTreeMap<String, String>,
    /// Per table (by its name in the database): what differs from the defaults.
    #[serde(default)]
    pub(crate) tables: BTreeMap<String, TableOverride>,
}

fn default_buckets() -> i32 {
    1
}

/// `[cdc.tables.<name>]`: one table's definition where it differs from the sync's.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct TableOverride {
    pub(crate) buckets: Option<i32>,
    pub(crate) merge_engine: Option<String>,
    pub(crate) sequence_field: Option<Vec<String>>,
    /// Instead of the record key's fields (required for a source table without one).
    pub(crate) primary_key: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) partition_by: Vec<String>,
    /// Added to (and over) the sync's `table_options`.
    #[serde(default)]
    pub(crate) options: BTreeMap<String, String>,
}

/// Splits the `[[cdc]]` entries into single-table pipelines and syncs, parsing each
/// (every problem is added to `problems`, labelled `cdc[i] (name)`).
pub(super) fn cdc_entries(
    top: &mut Map<String, Value>,
    problems: &mut Vec<String>,
) -> (Vec<CdcConfig>, Vec<DatabaseSync>) {
    let (mut single, mut syncs) = (Vec::new(), Vec::new());
    let items = match top.remove("cdc") {
        None => return (single, syncs),
        Some(Value::Array(items)) => items,
        Some(_) => {
            problems.push("cdc: must be an array of tables ([[cdc]])".into());
            return (single, syncs);
        }
    };
    for (index, item) in items.into_iter().enumerate() {
        let label = match item.get("name").and_then(Value::as_str) {
            Some(name) => format!("cdc[{index}] ({name})"),
            None => format!("cdc[{index}]"),
        };
        let is_sync = ["topics_pattern", "database"]
            .iter()
            .any(|k| item.get(k).is_some());
        match item {
            Value::Object(entry) if is_sync => {
                if let Some(sync) = parse_sync(index, &label, entry, problems) {
                    syncs.push(sync);
                }
            }
            other => single.extend(parse(&label, other, problems)),
        }
    }
    (single, syncs)
}

/// One sync entry: its own keys as [`SyncTables`], the rest as the pipelines' settings.
fn parse_sync(
    index: usize,
    label: &str,
    mut entry: Map<String, Value>,
    problems: &mut Vec<String>,
) -> Option<DatabaseSync> {
    let mut own = Map::new();
    for key in SYNC_KEYS {
        if let Some(v) = entry.remove(key) {
            own.insert(key.to_string(), v);
        }
    }
    for (key, instead) in [("topics", "topics_pattern"), ("table", "database")] {
        if entry.contains_key(key) {
            problems.push(format!(
                "{label}.{key}: a whole-database sync (with topics_pattern and database) takes \
                 {instead} instead"
            ));
        }
    }
    let tables: Option<SyncTables> = parse(label, Value::Object(own), problems);
    let tables = tables?;
    entry.insert(
        "topics".into(),
        Value::from(vec![tables.topics_pattern.clone()]),
    );
    entry.insert(
        "table".into(),
        Value::from(format!("{}.*", tables.database)),
    );
    let pipeline: CdcConfig = parse(label, Value::Object(entry), problems)?;
    Some(DatabaseSync {
        index,
        tables,
        pipeline,
    })
}

impl DatabaseSync {
    /// The pattern, matching whole topic names.
    pub(crate) fn pattern(&self) -> std::result::Result<Regex, regex::Error> {
        Regex::new(&format!("^(?:{})$", self.tables.topics_pattern))
    }

    /// The name of the table `topic` goes to (`<database>.<last part of the topic>`).
    pub(crate) fn table_for(&self, topic: &str) -> String {
        let short = topic.rsplit('.').next().unwrap_or(topic);
        format!("{}.{short}", self.tables.database)
    }

    /// The settings of the pipeline following `topic` into `table`: named
    /// `<sync>/<table's name in the database>`, which names its offsets in the table's
    /// snapshots and its consumer group.
    pub(crate) fn pipeline_for(&self, topic: &str, table: &str) -> CdcConfig {
        let short = table.rsplit_once('.').map_or(table, |(_, t)| t);
        CdcConfig {
            name: format!("{}/{short}", self.pipeline.name),
            topics: vec![topic.to_string()],
            table: table.to_string(),
            ..self.pipeline.clone()
        }
    }

    /// The schema of `table` (its name in the database), created from the columns and
    /// key one of its records describes, with the sync's defaults and the table's
    /// overrides. Errors name the key of the definition that does not fit.
    pub(crate) fn table_schema(
        &self,
        table: &str,
        columns: Vec<(String, DataType, bool)>,
        record_key: Vec<String>,
    ) -> Result<TableSchema> {
        let t = &self.tables;
        let o = t.tables.get(table).cloned().unwrap_or_default();
        let mut options = t.table_options.clone();
        options.extend(o.options);
        let primary_key = o.primary_key.unwrap_or(record_key);
        if primary_key.is_empty() {
            return Err(crate::error::Error::Config(format!(
                "cdc[{}] ({}): the records of table {}.{table} have no key, so its primary \
                 key is unknown; set tables.{table}.primary_key",
                self.index, self.pipeline.name, t.database
            )));
        }
        super::schema_of(super::TableParts {
            columns,
            partition_by: o.partition_by,
            primary_key,
            buckets: o.buckets.unwrap_or(t.buckets),
            merge_engine: o.merge_engine.or_else(|| t.merge_engine.clone()),
            sequence_field: o.sequence_field.unwrap_or_else(|| t.sequence_field.clone()),
            options,
        })
        .map_err(|e| {
            crate::error::Error::Config(format!(
                "cdc[{}] ({}): table {}.{table} from its records and tables.{table}: {e}",
                self.index, self.pipeline.name, t.database
            ))
        })
    }

    /// What is wrong with the sync's own keys; the shared pipeline settings are checked
    /// with the single-table pipelines'.
    pub(super) fn problems(&self, at: &str, problems: &mut Vec<String>) {
        let t = &self.tables;
        if let Err(e) = self.pattern() {
            problems.push(format!(
                "{at}.topics_pattern: not a regular expression: {e}"
            ));
        }
        if t.topics_pattern.trim().is_empty() {
            problems.push(format!("{at}.topics_pattern: must not be empty"));
        }
        if let Err(e) = TableIdentifier::parse(&format!("{}.t", t.database)) {
            problems.push(format!("{at}.database: {e}"));
        }
        if self.pipeline.format != SYNC_FORMAT {
            problems.push(format!(
                "{at}.format: a whole-database sync reads `{SYNC_FORMAT}` (whose records \
                 describe their table), got `{}`",
                self.pipeline.format
            ));
        }
        let c = &self.pipeline;
        for (key, set) in [
            ("fields", !c.fields.is_empty()),
            ("metadata", !c.metadata.is_empty()),
            ("row_kind_field", c.row_kind_field.is_some()),
            ("schema_file", c.schema_file.is_some()),
        ] {
            if set {
                problems.push(format!(
                    "{at}.{key}: not supported by a whole-database sync (it names columns of \
                     one table); give that table its own [[table]] and [[cdc]]"
                ));
            }
        }
        check_definition(
            &format!("{at}."),
            Some(t.buckets),
            t.merge_engine.as_ref(),
            problems,
        );
        for (name, o) in &t.tables {
            let at = format!("{at}.tables.{name}");
            check_definition(
                &format!("{at}."),
                o.buckets,
                o.merge_engine.as_ref(),
                problems,
            );
            if let Err(e) = TableIdentifier::parse(&format!("{}.{name}", t.database)) {
                problems.push(format!("{at}: {e}"));
            }
        }
        if let Err(e) = TableOptions::from_map(&t.table_options) {
            problems.push(format!("{at}.table_options: {e}"));
        }
    }

    /// A one-line description for `lakejoin validate`.
    pub(crate) fn describe(&self) -> String {
        let t = &self.tables;
        let mut line = format!(
            "cdc {}: topics matching `{}` into database {} (tables created from their \
             records: {} bucket(s), merge engine {}",
            self.pipeline.name,
            t.topics_pattern,
            t.database,
            t.buckets,
            t.merge_engine.as_deref().unwrap_or("deduplicate"),
        );
        if !t.tables.is_empty() {
            let names: Vec<&str> = t.tables.keys().map(String::as_str).collect();
            line.push_str(&format!("; own definitions for {}", names.join(", ")));
        }
        line.push(')');
        line
    }
}

/// The buckets and merge engine of a sync's defaults or of one table's override.
fn check_definition(
    at: &str,
    buckets: Option<i32>,
    engine: Option<&String>,
    problems: &mut Vec<String>,
) {
    if let Some(b) = buckets
        && b < 1
    {
        problems.push(format!("{at}buckets: must be ≥ 1, got {b}"));
    }
    if let Some(engine) = engine {
        let options = BTreeMap::from([("merge-engine".to_string(), engine.clone())]);
        if let Err(e) = TableOptions::from_map(&options) {
            problems.push(format!("{at}merge_engine: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::from_toml;

    const BASE: &str = r#"
[kafka]
bootstrap_servers = "localhost:9092"
group_id = "g"
[warehouse]
uri = "memory://"
"#;

    #[test]
    fn a_sync_entry_parses_its_own_keys_and_shares_the_pipeline_settings() {
        let text = format!(
            r#"{BASE}
[[cdc]]
name = "shop"
topics_pattern = 'dbserver1\.shop\..*'
database = "shop"
format = "debezium-json"
commit_interval = "1s"
buckets = 2
table_options = {{ "changelog-producer" = "input" }}

[cdc.tables.orders]
buckets = 4
sequence_field = ["updated_at"]
"#
        );
        let c = from_toml("test.toml", &text).unwrap();
        assert!(c.cdc.is_empty());
        let s = &c.database_sync[0];
        assert_eq!(s.table_for("dbserver1.shop.orders"), "shop.orders");
        assert!(s.pattern().unwrap().is_match("dbserver1.shop.orders"));
        assert!(!s.pattern().unwrap().is_match("x.dbserver1.shop.orders"));
        let p = s.pipeline_for("dbserver1.shop.orders", "shop.orders");
        assert_eq!(p.name, "shop/orders");
        assert_eq!(p.topics, vec!["dbserver1.shop.orders".to_string()]);
        assert_eq!(p.commit_interval, std::time::Duration::from_secs(1));

        use crate::table::types::DataType;
        let columns = vec![
            ("id".to_string(), DataType::BigInt, false),
            ("updated_at".to_string(), DataType::Timestamp(3), true),
        ];
        let orders = s
            .table_schema("orders", columns.clone(), vec!["id".into()])
            .unwrap();
        assert_eq!(orders.options["bucket"], "4");
        assert_eq!(orders.options["sequence.field"], "updated_at");
        assert_eq!(orders.options["changelog-producer"], "input");
        let other = s
            .table_schema("other", columns.clone(), vec!["id".into()])
            .unwrap();
        assert_eq!(other.options["bucket"], "2");
        assert!(!other.options.contains_key("sequence.field"));
        let keyless = s
            .table_schema("other", columns, vec![])
            .unwrap_err()
            .to_string();
        assert!(keyless.contains("tables.other.primary_key"), "{keyless}");
    }

    #[test]
    fn every_problem_of_a_sync_entry_is_named() {
        let text = format!(
            r#"{BASE}
[[cdc]]
name = "one"
topics = ["a"]
format = "json"
table = "db.a"

[[cdc]]
name = "shop"
topics_pattern = 'dbserver1\.shop\.(.*'
database = "shop"
topics = ["x"]
format = "canal-json"
buckets = 0
merge_engine = "newest"
fields = {{ a = "b" }}
commit_interval = "0s"

[cdc.tables.orders]
buckets = -1
"#
        );
        let err = from_toml("test.toml", &text).unwrap_err().to_string();
        for expected in [
            "test.toml: cdc[1] (shop).topics: a whole-database sync",
            "cdc[1] (shop).topics_pattern: not a regular expression",
            "cdc[1] (shop).format: a whole-database sync reads `debezium-json`",
            "cdc[1] (shop).buckets: must be ≥ 1, got 0",
            "cdc[1] (shop).merge_engine:",
            "cdc[1] (shop).tables.orders.buckets: must be ≥ 1, got -1",
            "cdc[1] (shop).fields: not supported",
            "cdc[1] (shop).commit_interval: must be greater than zero",
            "cdc[0] (one).table: `db.a` is not defined",
        ] {
            assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
        }
    }
}
