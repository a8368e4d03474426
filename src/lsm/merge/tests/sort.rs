//! The sort of a flush: ordering by the first key column's order prefix first
//! (`order_prefix`) must give exactly the order the plain comparison gives.

use proptest::prelude::*;

use super::*;
use crate::table::datum::{Timestamp, order_prefix};

/// Any datum, weighted towards the values where a prefix could go wrong: nulls, the
/// ends of each range, strings and bytes sharing their first 8 bytes.
fn datum() -> impl Strategy<Value = Datum> {
    let text = prop_oneof!["[ab]{0,3}", "abcdefgh[a-c]{0,3}", "abcdefg", "\\PC{0,12}",];
    prop_oneof![
        Just(Datum::Null),
        any::<bool>().prop_map(Datum::Boolean),
        any::<i8>().prop_map(Datum::TinyInt),
        any::<i16>().prop_map(Datum::SmallInt),
        prop_oneof![any::<i32>(), -3..3i32, Just(i32::MIN), Just(i32::MAX)].prop_map(Datum::Int),
        prop_oneof![any::<i64>(), -3..3i64, Just(i64::MIN), Just(i64::MAX)].prop_map(Datum::BigInt),
        any::<f32>().prop_map(Datum::Float),
        prop_oneof![any::<f64>(), Just(-0.0), Just(f64::NAN)].prop_map(Datum::Double),
        prop_oneof![any::<i128>(), -3..3i128, Just(i128::MIN)].prop_map(Datum::Decimal),
        text.prop_map(|s| Datum::String(s.into())),
        proptest::collection::vec(prop_oneof![Just(0u8), Just(255u8), any::<u8>()], 0..10)
            .prop_map(Datum::Bytes),
        any::<i32>().prop_map(Datum::Date),
        (prop_oneof![any::<i64>(), -2..2i64], 0u32..1_000_000).prop_map(|(millis, nanos)| {
            Datum::Timestamp(Timestamp {
                millis,
                nanos_of_milli: nanos,
            })
        }),
    ]
}

/// One column's datums are all of one type, or null.
fn same_type_pair() -> impl Strategy<Value = (Datum, Datum)> {
    (datum(), datum(), any::<bool>()).prop_map(|(a, b, null_b)| {
        let b = if null_b {
            Datum::Null
        } else if std::mem::discriminant(&a) == std::mem::discriminant(&b) {
            b
        } else {
            a.clone()
        };
        (a, b)
    })
}

/// `order_prefix` orders `a` and `b` as `compare_datums` does, or ties them.
fn prefixes_agree(a: &Datum, b: &Datum) -> Result<(), TestCaseError> {
    let (pa, pb) = (order_prefix(a), order_prefix(b));
    match compare_datums(a, b) {
        Ordering::Less => prop_assert!(pa <= pb, "{a:?} < {b:?} but {pa:?} > {pb:?}"),
        Ordering::Equal => prop_assert_eq!(pa, pb),
        Ordering::Greater => prop_assert!(pa >= pb, "{a:?} > {b:?} but {pa:?} < {pb:?}"),
    }
    Ok(())
}

proptest! {
    /// `a < b` implies `prefix(a) <= prefix(b)`, and equal datums have equal prefixes,
    /// for any two datums (mixed types included).
    #[test]
    fn the_order_prefix_never_contradicts_the_order(a in datum(), b in datum()) {
        prefixes_agree(&a, &b)?;
    }

    #[test]
    fn the_order_prefix_never_contradicts_the_order_within_a_type((a, b) in same_type_pair()) {
        prefixes_agree(&a, &b)?;
    }

    /// The sort with prefixes puts changes (two-column keys, repeated keys, sequence
    /// numbers out of order) exactly where the plain stable sort puts them.
    #[test]
    fn sorting_by_prefix_first_is_the_plain_sort(
        keys in proptest::collection::vec((datum(), 0..3i32), 0..40),
        by_field: bool,
    ) {
        let (schema, options) = table(
            &[
                ("k1", DataType::BigInt, false),
                ("k2", DataType::Int, false),
                ("seq", DataType::Int, true),
            ],
            &["k1", "k2"],
            if by_field { &[SEQUENCE_BY_SEQ][..] } else { &[] },
        );
        let order = SequenceOrder::new(&schema, &options).unwrap();
        let key_indices = [0, 1];
        let rows: Vec<KeyValue> = keys
            .into_iter()
            .enumerate()
            .map(|(i, (k1, k2))| {
                let seq = Datum::Int((i as i32 * 7) % 5);
                version(i as i64 % 4, RowKind::Insert, vec![k1, Datum::Int(k2), seq])
            })
            .collect();
        let mut plain = rows.clone();
        plain.sort_by(|a, b| key_order(a, b, &key_indices).then_with(|| order.compare(a, b)));
        // Compared as text: a NaN key is not equal to itself.
        let text = |rows: &[KeyValue]| format!("{rows:?}");
        prop_assert_eq!(text(&sort_changes(rows, &key_indices, &order)), text(&plain));
    }
}
