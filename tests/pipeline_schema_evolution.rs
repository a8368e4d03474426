//! Schema evolution while a CDC pipeline runs, on librdkafka's in-process mock cluster:
//! Debezium JSON with schemas brings a column the table lacks (`ALTER TABLE … ADD COLUMN
//! city`) and a wider type (`MODIFY age BIGINT`). The table gets `schema-1` and keeps
//! going; old rows read the new column as null; the running lookup join keeps answering
//! across the change; after a restart whose config names `city` the join selects it. With
//! `add_columns = false` the same record stops the pipeline with the reason and nothing
//! of it is written; with `ignore_unknown_fields` the field is dropped, as asked.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::table::datum::Datum;
use lakejoin::table::types::DataType;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use rdkafka::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::FutureProducer;
use serde_json::{Value, json};

use crate::support::topics::{self, send};

const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "evolve"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.user_profile"
columns = [
  { name = "user_id", type = "INT" },
  { name = "age", type = "INT" },
  { name = "sex", type = "STRING" },{more_columns}
]
primary_key = ["user_id"]
buckets = 2

[[cdc]]
name = "profiles"
topics = ["profiles"]
format = "debezium-json"
table = "shop.user_profile"
commit_interval = "200ms"
{policy}

[[enrich]]
name = "clicks"
topics = ["clicks"]
output = { topic = "clicks_enriched" }

[[enrich.join]]
table = "shop.user_profile"
on = { user_id = "user_id" }
select = [{select}]
wait_for_cdc = true
"#;

fn config(
    bootstrap: &str,
    warehouse: &str,
    policy: &str,
    city_named: bool,
) -> lakejoin::config::Config {
    let (more, select) = if city_named {
        (
            "\n  { name = \"city\", type = \"STRING\" },",
            r#""age", "sex", "city""#,
        )
    } else {
        ("", r#""age", "sex""#)
    };
    let text = CONFIG
        .replace("{bootstrap}", bootstrap)
        .replace("{warehouse}", warehouse)
        .replace("{policy}", policy)
        .replace("{more_columns}", more)
        .replace("{select}", select);
    lakejoin::config::from_toml("test", &text).unwrap()
}

/// A Debezium change event with its Connect schema (`schemas.enable=true`), as the
/// MariaDB connector writes it: `age` as `age_type`, and `city` when given.
fn profile(op: &str, id: i32, age: i64, age_type: &str, city: Option<&str>) -> String {
    let mut fields = vec![
        json!({"type": "int32", "optional": false, "field": "user_id"}),
        json!({"type": age_type, "optional": true, "field": "age"}),
        json!({"type": "string", "optional": true, "field": "sex"}),
    ];
    let mut row = json!({"user_id": id, "age": age, "sex": "f"});
    if let Some(city) = city {
        fields.push(json!({"type": "string", "optional": true, "field": "city"}));
        row["city"] = json!(city);
    }
    let row_schema = json!({"type": "struct", "fields": fields, "optional": true,
        "name": "dbserver1.shop.user_profile.Value"});
    let mut before = row_schema.clone();
    before["field"] = json!("before");
    let mut after = row_schema;
    after["field"] = json!("after");
    json!({
        "schema": {"type": "struct", "optional": false,
            "name": "dbserver1.shop.user_profile.Envelope",
            "fields": [before, after,
                {"type": "string", "optional": false, "field": "op"},
                {"type": "int64", "optional": true, "field": "ts_ms"}]},
        "payload": {"before": null, "after": row, "op": op, "ts_ms": 1}
    })
    .to_string()
}

struct Setup {
    _cluster: MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    bootstrap: String,
    dir: tempfile::TempDir,
    producer: FutureProducer,
}

fn setup() -> Setup {
    let cluster = MockCluster::new(1).unwrap();
    for t in ["profiles", "clicks", "clicks_enriched"] {
        cluster.create_topic(t, 1, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let producer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    Setup {
        _cluster: cluster,
        bootstrap,
        dir: tempfile::tempdir().unwrap(),
        producer,
    }
}

impl Setup {
    fn warehouse_uri(&self) -> String {
        self.dir.path().display().to_string()
    }

    fn warehouse(&self) -> Warehouse {
        Warehouse::from_uri(&self.warehouse_uri(), &BTreeMap::new()).unwrap()
    }

    /// The table's rows (sorted by key) once `done` holds for them; deadline 60 s.
    async fn rows_when(
        &self,
        done: impl Fn(&Table, &[Vec<Datum>]) -> bool,
    ) -> (Table, Vec<Vec<Datum>>) {
        let id = TableIdentifier::parse("shop.user_profile").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(table) = Table::open(&self.warehouse(), &id).await {
                let mut rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
                rows.sort_by_key(|r| match r[0] {
                    Datum::Int(i) => i,
                    _ => i32::MAX,
                });
                if done(&table, &rows) {
                    return (table, rows);
                }
            }
            assert!(Instant::now() < deadline, "the table never got there");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The enriched clicks from the start of the output topic until `n` arrived, by
/// `click_id` (the last of a click's records); deadline 60 s.
async fn enriched(bootstrap: &str, n: usize) -> BTreeMap<i64, Value> {
    let by_click = |out: &[Value]| -> BTreeMap<i64, Value> {
        out.iter()
            .map(|v| (v["click_id"].as_i64().expect("a click_id"), v.clone()))
            .collect()
    };
    let topic = "clicks_enriched";
    let mut out = Vec::new();
    let consumer = topics::reader(bootstrap, topic);
    topics::read_until(&consumer, topic, &mut out, topics::payload_json, |out| {
        by_click(out).len() >= n
    })
    .await;
    by_click(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_mid_stream_evolves_the_table_and_the_join_selects_it_after_a_restart() {
    let s = setup();
    send(
        &s.producer,
        "profiles",
        "1",
        &profile("r", 1, 30, "int32", None),
    )
    .await;
    send(
        &s.producer,
        "profiles",
        "2",
        &profile("r", 2, 40, "int32", None),
    )
    .await;
    let running = lakejoin::pipeline::start(config(&s.bootstrap, &s.warehouse_uri(), "", false))
        .await
        .unwrap();
    s.rows_when(|_, rows| rows.len() == 2).await;
    send(
        &s.producer,
        "clicks",
        "a",
        r#"{"click_id": 1, "user_id": 1}"#,
    )
    .await;
    assert_eq!(enriched(&s.bootstrap, 1).await[&1]["age"], 30);

    // ALTER TABLE user_profile ADD COLUMN city …, MODIFY age BIGINT; then an insert.
    send(
        &s.producer,
        "profiles",
        "3",
        &profile("c", 3, 5_000_000_000, "int64", Some("Bern")),
    )
    .await;
    let (table, rows) = s.rows_when(|_, rows| rows.len() == 3).await;
    let schema = table.schema();
    assert_eq!(schema.id, 1, "one new schema file for both changes");
    let city = schema.fields.last().unwrap();
    assert_eq!(
        (city.id, city.name.as_str(), city.data_type),
        (3, "city", DataType::Varchar(i32::MAX as u32))
    );
    assert_eq!(schema.fields[1].data_type, DataType::BigInt, "age widened");
    assert_eq!(
        rows,
        vec![
            vec![
                Datum::Int(1),
                Datum::BigInt(30),
                Datum::String("f".into()),
                Datum::Null
            ],
            vec![
                Datum::Int(2),
                Datum::BigInt(40),
                Datum::String("f".into()),
                Datum::Null
            ],
            vec![
                Datum::Int(3),
                Datum::BigInt(5_000_000_000),
                Datum::String("f".into()),
                Datum::String("Bern".into())
            ],
        ]
    );
    // Data files: the first ones keep schema 0, the new one has schema 1.
    let snapshot = table.latest_snapshot().await.unwrap().unwrap();
    let mut ids: Vec<i64> = table
        .live_files(&snapshot)
        .await
        .unwrap()
        .iter()
        .map(|e| e.file.schema_id)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids, vec![0, 1]);

    // The running join moved to the new schema: the widened age comes out whole.
    send(
        &s.producer,
        "clicks",
        "b",
        r#"{"click_id": 2, "user_id": 3}"#,
    )
    .await;
    let out = enriched(&s.bootstrap, 2).await;
    assert_eq!(out[&2]["age"], 5_000_000_000i64);
    assert!(
        out[&2].get("city").is_none(),
        "the config does not select city yet"
    );
    running.shutdown().await.unwrap();

    // Restarted with `city` in the table's columns and the join's select.
    let running = lakejoin::pipeline::start(config(&s.bootstrap, &s.warehouse_uri(), "", true))
        .await
        .unwrap();
    send(
        &s.producer,
        "clicks",
        "c",
        r#"{"click_id": 3, "user_id": 3}"#,
    )
    .await;
    send(
        &s.producer,
        "clicks",
        "d",
        r#"{"click_id": 4, "user_id": 1}"#,
    )
    .await;
    let out = enriched(&s.bootstrap, 4).await;
    assert_eq!(out[&3]["city"], "Bern");
    assert_eq!(
        out[&4]["city"],
        Value::Null,
        "an old row's new column is null"
    );
    assert_eq!(out[&4]["age"], 30);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_add_columns_the_record_stops_the_pipeline_and_nothing_of_it_is_written() {
    let s = setup();
    send(
        &s.producer,
        "profiles",
        "1",
        &profile("r", 1, 30, "int32", None),
    )
    .await;
    send(
        &s.producer,
        "profiles",
        "2",
        &profile("c", 2, 40, "int32", Some("Bern")),
    )
    .await;
    let policy = "schema_evolution = { add_columns = false }";
    let mut running =
        lakejoin::pipeline::start(config(&s.bootstrap, &s.warehouse_uri(), policy, false))
            .await
            .unwrap();
    let (name, result) = tokio::time::timeout(Duration::from_secs(60), running.next_exit())
        .await
        .expect("the pipeline stops")
        .unwrap();
    assert_eq!(name, "profiles");
    let err = result.unwrap_err().to_string();
    assert!(
        err.contains("field `city` (STRING), which the table lacks")
            && err.contains("add_columns is false in [[cdc]] profiles")
            && err.contains("--add-column 'city STRING'"),
        "{err}"
    );
    let (table, rows) = s.rows_when(|_, rows| rows.len() == 1).await;
    assert_eq!(table.schema().id, 0, "no schema was written");
    assert_eq!(rows[0][0], Datum::Int(1));
    // The record's offset was not committed: a restart reads it again.
    let offsets = table
        .latest_snapshot()
        .await
        .unwrap()
        .and_then(|s| s.properties)
        .and_then(|p| p.get("lakejoin.offsets.profiles").cloned())
        .unwrap();
    assert_eq!(offsets, r#"{"profiles":{"0":1}}"#);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_unknown_fields_drops_them_as_asked() {
    let s = setup();
    send(
        &s.producer,
        "profiles",
        "1",
        &profile("c", 1, 30, "int32", Some("Bern")),
    )
    .await;
    let policy = "schema_evolution = { add_columns = false, ignore_unknown_fields = true }";
    let running =
        lakejoin::pipeline::start(config(&s.bootstrap, &s.warehouse_uri(), policy, false))
            .await
            .unwrap();
    let (table, rows) = s.rows_when(|_, rows| rows.len() == 1).await;
    assert_eq!(table.schema().id, 0);
    assert_eq!(rows[0].len(), 3);
    running.shutdown().await.unwrap();
}

#[test]
fn contradicting_policies_are_a_config_error_naming_the_key() {
    let text = CONFIG
        .replace("{bootstrap}", "localhost:9092")
        .replace("{warehouse}", "memory://")
        .replace("{more_columns}", "")
        .replace("{select}", r#""age""#)
        .replace(
            "{policy}",
            "schema_evolution = { ignore_unknown_fields = true }",
        );
    let err = lakejoin::config::from_toml("connectors.toml", &text)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("connectors.toml")
            && err.contains("cdc[0] (profiles).schema_evolution")
            && err.contains("contradict"),
        "{err}"
    );
}

/// Two pipelines write one table; one of them brings `city`. The other keeps decoding in
/// the schema it started with (its topic never has `city`): its changes reach the writer
/// after the switch and are laid out in the new schema, `city` null. None is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_still_in_the_old_schema_keeps_writing_after_another_evolved_the_table() {
    let s = setup();
    s._cluster.create_topic("profiles_eu", 1, 1).unwrap();
    let second = r#"
[[cdc]]
name = "profiles-eu"
topics = ["profiles_eu"]
format = "debezium-json"
table = "shop.user_profile"
commit_interval = "200ms"
"#;
    let mut config = config(&s.bootstrap, &s.warehouse_uri(), "", false);
    let extra = lakejoin::config::from_toml(
        "test",
        &CONFIG
            .replace("{bootstrap}", &s.bootstrap)
            .replace("{warehouse}", &s.warehouse_uri())
            .replace("{policy}", "")
            .replace("{more_columns}", "")
            .replace("{select}", r#""age""#)
            .replace("[[enrich]]", &format!("{second}\n[[enrich]]")),
    )
    .unwrap();
    config.cdc = extra.cdc;
    send(
        &s.producer,
        "profiles_eu",
        "1",
        &profile("c", 1, 30, "int32", None),
    )
    .await;
    let running = lakejoin::pipeline::start(config).await.unwrap();
    s.rows_when(|_, rows| rows.len() == 1).await;
    send(
        &s.producer,
        "profiles",
        "2",
        &profile("c", 2, 40, "int32", Some("Bern")),
    )
    .await;
    s.rows_when(|t, rows| rows.len() == 2 && t.schema().id == 1)
        .await;
    send(
        &s.producer,
        "profiles_eu",
        "3",
        &profile("c", 3, 50, "int32", None),
    )
    .await;
    let (_, rows) = s.rows_when(|_, rows| rows.len() == 3).await;
    assert_eq!(
        rows,
        vec![
            vec![
                Datum::Int(1),
                Datum::Int(30),
                Datum::String("f".into()),
                Datum::Null
            ],
            vec![
                Datum::Int(2),
                Datum::Int(40),
                Datum::String("f".into()),
                Datum::String("Bern".into())
            ],
            vec![
                Datum::Int(3),
                Datum::Int(50),
                Datum::String("f".into()),
                Datum::Null
            ],
        ]
    );
    let metrics = running.metrics()["profiles-eu"].clone();
    assert_eq!(
        lakejoin::observe::PipelineMetrics::get(&metrics.dead_lettered),
        0
    );
    running.shutdown().await.unwrap();
}

/// Two pipelines write one table; the second may not add columns and ignores the fields
/// the table lacks. Once the first added `city`, the second decodes in the new schema
/// from its next record on (it learns of the change from the table's writer), so its
/// `city` is written instead of dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_that_may_not_add_columns_takes_a_column_another_pipeline_added() {
    let s = setup();
    s._cluster.create_topic("profiles_eu", 1, 1).unwrap();
    let second = r#"
[[cdc]]
name = "profiles-eu"
topics = ["profiles_eu"]
format = "debezium-json"
table = "shop.user_profile"
commit_interval = "200ms"
schema_evolution = { add_columns = false, ignore_unknown_fields = true }
"#;
    let mut config = config(&s.bootstrap, &s.warehouse_uri(), "", false);
    let extra = lakejoin::config::from_toml(
        "test",
        &CONFIG
            .replace("{bootstrap}", &s.bootstrap)
            .replace("{warehouse}", &s.warehouse_uri())
            .replace("{policy}", "")
            .replace("{more_columns}", "")
            .replace("{select}", r#""age""#)
            .replace("[[enrich]]", &format!("{second}\n[[enrich]]")),
    )
    .unwrap();
    config.cdc = extra.cdc;
    send(
        &s.producer,
        "profiles_eu",
        "1",
        &profile("c", 1, 30, "int32", Some("Zug")),
    )
    .await;
    let running = lakejoin::pipeline::start(config).await.unwrap();
    s.rows_when(|_, rows| rows.len() == 1).await;
    send(
        &s.producer,
        "profiles",
        "2",
        &profile("c", 2, 40, "int32", Some("Bern")),
    )
    .await;
    s.rows_when(|t, rows| rows.len() == 2 && t.schema().id == 1)
        .await;
    send(
        &s.producer,
        "profiles_eu",
        "3",
        &profile("c", 3, 50, "int32", Some("Chur")),
    )
    .await;
    let (_, rows) = s.rows_when(|_, rows| rows.len() == 3).await;
    let cities: Vec<&Datum> = rows.iter().map(|r| &r[3]).collect();
    assert_eq!(
        cities,
        [
            // Before the column existed the second pipeline dropped it, as asked.
            &Datum::Null,
            &Datum::String("Bern".into()),
            &Datum::String("Chur".into()),
        ]
    );
    running.shutdown().await.unwrap();
}
