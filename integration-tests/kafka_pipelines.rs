//! `lakejoin run` against Apache Kafka (started by `scripts/test.sh`, or any broker named by
//! `KAFKA_BOOTSTRAP`), with pypaimon reading the tables it writes:
//! the orders/customers scenario, out-of-order CDC, dead letters, a wide partial-update
//! table fed by three topics, and crash safety under repeated `kill -9`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::broker::{
    self, Deployment, LakejoinProcess, TestProducer, TopicReader, tail, unique, wait_until,
};
use support::fixture::{Config, toml_value};
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

/// Orders are enriched from a Debezium customers topic through the table: the expected
/// join, nulls for unknown or missing customers, an older change arriving late does not
/// win, an update reaches later orders, malformed records go to the dead-letter topics
/// with their reasons, and SIGTERM stops the process cleanly.
#[test]
fn orders_are_enriched_from_debezium_customers() {
    let topics = ShopTopics::create(2, 2);
    let customers_dlq = unique("customers-dlq");
    let orders_dlq = unique("orders-dlq");
    broker::create_topics(&[(&customers_dlq, 1), (&orders_dlq, 1)]);
    let deployment = Deployment::new(
        &debezium_customers(&topics, "scenario")
            .cdc("dead_letter_topic", customers_dlq.as_str())
            .enrich("dead_letter_topic", orders_dlq.as_str())
            .join("select", vec!["name", "country"])
            .build(),
    );
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;
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
    let updated = order_until_enriched_with(
        (&producer, &orders, &mut output),
        (200, 2),
        "bobby",
        Some("bob"),
    );
    assert_eq!(updated["customer_country"], "at");

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
        &Config::fixture(include_str!("fixtures/profile_three_topics.toml"))
            .name("group", &unique("wide"))
            .name("emails", &emails)
            .name("tiers", &tiers)
            .name("values", &values)
            .build(),
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

/// `kill -9` at random moments while changes and facts stream in, restarting each time.
/// The sum-aggregation table would count a change applied twice (or lost) in its totals,
/// so pypaimon reading exactly the model proves exactly-once CDC; every order is in the
/// output at least once, and an order is output more than once only when it lay in the
/// replay window of a kill: already output, but at or after the offset the enrich group
/// had committed when the process died. Each restart comes straight after the kill, under
/// the same `group_instance_id`, with librdkafka's default session timeout.
#[test]
fn kill_9_mid_stream_loses_nothing_and_applies_nothing_twice() {
    const CUSTOMERS: i64 = 150;
    const KILLS: usize = 20;
    const STEPS: i64 = 24_000;
    let started = Instant::now();
    let group = unique("crash");
    let enrich_group = format!("{group}-orders-enriched");
    let topics = ShopTopics::create(2, 2);
    let payments = unique("payments");
    broker::create_topics(&[(&payments, 2)]);
    let deployment = Deployment::new(&totals_config(&topics, &payments, &group).build());
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;

    // The model, computed before anything is produced; the producer thread streams it.
    let mut rng = StdRng::seed_from_u64(0x1a4e_7015);
    let model = Model::generate(&mut rng, STEPS, CUSTOMERS, &customers, &payments, &orders);
    // Each run gets its share of the stream, so every run is killed while changes and
    // facts are still coming in.
    let released = Arc::new(AtomicUsize::new(0));
    let (producer_thread, producing) = model.stream_gated(released.clone());
    let chunks_per_run = model.changes.len().div_ceil(100) / (KILLS + 1);

    // Each run is killed at a random moment after it made progress (a table commit), so
    // every kill lands mid-stream: while consuming, writing files, committing or producing.
    let mut output = TopicReader::new(&enriched);
    let markers = TestProducer::new();
    let mut kills = Vec::new();
    let mut commits_before_kill = Vec::new();
    while kills.len() < KILLS {
        released.fetch_add(chunks_per_run, Ordering::SeqCst);
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
        kills.push(after_kill(
            kills.len(),
            &enrich_group,
            &orders,
            &enriched,
            &markers,
            &mut output,
        ));
    }
    assert!(
        producing.load(Ordering::SeqCst),
        "every kill came before the end of the stream"
    );
    released.store(usize::MAX, Ordering::SeqCst);
    producer_thread.join().expect("producer thread");

    let process = deployment.start();
    let expected_customers = model.expected_customers();
    let expected_totals = model.expected_totals();
    deployment.wait_for_table("shop.totals", &expected_totals);
    deployment.wait_for_table("shop.customers", &expected_customers);

    let wanted: BTreeSet<i64> = model.order_ids.iter().copied().collect();
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        output.read_until("every order arrived", |records| {
            let seen: BTreeSet<i64> = records.iter().filter_map(order_id).collect();
            wanted.is_subset(&seen)
        })
    }));
    if let Err(panic) = read {
        let log =
            std::fs::read_to_string(deployment.dir.path().join("lakejoin.log")).unwrap_or_default();
        eprintln!("lakejoin log tail:\n{}", tail(&log, 80));
        let kept = std::env::temp_dir().join(format!("lakejoin-{group}.log"));
        let _ = std::fs::write(&kept, &log);
        eprintln!("the whole lakejoin log: {}", kept.display());
        diagnose_missing_orders(&group, &orders, &wanted, &output.records);
        std::panic::resume_unwind(panic);
    }
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

    // Every order's position in the input, to place the duplicates against the offsets
    // the enrich group had committed at each kill.
    let mut input = TopicReader::new(&orders);
    input.read_until("every order is read back from the input", |records| {
        records.iter().filter_map(order_id).count() >= wanted.len()
    });
    let position: BTreeMap<i64, (i32, i64)> = input
        .records
        .iter()
        .filter_map(|r| order_id(r).map(|id| (id, (r.partition, r.offset))))
        .collect();
    let records = output.drain(Duration::from_secs(1));
    let mut outputs: BTreeMap<i64, usize> = BTreeMap::new();
    let mut order_records = 0;
    for record in records {
        if record.value.get("marker").is_some() {
            continue;
        }
        let id = order_id(record).unwrap_or_else(|| panic!("not an order: {record:?}"));
        assert!(wanted.contains(&id), "an order nobody sent: {record:?}");
        *outputs.entry(id).or_default() += 1;
        order_records += 1;
    }
    // A fact is output again only by a run that starts below it: at a kill, it had been
    // output, but the committed offset of its partition was not yet past it.
    let windows: Vec<usize> = kills
        .iter()
        .map(|kill| {
            kill.output_before
                .iter()
                .filter(|id| kill.in_window(position[id]))
                .count()
        })
        .collect();
    let mut duplicates = 0;
    for (id, n) in &outputs {
        if *n < 2 {
            continue;
        }
        duplicates += n - 1;
        let at = position[id];
        let replays = kills
            .iter()
            .filter(|kill| kill.output_before.contains(id) && kill.in_window(at))
            .count();
        assert!(
            n - 1 <= replays,
            "order {id} (orders partition {}, offset {}) was output {n} times, but lay in the \
             replay window (output, not yet committed) of only {replays} kill(s); committed \
             offsets at each kill: {:?}",
            at.0,
            at.1,
            kills.iter().map(|k| &k.committed).collect::<Vec<_>>()
        );
    }
    assert!(duplicates <= windows.iter().sum::<usize>());
    eprintln!(
        "crash safety: {} kills, {} restarts, {} orders, {order_records} output records, \
         {duplicates} duplicates (each in the replay window after the last offset commit \
         before a kill; window sizes per kill: {windows:?}); table commits per killed run: \
         {commits_before_kill:?}; {:.0} s",
        kills.len(),
        kills.len(),
        wanted.len(),
        started.elapsed().as_secs_f64()
    );
}

fn order_id(record: &support::broker::Record) -> Option<i64> {
    record.value.get("order_id").and_then(Value::as_i64)
}

/// What the `kill -9` test knows about one kill.
struct Kill {
    /// The enrich group's committed offset of each orders partition when the process died.
    committed: Vec<Option<i64>>,
    /// Orders output before the kill.
    output_before: BTreeSet<i64>,
}

impl Kill {
    /// Whether the order at `(partition, offset)` of the input is at or after the committed
    /// offset, so the next run consumes it again.
    fn in_window(&self, (partition, offset): (i32, i64)) -> bool {
        let committed = self
            .committed
            .get(partition as usize)
            .copied()
            .flatten()
            .unwrap_or(0);
        offset >= committed
    }
}

/// After kill `k`: marks the end of what the dead process output with a marker record in
/// each output partition and reads up to the markers, and reads the offsets the enrich
/// group had committed.
fn after_kill(
    k: usize,
    enrich_group: &str,
    orders: &str,
    enriched: &str,
    markers: &TestProducer,
    output: &mut TopicReader,
) -> Kill {
    for partition in 0..2 {
        markers.send_to(
            enriched,
            partition,
            "marker",
            &json!({"marker": k}).to_string(),
        );
    }
    markers.flush();
    output.read_until(&format!("the markers after kill {k}"), |records| {
        let marked: BTreeSet<i32> = records
            .iter()
            .filter(|r| r.value.get("marker").and_then(Value::as_u64) == Some(k as u64))
            .map(|r| r.partition)
            .collect();
        marked.len() == 2
    });
    Kill {
        committed: broker::committed_offsets(enrich_group, orders, 2),
        output_before: output.records.iter().filter_map(order_id).collect(),
    }
}

/// Why orders are missing from the output: the broker's watermarks of the orders topic,
/// what a reader gets from it, where the missing orders are, and the enrich group's
/// committed offsets.
fn diagnose_missing_orders(
    group: &str,
    orders: &str,
    wanted: &BTreeSet<i64>,
    output: &[support::broker::Record],
) {
    let seen: BTreeSet<i64> = output
        .iter()
        .filter_map(|r| r.value["order_id"].as_i64())
        .collect();
    let missing: BTreeSet<i64> = wanted.difference(&seen).copied().collect();
    let watermarks = broker::watermarks(orders, 2);
    let enrich_group = format!("{group}-orders-enriched");
    let committed = broker::committed_offsets(&enrich_group, orders, 2);
    eprintln!("{}", broker::describe_group(&enrich_group));
    let mut input = TopicReader::new(orders);
    input.poll_for(Duration::from_secs(10));
    let mut per_partition: BTreeMap<i32, (usize, i64)> = BTreeMap::new();
    let mut missing_at = Vec::new();
    for r in &input.records {
        let e = per_partition.entry(r.partition).or_insert((0, -1));
        e.0 += 1;
        e.1 = e.1.max(r.offset);
        if let Some(id) = r.value["order_id"].as_i64()
            && missing.contains(&id)
        {
            missing_at.push((r.partition, r.offset, id));
        }
    }
    let in_input: BTreeSet<i64> = input
        .records
        .iter()
        .filter_map(|r| r.value["order_id"].as_i64())
        .collect();
    let never_read: Vec<i64> = wanted.difference(&in_input).copied().collect();
    eprintln!(
        "orders topic {orders}: watermarks {watermarks:?}, read back (count, max offset) per \
         partition {per_partition:?}, {} of {} orders readable (unreadable: {:?}…); \
         committed by the enrich group {committed:?}; {} orders missing from the output, \
         at (partition, offset, id) {:?}…",
        in_input.len(),
        wanted.len(),
        never_read.iter().take(10).collect::<Vec<_>>(),
        missing.len(),
        missing_at.iter().take(10).collect::<Vec<_>>(),
    );
}

/// `[observe]` and `[run]` of the graceful-shutdown test: progress lines every second.
const GRACEFUL: &str = r#"
[observe]
listen = "127.0.0.1:0"
progress_interval = "1s"

[run]
shutdown_timeout = "60s"
"#;

/// SIGTERM at random moments while changes and facts stream in, restarting each time:
/// every run exits 0 after committing, and a restart replays nothing after the last
/// commit and loses nothing: the sum-aggregation table read by pypaimon equals the model
/// (a change applied twice or lost would show in the totals), and every order is in the
/// output exactly once. The first run also serves metrics, health and progress lines.
#[test]
fn sigterm_commits_so_a_restart_replays_nothing_and_loses_nothing() {
    const CUSTOMERS: i64 = 100;
    const STOPS: usize = 3;
    let topics = ShopTopics::create(2, 2);
    let payments = unique("payments");
    broker::create_topics(&[(&payments, 2)]);
    let deployment = Deployment::new(
        &totals_config(&topics, &payments, &unique("graceful"))
            .merge(GRACEFUL)
            .build(),
    );
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;
    let mut rng = StdRng::seed_from_u64(0x5167_7e12);
    let model = Model::generate(&mut rng, 12_000, CUSTOMERS, &customers, &payments, &orders);
    let (producer_thread, producing) = model.stream();

    let mut output = TopicReader::new(&enriched);
    for stop in 0..STOPS {
        let before = deployment.snapshot_count("shop.totals");
        let produced_before = output.records.len();
        let mut process = deployment.start();
        if stop == 0 {
            check_endpoint_and_progress(&mut process);
        }
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
        let log = process.terminate();
        assert!(log.contains("stopped cleanly"), "{}", tail(&log, 40));
    }
    producer_thread.join().expect("producer thread");

    let process = deployment.start();
    let expected_totals = model.expected_totals();
    let expected_customers = model.expected_customers();
    deployment.wait_for_table("shop.totals", &expected_totals);
    deployment.wait_for_table("shop.customers", &expected_customers);
    let wanted: BTreeSet<i64> = model.order_ids.iter().copied().collect();
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        output.read_until("every order arrived", |records| {
            let seen: BTreeSet<i64> = records
                .iter()
                .filter_map(|r| r.value["order_id"].as_i64())
                .collect();
            wanted.is_subset(&seen)
        })
    }));
    if let Err(panic) = read {
        let log =
            std::fs::read_to_string(deployment.dir.path().join("lakejoin.log")).unwrap_or_default();
        eprintln!("lakejoin log tail:\n{}", tail(&log, 80));
        std::panic::resume_unwind(panic);
    }
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
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for record in output.drain(Duration::from_secs(1)) {
        *counts
            .entry(record.value["order_id"].as_i64().expect("order_id"))
            .or_default() += 1;
    }
    let twice: Vec<(&i64, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "orders produced more than once across SIGTERM restarts: {twice:?}"
    );
    assert_eq!(counts.keys().copied().collect::<BTreeSet<i64>>(), wanted);
}

/// The running process answers /health/live, turns ready, exposes its metrics, and logs
/// progress lines.
fn check_endpoint_and_progress(process: &mut LakejoinProcess) {
    let address = process.endpoint();
    assert_eq!(
        broker::http_get(address, "/health/live"),
        Some((200, "live\n".to_owned()))
    );
    wait_until("/health/ready answers 200", || {
        broker::http_get(address, "/health/ready").is_some_and(|(status, _)| status == 200)
    });
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some((200, text)) = broker::http_get(address, "/metrics") {
            let value = |series: &str| broker::metric(&text, series).unwrap_or(0.0);
            if value(r#"lakejoin_commits_total{pipeline="payments-cdc",kind="cdc"}"#) > 0.0
                && value(
                    r#"lakejoin_table_snapshot_id{pipeline="payments-cdc",table="shop.totals"}"#,
                ) > 0.0
                && value(r#"lakejoin_commit_duration_seconds_count{pipeline="payments-cdc"}"#) > 0.0
                && value(
                    r#"lakejoin_records_produced_total{pipeline="orders-enriched",kind="enrich"}"#,
                ) > 0.0
                && value(
                    r#"lakejoin_lookup_hits_total{pipeline="orders-enriched",join="0",table="shop.customers"}"#,
                ) + value(
                    r#"lakejoin_lookup_misses_total{pipeline="orders-enriched",join="0",table="shop.customers"}"#,
                ) > 0.0
                && value(
                    r#"lakejoin_lookup_duration_seconds_count{pipeline="orders-enriched",join="0",table="shop.customers"}"#,
                ) > 0.0
                && text.contains(r#"lakejoin_consumer_lag{pipeline="orders-enriched",topic=""#)
                && value("lakejoin_ready") == 1.0
            {
                break;
            }
            last = text;
        }
        assert!(
            Instant::now() < deadline,
            "the metrics never showed commits, lookups and lag:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let progress = process.wait_for_log("progress pipeline=orders-enriched");
    assert!(
        progress.contains("consumed_per_s=")
            && progress.contains("lag=")
            && progress.contains("hit_rate="),
        "{progress}"
    );
    let cdc = process.wait_for_log("progress pipeline=payments-cdc");
    assert!(
        cdc.contains("commits=") && cdc.contains("snapshot="),
        "{cdc}"
    );
}

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

/// A graceful stop waits for the lookup in hand; a second SIGTERM exits at once (130),
/// and `run.shutdown_timeout` bounds the wait (exit 2). Neither loses the fact: its offset
/// was never committed, so it is enriched once its customer arrives.
#[test]
fn a_second_signal_or_the_shutdown_timeout_ends_a_stuck_shutdown() {
    let topics = ShopTopics::create(1, 1);
    let deployment = Deployment::new(
        &debezium_customers(&topics, "stuck")
            .customers("buckets", 1)
            // A process that exits at once does not leave the group; restarts rejoin sooner.
            .kafka_property("session.timeout.ms", "6000")
            .kafka_property("heartbeat.interval.ms", "500")
            .set("run", "shutdown_timeout", "120s")
            // Retries a miss for a long time, so a fact for an unknown customer keeps the
            // shutdown waiting for its lookup.
            .join(
                "retry",
                toml_value(r#"{ on = "miss", delay = "1s", max_attempts = 100000 }"#),
            )
            .build(),
    );
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;
    let producer = TestProducer::new();
    producer.send(
        &orders,
        "1",
        &json!({"order_id": 1, "customer_id": 7}).to_string(),
    );
    producer.flush();
    let retrying = |process: &mut LakejoinProcess| {
        let address = process.endpoint();
        wait_until("the lookup of customer 7 retries", || {
            broker::http_get(address, "/metrics").is_some_and(|(_, text)| {
                broker::metric(
                    &text,
                    r#"lakejoin_lookup_retries_total{pipeline="orders-enriched",join="0",table="shop.customers"}"#,
                )
                .is_some_and(|n| n > 0.0)
            })
        });
    };

    let mut process = deployment.start();
    retrying(&mut process);
    process.signal("TERM");
    process.wait_for_log("stopping: consumers stop");
    assert_eq!(
        process.wait_exit(Duration::from_secs(2)),
        None,
        "the graceful stop waits for the lookup in hand"
    );
    process.signal("TERM");
    let status = process
        .wait_exit(Duration::from_secs(10))
        .expect("a second SIGTERM exits at once");
    assert_eq!(status.code(), Some(130), "{}", process.log_text());
    assert!(
        process
            .log_text()
            .contains("second signal: exiting at once")
    );

    let mut process = deployment.start_with_env(&[("LAKEJOIN__RUN__SHUTDOWN_TIMEOUT", "1s")]);
    retrying(&mut process);
    process.signal("TERM");
    let status = process
        .wait_exit(Duration::from_secs(20))
        .expect("the shutdown timeout ends the wait");
    assert_eq!(status.code(), Some(2), "{}", process.log_text());
    assert!(
        process
            .log_text()
            .contains("shutdown did not finish within run.shutdown_timeout"),
        "{}",
        process.log_text()
    );

    // Nothing was lost: once customer 7 exists the order comes out enriched.
    producer.send(&customers, "7", &debezium("c", 7, "gus", "se", 10));
    producer.flush();
    let process = deployment.start();
    let mut output = TopicReader::new(&enriched);
    output.read_at_least(1);
    assert_eq!(output.records[0].value["customer_name"], "gus");
    process.terminate();
}

/// A tmpfs mounted for a test, unmounted when dropped.
struct TmpfsMount {
    dir: std::path::PathBuf,
}

impl TmpfsMount {
    /// Mounts a tmpfs of `size` (`64m`) on `dir` (created if missing); the reason when
    /// this machine does not let the test mount (not root, no CAP_SYS_ADMIN, a container).
    fn new(dir: &std::path::Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(TmpfsMount {
            dir: dir.to_owned(),
        })
    }

    /// `mount -o remount,ro` or `remount,rw`.
    fn remount(&self, mode: &str) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.dir)
            .status()
            .expect("mount -o remount");
        assert!(status.success(), "mount -o remount,{mode} failed");
    }

    /// Writes zeros to `name` until the file system is full.
    fn fill(&self, name: &str) -> u64 {
        let mut file = std::fs::File::create(self.dir.join(name)).expect("filler file");
        let chunk = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            match std::io::Write::write(&mut file, &chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                Err(e) => panic!("filling {}: {e}", self.dir.display()),
            }
        }
        written
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}

/// The sum of `lakejoin_commit_failures_total` of the CDC pipelines, 0 without an answer.
fn commit_failures(address: std::net::SocketAddr) -> f64 {
    broker::http_get(address, "/metrics")
        .map(|(_, text)| {
            ["customers-cdc", "payments-cdc"]
                .iter()
                .filter_map(|p| {
                    broker::metric(
                        &text,
                        &format!("lakejoin_commit_failures_total{{pipeline=\"{p}\",kind=\"cdc\"}}"),
                    )
                })
                .sum()
        })
        .unwrap_or(0.0)
}

/// The warehouse disk fills up, then turns read-only, while CDC and facts stream in
/// (a real small file system: a tmpfs mounted for the test). Each time: an ERROR naming
/// the table, the file and the OS error; `/health/ready` answers 503 with the reason; no
/// snapshot is committed and no CDC offset moves (neither in the table nor in the
/// mirrored consumer group) while it lasts; the process keeps running. Once space is
/// freed (or the file system is writable again) it continues by itself, and in the end
/// pypaimon reads exactly the model (nothing lost, nothing applied twice), `lakejoin
/// table check` finds every file, every order is enriched, and no partial file is left.
///
/// Mounting needs root (or CAP_SYS_ADMIN); without it the test is skipped with the reason
/// printed, unless `LAKEJOIN_REQUIRE_MOUNT=1` makes that a failure.
#[test]
fn a_full_then_read_only_warehouse_stalls_cdc_cleanly_and_it_recovers_by_itself() {
    const CUSTOMERS: i64 = 60;
    const PARTS: usize = 3;
    let group = unique("diskfull");
    let topics = ShopTopics::named();
    let payments = unique("payments");
    let deployment = Deployment::new(&totals_config(&topics, &payments, &group).build());
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;
    let mount = match TmpfsMount::new(&deployment.dir.path().join("wh"), "48m") {
        Ok(mount) => mount,
        Err(reason) => {
            assert!(
                std::env::var("LAKEJOIN_REQUIRE_MOUNT").as_deref() != Ok("1"),
                "LAKEJOIN_REQUIRE_MOUNT=1 but a tmpfs cannot be mounted: {reason}"
            );
            eprintln!(
                "SKIPPED a_full_then_read_only_warehouse_stalls_cdc_cleanly_and_it_recovers_by_itself: \
                 {reason} (needs root or CAP_SYS_ADMIN; set LAKEJOIN_REQUIRE_MOUNT=1 to fail instead)"
            );
            return;
        }
    };
    broker::create_topics(&[
        (&customers, 2),
        (&payments, 2),
        (&orders, 2),
        (&enriched, 2),
    ]);
    let mut rng = StdRng::seed_from_u64(0xd15c_f011);
    let model = Model::generate(&mut rng, 9_000, CUSTOMERS, &customers, &payments, &orders);
    let released = Arc::new(AtomicUsize::new(0));
    let (producer_thread, _producing) = model.stream_gated(released.clone());
    let chunks_per_part = model.changes.len().div_ceil(100) / PARTS;

    released.store(chunks_per_part, Ordering::SeqCst);
    let mut process = deployment.start();
    let address = process.endpoint();
    wait_until("both tables committed", || {
        deployment.snapshot_count("shop.totals") > 0
            && deployment.snapshot_count("shop.customers") > 0
    });

    let mut figures = Vec::new();
    for (fault, os_error) in [
        ("disk full", "No space left on device (os error 28)"),
        ("read-only", "Read-only file system (os error 30)"),
    ] {
        let failures_before = commit_failures(address);
        let log_before = process.log_text().len();
        let filled = match fault {
            "disk full" => mount.fill("filler"),
            _ => {
                mount.remount("ro");
                0
            }
        };
        released.fetch_add(chunks_per_part, Ordering::SeqCst);
        wait_until(&format!("{fault}: commits fail"), || {
            commit_failures(address) >= failures_before + 2.0
        });
        // Not ready, saying why.
        let (status, body) = broker::http_get(address, "/health/ready").expect("health");
        assert_eq!(status, 503, "{fault}: {body}");
        assert!(
            body.contains("commits failing") && body.contains(os_error),
            "{fault}: {body}"
        );
        // The ERROR line names the table, the file and the OS error.
        let log = process.log_text()[log_before..].to_string();
        let line = log
            .lines()
            .find(|l| l.contains("ERROR") && l.contains("cannot write the table"))
            .unwrap_or_else(|| panic!("{fault}: no ERROR line:\n{}", tail(&log, 40)));
        assert!(
            (line.contains("table=shop.totals") || line.contains("table=shop.customers"))
                && line.contains("file=\"")
                && line.contains(os_error),
            "{fault}: {line}"
        );
        eprintln!("{fault}: {line}");
        // While it lasts nothing is committed: no snapshot, no offset in the consumer group.
        let snapshots = (
            deployment.snapshot_count("shop.customers"),
            deployment.snapshot_count("shop.totals"),
        );
        let offsets = (
            broker::committed_offsets(&format!("{group}-customers-cdc"), &customers, 2),
            broker::committed_offsets(&format!("{group}-payments-cdc"), &payments, 2),
        );
        let failures = commit_failures(address);
        wait_until(&format!("{fault}: two more failed commits"), || {
            commit_failures(address) >= failures + 2.0
        });
        assert_eq!(
            (
                deployment.snapshot_count("shop.customers"),
                deployment.snapshot_count("shop.totals"),
            ),
            snapshots,
            "{fault}: a snapshot was committed"
        );
        assert_eq!(
            (
                broker::committed_offsets(&format!("{group}-customers-cdc"), &customers, 2),
                broker::committed_offsets(&format!("{group}-payments-cdc"), &payments, 2),
            ),
            offsets,
            "{fault}: CDC offsets moved"
        );
        process.assert_alive();

        // The fault clears: it continues by itself.
        match fault {
            "disk full" => std::fs::remove_file(mount.dir.join("filler")).expect("free space"),
            _ => mount.remount("rw"),
        }
        let cleared = Instant::now();
        wait_until(&format!("{fault}: ready again"), || {
            broker::http_get(address, "/health/ready").is_some_and(|(status, _)| status == 200)
        });
        wait_until(&format!("{fault}: snapshots again"), || {
            deployment.snapshot_count("shop.customers") > snapshots.0
                && deployment.snapshot_count("shop.totals") > snapshots.1
        });
        figures.push(format!(
            "{fault}: {} failed commits, recovered {:.1} s after the fault cleared{}",
            commit_failures(address) - failures_before,
            cleared.elapsed().as_secs_f64(),
            if filled > 0 {
                format!(" ({} MiB filler)", filled >> 20)
            } else {
                String::new()
            }
        ));
    }

    released.store(usize::MAX, Ordering::SeqCst);
    producer_thread.join().expect("producer thread");
    let expected_totals = model.expected_totals();
    let expected_customers = model.expected_customers();
    deployment.wait_for_table("shop.totals", &expected_totals);
    deployment.wait_for_table("shop.customers", &expected_customers);
    let wanted: BTreeSet<i64> = model.order_ids.iter().copied().collect();
    let mut output = TopicReader::new(&enriched);
    output.read_until("every order arrived", |records| {
        let seen: BTreeSet<i64> = records.iter().filter_map(order_id).collect();
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
    for table in ["shop.totals", "shop.customers"] {
        let mut command = std::process::Command::new(support::lakejoin_bin());
        command.args([
            "table",
            "check",
            "--warehouse",
            &deployment.warehouse(),
            "--table",
            table,
        ]);
        let output = support::run(command, "");
        assert!(
            output.status.success(),
            "lakejoin table check {table}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // No partial file: a failed write leaves no staging file behind.
    let mut partial = Vec::new();
    let mut dirs = vec![mount.dir.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().contains('#') {
                partial.push(path);
            }
        }
    }
    assert!(partial.is_empty(), "partial files left: {partial:?}");
    eprintln!("warehouse faults: {}", figures.join("; "));
}
