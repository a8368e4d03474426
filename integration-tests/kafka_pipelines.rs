//! `lakejoin run` against a real Kafka-protocol broker (tansu from `scripts/test.sh`, or any
//! broker named by `KAFKA_BOOTSTRAP`), with pypaimon reading the tables it writes:
//! the orders/customers scenario, out-of-order CDC, dead letters, a wide partial-update
//! table fed by three topics, and crash safety under repeated `kill -9`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::broker::{self, Deployment, TestProducer, TopicReader, unique, wait_until};

fn debezium(op: &str, id: i64, name: &str, country: &str, ts: i64) -> String {
    let row = json!({"id": id, "name": name, "country": country, "updated_at": ts});
    match op {
        "d" => json!({"op": "d", "ts_ms": ts, "before": row, "after": null}),
        _ => json!({"op": op, "ts_ms": ts, "before": null, "after": row}),
    }
    .to_string()
}

fn customer_row(id: i64, name: &str, country: &str, ts: i64) -> Value {
    json!({"id": id, "name": name, "country": country, "updated_at": ts})
}

const SCENARIO: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

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
topics = ["{customers}"]
format = "debezium-json"
table = "shop.customers"
commit_interval = "200ms"
dead_letter_topic = "{customers_dlq}"

[[enrich]]
name = "orders-enriched"
topics = ["{orders}"]
output = { topic = "{enriched}", key = "order_id" }
dead_letter_topic = "{orders_dlq}"

[[enrich.join]]
table = "shop.customers"
on = { customer_id = "id" }
select = ["name", "country"]
prefix = "customer_"
"#;

/// Orders are enriched from a Debezium customers topic through the table: the expected
/// join, nulls for unknown or missing customers, an older change arriving late does not
/// win, an update reaches later orders, malformed records go to the dead-letter topics
/// with their reasons, and SIGTERM stops the process cleanly.
#[test]
fn orders_are_enriched_from_debezium_customers() {
    let customers = unique("customers");
    let customers_dlq = unique("customers-dlq");
    let orders = unique("orders");
    let enriched = unique("orders-enriched");
    let orders_dlq = unique("orders-dlq");
    broker::create_topics(&[
        (&customers, 2),
        (&customers_dlq, 1),
        (&orders, 2),
        (&enriched, 2),
        (&orders_dlq, 1),
    ]);
    let deployment = Deployment::new(
        &SCENARIO
            .replace("{group}", &unique("scenario"))
            .replace("{customers}", &customers)
            .replace("{customers_dlq}", &customers_dlq)
            .replace("{orders}", &orders)
            .replace("{enriched}", &enriched)
            .replace("{orders_dlq}", &orders_dlq),
    );
    let producer = TestProducer::new();
    producer.send(&customers, "1", &debezium("c", 1, "ada", "ch", 10));
    producer.send(&customers, "2", &debezium("c", 2, "bob", "de", 10));
    producer.send(&customers, "3", &debezium("c", 3, "cy", "fr", 10));
    producer.send(&customers, "4", &debezium("c", 4, "dee", "it", 10));
    producer.send(&customers, "4", &debezium("d", 4, "dee", "it", 11));
    // An older version of customer 1 arriving late must not win (sequence field).
    producer.send(&customers, "1", &debezium("u", 1, "stale", "xx", 5));
    producer.send(&customers, "9", "{not json");
    producer.flush();

    let mut process = deployment.start();
    let customers_at_start = vec![
        customer_row(1, "ada", "ch", 10),
        customer_row(2, "bob", "de", 10),
        customer_row(3, "cy", "fr", 10),
    ];
    deployment.wait_for_table("shop.customers", &customers_at_start);
    process.assert_alive();

    producer.send(
        &orders,
        "100",
        r#"{"order_id": 100, "customer_id": 1, "amount": "9.50"}"#,
    );
    producer.send(&orders, "101", r#"{"order_id": 101, "customer_id": 77}"#);
    producer.send(&orders, "102", r#"{"order_id": 102, "customer_id": "two"}"#);
    producer.send(&orders, "103", r#"{"order_id": 103}"#);
    producer.send(&orders, "104", r#"{"order_id": 104, "customer_id": "3"}"#);
    producer.send(&orders, "105", r#"{"order_id": 105, "customer_id": 4}"#);
    producer.flush();

    let mut output = TopicReader::new(&enriched);
    output.read_at_least(5);
    let by_id: BTreeMap<i64, Value> = output
        .records
        .iter()
        .map(|r| {
            (
                r.value["order_id"].as_i64().expect("order_id"),
                r.value.clone(),
            )
        })
        .collect();
    assert_eq!(
        by_id[&100],
        json!({"order_id": 100, "customer_id": 1, "amount": "9.50",
               "customer_name": "ada", "customer_country": "ch"})
    );
    assert_eq!(
        by_id[&101],
        json!({"order_id": 101, "customer_id": 77, "customer_name": null, "customer_country": null}),
        "an unknown customer gives nulls"
    );
    assert_eq!(
        by_id[&103],
        json!({"order_id": 103, "customer_name": null, "customer_country": null}),
        "a missing join key gives nulls"
    );
    assert_eq!(
        by_id[&104]["customer_name"], "cy",
        "\"3\" is coerced to INT"
    );
    assert_eq!(
        by_id[&105]["customer_name"],
        Value::Null,
        "customer 4 was deleted"
    );
    for record in &output.records {
        assert_eq!(
            record.key.as_deref(),
            Some(record.value["order_id"].to_string().as_str()),
            "the output key is order_id"
        );
    }

    let mut dead = TopicReader::new(&orders_dlq);
    let dead = dead.read_at_least(1);
    assert_eq!(dead.len(), 1, "{dead:#?}");
    assert_eq!(dead[0].value["order_id"], 102, "the record itself is kept");
    assert!(
        dead[0].headers["lakejoin.error"].contains("customer_id"),
        "the reason names the field: {:?}",
        dead[0].headers
    );
    assert_eq!(dead[0].headers["lakejoin.source.topic"], orders);
    assert_eq!(dead[0].headers["lakejoin.pipeline"], "orders-enriched");
    let mut cdc_dead = TopicReader::new(&customers_dlq);
    let cdc_dead = cdc_dead.read_at_least(1);
    assert_eq!(cdc_dead[0].value, Value::String("{not json".into()));
    assert!(!cdc_dead[0].headers["lakejoin.error"].is_empty());
    assert_eq!(cdc_dead[0].headers["lakejoin.source.topic"], customers);

    // An update committed by the CDC pipeline reaches the lookups of later orders.
    producer.send(&customers, "2", &debezium("u", 2, "bobby", "at", 20));
    producer.flush();
    let mut order_id = 200;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        producer.send(
            &orders,
            &order_id.to_string(),
            &json!({"order_id": order_id, "customer_id": 2}).to_string(),
        );
        producer.flush();
        output.read_until(&format!("order {order_id} arrived"), |records| {
            records.iter().any(|r| r.value["order_id"] == order_id)
        });
        let latest = output
            .records
            .iter()
            .find(|r| r.value["order_id"] == order_id)
            .expect("just read");
        if latest.value["customer_name"] == "bobby" {
            assert_eq!(latest.value["customer_country"], "at");
            break;
        }
        assert_eq!(
            latest.value["customer_name"], "bob",
            "before the update: the old row"
        );
        assert!(
            Instant::now() < deadline,
            "the update never reached the lookups"
        );
        order_id += 1;
        std::thread::sleep(Duration::from_millis(100));
    }

    process.terminate();
    let mut expected = customers_at_start;
    expected[1] = customer_row(2, "bobby", "at", 20);
    assert_eq!(
        deployment.pypaimon("shop.customers"),
        expected,
        "pypaimon's view"
    );
    let ids: Vec<i64> = output
        .drain(Duration::from_secs(1))
        .iter()
        .map(|r| r.value["order_id"].as_i64().expect("order_id"))
        .collect();
    let distinct: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(
        ids.len(),
        distinct.len(),
        "no order twice without a crash: {ids:?}"
    );
    assert!(
        !distinct.contains(&102),
        "the malformed order went to the dead letters only"
    );
}

const WIDE: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.profile"
columns = [
  { name = "customer_id", type = "INT" },
  { name = "email", type = "STRING" },
  { name = "tier", type = "STRING" },
  { name = "lifetime_value", type = "DECIMAL(12, 2)" },
  { name = "updated_at", type = "TIMESTAMP(3)" },
]
primary_key = ["customer_id"]
buckets = 2
merge_engine = "partial-update"

[[cdc]]
name = "emails"
topics = ["{emails}"]
format = "upsert-json"
table = "shop.profile"
commit_interval = "300ms"

[[cdc]]
name = "tiers"
topics = ["{tiers}"]
format = "debezium-json"
table = "shop.profile"
commit_interval = "300ms"

[[cdc]]
name = "values"
topics = ["{values}"]
format = "json"
table = "shop.profile"
commit_interval = "300ms"
"#;

/// Three topics in three formats fill the columns of one partial-update table; pypaimon
/// reads the merged rows. A Debezium update reaches the table as its after image alone
/// (the default `upsert` update mode for partial-update tables without sequence groups).
#[test]
fn three_topics_fill_a_wide_table_that_pypaimon_reads() {
    let emails = unique("emails");
    let tiers = unique("tiers");
    let values = unique("values");
    broker::create_topics(&[(&emails, 2), (&tiers, 1), (&values, 2)]);
    let deployment = Deployment::new(
        &WIDE
            .replace("{group}", &unique("wide"))
            .replace("{emails}", &emails)
            .replace("{tiers}", &tiers)
            .replace("{values}", &values),
    );
    let producer = TestProducer::new();
    for id in 1..=20 {
        producer.send(
            &emails,
            &json!({"customer_id": id}).to_string(),
            &json!({"customer_id": id, "email": format!("c{id}@example.com")}).to_string(),
        );
        if id % 2 == 0 {
            let after =
                json!({"customer_id": id, "tier": if id % 4 == 0 { "gold" } else { "silver" }});
            producer.send(
                &tiers,
                &id.to_string(),
                &json!({"op": "c", "ts_ms": 1, "before": null, "after": after}).to_string(),
            );
        }
        producer.send(
            &values,
            &id.to_string(),
            &json!({"customer_id": id, "lifetime_value": format!("{id}.5"),
                    "updated_at": "2026-11-29 12:00:00.125"})
            .to_string(),
        );
    }
    // Later changes to single columns: only those columns change.
    producer.send(
        &emails,
        &json!({"customer_id": 3}).to_string(),
        &json!({"customer_id": 3, "email": "new3@example.com"}).to_string(),
    );
    producer.send(
        &tiers,
        "4",
        &json!({"op": "u", "ts_ms": 2, "before": {"customer_id": 4, "tier": "gold"},
                "after": {"customer_id": 4, "tier": "platinum"}})
        .to_string(),
    );
    producer.flush();

    let expected: Vec<Value> = (1..=20)
        .map(|id| {
            let email = if id == 3 {
                "new3@example.com".to_owned()
            } else {
                format!("c{id}@example.com")
            };
            let tier = match id {
                4 => json!("platinum"),
                _ if id % 4 == 0 => json!("gold"),
                _ if id % 2 == 0 => json!("silver"),
                _ => Value::Null,
            };
            json!({"customer_id": id, "email": email, "tier": tier,
                   "lifetime_value": format!("{id}.50"), "updated_at": "2026-11-29 12:00:00.125"})
        })
        .collect();
    let process = deployment.start();
    deployment.wait_for_table("shop.profile", &expected);
    process.terminate();
    assert_eq!(
        deployment.pypaimon("shop.profile"),
        expected,
        "pypaimon's view"
    );
}

const CRASH: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[kafka.properties]
# A killed member is dropped from the group quickly, so a restart gets its partitions.
"session.timeout.ms" = "6000"
"heartbeat.interval.ms" = "500"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.customers"
columns = [
  { name = "id", type = "INT" },
  { name = "name", type = "STRING" },
  { name = "version", type = "BIGINT" },
]
primary_key = ["id"]
buckets = 2

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
name = "customers-cdc"
topics = ["{customers}"]
format = "upsert-json"
table = "shop.customers"
commit_interval = "250ms"

[[cdc]]
name = "payments-cdc"
topics = ["{payments}"]
format = "json"
table = "shop.totals"
commit_interval = "250ms"
commit_max_rows = 700

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

/// `kill -9` at random moments while changes and facts stream in, restarting each time.
/// The sum-aggregation table would count a change applied twice (or lost) in its totals,
/// so pypaimon reading exactly the model proves exactly-once CDC; every order is in the
/// output at least once.
#[test]
fn kill_9_mid_stream_loses_nothing_and_applies_nothing_twice() {
    const CUSTOMERS: i64 = 150;
    const KILLS: usize = 6;
    let customers = unique("customers");
    let payments = unique("payments");
    let orders = unique("orders");
    let enriched = unique("orders-enriched");
    broker::create_topics(&[
        (&customers, 2),
        (&payments, 2),
        (&orders, 2),
        (&enriched, 2),
    ]);
    let deployment = Deployment::new(
        &CRASH
            .replace("{group}", &unique("crash"))
            .replace("{customers}", &customers)
            .replace("{payments}", &payments)
            .replace("{orders}", &orders)
            .replace("{enriched}", &enriched),
    );

    // The model, computed before anything is produced; the producer thread streams it.
    let mut rng = StdRng::seed_from_u64(0x1a4e_7015);
    let mut changes: Vec<(String, String, String)> = Vec::new(); // (topic, key, payload)
    let mut customer_model: BTreeMap<i64, Option<Value>> = BTreeMap::new();
    let mut totals: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    let mut order_ids = Vec::new();
    for step in 0..24_000_i64 {
        let id = rng.random_range(0..CUSTOMERS);
        match step % 4 {
            0 => {
                let key = json!({"id": id}).to_string();
                if rng.random_bool(0.1) {
                    customer_model.insert(id, None);
                    changes.push((customers.clone(), key, String::new()));
                } else {
                    let row = json!({"id": id, "name": format!("c{id}-v{step}"), "version": step});
                    customer_model.insert(id, Some(row.clone()));
                    changes.push((customers.clone(), key, row.to_string()));
                }
            }
            1 | 2 => {
                let amount = rng.random_range(1..1000_i64);
                let total = totals.entry(id).or_default();
                total.0 += amount;
                total.1 += 1;
                changes.push((
                    payments.clone(),
                    id.to_string(),
                    json!({"customer_id": id, "amount": amount, "payments": 1}).to_string(),
                ));
            }
            _ => {
                order_ids.push(step);
                changes.push((
                    orders.clone(),
                    step.to_string(),
                    json!({"order_id": step, "customer_id": id}).to_string(),
                ));
            }
        }
    }
    let producing = Arc::new(AtomicBool::new(true));
    let producer_thread = {
        let producing = producing.clone();
        std::thread::spawn(move || {
            let producer = TestProducer::new();
            for chunk in changes.chunks(100) {
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
            producing.store(false, Ordering::SeqCst);
        })
    };

    // Each run is killed at a random moment after it made progress (a table commit), so
    // every kill lands mid-stream: while consuming, writing files, committing or producing.
    let mut output = TopicReader::new(&enriched);
    let mut kills = 0;
    let mut commits_before_kill = Vec::new();
    while kills < KILLS {
        let before = deployment.snapshot_count("shop.totals");
        let produced_before = output.records.len();
        let mut process = deployment.start();
        wait_until(
            "the run committed and produced, or the stream ended",
            || {
                output.poll_for(Duration::from_millis(50));
                (deployment.snapshot_count("shop.totals") > before
                    && output.records.len() > produced_before)
                    || !producing.load(Ordering::SeqCst)
            },
        );
        std::thread::sleep(Duration::from_millis(rng.random_range(0..1_500)));
        process.assert_alive();
        process.kill_9();
        commits_before_kill.push(deployment.snapshot_count("shop.totals") - before);
        kills += 1;
    }
    producer_thread.join().expect("producer thread");

    let process = deployment.start();
    let expected_customers: Vec<Value> = customer_model.into_values().flatten().collect();
    let expected_totals: Vec<Value> = totals
        .iter()
        .map(|(id, (amount, payments))| {
            json!({"customer_id": id, "amount": amount, "payments": payments})
        })
        .collect();
    deployment.wait_for_table("shop.totals", &expected_totals);
    deployment.wait_for_table("shop.customers", &expected_customers);

    let wanted: BTreeSet<i64> = order_ids.iter().copied().collect();
    output.read_until("every order arrived", |records| {
        let seen: BTreeSet<i64> = records
            .iter()
            .filter_map(|r| r.value["order_id"].as_i64())
            .collect();
        wanted.is_subset(&seen)
    });
    process.terminate();

    assert_eq!(
        deployment.pypaimon("shop.totals"),
        expected_totals,
        "pypaimon: totals"
    );
    assert_eq!(
        deployment.pypaimon("shop.customers"),
        expected_customers,
        "pypaimon: customers"
    );
    let records = output.drain(Duration::from_secs(1));
    let mut seen = BTreeSet::new();
    let mut duplicates = 0;
    for record in records {
        let id = record.value["order_id"].as_i64().expect("order_id");
        assert!(wanted.contains(&id), "an order nobody sent: {record:?}");
        if !seen.insert(id) {
            duplicates += 1;
        }
    }
    eprintln!(
        "crash safety: {kills} kills (table commits per killed run: {commits_before_kill:?}), \
         {} orders, {} output records, {duplicates} duplicates \
         (replayed after the last offset commit)",
        wanted.len(),
        records.len()
    );
}
