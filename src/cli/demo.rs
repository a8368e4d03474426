//! `lakejoin demo`: the orders/customers scenario with no external services — librdkafka's
//! in-process mock cluster, a temporary warehouse, generated Debezium customer changes
//! and orders, the real pipelines, and the enriched output printed as it arrives.

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::json;

use super::Outcome;
use crate::error::{Error, Result};
use crate::observe::PipelineMetrics;

/// The demo's pipelines; `{bootstrap}` and `{warehouse}` are filled in at start.
const DEMO_CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "lakejoin-demo"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.customers"
columns = [
  { name = "id", type = "INT" },
  { name = "name", type = "STRING" },
  { name = "country", type = "STRING" },
  { name = "updated_at", type = "BIGINT" },
]
primary_key = ["id"]
buckets = 2
sequence_field = ["updated_at"]

[[cdc]]
name = "customers-cdc"
topics = ["dbserver1.shop.customers"]
format = "debezium-json"
table = "shop.customers"
commit_interval = "1s"

[[enrich]]
name = "orders-enriched"
topics = ["orders"]
output = { topic = "orders_enriched", key = "order_id" }
dead_letter_topic = "orders_dlq"

[[enrich.join]]
table = "shop.customers"
on = { customer_id = "id" }
select = ["name", "country"]
prefix = "customer_"
retry = { on = "miss", delay = "200ms", max_attempts = 3 }
"#;

const NAMES: [&str; 8] = ["ada", "bob", "cy", "dee", "eve", "fox", "gus", "hal"];
const COUNTRIES: [&str; 5] = ["ch", "de", "fr", "it", "at"];

/// Runs the demo for `duration` (or until Ctrl-C).
pub(crate) async fn run(duration: Duration) -> Result<Outcome> {
    let cluster = MockCluster::new(1).map_err(|e| Error::kafka("starting the mock cluster", e))?;
    for topic in [
        "dbserver1.shop.customers",
        "orders",
        "orders_enriched",
        "orders_dlq",
    ] {
        cluster
            .create_topic(topic, 2, 1)
            .map_err(|e| Error::kafka(format!("creating topic {topic}"), e))?;
    }
    let bootstrap = cluster.bootstrap_servers();
    let warehouse = tempfile::tempdir().map_err(|e| Error::Io {
        context: "creating the demo warehouse".into(),
        source: e,
    })?;
    let text = DEMO_CONFIG
        .replace("{bootstrap}", &bootstrap)
        .replace("{warehouse}", &warehouse.path().display().to_string());
    let config = crate::config::from_toml("demo config", &text)?;
    println!(
        "lakejoin demo: mock Kafka at {bootstrap}, warehouse {}",
        warehouse.path().display()
    );
    println!(
        "customers CDC (Debezium JSON) → shop.customers; orders ⋈ shop.customers → orders_enriched\n"
    );

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .map_err(|e| Error::kafka("demo producer", e))?;
    let mut running = crate::pipeline::start(config).await?;
    let generator = tokio::spawn(generate(producer, duration));

    let output: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "lakejoin-demo-printer")
        .set("auto.offset.reset", "earliest")
        .create()
        .map_err(|e| Error::kafka("demo consumer", e))?;
    output
        .subscribe(&["orders_enriched"])
        .map_err(|e| Error::kafka("subscribing to orders_enriched", e))?;

    let deadline = tokio::time::sleep(duration);
    tokio::pin!(deadline);
    let mut summary = tokio::time::interval(Duration::from_secs(5));
    summary.tick().await;
    let started = Instant::now();
    loop {
        tokio::select! {
            message = output.recv() => {
                if let Ok(m) = message
                    && let Some(payload) = m.payload()
                {
                    println!("enriched  {}", String::from_utf8_lossy(payload));
                }
            }
            _ = summary.tick() => print_summary(&running, started.elapsed()),
            exit = running.next_exit() => {
                if let Some((name, Err(e))) = exit {
                    return Err(Error::format(format!("pipeline {name} failed: {e}")));
                }
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = &mut deadline => break,
        }
    }
    generator.abort();
    print_summary(&running, started.elapsed());
    running.shutdown().await?;
    println!("demo finished");
    Ok(Outcome::Success)
}

fn print_summary(running: &crate::pipeline::Running, elapsed: Duration) {
    let m = running.metrics();
    let get = |name: &str, f: fn(&PipelineMetrics) -> &std::sync::atomic::AtomicU64| {
        m.get(name).map_or(0, |p| PipelineMetrics::get(f(p)))
    };
    let hit_rate = m.get("orders-enriched").map_or(1.0, |p| p.hit_rate());
    println!(
        "--- {:>4.0}s  cdc: {} changes in, {} commits | enrich: {} in, {} out, join hit rate {:.0}%, {} retries, {} dead-lettered",
        elapsed.as_secs_f64(),
        get("customers-cdc", |p| &p.records_in),
        get("customers-cdc", |p| &p.commits),
        get("orders-enriched", |p| &p.records_in),
        get("orders-enriched", |p| &p.records_out),
        hit_rate * 100.0,
        get("orders-enriched", |p| &p.join_retries),
        get("orders-enriched", |p| &p.dead_lettered),
    );
}

/// Customers 1..=40 are created, then updated and occasionally deleted; orders reference
/// customers 1..=45, so some never match.
async fn generate(producer: FutureProducer, duration: Duration) {
    let send = |topic: &'static str, key: String, value: serde_json::Value| {
        let producer = producer.clone();
        async move {
            let payload = value.to_string();
            let _ = producer
                .send(
                    FutureRecord::to(topic).key(&key).payload(&payload),
                    Duration::from_secs(5),
                )
                .await;
        }
    };
    let mut ts: i64 = 1_700_000_000_000;
    let customer = |id: i64, version: usize| {
        json!({
            "id": id,
            "name": NAMES[(id as usize + version) % NAMES.len()],
            "country": COUNTRIES[(id as usize + version) % COUNTRIES.len()],
        })
    };
    for id in 1..=40i64 {
        ts += 1;
        let mut after = customer(id, 0);
        after["updated_at"] = json!(ts);
        send(
            "dbserver1.shop.customers",
            id.to_string(),
            json!({"op": "c", "ts_ms": ts, "before": null, "after": after}),
        )
        .await;
    }
    let start = Instant::now();
    let mut n: i64 = 0;
    while start.elapsed() < duration {
        n += 1;
        let customer_id = (n * 7) % 45 + 1;
        send("orders", n.to_string(), json!({"order_id": n, "customer_id": customer_id, "amount": format!("{}.{:02}", n % 300, n % 100)})).await;
        if n % 10 == 0 {
            ts += 1;
            let id = (n / 10) % 40 + 1;
            let (op, before, after) = if n % 170 == 0 {
                ("d", customer(id, 0), serde_json::Value::Null)
            } else {
                let mut after = customer(id, n as usize);
                after["updated_at"] = json!(ts);
                ("u", customer(id, 0), after)
            };
            send(
                "dbserver1.shop.customers",
                id.to_string(),
                json!({"op": op, "ts_ms": ts, "before": before, "after": after}),
            )
            .await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
