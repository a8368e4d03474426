//! The customers-and-orders pipelines most Kafka integration tests run, from one
//! connectors.toml (`integration-tests/fixtures/customers_orders.toml`) instead of a copy
//! pasted into each test: `shop.customers(id INT, name STRING)` fed by a CDC topic, and
//! orders enriched with `customer_name` by `customer_id`.

use super::broker::{self, unique};

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

    /// The pipelines on these topics: consumer group `group` (made unique), customers
    /// decoded as `cdc_format`; `kafka_extra` lands in `[kafka]`, `enrich_extra` in the
    /// `[[enrich]]` table.
    pub fn config(
        &self,
        group: &str,
        cdc_format: &str,
        kafka_extra: &str,
        enrich_extra: &str,
    ) -> String {
        CUSTOMERS_ORDERS
            .replace("{group}", &unique(group))
            .replace("{kafka_extra}", kafka_extra)
            .replace("{customers}", &self.customers)
            .replace("{cdc_format}", cdc_format)
            .replace("{orders}", &self.orders)
            .replace("{enriched}", &self.enriched)
            .replace("{enrich_extra}", enrich_extra)
    }
}
