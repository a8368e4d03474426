//! A real Kafka-protocol broker for the pipeline tests: topics, producing, reading a topic
//! back, and `lakejoin run` as a child process that can be stopped or killed.
//!
//! The broker comes from `KAFKA_BOOTSTRAP`: `scripts/test.sh` starts Apache Kafka on free
//! loopback ports and exports it; point it at `docker/docker-compose.yml`'s Kafka to run
//! the same tests there. Topic names get a random suffix so runs never see each other's data.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::Value;

/// The broker's bootstrap address (`host:port`).
pub fn bootstrap() -> String {
    std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| {
        panic!(
            "KAFKA_BOOTSTRAP is not set: run `scripts/test.sh` (it starts Apache Kafka on \
             free loopback ports), or point KAFKA_BOOTSTRAP at a Kafka broker"
        )
    })
}

/// A name unique to this run: `<base>-<8 hex digits>`.
pub fn unique(base: &str) -> String {
    format!("{base}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

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

/// Polls `condition` every 100 ms until it holds; panics after 90 s.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
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

/// A producer whose every `send` is acknowledged before `flush` returns.
pub struct TestProducer {
    producer: ThreadedProducer<DefaultProducerContext>,
}

impl TestProducer {
    pub fn new() -> Self {
        Self::on(&bootstrap())
    }

    /// A producer to the broker at `bootstrap`.
    pub fn on(bootstrap: &str) -> Self {
        Self::configured(bootstrap, &[])
    }

    /// A producer with extra librdkafka properties (`compression.type`, …).
    pub fn with_properties(properties: &[(&str, &str)]) -> Self {
        Self::configured(&bootstrap(), properties)
    }

    fn configured(bootstrap: &str, properties: &[(&str, &str)]) -> Self {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5");
        for (key, value) in properties {
            config.set(*key, *value);
        }
        let producer = config.create().expect("producer");
        TestProducer { producer }
    }

    pub fn send(&self, topic: &str, key: &str, payload: &str) {
        self.enqueue(BaseRecord::to(topic).key(key).payload(payload.as_bytes()));
    }

    /// A record to one partition of `topic`.
    pub fn send_to(&self, topic: &str, partition: i32, key: &str, payload: &str) {
        self.enqueue(
            BaseRecord::to(topic)
                .partition(partition)
                .key(key)
                .payload(payload.as_bytes()),
        );
    }

    /// A record with a key and no value (a delete for `upsert-json`).
    pub fn send_tombstone(&self, topic: &str, key: &str) {
        self.enqueue(BaseRecord::to(topic).key(key));
    }

    fn enqueue(&self, mut record: BaseRecord<'_, str, [u8]>) {
        loop {
            match self.producer.send(record) {
                Ok(()) => return,
                Err((e, returned)) => {
                    // Only a full local queue is worth waiting for.
                    assert!(
                        matches!(
                            e.rdkafka_error_code(),
                            Some(rdkafka::types::RDKafkaErrorCode::QueueFull)
                        ),
                        "producing to {}: {e}",
                        returned.topic
                    );
                    record = returned;
                    self.producer.poll(Duration::from_millis(50));
                }
            }
        }
    }

    pub fn flush(&self) {
        self.producer
            .flush(Duration::from_secs(60))
            .expect("all produced records acknowledged");
    }
}

impl Default for TestProducer {
    fn default() -> Self {
        Self::new()
    }
}

/// One record read back from a topic.
#[derive(Clone, Debug)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    /// The payload parsed as JSON, or a JSON string of the raw text when it is not JSON.
    pub value: Value,
    /// The key and payload as they are (Avro is not text).
    pub raw_key: Option<Vec<u8>>,
    pub raw_value: Option<Vec<u8>>,
    pub headers: BTreeMap<String, String>,
}

/// Reads a topic from its beginning (all partitions, no consumer group), accumulating
/// records across calls.
pub struct TopicReader {
    topic: String,
    consumer: BaseConsumer,
    pub records: Vec<Record>,
}

impl TopicReader {
    pub fn new(topic: &str) -> Self {
        Self::on(&bootstrap(), topic)
    }

    /// A reader of `topic` on the broker at `bootstrap`.
    pub fn on(bootstrap: &str, topic: &str) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", unique("reader"))
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(30))
            .expect("topic metadata");
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map(|t| t.partitions().len())
            .unwrap_or(0);
        assert!(partitions > 0, "topic {topic} has no partitions");
        let mut assignment = TopicPartitionList::new();
        for partition in 0..partitions as i32 {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .expect("assignment");
        }
        consumer.assign(&assignment).expect("assign");
        TopicReader {
            topic: topic.to_owned(),
            consumer,
            records: Vec::new(),
        }
    }

    /// Polls until `done(records so far)` holds; panics after 90 s with what arrived.
    pub fn read_until(&mut self, what: &str, mut done: impl FnMut(&[Record]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !done(&self.records) {
            assert!(
                Instant::now() < deadline,
                "timed out reading {} until {what}; {} records arrived, the last ones: {:#?}",
                self.topic,
                self.records.len(),
                &self.records[self.records.len().saturating_sub(5)..]
            );
            self.poll(Duration::from_millis(200));
        }
    }

    /// Reads until at least `n` records arrived.
    pub fn read_at_least(&mut self, n: usize) -> &[Record] {
        self.read_until(&format!("{n} records arrived"), |r| r.len() >= n);
        &self.records
    }

    /// Everything that arrives within `quiet` of the last record (to check nothing more
    /// comes after the expected records).
    pub fn drain(&mut self, quiet: Duration) -> &[Record] {
        while self.poll(quiet) {}
        &self.records
    }

    /// Reads what arrives within `timeout`.
    pub fn poll_for(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.poll(deadline.saturating_duration_since(Instant::now())) {}
    }

    /// One poll; whether a record arrived.
    fn poll(&mut self, timeout: Duration) -> bool {
        match self.consumer.poll(timeout) {
            None => false,
            Some(Err(e)) => panic!("reading {}: {e}", self.topic),
            Some(Ok(message)) => {
                let value = message
                    .payload()
                    .map(|p| {
                        serde_json::from_slice(p).unwrap_or_else(|_| {
                            Value::String(String::from_utf8_lossy(p).into_owned())
                        })
                    })
                    .unwrap_or(Value::Null);
                let headers = message
                    .headers()
                    .map(|headers| {
                        headers
                            .iter()
                            .map(|h| {
                                (
                                    h.key.to_owned(),
                                    h.value
                                        .map(|v| String::from_utf8_lossy(v).into_owned())
                                        .unwrap_or_default(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.records.push(Record {
                    partition: message.partition(),
                    offset: message.offset(),
                    key: message
                        .key()
                        .map(|k| String::from_utf8_lossy(k).into_owned()),
                    value,
                    raw_key: message.key().map(<[u8]>::to_vec),
                    raw_value: message.payload().map(<[u8]>::to_vec),
                    headers,
                });
                true
            }
        }
    }
}

/// A temporary warehouse plus a config file written into it.
pub struct Deployment {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl Deployment {
    /// Writes `config` (with `{bootstrap}` and `{warehouse}` filled in) to a file. Without
    /// an `[observe]` section the endpoint listens on a free port (tests run in parallel).
    pub fn new(config: &str) -> Self {
        Self::on(&bootstrap(), config)
    }

    /// [`Deployment::new`] against the broker at `bootstrap`.
    pub fn on(bootstrap: &str, config: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut text = config
            .replace("{bootstrap}", bootstrap)
            .replace("{warehouse}", &dir.path().join("wh").display().to_string());
        if !text.contains("[observe]") {
            text.push_str("\n[observe]\nlisten = \"127.0.0.1:0\"\n");
        }
        let path = dir.path().join("connectors.toml");
        std::fs::write(&path, text).expect("write config");
        Deployment { dir, config: path }
    }

    pub fn warehouse(&self) -> String {
        format!("file://{}", self.dir.path().join("wh").display())
    }

    pub fn start(&self) -> LakejoinProcess {
        self.start_with_env(&[])
    }

    pub fn start_with_env(&self, env: &[(&str, &str)]) -> LakejoinProcess {
        LakejoinProcess::start_with_env(&self.config, &self.dir.path().join("lakejoin.log"), env)
    }

    /// The rows of `table` as `lakejoin table scan` prints them; `None` while the table does
    /// not exist yet.
    pub fn scan(&self, table: &str) -> Option<Vec<Value>> {
        let mut command = Command::new(super::lakejoin_bin());
        command.args([
            "table",
            "scan",
            "--warehouse",
            &self.warehouse(),
            "--table",
            table,
        ]);
        let output = super::run(command, "");
        output.status.success().then(|| {
            super::parse_jsonl(
                "lakejoin table scan",
                &String::from_utf8_lossy(&output.stdout),
            )
        })
    }

    /// Waits until `lakejoin table scan` prints exactly `expected` (in key order).
    pub fn wait_for_table(&self, table: &str, expected: &[Value]) {
        let mut last = None;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let rows = self.scan(table);
            if rows.as_deref() == Some(expected) {
                return;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.path().join("lakejoin.log"))
                    .unwrap_or_default();
                panic!(
                    "{table} never held the expected rows.\nexpected: {expected:#?}\nlast scan: {:#?}\nlog tail:\n{}",
                    rows.or(last),
                    tail(&log, 60)
                );
            }
            last = rows;
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Snapshot files of `table` (0 before it exists).
    pub fn snapshot_count(&self, table: &str) -> usize {
        let (db, name) = table.split_once('.').expect("db.table");
        let dir = self
            .dir
            .path()
            .join("wh")
            .join(format!("{db}.db"))
            .join(name)
            .join("snapshot");
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with("snapshot-"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// pypaimon's view of `table`, sorted by primary key.
    pub fn pypaimon(&self, table: &str) -> Vec<Value> {
        super::oracle_read(&self.warehouse(), table)
    }
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `lakejoin run -c <config>` as a child process; its output goes to a log file that is
/// printed when a test fails while it is alive.
pub struct LakejoinProcess {
    child: Option<Child>,
    log: PathBuf,
    /// Length of the log file when this process started (restarts append to it).
    log_start: usize,
}

impl LakejoinProcess {
    pub fn start(config: &Path, log: &Path) -> Self {
        Self::start_with_env(config, log, &[])
    }

    /// [`LakejoinProcess::start`] with extra environment variables (config overrides).
    pub fn start_with_env(config: &Path, log: &Path, env: &[(&str, &str)]) -> Self {
        let log_file = File::options()
            .create(true)
            .append(true)
            .open(log)
            .expect("log file");
        let log_start = std::fs::metadata(log).map_or(0, |m| m.len() as usize);
        let child = Command::new(super::lakejoin_bin())
            .args(["run", "-c"])
            .arg(config)
            .env("RUST_LOG", "lakejoin=debug,info")
            .env("RUST_BACKTRACE", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log file"))
            .stderr(log_file)
            .spawn()
            .expect("start lakejoin run");
        LakejoinProcess {
            child: Some(child),
            log: log.to_owned(),
            log_start,
        }
    }

    /// What this process logged (not the runs before it in the same file).
    pub fn log_text(&self) -> String {
        let all = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(all.get(self.log_start..).unwrap_or_default()).into_owned()
    }

    /// Waits until the log has a line containing `needle` (panics with the log after
    /// 90 s, or when the process exits first); returns that line.
    pub fn wait_for_log(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(line) = self.log_text().lines().find(|l| l.contains(needle)) {
                return line.to_owned();
            }
            self.assert_alive();
            assert!(
                Instant::now() < deadline,
                "no log line with {needle:?} within 90 s:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The address of the metrics and health endpoint, from the start-up log line (the
    /// test configs listen on port 0).
    pub fn endpoint(&mut self) -> SocketAddr {
        let line = self.wait_for_log("metrics on http://");
        let start = line.find("metrics on http://").expect("found") + "metrics on http://".len();
        let rest = &line[start..];
        let end = rest.find('/').expect("a path after the address");
        rest[..end]
            .parse()
            .unwrap_or_else(|e| panic!("endpoint address in {line:?}: {e}"))
    }

    /// Panics (with the log) when the process has exited.
    pub fn assert_alive(&mut self) {
        let child = self.child.as_mut().expect("running");
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("lakejoin run exited with {status}:\n{}", self.log_text());
        }
    }

    /// SIGKILL: no flush, no commit, no goodbye.
    pub fn kill_9(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("kill -9");
        child.wait().expect("wait");
    }

    /// Sends `signal` (`TERM`, `INT`) without waiting.
    pub fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("running");
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits up to `timeout` for the process to exit; its exit status, `None` if it runs on.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then waits for a clean exit; returns the log.
    pub fn terminate(mut self) -> String {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let log = self.log_text();
                assert!(
                    status.success(),
                    "lakejoin run exited with {status} after SIGTERM:\n{log}"
                );
                return log;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "lakejoin run did not exit within 60 s of SIGTERM:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LakejoinProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                eprintln!("--- lakejoin run log ---\n{}", self.log_text());
            }
        }
    }
}

/// `GET path` on `address`: the status code and body; `None` when nothing answers.
pub fn http_get(address: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The value of the sample `series` (name and labels, exactly as exposed) in a
/// Prometheus text exposition.
pub fn metric(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        line.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|value| value.parse().ok())
    })
}

/// A loopback port nobody listens on (free when this returns).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// An Apache Kafka broker of this test's own (`scripts/kafka/broker.sh`, as
/// `scripts/test.sh` starts the shared one), for the tests that stop and start a broker.
/// Its ports, users and data live in a directory, so a restart keeps them. Stopped when
/// dropped.
pub struct KafkaBroker {
    dir: PathBuf,
    running: bool,
    /// The PLAINTEXT listener's `host:port`.
    pub bootstrap: String,
}

impl KafkaBroker {
    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka/broker.sh")
    }

    fn run_script(command: &str, dir: &Path) {
        let output = Command::new("bash")
            .arg(Self::script())
            .arg(command)
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running scripts/kafka/broker.sh {command}: {e}"));
        assert!(
            output.status.success(),
            "scripts/kafka/broker.sh {command} {} failed: {}\n{}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(dir.join("logs/broker.log"))
                .map(|log| tail(&log, 40))
                .unwrap_or_default()
        );
    }

    /// Sets a broker up in `dir` (ports, users, storage) without starting it, so a test
    /// can point lakejoin at an address where nothing listens yet.
    pub fn set_up(dir: &Path) -> Self {
        Self::run_script("setup", dir);
        let env = std::fs::read_to_string(dir.join("broker.env")).expect("broker.env");
        let bootstrap = env
            .lines()
            .find_map(|l| l.strip_prefix("export KAFKA_BOOTSTRAP="))
            .expect("KAFKA_BOOTSTRAP in broker.env")
            .to_owned();
        KafkaBroker {
            dir: dir.to_owned(),
            running: false,
            bootstrap,
        }
    }

    /// Sets up and starts a broker in `dir`.
    pub fn start_in(dir: &Path) -> Self {
        let mut broker = Self::set_up(dir);
        broker.start();
        broker
    }

    /// Starts the broker (again, with its data) and waits until it serves.
    pub fn start(&mut self) {
        Self::run_script("start", &self.dir);
        self.running = true;
    }

    /// Stops the broker (SIGTERM, as an orderly restart does), keeping its data.
    pub fn stop(&mut self) {
        Self::run_script("stop", &self.dir);
        self.running = false;
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        if self.running {
            let _ = Command::new("bash")
                .arg(Self::script())
                .arg("stop")
                .arg(&self.dir)
                .status();
        }
    }
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
