//! Test fixtures shared with the layers above: a valid `connectors.toml` (the
//! orders/customers scenario) that tests change one key at a time.

/// Kafka, a warehouse, the customers table fed by Debezium CDC, and orders enriched with
/// it; every pipeline key the tests change is spelled here once.
pub(crate) const GOOD: &str = r#"
[kafka]
bootstrap_servers = "localhost:9092"
[kafka.properties]
"security.protocol" = "plaintext"

[warehouse]
uri = "file:///tmp/wh"

[[table]]
name = "shop.customers"
columns = [
  { name = "id", type = "INT" },
  { name = "name", type = "STRING" },
  { name = "updated_at", type = "TIMESTAMP(3)" },
]
primary_key = ["id"]
buckets = 4
sequence_field = ["updated_at"]

[[cdc]]
name = "customers-cdc"
topics = ["dbserver1.shop.customers"]
format = "debezium-json"
table = "shop.customers"
commit_interval = "2s"

[[enrich]]
name = "orders-enriched"
topics = ["orders"]
output = { topic = "orders_enriched", key = "order_id" }
dead_letter_topic = "orders_dlq"

[[enrich.join]]
table = "shop.customers"
on = { customer_id = "id" }
select = ["name"]
prefix = "customer_"
cache_expire_after_write = "30m"
retry = { on = "miss", delay = "1s", max_attempts = 10 }
"#;
