//! lakejoin over Apache Kafka's secured listeners and with every compression codec, as a
//! production cluster runs them (the broker of `scripts/kafka/broker.sh`):
//!
//! - CDC and enrich pipelines over mTLS, SASL_SSL with SCRAM-SHA-512 (the README's own
//!   example) and SASL_PLAINTEXT with PLAIN, with no secret in the log;
//! - topics whose producers compressed with gzip, snappy, lz4 and zstd, consumed by both
//!   kinds of pipeline, and output written with each `compression.type` (checked in the
//!   broker's log segments with Kafka's own `DumpLogSegments`);
//! - a wrong password, an untrusted certificate and TLS spoken to a plaintext port: one
//!   clear error naming the listener and the mechanism, unready with the reason, and the
//!   process keeps retrying.
//!
//! The test clients (producer, reader) use the PLAINTEXT listener; lakejoin's config names
//! only the secured one, so its records can only have come through it.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::broker::{
    self, Deployment, LakejoinProcess, TestProducer, TopicReader, tail, wait_until,
};
use support::shop::ShopTopics;

/// An environment variable of `scripts/kafka/broker.sh`'s broker, or `None` (with a note)
/// when the suite runs against a broker without it.
fn broker_env(name: &str) -> Option<String> {
    let value = std::env::var(name).ok();
    if value.is_none() {
        eprintln!(
            "skipped: {name} is not set (scripts/test.sh sets it for its Apache Kafka broker; \
             a KAFKA_BOOTSTRAP broker has no secured listeners known to the tests)"
        );
    }
    value
}

fn tls_file(name: &str) -> String {
    let dir = std::env::var("KAFKA_TLS_DIR").expect("KAFKA_TLS_DIR");
    PathBuf::from(dir).join(name).display().to_string()
}

/// The README's SASL_SSL example (its `[kafka.properties]` block), with the test broker's
/// password and CA filled in: the keys and the other values are the README's own.
fn readme_sasl_ssl_properties() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let block = readme
        .split("```toml\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
        .find(|block| block.contains("\"security.protocol\" = \"SASL_SSL\""))
        .expect("the README has a SASL_SSL example");
    let table: toml::Table = block.parse().expect("the README's example is TOML");
    let example = table["kafka"]["properties"]
        .as_table()
        .expect("the example is a [kafka.properties] table");
    example
        .iter()
        .map(|(key, value)| {
            let value = value.as_str().expect("a string").to_owned();
            let value = match key.as_str() {
                "sasl.password" => std::env::var("KAFKA_SCRAM_PASSWORD").expect("password"),
                "ssl.ca.location" => tls_file("ca.pem"),
                "sasl.username" => {
                    assert_eq!(
                        value,
                        std::env::var("KAFKA_SCRAM_USER").expect("user"),
                        "the README's user is the broker's SCRAM user"
                    );
                    value
                }
                _ => value,
            };
            (key.clone(), value)
        })
        .collect()
}

/// A secured listener: its address and the properties lakejoin needs for it.
struct Listener {
    name: &'static str,
    bootstrap: String,
    properties: Vec<(String, String)>,
    /// Values that must never appear in the log.
    secrets: Vec<String>,
}

fn mtls() -> Option<Listener> {
    let bootstrap = broker_env("KAFKA_SSL_BOOTSTRAP")?;
    let key_password = std::env::var("KAFKA_CLIENT_KEY_PASSWORD").expect("key password");
    Some(Listener {
        name: "SSL (mTLS)",
        bootstrap,
        properties: vec![
            ("security.protocol".into(), "SSL".into()),
            ("ssl.ca.location".into(), tls_file("ca.pem")),
            ("ssl.certificate.location".into(), tls_file("client.pem")),
            ("ssl.key.location".into(), tls_file("client.key")),
            ("ssl.key.password".into(), key_password.clone()),
        ],
        secrets: vec![key_password],
    })
}

fn sasl_ssl() -> Option<Listener> {
    let bootstrap = broker_env("KAFKA_SASL_SSL_BOOTSTRAP")?;
    Some(Listener {
        name: "SASL_SSL (SCRAM-SHA-512)",
        bootstrap,
        properties: readme_sasl_ssl_properties(),
        secrets: vec![std::env::var("KAFKA_SCRAM_PASSWORD").expect("password")],
    })
}

fn sasl_plaintext() -> Option<Listener> {
    let bootstrap = broker_env("KAFKA_SASL_PLAINTEXT_BOOTSTRAP")?;
    let password = std::env::var("KAFKA_PLAIN_PASSWORD").expect("password");
    Some(Listener {
        name: "SASL_PLAINTEXT (PLAIN)",
        bootstrap,
        properties: vec![
            ("security.protocol".into(), "SASL_PLAINTEXT".into()),
            ("sasl.mechanism".into(), "PLAIN".into()),
            (
                "sasl.username".into(),
                std::env::var("KAFKA_PLAIN_USER").expect("user"),
            ),
            ("sasl.password".into(), password.clone()),
        ],
        secrets: vec![password],
    })
}

fn debezium(id: i64, name: &str) -> String {
    json!({"op": "c", "ts_ms": 1, "before": null, "after": {"id": id, "name": name}}).to_string()
}

/// The shared pipelines on `topics` (customers as Debezium JSON), with `properties` in
/// `[kafka.properties]` for lakejoin's clients.
fn config(topics: &ShopTopics, properties: &[(&str, String)]) -> String {
    topics
        .pipelines("secure")
        .cdc("format", "debezium-json")
        // An order waits until the customers Kafka had before it are visible to the join
        // (the table holding them is not enough: the lookups refresh after the commit).
        .join("wait_for_cdc", true)
        .kafka_properties(properties)
        .build()
}

/// Customers through CDC, then orders through the join: both pipelines consumed and the
/// producer produced (through whatever lakejoin's config says), the output is joined.
fn customers_then_orders(
    deployment: &Deployment,
    topics: &ShopTopics,
    producer: &TestProducer,
    process: &mut LakejoinProcess,
) {
    for id in 1..=20 {
        producer.send(
            &topics.customers,
            &id.to_string(),
            &debezium(id, &format!("c{id}")),
        );
    }
    producer.flush();
    let customers: Vec<Value> = (1..=20)
        .map(|id| json!({"id": id, "name": format!("c{id}")}))
        .collect();
    deployment.wait_for_table("shop.customers", &customers);
    process.assert_alive();
    for id in 1..=40 {
        producer.send(
            &topics.orders,
            &id.to_string(),
            &json!({"order_id": id, "customer_id": id}).to_string(),
        );
    }
    producer.flush();
    let mut output = TopicReader::new(&topics.enriched);
    output.read_until("40 orders enriched", |records| {
        records
            .iter()
            .filter_map(|r| r.value["order_id"].as_i64())
            .collect::<BTreeSet<_>>()
            .len()
            == 40
    });
    for record in &output.records {
        let id = record.value["order_id"].as_i64().expect("order_id");
        let expected = if id <= 20 {
            json!(format!("c{id}"))
        } else {
            Value::Null
        };
        assert_eq!(record.value["customer_name"], expected, "{record:?}");
    }
}

fn secured_listener_runs_both_pipelines(listener: Option<Listener>) {
    let Some(listener) = listener else { return };
    let topics = ShopTopics::create(2, 2);
    let properties: Vec<(&str, String)> = listener
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let deployment = Deployment::on(&listener.bootstrap, &config(&topics, &properties));
    let mut process = deployment.start();
    let address = process.endpoint();
    customers_then_orders(&deployment, &topics, &TestProducer::new(), &mut process);
    wait_until("/health/ready answers 200", || {
        broker::http_get(address, "/health/ready").is_some_and(|(status, _)| status == 200)
    });
    let log = process.terminate();
    for secret in &listener.secrets {
        assert!(
            !log.contains(secret.as_str()),
            "{}: a secret is in the log",
            listener.name
        );
    }
    let validate = Command::new(support::lakejoin_bin())
        .args(["validate", "-c"])
        .arg(&deployment.config)
        .output()
        .expect("lakejoin validate");
    assert!(validate.status.success());
    let printed = String::from_utf8_lossy(&validate.stdout).into_owned()
        + &String::from_utf8_lossy(&validate.stderr);
    for secret in &listener.secrets {
        assert!(!printed.contains(secret.as_str()), "{printed}");
    }
}

#[test]
fn pipelines_run_over_mutual_tls() {
    secured_listener_runs_both_pipelines(mtls());
}

#[test]
fn pipelines_run_over_sasl_ssl_with_scram_as_the_readme_shows() {
    secured_listener_runs_both_pipelines(sasl_ssl());
}

#[test]
fn pipelines_run_over_sasl_plaintext_with_plain() {
    secured_listener_runs_both_pipelines(sasl_plaintext());
}

/// Kafka's `DumpLogSegments` over every segment of `topic` in the broker's log directory:
/// the `compresscodec` of each record batch.
fn batch_codecs(topic: &str) -> Option<BTreeSet<String>> {
    let broker_dir = std::env::var("KAFKA_BROKER_DIR").ok()?;
    let libs = String::from_utf8(
        Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/kafka/broker.sh"
            ))
            .arg("install")
            .output()
            .expect("broker.sh install")
            .stdout,
    )
    .expect("a path");
    let mut segments = Vec::new();
    for entry in std::fs::read_dir(PathBuf::from(&broker_dir).join("data")).ok()? {
        let dir = entry.ok()?.path();
        let name = dir.file_name()?.to_string_lossy().into_owned();
        if name
            .rsplit_once('-')
            .is_some_and(|(t, p)| t == topic && p.parse::<u32>().is_ok())
        {
            for file in std::fs::read_dir(&dir).ok()? {
                let path = file.ok()?.path();
                if path.extension().is_some_and(|e| e == "log") {
                    segments.push(path.display().to_string());
                }
            }
        }
    }
    assert!(!segments.is_empty(), "no log segments of {topic}");
    let output = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", libs.trim()))
        .arg("org.apache.kafka.tools.DumpLogSegments")
        .arg("--files")
        .arg(segments.join(","))
        .output()
        .expect("DumpLogSegments");
    let text = String::from_utf8_lossy(&output.stdout);
    Some(
        text.split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[0] == "compresscodec:")
            .map(|w| w[1].to_ascii_lowercase())
            .collect(),
    )
}

/// Input compressed with `codec` by its producer, consumed by a CDC and an enrich pipeline;
/// lakejoin's own output compressed with `codec` too (`compression.type`).
fn codec_round_trip(codec: &str) {
    let topics = ShopTopics::create(2, 2);
    let deployment = Deployment::new(&config(&topics, &[("compression.type", codec.to_owned())]));
    let producer = TestProducer::with_properties(&[("compression.type", codec)]);
    let mut process = deployment.start();
    customers_then_orders(&deployment, &topics, &producer, &mut process);
    let log = process.terminate();
    assert!(
        !log.contains("Decompression"),
        "{codec}: {}",
        tail(&log, 20)
    );
    if let Some(input) = batch_codecs(&topics.orders) {
        assert_eq!(input, BTreeSet::from([codec.to_owned()]), "input batches");
        let output = batch_codecs(&topics.enriched).expect("output batches");
        assert_eq!(output, BTreeSet::from([codec.to_owned()]), "output batches");
    }
}

#[test]
fn gzip_topics_are_consumed_and_gzip_output_produced() {
    codec_round_trip("gzip");
}

#[test]
fn snappy_topics_are_consumed_and_snappy_output_produced() {
    codec_round_trip("snappy");
}

#[test]
fn lz4_topics_are_consumed_and_lz4_output_produced() {
    codec_round_trip("lz4");
}

#[test]
fn zstd_topics_are_consumed_and_zstd_output_produced() {
    codec_round_trip("zstd");
}

/// A misconfigured client: lakejoin stays up and retries, logs one ERROR line that names
/// the listener and the mechanism (`expected`), is unready with that reason, and never
/// logs a secret.
fn refused(
    bootstrap: String,
    properties: Vec<(&str, String)>,
    expected: &[&str],
    secrets: &[String],
) {
    let topics = ShopTopics::create(2, 2);
    let deployment = Deployment::on(&bootstrap, &config(&topics, &properties));
    let mut process = deployment.start();
    let address = process.endpoint();
    let line = process.wait_for_log("Kafka refused the connection");
    for needle in expected {
        assert!(line.contains(needle), "{needle:?} not in {line}");
    }
    wait_until("/health/ready names the reason", || {
        broker::http_get(address, "/health/ready").is_some_and(|(status, body)| {
            status == 503 && expected.iter().all(|needle| body.contains(needle))
        })
    });
    // Still retrying some seconds later, with the error said once per client, not per retry.
    std::thread::sleep(Duration::from_secs(5));
    process.assert_alive();
    let log = process.terminate();
    let errors: BTreeMap<String, usize> = log
        .lines()
        .filter(|l| l.contains("Kafka refused the connection"))
        .fold(BTreeMap::new(), |mut by_client, l| {
            let client = l
                .split("client=")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or("?")
                .to_owned();
            *by_client.entry(client).or_default() += 1;
            by_client
        });
    assert!(
        errors.values().all(|n| *n == 1),
        "one error line per client: {errors:?}\n{}",
        tail(&log, 30)
    );
    // The consumer's polls see the refusal too, several times a second: never a warning.
    let repeats = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("Kafka consumer error"))
        .count();
    assert_eq!(
        repeats,
        0,
        "consumer errors repeat the refusal:\n{}",
        tail(&log, 30)
    );
    for secret in secrets {
        assert!(!log.contains(secret.as_str()), "a secret is in the log");
    }
}

#[test]
fn a_wrong_scram_password_is_one_clear_error_and_retried() {
    let Some(bootstrap) = broker_env("KAFKA_SASL_SSL_BOOTSTRAP") else {
        return;
    };
    let wrong = "not-the-password-1234".to_owned();
    refused(
        bootstrap.clone(),
        vec![
            ("security.protocol", "SASL_SSL".into()),
            ("sasl.mechanism", "SCRAM-SHA-512".into()),
            ("sasl.username", "lakejoin".into()),
            ("sasl.password", wrong.clone()),
            ("ssl.ca.location", tls_file("ca.pem")),
        ],
        &[
            &format!("sasl_ssl://{bootstrap}"),
            "SCRAM-SHA-512",
            "authentication",
        ],
        &[wrong],
    );
}

#[test]
fn an_untrusted_broker_certificate_is_one_clear_error_and_retried() {
    let Some(bootstrap) = broker_env("KAFKA_SSL_BOOTSTRAP") else {
        return;
    };
    let key_password = std::env::var("KAFKA_CLIENT_KEY_PASSWORD").expect("key password");
    refused(
        bootstrap.clone(),
        vec![
            ("security.protocol", "SSL".into()),
            ("ssl.ca.location", tls_file("untrusted-ca.pem")),
            ("ssl.certificate.location", tls_file("client.pem")),
            ("ssl.key.location", tls_file("client.key")),
            ("ssl.key.password", key_password.clone()),
        ],
        &[&format!("ssl://{bootstrap}"), "certificate verify failed"],
        &[key_password],
    );
}

#[test]
fn tls_spoken_to_a_plaintext_listener_is_one_clear_error_and_retried() {
    let Some(_) = broker_env("KAFKA_SSL_BOOTSTRAP") else {
        return;
    };
    let bootstrap = broker::bootstrap();
    refused(
        bootstrap.clone(),
        vec![
            ("security.protocol", "SSL".into()),
            ("ssl.ca.location", tls_file("ca.pem")),
        ],
        &[&format!("ssl://{bootstrap}"), "SSL handshake failed"],
        &[],
    );
}

/// A partition whose record batch names a compression codec no client knows. Kafka refuses
/// such a batch on produce, so the test writes a gzip batch and then changes the codec bits
/// of its attributes in the broker's log segment (librdkafka does not check CRCs by
/// default, and the broker serves fetches from the file). The CDC pipeline logs one ERROR,
/// is unready with the reason, and keeps running; it never passes as a warning.
#[test]
fn a_topic_that_cannot_be_decoded_makes_the_pipeline_unready() {
    let Some(broker_dir) = broker_env("KAFKA_BROKER_DIR") else {
        return;
    };
    let topics = ShopTopics::create(2, 2);
    let producer = TestProducer::with_properties(&[("compression.type", "gzip")]);
    for id in 1..=5 {
        producer.send_to(&topics.customers, 0, &id.to_string(), &debezium(id, "x"));
    }
    producer.flush();
    let segment = PathBuf::from(broker_dir)
        .join("data")
        .join(format!("{}-0", topics.customers))
        .join("00000000000000000000.log");
    let bytes = std::fs::read(&segment).expect("the partition's first segment");
    // A v2 record batch: baseOffset (8), batchLength (4), partitionLeaderEpoch (4), magic
    // (1), crc (4), then the attributes (int16), whose low three bits are the codec.
    const ATTRIBUTES: usize = 8 + 4 + 4 + 1 + 4;
    assert_eq!(bytes[16], 2, "magic 2");
    assert_eq!(bytes[ATTRIBUTES + 1] & 0x07, 1, "a gzip batch");
    // In place, on the file the broker has open.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .expect("open the segment");
    std::os::unix::fs::FileExt::write_all_at(
        &file,
        &[bytes[ATTRIBUTES + 1] | 0x07],
        (ATTRIBUTES + 1) as u64,
    )
    .expect("patch the segment");

    let deployment = Deployment::new(&config(&topics, &[]));
    let mut process = deployment.start();
    let address = process.endpoint();
    let line = process.wait_for_log("Kafka records cannot be decoded");
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("customers-cdc"), "{line}");
    wait_until("/health/ready names the undecodable records", || {
        broker::http_get(address, "/health/ready").is_some_and(|(status, body)| {
            status == 503
                && body.contains("pipeline customers-cdc: Kafka: records cannot be decoded")
        })
    });
    process.assert_alive();
    process.terminate();
}
