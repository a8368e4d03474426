//! A CDC pipeline on a two-column summing table (`id INT`, `v BIGINT`) and its change
//! records, for the tests that drive `TableSink` directly.

use lakejoin::lsm::row_check::RowCheck;
use lakejoin::pipeline::cdc::ChangeBatch;
use lakejoin::table::Table;
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;

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
