//! Whole-database sync on the real chain: MariaDB → Debezium's MariaDB connector (the
//! README's properties, capturing the whole `shop` database, JSON with schemas) → the
//! suite's Apache Kafka → one lakejoin `[[cdc]]` with `topics_pattern` and `database`.
//!
//! `lakejoin validate` first shows the tables the sync would create from the snapshot
//! records; then `lakejoin run` creates them (types as Paimon's MySQL CDC maps them,
//! the primary key from the record keys, a per-table override of the buckets) and keeps
//! them equal to MariaDB through updates and deletes. A table created in MariaDB while
//! everything runs gets its topic and its lakejoin table without a restart. Java Paimon
//! and pypaimon read the created tables.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::broker::{self, Deployment};
use support::debezium::{ConnectWorker, MariaDb, readme_properties, set_property};

const SCHEMA: &str = "CREATE USER 'debezium'@'%' IDENTIFIED BY 'dbz';
GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR, LOCK TABLES ON *.* TO 'debezium'@'%';
CREATE DATABASE shop;
CREATE TABLE shop.user_profile (user_id INT PRIMARY KEY, age INT, sex VARCHAR(8));
CREATE TABLE shop.orders (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, amount DECIMAL(10,2), created DATETIME(3));
INSERT INTO shop.user_profile VALUES (1, 30, 'f'), (2, 41, 'm');
INSERT INTO shop.orders VALUES (100, 1, 12.50, '2024-03-01 10:00:00.345'), (101, 2, 7.00, NULL);";

const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[warehouse]
uri = "{warehouse}"

[[cdc]]
name = "shop-sync"
topics_pattern = '{prefix}\.shop\..*'
database = "shop"
format = "debezium-json"
commit_interval = "1s"
partition_discovery_interval = "1s"

[cdc.tables.orders]
buckets = 2
"#;

fn lakejoin_validate(config: &std::path::Path) -> String {
    let mut command = std::process::Command::new(support::lakejoin_bin());
    command.arg("validate").arg("--config").arg(config);
    let output = support::run(command, "");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "lakejoin validate failed:\n{text}");
    text
}

/// Java Paimon's read of `table`, sorted by its first column.
fn java_read(warehouse: &str, table: &str) -> Vec<Value> {
    let args = ["read", warehouse, table].map(String::from);
    let output = support::java::java_oracle(&args, "");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "java read {table} failed:\n{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut rows = support::parse_jsonl("java read", &text);
    rows.sort_by_key(|r| {
        r.as_object()
            .and_then(|o| o.values().next())
            .map(|v| v.to_string())
    });
    rows
}

#[test]
fn a_whole_database_is_followed_and_a_table_created_later_is_picked_up() {
    let started = Instant::now();
    let bootstrap = broker::bootstrap();
    let prefix = broker::unique("dbsync");
    let dir = tempfile::tempdir().expect("temp dir");
    let db = MariaDb::start(&dir.path().join("mariadb"));
    db.sql(SCHEMA);

    let mut worker = readme_properties("# docker/debezium/connect-standalone.properties");
    set_property(&mut worker, "bootstrap.servers", &bootstrap);
    set_property(&mut worker, "key.converter.schemas.enable", "true");
    set_property(&mut worker, "value.converter.schemas.enable", "true");
    let mut connector = readme_properties("# docker/debezium/mariadb-source.properties");
    // The whole database, DECIMAL in its exact default encoding (schemas say what it is).
    connector.retain(|(k, _)| k != "table.include.list" && k != "decimal.handling.mode");
    set_property(&mut connector, "database.hostname", "127.0.0.1");
    set_property(&mut connector, "database.port", &db.port.to_string());
    set_property(&mut connector, "topic.prefix", &prefix);
    set_property(
        &mut connector,
        "schema.history.internal.kafka.bootstrap.servers",
        &bootstrap,
    );
    set_property(
        &mut connector,
        "schema.history.internal.kafka.topic",
        &format!("{prefix}.schema-history"),
    );
    let mut worker = ConnectWorker::start(&dir.path().join("connect"), worker, &connector, &[]);
    worker.wait_for_log("Snapshot completed", 0, Duration::from_secs(180));
    // The snapshot's records are on their topics (which the worker's producer creates).
    for table in ["user_profile", "orders"] {
        let topic = format!("{prefix}.shop.{table}");
        broker::wait_until(&format!("{topic} exists"), || broker::topic_exists(&topic));
        broker::TopicReader::new(&topic).read_at_least(2);
    }
    eprintln!("chain up after {:?}", started.elapsed());

    let config = CONFIG
        .replace("{prefix}", &prefix)
        .replace("{group}", &broker::unique("lakejoin"));
    let deployment = Deployment::new(&config);

    // Before anything runs: what the sync would create.
    let preview = lakejoin_validate(&deployment.config);
    for expected in [
        format!(
            "{prefix}.shop.user_profile → shop.user_profile: would be created: user_id INT NOT NULL, age INT, sex STRING; primary key (user_id)"
        ),
        format!(
            "{prefix}.shop.orders → shop.orders: would be created: order_id BIGINT NOT NULL, user_id INT NOT NULL, amount DECIMAL(10, 2), created TIMESTAMP(3); primary key (order_id); bucket = 2"
        ),
    ] {
        assert!(
            preview.contains(&expected),
            "missing {expected:?} in:\n{preview}"
        );
    }
    assert!(
        !preview.contains("schema-history"),
        "only the database's topics: {preview}"
    );

    let mut lakejoin = deployment.start();
    deployment.wait_for_table(
        "shop.user_profile",
        &[
            json!({"user_id": 1, "age": 30, "sex": "f"}),
            json!({"user_id": 2, "age": 41, "sex": "m"}),
        ],
    );
    deployment.wait_for_table(
        "shop.orders",
        &[
            json!({"order_id": 100, "user_id": 1, "amount": "12.50", "created": "2024-03-01 10:00:00.345"}),
            json!({"order_id": 101, "user_id": 2, "amount": "7.00", "created": null}),
        ],
    );

    // Changes while it runs, and a table the database gains.
    db.sql(
        "UPDATE shop.user_profile SET age = 31 WHERE user_id = 1;
         DELETE FROM shop.orders WHERE order_id = 101;
         CREATE TABLE shop.coupons (code VARCHAR(16) PRIMARY KEY, pct SMALLINT NOT NULL);
         INSERT INTO shop.coupons VALUES ('SPRING', 15), ('VIP', 30);",
    );
    deployment.wait_for_table(
        "shop.user_profile",
        &[
            json!({"user_id": 1, "age": 31, "sex": "f"}),
            json!({"user_id": 2, "age": 41, "sex": "m"}),
        ],
    );
    deployment.wait_for_table(
        "shop.orders",
        &[json!({"order_id": 100, "user_id": 1, "amount": "12.50", "created": "2024-03-01 10:00:00.345"})],
    );
    let coupons = [
        json!({"code": "SPRING", "pct": 15}),
        json!({"code": "VIP", "pct": 30}),
    ];
    deployment.wait_for_table("shop.coupons", &coupons);
    lakejoin.assert_alive();
    let log = lakejoin.terminate();
    assert!(
        !log.contains("bad record"),
        "no record was a bad one:\n{log}"
    );

    // The reference implementation and the second oracle read what the sync created.
    let warehouse = deployment.warehouse();
    let java_orders = java_read(&warehouse, "shop.orders");
    assert_eq!(java_orders.len(), 1, "{java_orders:?}");
    assert_eq!(java_orders[0]["order_id"], json!(100), "{java_orders:?}");
    assert_eq!(
        java_orders[0]["amount"].to_string().trim_matches('"'),
        "12.50"
    );
    let java_coupons = java_read(&warehouse, "shop.coupons");
    assert_eq!(java_coupons, coupons.to_vec());
    assert_eq!(deployment.pypaimon("shop.coupons"), coupons.to_vec());
    assert_eq!(
        deployment.pypaimon("shop.user_profile"),
        vec![
            json!({"user_id": 1, "age": 31, "sex": "f"}),
            json!({"user_id": 2, "age": 41, "sex": "m"}),
        ]
    );
    drop(worker);
    drop(db);
}
