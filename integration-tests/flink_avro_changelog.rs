//! `[[changelog]]` with `format = "avro"`, read by Flink's own Avro formats on Apache
//! Kafka (started by `scripts/test.sh`, or any broker named by `KAFKA_BOOTSTRAP`), with
//! Apicurio Registry's Confluent API as the schema registry.
//!
//! One table (deduplicate, `changelog-producer = lookup`, every kind of column) fed by a
//! CDC pipeline with inserts, updates and deletes feeds three changelog pipelines: `json`,
//! `avro` plain and `avro` with the registry. The `json` topic replays to the model of the
//! table (as `kafka_changelog.rs` checks); Flink's `avro` format (the DDL's schema as the
//! writer's) and `avro-confluent` format (the writer's schema from the registry, the key
//! columns from the record key alone) read, record by record, the same changes from the
//! two Avro topics; apache-avro reads the registry's records with the registered schemas
//! too, and the subjects are `<topic>-key` and `<topic>-value`. Then a change with a new
//! field adds a column to the table: the pipeline registers the value schema's second
//! version, and the records after it carry the column under the new id.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use support::broker::{self, Deployment, TestProducer, TopicReader, unique};
use support::debezium::{SchemaRegistry, confluent_avro};
use support::flink::FlinkJob;

const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.payments"
columns = [
  { name = "id", type = "BIGINT" },
  { name = "amount", type = "DECIMAL(10, 2)" },
  { name = "paid_at", type = "TIMESTAMP(3)" },
  { name = "paid_on", type = "DATE" },
  { name = "note", type = "STRING" },
  { name = "flag", type = "BOOLEAN" },
  { name = "qty", type = "INT" },
  { name = "ratio", type = "DOUBLE" },
]
primary_key = ["id"]
buckets = 2
options = { "changelog-producer" = "lookup" }

[[cdc]]
name = "payments"
topics = ["{input}"]
format = "json"
row_kind_field = "op"
table = "shop.payments"
commit_interval = "300ms"

[[changelog]]
name = "as-json"
table = "shop.payments"
topic = "{json}"
format = "json"
discovery_interval = "200ms"

[[changelog]]
name = "as-avro"
table = "shop.payments"
topic = "{plain}"
format = "avro"
discovery_interval = "200ms"

[[changelog]]
name = "as-registered-avro"
table = "shop.payments"
topic = "{registered}"
format = "avro"
schema_registry = "{registry}"
discovery_interval = "200ms"
"#;

/// The table's columns in Flink's DDL, then the format's `op`.
const COLUMNS: [&str; 9] = [
    "id BIGINT NOT NULL",
    "amount DECIMAL(10, 2)",
    "paid_at TIMESTAMP(3)",
    "paid_on DATE",
    "note STRING",
    "flag BOOLEAN",
    "qty INT",
    "ratio DOUBLE",
    "op STRING NOT NULL",
];

/// The column names, in order.
fn names() -> Vec<&'static str> {
    COLUMNS
        .iter()
        .map(|c| c.split(' ').next().expect("a name"))
        .collect()
}

/// A payment row of round `round` (nulls in some columns of some rows).
fn payment(id: i64, round: i64) -> Value {
    let n = id * 10 + round;
    json!({
        "id": id,
        "amount": format!("{}.{:02}", n * 3, n % 100),
        "paid_at": format!("2026-12-0{} 10:{:02}:{:02}.{}", 1 + round % 3, id % 60, round, (n * 7) % 1000),
        "paid_on": if id % 4 == 0 { Value::Null } else { json!(format!("2026-11-{:02}", 1 + n % 28)) },
        "note": if round % 2 == 0 { json!(format!("note {id}/{round} ✓")) } else { Value::Null },
        "flag": (n % 3 == 0),
        "qty": if id % 5 == 0 { Value::Null } else { json!(n - 40) },
        "ratio": (n as f64) / 8.0,
    })
}

/// The `json` changelog replayed onto an empty table: `+I`/`+U` set a row, `-U`/`-D`
/// remove the row they retract (panics on a retraction of another row).
fn replay(records: &[broker::Record]) -> BTreeMap<i64, Value> {
    let mut state = BTreeMap::new();
    for r in records {
        let mut row = r.value.clone();
        let op = row
            .as_object_mut()
            .and_then(|o| o.remove("op"))
            .unwrap_or_else(|| panic!("no op in {}", r.value));
        let id = row["id"].as_i64().expect("an id");
        match op.as_str() {
            Some("+I" | "+U") => {
                state.insert(id, row);
            }
            Some("-U" | "-D") => assert_eq!(state.remove(&id), Some(row), "retraction {op}"),
            other => panic!("op {other:?}"),
        }
    }
    state
}

#[test]
fn flinks_avro_formats_read_the_avro_changelogs_as_the_json_one() {
    support::flink::install();
    let registry_dir = tempfile::tempdir().expect("temp dir");
    let registry = SchemaRegistry::start(registry_dir.path());
    let names_of: BTreeMap<&str, String> = ["input", "json", "plain", "registered", "group"]
        .into_iter()
        .map(|n| (n, unique(&format!("avro-{n}"))))
        .collect();
    // One partition each: Flink's rows come in the topics' order.
    broker::create_topics(&[
        (&names_of["input"], 1),
        (&names_of["json"], 1),
        (&names_of["plain"], 1),
        (&names_of["registered"], 1),
    ]);
    let mut text = CONFIG.replace("{registry}", &registry.confluent_url());
    for (name, value) in &names_of {
        text = text.replace(&format!("{{{name}}}"), value);
    }
    let deployment = Deployment::new(&text);
    let mut process = deployment.start();
    let producer = TestProducer::new();
    let mut model: BTreeMap<i64, Value> = BTreeMap::new();
    // Rounds of inserts and updates, then deletes, each round its own commits.
    for round in 0..4_i64 {
        for id in 1..=10_i64 {
            if round == 3 && id % 3 == 0 {
                let mut row = model[&id].clone();
                row["op"] = json!("-D");
                producer.send(&names_of["input"], &id.to_string(), &row.to_string());
                model.remove(&id);
                continue;
            }
            let row = payment(id, round);
            let mut record = row.clone();
            record["op"] = json!("+I");
            producer.send(&names_of["input"], &id.to_string(), &record.to_string());
            model.insert(id, row);
        }
        producer.flush();
        std::thread::sleep(Duration::from_millis(400));
    }
    // The json topic is the table's changes: it replays to the model, in the table's
    // types (DECIMAL with its scale, TIMESTAMP as text).
    let mut json_topic = TopicReader::new(&names_of["json"]);
    json_topic.read_until("the json changelog replays to the model", |records| {
        replay(records).len() == model.len()
            && replay(records).keys().eq(model.keys())
            && records.iter().filter(|r| r.value["op"] == "-D").count() == 3
    });
    let replayed = replay(&json_topic.records);
    for (id, row) in &model {
        let got = &replayed[id];
        assert_eq!(got["amount"], row["amount"], "{got} vs {row}");
        assert_eq!(got["note"], row["note"], "{got} vs {row}");
        assert_eq!(got["qty"], row["qty"], "{got} vs {row}");
    }
    json_topic.drain(Duration::from_secs(1));
    let expected: Vec<Vec<Value>> = json_topic
        .records
        .iter()
        .map(|r| names().iter().map(|n| r.value[*n].clone()).collect())
        .collect();
    assert!(
        expected.iter().any(|row| row[8] == "-U") && expected.iter().any(|row| row[8] == "-D"),
        "updates and deletes: {expected:?}"
    );
    // Every changelog has produced as many records before Flink scans them.
    let count = expected.len();
    let mut plain_topic = TopicReader::new(&names_of["plain"]);
    plain_topic.read_at_least(count);
    let mut registered_topic = TopicReader::new(&names_of["registered"]);
    registered_topic.read_at_least(count);
    for topic in [&mut plain_topic, &mut registered_topic] {
        topic.drain(Duration::from_secs(1));
        assert_eq!(topic.records.len(), count, "one Avro record per change");
    }

    // apache-avro with the registered schemas: the same values, framed with the ids of
    // the topic's subjects.
    for (record, row) in registered_topic.records.iter().zip(&expected) {
        let value = confluent_avro(&registry, record.raw_value.as_deref().expect("a value"));
        let apache_avro::types::Value::Record(fields) = value else {
            panic!("not a record: {value:?}");
        };
        let got: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(got, names());
        assert_eq!(
            fields[0].1,
            apache_avro::types::Value::Long(row[0].as_i64().expect("id"))
        );
        assert_eq!(
            fields[8].1,
            apache_avro::types::Value::String(row[8].as_str().expect("op").into())
        );
        let key = confluent_avro(&registry, record.raw_key.as_deref().expect("a key"));
        assert_eq!(
            key,
            apache_avro::types::Value::Record(vec![(
                "id".into(),
                apache_avro::types::Value::Long(row[0].as_i64().expect("id"))
            )])
        );
    }
    let subjects = registry.subjects();
    for suffix in ["key", "value"] {
        let subject = format!("{}-{suffix}", names_of["registered"]);
        assert!(subjects.contains(&subject), "{subject} in {subjects:?}");
    }

    // Flink reads both topics with its own formats.
    let args: Vec<String> = [
        "--bootstrap".to_string(),
        broker::bootstrap(),
        "--registry".into(),
        registry.confluent_url(),
        "--columns".into(),
        COLUMNS.join(", "),
        "--key".into(),
        "id".into(),
        "--topic".into(),
        format!("plain={}:avro", names_of["plain"]),
        "--topic".into(),
        format!("registered={}:avro-confluent", names_of["registered"]),
    ]
    .into();
    let mut job = FlinkJob::start_script("read_avro_changes.py", &args);
    let lines = job.lines_until("DONE", Duration::from_secs(300));
    let mut read: BTreeMap<String, Vec<Vec<Value>>> = BTreeMap::new();
    for line in &lines {
        let (name, values) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("unexpected line {line:?} in {lines:?}"));
        read.entry(name.to_string())
            .or_default()
            .push(serde_json::from_str(values).expect("JSON values"));
    }
    for name in ["plain", "registered"] {
        let rows = read.get(name).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(rows.len(), count, "Flink read {name}: {rows:?}");
        for (i, (got, want)) in rows.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "record {i} of {name}");
        }
    }

    // A new field adds a column (the CDC pipeline's default `add_columns`): the value
    // schema's second version is registered, and the change carries the column.
    let value_subject = format!("{}-value", names_of["registered"]);
    assert_eq!(registry.versions(&value_subject), [1]);
    let mut row = payment(100, 0);
    row["channel"] = json!("web");
    row["op"] = json!("+I");
    producer.send(&names_of["input"], "100", &row.to_string());
    producer.flush();
    registered_topic.read_at_least(count + 1);
    let added = registered_topic.records.last().expect("the new change");
    let raw = added.raw_value.as_deref().expect("a value");
    let first = registered_topic.records[0]
        .raw_value
        .as_deref()
        .expect("a value");
    assert_ne!(raw[1..5], first[1..5], "a new schema id");
    let apache_avro::types::Value::Record(fields) = confluent_avro(&registry, raw) else {
        panic!("not a record");
    };
    let channel = fields.iter().find(|(n, _)| n == "channel");
    assert_eq!(
        channel.map(|(_, v)| v.clone()),
        Some(apache_avro::types::Value::Union(
            1,
            Box::new(apache_avro::types::Value::String("web".into()))
        )),
        "{fields:?}"
    );
    assert_eq!(registry.versions(&value_subject), [1, 2]);
    process.assert_alive();
    let log = process.terminate();
    assert!(log.contains("Avro schemas registered"), "{log}");
}
