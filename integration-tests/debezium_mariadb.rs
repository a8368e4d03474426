//! The real chain of the README's Debezium quick start: MariaDB (Debian's 10.11, binlog in
//! ROW format) → Debezium 3.5's MariaDB connector in a Kafka Connect standalone worker →
//! the suite's Apache Kafka → `lakejoin run` with a `debezium-json` (or `debezium-avro`)
//! CDC pipeline into a Paimon table and an enrich pipeline joining a click topic against it.
//!
//! Until these tests, lakejoin's Debezium decoder had only read hand-written events. Here
//! everything it reads comes from the connector: the initial snapshot (`op = r`) of rows
//! that were there before, inserts, updates, deletes and their tombstones, re-inserts, a
//! MariaDB restart in the middle, and (with schemas) DECIMAL as base64 bytes, DATE as
//! epoch days, DATETIME(3)/(6) as epoch milli/microseconds, TIMESTAMP as zoned text.
//! Each click must come out with the profile as of its time (`wait_for_cdc`), and with
//! nulls for unknown users. The config files are the README's blocks; only addresses,
//! ports, paths and names are filled in. Three converters are run: the JSON converter with
//! each setting of `schemas.enable`, and Avro through a schema registry (the README's Avro
//! variant): Apicurio Registry 3.0 from Maven Central (Confluent's registry is not there)
//! with its Confluent-compatible API for lakejoin's `schema_registry`, and Apicurio's
//! AvroConverter in the worker writing the Confluent wire format. The test reads the
//! connector's Avro records back with apache-avro and the registry's schemas, apart from
//! lakejoin. With schemas (JSON with `schemas.enable`, or Avro), `ALTER TABLE … ADD COLUMN
//! city VARCHAR(32), ADD COLUMN visits SMALLINT` while lakejoin runs evolves the table
//! (schema-1, `city` STRING and `visits` SMALLINT by the records' Connect types, the old
//! rows' values null) without a restart of the CDC side; under Avro the new columns' types
//! come from the connector's next writer schema. The enrich side selects `city` after a
//! restart whose config names it (a join's `select` is checked against the table at start,
//! as Flink plans a lookup join).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::broker::{self, Deployment, Record, TestProducer, TopicReader};
use support::debezium::{
    ConnectWorker, MariaDb, SchemaRegistry, avro_field, avro_plugin_dir, confluent_avro,
    readme_block, readme_properties, set_property,
};

/// How the worker writes the change records, and so how lakejoin reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Converter {
    /// Kafka's JsonConverter with `schemas.enable` as given (`debezium-json`).
    Json { schemas: bool },
    /// Apicurio's AvroConverter through Apicurio Registry (`debezium-avro` with
    /// `schema_registry`).
    Avro,
}

impl Converter {
    /// Whether records carry their Connect types (the JSON schema wrapper, the Avro writer
    /// schema): such runs cover every column type and columns added mid-stream.
    fn typed(self) -> bool {
        self != Converter::Json { schemas: false }
    }
}

/// The rows of `shop.types`, created before the connector starts (a snapshot read), in
/// the schema-wrapped run only: each column type Debezium encodes its own way.
const TYPES_DDL: &str = "CREATE TABLE shop.types (id BIGINT PRIMARY KEY, price DECIMAL(10,2), \
    big DECIMAL(30,5), born DATE, seen DATETIME(3), seen6 DATETIME(6), ts TIMESTAMP(3) NULL, \
    flag TINYINT(1), d DOUBLE, bin VARBINARY(8), u INT UNSIGNED, y YEAR, e ENUM('a','b'), \
    j JSON, s VARCHAR(20));";

const TYPES_ROWS: &str = "INSERT INTO shop.types VALUES \
    (1, 12.34, -12345678901234567890.12345, '2024-02-29', '2024-03-01 10:11:12.345', \
     '2024-03-01 10:11:12.345678', '2024-03-01 10:11:12.345', 1, 0.5, X'0102ff', 4000000000, \
     2024, 'b', '{\"a\": 1}', 'grüße'), \
    (2, -0.01, 0.00001, '1969-12-31', '1960-01-01 00:00:00.001', '1999-12-31 23:59:59.999999', \
     NULL, 0, -1.5e300, X'', 0, 1999, 'a', NULL, '');";

/// The lakejoin table for `shop.types`, appended to the README's config.
const TYPES_TABLE: &str = r#"
[[table]]
name = "shop.types"
columns = [
  { name = "id", type = "BIGINT" },
  { name = "price", type = "DECIMAL(10, 2)" },
  { name = "big", type = "DECIMAL(30, 5)" },
  { name = "born", type = "DATE" },
  { name = "seen", type = "TIMESTAMP(3)" },
  { name = "seen6", type = "TIMESTAMP(6)" },
  { name = "ts", type = "TIMESTAMP(3)" },
  { name = "flag", type = "BOOLEAN" },
  { name = "d", type = "DOUBLE" },
  { name = "bin", type = "BYTES" },
  { name = "u", type = "BIGINT" },
  { name = "y", type = "INT" },
  { name = "e", type = "STRING" },
  { name = "j", type = "STRING" },
  { name = "s", type = "VARCHAR(20)" },
]
primary_key = ["id"]
buckets = 1

[[cdc]]
name = "types-cdc"
topics = ["{types_topic}"]
table = "shop.types"
commit_interval = "1s"
"#;

/// What `lakejoin table scan` prints for `shop.types`.
fn expected_types() -> Vec<Value> {
    vec![
        json!({"id": 1, "price": "12.34", "big": "-12345678901234567890.12345",
               "born": "2024-02-29", "seen": "2024-03-01 10:11:12.345",
               "seen6": "2024-03-01 10:11:12.345678", "ts": "2024-03-01 10:11:12.345",
               "flag": true, "d": 0.5, "bin": "AQL/", "u": 4000000000i64, "y": 2024,
               "e": "b", "j": "{\"a\": 1}", "s": "grüße"}),
        json!({"id": 2, "price": "-0.01", "big": "0.00001", "born": "1969-12-31",
               "seen": "1960-01-01 00:00:00.001", "seen6": "1999-12-31 23:59:59.999999",
               "ts": null, "flag": false, "d": -1.5e300, "bin": "", "u": 0, "y": 1999,
               "e": "a", "j": null, "s": ""}),
    ]
}

/// Everything one run needs: the database, the worker, lakejoin, and the topic names.
struct Chain {
    converter: Converter,
    db: MariaDb,
    worker: ConnectWorker,
    deployment: Deployment,
    /// `None` only while it restarts.
    lakejoin: Option<broker::LakejoinProcess>,
    cdc_topic: String,
    clicks: String,
    output: TopicReader,
    cdc: TopicReader,
    producer: TestProducer,
    next_click: u64,
    /// The Avro run's schema registry; stopped after the worker and lakejoin.
    registry: Option<SchemaRegistry>,
    /// The datadir and the worker's files; removed after the processes above stop.
    _dir: tempfile::TempDir,
}

/// The README's SQL block, run as root.
fn readme_sql() -> String {
    let block = readme_block("sql", "-- docker/debezium/setup.sql");
    assert!(block.contains("CREATE TABLE shop.user_profile"), "{block}");
    block
}

/// The README's Avro lines of the Connect worker, in place of its JSON converter's, with
/// the registry's address.
fn avro_worker(worker: &mut Vec<(String, String)>, registry: &SchemaRegistry) {
    worker.retain(|(k, _)| !k.starts_with("key.converter") && !k.starts_with("value.converter"));
    for (key, value) in
        readme_properties("# Avro through a schema registry: the worker's converters")
    {
        let value = if key.ends_with(".apicurio.registry.url") {
            assert_eq!(value, "http://registry:8080/apis/registry/v2");
            registry.apicurio_url()
        } else {
            value
        };
        set_property(worker, &key, &value);
    }
}

/// The README's Avro keys of a `[[cdc]]` pipeline, with the registry's address.
fn avro_cdc_keys(registry: &SchemaRegistry) -> toml::Table {
    let mut keys: toml::Table = readme_block(
        "toml",
        "# Avro through a schema registry: the [[cdc]] pipeline's keys",
    )
    .parse()
    .expect("the README's Avro keys are TOML");
    assert_eq!(
        keys["schema_registry"].as_str(),
        Some("http://registry:8080/apis/ccompat/v7")
    );
    keys["schema_registry"] = registry.confluent_url().into();
    keys
}

fn start_chain(converter: Converter) -> Chain {
    let started = Instant::now();
    let bootstrap = broker::bootstrap();
    let prefix = broker::unique("dbserver1");
    let cdc_topic = format!("{prefix}.shop.user_profile");
    let types_topic = format!("{prefix}.shop.types");
    let clicks = broker::unique("clicks");
    let clicks_enriched = broker::unique("clicks_enriched");
    broker::create_topics(&[
        (cdc_topic.as_str(), 2),
        (types_topic.as_str(), 1),
        (clicks.as_str(), 2),
        (clicks_enriched.as_str(), 1),
    ]);

    // The database, with rows before the connector starts: they arrive as snapshot reads.
    let dir = tempfile::tempdir().expect("temp dir");
    let registry =
        (converter == Converter::Avro).then(|| SchemaRegistry::start(&dir.path().join("registry")));
    let db = MariaDb::start(&dir.path().join("mariadb"));
    db.sql(&readme_sql());
    db.sql("INSERT INTO shop.user_profile VALUES (1, 30, 'f'), (2, 41, 'm');");
    let typed = converter.typed();
    if typed {
        db.sql(TYPES_DDL);
        db.sql(TYPES_ROWS);
    }

    // lakejoin: the README's connectors.toml with this run's names and addresses.
    let mut config: toml::Table = readme_block("toml", "# docker/debezium/connectors.toml")
        .parse()
        .expect("the README's connectors.toml is TOML");
    config["kafka"]["bootstrap_servers"] = bootstrap.clone().into();
    config["kafka"]["group_id"] = broker::unique("lakejoin").into();
    config["warehouse"]["uri"] = "{warehouse}".into();
    let cdc = config["cdc"].as_array_mut().expect("[[cdc]]");
    assert_eq!(
        cdc[0]["topics"],
        toml::Value::Array(vec!["dbserver1.shop.user_profile".into()])
    );
    cdc[0]["topics"] = toml::Value::Array(vec![cdc_topic.clone().into()]);
    let mut types_table: toml::Table = TYPES_TABLE
        .replace("{types_topic}", &types_topic)
        .parse()
        .expect("TOML");
    let types_cdc = types_table["cdc"].as_array_mut().expect("[[cdc]]")[0]
        .as_table_mut()
        .expect("[[cdc]]");
    match &registry {
        Some(registry) => {
            let user_profile_cdc = cdc[0].as_table_mut().expect("[[cdc]]");
            for (key, value) in avro_cdc_keys(registry) {
                user_profile_cdc.insert(key.clone(), value.clone());
                types_cdc.insert(key, value);
            }
        }
        None => {
            types_cdc.insert("format".into(), "debezium-json".into());
        }
    }
    let enrich = config["enrich"].as_array_mut().expect("[[enrich]]");
    enrich[0]["topics"] = toml::Value::Array(vec![clicks.clone().into()]);
    enrich[0]["output"]["topic"] = clicks_enriched.clone().into();
    if typed {
        for (key, value) in types_table {
            let toml::Value::Array(items) = value else {
                panic!("{key} is an array of tables");
            };
            config[&key]
                .as_array_mut()
                .unwrap_or_else(|| panic!("[[{key}]]"))
                .extend(items);
        }
    }
    let text = toml::to_string(&config).expect("TOML");
    let deployment = Deployment::new(&text);
    let lakejoin = deployment.start();

    // The worker: the README's properties with this machine's addresses.
    let mut worker = readme_properties("# docker/debezium/connect-standalone.properties");
    set_property(&mut worker, "bootstrap.servers", &bootstrap);
    match (converter, &registry) {
        (Converter::Json { schemas }, _) => {
            let flag = if schemas { "true" } else { "false" };
            set_property(&mut worker, "key.converter.schemas.enable", flag);
            set_property(&mut worker, "value.converter.schemas.enable", flag);
        }
        (Converter::Avro, Some(registry)) => avro_worker(&mut worker, registry),
        (Converter::Avro, None) => unreachable!("the Avro run starts a registry"),
    }
    let mut connector = readme_properties("# docker/debezium/mariadb-source.properties");
    set_property(&mut connector, "database.hostname", "127.0.0.1");
    set_property(&mut connector, "database.port", &db.port.to_string());
    set_property(&mut connector, "topic.prefix", &prefix);
    set_property(
        &mut connector,
        "schema.history.internal.kafka.bootstrap.servers",
        &bootstrap,
    );
    set_property(
        &mut connector,
        "schema.history.internal.kafka.topic",
        &format!("{prefix}.schema-history"),
    );
    if converter == Converter::Avro {
        // The run's topic prefix has a `-`, which Avro names do not allow.
        for (key, value) in
            readme_properties("# Avro through a schema registry: the connector's addition")
        {
            set_property(&mut connector, &key, &value);
        }
    }
    if typed {
        // With schemas, DECIMAL stays in its exact default encoding (base64 bytes in JSON,
        // an Avro decimal).
        connector.retain(|(k, _)| k != "decimal.handling.mode");
        set_property(
            &mut connector,
            "table.include.list",
            "shop.user_profile,shop.types",
        );
    }
    let more_plugins: Vec<_> = registry.iter().map(|_| avro_plugin_dir()).collect();
    let mut worker = ConnectWorker::start(
        &dir.path().join("connect"),
        worker,
        &connector,
        &more_plugins,
    );
    worker.wait_for_log("Snapshot completed", 0, Duration::from_secs(180));
    eprintln!("chain up ({converter:?}) after {:?}", started.elapsed());

    let output = TopicReader::new(&clicks_enriched);
    let cdc = TopicReader::new(&cdc_topic);
    Chain {
        converter,
        db,
        worker,
        deployment,
        lakejoin: Some(lakejoin),
        cdc_topic,
        clicks,
        output,
        cdc,
        producer: TestProducer::new(),
        next_click: 0,
        registry,
        _dir: dir,
    }
}

impl Chain {
    /// The `op` of a change record, read apart from lakejoin (apache-avro for Avro).
    fn op(&self, record: &Record) -> Value {
        match &self.registry {
            None => payload(&record.value)["op"].clone(),
            Some(registry) => {
                let bytes = record.raw_value.as_deref().expect("not a tombstone");
                match avro_field(&confluent_avro(registry, bytes), "op") {
                    apache_avro::types::Value::String(op) => json!(op),
                    other => panic!("op is {other:?}"),
                }
            }
        }
    }

    /// Whether a record is the tombstone of `user`'s delete.
    fn is_tombstone_of(&self, record: &Record, user: i32) -> bool {
        if record.raw_value.is_some() {
            return false;
        }
        match &self.registry {
            None => record
                .key
                .as_deref()
                .is_some_and(|k| k.contains(&format!("\"user_id\":{user}"))),
            Some(registry) => {
                let key = record.raw_key.as_deref().expect("a tombstone has a key");
                *avro_field(&confluent_avro(registry, key), "user_id")
                    == apache_avro::types::Value::Int(user)
            }
        }
    }

    /// Waits until the connector has put `n` records (tombstones included) on the
    /// user_profile topic, so that clicks produced after it are later than the changes.
    fn wait_for_changes(&mut self, n: usize) {
        let worker = &self.worker;
        let db = &self.db;
        let topic = self.cdc_topic.clone();
        let deadline = Instant::now() + Duration::from_secs(150);
        while self.cdc.records.len() < n {
            assert!(
                Instant::now() < deadline,
                "{topic} holds {} of {n} change records; connector log:\n{}\nMariaDB log:\n{}",
                self.cdc.records.len(),
                support::broker::tail(&worker.log_text(), 60),
                db.log_tail()
            );
            self.cdc.poll_for(Duration::from_millis(300));
        }
    }

    /// Produces a click per user and waits for their enriched records; each user's
    /// `(age, sex)` as the clicks came out.
    fn clicks(&mut self, users: &[i64]) -> BTreeMap<i64, (Value, Value)> {
        self.enriched_clicks(users)
            .into_iter()
            .map(|(user, v)| (user, (v["age"].clone(), v["sex"].clone())))
            .collect()
    }

    /// Produces a click per user and waits for their enriched records, by user.
    fn enriched_clicks(&mut self, users: &[i64]) -> BTreeMap<i64, Value> {
        let mut ids = Vec::new();
        for &user in users {
            self.next_click += 1;
            let id = self.next_click;
            let click = json!({"click_id": id, "user_id": user, "url": format!("/p/{id}")});
            self.producer
                .send(&self.clicks, &user.to_string(), &click.to_string());
            ids.push(id);
        }
        self.producer.flush();
        let wanted = ids.clone();
        self.output
            .read_until("the clicks came out enriched", |records| {
                wanted.iter().all(|id| {
                    records
                        .iter()
                        .any(|r| r.value["click_id"].as_u64() == Some(*id))
                })
            });
        self.lakejoin.as_mut().expect("running").assert_alive();
        ids.iter()
            .map(|id| {
                let record = self
                    .output
                    .records
                    .iter()
                    .find(|r| r.value["click_id"].as_u64() == Some(*id))
                    .expect("read above");
                let v = &record.value;
                assert_eq!(v["url"], json!(format!("/p/{id}")), "{v}");
                (v["user_id"].as_i64().expect("user_id"), v.clone())
            })
            .collect()
    }

    /// Stops lakejoin (SIGTERM), lets `change` edit its config, and starts it again.
    fn restart_lakejoin(&mut self, change: impl FnOnce(&mut toml::Table)) {
        let log = self.lakejoin.take().expect("running").terminate();
        assert!(
            !log.contains("bad record"),
            "no record was a bad one:\n{log}"
        );
        let text = std::fs::read_to_string(&self.deployment.config).expect("config");
        let mut config: toml::Table = text.parse().expect("TOML");
        change(&mut config);
        std::fs::write(
            &self.deployment.config,
            toml::to_string(&config).expect("TOML"),
        )
        .expect("write config");
        self.lakejoin = Some(self.deployment.start());
    }
}

/// `ALTER TABLE … ADD COLUMN` while lakejoin runs (schemas on, so the new fields come
/// with their Connect types, in the JSON wrapper or the new Avro writer schema): the CDC
/// pipeline adds `city` and `visits` to the table as Paimon would (schema-1, new field ids
/// 3 and 4, nullable, at the end, STRING and SMALLINT) and keeps going without a restart;
/// the rows written before read `city` as null; the running join keeps answering; after a
/// restart whose config names `city` (in the table's columns and the join's `select`)
/// the clicks carry it.
fn add_column_mid_stream(chain: &mut Chain) {
    chain.db.sql(
        "ALTER TABLE shop.user_profile ADD COLUMN city VARCHAR(32), ADD COLUMN visits SMALLINT; \
         UPDATE shop.user_profile SET city = 'Bern', visits = 7 WHERE user_id = 3;",
    );
    chain.wait_for_changes(9);
    chain.deployment.wait_for_table(
        "shop.user_profile",
        &[
            json!({"user_id": 1, "age": 31, "sex": "x", "city": null, "visits": null}),
            json!({"user_id": 2, "age": 25, "sex": "f", "city": null, "visits": null}),
            json!({"user_id": 3, "age": 52, "sex": "m", "city": "Bern", "visits": 7}),
        ],
    );
    let schema_file = chain
        .deployment
        .dir
        .path()
        .join("wh/shop.db/user_profile/schema/schema-1");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(&schema_file).expect("schema-1"))
            .expect("JSON");
    let fields = schema["fields"].as_array().expect("fields");
    assert_eq!(
        fields[fields.len().saturating_sub(2)..],
        [
            json!({"id": 3, "name": "city", "type": "STRING"}),
            json!({"id": 4, "name": "visits", "type": "SMALLINT"})
        ],
        "{schema}"
    );
    assert_eq!(schema["highestFieldId"], json!(4), "{schema}");
    // The running join keeps answering across the change (it does not select city).
    let got = chain.clicks(&[1, 3]);
    assert_eq!(got[&1], profile(31, "x"));
    assert_eq!(got[&3], profile(52, "m"));

    chain.restart_lakejoin(|config| {
        let table = &mut config["table"].as_array_mut().expect("[[table]]")[0];
        let columns = table["columns"].as_array_mut().expect("columns");
        for (name, data_type) in [("city", "STRING"), ("visits", "SMALLINT")] {
            let mut column = toml::Table::new();
            column.insert("name".into(), name.into());
            column.insert("type".into(), data_type.into());
            columns.push(column.into());
        }
        let join = &mut config["enrich"].as_array_mut().expect("[[enrich]]")[0]["join"]
            .as_array_mut()
            .expect("[[enrich.join]]")[0];
        join["select"]
            .as_array_mut()
            .expect("select")
            .push("city".into());
    });
    let got = chain.enriched_clicks(&[1, 3]);
    assert_eq!(got[&3]["city"], json!("Bern"), "{:?}", got[&3]);
    assert_eq!(got[&1]["city"], Value::Null, "{:?}", got[&1]);
    assert_eq!(got[&1]["age"], json!(31));
}

fn profile(age: i64, sex: &str) -> (Value, Value) {
    (json!(age), json!(sex))
}

fn unknown() -> (Value, Value) {
    (Value::Null, Value::Null)
}

/// The seeds' scenario on one chain.
fn user_profile_scenario(converter: Converter) {
    let started = Instant::now();
    let mut chain = start_chain(converter);

    // The snapshot: two rows that were there before the connector, as `op = r`.
    chain.wait_for_changes(2);
    let ops: Vec<Value> = chain.cdc.records.iter().map(|r| chain.op(r)).collect();
    assert_eq!(ops, vec![json!("r"), json!("r")], "snapshot reads");
    let got = chain.clicks(&[1, 2, 3]);
    assert_eq!(got[&1], profile(30, "f"));
    assert_eq!(got[&2], profile(41, "m"));
    assert_eq!(got[&3], unknown(), "user 3 does not exist yet");

    // An update: the clicks after it see the new age.
    chain
        .db
        .sql("UPDATE shop.user_profile SET age = 31 WHERE user_id = 1;");
    chain.wait_for_changes(3);
    let got = chain.clicks(&[1, 2]);
    assert_eq!(got[&1], profile(31, "f"));
    assert_eq!(got[&2], profile(41, "m"));

    // A delete (and its tombstone): the user is unknown again.
    chain
        .db
        .sql("DELETE FROM shop.user_profile WHERE user_id = 2;");
    chain.wait_for_changes(5);
    assert!(
        chain
            .cdc
            .records
            .iter()
            .any(|r| chain.is_tombstone_of(r, 2)),
        "a tombstone of user 2 after the delete: {:#?}",
        chain.cdc.records
    );
    let got = chain.clicks(&[1, 2]);
    assert_eq!(got[&1], profile(31, "f"));
    assert_eq!(got[&2], unknown(), "user 2 was deleted");

    // MariaDB restarts; the connector reconnects and picks up where it was.
    let reconnects = chain.worker.count_in_log("Connected to binlog at");
    chain.db.stop_server();
    chain.db.start_server();
    chain.db.sql(
        "INSERT INTO shop.user_profile VALUES (2, 25, 'f'); \
         INSERT INTO shop.user_profile VALUES (3, 52, 'm'); \
         UPDATE shop.user_profile SET sex = 'x' WHERE user_id = 1;",
    );
    chain.wait_for_changes(8);
    assert!(
        chain.worker.count_in_log("Connected to binlog at") > reconnects,
        "the connector reconnected to the binlog"
    );
    let got = chain.clicks(&[1, 2, 3, 4]);
    assert_eq!(got[&1], profile(31, "x"));
    assert_eq!(got[&2], profile(25, "f"), "user 2 re-inserted");
    assert_eq!(got[&3], profile(52, "m"));
    assert_eq!(got[&4], unknown());

    let typed = chain.converter.typed();
    if typed {
        add_column_mid_stream(&mut chain);
    }

    // Every change once, in order: the table ends where the database is.
    let mut expected = vec![
        json!({"user_id": 1, "age": 31, "sex": "x"}),
        json!({"user_id": 2, "age": 25, "sex": "f"}),
        json!({"user_id": 3, "age": 52, "sex": "m"}),
    ];
    if typed {
        for (row, (city, visits)) in expected.iter_mut().zip([
            (Value::Null, Value::Null),
            (Value::Null, Value::Null),
            (json!("Bern"), json!(7)),
        ]) {
            row["city"] = city;
            row["visits"] = visits;
        }
    }
    chain
        .deployment
        .wait_for_table("shop.user_profile", &expected);
    assert_eq!(
        chain
            .db
            .sql("SELECT user_id, age, sex FROM shop.user_profile ORDER BY user_id"),
        "1\t31\tx\n2\t25\tf\n3\t52\tm\n"
    );
    if typed {
        chain
            .deployment
            .wait_for_table("shop.types", &expected_types());
    }
    let log = chain.lakejoin.take().expect("running").terminate();
    assert!(
        !log.contains("bad record"),
        "no record was a bad one:\n{log}"
    );
    eprintln!("scenario ({converter:?}) took {:?}", started.elapsed());
}

/// The envelope of a Debezium record, with or without the schema wrapper.
fn payload(value: &Value) -> &Value {
    value.get("payload").unwrap_or(value)
}

#[test]
fn readme_quick_start_json_without_schemas() {
    user_profile_scenario(Converter::Json { schemas: false });
}

#[test]
fn readme_quick_start_json_with_schemas_and_every_type() {
    user_profile_scenario(Converter::Json { schemas: true });
}

#[test]
fn readme_quick_start_avro_through_a_schema_registry_and_every_type() {
    user_profile_scenario(Converter::Avro);
}
