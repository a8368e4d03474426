//! Decoding JSON facts on one core: lakejoin's `FactDecoder` against the fastest
//! `serde_json` ways to do the same job, on 1,000,000 of the throughput benchmark's orders
//! (10 fields, about 200 bytes).
//!
//! An enrich pipeline decodes a JSON fact only to read a field or two and splice the
//! joined columns into its bytes, so what it needs is each top-level field's value text.
//! The baselines:
//! - `serde_json` raw fields: the same list (`&str` key, `&RawValue` value) through
//!   `serde_json`'s deserializer, the way lakejoin found them before its own scanner (and
//!   still does for the shapes the scanner leaves to it);
//! - `serde_json` tree: a `Value` of the whole object, what an enricher that rewrites the
//!   fact as a tree starts from.
//!
//! Each figure is the best of five passes (the least disturbed by the rest of a shared
//! machine). `cargo bench --bench fact_decode` (ORDERS=… to change the count).

use std::fmt;
use std::time::Instant;

use lakejoin::codec::{Fact, FactDecoder, Format, KafkaRecord};
use serde_json::Value;
use serde_json::value::RawValue;

const PASSES: usize = 5;

/// The throughput benchmark's data: its orders are the facts decoded here.
#[path = "throughput/data.rs"]
#[allow(dead_code)]
mod data;

/// A JSON object's top-level fields as `serde_json` finds them without parsing values.
struct RawFields<'a>(Vec<(&'a str, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for RawFields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = RawFields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<RawFields<'de>, M::Error> {
                let mut fields = Vec::with_capacity(16);
                while let Some(entry) = map.next_entry::<&'de str, &'de RawValue>()? {
                    fields.push(entry);
                }
                Ok(RawFields(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// Nanoseconds per order of the best of [`PASSES`] passes of `decode` over `orders`;
/// `decode` returns how many fields it found, which must be 10 for every order.
fn best(orders: &[String], decode: impl Fn(&str) -> usize) -> f64 {
    (0..PASSES)
        .map(|_| {
            let t = Instant::now();
            let mut fields = 0;
            for order in orders {
                fields += decode(std::hint::black_box(order));
            }
            let ns = t.elapsed().as_nanos() as f64 / orders.len() as f64;
            assert_eq!(fields, 10 * orders.len(), "every order has 10 fields");
            ns
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let count: u64 = std::env::var("ORDERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let orders: Vec<String> = (1..=count)
        .map(|n| data::order(n, 1 + (n * 7) % 100_000).1)
        .collect();
    let bytes: usize = orders.iter().map(String::len).sum();
    println!(
        "{count} orders, {:.0} bytes each on average; best of {PASSES} passes, one core",
        bytes as f64 / count as f64
    );
    let decoder = FactDecoder::new(Format::Json, None).expect("json decoder");
    let lakejoin = best(&orders, |order| {
        let record = KafkaRecord {
            topic: "orders",
            partition: 0,
            offset: 0,
            timestamp_ms: None,
            key: None,
            payload: Some(order.as_bytes()),
        };
        match decoder.decode(&record) {
            // The raw form (the payload kept as bytes) is what the enrich path works on.
            Ok(Some(Fact::Raw(_))) => 10,
            other => panic!("not decoded to a raw fact: {other:?}"),
        }
    });
    let raw = best(&orders, |order| {
        serde_json::from_str::<RawFields>(order)
            .expect("an object")
            .0
            .len()
    });
    let tree = best(&orders, |order| {
        match serde_json::from_str::<Value>(order).expect("an object") {
            Value::Object(map) => map.len(),
            _ => 0,
        }
    });
    println!("| decoder | ns per order | CPU-s per M orders | × lakejoin's time |");
    println!("| --- | ---: | ---: | ---: |");
    for (name, ns) in [
        ("lakejoin `FactDecoder` (JSON)", lakejoin),
        ("`serde_json` raw fields", raw),
        ("`serde_json` tree (`Value`)", tree),
    ] {
        println!(
            "| {name} | {ns:.0} | {:.3} | {:.2} |",
            ns / 1000.0,
            ns / lakejoin
        );
    }
}
