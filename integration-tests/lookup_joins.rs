//! Lookup-join cache strategies and freshness against a real broker: the same enriched
//! output from `full`, `partial` and `none`; this process's updates visible to the next
//! lookup; pypaimon's updates visible within `refresh_interval` + 1 s; a fact that arrives
//! before its customer matched by `retry` and by `wait_for_cdc`; `max_pt()` following a
//! new partition.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::broker::{self, Deployment, TestProducer, TopicReader, unique};
use support::fixture::{Config, toml_value};
use support::shop::{ShopConfig, ShopTopics};

/// Topics and a running `lakejoin run` for one test.
struct Scenario {
    customers: String,
    orders: String,
    enriched: String,
    deployment: Deployment,
    producer: TestProducer,
    output: TopicReader,
    next_order: i64,
}

impl Scenario {
    /// The shared pipelines on new topics, customers with a `country` in two buckets, orders
    /// enriched in order with name and country by a join that refreshes every 2 s, and
    /// `options`, the test's own overrides.
    fn new(options: impl FnOnce(ShopConfig) -> ShopConfig) -> Scenario {
        let topics = ShopTopics::create(2, 2);
        let config = topics
            .pipelines("lookups")
            .customer_column("country", "STRING")
            .customers("buckets", 2)
            .enrich("ordered", true)
            .join("select", vec!["name", "country"])
            .join("refresh_interval", "2s");
        let deployment = Deployment::new(&options(config).build());
        let output = TopicReader::new(&topics.enriched);
        Scenario {
            customers: topics.customers,
            orders: topics.orders,
            enriched: topics.enriched,
            deployment,
            producer: TestProducer::new(),
            output,
            next_order: 1,
        }
    }

    fn customer(&self, id: i64, name: &str, country: &str) {
        self.producer.send(
            &self.customers,
            &json!({"id": id}).to_string(),
            &json!({"id": id, "name": name, "country": country}).to_string(),
        );
    }

    /// Sends an order and returns its id.
    fn order(&mut self, customer_id: i64) -> i64 {
        let id = self.next_order;
        self.next_order += 1;
        self.producer.send(
            &self.orders,
            &id.to_string(),
            &json!({"order_id": id, "customer_id": customer_id}).to_string(),
        );
        id
    }

    /// The enriched record of an order (waits for it).
    fn enriched(&mut self, order_id: i64) -> Value {
        self.output.read_until(
            &format!("order {order_id} arrived on {}", self.enriched),
            |r| r.iter().any(|r| r.value["order_id"] == order_id),
        );
        self.output
            .records
            .iter()
            .find(|r| r.value["order_id"] == order_id)
            .map(|r| r.value.clone())
            .expect("just read")
    }

    /// Sends orders of `customer_id` until one is enriched with `name`; returns the time
    /// the first such order was sent.
    fn until_name(&mut self, customer_id: i64, name: &str) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let sent = Instant::now();
            let id = self.order(customer_id);
            self.producer.flush();
            if self.enriched(id)["customer_name"] == name {
                return sent;
            }
            assert!(
                Instant::now() < deadline,
                "customer {customer_id} never showed up as {name}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn seed(scenario: &Scenario) {
    scenario.customer(1, "ada", "ch");
    scenario.customer(2, "bob", "de");
    scenario.customer(3, "cy", "fr");
    scenario.producer.flush();
}

/// The orders/customers scenario with one cache strategy.
fn strategy_scenario(cache: &str) {
    let mut s = Scenario::new(|config| config.join("cache", cache));
    seed(&s);
    let process = s.deployment.start();
    s.deployment.wait_for_table(
        "shop.customers",
        &[
            json!({"id": 1, "name": "ada", "country": "ch"}),
            json!({"id": 2, "name": "bob", "country": "de"}),
            json!({"id": 3, "name": "cy", "country": "fr"}),
        ],
    );
    let ids: Vec<i64> = [1, 2, 77, 3, 1].iter().map(|&c| s.order(c)).collect();
    s.producer.flush();
    let got: Vec<Value> = ids.iter().map(|&id| s.enriched(id)).collect();
    let expected = [
        ("ada", "ch", 1),
        ("bob", "de", 2),
        ("", "", 77),
        ("cy", "fr", 3),
        ("ada", "ch", 1),
    ];
    for ((record, (name, country, customer)), id) in got.iter().zip(expected).zip(&ids) {
        let (name, country) = if name.is_empty() {
            (Value::Null, Value::Null)
        } else {
            (json!(name), json!(country))
        };
        assert_eq!(
            record,
            &json!({"order_id": id, "customer_id": customer,
                    "customer_name": name, "customer_country": country}),
            "cache = {cache}"
        );
    }

    // An update committed by this process reaches the next lookups.
    s.customer(2, "bobby", "at");
    s.producer.flush();
    s.until_name(2, "bobby");

    // An update another writer (pypaimon) commits is visible within refresh_interval + 1 s.
    support::oracle_write(
        &s.deployment.warehouse(),
        "shop.customers",
        &[json!({"id": 3, "name": "cyril", "country": "be"})],
    );
    let written = Instant::now();
    let first_seen = s.until_name(3, "cyril");
    let lag = first_seen.saturating_duration_since(written);
    eprintln!("cache = {cache}: pypaimon's update visible after {lag:?}");
    assert!(
        lag <= Duration::from_secs(3),
        "cache = {cache}: pypaimon's update took {lag:?} (refresh_interval 2s + 1s)"
    );
    process.terminate();
}

#[test]
fn partial_cache_enriches_and_stays_fresh() {
    strategy_scenario("partial");
}

#[test]
fn full_cache_enriches_and_stays_fresh() {
    strategy_scenario("full");
}

#[test]
fn no_cache_enriches_and_stays_fresh() {
    strategy_scenario("none");
}

/// An order for a customer that does not exist yet is retried until the customer
/// arrives; with `ordered = false` later orders pass it.
#[test]
fn retry_matches_a_fact_that_arrives_before_its_customer() {
    let mut s = Scenario::new(|config| {
        config.enrich("ordered", false).join(
            "retry",
            toml_value(r#"{ on = "miss", delay = "500ms", max_attempts = 60 }"#),
        )
    });
    seed(&s);
    let process = s.deployment.start();
    let early = s.order(50);
    s.producer.flush();
    // Later orders of known customers are not held up by the retrying one.
    let later = s.order(1);
    s.producer.flush();
    assert_eq!(s.enriched(later)["customer_name"], "ada");
    assert!(
        s.output
            .records
            .iter()
            .all(|r| r.value["order_id"] != early),
        "the early order must still be retrying"
    );
    s.customer(50, "newcomer", "nl");
    s.producer.flush();
    assert_eq!(s.enriched(early)["customer_name"], "newcomer");
    process.terminate();
}

/// `wait_for_cdc` holds an order until the customer change that Kafka received before
/// it is visible, although the table commits only every 3 s.
#[test]
fn wait_for_cdc_matches_a_fact_whose_customer_is_not_committed_yet() {
    let mut s = Scenario::new(|config| {
        config
            .cdc("commit_interval", "3s")
            .join("cache", "partial")
            .join("wait_for_cdc", true)
            .join("max_wait", "60s")
    });
    seed(&s);
    let process = s.deployment.start();
    s.deployment.wait_for_table(
        "shop.customers",
        &[
            json!({"id": 1, "name": "ada", "country": "ch"}),
            json!({"id": 2, "name": "bob", "country": "de"}),
            json!({"id": 3, "name": "cy", "country": "fr"}),
        ],
    );
    for round in 0..3 {
        let customer = 60 + round;
        s.customer(customer, &format!("late-{round}"), "dk");
        s.producer.flush();
        let order = s.order(customer);
        s.producer.flush();
        assert_eq!(
            s.enriched(order)["customer_name"],
            format!("late-{round}"),
            "round {round}"
        );
    }
    process.terminate();
}

fn max_pt_scenario(cache: &str) {
    let prices = unique("prices");
    let sales = unique("sales");
    let priced = unique("priced");
    broker::create_topics(&[(&prices, 1), (&sales, 1), (&priced, 1)]);
    let deployment = Deployment::new(
        &Config::fixture(include_str!("fixtures/prices_by_day.toml"))
            .name("group", &unique("max-pt"))
            .name("prices", &prices)
            .name("sales", &sales)
            .name("priced", &priced)
            .name("cache", cache)
            .build(),
    );
    let producer = TestProducer::new();
    let price = |dt: &str, sku: &str, price: &str| {
        producer.send(
            &prices,
            sku,
            &json!({"dt": dt, "sku": sku, "price": price}).to_string(),
        )
    };
    price("2026-11-27", "apple", "0.90");
    price("2026-11-28", "apple", "1.00");
    price("2026-11-28", "pear", "2.00");
    producer.flush();
    let process = deployment.start();
    let mut output = TopicReader::new(&priced);
    let mut sale = 0;
    let mut sell = |sku: &str, output: &mut TopicReader| -> Value {
        sale += 1;
        producer.send(&sales, sku, &json!({"sale": sale, "sku": sku}).to_string());
        producer.flush();
        let id = sale;
        output.read_until(&format!("sale {id}"), |r| {
            r.iter().any(|r| r.value["sale"] == id)
        });
        output
            .records
            .iter()
            .find(|r| r.value["sale"] == id)
            .map(|r| r.value.clone())
            .expect("just read")
    };
    // Until the first commit there is no partition at all: unmatched.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = sell("apple", &mut output);
        if got["price_price"] == "1.00" {
            assert_eq!(got["price_dt"], "2026-11-28", "the newest partition");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never joined the newest partition: {got}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A new partition appears: the join moves to it.
    price("2026-11-29", "apple", "1.10");
    producer.flush();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = sell("apple", &mut output);
        if got["price_dt"] == "2026-11-29" {
            assert_eq!(got["price_price"], "1.10");
            break;
        }
        assert_eq!(got["price_dt"], "2026-11-28", "{got}");
        assert!(
            Instant::now() < deadline,
            "never followed the new partition"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // pear exists only in the old partition.
    let got = sell("pear", &mut output);
    assert_eq!(got["price_price"], Value::Null, "{got}");
    process.terminate();
    let rows: BTreeMap<String, usize> =
        deployment
            .pypaimon("shop.prices")
            .iter()
            .fold(BTreeMap::new(), |mut m, r| {
                *m.entry(r["dt"].as_str().unwrap_or("").to_owned())
                    .or_default() += 1;
                m
            });
    assert_eq!(rows.len(), 3, "three partitions: {rows:?}");
}

#[test]
fn max_pt_follows_a_new_partition_with_a_partial_cache() {
    max_pt_scenario("partial");
}

#[test]
fn max_pt_follows_a_new_partition_with_a_full_cache() {
    max_pt_scenario("full");
}

/// Visits joined with every customer of their country, instead of the shared orders
/// pipeline.
const VISITS: &str = r#"
[[enrich]]
name = "visits"
topics = ["{visits}"]
output = { topic = "{enriched}" }

[[enrich.join]]
table = "shop.customers"
on = { country = "country" }
select = ["id", "name"]
prefix = "local_"
cache = "full"
"#;

/// A `full` cache joins on a column that is not the primary key through a secondary
/// index: every matching row gives an output record (Flink's lookup-join semantics), and
/// the index follows updates that move a row to another value.
#[test]
fn full_cache_joins_on_a_non_key_column() {
    let topics = ShopTopics::named();
    let visits = unique("visits");
    broker::create_topics(&[(&topics.customers, 2), (&visits, 1), (&topics.enriched, 1)]);
    let deployment = Deployment::new(
        &topics
            .pipelines("by-country")
            .customer_column("country", "STRING")
            .customers("buckets", 2)
            .replace(VISITS)
            .name("visits", &visits)
            .build(),
    );
    let ShopTopics {
        customers,
        enriched,
        ..
    } = topics;
    let producer = TestProducer::new();
    let customer = |id: i64, name: &str, country: &str| {
        producer.send(
            &customers,
            &json!({"id": id}).to_string(),
            &json!({"id": id, "name": name, "country": country}).to_string(),
        )
    };
    customer(1, "ada", "ch");
    customer(2, "bob", "de");
    customer(3, "cy", "ch");
    producer.flush();
    let process = deployment.start();
    deployment.wait_for_table(
        "shop.customers",
        &[
            json!({"id": 1, "name": "ada", "country": "ch"}),
            json!({"id": 2, "name": "bob", "country": "de"}),
            json!({"id": 3, "name": "cy", "country": "ch"}),
        ],
    );
    let mut output = TopicReader::new(&enriched);
    let mut visit = 0;
    let mut locals = |country: &str, output: &mut TopicReader| -> Vec<Value> {
        visit += 1;
        let id = visit;
        producer.send(
            &visits,
            &id.to_string(),
            &json!({"visit": id, "country": country}).to_string(),
        );
        producer.flush();
        // Every output of a visit is produced before the next visit's (ordered), so the
        // next visit's first record marks the end of this one's.
        let marker = json!({"visit": id + 1000, "country": "none"}).to_string();
        producer.send(&visits, "marker", &marker);
        producer.flush();
        output.read_until(&format!("visit {id} done"), |r| {
            r.iter().any(|r| r.value["visit"] == id + 1000)
        });
        let mut got: Vec<Value> = output
            .records
            .iter()
            .filter(|r| r.value["visit"] == id)
            .map(|r| r.value.clone())
            .collect();
        got.sort_by_key(|v| v["local_id"].as_i64());
        got
    };
    assert_eq!(
        locals("ch", &mut output),
        vec![
            json!({"visit": 1, "country": "ch", "local_id": 1, "local_name": "ada"}),
            json!({"visit": 1, "country": "ch", "local_id": 3, "local_name": "cy"}),
        ]
    );
    assert_eq!(
        locals("fr", &mut output),
        vec![json!({"visit": 2, "country": "fr", "local_id": null, "local_name": null})],
        "LEFT join: no match gives nulls"
    );
    // Ada moves to Germany: the index drops her from ch and adds her to de.
    customer(1, "ada", "de");
    producer.flush();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let ch = locals("ch", &mut output);
        if ch.len() == 1 {
            assert_eq!(ch[0]["local_name"], "cy");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the index never followed the move: {ch:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let de: Vec<Value> = locals("de", &mut output)
        .into_iter()
        .map(|v| v["local_name"].clone())
        .collect();
    assert_eq!(de, vec![json!("ada"), json!("bob")]);
    process.terminate();
}
