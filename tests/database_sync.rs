//! Whole-database sync on librdkafka's in-process mock cluster: one `[[cdc]]` with
//! `topics_pattern` follows Debezium topics into a database, creating each table from
//! its first record (types from the Connect schema, key from the record key, the sync's
//! defaults and per-table overrides), picks up a topic created while it runs, leaves
//! other databases' topics alone, resumes exactly once per table after a restart, and
//! stops naming the key to set when a table has no primary key.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::table::datum::Datum;
use lakejoin::table::types::{DataType, MAX_LENGTH};
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use rdkafka::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};

use crate::support::topics::send;

const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "sync"

[warehouse]
uri = "{warehouse}"

[[cdc]]
name = "shop"
topics_pattern = 'dbserver1\.shop\..*'
database = "shop"
format = "debezium-json"
commit_interval = "200ms"
partition_discovery_interval = "200ms"

[cdc.tables.orders]
buckets = 2
merge_engine = "aggregation"
options = { "fields.amount.aggregate-function" = "sum" }
"#;

fn config(bootstrap: &str, warehouse: &str) -> lakejoin::config::Config {
    let text = CONFIG
        .replace("{bootstrap}", bootstrap)
        .replace("{warehouse}", warehouse);
    lakejoin::config::from_toml("test", &text).unwrap()
}

/// A Debezium change event with its Connect schema, as the MariaDB connector writes it
/// with `schemas.enable=true`: `fields` are `(name, connect type, optional)`.
fn event(fields: &[(&str, &str, bool)], op: &str, row: Value) -> String {
    let fields: Vec<Value> = fields
        .iter()
        .map(|(name, t, optional)| json!({"type": t, "optional": optional, "field": name}))
        .collect();
    let row_schema = json!({"type": "struct", "optional": true, "fields": fields});
    let (mut before, mut after) = (row_schema.clone(), row_schema);
    before["field"] = json!("before");
    after["field"] = json!("after");
    let (b, a) = if op == "d" {
        (row, Value::Null)
    } else {
        (Value::Null, row)
    };
    json!({
        "schema": {"type": "struct", "optional": false, "fields": [before, after,
            {"type": "string", "optional": false, "field": "op"}]},
        "payload": {"before": b, "after": a, "op": op, "ts_ms": 1}
    })
    .to_string()
}

/// A record key with its Connect schema: one int field.
fn key(field: &str, id: i64) -> String {
    json!({
        "schema": {"type": "struct", "optional": false,
            "fields": [{"type": "int32", "optional": false, "field": field}]},
        "payload": {field: id}
    })
    .to_string()
}

const PROFILE: [(&str, &str, bool); 3] = [
    ("user_id", "int32", false),
    ("age", "int32", true),
    ("sex", "string", true),
];
const ORDER: [(&str, &str, bool); 2] = [("order_id", "int32", false), ("amount", "int64", true)];

async fn profile(p: &FutureProducer, op: &str, id: i64, age: i64) {
    let row = json!({"user_id": id, "age": age, "sex": "f"});
    let k = key("user_id", id);
    send(
        p,
        "dbserver1.shop.user_profile",
        &k,
        &event(&PROFILE, op, row),
    )
    .await;
}

async fn order(p: &FutureProducer, id: i64, amount: i64) {
    let row = json!({"order_id": id, "amount": amount});
    let k = key("order_id", id);
    send(p, "dbserver1.shop.orders", &k, &event(&ORDER, "c", row)).await;
}

struct Setup {
    cluster: MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    bootstrap: String,
    dir: tempfile::TempDir,
    producer: FutureProducer,
}

fn setup() -> Setup {
    let cluster = MockCluster::new(1).unwrap();
    cluster
        .create_topic("dbserver1.shop.user_profile", 1, 1)
        .unwrap();
    cluster.create_topic("dbserver1.shop.orders", 2, 1).unwrap();
    cluster
        .create_topic("dbserver1.crm.contacts", 1, 1)
        .unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let producer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    Setup {
        cluster,
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

    /// The rows of `name` (sorted) once `done` holds for them; deadline 60 s.
    async fn rows_when(
        &self,
        name: &str,
        done: impl Fn(&[Vec<Datum>]) -> bool,
    ) -> (Table, Vec<Vec<Datum>>) {
        let id = TableIdentifier::parse(name).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = Vec::new();
        loop {
            if let Ok(table) = Table::open(&self.warehouse(), &id).await {
                let mut rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
                rows.sort_by_key(|r| format!("{r:?}"));
                if done(&rows) {
                    return (table, rows);
                }
                last = rows;
            }
            assert!(
                Instant::now() < deadline,
                "{name} never got there; last rows: {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn field_types(table: &Table) -> Vec<(String, DataType, bool)> {
    table
        .schema()
        .fields
        .iter()
        .map(|f| (f.name.clone(), f.data_type, f.nullable))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_is_followed_its_tables_created_and_a_new_topic_picked_up_without_restart() {
    let s = setup();
    profile(&s.producer, "r", 1, 30).await;
    profile(&s.producer, "r", 2, 40).await;
    profile(&s.producer, "u", 1, 31).await;
    order(&s.producer, 10, 5).await;
    order(&s.producer, 10, 7).await;
    send(
        &s.producer,
        "dbserver1.crm.contacts",
        &key("id", 1),
        &event(&[("id", "int32", false)], "c", json!({"id": 1})),
    )
    .await;
    let running = lakejoin::pipeline::start(config(&s.bootstrap, &s.warehouse_uri()))
        .await
        .unwrap();

    let (profiles, rows) = s.rows_when("shop.user_profile", |r| r.len() == 2).await;
    assert_eq!(
        rows,
        vec![
            vec![Datum::Int(1), Datum::Int(31), Datum::String("f".into())],
            vec![Datum::Int(2), Datum::Int(40), Datum::String("f".into())],
        ]
    );
    assert_eq!(
        field_types(&profiles),
        vec![
            ("user_id".into(), DataType::Int, false),
            ("age".into(), DataType::Int, true),
            ("sex".into(), DataType::Varchar(MAX_LENGTH), true),
        ]
    );
    assert_eq!(profiles.schema().primary_keys, vec!["user_id".to_string()]);
    assert_eq!(
        profiles.schema().options["bucket"],
        "1",
        "the sync's default"
    );

    let (orders, rows) = s
        .rows_when("shop.orders", |r| {
            r == [vec![Datum::Int(10), Datum::BigInt(12)]]
        })
        .await;
    assert_eq!(
        orders.schema().options["bucket"],
        "2",
        "the table's override"
    );
    assert_eq!(orders.schema().options["merge-engine"], "aggregation");
    drop(rows);

    // A table created in the database while the sync runs.
    s.cluster
        .create_topic("dbserver1.shop.coupons", 1, 1)
        .unwrap();
    send(
        &s.producer,
        "dbserver1.shop.coupons",
        &key("code", 7),
        &event(
            &[("code", "int32", false), ("pct", "int16", true)],
            "c",
            json!({"code": 7, "pct": 15}),
        ),
    )
    .await;
    s.rows_when("shop.coupons", |r| {
        r == [vec![Datum::Int(7), Datum::SmallInt(15)]]
    })
    .await;
    // Another database's topic is not followed.
    let contacts = TableIdentifier::parse("shop.contacts").unwrap();
    assert!(Table::open(&s.warehouse(), &contacts).await.is_err());
    running.shutdown().await.unwrap();

    // While stopped: more changes; after the restart each table resumes where its own
    // snapshots say, so the sum counts every order once.
    order(&s.producer, 10, 100).await;
    profile(&s.producer, "d", 2, 40).await;
    let running = lakejoin::pipeline::start(config(&s.bootstrap, &s.warehouse_uri()))
        .await
        .unwrap();
    s.rows_when("shop.orders", |r| {
        r == [vec![Datum::Int(10), Datum::BigInt(112)]]
    })
    .await;
    s.rows_when("shop.user_profile", |r| r.len() == 1).await;
    let (_, rows) = s.rows_when("shop.coupons", |r| r.len() == 1).await;
    assert_eq!(rows.len(), 1);
    running.shutdown().await.unwrap();
    let (orders, _) = s.rows_when("shop.orders", |_| true).await;
    let snapshot = orders.latest_snapshot().await.unwrap().unwrap();
    let offsets = snapshot
        .properties
        .as_ref()
        .and_then(|p| p.get("lakejoin.offsets.shop/orders"))
        .expect("the orders pipeline's offsets are in the table's own snapshot");
    assert!(offsets.contains("dbserver1.shop.orders"), "{offsets}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_without_a_key_stops_the_sync_naming_the_key_to_set() {
    let s = setup();
    let keyless = event(&PROFILE, "c", json!({"user_id": 1, "age": 2, "sex": "m"}));
    s.producer
        .send(
            FutureRecord::<(), _>::to("dbserver1.shop.user_profile").payload(&keyless),
            Duration::from_secs(10),
        )
        .await
        .expect("produce");
    let mut running = lakejoin::pipeline::start(config(&s.bootstrap, &s.warehouse_uri()))
        .await
        .unwrap();
    let (name, result) = tokio::time::timeout(Duration::from_secs(60), running.next_exit())
        .await
        .expect("the sync stops")
        .expect("a task ended");
    let err = result.unwrap_err().to_string();
    assert_eq!(name, "shop");
    assert!(
        err.contains("shop.user_profile") && err.contains("tables.user_profile.primary_key"),
        "{err}"
    );
    let id = TableIdentifier::parse("shop.user_profile").unwrap();
    assert!(
        Table::open(&s.warehouse(), &id).await.is_err(),
        "nothing created"
    );
}
