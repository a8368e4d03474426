//! Which value columns of a data file are dictionary-encoded, decided from the file's
//! first rows.
//!
//! Why: the parquet crate keeps a column's dictionary until the dictionary outgrows its
//! page limit (1 MiB), so a column whose values hardly repeat within a file (timestamps,
//! prices, foreign ids) is hashed and interned value by value, only to write a
//! dictionary page as large as the plain values plus a page of indexes. In a CDC ingest
//! profile that interning was 13% of the process. parquet-mr, which Java Paimon writes
//! with, makes the decision this module makes: after a column's first page it keeps the
//! dictionary only if the dictionary and the encoded indexes are smaller than the plain
//! values (`FallbackValuesWriter`'s `isCompressionSatisfying`), and writes the rest of
//! the column plain otherwise. Here the first [`SAMPLE_ROWS`] rows (one data page) decide
//! before any value is interned, so the column is plain from its first page.
//!
//! Readers see ordinary Parquet either way: a column chunk with or without a dictionary
//! page.

use std::collections::HashSet;

use super::data_file::KeyValue;
use super::datum::Datum;

/// Rows of a file that decide its columns' encodings (parquet-mr decides on a column's
/// first page; a sample of this size sees the same repetition at a fraction of the cost).
pub(crate) const SAMPLE_ROWS: usize = 1024;

/// A value as the dictionary would tell it apart from others (floats by their bits, as
/// Parquet's dictionary compares them).
#[derive(PartialEq, Eq, Hash)]
enum Identity<'a> {
    Boolean(bool),
    Integer(i64),
    Bits(u64),
    Decimal(i128),
    Bytes(&'a [u8]),
    Timestamp(i64, u32),
}

/// A non-null value's identity and its plain-encoded size in bytes (the width of its
/// Parquet physical type; a byte array's length prefix and bytes).
fn identity_and_size(datum: &Datum) -> Option<(Identity<'_>, usize)> {
    Some(match datum {
        Datum::Null => return None,
        Datum::Boolean(b) => (Identity::Boolean(*b), 1),
        Datum::TinyInt(v) => (Identity::Integer(i64::from(*v)), 4),
        Datum::SmallInt(v) => (Identity::Integer(i64::from(*v)), 4),
        Datum::Int(v) | Datum::Date(v) => (Identity::Integer(i64::from(*v)), 4),
        Datum::BigInt(v) => (Identity::Integer(*v), 8),
        Datum::Float(v) => (Identity::Bits(u64::from(v.to_bits())), 4),
        Datum::Double(v) => (Identity::Bits(v.to_bits()), 8),
        Datum::Decimal(v) => (Identity::Decimal(*v), 16),
        Datum::String(s) => (Identity::Bytes(s.as_bytes()), 4 + s.len()),
        Datum::Bytes(b) => (Identity::Bytes(b), 4 + b.len()),
        Datum::Timestamp(t) => (Identity::Timestamp(t.millis, t.nanos_of_milli), 8),
    })
}

/// Whether a dictionary pays for table column `column` over `sample` (the first rows of
/// a file): its distinct values plus one index per value, bit-packed, take fewer bytes
/// than the values plain. A column with no value in the sample keeps its dictionary (it
/// costs nothing there).
pub(crate) fn dictionary_pays(sample: &[KeyValue], column: usize) -> bool {
    let sample = sample.get(..SAMPLE_ROWS).unwrap_or(sample);
    // foldhash: this hashes every sampled value of every column of every file written.
    let mut distinct =
        HashSet::with_capacity_and_hasher(sample.len(), foldhash::fast::RandomState::default());
    let mut values = 0usize;
    let mut plain_bytes = 0usize;
    let mut dictionary_bytes = 0usize;
    for kv in sample {
        let Some((identity, size)) = kv.row.get(column).and_then(identity_and_size) else {
            continue;
        };
        values += 1;
        plain_bytes += size;
        if distinct.insert(identity) {
            dictionary_bytes += size;
        }
    }
    if values == 0 {
        return true;
    }
    // Bits of an index into `distinct.len()` entries (at least one, as Parquet's RLE
    // encoder writes).
    let index_bits = usize::BITS - distinct.len().saturating_sub(1).leading_zeros();
    let index_bytes = (values * index_bits.max(1) as usize).div_ceil(8);
    dictionary_bytes + index_bytes < plain_bytes
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::table::datum::Timestamp;
    use crate::table::row_kind::RowKind;

    fn rows(values: impl IntoIterator<Item = Datum>) -> Vec<KeyValue> {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| KeyValue {
                sequence_number: i as i64,
                kind: RowKind::Insert,
                row: vec![Datum::Int(i as i32), v],
            })
            .collect()
    }

    #[test]
    fn repeated_values_keep_their_dictionary() {
        let statuses = ["new", "paid", "shipped", "delivered"];
        let sample = rows((0..1024).map(|i| Datum::String(statuses[i % 4].into())));
        assert!(dictionary_pays(&sample, 1));
        let quantities = rows((0..1024i32).map(|i| Datum::Int(1 + i % 5)));
        assert!(dictionary_pays(&quantities, 1));
    }

    #[test]
    fn values_that_hardly_repeat_are_written_plain() {
        let created = rows((0..1024).map(|i| {
            Datum::Timestamp(Timestamp {
                millis: 1_780_000_000_000 + i,
                nanos_of_milli: 0,
            })
        }));
        assert!(!dictionary_pays(&created, 1));
        let prices = rows((0..1024).map(|i| Datum::Double(((i * 31) % 20_000) as f64 / 100.0)));
        assert!(!dictionary_pays(&prices, 1));
        let skus = rows((0..1024).map(|i| Datum::String(format!("SKU-{:06}", i * 7919).into())));
        assert!(!dictionary_pays(&skus, 1));
    }

    #[test]
    fn only_the_sample_decides() {
        // Unique values after the first page do not matter.
        let mut sample = rows((0..1024).map(|i| Datum::BigInt(i % 2)));
        sample.extend(rows((0..5000).map(Datum::BigInt)));
        assert!(dictionary_pays(&sample, 1));
    }

    #[test]
    fn nulls_are_not_values() {
        assert!(dictionary_pays(&rows((0..100).map(|_| Datum::Null)), 1));
        assert!(dictionary_pays(&[], 1));
        // 1,000 nulls and 24 distinct values: 24 plain values against 24 entries and
        // their indexes.
        let mostly_null = rows((0..1024).map(|i| {
            if i < 1000 {
                Datum::Null
            } else {
                Datum::BigInt(i)
            }
        }));
        assert!(!dictionary_pays(&mostly_null, 1));
    }

    #[test]
    fn floats_are_told_apart_by_their_bits() {
        // -0.0 and 0.0 are two dictionary entries, as in Parquet.
        let zeros = rows((0..4).map(|i| Datum::Double(if i % 2 == 0 { 0.0 } else { -0.0 })));
        let mut distinct = HashSet::new();
        for kv in &zeros {
            distinct.insert(identity_and_size(&kv.row[1]).map(|(id, _)| id));
        }
        assert_eq!(distinct.len(), 2);
    }

    proptest! {
        /// The rule is parquet-mr's: with `d` distinct values among `n`, the dictionary
        /// is kept exactly when `d·w + ⌈n·bits(d)/8⌉ < n·w` for 8-byte values.
        #[test]
        fn the_rule_matches_its_formula(values in proptest::collection::vec(0i64..64, 1..600)) {
            let sample = rows(values.iter().copied().map(Datum::BigInt));
            let n = values.len();
            let d = values.iter().collect::<HashSet<_>>().len();
            let bits = (1..=64).find(|b| (1usize << b) >= d).unwrap_or(1);
            let expected = d * 8 + (n * bits).div_ceil(8) < n * 8;
            prop_assert_eq!(dictionary_pays(&sample, 1), expected);
        }
    }
}
