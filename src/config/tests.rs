use super::testkit::GOOD;
use super::*;

/// Asserts that `text` does not load (as `c.toml`) and that its error names each of
/// `needles`.
fn assert_rejected(text: &str, needles: &[&str]) {
    let err = from_toml("c.toml", text).unwrap_err().to_string();
    for needle in needles {
        assert!(err.contains(needle), "missing {needle:?} in {err}");
    }
}

/// Loads `text` from a file `connectors.toml` with the environment variables `env`.
fn load_file_with_env(text: &str, env: &[(&str, &str)]) -> Result<Config> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("connectors.toml");
    std::fs::write(&path, text).unwrap();
    let env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    load_with_env(&path, Some(env))
}

#[test]
fn a_good_file_loads_with_defaults() {
    let c = from_toml("connectors.toml", GOOD).unwrap();
    assert_eq!(c.kafka.group_id, "lakejoin");
    assert_eq!(c.cdc[0].commit_interval, std::time::Duration::from_secs(2));
    assert_eq!(c.cdc[0].commit_max_rows, 100_000);
    assert_eq!(c.enrich[0].join[0].kind, JoinKind::Left);
    assert_eq!(c.enrich[0].join[0].cache, CacheKind::Partial);
    assert_eq!(
        c.summary(),
        "ok: 1 table(s), 1 cdc pipeline(s), 1 enrich pipeline(s), 1 join(s)"
    );
    let schema = c.tables[0].to_schema().unwrap();
    assert_eq!(
        schema.options.get("sequence.field").map(String::as_str),
        Some("updated_at")
    );
    // Secrets never reach Debug output.
    assert!(!format!("{:?}", c.kafka).contains("plaintext"));
}

#[test]
fn a_column_comment_becomes_the_fields_description() {
    let text = GOOD.replace(
        r#"{ name = "name", type = "STRING" },"#,
        r#"{ name = "name", type = "STRING", comment = "as the customer wrote it" },"#,
    );
    let c = from_toml("connectors.toml", &text).unwrap();
    let schema = c.tables[0].to_schema().unwrap();
    let descriptions: Vec<Option<&str>> = schema
        .fields
        .iter()
        .map(|f| f.description.as_deref())
        .collect();
    assert_eq!(descriptions, [None, Some("as the customer wrote it"), None]);
}

#[test]
fn every_problem_is_reported_at_once_with_its_path() {
    let bad = GOOD
        .replace("buckets = 4", "buckets = 4\ncolour = \"red\"")
        .replace(
            "commit_interval = \"2s\"",
            "bogus = 1\ncommit_interval = \"soon\"",
        )
        .replace(
            "on = { customer_id = \"id\" }",
            "on = { customer_id = \"idd\" }",
        )
        .replace(
            "table = \"shop.customers\"\ncommit_interval",
            "table = \"shop.nope\"\ncommit_interval",
        )
        .replace("name = \"orders-enriched\"", "name = \"customers-cdc\"");
    let err = from_toml("connectors.toml", &bad).unwrap_err().to_string();
    let lines: Vec<&str> = err.lines().collect();
    let has = |needle: &str| {
        lines
            .iter()
            .any(|l| l.starts_with("connectors.toml: ") && l.contains(needle))
    };
    assert!(
        has("table[0] (shop.customers).colour: unknown key"),
        "{err}"
    );
    assert!(has("cdc[0] (customers-cdc).bogus: unknown key"), "{err}");
    assert!(
        has("cdc[0] (customers-cdc).commit_interval: `soon` is not a duration"),
        "{err}"
    );
    assert!(
        has(
            "enrich[0] (customers-cdc).join[0].on.customer_id: `idd` is not a column of shop.customers"
        ),
        "{err}"
    );
    // An entry that failed to parse is not checked further; the others are.
    let duplicate = GOOD.replace("name = \"orders-enriched\"", "name = \"customers-cdc\"");
    let err = from_toml("connectors.toml", &duplicate)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("enrich[0] (customers-cdc).name: pipeline name `customers-cdc` is used twice"),
        "{err}"
    );
}

#[test]
fn references_and_join_keys_are_checked() {
    let bad = GOOD
        .replace(
            "table = \"shop.customers\"\non",
            "table = \"shop.missing\"\non",
        )
        .replace("format = \"debezium-json\"", "format = \"xml\"")
        .replace(
            "[kafka]\nbootstrap_servers = \"localhost:9092\"",
            "[kafka]\nbootstrap_servers = \"\"",
        );
    assert_rejected(
        &bad,
        &[
            "enrich[0] (orders-enriched).join[0].table: `shop.missing` is not defined",
            "cdc[0] (customers-cdc).format: `xml` is not one of",
            "kafka.bootstrap_servers: must not be empty",
        ],
    );
    let non_key = GOOD.replace(
        "on = { customer_id = \"id\" }",
        "on = { customer_name = \"name\" }",
    );
    assert_rejected(&non_key, &["need cache = \"full\""]);
}

#[test]
fn missing_sections_and_wrong_types_are_reported() {
    let err = from_toml("c.toml", "[warehouse]\nuri = 5\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("[kafka]: missing section"), "{err}");
    assert!(err.contains("warehouse.uri"), "{err}");
}

#[test]
fn environment_overrides_file_values() {
    let c = load_file_with_env(
        GOOD,
        &[
            ("LAKEJOIN__KAFKA__GROUP_ID", "blue"),
            ("LAKEJOIN__WAREHOUSE__URI", "s3://lake/wh"),
        ],
    )
    .unwrap();
    assert_eq!(c.kafka.group_id, "blue");
    assert_eq!(c.warehouse.uri, "s3://lake/wh");
    let err = load_file_with_env(GOOD, &[("LAKEJOIN__KAFKA__BOOTSTRAP_SERVERS", "")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("connectors.toml: kafka.bootstrap_servers: must not be empty"),
        "{err}"
    );
}

#[test]
fn cdc_metadata_and_update_mode_are_validated() {
    let bad = GOOD.replace(
        "commit_interval = \"2s\"",
        "commit_interval = \"2s\"\nmetadata = { nope = \"ingestion-timestamp\", name = \"moon\" }\nupdate_mode = \"sideways\"",
    );
    assert_rejected(
        &bad,
        &[
            "cdc[0] (customers-cdc).metadata.nope: `nope` is not a column",
            "cdc[0] (customers-cdc).metadata.name: unknown metadata `moon`",
            "cdc[0] (customers-cdc).update_mode: must be",
        ],
    );
}

#[test]
fn lookup_options_have_defaults_and_are_validated() {
    let c = from_toml("connectors.toml", GOOD).unwrap();
    let join = &c.enrich[0].join[0];
    assert!(join.cache_missing_keys);
    assert_eq!(join.refresh_interval, std::time::Duration::from_secs(10));
    assert_eq!(join.max_wait, std::time::Duration::from_secs(30));
    assert!(!join.wait_for_cdc);
    assert_eq!(join.partition, None);
    assert!(c.enrich[0].ordered);
    assert_eq!(c.enrich[0].max_in_flight, 1_000);

    let partitioned = GOOD
        .replace(
            "{ name = \"updated_at\", type = \"TIMESTAMP(3)\" },",
            "{ name = \"updated_at\", type = \"TIMESTAMP(3)\" },\n  { name = \"dt\", type = \"STRING\" },",
        )
        .replace("primary_key = [\"id\"]", "primary_key = [\"dt\", \"id\"]\npartition_by = [\"dt\"]");
    let newest = partitioned.replace(
        "prefix = \"customer_\"",
        "prefix = \"customer_\"\npartition = \"max_pt()\"\nwait_for_cdc = true\nmax_wait = \"2s\"",
    );
    let c = from_toml("c.toml", &newest).unwrap();
    assert_eq!(
        c.enrich[0].join[0].partition,
        Some(PartitionSelection::Function("max_pt()".into()))
    );
    let fixed = partitioned.replace(
        "prefix = \"customer_\"",
        "prefix = \"customer_\"\npartition = { dt = \"2026-11-29\" }",
    );
    assert!(from_toml("c.toml", &fixed).is_ok());

    let bad = partitioned
        .replace(
            "prefix = \"customer_\"",
            "prefix = \"customer_\"\npartition = \"min_pt()\"\nrefresh_interval = \"0s\"\ncache_max_bytes = 0",
        )
        .replace("dead_letter_topic = \"orders_dlq\"", "dead_letter_topic = \"orders_dlq\"\nmax_in_flight = 0");
    let err = from_toml("c.toml", &bad).unwrap_err().to_string();
    for needle in [
        "enrich[0] (orders-enriched).max_in_flight: must be at least 1",
        "enrich[0] (orders-enriched).join[0].partition: `min_pt()` is not `max_pt()`",
        "join[0].refresh_interval: must be greater than zero",
        "join[0].cache_max_bytes: must be greater than zero",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    let bad = partitioned.replace(
        "prefix = \"customer_\"",
        "prefix = \"customer_\"\npartition = { day = \"x\" }",
    );
    assert_rejected(
        &bad,
        &[
            "join[0].partition.day: not a partition column",
            "partition column `dt` has no value",
        ],
    );
    // Without a partition selection, a partitioned table's join must give the partition.
    assert_rejected(
        &partitioned,
        &["join[0].on: joins on columns other than the primary key"],
    );
    let unpartitioned = GOOD.replace(
        "prefix = \"customer_\"",
        "prefix = \"customer_\"\npartition = \"max_pt()\"",
    );
    assert_rejected(
        &unpartitioned,
        &["join[0].partition: shop.customers is not partitioned"],
    );
    let no_cdc = GOOD
        .replace(
            "prefix = \"customer_\"",
            "prefix = \"customer_\"\nwait_for_cdc = true",
        )
        .replace(
            "table = \"shop.customers\"\ncommit_interval",
            "table = \"shop.other\"\ncommit_interval",
        );
    assert_rejected(
        &no_cdc,
        &["join[0].wait_for_cdc: no [[cdc]] pipeline writes shop.customers"],
    );
}

#[test]
fn observe_and_run_default_to_a_loopback_endpoint_and_human_logs() {
    let c = from_toml("c.toml", GOOD).unwrap();
    assert_eq!(c.observe, ObserveConfig::default());
    assert_eq!(c.observe.listen, "127.0.0.1:9464");
    assert!(c.observe.listen_address().unwrap().ip().is_loopback());
    assert_eq!(c.observe.log_format, LogFormat::Human);
    assert_eq!(
        c.observe.progress_interval,
        std::time::Duration::from_secs(10)
    );
    assert_eq!(c.run.shutdown_timeout, std::time::Duration::from_secs(30));
}

#[test]
fn observe_and_run_sections_are_read() {
    let text = format!(
        "{GOOD}\n[observe]\nlisten = \"0.0.0.0:9500\"\nlog_format = \"json\"\nprogress_interval = \"1 min\"\n\n[run]\nshutdown_timeout = \"5s\"\n"
    );
    let c = from_toml("c.toml", &text).unwrap();
    assert_eq!(
        c.observe.listen_address().unwrap(),
        "0.0.0.0:9500".parse().unwrap()
    );
    assert_eq!(c.observe.log_format, LogFormat::Json);
    assert_eq!(
        c.observe.progress_interval,
        std::time::Duration::from_secs(60)
    );
    assert_eq!(c.run.shutdown_timeout, std::time::Duration::from_secs(5));
    let local = GOOD.to_string() + "\n[observe]\nlisten = \"localhost:0\"\n";
    let c = from_toml("c.toml", &local).unwrap();
    assert_eq!(
        c.observe.listen_address().unwrap(),
        "127.0.0.1:0".parse().unwrap()
    );
}

#[test]
fn observe_and_run_problems_name_their_keys() {
    let text = format!(
        "{GOOD}\n[observe]\ncolour = 1\nlisten = \"everywhere\"\nlog_format = \"xml\"\n\n[run]\nshutdown_timeout = \"0s\"\n\n[telemetry]\nx = 1\n"
    );
    let err = from_toml("connectors.toml", &text).unwrap_err().to_string();
    let has = |needle: &str| {
        err.lines()
            .any(|l| l.starts_with("connectors.toml: ") && l.contains(needle))
    };
    assert!(has("observe.colour: unknown key"), "{err}");
    assert!(has("observe.log_format: unknown variant `xml`"), "{err}");
    assert!(
        has("run.shutdown_timeout: must be greater than zero"),
        "{err}"
    );
    assert!(has("telemetry: unknown section"), "{err}");
    // With the format fixed, the address and interval are checked too.
    let text = format!("{GOOD}\n[observe]\nlisten = \"everywhere\"\nprogress_interval = \"0ms\"\n");
    let err = from_toml("connectors.toml", &text).unwrap_err().to_string();
    assert!(
        err.contains("connectors.toml: observe.listen: `everywhere` is not an address"),
        "{err}"
    );
    assert!(
        err.contains("connectors.toml: observe.progress_interval: must be greater than zero"),
        "{err}"
    );
}

#[test]
fn observe_listen_is_overridden_from_the_environment() {
    let c = load_file_with_env(
        GOOD,
        &[
            ("LAKEJOIN__OBSERVE__LISTEN", "0.0.0.0:9464"),
            ("LAKEJOIN__OBSERVE__LOG_FORMAT", "json"),
            ("LAKEJOIN__RUN__SHUTDOWN_TIMEOUT", "45s"),
        ],
    )
    .unwrap();
    assert_eq!(c.observe.listen, "0.0.0.0:9464");
    assert_eq!(c.observe.log_format, LogFormat::Json);
    assert_eq!(c.run.shutdown_timeout, std::time::Duration::from_secs(45));
}

#[test]
fn writer_fencing_defaults_to_fail_and_tables_can_stand_by() {
    let c = from_toml("c.toml", GOOD).unwrap();
    assert_eq!(c.writer, WriterConfig::default());
    let fence = c.fence_options("shop.customers");
    assert_eq!(fence.on_conflict, crate::table::fence::OnConflict::Fail);
    assert_eq!(fence.lease_timeout, std::time::Duration::from_secs(30));
    assert_eq!(fence.heartbeat_interval, std::time::Duration::from_secs(5));

    let text = GOOD.replace(
        "buckets = 4\n",
        "buckets = 4\nwriter_on_conflict = \"standby\"\n",
    ) + "\n[writer]\nlease_timeout = \"10s\"\nheartbeat_interval = \"1s\"\ninstance = \"enrich-orders\"\n";
    let c = from_toml("c.toml", &text).unwrap();
    assert_eq!(c.writer.instance.as_deref(), Some("enrich-orders"));
    let fence = c.fence_options("shop.customers");
    assert_eq!(fence.on_conflict, crate::table::fence::OnConflict::Standby);
    assert_eq!(fence.lease_timeout, std::time::Duration::from_secs(10));
    assert_eq!(fence.heartbeat_interval, std::time::Duration::from_secs(1));
}

#[test]
fn writer_problems_name_their_keys() {
    let text = format!("{GOOD}\n[writer]\non_conflict = \"wait\"\n");
    assert_rejected(&text, &["writer.on_conflict: unknown variant `wait`"]);
    let text = format!("{GOOD}\n[writer]\ninstance = \" \"\n");
    assert_rejected(
        &text,
        &["c.toml: writer.instance: must not be empty when set"],
    );
    let text = format!("{GOOD}\n[writer]\nlease_timeout = \"5s\"\nheartbeat_interval = \"0s\"\n");
    assert_rejected(
        &text,
        &["c.toml: writer.heartbeat_interval: must be greater than zero"],
    );
    let text = format!("{GOOD}\n[writer]\nlease_timeout = \"5s\"\nheartbeat_interval = \"3s\"\n");
    assert_rejected(
        &text,
        &["c.toml: writer.lease_timeout: must be at least twice"],
    );
}

/// Secrets of `[kafka.properties]`, `[warehouse.options]` and URI credentials, some of
/// them wrongly typed so that the parse error would quote them.
const WITH_SECRETS: &str = r#"
[kafka]
bootstrap_servers = "localhost:9092"
[kafka.properties]
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "PLAIN"
"sasl.password" = 73914628
"sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="jaas-s3cret";'

[warehouse]
uri = "s3://AKIAEXAMPLE:wJalrUriSecret@bucket/wh"
[warehouse.options]
aws_secret_access_key = "wJalrXUtnFEMI"
aws_session_token = 12345678
"#;

#[test]
fn secrets_are_masked_in_config_errors() {
    let err = from_toml("c.toml", WITH_SECRETS).unwrap_err().to_string();
    assert!(
        err.contains("sasl.password"),
        "the key is still named: {err}"
    );
    for secret in ["73914628", "12345678", "wJalrUriSecret", "jaas-s3cret"] {
        assert!(!err.contains(secret), "{secret} in {err}");
    }
    // Loading from a file goes through the same masking (`lakejoin validate`, `run`).
    let err = load_file_with_env(WITH_SECRETS, &[])
        .unwrap_err()
        .to_string();
    assert!(
        !err.contains("73914628") && !err.contains("12345678"),
        "{err}"
    );
}

#[test]
fn secrets_never_reach_debug_output() {
    let text = WITH_SECRETS
        .replace("73914628", "\"hunter2-pass\"")
        .replace("12345678", "\"FQoGZXIvYXdzE\"");
    let c = from_toml("c.toml", &text).unwrap();
    let debug = format!("{c:?}");
    for secret in [
        "hunter2-pass",
        "FQoGZXIvYXdzE",
        "wJalrXUtnFEMI",
        "wJalrUriSecret",
        "jaas-s3cret",
    ] {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }
    assert!(debug.contains("s3://AKIAEXAMPLE:***@bucket/wh"), "{debug}");
}

#[test]
fn registry_credentials_never_reach_debug_output() {
    let registry = "schema_registry = \"https://reader:regS3cretPw@registry:8081\"";
    let text = GOOD
        .replace(
            "commit_interval = \"2s\"",
            &format!("commit_interval = \"2s\"\n{registry}"),
        )
        .replace(
            "dead_letter_topic = \"orders_dlq\"",
            &format!("dead_letter_topic = \"orders_dlq\"\n{registry}"),
        );
    let c = from_toml("c.toml", &text).unwrap();
    for debug in [format!("{:?}", c.cdc[0]), format!("{:?}", c.enrich[0])] {
        assert!(!debug.contains("regS3cretPw"), "{debug}");
        assert!(
            debug.contains("https://reader:***@registry:8081"),
            "{debug}"
        );
    }
    // The pipelines still get the whole URL.
    assert_eq!(
        c.enrich[0].schema_registry.as_ref().map(|u| u.expose()),
        Some("https://reader:regS3cretPw@registry:8081")
    );
}

#[test]
fn static_membership_comes_from_its_key_or_the_writer_instance() {
    let c = from_toml("c.toml", GOOD).unwrap();
    assert_eq!(c.group_instance_id(), None, "dynamic membership by default");

    let derived = GOOD.replace(
        "[warehouse]",
        "[writer]\ninstance = \"shop enricher/0\"\n\n[warehouse]",
    );
    let c = from_toml("c.toml", &derived).unwrap();
    assert_eq!(c.group_instance_id().as_deref(), Some("shop_enricher_0"));

    let explicit = derived.replace(
        "bootstrap_servers = \"localhost:9092\"",
        "bootstrap_servers = \"localhost:9092\"\ngroup_instance_id = \"lakejoin-0\"",
    );
    let c = from_toml("c.toml", &explicit).unwrap();
    assert_eq!(c.group_instance_id().as_deref(), Some("lakejoin-0"));

    let bad = GOOD.replace(
        "bootstrap_servers = \"localhost:9092\"",
        "bootstrap_servers = \"localhost:9092\"\ngroup_instance_id = \"pod 0\"",
    );
    assert_rejected(
        &bad,
        &["c.toml: kafka.group_instance_id: ' ' is not allowed"],
    );
}

#[test]
fn a_duration_without_a_unit_is_an_error() {
    // `"10"` was read as 10 ms (Paimon's rule for table options), not 10 s.
    let bad = GOOD
        .replace("commit_interval = \"2s\"", "commit_interval = \"10\"")
        .replace("delay = \"1s\"", "delay = \"1000\"");
    let err = from_toml("connectors.toml", &bad).unwrap_err().to_string();
    assert!(
        err.contains("cdc[0] (customers-cdc).commit_interval: `10` has no unit"),
        "{err}"
    );
    assert!(err.contains("`1000` has no unit"), "{err}");
}
