//! The orders/customers scenario end to end on librdkafka's in-process mock cluster:
//! Debezium CDC into a table, LEFT lookup joins, dead letters, freshness after commits,
//! and resuming from the offsets stored in the table after a restart.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::table::datum::Datum;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};

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

async fn send(producer: &FutureProducer, topic: &str, key: &str, payload: &str) {
    producer
        .send(
            FutureRecord::to(topic).key(key).payload(payload),
            Duration::from_secs(10),
        )
        .await
        .expect("produce");
}

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

/// Consumes `topic` from the start until `n` records arrived (deadline 60 s).
async fn read_topic(
    bootstrap: &str,
    topic: &str,
    n: usize,
) -> Vec<(Option<String>, Value, Vec<(String, String)>)> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set(
            "group.id",
            format!("reader-{topic}-{}", uuid::Uuid::new_v4()),
        )
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    while out.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "only {} of {n} records arrived on {topic}: {out:?}",
            out.len()
        );
        if let Ok(Ok(m)) = tokio::time::timeout(left, consumer.recv()).await {
            let key = m.key().map(|k| String::from_utf8_lossy(k).to_string());
            let value = m
                .payload()
                .map(|p| {
                    serde_json::from_slice(p)
                        .unwrap_or(Value::String(String::from_utf8_lossy(p).to_string()))
                })
                .unwrap_or(Value::Null);
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
            out.push((key, value, headers));
        }
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_are_enriched_from_cdc_and_restarts_resume_exactly() {
    let cluster = MockCluster::new(1).unwrap();
    for t in [
        "customers",
        "customers_dlq",
        "orders",
        "orders_enriched",
        "orders_dlq",
    ] {
        cluster.create_topic(t, 2, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let text = CONFIG
        .replace("{bootstrap}", &bootstrap)
        .replace("{warehouse}", &dir.path().display().to_string());
    let config = lakejoin::config::from_toml("test", &text).unwrap();
    let warehouse = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();

    send(
        &producer,
        "customers",
        "1",
        &customer("c", 1, "ada", "ch", 10),
    )
    .await;
    send(
        &producer,
        "customers",
        "2",
        &customer("c", 2, "bob", "de", 10),
    )
    .await;
    send(
        &producer,
        "customers",
        "3",
        &customer("c", 3, "cy", "fr", 10),
    )
    .await;
    // A late, older version of customer 1 must not win (sequence field).
    send(
        &producer,
        "customers",
        "1",
        &customer("u", 1, "stale", "xx", 5),
    )
    .await;
    send(&producer, "customers", "9", "{not json").await;
    let running = lakejoin::pipeline::start(config.clone()).await.unwrap();
    let rows = wait_for_rows(&warehouse, 3).await;
    assert_eq!(
        rows[0][1],
        Datum::String("ada".into()),
        "the late update lost"
    );

    send_traced(
        &producer,
        "orders",
        "100",
        r#"{"order_id": 100, "customer_id": 1, "amount": "9.50"}"#,
    )
    .await;
    send(
        &producer,
        "orders",
        "101",
        r#"{"order_id": 101, "customer_id": 77}"#,
    )
    .await;
    send_traced(
        &producer,
        "orders",
        "102",
        r#"{"order_id": 102, "customer_id": "two"}"#,
    )
    .await;
    send(&producer, "orders", "103", r#"{"order_id": 103}"#).await;
    let out = read_topic(&bootstrap, "orders_enriched", 3).await;
    let by_id: BTreeMap<i64, &Value> = out
        .iter()
        .map(|(_, v, _)| (v["order_id"].as_i64().unwrap(), v))
        .collect();
    assert_eq!(by_id[&100]["customer_name"], "ada");
    assert_eq!(by_id[&100]["customer_country"], "ch");
    assert_eq!(by_id[&100]["amount"], "9.50");
    assert_eq!(
        by_id[&101]["customer_name"],
        Value::Null,
        "unknown customer: nulls"
    );
    assert_eq!(
        by_id[&103]["customer_name"],
        Value::Null,
        "missing key: nulls"
    );
    assert!(
        out.iter().any(|(k, _, _)| k.as_deref() == Some("100")),
        "output key is order_id"
    );
    // A fact's headers travel to its enriched record and to its dead letter; a fact
    // without headers gets none.
    for (_, value, headers) in &out {
        let want = if value["order_id"] == 100 {
            vec![("traceparent".to_string(), TRACE.to_string())]
        } else {
            Vec::new()
        };
        assert_eq!(headers, &want, "{value}");
    }
    let dlq = read_topic(&bootstrap, "orders_dlq", 1).await;
    let headers: BTreeMap<_, _> = dlq[0].2.iter().cloned().collect();
    assert!(
        headers["lakejoin.error"].contains("customer_id"),
        "{headers:?}"
    );
    assert_eq!(headers["lakejoin.source.topic"], "orders");
    assert_eq!(headers["traceparent"], TRACE, "{headers:?}");
    let cdc_dlq = read_topic(&bootstrap, "customers_dlq", 1).await;
    assert_eq!(cdc_dlq[0].1, Value::String("{not json".into()));

    // An update committed by the CDC pipeline is visible to the next lookup.
    send(
        &producer,
        "customers",
        "2",
        &customer("u", 2, "bobby", "at", 20),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 200;
    loop {
        send(
            &producer,
            "orders",
            &n.to_string(),
            &json!({"order_id": n, "customer_id": 2}).to_string(),
        )
        .await;
        let out = read_topic(&bootstrap, "orders_enriched", 4 + (n - 200) as usize).await;
        if out
            .iter()
            .any(|(_, v, _)| v["order_id"] == n && v["customer_name"] == "bobby")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the update never reached the lookups"
        );
        n += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every fact was taken in some poll batch, and a batch holds at least one fact.
    let enrich = running.metrics()["orders-enriched"].clone();
    let facts = lakejoin::observe::PipelineMetrics::get(&enrich.records_in);
    let batches = lakejoin::observe::PipelineMetrics::get(&enrich.fact_batches);
    assert!(facts >= 5, "{facts} facts consumed");
    assert!(
        (1..=facts).contains(&batches),
        "{facts} facts in {batches} poll batches"
    );
    running.shutdown().await.unwrap();

    // Restart: CDC resumes after the last committed offsets; nothing is applied twice.
    let table = Table::open(
        &warehouse,
        &TableIdentifier::parse("shop.customers").unwrap(),
    )
    .await
    .unwrap();
    let user = lakejoin::pipeline::cdc::commit_user("it", "shop.customers");
    let before = table.latest_snapshot_of_user(&user).await.unwrap().unwrap();
    let offsets: Value = serde_json::from_str(
        &before.properties.as_ref().unwrap()["lakejoin.offsets.customers-cdc"],
    )
    .unwrap();
    let consumed: i64 = offsets["customers"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(
        consumed, 6,
        "all six customer records are covered: {offsets}"
    );
    send(
        &producer,
        "customers",
        "3",
        &customer("d", 3, "cy", "fr", 30),
    )
    .await;
    let running = lakejoin::pipeline::start(config).await.unwrap();
    let rows = wait_for_rows(&warehouse, 2).await;
    running.shutdown().await.unwrap();
    assert_eq!(rows[1][1], Datum::String("bobby".into()));
    let mut rows_added = 0;
    for id in table.snapshot_ids().await.unwrap() {
        let s = table.snapshot(id).await.unwrap();
        if id > before.id && s.commit_kind == lakejoin::table::snapshot::CommitKind::Append {
            let delta = table
                .read_manifest_list(&s.delta_manifest_list)
                .await
                .unwrap();
            rows_added += table
                .read_manifests(&delta)
                .await
                .unwrap()
                .iter()
                .map(|e| e.file.row_count)
                .sum::<i64>();
        }
    }
    assert_eq!(
        rows_added, 1,
        "only the new delete was written after the restart"
    );
}

const WIDE: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "wide"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.profile"
columns = [
  { name = "customer_id", type = "INT" },
  { name = "email", type = "STRING" },
  { name = "tier", type = "STRING" },
  { name = "lifetime_value", type = "DECIMAL(12, 2)" },
]
primary_key = ["customer_id"]
buckets = 2
merge_engine = "partial-update"
[table.options]
"partial-update.ignore-delete" = "true"

[[cdc]]
name = "emails"
topics = ["emails"]
format = "upsert-json"
table = "shop.profile"
commit_interval = "200ms"

[[cdc]]
name = "tiers"
topics = ["tiers"]
format = "upsert-json"
table = "shop.profile"
commit_interval = "200ms"

[[cdc]]
name = "values"
topics = ["values"]
format = "json"
table = "shop.profile"
commit_interval = "200ms"
"#;

/// Three topics fill the columns of one partial-update table through one writer, and each
/// pipeline's offsets are stored in the table's snapshots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_topics_fill_one_wide_partial_update_table() {
    let cluster = MockCluster::new(1).unwrap();
    for t in ["emails", "tiers", "values"] {
        cluster.create_topic(t, 1, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let text = WIDE
        .replace("{bootstrap}", &bootstrap)
        .replace("{warehouse}", &dir.path().display().to_string());
    let config = lakejoin::config::from_toml("test", &text).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    send(
        &producer,
        "emails",
        r#"{"customer_id":1}"#,
        r#"{"customer_id":1,"email":"ada@example.com"}"#,
    )
    .await;
    send(
        &producer,
        "emails",
        r#"{"customer_id":2}"#,
        r#"{"customer_id":2,"email":"bob@example.com"}"#,
    )
    .await;
    send(
        &producer,
        "tiers",
        r#"{"customer_id":1}"#,
        r#"{"customer_id":1,"tier":"gold"}"#,
    )
    .await;
    send(
        &producer,
        "values",
        "1",
        r#"{"customer_id":1,"lifetime_value":"1234.50"}"#,
    )
    .await;
    send(
        &producer,
        "values",
        "2",
        r#"{"customer_id":2,"lifetime_value":"7"}"#,
    )
    .await;
    let running = lakejoin::pipeline::start(config).await.unwrap();
    let warehouse = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let id = TableIdentifier::parse("shop.profile").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let expected = vec![
        vec![
            Datum::Int(1),
            Datum::String("ada@example.com".into()),
            Datum::String("gold".into()),
            Datum::Decimal(123_450),
        ],
        vec![
            Datum::Int(2),
            Datum::String("bob@example.com".into()),
            Datum::Null,
            Datum::Decimal(700),
        ],
    ];
    loop {
        if let Ok(table) = Table::open(&warehouse, &id).await
            && scan(&table, None, &ScanFilter::default()).await.unwrap() == expected
        {
            // The writer's own snapshots carry the offsets (compactions commit as another user).
            let user = lakejoin::pipeline::cdc::commit_user("wide", "shop.profile");
            let snapshot = table.latest_snapshot_of_user(&user).await.unwrap().unwrap();
            let properties = snapshot.properties.unwrap_or_default();
            for pipeline in ["emails", "tiers", "values"] {
                assert!(
                    properties.contains_key(&format!("lakejoin.offsets.{pipeline}")),
                    "{properties:?}"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the wide table never held the merged rows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.shutdown().await.unwrap();
}

/// `[[enrich]] start_from = "latest"`: a new group skips the facts already in the topic, as
/// Kafka's `auto.offset.reset = latest` does; facts sent once it runs are enriched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enrich_start_from_latest_skips_what_was_already_there() {
    let cluster = MockCluster::new(1).unwrap();
    for t in ["orders", "orders_enriched"] {
        cluster.create_topic(t, 1, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "latest"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.customers"
columns = [{{ name = "id", type = "INT" }}, {{ name = "name", type = "STRING" }}]
primary_key = ["id"]
buckets = 1

[[enrich]]
name = "orders-enriched"
topics = ["orders"]
output = {{ topic = "orders_enriched", key = "order_id" }}
start_from = "latest"

[[enrich.join]]
table = "shop.customers"
on = {{ customer_id = "id" }}
select = ["name"]
"#,
        warehouse = dir.path().display()
    );
    let config = lakejoin::config::from_toml("test", &text).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    for id in [1, 2] {
        send(
            &producer,
            "orders",
            &id.to_string(),
            &json!({"order_id": id, "customer_id": 1}).to_string(),
        )
        .await;
    }
    let running = lakejoin::pipeline::start(config).await.unwrap();
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "reader-latest")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["orders_enriched"]).unwrap();
    // Send facts until one comes out (the consumer resolves "latest" once it has joined;
    // facts sent before that may be skipped too), then check the first one out is not a
    // fact that was there before the pipeline started.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next = 3;
    let first = loop {
        assert!(Instant::now() < deadline, "no fact came out");
        send(
            &producer,
            "orders",
            &next.to_string(),
            &json!({"order_id": next, "customer_id": 1}).to_string(),
        )
        .await;
        next += 1;
        if let Ok(Ok(m)) = tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await {
            let value: Value = serde_json::from_slice(m.payload().unwrap()).unwrap();
            break value["order_id"].as_i64().unwrap();
        }
    };
    assert!(
        first >= 3,
        "fact {first} was in the topic before the pipeline started"
    );
    running.shutdown().await.unwrap();
}

/// A schema registry that answers 503 to its first `failures` requests, then the schema.
/// Returns its URL and the count of requests so far.
fn flaky_registry(
    schema: &str,
    failures: usize,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    let body = json!({ "schema": schema }).to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let answer = if n < failures {
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_string()
            } else {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (url, seen)
}

/// The schema registry is down when a Confluent-framed Avro change arrives: the change is
/// held and tried again (the pipeline unready meanwhile), never dead-lettered, and applied
/// once the registry answers. (A transient registry error used to stop the CDC pipeline.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdc_change_waits_out_a_schema_registry_outage() {
    let schema_text = r#"{"type": "record", "name": "item", "fields": [
        {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}"#;
    let (registry_url, requests) = flaky_registry(schema_text, 3);
    let cluster = MockCluster::new(1).unwrap();
    for t in ["items", "items_dlq"] {
        cluster.create_topic(t, 1, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "registry-outage"

[warehouse]
uri = "{}"

[[table]]
name = "shop.items"
columns = [{{ name = "id", type = "INT" }}, {{ name = "name", type = "STRING" }}]
primary_key = ["id"]
buckets = 1

[[cdc]]
name = "items-cdc"
topics = ["items"]
format = "avro"
schema_registry = "{registry_url}"
table = "shop.items"
commit_interval = "100ms"
dead_letter_topic = "items_dlq"
"#,
        dir.path().display()
    );
    let config = lakejoin::config::from_toml("test", &text).unwrap();
    let schema = apache_avro::Schema::parse_str(schema_text).unwrap();
    let datum = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
        .build()
        .unwrap()
        .write_value_to_vec(apache_avro::types::Value::Record(vec![
            ("id".into(), apache_avro::types::Value::Int(1)),
            (
                "name".into(),
                apache_avro::types::Value::String("ada".into()),
            ),
        ]))
        .unwrap();
    let mut framed = vec![0u8, 0, 0, 0, 1];
    framed.extend(datum);
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    producer
        .send(
            FutureRecord::to("items").key("1").payload(&framed),
            Duration::from_secs(10),
        )
        .await
        .expect("produce");
    let registry = std::sync::Arc::new(lakejoin::observe::Registry::default());
    let warehouse = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let running = lakejoin::pipeline::start_on(config, registry.clone(), warehouse.clone())
        .await
        .unwrap();
    let metrics = running.metrics()["items-cdc"].clone();
    let id = TableIdentifier::parse("shop.items").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let table = Table::open(&warehouse, &id).await.unwrap();
        let rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
        if !rows.is_empty() {
            assert_eq!(rows, vec![vec![Datum::Int(1), Datum::String("ada".into())]]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the change never reached the table ({} registry requests)",
            requests.load(std::sync::atomic::Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(requests.load(std::sync::atomic::Ordering::SeqCst) >= 4);
    assert!(lakejoin::observe::PipelineMetrics::get(&metrics.held_retries) >= 3);
    assert_eq!(
        lakejoin::observe::PipelineMetrics::get(&metrics.dead_lettered),
        0
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while registry.readiness().is_err() {
        assert!(Instant::now() < deadline, "{:?}", registry.readiness());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.shutdown().await.unwrap();
}

/// A fetch answered with OFFSET_OUT_OF_RANGE although the position is inside the log (as
/// a broker can answer while it restarts): librdkafka stops the partition and reports a
/// reset (`auto.offset.reset = error`). The position is checked, found inside the log,
/// and the partition resumes there: nothing is lost or repeated. (It used to stay stopped
/// for good, so no later change reached the table.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spurious_offset_reset_resumes_the_cdc_partition_where_it_was() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("customers", 1, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let cdc_only = CONFIG[..CONFIG.find("[[enrich]]").unwrap()]
        .replace("{bootstrap}", &bootstrap)
        .replace("{warehouse}", &dir.path().display().to_string())
        .replace("dead_letter_topic = \"customers_dlq\"\n", "");
    let config = lakejoin::config::from_toml("test", &cdc_only).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    send(
        &producer,
        "customers",
        "1",
        &customer("c", 1, "ada", "ch", 10),
    )
    .await;
    let registry = std::sync::Arc::new(lakejoin::observe::Registry::default());
    let warehouse = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let running = lakejoin::pipeline::start_on(config, registry, warehouse.clone())
        .await
        .unwrap();
    wait_for_rows(&warehouse, 1).await;

    cluster.request_errors(
        rdkafka::types::RDKafkaApiKey::Fetch,
        &[rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE],
    );
    send(
        &producer,
        "customers",
        "2",
        &customer("c", 2, "bob", "de", 10),
    )
    .await;
    send(
        &producer,
        "customers",
        "3",
        &customer("c", 3, "cy", "fr", 10),
    )
    .await;
    let rows = wait_for_rows(&warehouse, 3).await;
    let ids: Vec<&Datum> = rows.iter().map(|r| &r[0]).collect();
    assert_eq!(ids, [&Datum::Int(1), &Datum::Int(2), &Datum::Int(3)]);
    running.shutdown().await.unwrap();
}
