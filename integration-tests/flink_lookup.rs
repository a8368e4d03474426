//! lakejoin's lookup join against Apache Flink's own on the same table and the same facts:
//! `lakejoin run` writes `shop.customers` from a Debezium topic and enriches `orders` with
//! it, while Flink (PyFlink 2.0 with Paimon 1.4.2's connector, `scripts/flink.sh`) runs
//!
//! ```sql
//! SELECT o.order_id, o.total, c.country, c.zip FROM orders AS o
//! LEFT JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c ON o.customer_id = c.id
//! ```
//!
//! on the table lakejoin writes, reading the same orders topic. Both outputs must hold the
//! same rows (and the expected ones), before and after customers are updated, deleted and
//! added through CDC, with both caches: lakejoin's `full` against Paimon's
//! `'lookup.cache' = 'FULL'` and lakejoin's `partial` against Paimon's partial lookup
//! (`AUTO`, `PrimaryKeyPartialLookupTable`). Which Paimon lookup table served the job is
//! read from Flink's log and checked too.
//!
//! Why Flink: lakejoin replaces Flink + Paimon for this job, and Paimon's own lookup join in
//! Flink is the reference for what a join on a Paimon table emits, on a table lakejoin wrote
//! (so Flink also reads lakejoin's commits as they land, including the -D/+I of an update).
//!
//! Why no sleeps are needed: orders are sent only after the change they should see is
//! committed (lakejoin's scan shows it) and visible to lakejoin's lookups (a probe order
//! shows it); Flink's job moves to the newest snapshot before every lookup that comes more
//! than `continuous.discovery-interval` (1 ms) after its last refresh, and an order sent
//! after the commit was seen is looked up far later than 1 ms after any lookup that came
//! before the commit; and the orders of one phase are all read back from both outputs
//! before the next change is sent. Probe orders (ids from [`PROBE_BASE`]) may race a
//! commit in either job, so they are left out of the comparison.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::broker::{self, Deployment, TestProducer, TopicReader, unique};
use support::flink::{FlinkJob, LookupJoin};
use support::shop::ShopTopics;

/// Order ids from here on are probes of lakejoin's visibility, not compared.
const PROBE_BASE: i64 = 1_000_000;

/// A customer as the model holds it: `(name, country, zip)`.
type Customer = (&'static str, &'static str, &'static str);

struct Scenario {
    customers_topic: String,
    orders_topic: String,
    deployment: Deployment,
    producer: TestProducer,
    lakejoin_output: TopicReader,
    flink_output: TopicReader,
    /// The table as it should be after the changes sent so far.
    model: BTreeMap<i64, Customer>,
    next_probe: i64,
}

impl Scenario {
    fn debezium(&mut self, op: &str, id: i64, after: Option<Customer>) {
        let row = |c: Customer| json!({"id": id, "name": c.0, "country": c.1, "zip": c.2});
        let before = self.model.get(&id).map(|&c| row(c));
        let value = json!({"op": op, "ts_ms": 1, "before": before, "after": after.map(row)});
        self.producer
            .send(&self.customers_topic, &id.to_string(), &value.to_string());
        match after {
            Some(c) => self.model.insert(id, c),
            None => self.model.remove(&id),
        };
    }

    /// Waits until the table holds the model (committed: a snapshot Flink can read), then
    /// until lakejoin's lookups see it (probe orders of every customer in `ids`).
    fn wait_committed(&mut self, ids: &[i64]) {
        self.producer.flush();
        let rows: Vec<Value> = self
            .model
            .iter()
            .map(|(id, c)| json!({"id": id, "name": c.0, "country": c.1, "zip": c.2}))
            .collect();
        self.deployment.wait_for_table("shop.customers", &rows);
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut pending: Vec<i64> = ids.to_vec();
        while !pending.is_empty() {
            let mut probes = Vec::new();
            for &customer in &pending {
                let order = self.next_probe_id();
                probes.push((self.order_at(order, customer, 1.0), customer));
            }
            self.producer.flush();
            let wanted: Vec<i64> = probes.iter().map(|(order, _)| *order).collect();
            self.lakejoin_output
                .read_until("lakejoin enriched the probe orders", |records| {
                    wanted
                        .iter()
                        .all(|id| records.iter().any(|r| r.value["order_id"] == *id))
                });
            let got = by_order_id("lakejoin", &self.lakejoin_output, lakejoin_row);
            pending = probes
                .iter()
                .filter(|(order, customer)| got[order] != self.expected_row(*order, *customer, 1.0))
                .map(|(_, customer)| *customer)
                .collect();
            assert!(
                Instant::now() < deadline,
                "lakejoin's lookups never saw the committed customers {pending:?}"
            );
            if !pending.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    fn next_probe_id(&mut self) -> i64 {
        self.next_probe += 1;
        PROBE_BASE + self.next_probe
    }

    fn order_at(&self, order_id: i64, customer_id: i64, total: f64) -> i64 {
        // A whole total is sent as an integer (`100`), the way a producer may write it.
        let total_json: Value = if total.fract() == 0.0 {
            json!(total as i64)
        } else {
            json!(total)
        };
        self.producer.send(
            &self.orders_topic,
            &order_id.to_string(),
            &json!({"order_id": order_id, "customer_id": customer_id, "total": total_json})
                .to_string(),
        );
        order_id
    }

    /// The joined row of an order under the current model, in Flink's columns.
    fn expected_row(&self, order_id: i64, customer_id: i64, total: f64) -> Value {
        let (country, zip) = match self.model.get(&customer_id) {
            Some(&(_, country, zip)) => (json!(country), json!(zip)),
            None => (Value::Null, Value::Null),
        };
        json!({"order_id": order_id, "total": total, "country": country, "zip": zip})
    }

    /// Sends `orders` (`(order_id, customer_id, total)`), reads both outputs until each has
    /// all of them, and asserts both hold exactly the expected rows for them.
    fn orders_agree(&mut self, phase: &str, orders: &[(i64, i64, f64)]) {
        let expected: BTreeMap<i64, Value> = orders
            .iter()
            .map(|&(order, customer, total)| (order, self.expected_row(order, customer, total)))
            .collect();
        for &(order, customer, total) in orders {
            self.order_at(order, customer, total);
        }
        self.producer.flush();
        let ids: Vec<i64> = expected.keys().copied().collect();
        let has_all = |records: &[broker::Record]| {
            ids.iter()
                .all(|id| records.iter().any(|r| r.value["order_id"] == *id))
        };
        self.lakejoin_output
            .read_until(&format!("{phase}: lakejoin enriched every order"), has_all);
        self.flink_output
            .read_until(&format!("{phase}: Flink joined every order"), has_all);
        let pick = |all: BTreeMap<i64, Value>| -> BTreeMap<i64, Value> {
            all.into_iter()
                .filter(|(id, _)| expected.contains_key(id))
                .collect()
        };
        let lakejoin = pick(by_order_id("lakejoin", &self.lakejoin_output, lakejoin_row));
        let flink = pick(by_order_id("Flink", &self.flink_output, flink_row));
        assert_eq!(
            flink, lakejoin,
            "{phase}: Flink's lookup join (left) and lakejoin's (right) differ"
        );
        assert_eq!(
            lakejoin, expected,
            "{phase}: both joins differ from the model"
        );
    }
}

/// A lakejoin output record in Flink's columns: `customer_country`/`customer_zip` are
/// `country`/`zip`, `customer_id` is not selected, and `total` is the DOUBLE Flink's
/// table declares (lakejoin keeps the fact's own `100`, Flink writes `100.0`).
fn lakejoin_row(value: &Value) -> Value {
    json!({
        "order_id": value["order_id"],
        "total": as_double(&value["total"]),
        "country": value["customer_country"],
        "zip": value["customer_zip"],
    })
}

/// A Flink output record, checked to have exactly the query's columns.
fn flink_row(value: &Value) -> Value {
    let mut columns: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("Flink wrote a non-object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    columns.sort_unstable();
    assert_eq!(
        columns,
        ["country", "order_id", "total", "zip"],
        "Flink's row {value}"
    );
    json!({
        "order_id": value["order_id"],
        "total": as_double(&value["total"]),
        "country": value["country"],
        "zip": value["zip"],
    })
}

fn as_double(value: &Value) -> Value {
    json!(
        value
            .as_f64()
            .unwrap_or_else(|| panic!("total is not a number: {value}"))
    )
}

/// Every record of `reader` so far by order id, mapped by `row`; an order id must not
/// appear twice (neither job restarts, so neither replays).
fn by_order_id(
    what: &str,
    reader: &TopicReader,
    row: impl Fn(&Value) -> Value,
) -> BTreeMap<i64, Value> {
    let mut rows = BTreeMap::new();
    for record in &reader.records {
        let id = record.value["order_id"]
            .as_i64()
            .unwrap_or_else(|| panic!("{what} wrote a record without an order id: {record:?}"));
        if let Some(previous) = rows.insert(id, row(&record.value)) {
            panic!(
                "{what} wrote order {id} twice: {previous} and {}",
                rows[&id]
            );
        }
    }
    rows
}

/// The whole comparison with one cache strategy on both sides.
fn flink_and_lakejoin_agree(cache: &str) {
    support::flink::install();
    let topics = ShopTopics::create(2, 2);
    let flink_topic = unique("orders-flink");
    broker::create_topics(&[(&flink_topic, 1)]);
    // Flink's query selects `country` and `zip` with a LEFT JOIN, so lakejoin's does too.
    let deployment = Deployment::new(
        &topics
            .pipelines("flink-lookup")
            .customer_column("country", "STRING")
            .customer_column("zip", "STRING")
            .customers("buckets", 2)
            .cdc("format", "debezium-json")
            .join("kind", "left")
            .join("select", vec!["country", "zip"])
            .join("cache", cache)
            .build(),
    );
    let ShopTopics {
        customers: customers_topic,
        orders: orders_topic,
        enriched,
    } = topics;
    let mut s = Scenario {
        customers_topic,
        orders_topic: orders_topic.clone(),
        deployment,
        producer: TestProducer::new(),
        lakejoin_output: TopicReader::new(&enriched),
        flink_output: TopicReader::new(&flink_topic),
        model: BTreeMap::new(),
        next_probe: 0,
    };
    let process = s.deployment.start();

    s.debezium("c", 1, Some(("ada", "ch", "8001")));
    s.debezium("c", 2, Some(("bob", "de", "10115")));
    s.debezium("c", 3, Some(("cy", "fr", "75001")));
    s.wait_committed(&[1, 2, 3]);

    // The table exists and holds the customers: Flink plans its join on it.
    let warehouse = s.deployment.warehouse();
    let bootstrap = broker::bootstrap();
    let group = unique("flink-job");
    let mut flink = FlinkJob::start(&LookupJoin {
        bootstrap: &bootstrap,
        warehouse: &warehouse,
        database: "shop",
        table: "customers",
        orders: &orders_topic,
        output: &flink_topic,
        cache,
        group: &group,
    });

    // Known customers, one with no customer (LEFT JOIN: nulls), a whole total.
    s.orders_agree(
        "before the changes",
        &[
            (1, 1, 12.5),
            (2, 2, 7.25),
            (3, 77, 3.0),
            (4, 3, 100.0),
            (5, 1, 0.5),
            (6, 2, 42.0),
        ],
    );
    flink.assert_alive();

    // An update (country and zip), a delete and a new customer, through CDC.
    s.debezium("u", 2, Some(("bob", "at", "1010")));
    s.debezium("d", 3, None);
    s.debezium("c", 4, Some(("dee", "it", "00118")));
    s.wait_committed(&[2, 3, 4]);
    s.orders_agree(
        "after the changes",
        &[
            (7, 2, 19.99),
            (8, 3, 5.0),
            (9, 4, 61.5),
            (10, 1, 2.0),
            (11, 77, 8.75),
            (12, 2, 1.0),
        ],
    );
    flink.assert_alive();

    // Paimon served the join with the lookup table the cache option names.
    let created = flink.log_lines("FileStoreLookupFunction");
    let created: Vec<&String> = created.iter().filter(|l| l.contains("Created")).collect();
    eprintln!("cache = {cache}: Flink's lookup table: {created:#?}");
    let wanted = match cache {
        "full" => "Created PrimaryKeyLookupTable.",
        _ => "Created PrimaryKeyPartialLookupTable with LocalQueryExecutor.",
    };
    assert!(
        !created.is_empty() && created.iter().all(|line| line.contains(wanted)),
        "cache = {cache}: Flink's log should say {wanted:?}, it says {created:#?}"
    );
    drop(flink);
    process.terminate();
}

#[test]
fn flink_full_cache_lookup_join_agrees_with_lakejoin() {
    flink_and_lakejoin_agree("full");
}

#[test]
fn flink_partial_cache_lookup_join_agrees_with_lakejoin() {
    flink_and_lakejoin_agree("partial");
}
