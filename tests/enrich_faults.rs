//! Enrich pipelines under a failing warehouse store, with each cache strategy: a fact
//! whose lookup fails is held and tried again, never dead-lettered, and its offset is not
//! committed meanwhile; the pipeline says so on readiness and in a metric; a bad fact is
//! still dead-lettered (in its turn: the pipeline is ordered); once the store recovers
//! every held fact comes out joined.
//!
//! Hermetic: librdkafka's mock cluster, and an in-memory warehouse behind the fault-
//! injecting store of `tests/support`.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lakejoin::lsm::writer::TableWriter;
use lakejoin::observe::PipelineMetrics;
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::memory::InMemory;
use object_store::path::Path;
use rdkafka::ClientConfig;
use rdkafka::consumer::StreamConsumer;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;
use support::faulty_store::{Fault, FaultyStore, Op, Schedule};
use support::topics;

const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "faults"

[warehouse]
uri = "memory://"

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
topics = ["orders"]
output = { topic = "out", key = "order_id" }
dead_letter_topic = "dlq"

[[enrich.join]]
table = "shop.customers"
on = { customer_id = "id" }
select = ["name"]
prefix = "customer_"
cache = "{cache}"
refresh_interval = "1h"
"#;

/// Reads `topic` on `consumer` until `out` holds `n` records (deadline 60 s).
async fn read(consumer: &StreamConsumer, topic: &str, n: usize, out: &mut Vec<Value>) {
    topics::read_until(consumer, topic, out, topics::payload_json, |out| {
        out.len() >= n
    })
    .await;
}

/// Waits until `done` holds (deadline 60 s), saying `what` otherwise.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn held_facts_come_out_after_the_store_recovers(cache: &str) {
    let cluster = MockCluster::new(1).unwrap();
    for topic in ["orders", "out", "dlq"] {
        cluster.create_topic(topic, 1, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let config = lakejoin::config::from_toml(
        "test",
        &CONFIG
            .replace("{bootstrap}", &bootstrap)
            .replace("{cache}", cache),
    )
    .unwrap();
    let faulty = FaultyStore::new(Arc::new(InMemory::new()), 7);
    let warehouse = Warehouse::new(faulty.clone(), Path::from("wh"));
    let table = Arc::new(
        Table::create(
            &warehouse,
            &TableIdentifier::parse("shop.customers").unwrap(),
            config.tables[0].to_schema().unwrap(),
        )
        .await
        .unwrap(),
    );
    let mut writer = TableWriter::new(table, "seed").await.unwrap();
    for (id, name) in [(1, "ada"), (2, "bob"), (3, "cy")] {
        writer
            .write(
                RowKind::Insert,
                vec![Datum::Int(id), Datum::String(name.into())],
            )
            .unwrap();
    }
    writer.commit(BTreeMap::new()).await.unwrap();

    let registry = Arc::new(lakejoin::observe::Registry::default());
    let running = lakejoin::pipeline::start_on(config, registry.clone(), warehouse)
        .await
        .unwrap();
    let metrics = running.metrics()["orders-enriched"].clone();
    // A full cache is loaded before the first fact; then data files are not read again.
    until("the pipeline to be ready", || registry.readiness().is_ok()).await;
    // Every read of a data file fails from now on: S3 throttling that does not end.
    faulty.inject(
        Op::Get,
        "/bucket-",
        Fault::FailBefore,
        Schedule::Probability(1.0),
    );

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let facts = [
        (10, r#"{"order_id": 10, "customer_id": 1}"#),
        (11, r#"{"order_id": 11, "customer_id": 2}"#),
        (12, "{not json"),
        (13, r#"{"order_id": 13, "customer_id": 99}"#),
        (14, r#"{"order_id": 14, "customer_id": 3}"#),
    ];
    for (key, payload) in facts {
        producer
            .send(
                FutureRecord::to("orders")
                    .key(&key.to_string())
                    .payload(payload),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
    }
    let out_reader = topics::reader(&bootstrap, "out");
    let mut out = Vec::new();
    if cache == "full" {
        // Served from memory: the outage holds nothing.
        read(&out_reader, "out", 4, &mut out).await;
        assert_eq!(PipelineMetrics::get(&metrics.held_retries), 0);
    } else {
        until("facts to be held and tried again", || {
            PipelineMetrics::get(&metrics.held_retries) >= 3
        })
        .await;
        let reasons = registry.readiness().unwrap_err();
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("orders-enriched: facts held")),
            "{reasons:?}"
        );
        // Held, so nothing came out (the good facts follow the bad one, which is out).
        assert!(
            tokio::time::timeout(Duration::from_millis(500), out_reader.recv())
                .await
                .is_err(),
            "a fact came out while its lookup failed"
        );
        // The pipeline is ordered (the default): the bad fact's dead letter waits its
        // turn behind the held facts before it, as an output would.
        faulty.clear();
        read(&out_reader, "out", 4, &mut out).await;
        until("readiness to recover", || registry.readiness().is_ok()).await;
    }
    // The bad fact is the only dead letter.
    let mut dead = Vec::new();
    read(&topics::reader(&bootstrap, "dlq"), "dlq", 1, &mut dead).await;
    assert_eq!(dead[0], Value::String("{not json".into()), "{dead:?}");
    let names: BTreeMap<i64, Value> = out
        .iter()
        .map(|v| (v["order_id"].as_i64().unwrap(), v["customer_name"].clone()))
        .collect();
    let want: BTreeMap<i64, Value> = [
        (10, Value::from("ada")),
        (11, Value::from("bob")),
        (13, Value::Null),
        (14, Value::from("cy")),
    ]
    .into();
    assert_eq!(names, want, "{out:?}");
    assert_eq!(PipelineMetrics::get(&metrics.dead_lettered), 1);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_cache_holds_facts_through_a_store_outage() {
    held_facts_come_out_after_the_store_recovers("partial").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cache_holds_facts_through_a_store_outage() {
    held_facts_come_out_after_the_store_recovers("none").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_cache_serves_facts_through_a_store_outage() {
    held_facts_come_out_after_the_store_recovers("full").await;
}

/// A table fed by a CDC pipeline of the same process and looked up with a full cache:
/// after a commit the cache reads the new files, and those reads fail three times. The
/// refresh is tried again (100 ms doubling) until it succeeds; the pipelines keep running
/// and the next fact sees the committed change. (The refresh task used to end on the
/// first failure; then, retried, the point lookups had already moved to the new snapshot
/// and the cache never applied the change.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_that_fails_after_a_commit_is_tried_again() {
    let cluster = MockCluster::new(1).unwrap();
    for topic in ["orders", "out", "dlq", "customers"] {
        cluster.create_topic(topic, 1, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let text = CONFIG
        .replace("{bootstrap}", &bootstrap)
        .replace("{cache}", "full")
        .replace(
            "buckets = 1\n",
            "buckets = 1\noptions = { \"write-only\" = \"true\" }\n\n[[cdc]]\nname = \"customers-cdc\"\ntopics = [\"customers\"]\nformat = \"upsert-json\"\ntable = \"shop.customers\"\ncommit_interval = \"100ms\"\n",
        );
    let config = lakejoin::config::from_toml("test", &text).unwrap();
    let faulty = FaultyStore::new(Arc::new(InMemory::new()), 7);
    let warehouse = Warehouse::new(faulty.clone(), Path::from("wh"));
    let registry = Arc::new(lakejoin::observe::Registry::default());
    let running = lakejoin::pipeline::start_on(config, registry.clone(), warehouse)
        .await
        .unwrap();
    until("the pipelines to be ready", || registry.readiness().is_ok()).await;
    let cached_rows = || {
        registry
            .render()
            .lines()
            .find(|l| l.starts_with("lakejoin_lookup_cache_rows"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    assert_eq!(cached_rows(), Some(0));

    // The cache's reads of the committed file fail three times.
    faulty.inject(Op::Get, "/bucket-", Fault::FailBefore, Schedule::FirstN(3));
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    producer
        .send(
            FutureRecord::to("customers")
                .key("4")
                .payload(r#"{"id": 4, "name": "dee"}"#),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    until("the refresh to fail three times", || faulty.injected() >= 3).await;
    until("the cache to hold the committed row", || {
        cached_rows() == Some(1)
    })
    .await;
    producer
        .send(
            FutureRecord::to("orders")
                .key("20")
                .payload(r#"{"order_id": 20, "customer_id": 4}"#),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    read(&topics::reader(&bootstrap, "out"), "out", 1, &mut out).await;
    assert_eq!(out[0]["customer_name"], "dee", "{out:?}");
    assert!(registry.readiness().is_ok(), "{:?}", registry.readiness());
    running.shutdown().await.unwrap();
}
