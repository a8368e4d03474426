//! The 8-column benchmark table shared by the benches: schema, rows, keys, percentiles.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use lakejoin::table::datum::{Datum, Row, Timestamp};
use lakejoin::table::schema::TableSchema;
use lakejoin::table::types::{DataType, MAX_LENGTH};

const CITIES: [&str; 8] = [
    "zurich", "basel", "geneva", "bern", "lausanne", "lugano", "chur", "sion",
];

pub fn schema() -> TableSchema {
    TableSchema::new(
        vec![
            ("id".into(), DataType::BigInt, false),
            ("name".into(), DataType::Varchar(MAX_LENGTH), true),
            ("city".into(), DataType::Varchar(MAX_LENGTH), true),
            ("amount".into(), DataType::Double, true),
            ("qty".into(), DataType::Int, true),
            ("updated_at".into(), DataType::Timestamp(3), true),
            ("active".into(), DataType::Boolean, true),
            ("score".into(), DataType::BigInt, true),
        ],
        vec![],
        vec!["id".into()],
        BTreeMap::from([("bucket".to_string(), "4".to_string())]),
    )
    .expect("schema")
}

pub fn row(id: i64, version: i64) -> Row {
    vec![
        Datum::BigInt(id),
        Datum::String(format!("customer-{id:08}").into()),
        Datum::String(CITIES[(id % 8) as usize].to_string().into()),
        Datum::Double(id as f64 * 0.25 + version as f64),
        Datum::Int((id % 1000) as i32),
        Datum::Timestamp(Timestamp {
            millis: 1_700_000_000_000 + id * 1000 + version,
            nanos_of_milli: 0,
        }),
        Datum::Boolean(id % 3 == 0),
        Datum::BigInt(id * 7 + version),
    ]
}

/// A deterministic pseudo-random key sequence (xorshift), so runs are comparable.
pub fn keys(n: usize, rows: i64, seed: u64) -> Vec<i64> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % rows as u64) as i64
        })
        .collect()
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
