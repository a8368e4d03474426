//! Where lakejoin's output records land, against Apache Kafka's own Java producer.
//!
//! Why: Kafka Streams, Flink and ksqlDB join two topics partition by partition, assuming
//! both were partitioned by the Java client's default partitioner (murmur2 of the key).
//! librdkafka's default hashes keys with CRC32 instead, which would put an enriched record
//! in a different partition than a Java producer puts the same key, and a co-partitioned
//! join downstream would silently miss it.

mod support;

use std::collections::BTreeMap;

use support::broker::{self, Deployment, TestProducer, TopicReader, kafka_java_tool, tail, unique};
use support::shop::ShopTopics;

const PARTITIONS: i32 = 6;
const ORDERS: i64 = 120;

/// Each record's key and the partition it landed in.
fn partitions_by_key(records: &[broker::Record]) -> BTreeMap<String, i32> {
    records
        .iter()
        .map(|r| (r.key.clone().expect("a keyed record"), r.partition))
        .collect()
}

#[test]
fn enriched_records_land_in_the_partition_kafkas_java_producer_picks() {
    let topics = ShopTopics::create(1, PARTITIONS);
    let deployment = Deployment::new(&topics.pipelines("partitioning").build());
    let process = deployment.start();
    let producer = TestProducer::new();
    producer.send(&topics.customers, "1", r#"{"id": 1, "name": "Ada"}"#);
    producer.flush();
    deployment.wait_for_table(
        "shop.customers",
        &[serde_json::json!({"id": 1, "name": "Ada"})],
    );
    for order in 1..=ORDERS {
        producer.send(
            &topics.orders,
            &order.to_string(),
            &format!(r#"{{"order_id": {order}, "customer_id": 1}}"#),
        );
    }
    producer.flush();
    let mut output = TopicReader::new(&topics.enriched);
    let lakejoin = partitions_by_key(output.read_at_least(ORDERS as usize));
    let log = process.terminate();
    assert_eq!(lakejoin.len(), ORDERS as usize, "{}", tail(&log, 20));

    // The same keys produced by Kafka's console producer (the Java client, its default
    // partitioner) to a topic with as many partitions.
    let java_topic = unique("java-keyed");
    broker::create_topics(&[(&java_topic, PARTITIONS)]);
    let lines: String = lakejoin.keys().map(|key| format!("{key}\t-\n")).collect();
    kafka_java_tool(
        "org.apache.kafka.tools.ConsoleProducer",
        &[
            "--bootstrap-server",
            &broker::bootstrap(),
            "--topic",
            &java_topic,
            "--property",
            "parse.key=true",
        ],
        &lines,
    );
    let java = partitions_by_key(TopicReader::new(&java_topic).read_at_least(ORDERS as usize));
    assert_eq!(lakejoin, java);
    // Not every key in one partition: the comparison says something.
    let used: std::collections::BTreeSet<i32> = java.values().copied().collect();
    assert!(used.len() > 1, "{used:?}");
}
