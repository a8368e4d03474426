//! Transient faults a CDC pipeline waits out: a schema registry that is down, and an
//! offset reset a restarting broker reports for a position inside the log.

use super::*;

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
