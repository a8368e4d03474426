//! The orders scenario: Debezium CDC of customers into a table, orders enriched through a
//! LEFT lookup join, dead letters, freshness after commits, resuming exactly after a
//! restart; and an enrich pipeline that starts from the latest offsets.

use super::*;

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
