//! Test helpers shared by the table layer and the layers above it: small schemas, hex
//! byte images, and the format doc's example partition, so each test states only what
//! it is about.

use std::collections::BTreeMap;

use super::datum::Datum;
use super::schema::TableSchema;
use super::schema_change::SchemaChange;
use super::types::{DataType, MAX_LENGTH};

/// A primary-key table of `columns` (nullable unless they are part of `primary_key`)
/// with `options`, unpartitioned.
pub(crate) fn keyed_schema(
    columns: &[(&str, DataType)],
    primary_key: &[&str],
    options: &[(&str, &str)],
) -> TableSchema {
    TableSchema::new(
        columns
            .iter()
            .map(|(name, ty)| (name.to_string(), *ty, true))
            .collect(),
        vec![],
        primary_key.iter().map(|k| k.to_string()).collect(),
        options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
    .expect("a valid test schema")
}

/// Both kinds of schema change, for a table with an `age INT` column: `age` widened to
/// BIGINT, and a nullable `city VARCHAR(32)` added.
pub(crate) fn widen_age_add_city() -> Vec<SchemaChange> {
    vec![
        SchemaChange::WidenColumn {
            name: "age".into(),
            data_type: DataType::BigInt,
        },
        SchemaChange::AddColumn {
            name: "city".into(),
            data_type: DataType::Varchar(32),
        },
    ]
}

/// The bytes written as hex in `text`; white space (grouping) is skipped.
pub(crate) fn unhex(text: &str) -> Vec<u8> {
    let clean: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    clean
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// The format doc's example partition (INT, DATE, STRING, BOOLEAN) =
/// (7, 2024-01-01, "a b/c=d", true): a string that needs escaping in a path.
pub(crate) fn example_partition() -> ([DataType; 4], [Datum; 4]) {
    (
        [
            DataType::Int,
            DataType::Date,
            DataType::Varchar(MAX_LENGTH),
            DataType::Boolean,
        ],
        [
            Datum::Int(7),
            Datum::Date(19723),
            Datum::String("a b/c=d".into()),
            Datum::Boolean(true),
        ],
    )
}
