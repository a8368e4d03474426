//! Restarts on Apache Kafka: how soon a `kill -9`ed instance enriches again with and
//! without static group membership (`[kafka] group_instance_id`), and a consumed topic
//! deleted and created again under a running process.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::broker::{self, Deployment, TestProducer, TopicReader, unique, wait_until};
use support::shop::ShopTopics;

/// The shared pipelines on `topics`, as a static member `instance_id` of the group when
/// given (`[kafka] group_instance_id`).
fn deployment(topics: &ShopTopics, instance_id: Option<&str>) -> Deployment {
    let config = topics.pipelines("restart");
    let config = match instance_id {
        Some(id) => config.kafka("group_instance_id", id),
        None => config,
    };
    Deployment::new(&config.build())
}

fn order(producer: &TestProducer, topic: &str, id: i64) {
    producer.send(
        topic,
        &id.to_string(),
        &json!({"order_id": id, "customer_id": 1}).to_string(),
    );
    producer.flush();
}

fn has_order(records: &[broker::Record], id: i64) -> bool {
    records
        .iter()
        .any(|r| r.value["order_id"].as_i64() == Some(id))
}

/// Starts lakejoin, enriches one order, kills it with SIGKILL and starts it again at once;
/// returns the time from the restart to the output of an order produced right then.
fn restart_to_first_output(instance_id: Option<&str>) -> Duration {
    let topics = ShopTopics::create(1, 2);
    let deployment = deployment(&topics, instance_id);
    let producer = TestProducer::new();
    producer.send(&topics.customers, "1", r#"{"id": 1, "name": "ada"}"#);
    producer.flush();
    let process = deployment.start();
    deployment.wait_for_table("shop.customers", &[json!({"id": 1, "name": "ada"})]);
    let mut output = TopicReader::new(&topics.enriched);
    order(&producer, &topics.orders, 1);
    output.read_until("the first order", |r| has_order(r, 1));
    // Every partition's member has joined and is consuming: the kill lands in steady state.
    process.kill_9();

    let restarted = Instant::now();
    let mut process = deployment.start();
    // Orders to both partitions, so whichever partition the restart gets first counts.
    for id in 2..=3 {
        order(&producer, &topics.orders, id);
    }
    let deadline = restarted + Duration::from_secs(120);
    while !(has_order(&output.records, 2) && has_order(&output.records, 3)) {
        assert!(
            Instant::now() < deadline,
            "no output within 120 s of the restart"
        );
        process.assert_alive();
        output.poll_for(Duration::from_millis(50));
    }
    let elapsed = restarted.elapsed();
    let record = output
        .records
        .iter()
        .find(|r| r.value["order_id"].as_i64() == Some(2))
        .expect("order 2");
    assert_eq!(record.value["customer_name"], "ada");
    process.terminate();
    elapsed
}

/// With `group_instance_id` the restarted process takes its partitions back at once; with
/// dynamic membership the group waits for the killed member's session to expire
/// (librdkafka's default `session.timeout.ms`, 45 s). Both are measured here; the figures
/// are printed for the README.
#[test]
fn a_killed_static_member_enriches_again_within_seconds() {
    let member = unique("lakejoin");
    let with_static = restart_to_first_output(Some(&member));
    let with_dynamic = restart_to_first_output(None);
    eprintln!(
        "restart after kill -9 to the first enriched output: static membership {:.1} s, \
         dynamic membership {:.1} s",
        with_static.as_secs_f64(),
        with_dynamic.as_secs_f64()
    );
    assert!(
        with_static < Duration::from_secs(15),
        "static membership: {with_static:?} from restart to output"
    );
    assert!(
        with_static < with_dynamic,
        "static {with_static:?} is not faster than dynamic {with_dynamic:?}"
    );
}

/// The topics a running process consumes are deleted and created again: it stays up, is
/// ready again, and both pipelines consume the new topics (the CDC positions stored in the
/// table are past the new topics' ends and reset to their beginnings).
#[test]
fn consumed_topics_deleted_and_created_again_are_consumed_again() {
    let topics = ShopTopics::create(1, 2);
    let deployment = deployment(&topics, None);
    let producer = TestProducer::new();
    for id in 1..=30 {
        producer.send(
            &topics.customers,
            &id.to_string(),
            &json!({"id": id, "name": format!("old{id}")}).to_string(),
        );
    }
    producer.flush();
    let mut process = deployment.start();
    let address = process.endpoint();
    let old: Vec<Value> = (1..=30)
        .map(|id| json!({"id": id, "name": format!("old{id}")}))
        .collect();
    deployment.wait_for_table("shop.customers", &old);
    let mut output = TopicReader::new(&topics.enriched);
    order(&producer, &topics.orders, 1);
    output.read_until("the first order", |r| has_order(r, 1));

    broker::delete_topics(&[&topics.customers, &topics.orders]);
    broker::create_topics(&[(&topics.customers, 1), (&topics.orders, 2)]);
    // Fewer changes than the table's stored position (30): a position kept from the old
    // topic would skip them.
    producer.send(&topics.customers, "1", r#"{"id": 1, "name": "new1"}"#);
    producer.send(&topics.customers, "31", r#"{"id": 31, "name": "new31"}"#);
    producer.flush();
    let mut expected = old.clone();
    expected[0] = json!({"id": 1, "name": "new1"});
    expected.push(json!({"id": 31, "name": "new31"}));
    deployment.wait_for_table("shop.customers", &expected);
    for id in 100..=103 {
        order(&producer, &topics.orders, id);
    }
    output.read_until("the orders of the new topic", |records| {
        (100..=103).all(|id| has_order(records, id))
    });
    let names: BTreeSet<String> = output
        .records
        .iter()
        .filter(|r| r.value["order_id"].as_i64().is_some_and(|id| id >= 100))
        .map(|r| r.value["customer_name"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(names, BTreeSet::from(["new1".to_owned()]));
    wait_until("/health/ready answers 200", || {
        broker::http_get(address, "/health/ready").is_some_and(|(status, _)| status == 200)
    });
    process.assert_alive();
    process.terminate();
}

const ENRICH_ONLY: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[warehouse]
uri = "{shared}"

[[table]]
name = "shop.customers"
columns = [
  { name = "id", type = "INT" },
  { name = "name", type = "STRING" },
]
primary_key = ["id"]
buckets = 1

[[enrich]]
name = "orders-enriched"
topics = ["{orders}"]
output = { topic = "{enriched}", key = "order_id" }

[[enrich.join]]
table = "shop.customers"
on = { customer_id = "id" }
select = ["name"]
prefix = "customer_"
"#;

/// Two instances of one group on a one-partition topic: the one its group gave no
/// partition is a working member, so `/health/ready` is 200 on both (an unready spare
/// would block every rolling update), while only one has the partition.
#[test]
fn an_instance_without_partitions_is_ready() {
    let orders = unique("orders");
    let enriched = unique("orders-enriched");
    broker::create_topics(&[(&orders, 1), (&enriched, 1)]);
    let shared = tempfile::tempdir().expect("temp dir");
    let config = ENRICH_ONLY
        .replace("{group}", &unique("spare"))
        .replace("{shared}", &shared.path().join("wh").display().to_string())
        .replace("{orders}", &orders)
        .replace("{enriched}", &enriched);
    let (first, second) = (Deployment::new(&config), Deployment::new(&config));
    let mut processes = [first.start(), second.start()];
    let addresses: Vec<_> = processes.iter_mut().map(|p| p.endpoint()).collect();
    let assigned = |address| {
        broker::http_get(address, "/metrics")
            .and_then(|(_, text)| {
                broker::metric(
                    &text,
                    r#"lakejoin_consumer_assigned{pipeline="orders-enriched"}"#,
                )
            })
            .unwrap_or(-1.0)
    };
    wait_until("one instance to own the partition, the other none", || {
        let owners: Vec<f64> = addresses.iter().map(|a| assigned(*a)).collect();
        owners == [1.0, 0.0] || owners == [0.0, 1.0]
    });
    for (address, process) in addresses.iter().zip(&processes) {
        let mut last = None;
        wait_until("both instances to be ready", || {
            last = broker::http_get(*address, "/health/ready");
            last.as_ref().is_some_and(|(code, _)| *code == 200)
        });
        assert!(last.is_some(), "{}", process.log_text());
    }
    for process in &mut processes {
        process.assert_alive();
    }
}
