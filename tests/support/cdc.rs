//! A CDC pipeline on a two-column summing table (`id INT`, `v BIGINT`) and its change
//! records, for the tests that drive `TableSink` directly.

use std::collections::{BTreeMap, HashMap};

use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::row_check::RowCheck;
use lakejoin::pipeline::cdc::{ChangeBatch, Offsets};
use lakejoin::table::Table;
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::types::DataType;

/// Pipeline `p` reading topic `changes` into `db.t`, committing every 20 ms or
/// `commit_max_rows` changes.
pub fn cdc_config(commit_max_rows: u64) -> lakejoin::config::CdcConfig {
    cdc_config_every(commit_max_rows, "20ms")
}

/// [`cdc_config`] committing every `commit_interval` (a TOML duration such as "600ms").
pub fn cdc_config_every(
    commit_max_rows: u64,
    commit_interval: &str,
) -> lakejoin::config::CdcConfig {
    let text = format!(
        r#"
[kafka]
bootstrap_servers = "unused:9092"
[warehouse]
uri = "memory://"
[[table]]
name = "db.t"
columns = [{{ name = "id", type = "INT NOT NULL" }}, {{ name = "v", type = "BIGINT" }}]
primary_key = ["id"]
buckets = 2
[[cdc]]
name = "p"
topics = ["changes"]
format = "json"
table = "db.t"
commit_interval = "{commit_interval}"
commit_max_rows = {commit_max_rows}
"#
    );
    lakejoin::config::from_toml("test", &text)
        .expect("test config")
        .cdc[0]
        .clone()
}

/// Record `offset` of topic `changes`: +1 on key `offset % keys` of `table`.
pub fn change_batch(table: &Table, offset: i64, keys: i64) -> ChangeBatch {
    plus_one(table, offset, (offset % keys) as i32)
}

/// Record `offset` of topic `changes` (partition 0): +1 on key `key` of `table`, checked
/// as a CDC pipeline checks it.
pub fn plus_one(table: &Table, offset: i64, key: i32) -> ChangeBatch {
    let change = RowCheck::new(table)
        .expect("row check")
        .check(RowKind::Insert, vec![Datum::Int(key), Datum::BigInt(1)])
        .expect("the table takes +1 rows")
        .expect("an insert is never dropped");
    ChangeBatch::of_record("p", "changes", 0, offset + 1, None, vec![change])
}

/// The schema of `db.t`: `id INT` (the key, 2 buckets) and `v BIGINT` summed by the
/// aggregation engine, so a change applied twice or lost shows in the rows.
pub fn summing_schema(max_retries: u32) -> TableSchema {
    TableSchema::new(
        vec![
            ("id".into(), DataType::Int, false),
            ("v".into(), DataType::BigInt, true),
        ],
        vec![],
        vec!["id".into()],
        BTreeMap::from([
            ("bucket".to_string(), "2".to_string()),
            ("merge-engine".to_string(), "aggregation".to_string()),
            ("fields.v.aggregate-function".to_string(), "sum".to_string()),
            ("commit.max-retries".to_string(), max_retries.to_string()),
        ]),
    )
    .expect("a valid schema")
}

/// The rows of a [`summing_schema`] table: id → v.
pub async fn rows_of(table: &Table) -> HashMap<i32, i64> {
    scan(table, None, &ScanFilter::default())
        .await
        .expect("the table scans")
        .into_iter()
        .map(|row| match (&row[0], &row[1]) {
            (Datum::Int(k), Datum::BigInt(v)) => (*k, *v),
            other => panic!("unexpected row {other:?}"),
        })
        .collect()
}

/// Where `offsets` say partition 0 of `changes` resumes.
pub fn resume_offset(offsets: &Offsets) -> i64 {
    offsets
        .get("changes")
        .and_then(|p| p.get(&0))
        .copied()
        .unwrap_or(0)
}
