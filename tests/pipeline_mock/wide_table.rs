//! Three topics fill the columns of one partial-update table through one writer.

use super::*;

const WIDE: &str = r#"
[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "wide"

[warehouse]
uri = "{warehouse}"

[[table]]
name = "shop.profile"
columns = [
  { name = "customer_id", type = "INT" },
  { name = "email", type = "STRING" },
  { name = "tier", type = "STRING" },
  { name = "lifetime_value", type = "DECIMAL(12, 2)" },
]
primary_key = ["customer_id"]
buckets = 2
merge_engine = "partial-update"
[table.options]
"partial-update.ignore-delete" = "true"

[[cdc]]
name = "emails"
topics = ["emails"]
format = "upsert-json"
table = "shop.profile"
commit_interval = "200ms"

[[cdc]]
name = "tiers"
topics = ["tiers"]
format = "upsert-json"
table = "shop.profile"
commit_interval = "200ms"

[[cdc]]
name = "values"
topics = ["values"]
format = "json"
table = "shop.profile"
commit_interval = "200ms"
"#;

/// Three topics fill the columns of one partial-update table through one writer, and each
/// pipeline's offsets are stored in the table's snapshots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_topics_fill_one_wide_partial_update_table() {
    let cluster = MockCluster::new(1).unwrap();
    for t in ["emails", "tiers", "values"] {
        cluster.create_topic(t, 1, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let text = WIDE
        .replace("{bootstrap}", &bootstrap)
        .replace("{warehouse}", &dir.path().display().to_string());
    let config = lakejoin::config::from_toml("test", &text).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    send(
        &producer,
        "emails",
        r#"{"customer_id":1}"#,
        r#"{"customer_id":1,"email":"ada@example.com"}"#,
    )
    .await;
    send(
        &producer,
        "emails",
        r#"{"customer_id":2}"#,
        r#"{"customer_id":2,"email":"bob@example.com"}"#,
    )
    .await;
    send(
        &producer,
        "tiers",
        r#"{"customer_id":1}"#,
        r#"{"customer_id":1,"tier":"gold"}"#,
    )
    .await;
    send(
        &producer,
        "values",
        "1",
        r#"{"customer_id":1,"lifetime_value":"1234.50"}"#,
    )
    .await;
    send(
        &producer,
        "values",
        "2",
        r#"{"customer_id":2,"lifetime_value":"7"}"#,
    )
    .await;
    let running = lakejoin::pipeline::start(config).await.unwrap();
    let warehouse = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let id = TableIdentifier::parse("shop.profile").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let expected = vec![
        vec![
            Datum::Int(1),
            Datum::String("ada@example.com".into()),
            Datum::String("gold".into()),
            Datum::Decimal(123_450),
        ],
        vec![
            Datum::Int(2),
            Datum::String("bob@example.com".into()),
            Datum::Null,
            Datum::Decimal(700),
        ],
    ];
    loop {
        if let Ok(table) = Table::open(&warehouse, &id).await
            && scan(&table, None, &ScanFilter::default()).await.unwrap() == expected
        {
            // The writer's own snapshots carry the offsets (compactions commit as another user).
            let user = lakejoin::pipeline::cdc::commit_user("wide", "shop.profile");
            let snapshot = table.latest_snapshot_of_user(&user).await.unwrap().unwrap();
            let properties = snapshot.properties.unwrap_or_default();
            for pipeline in ["emails", "tiers", "values"] {
                assert!(
                    properties.contains_key(&format!("lakejoin.offsets.{pipeline}")),
                    "{properties:?}"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the wide table never held the merged rows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.shutdown().await.unwrap();
}
