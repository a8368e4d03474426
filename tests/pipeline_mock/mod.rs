//! The orders/customers scenario end to end on librdkafka's in-process mock cluster:
//! Debezium CDC into a table, LEFT lookup joins, dead letters, freshness after commits,
//! and resuming from the offsets stored in the table after a restart.
//!
//! Its tests are grouped by theme: `orders` (the scenario itself and an
//! enrich that starts from the latest offsets), `wide_table` (three topics filling one
//! partial-update table) and `faults` (a schema-registry outage, a spurious offset
//! reset). This file holds what they share: the pipeline config, producing to the mock
//! cluster, reading a topic back and waiting for the table's rows.

mod faults;
mod orders;
mod wide_table;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::table::datum::Datum;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};

use crate::support::topics::{self, send};

const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "it"

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
topics = ["customers"]
format = "debezium-json"
table = "shop.customers"
commit_interval = "200ms"
dead_letter_topic = "customers_dlq"

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
"#;

/// [`send`] with a `traceparent` header, which the records made from it must carry.
async fn send_traced(producer: &FutureProducer, topic: &str, key: &str, payload: &str) {
    let headers = rdkafka::message::OwnedHeaders::new().insert(rdkafka::message::Header {
        key: "traceparent",
        value: Some(TRACE),
    });
    producer
        .send(
            FutureRecord::to(topic)
                .key(key)
                .payload(payload)
                .headers(headers),
            Duration::from_secs(10),
        )
        .await
        .expect("produce");
}

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn customer(op: &str, id: i64, name: &str, country: &str, ts: i64) -> String {
    let row = json!({"id": id, "name": name, "country": country, "updated_at": ts});
    match op {
        "d" => json!({"op": "d", "ts_ms": ts, "before": row, "after": null}),
        _ => json!({"op": op, "ts_ms": ts, "before": null, "after": row}),
    }
    .to_string()
}

/// Consumes `topic` from the start until `n` records arrived (deadline 60 s): each
/// record's key, JSON payload and headers.
async fn read_topic(
    bootstrap: &str,
    topic: &str,
    n: usize,
) -> Vec<(Option<String>, Value, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let decode = |m: &BorrowedMessage<'_>| {
        let key = m.key().map(|k| String::from_utf8_lossy(k).to_string());
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| {
                        (
                            h.key.to_string(),
                            h.value
                                .map(|v| String::from_utf8_lossy(v).to_string())
                                .unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        (key, topics::payload_json(m), headers)
    };
    let consumer = topics::reader(bootstrap, topic);
    topics::read_until(&consumer, topic, &mut out, decode, |out| out.len() >= n).await;
    out
}

async fn wait_for_rows(warehouse: &Warehouse, expected: usize) -> Vec<Vec<Datum>> {
    let id = TableIdentifier::parse("shop.customers").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(table) = Table::open(warehouse, &id).await {
            let rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
            if rows.len() == expected {
                return rows;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the table never reached {expected} rows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
