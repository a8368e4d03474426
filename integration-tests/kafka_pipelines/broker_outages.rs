//! Broker outages, each on an Apache Kafka broker of the test's own (the shared one cannot
//! be stopped): a broker that is down when `lakejoin run` starts is waited for (live, not
//! ready, a clear JSON log line), and a broker restart mid-run is survived with the
//! outage reported once and nothing lost.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::support::broker::{self, Deployment, TestProducer, TopicReader, tail, wait_until};
use crate::support::shop::ShopTopics;
use crate::{customer_row, debezium, debezium_customers, order_until_enriched_with};

/// The Debezium customers' pipelines for a broker that is not up yet, with JSON logs.
fn late_broker_config(topics: &ShopTopics, group: &str) -> String {
    debezium_customers(topics, group)
        // Find the broker and the topics soon after they appear.
        .kafka_property("reconnect.backoff.max.ms", "1000")
        .kafka_property("topic.metadata.refresh.interval.ms", "1000")
        .set("observe", "listen", "127.0.0.1:0")
        .set("observe", "log_format", "json")
        .build()
}

/// `lakejoin run` started while no broker listens keeps running: it logs (as JSON) that
/// the broker is unavailable, retries, stays live but not ready, and starts working once a
/// broker comes up on that address. Uses an Apache Kafka broker of its own, since the
/// shared one cannot be stopped.
#[test]
fn a_broker_that_is_down_at_start_is_waited_for() {
    let broker_dir = tempfile::tempdir().expect("broker dir");
    let mut kafka = broker::KafkaBroker::set_up(broker_dir.path());
    let bootstrap = kafka.bootstrap.clone();
    let topics = ShopTopics::named();
    let deployment = Deployment::on(&bootstrap, &late_broker_config(&topics, "late"));
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;
    let mut process = deployment.start();
    let address = process.endpoint();

    // Retries with a clear (JSON) log line, and does not exit.
    let line = process.wait_for_log("cannot read topic metadata");
    let event: Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON log line: {line}: {e}"));
    assert_eq!(event["level"], "WARN", "{event}");
    assert_eq!(event["pipeline"], "customers-cdc", "{event}");
    assert_eq!(event["bootstrap"], bootstrap.as_str(), "{event}");
    assert!(
        event["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Kafka broker unavailable")),
        "{event}"
    );
    wait_until("a second attempt was logged", || {
        process
            .log_text()
            .lines()
            .filter(|l| l.contains("cannot read topic metadata"))
            .count()
            >= 2
    });
    process.assert_alive();
    assert_eq!(
        broker::http_get(address, "/health/live").map(|(status, _)| status),
        Some(200)
    );
    let (status, body) = broker::http_get(address, "/health/ready").expect("an answer");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("pipeline customers-cdc: no Kafka partitions assigned yet"),
        "{body}"
    );

    // The broker comes up, empty.
    kafka.start();
    broker::create_topics_on(&bootstrap, &[(&customers, 2), (&orders, 2), (&enriched, 2)]);
    let producer = TestProducer::on(&bootstrap);
    producer.send(&customers, "1", &debezium("c", 1, "ada", "ch", 10));
    producer.send(&customers, "2", &debezium("c", 2, "bob", "de", 10));
    producer.flush();
    deployment.wait_for_table(
        "shop.customers",
        &[
            customer_row(1, "ada", "ch", 10),
            customer_row(2, "bob", "de", 10),
        ],
    );
    process.wait_for_log("available again");
    for id in 1..=3 {
        producer.send(
            &orders,
            &id.to_string(),
            &json!({"order_id": id, "customer_id": id}).to_string(),
        );
    }
    producer.flush();
    let mut output = TopicReader::on(&bootstrap, &enriched);
    output.read_at_least(3);
    // Each order's first enrichment: orders 1 and 2 may come again after the outage (their
    // offsets' commit may not have reached the broker before it went away; at least
    // once), and a replay is enriched with the customer as it is then.
    let mut names: BTreeMap<i64, Value> = BTreeMap::new();
    for r in &output.records {
        names
            .entry(r.value["order_id"].as_i64().expect("order_id"))
            .or_insert_with(|| r.value["customer_name"].clone());
    }
    assert_eq!(
        names,
        BTreeMap::from([(1, json!("ada")), (2, json!("bob")), (3, Value::Null)])
    );
    wait_until("/health/ready answers 200", || {
        broker::http_get(address, "/health/ready").is_some_and(|(status, _)| status == 200)
    });
    process.terminate();
}

/// The broker stops mid-run (SIGTERM, keeping its log) and comes back on the same address
/// with its data: lakejoin keeps running, reports the outage once, and then consumes,
/// commits and produces again, losing nothing.
#[test]
fn a_broker_restart_mid_run_is_survived() {
    let broker_dir = tempfile::tempdir().expect("broker dir");
    let mut kafka = broker::KafkaBroker::start_in(broker_dir.path());
    let bootstrap = kafka.bootstrap.clone();
    let topics = ShopTopics::named();
    let deployment = Deployment::on(&bootstrap, &late_broker_config(&topics, "restart"));
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;
    broker::create_topics_on(&bootstrap, &[(&customers, 2), (&orders, 2), (&enriched, 2)]);
    let mut process = deployment.start();
    let address = process.endpoint();

    let producer = TestProducer::on(&bootstrap);
    producer.send(&customers, "1", &debezium("c", 1, "ada", "ch", 10));
    producer.send(&customers, "2", &debezium("c", 2, "bob", "de", 10));
    producer.flush();
    deployment.wait_for_table(
        "shop.customers",
        &[
            customer_row(1, "ada", "ch", 10),
            customer_row(2, "bob", "de", 10),
        ],
    );
    for id in 1..=2 {
        producer.send(
            &orders,
            &id.to_string(),
            &json!({"order_id": id, "customer_id": id}).to_string(),
        );
    }
    producer.flush();
    drop(producer);
    TopicReader::on(&bootstrap, &enriched).read_at_least(2);

    // The broker goes away: reported once, and the process stays up.
    kafka.stop();
    process.wait_for_log("Kafka broker unavailable; waiting for it");
    process.assert_alive();
    assert_eq!(
        broker::http_get(address, "/health/live").map(|(status, _)| status),
        Some(200)
    );

    // It comes back with its topics; new changes and facts flow again.
    kafka.start();
    process.wait_for_log("Kafka broker reachable again");
    let producer = TestProducer::on(&bootstrap);
    producer.send(&customers, "1", &debezium("u", 1, "ada lovelace", "uk", 20));
    producer.flush();
    deployment.wait_for_table(
        "shop.customers",
        &[
            customer_row(1, "ada lovelace", "uk", 20),
            customer_row(2, "bob", "de", 10),
        ],
    );
    for id in 3..=4 {
        producer.send(
            &orders,
            &id.to_string(),
            &json!({"order_id": id, "customer_id": id - 2}).to_string(),
        );
    }
    producer.flush();
    let mut output = TopicReader::on(&bootstrap, &enriched);
    output.read_until("orders 1 to 4 enriched", |records| {
        let ids: BTreeSet<i64> = records
            .iter()
            .filter_map(|r| r.value["order_id"].as_i64())
            .collect();
        (1..=4).all(|id| ids.contains(&id))
    });
    let names: BTreeMap<i64, Value> = output
        .records
        .iter()
        .map(|r| {
            (
                r.value["order_id"].as_i64().expect("order_id"),
                r.value["customer_name"].clone(),
            )
        })
        .collect();
    // Order 3 may be joined before the lookup refreshed to the commit that renamed its
    // customer (lookups follow commits asynchronously; `wait_for_cdc` is what waits).
    assert!(
        [json!("ada"), json!("ada lovelace")].contains(&names[&3]),
        "{names:?}"
    );
    assert_eq!(
        (&names[&1], &names[&2], &names[&4]),
        (&json!("ada"), &json!("bob"), &json!("bob"))
    );
    // The update reaches the lookups of later orders.
    order_until_enriched_with(
        (&producer, &orders, &mut output),
        (5, 1),
        "ada lovelace",
        None,
    );
    process.assert_alive();
    let log = process.terminate();
    // librdkafka's per-reconnect failures are not repeated at error level.
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(r#""level":"ERROR""#))
        .collect();
    assert!(errors.is_empty(), "error lines:\n{}", errors.join("\n"));
    let outage_lines = log
        .matches("Kafka broker unavailable; waiting for it")
        .count();
    assert!(
        (1..=2).contains(&outage_lines),
        "at most one outage line per pipeline, got {outage_lines}:\n{}",
        tail(&log, 40)
    );
}
