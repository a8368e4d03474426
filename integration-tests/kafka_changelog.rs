//! `[[changelog]]` pipelines on Apache Kafka (started by `scripts/test.sh`, or any broker
//! named by `KAFKA_BOOTSTRAP`), issue 19's seed scenarios:
//!
//! - the three-stream wide table (partial-update, `changelog-producer = lookup`) fed by
//!   CDC, looked up by an enrich pipeline, its changelog topic replayed equal to the
//!   model of the merged rows, every update's before image the row the topic gave;
//! - the GMV aggregation table's changelog: `-U/+U` of the sums, retractions included;
//! - `kill -9` of the changelog process mid-stream, again and again: nothing lost, and
//!   every duplicate a replay of the one snapshot in flight.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::broker::{self, Deployment, Record, TestProducer, TopicReader, unique};

/// A model of the table by key: the merged rows.
type Model = BTreeMap<String, Value>;

/// The changelog topic replayed onto an empty table: `c`/`u` set their key's row, `d`
/// removes it, tombstones only follow deletes. Panics when a record contradicts what the
/// topic gave before (a `c` of a present key, a before image that is not the row).
fn replay(records: &[&Record], key: &str) -> Model {
    let mut state = Model::new();
    for r in records {
        if r.value.is_null() {
            continue;
        }
        let v = &r.value;
        let image = if v["after"].is_null() {
            &v["before"]
        } else {
            &v["after"]
        };
        let id = image[key].to_string();
        let mut record_key = serde_json::Map::new();
        record_key.insert(key.to_string(), image[key].clone());
        assert_eq!(
            r.key
                .as_deref()
                .map(|k| serde_json::from_str::<Value>(k).unwrap()),
            Some(Value::Object(record_key)),
            "the record key is the primary key: {v}"
        );
        match v["op"].as_str() {
            Some("c") => {
                assert!(!state.contains_key(&id), "c of a present key: {v}");
                state.insert(id, v["after"].clone());
            }
            Some("u") => {
                assert_eq!(state.get(&id), Some(&v["before"]), "before image of {v}");
                state.insert(id, v["after"].clone());
            }
            Some("d") => {
                assert_eq!(state.remove(&id).as_ref(), Some(&v["before"]), "{v}");
            }
            other => panic!("op {other:?} in {v}"),
        }
    }
    state
}

/// The records of one partition in order, with the duplicates of replayed snapshots
/// removed. A restarted pipeline produces again the snapshot it was producing when it
/// died: the same records from that snapshot's first on. So a snapshot's records may
/// appear as several runs, each a prefix of the last one, the last one whole; the
/// snapshots of the runs otherwise only grow. Panics on anything else (a record lost
/// from a replay, a snapshot going back).
fn without_replays<'a>(records: &[&'a Record]) -> (Vec<&'a Record>, usize) {
    let snapshot = |r: &Record| r.value["source"]["snapshot"].as_i64();
    // Tombstones carry no source: they belong to the delete before them.
    let mut runs: Vec<(i64, Vec<&'a Record>)> = Vec::new();
    for &r in records {
        let id = match snapshot(r) {
            Some(id) => id,
            None => runs
                .last()
                .map(|(id, _)| *id)
                .expect("a tombstone after a delete"),
        };
        match runs.last_mut() {
            Some((last, run))
                if *last == id
                    && !(snapshot(r).is_some()
                        && r.value == run[0].value
                        && r.key == run[0].key) =>
            {
                run.push(r)
            }
            _ => runs.push((id, vec![r])),
        }
    }
    let mut out: Vec<&Record> = Vec::new();
    let mut duplicates = 0;
    let mut i = 0;
    while i < runs.len() {
        let id = runs[i].0;
        let mut j = i;
        while j + 1 < runs.len() && runs[j + 1].0 == id {
            j += 1;
        }
        let whole = &runs[j].1;
        for (_, run) in &runs[i..j] {
            let same = run.len() <= whole.len()
                && run
                    .iter()
                    .zip(whole)
                    .all(|(a, b)| a.key == b.key && a.value == b.value);
            assert!(
                same,
                "a replay of snapshot {id} is not a prefix of its last run"
            );
            duplicates += run.len();
        }
        if let Some(&(previous, _)) = i.checked_sub(1).and_then(|p| runs.get(p)) {
            assert!(
                previous < id,
                "snapshot {id} after {previous}: out of commit order"
            );
        }
        out.extend(whole.iter().copied());
        i = j + 1;
    }
    (out, duplicates)
}

/// Every record of `records` partition by partition (each partition's order kept).
fn by_partition(records: &[Record]) -> BTreeMap<i32, Vec<&Record>> {
    let mut out: BTreeMap<i32, Vec<&Record>> = BTreeMap::new();
    for r in records {
        out.entry(r.partition).or_default().push(r);
    }
    out
}

/// `replay` of a whole topic: a key's changes all lie in one partition.
fn replay_topic(records: &[Record], key: &str) -> Model {
    by_partition(records)
        .values()
        .flat_map(|p| replay(p, key))
        .collect()
}

const WIDE: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.user_wide"
columns = [
  { name = "user_id", type = "BIGINT" },
  { name = "name", type = "STRING" },
  { name = "vip_level", type = "INT" },
  { name = "orders", type = "BIGINT" },
]
primary_key = ["user_id"]
buckets = 2
merge_engine = "partial-update"
options = { "changelog-producer" = "lookup" }

[[cdc]]
name = "basics"
topics = ["{basics}"]
format = "json"
table = "shop.user_wide"
commit_interval = "300ms"

[[cdc]]
name = "vip"
topics = ["{vip}"]
format = "json"
table = "shop.user_wide"
commit_interval = "300ms"

[[cdc]]
name = "behaviour"
topics = ["{behaviour}"]
format = "json"
table = "shop.user_wide"
commit_interval = "300ms"

[[enrich]]
name = "clicks"
topics = ["{clicks}"]
output = { topic = "{enriched}" }

[[enrich.join]]
table = "shop.user_wide"
on = { user_id = "user_id" }
select = ["name", "vip_level"]
refresh_interval = "200ms"

[[changelog]]
name = "wide-out"
table = "shop.user_wide"
topic = "{changes}"
discovery_interval = "200ms"
"#;

/// The wide table: three streams, each filling its columns; the table's changelog on
/// Kafka is the model's merged rows, each update with the before image the topic had
/// given, and the enrich pipeline joins the same rows.
#[test]
fn the_three_stream_wide_tables_changelog_is_the_model_of_merged_rows() {
    let names: BTreeMap<&str, String> = [
        "basics",
        "vip",
        "behaviour",
        "clicks",
        "enriched",
        "changes",
        "group",
    ]
    .into_iter()
    .map(|n| (n, unique(n)))
    .collect();
    broker::create_topics(&[
        (&names["basics"], 2),
        (&names["vip"], 2),
        (&names["behaviour"], 2),
        (&names["clicks"], 1),
        (&names["enriched"], 1),
        (&names["changes"], 3),
    ]);
    let mut text = WIDE.to_string();
    for (name, value) in &names {
        text = text.replace(&format!("{{{name}}}"), value);
    }
    let deployment = Deployment::new(&text);
    let producer = TestProducer::new();
    let mut model = Model::new();
    let apply = |model: &mut Model, topic: &str, row: Value| {
        producer.send(&names[topic], &row["user_id"].to_string(), &row.to_string());
        let id = row["user_id"].to_string();
        let merged = model.entry(id).or_insert_with(
            || json!({"user_id": row["user_id"], "name": null, "vip_level": null, "orders": null}),
        );
        for (column, value) in row.as_object().unwrap() {
            if !value.is_null() {
                merged[column] = value.clone();
            }
        }
    };
    let mut process = deployment.start();
    // Rounds of changes, each flushed, so later rounds update rows earlier commits made.
    for round in 0..6_i64 {
        for user in 1..=8_i64 {
            match (round + user) % 3 {
                0 => apply(
                    &mut model,
                    "basics",
                    json!({"user_id": user, "name": format!("user {user} r{round}")}),
                ),
                1 => apply(
                    &mut model,
                    "vip",
                    json!({"user_id": user, "vip_level": round}),
                ),
                _ => apply(
                    &mut model,
                    "behaviour",
                    json!({"user_id": user, "orders": round * 10 + user}),
                ),
            }
        }
        producer.flush();
        std::thread::sleep(Duration::from_millis(400));
    }
    let expected = model.clone();
    let mut changes = TopicReader::new(&names["changes"]);
    changes.read_until("the topic replays to the model", |r| {
        replay_topic(r, "user_id") == expected
    });
    let updates = changes
        .records
        .iter()
        .filter(|r| r.value["op"] == "u" && !r.value["before"].is_null())
        .count();
    assert!(
        updates > 0,
        "updates carry before images: {:#?}",
        changes.records
    );
    // The same rows are what the enrich pipeline joins.
    producer.send(
        &names["clicks"],
        "3",
        &json!({"click": 1, "user_id": 3}).to_string(),
    );
    producer.flush();
    let mut enriched = TopicReader::new(&names["enriched"]);
    enriched.read_at_least(1);
    let row = &model[&3.to_string()];
    assert_eq!(enriched.records[0].value["name"], row["name"]);
    assert_eq!(enriched.records[0].value["vip_level"], row["vip_level"]);
    process.assert_alive();
    let log = process.terminate();
    assert!(log.contains("changelog starts"), "{log}");
    // Nothing was produced twice: a clean run has no replay.
    changes.drain(Duration::from_secs(1));
    for records in by_partition(&changes.records).values() {
        let (_, duplicates) = without_replays(records);
        assert_eq!(duplicates, 0);
    }
}

const GMV: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.gmv"
columns = [
  { name = "dt", type = "STRING" },
  { name = "gmv", type = "BIGINT" },
  { name = "orders", type = "BIGINT" },
]
primary_key = ["dt"]
buckets = 1
merge_engine = "aggregation"
options = { "changelog-producer" = "lookup", "fields.gmv.aggregate-function" = "sum", "fields.orders.aggregate-function" = "sum" }

[[cdc]]
name = "orders"
topics = ["{orders}"]
format = "json"
row_kind_field = "op"
table = "shop.gmv"
commit_interval = "300ms"

[[changelog]]
name = "gmv-out"
table = "shop.gmv"
topic = "{changes}"
format = "json"
discovery_interval = "200ms"
"#;

/// The GMV table: orders (and cancellations, retracting their amount) summed per day;
/// its changelog, in `json` format, is `+I` for a new day and `-U`/`+U` of the sums,
/// each `-U` the sums the topic last gave.
#[test]
fn the_gmv_aggregation_tables_changelog_is_the_model_of_sums() {
    let (orders, changes, group) = (unique("orders"), unique("gmv-changes"), unique("gmv"));
    broker::create_topics(&[(&orders, 2), (&changes, 1)]);
    let text = GMV
        .replace("{orders}", &orders)
        .replace("{changes}", &changes)
        .replace("{group}", &group);
    let deployment = Deployment::new(&text);
    let producer = TestProducer::new();
    let process = deployment.start();
    let mut sums: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for round in 0..5_i64 {
        for order in 0..6_i64 {
            let dt = format!("2026-12-0{}", 1 + (order + round) % 3);
            let amount = 100 * round + order + 1;
            // Every fourth order is cancelled again in the same round: a retraction.
            let cancelled = order % 4 == 3;
            let mut send = |op: &str, sign: i64| {
                let row = json!({"op": op, "dt": dt, "gmv": amount, "orders": 1});
                producer.send(&orders, &dt, &row.to_string());
                let sum = sums.entry(dt.clone()).or_default();
                sum.0 += sign * amount;
                sum.1 += sign;
            };
            send("+I", 1);
            if cancelled {
                send("-U", -1);
            }
        }
        producer.flush();
        std::thread::sleep(Duration::from_millis(400));
    }
    let expected: BTreeMap<String, Value> = sums
        .iter()
        .map(|(dt, (gmv, n))| (dt.clone(), json!({"dt": dt, "gmv": gmv, "orders": n})))
        .collect();
    let mut topic = TopicReader::new(&changes);
    // json: +I sets a day's sums, -U must be the sums held, +U sets the new ones.
    let sums_of = |records: &[Record]| -> BTreeMap<String, Value> {
        let mut state: BTreeMap<String, Value> = BTreeMap::new();
        for r in records {
            let mut row = r.value.clone();
            let op = row.as_object_mut().unwrap().remove("op").unwrap();
            let dt = row["dt"].as_str().unwrap().to_string();
            match op.as_str().unwrap() {
                "+I" => assert!(state.insert(dt, row).is_none(), "+I of a held day"),
                "-U" | "-D" => {
                    assert_eq!(state.remove(&dt), Some(row), "a retraction of other sums")
                }
                "+U" => {
                    assert!(!state.contains_key(&dt), "+U without its -U");
                    state.insert(dt, row);
                }
                other => panic!("op {other}"),
            }
        }
        state
    };
    topic.read_until("the sums equal the model's", |r| sums_of(r) == expected);
    assert!(
        topic.records.iter().any(|r| r.value["op"] == "-U"),
        "the sums changed with -U/+U"
    );
    process.terminate();
}

const KILLED: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.user_wide"
columns = [
  { name = "user_id", type = "BIGINT" },
  { name = "name", type = "STRING" },
  { name = "vip_level", type = "INT" },
]
primary_key = ["user_id"]
buckets = 2
merge_engine = "partial-update"
options = { "changelog-producer" = "lookup" }
"#;

/// The changelog pipeline runs in a process of its own, killed with SIGKILL mid-stream
/// again and again while the CDC writer (another process) keeps committing: at the end
/// the topic, with replayed snapshots removed, is the model's rows, each replayed run a
/// prefix of the snapshot's records and the snapshots in commit order; the consumer file
/// is where the topic ends.
#[test]
fn a_killed_changelog_pipeline_loses_nothing_and_replays_only_the_snapshot_in_flight() {
    let (basics, vip, changes, group) = (
        unique("k-basics"),
        unique("k-vip"),
        unique("k-changes"),
        unique("k"),
    );
    broker::create_topics(&[(&basics, 2), (&vip, 2), (&changes, 1)]);
    let base = KILLED.replace("{group}", &group);
    let writer = Deployment::new(&format!(
        "{base}\n[[cdc]]\nname = \"basics\"\ntopics = [\"{basics}\"]\nformat = \"json\"\n\
         table = \"shop.user_wide\"\ncommit_interval = \"100ms\"\n\n\
         [[cdc]]\nname = \"vip\"\ntopics = [\"{vip}\"]\nformat = \"json\"\n\
         table = \"shop.user_wide\"\ncommit_interval = \"100ms\"\n"
    ));
    // The changelog process reads the writer's warehouse.
    let shared = writer.dir.path().join("wh");
    let reader = Deployment::new(
        &format!(
            "{base}\n[[changelog]]\nname = \"wide-out\"\ntable = \"shop.user_wide\"\n\
             topic = \"{changes}\"\ndiscovery_interval = \"50ms\"\n"
        )
        .replace("{warehouse}", &shared.display().to_string()),
    );
    let writing = writer.start();
    let model = Arc::new(std::sync::Mutex::new(Model::new()));
    let done = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (model, done, basics, vip) = (model.clone(), done.clone(), basics.clone(), vip.clone());
        std::thread::spawn(move || {
            let producer = TestProducer::new();
            let mut n = 0_i64;
            while !done.load(Ordering::SeqCst) {
                n += 1;
                let user = n % 13;
                let (topic, row) = if n % 2 == 0 {
                    (&basics, json!({"user_id": user, "name": format!("n{n}")}))
                } else {
                    (&vip, json!({"user_id": user, "vip_level": n}))
                };
                producer.send(topic, &user.to_string(), &row.to_string());
                let mut model = model.lock().unwrap();
                let merged = model
                    .entry(user.to_string())
                    .or_insert_with(|| json!({"user_id": user, "name": null, "vip_level": null}));
                for (column, value) in row.as_object().unwrap() {
                    merged[column] = value.clone();
                }
                drop(model);
                if n % 20 == 0 {
                    producer.flush();
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
            producer.flush();
        })
    };
    let mut topic = TopicReader::new(&changes);
    for kill in 0..8 {
        let process = reader.start();
        // Mid-stream: after a few new records of this run arrived (how many varies, so
        // kills land inside snapshots and between them).
        // Each run gets past the snapshots produced before it (replays do not count).
        let snapshot = |r: &Record| r.value["source"]["snapshot"].as_i64().unwrap_or(0);
        let produced = topic.records.iter().map(snapshot).max().unwrap_or(0);
        let more = 3 + 7 * (kill % 3);
        topic.read_until(&format!("new snapshots after restart {kill}"), |r| {
            r.iter().filter(|r| snapshot(r) > produced).count() > more
        });
        process.kill_9();
    }
    done.store(true, Ordering::SeqCst);
    feeder.join().unwrap();
    let expected = model.lock().unwrap().clone();
    let mut rows: Vec<Value> = expected.values().cloned().collect();
    rows.sort_by_key(|r| r["user_id"].as_i64());
    writer.wait_for_table("shop.user_wide", &rows);
    writing.terminate();
    let last = reader.start();
    let deadline = Instant::now() + Duration::from_secs(120);
    let (records, duplicates) = loop {
        topic.poll_for(Duration::from_millis(300));
        let all: Vec<&Record> = topic.records.iter().collect();
        let (records, duplicates) = without_replays(&all);
        if replay(&records, "user_id") == expected {
            break (records.len(), duplicates);
        }
        assert!(
            Instant::now() < deadline,
            "the topic never replayed to the model"
        );
    };
    // The consumer file ends up naming the snapshot after the table's last one.
    let table_dir = shared.join("shop.db/user_wide");
    let latest: i64 = std::fs::read_to_string(table_dir.join("snapshot/LATEST"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let caught_up = format!("{{\n  \"nextSnapshot\" : {}\n}}", latest + 1);
    broker::wait_until("the consumer is past the last snapshot", || {
        std::fs::read_to_string(table_dir.join("consumer/consumer-wide-out"))
            .is_ok_and(|text| text == caught_up)
    });
    last.terminate();
    eprintln!(
        "{records} changes in {} records, {duplicates} produced again after the kills; \
         the consumer at {}",
        topic.records.len(),
        latest + 1
    );
}
