//! `[[changelog]]` end to end on librdkafka's in-process mock cluster: two CDC streams
//! fill a partial-update table with `changelog-producer = lookup`, and its changelog
//! pipeline produces the merged rows' changes as Debezium JSON. The topic, replayed, is
//! the model's merged rows; every before image is the row the topic had given for its
//! key; the position is a Paimon consumer file, and a restart resumes there without
//! producing anything twice. `start_from = "latest"` skips the history; a start before
//! what expiry left is refused with what to do.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::table::datum::Datum;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::ObjectStoreExt;
use rdkafka::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::FutureProducer;
use serde_json::{Value, json};

use crate::support::topics;

const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "it"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.user_wide"
columns = [
  { name = "user_id", type = "INT" },
  { name = "name", type = "STRING" },
  { name = "vip", type = "INT" },
]
primary_key = ["user_id"]
buckets = 2
merge_engine = "partial-update"
options = { "changelog-producer" = "lookup" }

[[cdc]]
name = "basics"
topics = ["basics"]
format = "json"
table = "shop.user_wide"
commit_interval = "200ms"

[[cdc]]
name = "vip"
topics = ["vip"]
format = "json"
table = "shop.user_wide"
commit_interval = "200ms"
"#;

const CHANGELOG: &str = r#"
[[changelog]]
name = "wide-out"
table = "shop.user_wide"
topic = "user_wide_changes"
discovery_interval = "100ms"
"#;

/// The merged rows by `user_id`: what the partial-update table holds.
type Model = BTreeMap<i64, Value>;

/// Applies one input to the model as partial-update merges it (non-null fields win).
fn merge(model: &mut Model, input: &Value) {
    let id = input["user_id"].as_i64().unwrap();
    let row = model
        .entry(id)
        .or_insert_with(|| json!({"user_id": id, "name": null, "vip": null}));
    for column in ["name", "vip"] {
        if !input[column].is_null() {
            row[column] = input[column].clone();
        }
    }
}

/// The changelog topic replayed: each `c`/`u` sets its key's row, each `d` removes it,
/// tombstones are skipped. Panics when a change contradicts the replay so far: a `c`
/// for a key that has a row, or a `u`/`d` whose before image is not the row replayed.
fn replay(records: &[(Value, Option<Value>)]) -> Model {
    let mut state = Model::new();
    for (key, value) in records {
        let Some(value) = value else { continue };
        let id = key["user_id"].as_i64().unwrap();
        assert_eq!(
            value["after"]["user_id"]
                .as_i64()
                .or(value["before"]["user_id"].as_i64()),
            Some(id)
        );
        match value["op"].as_str().unwrap() {
            "c" => {
                assert!(!state.contains_key(&id), "insert of a present key: {value}");
                state.insert(id, value["after"].clone());
            }
            "u" => {
                assert_eq!(
                    state.get(&id),
                    Some(&value["before"]),
                    "before image: {value}"
                );
                state.insert(id, value["after"].clone());
            }
            "d" => {
                assert_eq!(
                    state.remove(&id).as_ref(),
                    Some(&value["before"]),
                    "{value}"
                );
            }
            op => panic!("unexpected op {op}"),
        }
    }
    state
}

async fn send(producer: &FutureProducer, topic: &str, payload: &Value) {
    topics::send(
        producer,
        topic,
        &payload["user_id"].to_string(),
        &payload.to_string(),
    )
    .await;
}

/// Reads `topic` from its start until `done` holds for what arrived (deadline 60 s): each
/// record's JSON key and JSON payload (none for a tombstone).
async fn read_until(
    bootstrap: &str,
    topic: &str,
    done: impl Fn(&[(Value, Option<Value>)]) -> bool,
) -> Vec<(Value, Option<Value>)> {
    let decode = |m: &BorrowedMessage<'_>| {
        let key = serde_json::from_slice(m.key().expect("a key")).expect("a JSON key");
        let value = m
            .payload()
            .map(|p| serde_json::from_slice(p).expect("a JSON payload"));
        (key, value)
    };
    let mut out = Vec::new();
    let consumer = topics::reader(bootstrap, topic);
    topics::read_until(&consumer, topic, &mut out, decode, done).await;
    out
}

/// How many records `topic` holds (the sum of its partitions' high watermarks).
fn records_in(bootstrap: &str, topic: &str) -> i64 {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "watermarks")
        .create()
        .unwrap();
    (0..2)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap()
                .1
        })
        .sum()
}

/// Waits until the consumer file of `wide-out` says the next snapshot is the one after
/// the table's latest, and returns its text.
async fn wait_caught_up(warehouse: &Warehouse) -> String {
    let id = TableIdentifier::parse("shop.user_wide").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let table = Table::open(warehouse, &id).await.unwrap();
        let latest = table.latest_snapshot_id().await.unwrap().unwrap_or(0);
        let path = table.path_of("consumer/consumer-wide-out");
        if let Ok(got) = table.store().get(&path).await {
            let text = String::from_utf8(got.bytes().await.unwrap().to_vec()).unwrap();
            if text == format!("{{\n  \"nextSnapshot\" : {}\n}}", latest + 1) {
                return text;
            }
        }
        assert!(Instant::now() < deadline, "the changelog never caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_update_tables_merged_changes_reach_kafka_and_a_restart_resumes() {
    let cluster = MockCluster::new(1).unwrap();
    for t in ["basics", "vip", "user_wide_changes"] {
        cluster.create_topic(t, 2, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let text = CONFIG
        .replace("{bootstrap}", &bootstrap)
        .replace("{warehouse}", &dir.path().display().to_string());
    let config = lakejoin::config::from_toml("test", &format!("{text}{CHANGELOG}")).unwrap();
    let sink_only = lakejoin::config::from_toml("test", &text).unwrap();
    let warehouse = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();

    let mut model = Model::new();
    let running = lakejoin::pipeline::start(config.clone()).await.unwrap();
    let first = [
        ("basics", json!({"user_id": 1, "name": "ada"})),
        ("basics", json!({"user_id": 2, "name": "bo"})),
        ("vip", json!({"user_id": 1, "vip": 3})),
        ("vip", json!({"user_id": 3, "vip": 1})),
        ("basics", json!({"user_id": 1, "name": "ada l."})),
    ];
    for (topic, input) in &first {
        send(&producer, topic, input).await;
        merge(&mut model, input);
        // Some changes in commits of their own, so updates follow inserts.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let expected = model.clone();
    let out = read_until(&bootstrap, "user_wide_changes", |r| replay(r) == expected).await;
    assert!(
        out.iter().any(|(_, v)| v
            .as_ref()
            .is_some_and(|v| v["op"] == "u" && !v["before"].is_null())),
        "updates carry their before image: {out:#?}"
    );
    let consumer = wait_caught_up(&warehouse).await;
    running.shutdown().await.unwrap();
    let produced = records_in(&bootstrap, "user_wide_changes");

    // Changes while the pipeline is down are produced after the restart, once.
    let second = [
        ("vip", json!({"user_id": 2, "vip": 5})),
        ("basics", json!({"user_id": 4, "name": "dee"})),
    ];
    let writer = lakejoin::pipeline::start(sink_only).await.unwrap();
    for (topic, input) in &second {
        send(&producer, topic, input).await;
        merge(&mut model, input);
    }
    let id = TableIdentifier::parse("shop.user_wide").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let table = Table::open(&warehouse, &id).await.unwrap();
        let rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
        if rows.len() == 4 && rows.iter().any(|r| r[2] == Datum::Int(5)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the table never took the second changes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    writer.shutdown().await.unwrap();
    let table = Table::open(&warehouse, &id).await.unwrap();
    let held = table
        .store()
        .get(&table.path_of("consumer/consumer-wide-out"))
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(held.bytes().await.unwrap().to_vec()).unwrap(),
        consumer,
        "without its pipeline the consumer stays where it was"
    );

    let running = lakejoin::pipeline::start(config).await.unwrap();
    let expected = model.clone();
    let all = read_until(&bootstrap, "user_wide_changes", |r| replay(r) == expected).await;
    wait_caught_up(&warehouse).await;
    running.shutdown().await.unwrap();
    assert_eq!(
        records_in(&bootstrap, "user_wide_changes"),
        produced + 2,
        "after a clean stop the restart produces only the new changes: {all:#?}"
    );
    assert_eq!(replay(&all), model);
}

/// Where a pipeline without a consumer starts: `latest` produces only what is committed
/// after it started; a snapshot id that expiry already removed stops the pipeline with a
/// message naming the snapshot, the oldest one left and what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_from_latest_skips_history_and_an_expired_start_is_refused_clearly() {
    use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
    let cluster = MockCluster::new(1).unwrap();
    for t in ["basics", "vip", "user_wide_changes"] {
        cluster.create_topic(t, 2, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    // One snapshot retained, and the changelog with it (its retention follows).
    let text = CONFIG
        .replace("{bootstrap}", &bootstrap)
        .replace("{warehouse}", &dir.path().display().to_string())
        .replace(
            r#"options = { "changelog-producer" = "lookup" }"#,
            r#"options = { "changelog-producer" = "lookup", "snapshot.num-retained.min" = "1", "snapshot.num-retained.max" = "1", "snapshot.time-retained" = "1 ms" }"#,
        );
    let warehouse = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let id = TableIdentifier::parse("shop.user_wide").unwrap();
    let writer = lakejoin::pipeline::start(lakejoin::config::from_toml("test", &text).unwrap())
        .await
        .unwrap();
    for user in 1..=3 {
        send(
            &producer,
            "basics",
            &json!({"user_id": user, "name": "old"}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while scan(
        &Table::open(&warehouse, &id).await.unwrap(),
        None,
        &ScanFilter::default(),
    )
    .await
    .unwrap()
    .len()
        < 3
    {
        assert!(Instant::now() < deadline, "the table never got three rows");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    writer.shutdown().await.unwrap();
    let table = Table::open(&warehouse, &id).await.unwrap();
    let latest = table.latest_snapshot_id().await.unwrap().unwrap();
    assert!(latest >= 2, "several snapshots: {latest}");
    tokio::time::sleep(Duration::from_millis(5)).await;
    let config = ExpireConfig::from_options(&table.options().maintenance);
    expire_snapshots(&table, &config).await.unwrap();
    assert!(table.snapshot(1).await.is_err(), "snapshot 1 expired");

    // A start before the table's history: refused, nothing produced.
    let expired = format!("{text}{CHANGELOG}start_from = 1\n");
    let running = lakejoin::pipeline::start(lakejoin::config::from_toml("test", &expired).unwrap())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let err = loop {
        let ready = running.registry().readiness();
        if let Err(reasons) = ready
            && let Some(reason) = reasons.iter().find(|r| r.contains("wide-out stopped"))
        {
            break reason.clone();
        }
        assert!(Instant::now() < deadline, "the pipeline never stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        err.contains("snapshot 1 of shop.user_wide can no longer be read")
            && err.contains(&format!("the oldest snapshot is {latest}"))
            && err.contains("consumer/consumer-wide-out"),
        "{err}"
    );
    assert!(running.shutdown().await.is_err());
    assert_eq!(records_in(&bootstrap, "user_wide_changes"), 0);
    // The consumer it recorded at start is removed again for the next case.
    table
        .store()
        .delete(&table.path_of("consumer/consumer-wide-out"))
        .await
        .unwrap();

    // `latest`: only the changes committed after the start.
    let latest_text = format!("{text}{CHANGELOG}start_from = \"latest\"\n");
    let running =
        lakejoin::pipeline::start(lakejoin::config::from_toml("test", &latest_text).unwrap())
            .await
            .unwrap();
    // The start is recorded before anything new is committed.
    let deadline = Instant::now() + Duration::from_secs(30);
    let recorded = format!("{{\n  \"nextSnapshot\" : {}\n}}", latest + 1);
    loop {
        let path = table.path_of("consumer/consumer-wide-out");
        if let Ok(got) = table.store().get(&path).await
            && got.bytes().await.unwrap() == recorded.as_bytes()
        {
            break;
        }
        assert!(Instant::now() < deadline, "no consumer recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    send(&producer, "vip", &json!({"user_id": 2, "vip": 7})).await;
    let out = read_until(&bootstrap, "user_wide_changes", |r| !r.is_empty()).await;
    running.shutdown().await.unwrap();
    assert_eq!(out.len(), 1, "{out:?}");
    let change = out[0].1.as_ref().unwrap();
    assert_eq!(change["op"], "u");
    assert_eq!(
        change["before"],
        json!({"user_id": 2, "name": "old", "vip": null})
    );
    assert_eq!(
        change["after"],
        json!({"user_id": 2, "name": "old", "vip": 7})
    );
}

/// A CDC pipeline adds a column mid-stream (a fact field the table lacks, with
/// `schema_evolution`'s default `add_columns`): the changelog pipeline reads the snapshots
/// of the new schema in it, so the changes carry the new column from then on, and the
/// rows before it read the column as null.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_mid_stream_reaches_the_changelog() {
    let cluster = MockCluster::new(1).unwrap();
    for t in ["basics", "vip", "user_wide_changes"] {
        cluster.create_topic(t, 2, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let text = CONFIG
        .replace("{bootstrap}", &bootstrap)
        .replace("{warehouse}", &dir.path().display().to_string());
    let config = lakejoin::config::from_toml("test", &format!("{text}{CHANGELOG}")).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let running = lakejoin::pipeline::start(config).await.unwrap();
    send(&producer, "basics", &json!({"user_id": 1, "name": "ada"})).await;
    read_until(&bootstrap, "user_wide_changes", |r| {
        r.iter()
            .any(|(_, v)| v.as_ref().is_some_and(|v| v["after"]["name"] == "ada"))
    })
    .await;
    send(
        &producer,
        "basics",
        &json!({"user_id": 2, "name": "bo", "city": "zug"}),
    )
    .await;
    // The update of user 1 only once the table has `city` (the basics topic has two
    // partitions: sent together, either could be committed first).
    read_until(&bootstrap, "user_wide_changes", |r| {
        r.iter()
            .any(|(_, v)| v.as_ref().is_some_and(|v| v["after"]["name"] == "bo"))
    })
    .await;
    send(
        &producer,
        "basics",
        &json!({"user_id": 1, "name": "ada l."}),
    )
    .await;
    let out = read_until(&bootstrap, "user_wide_changes", |r| {
        let has = |name: &str| {
            r.iter()
                .any(|(_, v)| v.as_ref().is_some_and(|v| v["after"]["name"] == name))
        };
        has("bo") && has("ada l.")
    })
    .await;
    running.shutdown().await.unwrap();
    let after = |name: &str| {
        out.iter()
            .filter_map(|(_, v)| v.as_ref())
            .find(|v| v["after"]["name"] == name)
            .map(|v| v["after"].clone())
            .unwrap_or_else(|| panic!("no change of {name}: {out:#?}"))
    };
    assert_eq!(
        after("bo"),
        json!({"user_id": 2, "name": "bo", "vip": null, "city": "zug"})
    );
    assert_eq!(
        after("ada l."),
        json!({"user_id": 1, "name": "ada l.", "vip": null, "city": null})
    );
}
