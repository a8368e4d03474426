//! Administration of the test broker: creating, growing and deleting topics, deleting
//! records as retention does, ACLs and other tools of Apache Kafka's own, and reading
//! watermarks, a group's committed offsets and its members. All blocking, so a test reads
//! as a sequence of steps; what they create is visible before they return.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::{bootstrap, wait_until};

/// An admin client of the broker at `bootstrap`.
fn admin_client(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

/// A runtime for the admin client's futures (the helpers here are blocking).
fn admin_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Creates the topics (`(name, partitions)`) and waits until their metadata is visible.
pub fn create_topics(topics: &[(&str, i32)]) {
    create_topics_on(&bootstrap(), topics);
}

/// [`create_topics`] on the broker at `bootstrap`.
pub fn create_topics_on(bootstrap: &str, topics: &[(&str, i32)]) {
    let bootstrap = bootstrap.to_owned();
    let admin = admin_client(&bootstrap);
    let new_topics: Vec<NewTopic> = topics
        .iter()
        .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1)))
        .collect();
    let runtime = admin_runtime();
    let results = runtime
        .block_on(admin.create_topics(
            &new_topics,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .unwrap_or_else(|e| panic!("creating topics {topics:?} on {bootstrap}: {e}"));
    for result in results {
        if let Err((topic, code)) = result {
            panic!("creating topic {topic} on {bootstrap}: {code:?}");
        }
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .expect("metadata client");
    for (name, partitions) in topics {
        wait_until(&format!("topic {name} has {partitions} partitions"), || {
            consumer
                .fetch_metadata(Some(name), Duration::from_secs(5))
                .ok()
                .and_then(|m| {
                    m.topics().iter().find(|t| t.name() == *name).map(|t| {
                        t.error().is_none() && t.partitions().len() == *partitions as usize
                    })
                })
                .unwrap_or(false)
        });
    }
}

/// Creates one topic with topic-level configs (`max.message.bytes`, …).
pub fn create_topic_with_config(name: &str, partitions: i32, configs: &[(&str, &str)]) {
    let bootstrap = bootstrap();
    let admin = admin_client(&bootstrap);
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let runtime = admin_runtime();
    let results = runtime
        .block_on(admin.create_topics(
            [&topic],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .unwrap_or_else(|e| panic!("creating topic {name} on {bootstrap}: {e}"));
    for result in results {
        if let Err((topic, code)) = result {
            panic!("creating topic {topic} on {bootstrap}: {code:?}");
        }
    }
}

/// Runs Kafka's own `kafka-acls` tool (`org.apache.kafka.tools.AclCommand`, from the jars
/// `scripts/kafka/broker.sh` installed) against the PLAINTEXT listener, whose anonymous
/// principal is a super user; `args` as `kafka-acls.sh` takes them after the bootstrap.
pub fn kafka_acls(args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka/broker.sh");
    let install = Command::new("bash")
        .arg(&script)
        .arg("install")
        .output()
        .expect("broker.sh install");
    let libs = String::from_utf8_lossy(&install.stdout).trim().to_owned();
    let output = Command::new("java")
        .arg("-cp")
        .arg(format!("{libs}/*"))
        .arg("org.apache.kafka.tools.AclCommand")
        .args(["--bootstrap-server", &bootstrap()])
        .args(args)
        .output()
        .expect("java AclCommand");
    assert!(
        output.status.success(),
        "kafka-acls {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Grows `topic` to `partitions` partitions and waits until its metadata shows them.
pub fn add_partitions(topic: &str, partitions: usize) {
    let admin = admin_client(&bootstrap());
    let runtime = admin_runtime();
    let results = runtime
        .block_on(admin.create_partitions(
            [&rdkafka::admin::NewPartitions::new(topic, partitions)],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .unwrap_or_else(|e| panic!("adding partitions to {topic}: {e}"));
    for result in results {
        if let Err((topic, code)) = result {
            panic!("adding partitions to {topic}: {code:?}");
        }
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("metadata client");
    wait_until(
        &format!("topic {topic} has {partitions} partitions"),
        || {
            consumer
                .fetch_metadata(Some(topic), Duration::from_secs(5))
                .ok()
                .and_then(|m| {
                    m.topics()
                        .iter()
                        .find(|t| t.name() == topic)
                        .map(|t| t.partitions().len() == partitions)
                })
                .unwrap_or(false)
        },
    );
}

/// Deletes the records of `topic`/`partition` before `offset`, as retention does; the
/// partition's log then starts at `offset`.
pub fn delete_records_before(topic: &str, partition: i32, offset: i64) {
    let admin = admin_client(&bootstrap());
    let runtime = admin_runtime();
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic, partition, Offset::Offset(offset))
        .expect("partition list");
    let result = runtime
        .block_on(admin.delete_records(
            &list,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .unwrap_or_else(|e| panic!("deleting records of {topic}/{partition}: {e}"));
    for element in result.elements() {
        if let Err(e) = element.error() {
            panic!("deleting records of {topic}/{partition}: {e}");
        }
    }
}

/// Deletes the topics and waits until the broker no longer lists them.
pub fn delete_topics(topics: &[&str]) {
    let admin = admin_client(&bootstrap());
    let runtime = admin_runtime();
    let results = runtime
        .block_on(admin.delete_topics(
            topics,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .unwrap_or_else(|e| panic!("deleting topics {topics:?}: {e}"));
    for result in results {
        if let Err((topic, code)) = result {
            panic!("deleting topic {topic}: {code:?}");
        }
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("metadata client");
    for topic in topics {
        wait_until(&format!("topic {topic} is gone"), || {
            consumer
                .fetch_metadata(None, Duration::from_secs(5))
                .is_ok_and(|m| m.topics().iter().all(|t| t.name() != *topic))
        });
    }
}

/// Whether `topic` exists with at least one partition (a topic another client, such as
/// a Kafka Connect worker, creates by producing to it).
pub fn topic_exists(topic: &str) -> bool {
    admin_client(&bootstrap())
        .inner()
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .is_ok_and(|m| {
            m.topics()
                .iter()
                .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
        })
}

/// Runs a class of Apache Kafka's own Java tools (`org.apache.kafka.tools.…`) from the
/// jars `scripts/kafka/broker.sh` installs, with `stdin` as its input; panics unless it
/// succeeds, and returns its standard output.
pub fn kafka_java_tool(class: &str, args: &[&str], stdin: &str) -> String {
    let install = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/kafka/broker.sh"
        ))
        .arg("install")
        .output()
        .expect("broker.sh install");
    assert!(install.status.success(), "broker.sh install failed");
    let libs = String::from_utf8_lossy(&install.stdout).trim().to_owned();
    let mut child = Command::new("java")
        .arg("-cp")
        .arg(format!("{libs}/*"))
        .arg(class)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting java {class}: {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("writing the tool's input");
    let output = child.wait_with_output().expect("java tool");
    assert!(
        output.status.success(),
        "java {class} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Low and high watermark of every partition of `topic` (`partitions` of them).
pub fn watermarks(topic: &str, partitions: i32) -> Vec<(i64, i64)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("watermark client");
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("watermarks of {topic}/{p}: {e}"))
        })
        .collect()
}

/// The offsets `group` committed for the `partitions` partitions of `topic` (`None`:
/// nothing committed), read without joining the group.
pub fn committed_offsets(group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("offset client");
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition(topic, p);
    }
    let committed = consumer
        .committed_offsets(list, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("committed offsets of {group} on {topic}: {e}"));
    (0..partitions)
        .map(|p| {
            committed
                .find_partition(topic, p)
                .and_then(|e| match e.offset() {
                    Offset::Offset(n) => Some(n),
                    _ => None,
                })
        })
        .collect()
}

/// The broker's view of consumer group `group` (DescribeGroups): its state and members.
pub fn describe_group(group: &str) -> String {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("group client");
    match consumer.fetch_group_list(Some(group), Duration::from_secs(10)) {
        Err(e) => format!("describing group {group}: {e}"),
        Ok(list) => list
            .groups()
            .iter()
            .map(|g| {
                let members: Vec<String> = g
                    .members()
                    .iter()
                    .map(|m| format!("{} ({})", m.id(), m.client_host()))
                    .collect();
                format!(
                    "group {} state {} protocol {} members {members:?}",
                    g.name(),
                    g.state(),
                    g.protocol()
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}
