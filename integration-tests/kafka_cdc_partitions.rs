//! What a CDC pipeline must not drop or skip silently, on Apache Kafka (issue 16, item 7):
//! a change whose `rowkind.field` holds no row kind, partitions added to a topic while
//! it runs, a saved position that retention deleted before it was read, and a position
//! whose snapshots snapshot expiry removed.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::broker::{self, Deployment, TestProducer, TopicReader, unique, wait_until};

const CONFIG: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.items"
columns = [
  { name = "id", type = "INT" },
  { name = "op", type = "STRING" },
  { name = "name", type = "STRING" },
]
primary_key = ["id"]
buckets = 1
options = { "rowkind.field" = "op" }

[[cdc]]
name = "items-cdc"
topics = ["{items}"]
format = "json"
table = "shop.items"
commit_interval = "200ms"
dead_letter_topic = "{dlq}"
partition_discovery_interval = "1s"
{extra}
"#;

struct Setup {
    items: String,
    dlq: String,
    /// The pipeline's consumer group.
    group: String,
    deployment: Deployment,
}

fn setup(partitions: i32, extra: &str) -> Setup {
    let items = unique("items");
    let dlq = unique("items-dlq");
    broker::create_topics(&[(&items, partitions), (&dlq, 1)]);
    let group = unique("group");
    let config = CONFIG
        .replace("{group}", &group)
        .replace("{items}", &items)
        .replace("{dlq}", &dlq)
        .replace("{extra}", extra);
    Setup {
        deployment: Deployment::new(&config),
        items,
        dlq,
        group: format!("{group}-items-cdc"),
    }
}

fn item(id: i64, op: &str, name: &str) -> String {
    json!({"id": id, "op": op, "name": name}).to_string()
}

fn row(id: i64, name: &str) -> Value {
    json!({"id": id, "op": "+I", "name": name})
}

/// `rowkind.field` names the column holding each change's kind. A value that is none
/// (`X`) is a bad record: it goes to the dead-letter topic with the reason, and the
/// changes around it are applied. (It was only logged, its offset committed.)
#[test]
fn a_change_whose_rowkind_field_is_no_row_kind_is_dead_lettered() {
    let s = setup(1, "");
    let producer = TestProducer::new();
    producer.send(&s.items, "1", &item(1, "+I", "one"));
    producer.send(&s.items, "2", &item(2, "X", "bad"));
    producer.send(&s.items, "3", &item(3, "+I", "three"));
    producer.send(&s.items, "1", &item(1, "-D", "one"));
    producer.flush();
    let process = s.deployment.start();
    s.deployment
        .wait_for_table("shop.items", &[row(3, "three")]);
    let mut dead = TopicReader::new(&s.dlq);
    let letters = dead.read_at_least(1).to_vec();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].value["id"], 2, "{letters:?}");
    let reason = &letters[0].headers["lakejoin.error"];
    assert!(
        reason.contains("rowkind.field") && reason.contains("\"X\""),
        "{reason}"
    );
    process.terminate();
}

/// Partitions added to the topic while the pipeline runs are found within the discovery
/// interval, read from their beginning, and show in the lag metric.
#[test]
fn partitions_added_while_running_are_read_and_measured() {
    let s = setup(1, "");
    let producer = TestProducer::new();
    producer.send_to(&s.items, 0, "1", &item(1, "+I", "one"));
    producer.flush();
    let mut process = s.deployment.start();
    let address = process.endpoint();
    s.deployment.wait_for_table("shop.items", &[row(1, "one")]);

    broker::add_partitions(&s.items, 3);
    // A producer that knows the new partitions.
    let producer = TestProducer::new();
    producer.send_to(&s.items, 1, "2", &item(2, "+I", "two"));
    producer.send_to(&s.items, 2, "3", &item(3, "+I", "three"));
    producer.send_to(&s.items, 2, "4", &item(4, "+I", "four"));
    producer.flush();
    s.deployment.wait_for_table(
        "shop.items",
        &[
            row(1, "one"),
            row(2, "two"),
            row(3, "three"),
            row(4, "four"),
        ],
    );
    wait_until("the new partitions in lakejoin_consumer_lag", || {
        broker::http_get(address, "/metrics").is_some_and(|(_, body)| {
            (0..3).all(|p| {
                let series = format!(
                    "lakejoin_consumer_lag{{pipeline=\"items-cdc\",topic=\"{}\",partition=\"{p}\"}}",
                    s.items
                );
                broker::metric(&body, &series) == Some(0.0)
            })
        })
    });
    process.assert_alive();
    process.terminate();
}

/// The pipeline stops; retention then deletes records it never read (offsets 2 and 3),
/// and it starts again. Resuming would skip them silently; it refuses, naming the
/// partition and the gap, and exits. With `on_offset_out_of_range = "earliest"` it
/// accepts the loss and goes on from the log's start.
#[test]
fn a_saved_position_retention_deleted_stops_the_pipeline_unless_accepted() {
    let s = setup(1, "");
    let producer = TestProducer::new();
    producer.send(&s.items, "1", &item(1, "+I", "one"));
    producer.send(&s.items, "2", &item(2, "+I", "two"));
    producer.flush();
    let process = s.deployment.start();
    s.deployment
        .wait_for_table("shop.items", &[row(1, "one"), row(2, "two")]);
    process.terminate();

    producer.send(&s.items, "3", &item(3, "+I", "lost"));
    producer.send(&s.items, "4", &item(4, "+I", "lost"));
    producer.send(&s.items, "5", &item(5, "+I", "five"));
    producer.flush();
    broker::delete_records_before(&s.items, 0, 4);

    let mut refused = s.deployment.start();
    let status = refused
        .wait_exit(Duration::from_secs(90))
        .unwrap_or_else(|| panic!("lakejoin kept running:\n{}", refused.log_text()));
    assert_eq!(status.code(), Some(2), "{}", refused.log_text());
    let log = refused.log_text();
    let partition = format!("topic {} partition 0", s.items);
    for part in [
        partition.as_str(),
        "offset 2",
        "offsets 2..4 were deleted",
        "on_offset_out_of_range",
    ] {
        assert!(log.contains(part), "{part:?} not in the log:\n{log}");
    }
    assert_eq!(
        s.deployment.scan("shop.items"),
        Some(vec![row(1, "one"), row(2, "two")])
    );

    let config = std::fs::read_to_string(&s.deployment.config).expect("config");
    std::fs::write(
        &s.deployment.config,
        config.replace(
            "partition_discovery_interval = \"1s\"",
            "partition_discovery_interval = \"1s\"\non_offset_out_of_range = \"earliest\"",
        ),
    )
    .expect("config");
    let accepted = s.deployment.start();
    s.deployment.wait_for_table(
        "shop.items",
        &[row(1, "one"), row(2, "two"), row(5, "five")],
    );
    accepted.terminate();
}

/// Runs `lakejoin table <args>` on the deployment's warehouse, with `stdin`.
fn table_command(s: &Setup, args: &[&str], stdin: &str) {
    let mut command = std::process::Command::new(support::lakejoin_bin());
    command.arg("table").args(args).args([
        "--warehouse",
        &s.deployment.warehouse(),
        "--table",
        "shop.items",
    ]);
    let output = support::run(command, stdin);
    assert!(
        output.status.success(),
        "lakejoin table {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The pipeline stops; another committer (here `lakejoin table write`; a Java job or a
/// second lakejoin alike) commits, and expiry removes every snapshot the pipeline wrote,
/// so the table no longer says where it stopped. It resumes from its consumer group's
/// offsets, which lakejoin set after its commit: with `start_from = "latest"` the change
/// made while it was stopped would otherwise be skipped, with `earliest` all replayed.
/// The pipeline's only commit is its last, made as it stops (`commit_interval` is an
/// hour): that one is mirrored too.
#[test]
fn a_writer_whose_snapshots_all_expired_resumes_from_its_consumer_group() {
    let s = setup(1, "");
    let config = std::fs::read_to_string(&s.deployment.config).expect("config");
    let hourly = config.replace("commit_interval = \"200ms\"", "commit_interval = \"1h\"");
    std::fs::write(&s.deployment.config, &hourly).expect("config");
    let producer = TestProducer::new();
    producer.send(&s.items, "1", &item(1, "+I", "one"));
    producer.send(&s.items, "2", &item(2, "+I", "two"));
    producer.flush();
    let mut process = s.deployment.start();
    let address = process.endpoint();
    wait_until("both changes consumed", || {
        broker::http_get(address, "/metrics").is_some_and(|(_, body)| {
            broker::metric(
                &body,
                "lakejoin_records_consumed_total{pipeline=\"items-cdc\",kind=\"cdc\"}",
            ) == Some(2.0)
        })
    });
    assert_eq!(s.deployment.snapshot_count("shop.items"), 0);
    process.terminate();
    assert_eq!(
        s.deployment.scan("shop.items"),
        Some(vec![row(1, "one"), row(2, "two")])
    );
    assert_eq!(
        broker::committed_offsets(&s.group, &s.items, 1),
        vec![Some(2)],
        "the commit made at the stop is in the consumer group"
    );

    for id in [8, 9] {
        table_command(&s, &["write"], &item(id, "+I", "other"));
    }
    table_command(
        &s,
        &[
            "expire",
            "--retain-min",
            "1",
            "--retain-max",
            "1",
            "--older-than",
            "0s",
        ],
        "",
    );
    producer.send(&s.items, "3", &item(3, "+I", "three"));
    producer.flush();

    std::fs::write(
        &s.deployment.config,
        config.replace(
            "partition_discovery_interval = \"1s\"",
            "partition_discovery_interval = \"1s\"\nstart_from = \"latest\"",
        ),
    )
    .expect("config");
    let mut resumed = s.deployment.start();
    s.deployment.wait_for_table(
        "shop.items",
        &[
            row(1, "one"),
            row(2, "two"),
            row(3, "three"),
            row(8, "other"),
            row(9, "other"),
        ],
    );
    resumed.wait_for_log("resuming from the offsets the consumer group holds");
    resumed.terminate();
}
