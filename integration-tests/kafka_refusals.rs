//! What Apache Kafka refuses, and what lakejoin does then: an enriched record larger than
//! its topic allows is that fact's dead letter (its payload cut to 1 KiB when the
//! dead-letter topic refuses it too), and the pipeline goes on; a pipeline the broker does
//! not let write its output topic (an ACL) stops alone, says why on `/health/ready`, and
//! the other pipelines keep running.
//!
//! Why against the real broker: the limits (`max.message.bytes`, judged per batch) and
//! the authorizer are the broker's; a mock cluster has neither.

mod support;

use serde_json::{Value, json};
use support::broker::{
    self, Deployment, TestProducer, TopicReader, create_topic_with_config, unique, wait_until,
};
use support::shop::ShopTopics;

/// The shared pipelines' topics, plus the enrich pipeline's dead-letter topic.
struct Topics {
    shop: ShopTopics,
    dlq: String,
}

/// The shared pipelines, orders dead-lettered to `topics.dlq`, with `properties` in
/// `[kafka.properties]`.
fn config(topics: &Topics, properties: &[(&str, &str)]) -> String {
    topics
        .shop
        .pipelines("refusals")
        .enrich("dead_letter_topic", topics.dlq.as_str())
        .kafka_properties(properties)
        .build()
}

fn topics(out_limit: Option<&str>, dlq_limit: Option<&str>) -> Topics {
    let topics = Topics {
        shop: ShopTopics::named(),
        dlq: unique("dlq"),
    };
    broker::create_topics(&[(&topics.shop.customers, 1), (&topics.shop.orders, 1)]);
    for (name, limit) in [(&topics.shop.enriched, out_limit), (&topics.dlq, dlq_limit)] {
        let configs: Vec<(&str, &str)> = limit
            .map(|l| vec![("max.message.bytes", l)])
            .unwrap_or_default();
        create_topic_with_config(name, 1, &configs);
    }
    topics
}

/// `n` characters that do not compress (the producer compresses batches, and the broker
/// judges the compressed size), from a fixed generator.
fn incompressible(n: usize, seed: u64) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ALPHABET[(state >> 33) as usize % ALPHABET.len()] as char
        })
        .collect()
}

fn order(producer: &TestProducer, topics: &Topics, id: i64, customer: i64, note: &str) {
    producer.send(
        &topics.shop.orders,
        &id.to_string(),
        &json!({"order_id": id, "customer_id": customer, "note": note}).to_string(),
    );
}

#[test]
fn oversized_records_are_dead_lettered_and_the_pipeline_goes_on() {
    let topics = topics(Some("2000"), Some("1500"));
    let deployment = Deployment::new(&config(&topics, &[]));
    let mut process = deployment.start();
    let producer = TestProducer::new();
    let long_name = incompressible(4000, 1);
    let long_note = incompressible(4000, 2);
    for (id, name) in [(1, "ada"), (2, long_name.as_str())] {
        producer.send(
            &topics.shop.customers,
            &id.to_string(),
            &json!({"id": id, "name": name}).to_string(),
        );
    }
    producer.flush();
    deployment.wait_for_table(
        "shop.customers",
        &[
            json!({"id": 1, "name": "ada"}),
            json!({"id": 2, "name": long_name}),
        ],
    );
    // 1: fits. 2: its customer's name makes it too large for `out`. 3: too large, and
    // the fact itself too large for the dead-letter topic. 4: fits.
    order(&producer, &topics, 1, 1, "");
    order(&producer, &topics, 2, 2, "");
    order(&producer, &topics, 3, 1, &long_note);
    order(&producer, &topics, 4, 1, "");
    producer.flush();

    let mut out = TopicReader::new(&topics.shop.enriched);
    let ids: Vec<i64> = out
        .read_at_least(2)
        .iter()
        .map(|r| r.value["order_id"].as_i64().expect("order id"))
        .collect();
    assert_eq!(ids, [1, 4], "{:?}", out.records);
    assert!(
        out.records
            .iter()
            .all(|r| r.value["customer_name"] == "ada")
    );
    let mut dlq = TopicReader::new(&topics.dlq);
    let dead = dlq.read_at_least(2).to_vec();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert_eq!(
        dead[0].value["order_id"], 2,
        "the fact itself, unchanged: {dead:?}"
    );
    let reason = &dead[0].headers["lakejoin.error"];
    assert!(
        reason.contains("refused the enriched record") && reason.contains("bytes"),
        "{reason}"
    );
    let truncated = &dead[1];
    assert_eq!(
        truncated
            .headers
            .get("lakejoin.payload.truncated-from")
            .map(String::as_str),
        Some(
            json!({"order_id": 3, "customer_id": 1, "note": long_note})
                .to_string()
                .len()
                .to_string()
                .as_str()
        ),
        "{:?}",
        truncated.headers
    );
    let Value::String(text) = &truncated.value else {
        panic!("a cut payload is not JSON: {truncated:?}");
    };
    assert_eq!(text.len(), 1024);
    assert_eq!(truncated.headers["lakejoin.source.offset"], "2");
    process.assert_alive();
    let address = process.endpoint();
    let mut last = None;
    wait_until("the process to be ready", || {
        last = broker::http_get(address, "/health/ready");
        last.as_ref().is_some_and(|(code, _)| *code == 200)
    });
    assert!(last.is_some(), "{}", process.log_text());
}

#[test]
fn a_pipeline_denied_its_output_topic_stops_alone() {
    let Ok(plain) = std::env::var("KAFKA_SASL_PLAINTEXT_BOOTSTRAP") else {
        eprintln!("skipped: KAFKA_SASL_PLAINTEXT_BOOTSTRAP is not set (scripts/test.sh sets it)");
        return;
    };
    let user = std::env::var("KAFKA_PLAIN_USER").expect("KAFKA_PLAIN_USER");
    let password = std::env::var("KAFKA_PLAIN_PASSWORD").expect("KAFKA_PLAIN_PASSWORD");
    let topics = topics(None, None);
    broker::kafka_acls(&[
        "--add",
        "--deny-principal",
        &format!("User:{user}"),
        "--operation",
        "Write",
        "--topic",
        &topics.shop.enriched,
    ]);
    let security = [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", &user),
        ("sasl.password", &password),
    ];
    let deployment = Deployment::on(&plain, &config(&topics, &security));
    let mut process = deployment.start();
    let producer = TestProducer::new();
    producer.send(
        &topics.shop.customers,
        "1",
        &json!({"id": 1, "name": "ada"}).to_string(),
    );
    producer.flush();
    deployment.wait_for_table("shop.customers", &[json!({"id": 1, "name": "ada"})]);
    order(&producer, &topics, 1, 1, "");
    producer.flush();
    let address = process.endpoint();
    wait_until("the enrich pipeline to stop and say why", || {
        broker::http_get(address, "/health/ready").is_some_and(|(code, body)| {
            code == 503
                && body.contains("pipeline orders-enriched stopped")
                && body.contains("uthoriz")
        })
    });
    // The CDC pipeline still runs: a new customer lands in the table.
    producer.send(
        &topics.shop.customers,
        "2",
        &json!({"id": 2, "name": "bob"}).to_string(),
    );
    producer.flush();
    deployment.wait_for_table(
        "shop.customers",
        &[
            json!({"id": 1, "name": "ada"}),
            json!({"id": 2, "name": "bob"}),
        ],
    );
    process.assert_alive();
    let (_, body) = broker::http_get(address, "/health/ready").expect("readiness");
    assert!(!body.contains("customers-cdc"), "{body}");
}

/// librdkafka's local queue holds 4 records (`queue.buffering.max.messages`), far fewer
/// than the facts the enricher keeps in flight, so producing meets `QueueFull` over and
/// over: that is backpressure. Every fact comes out, in order per partition, none is
/// dead-lettered, and the pipeline stays up. (`QueueFull` used to stop the pipeline.)
#[test]
fn a_full_producer_queue_is_backpressure() {
    let topics = topics(None, None);
    let deployment = Deployment::new(&config(&topics, &[("queue.buffering.max.messages", "4")]));
    let mut process = deployment.start();
    let producer = TestProducer::new();
    producer.send(&topics.shop.customers, "1", r#"{"id": 1, "name": "ada"}"#);
    producer.flush();
    deployment.wait_for_table("shop.customers", &[json!({"id": 1, "name": "ada"})]);
    const ORDERS: i64 = 2_000;
    for id in 0..ORDERS {
        order(&producer, &topics, id, 1, "");
    }
    producer.flush();
    let mut out = TopicReader::new(&topics.shop.enriched);
    let ids: Vec<i64> = out
        .read_at_least(ORDERS as usize)
        .iter()
        .map(|r| r.value["order_id"].as_i64().expect("order id"))
        .collect();
    assert_eq!(ids, (0..ORDERS).collect::<Vec<_>>());
    assert!(
        out.records
            .iter()
            .all(|r| r.value["customer_name"] == "ada")
    );
    process.assert_alive();
    let address = process.endpoint();
    let metrics = broker::http_get(address, "/metrics").expect("metrics").1;
    assert_eq!(
        broker::metric(
            &metrics,
            "lakejoin_records_dead_lettered_total{pipeline=\"orders-enriched\",kind=\"enrich\"}"
        ),
        Some(0.0),
        "{metrics}"
    );
    process.terminate();
}
