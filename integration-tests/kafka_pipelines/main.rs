//! `lakejoin run` against Apache Kafka (started by `scripts/test.sh`, or any broker named by
//! `KAFKA_BOOTSTRAP`), with pypaimon reading the tables it writes:
//! the orders/customers scenario, out-of-order CDC, dead letters, a wide partial-update
//! table fed by three topics, and crash safety under repeated `kill -9`.
//!
//! One test binary, its tests grouped by what they exercise: `enrichment` (what the
//! pipelines write and produce), `crash_safety` (`kill -9` mid-stream), `shutdown`
//! (SIGTERM, a second signal, the shutdown timeout), `broker_outages` (a broker down at
//! start or restarting mid-run) and `warehouse_faults` (a full, then read-only warehouse
//! disk). This file holds what they share: Debezium customer records and pipelines, the
//! random change stream with its model, and the totals table that the kill, SIGTERM and
//! disk tests check for changes lost or applied twice.

#[path = "../support/mod.rs"]
mod support;

mod broker_outages;
mod crash_safety;
mod enrichment;
mod shutdown;
mod warehouse_faults;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use support::broker::{TestProducer, TopicReader};
use support::shop::{ShopConfig, ShopTopics};

fn debezium(op: &str, id: i64, name: &str, country: &str, ts: i64) -> String {
    let row = json!({"id": id, "name": name, "country": country, "updated_at": ts});
    match op {
        "d" => json!({"op": "d", "ts_ms": ts, "before": row, "after": null}),
        _ => json!({"op": op, "ts_ms": ts, "before": null, "after": row}),
    }
    .to_string()
}

/// Sends orders of a customer, ids counting up from `first_order`, one at a time until
/// one is enriched with the customer's new `name` (a committed update reaches the
/// lookups within 90 s); each order before it must carry `old_name` when given. Returns
/// that order's enriched record. One at a time because when the lookup sees the update is
/// the table's commit and the lookup's refresh, which no fixed wait can know.
fn order_until_enriched_with(
    (producer, orders, output): (&TestProducer, &str, &mut TopicReader),
    (first_order, customer_id): (i64, i64),
    name: &str,
    old_name: Option<&str>,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut order_id = first_order;
    loop {
        producer.send(
            orders,
            &order_id.to_string(),
            &json!({"order_id": order_id, "customer_id": customer_id}).to_string(),
        );
        producer.flush();
        output.read_until(&format!("order {order_id} enriched"), |records| {
            records.iter().any(|r| r.value["order_id"] == order_id)
        });
        let latest = output
            .records
            .iter()
            .find(|r| r.value["order_id"] == order_id)
            .map(|r| r.value.clone())
            .expect("just read");
        if latest["customer_name"] == name {
            return latest;
        }
        if let Some(old) = old_name {
            assert_eq!(
                latest["customer_name"], old,
                "before the update: the old row"
            );
        }
        assert!(
            Instant::now() < deadline,
            "the update never reached the lookups: {latest}"
        );
        order_id += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn customer_row(id: i64, name: &str, country: &str, ts: i64) -> Value {
    json!({"id": id, "name": name, "country": country, "updated_at": ts})
}

/// The Debezium customers of these tests (see `debezium`): the shared pipelines with
/// `country` and `updated_at` too, the newest `updated_at` winning, in two buckets.
fn debezium_customers(topics: &ShopTopics, group: &str) -> ShopConfig {
    topics
        .pipelines(group)
        .customer_column("country", "STRING")
        .customer_column("updated_at", "BIGINT")
        .customers("buckets", 2)
        .customers("sequence_field", vec!["updated_at"])
        .cdc("format", "debezium-json")
}

/// A random stream of customer upserts/deletes, payments for a sum-aggregation table, and
/// orders, with the table states and order ids it must produce.
struct Model {
    /// (topic, key, payload); an empty payload is a tombstone.
    changes: Vec<(String, String, String)>,
    customer_model: BTreeMap<i64, Option<Value>>,
    /// customer id → (amount, payments).
    totals: BTreeMap<i64, (i64, i64)>,
    order_ids: Vec<i64>,
}

impl Model {
    fn generate(
        rng: &mut StdRng,
        steps: i64,
        customers_count: i64,
        customers: &str,
        payments: &str,
        orders: &str,
    ) -> Self {
        let mut model = Model {
            changes: Vec::new(),
            customer_model: BTreeMap::new(),
            totals: BTreeMap::new(),
            order_ids: Vec::new(),
        };
        for step in 0..steps {
            let id = rng.random_range(0..customers_count);
            match step % 4 {
                0 => {
                    let key = json!({"id": id}).to_string();
                    if rng.random_bool(0.1) {
                        model.customer_model.insert(id, None);
                        model
                            .changes
                            .push((customers.to_owned(), key, String::new()));
                    } else {
                        let row =
                            json!({"id": id, "name": format!("c{id}-v{step}"), "version": step});
                        model.customer_model.insert(id, Some(row.clone()));
                        model
                            .changes
                            .push((customers.to_owned(), key, row.to_string()));
                    }
                }
                1 | 2 => {
                    let amount = rng.random_range(1..1000_i64);
                    let total = model.totals.entry(id).or_default();
                    total.0 += amount;
                    total.1 += 1;
                    model.changes.push((
                        payments.to_owned(),
                        id.to_string(),
                        json!({"customer_id": id, "amount": amount, "payments": 1}).to_string(),
                    ));
                }
                _ => {
                    model.order_ids.push(step);
                    model.changes.push((
                        orders.to_owned(),
                        step.to_string(),
                        json!({"order_id": step, "customer_id": id}).to_string(),
                    ));
                }
            }
        }
        model
    }

    /// Streams the changes from a thread, 100 at a time with pauses; the flag turns false
    /// when everything is acknowledged.
    fn stream(&self) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
        self.stream_gated(Arc::new(AtomicUsize::new(usize::MAX)))
    }

    /// Streams the changes in chunks of 100, sending chunk `i` only once `released`
    /// exceeds `i`, so a test can spread the stream over the runs it kills.
    fn stream_gated(
        &self,
        released: Arc<AtomicUsize>,
    ) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
        let producing = Arc::new(AtomicBool::new(true));
        let changes = self.changes.clone();
        let flag = producing.clone();
        let thread = std::thread::spawn(move || {
            let producer = TestProducer::new();
            for (i, chunk) in changes.chunks(100).enumerate() {
                while released.load(Ordering::SeqCst) <= i {
                    std::thread::sleep(Duration::from_millis(10));
                }
                for (topic, key, payload) in chunk {
                    if payload.is_empty() {
                        producer.send_tombstone(topic, key);
                    } else {
                        producer.send(topic, key, payload);
                    }
                }
                producer.flush();
                std::thread::sleep(Duration::from_millis(60));
            }
            flag.store(false, Ordering::SeqCst);
        });
        (thread, producing)
    }

    fn expected_customers(&self) -> Vec<Value> {
        self.customer_model.values().flatten().cloned().collect()
    }

    fn expected_totals(&self) -> Vec<Value> {
        self.totals
            .iter()
            .map(|(id, (amount, payments))| {
                json!({"customer_id": id, "amount": amount, "payments": payments})
            })
            .collect()
    }
}

/// Payments summed per customer, besides the shared customers table: the table the
/// kill and disk tests check for changes applied twice or lost.
const TOTALS: &str = r#"
[[table]]
name = "shop.totals"
columns = [
  { name = "customer_id", type = "INT" },
  { name = "amount", type = "BIGINT" },
  { name = "payments", type = "BIGINT" },
]
primary_key = ["customer_id"]
buckets = 2
merge_engine = "aggregation"

[table.options]
"fields.amount.aggregate-function" = "sum"
"fields.payments.aggregate-function" = "sum"

[[cdc]]
name = "payments-cdc"
topics = ["{payments}"]
format = "json"
table = "shop.totals"
commit_interval = "250ms"
commit_max_rows = 700
"#;

/// The shared pipelines with customers versioned (`Model`), and `TOTALS` fed by
/// `payments`, in consumer group `group` exactly (the tests read its offsets).
fn totals_config(topics: &ShopTopics, payments: &str, group: &str) -> ShopConfig {
    topics
        .pipelines(group)
        .kafka("group_id", group)
        // Static membership: a restart takes the killed process's partitions back at once.
        .kafka("group_instance_id", format!("{group}-0"))
        .customer_column("version", "BIGINT")
        .customers("buckets", 2)
        .cdc("commit_interval", "250ms")
        .merge(TOTALS)
        .name("payments", payments)
}

fn order_id(record: &support::broker::Record) -> Option<i64> {
    record.value.get("order_id").and_then(Value::as_i64)
}
