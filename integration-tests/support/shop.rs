//! The customers-and-orders pipelines most Kafka integration tests run, from one
//! connectors.toml (`integration-tests/fixtures/customers_orders.toml`) instead of a copy
//! pasted into each test: `shop.customers(id INT, name STRING)` fed by an upsert-JSON CDC
//! topic, and orders enriched with `customer_name` by `customer_id`. A test changes it
//! through [`ShopConfig`]'s named overrides, so what it runs is the fixture plus the
//! overrides it lists.

use toml::Value;

use super::broker::{self, unique};
use super::fixture::Config;

/// The fixture, with `{bootstrap}` and `{warehouse}` left for `Deployment` to fill.
const CUSTOMERS_ORDERS: &str = include_str!("../fixtures/customers_orders.toml");

/// The topics of one run of the pipelines, unique per test.
pub struct ShopTopics {
    pub customers: String,
    pub orders: String,
    pub enriched: String,
}

impl ShopTopics {
    /// Unique names, not created yet.
    pub fn named() -> Self {
        ShopTopics {
            customers: unique("customers"),
            orders: unique("orders"),
            enriched: unique("orders-enriched"),
        }
    }

    /// Unique topics, created with `customer_partitions` partitions for the CDC topic and
    /// `order_partitions` for the orders and the output.
    pub fn create(customer_partitions: i32, order_partitions: i32) -> Self {
        let topics = ShopTopics::named();
        broker::create_topics(&[
            (&topics.customers, customer_partitions),
            (&topics.orders, order_partitions),
            (&topics.enriched, order_partitions),
        ]);
        topics
    }

    /// The fixture's pipelines on these topics, in consumer group `group` (made unique).
    pub fn pipelines(&self, group: &str) -> ShopConfig {
        ShopConfig(
            Config::fixture(CUSTOMERS_ORDERS)
                .name("group", &unique(group))
                .name("customers", &self.customers)
                .name("orders", &self.orders)
                .name("enriched", &self.enriched),
        )
    }
}

/// The fixture with a test's overrides, each naming the section it changes.
#[derive(Clone)]
pub struct ShopConfig(Config);

impl ShopConfig {
    /// `[kafka] key = value` (`group_id`, `group_instance_id`).
    pub fn kafka(self, key: &str, value: impl Into<Value>) -> Self {
        self.set("kafka", key, value)
    }

    /// `"key" = "value"` in `[kafka.properties]`, the librdkafka properties.
    pub fn kafka_property(self, key: &str, value: &str) -> Self {
        self.set("kafka.properties", key, value)
    }

    /// Each `(key, value)` in `[kafka.properties]`.
    pub fn kafka_properties(self, properties: &[(impl AsRef<str>, impl AsRef<str>)]) -> Self {
        properties.iter().fold(self, |config, (key, value)| {
            config.kafka_property(key.as_ref(), value.as_ref())
        })
    }

    /// A key of the `shop.customers` `[[table]]` (`buckets`, `sequence_field`).
    pub fn customers(self, key: &str, value: impl Into<Value>) -> Self {
        self.set("table[name=shop.customers]", key, value)
    }

    /// One more column of `shop.customers`, after the fixture's `id` and `name`.
    pub fn customer_column(self, name: &str, type_: &str) -> Self {
        let column = toml::Table::from_iter([
            ("name".to_owned(), Value::from(name)),
            ("type".to_owned(), Value::from(type_)),
        ]);
        ShopConfig(self.0.push(
            "table[name=shop.customers]",
            "columns",
            Value::Table(column),
        ))
    }

    /// A key of the `customers-cdc` `[[cdc]]` pipeline (`format`, `commit_interval`).
    pub fn cdc(self, key: &str, value: impl Into<Value>) -> Self {
        self.set("cdc[name=customers-cdc]", key, value)
    }

    /// A key of the `orders-enriched` `[[enrich]]` pipeline (`ordered`,
    /// `dead_letter_topic`).
    pub fn enrich(self, key: &str, value: impl Into<Value>) -> Self {
        self.set("enrich[name=orders-enriched]", key, value)
    }

    /// A key of the `orders-enriched` pipeline's join with `shop.customers` (`select`,
    /// `cache`, `retry`).
    pub fn join(self, key: &str, value: impl Into<Value>) -> Self {
        self.set(
            "enrich[name=orders-enriched].join[table=shop.customers]",
            key,
            value,
        )
    }

    /// A key of any other section (`observe`, `run`; paths as `Config::set` takes them).
    pub fn set(self, path: &str, key: &str, value: impl Into<Value>) -> Self {
        ShopConfig(self.0.set(path, key, value))
    }

    /// `{placeholder}` → `value` in the strings of a fragment given to
    /// [`ShopConfig::merge`] or [`ShopConfig::replace`] (its own topics).
    pub fn name(self, placeholder: &str, value: &str) -> Self {
        ShopConfig(self.0.name(placeholder, value))
    }

    /// Adds a fragment's sections and pipelines (see `Config::merge`).
    pub fn merge(self, fragment: &str) -> Self {
        ShopConfig(self.0.merge(fragment))
    }

    /// Replaces the fixture's top-level keys the fragment has (see `Config::replace`).
    pub fn replace(self, fragment: &str) -> Self {
        ShopConfig(self.0.replace(fragment))
    }

    /// The config text, for `Deployment`.
    pub fn build(&self) -> String {
        self.0.build()
    }
}
