//! What the pipelines write and produce when nothing goes wrong: orders enriched from a
//! Debezium customers topic through the table (the join, nulls for unknown customers, a
//! late older change losing, an update reaching later orders, dead letters), and three
//! topics in three formats filling one wide partial-update table that pypaimon reads.
//! The fault tests of the other modules build on these results being right.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::broker::{self, Deployment, TestProducer, TopicReader, unique};
use crate::support::fixture::Config;
use crate::support::shop::ShopTopics;
use crate::{customer_row, debezium, debezium_customers, order_until_enriched_with};

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
        &Config::fixture(include_str!("../fixtures/profile_three_topics.toml"))
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
