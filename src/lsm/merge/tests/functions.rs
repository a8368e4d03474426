//! Each aggregate function on its own: values, nulls, retractions, overflow.

use std::collections::BTreeMap;

use super::super::function::{AggregateFunction as F, FieldAggregator, FunctionError};
use crate::table::datum::Datum;
use crate::table::options::TableOptions;
use crate::table::types::{DataType, Field};

fn aggregator_with(function: F, data_type: DataType, options: &[(&str, &str)]) -> FieldAggregator {
    let map: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let options = TableOptions::from_map(&map).unwrap();
    let field = Field {
        id: 0,
        name: "x".into(),
        data_type,
        nullable: true,
        description: None,
    };
    FieldAggregator::new(&field, function, &options).unwrap()
}

fn aggregator(function: F, data_type: DataType) -> FieldAggregator {
    aggregator_with(function, data_type, &[])
}

/// Folds `inputs` from an empty accumulator, as one merge does.
fn fold(a: &FieldAggregator, inputs: &[Datum]) -> Datum {
    let mut taken = false;
    inputs.iter().fold(Datum::Null, |acc, input| {
        a.agg(&mut taken, acc, input).unwrap()
    })
}

fn s(text: &str) -> Datum {
    Datum::String(text.to_string().into())
}

#[test]
fn sum_skips_nulls_and_retracts_by_subtracting() {
    let a = aggregator(F::Sum, DataType::Int);
    assert_eq!(fold(&a, &[Datum::Null]), Datum::Null);
    assert_eq!(
        fold(&a, &[Datum::Int(2), Datum::Null, Datum::Int(5)]),
        Datum::Int(7)
    );
    assert_eq!(
        a.retract(Datum::Int(7), &Datum::Int(5)).unwrap(),
        Datum::Int(2)
    );
    // Retracting from nothing gives the negation; retracting null changes nothing.
    assert_eq!(
        a.retract(Datum::Null, &Datum::Int(5)).unwrap(),
        Datum::Int(-5)
    );
    assert_eq!(
        a.retract(Datum::Int(3), &Datum::Null).unwrap(),
        Datum::Int(3)
    );
    let d = aggregator(F::Sum, DataType::Double);
    assert_eq!(
        fold(&d, &[Datum::Double(0.5), Datum::Double(0.25)]),
        Datum::Double(0.75)
    );
}

#[test]
fn integer_overflow_is_an_error_naming_the_column_not_a_panic() {
    let a = aggregator(F::Sum, DataType::Int);
    let mut taken = false;
    let err = a
        .agg(&mut taken, Datum::Int(i32::MAX), &Datum::Int(1))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`x`") && err.contains("sum") && err.contains("overflow"),
        "{err}"
    );
    assert!(a.retract(Datum::Null, &Datum::Int(i32::MIN)).is_err());
    assert!(a.retract(Datum::Int(i32::MIN), &Datum::Int(1)).is_err());
    let t = aggregator(F::Sum, DataType::TinyInt);
    assert!(
        t.agg(&mut taken, Datum::TinyInt(100), &Datum::TinyInt(100))
            .is_err()
    );
    let p = aggregator(F::Product, DataType::BigInt);
    assert!(
        p.agg(&mut taken, Datum::BigInt(i64::MAX), &Datum::BigInt(2))
            .is_err()
    );
    let err = p
        .retract(Datum::BigInt(6), &Datum::BigInt(0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("division by zero"), "{err}");
    assert!(
        p.retract(Datum::BigInt(i64::MIN), &Datum::BigInt(-1))
            .is_err()
    );
}

#[test]
fn decimal_sum_beyond_the_precision_becomes_null() {
    let a = aggregator(
        F::Sum,
        DataType::Decimal {
            precision: 5,
            scale: 2,
        },
    );
    // 999.99 + 0.01 needs six digits.
    assert_eq!(
        fold(&a, &[Datum::Decimal(99_999), Datum::Decimal(1)]),
        Datum::Null
    );
    assert_eq!(
        fold(&a, &[Datum::Decimal(12_345), Datum::Decimal(-345)]),
        Datum::Decimal(12_000)
    );
    assert_eq!(
        a.retract(Datum::Null, &Datum::Decimal(250)).unwrap(),
        Datum::Decimal(-250)
    );
}

#[test]
fn product_multiplies_and_retracts_by_dividing() {
    let a = aggregator(F::Product, DataType::Int);
    assert_eq!(
        fold(&a, &[Datum::Int(3), Datum::Null, Datum::Int(-4)]),
        Datum::Int(-12)
    );
    // Java's integer division truncates toward zero.
    assert_eq!(
        a.retract(Datum::Int(-7), &Datum::Int(2)).unwrap(),
        Datum::Int(-3)
    );
    assert_eq!(a.retract(Datum::Null, &Datum::Int(2)).unwrap(), Datum::Null);
    let f = aggregator(F::Product, DataType::Double);
    assert_eq!(
        f.retract(Datum::Double(1.0), &Datum::Double(0.0)).unwrap(),
        Datum::Double(f64::INFINITY)
    );
}

#[test]
fn decimal_product_rounds_half_up_and_division_must_terminate() {
    let a = aggregator(
        F::Product,
        DataType::Decimal {
            precision: 10,
            scale: 2,
        },
    );
    // 1.25 * 1.10 = 1.375 -> 1.38; -1.25 * 1.10 -> -1.38 (half away from zero).
    assert_eq!(
        fold(&a, &[Datum::Decimal(125), Datum::Decimal(110)]),
        Datum::Decimal(138)
    );
    assert_eq!(
        fold(&a, &[Datum::Decimal(-125), Datum::Decimal(110)]),
        Datum::Decimal(-138)
    );
    // 3.00 / 1.50 = 2.00; 1.00 / 3.00 has no finite expansion (Java throws too).
    assert_eq!(
        a.retract(Datum::Decimal(300), &Datum::Decimal(150))
            .unwrap(),
        Datum::Decimal(200)
    );
    let err = a
        .retract(Datum::Decimal(100), &Datum::Decimal(300))
        .unwrap_err()
        .to_string();
    assert!(err.contains("non-terminating"), "{err}");
    assert!(a.retract(Datum::Decimal(100), &Datum::Decimal(0)).is_err());
    // Full precision 38 still multiplies without overflowing the intermediate value.
    let wide = aggregator(
        F::Product,
        DataType::Decimal {
            precision: 38,
            scale: 37,
        },
    );
    let nine = 9 * 10i128.pow(37);
    assert_eq!(
        fold(&wide, &[Datum::Decimal(nine), Datum::Decimal(nine)]),
        Datum::Null,
        "81 does not fit DECIMAL(38, 37)"
    );
    let half = 5 * 10i128.pow(36);
    assert_eq!(
        fold(&wide, &[Datum::Decimal(half), Datum::Decimal(half)]),
        Datum::Decimal(25 * 10i128.pow(35))
    );
}

#[test]
fn min_and_max_use_the_natural_order_and_skip_nulls() {
    let max = aggregator(F::Max, DataType::Varchar(10));
    let min = aggregator(F::Min, DataType::Varchar(10));
    let inputs = [s("b"), Datum::Null, s("c"), s("a")];
    assert_eq!(fold(&max, &inputs), s("c"));
    assert_eq!(fold(&min, &inputs), s("a"));
    // Java's Double.compare: NaN is the largest value.
    let dmax = aggregator(F::Max, DataType::Double);
    let got = fold(&dmax, &[Datum::Double(1.0), Datum::Double(f64::NAN)]);
    assert!(matches!(got, Datum::Double(v) if v.is_nan()));
    let err = max.retract(s("c"), &s("c")).unwrap_err().to_string();
    assert!(
        err.contains("`x`") && err.contains("max") && err.contains("ignore-retract"),
        "{err}"
    );
}

#[test]
fn last_values_and_their_retractions() {
    let last = aggregator(F::LastValue, DataType::Int);
    assert_eq!(fold(&last, &[Datum::Int(1), Datum::Null]), Datum::Null);
    assert_eq!(
        last.retract(Datum::Int(1), &Datum::Int(9)).unwrap(),
        Datum::Null
    );
    let non_null = aggregator(F::LastNonNullValue, DataType::Int);
    assert_eq!(
        fold(&non_null, &[Datum::Int(1), Datum::Null]),
        Datum::Int(1)
    );
    assert_eq!(
        non_null.retract(Datum::Int(1), &Datum::Int(9)).unwrap(),
        Datum::Null
    );
    assert_eq!(
        non_null.retract(Datum::Int(1), &Datum::Null).unwrap(),
        Datum::Int(1)
    );
}

#[test]
fn first_values_keep_what_came_first_in_one_merge() {
    let first = aggregator(F::FirstValue, DataType::Int);
    assert_eq!(fold(&first, &[Datum::Null, Datum::Int(2)]), Datum::Null);
    let non_null = aggregator(F::FirstNonNullValue, DataType::Int);
    assert_eq!(
        fold(&non_null, &[Datum::Null, Datum::Int(2), Datum::Int(3)]),
        Datum::Int(2)
    );
    assert!(first.retract(Datum::Int(1), &Datum::Int(1)).is_err());
}

#[test]
fn booleans() {
    let and = aggregator(F::BoolAnd, DataType::Boolean);
    let or = aggregator(F::BoolOr, DataType::Boolean);
    let inputs = [Datum::Boolean(true), Datum::Null, Datum::Boolean(false)];
    assert_eq!(fold(&and, &inputs), Datum::Boolean(false));
    assert_eq!(fold(&or, &inputs), Datum::Boolean(true));
}

#[test]
fn listagg_joins_non_blank_values() {
    let a = aggregator(F::Listagg, DataType::Varchar(100));
    assert_eq!(
        fold(&a, &[s("a"), Datum::Null, s("  "), s("b"), s("a")]),
        s("a,b,a")
    );
    let custom = aggregator_with(
        F::Listagg,
        DataType::Varchar(100),
        &[("fields.x.list-agg-delimiter", " | ")],
    );
    assert_eq!(fold(&custom, &[s("a"), s("b")]), s("a | b"));
    let distinct = aggregator_with(
        F::Listagg,
        DataType::Varchar(100),
        &[("fields.x.distinct", "true")],
    );
    assert_eq!(
        fold(&distinct, &[s("a,b"), s("b,c,,a"), s("d")]),
        s("a,b,c,d")
    );
    assert!(a.retract(s("a"), &s("a")).is_err());
}

#[test]
fn ignore_retract_leaves_the_column_unchanged() {
    let a = aggregator_with(
        F::Max,
        DataType::Int,
        &[("fields.x.ignore-retract", "true")],
    );
    assert!(a.can_retract());
    assert_eq!(
        a.retract(Datum::Int(5), &Datum::Int(5)).unwrap(),
        Datum::Int(5)
    );
}

#[test]
fn function_names_follow_paimon() {
    assert_eq!(F::parse("first_not_null_value"), Ok(F::FirstNonNullValue));
    assert_eq!(F::parse("count"), Err(FunctionError::CountRemoved));
    assert!(F::parse("count").unwrap_err().to_string().contains("sum"));
    assert_eq!(
        F::parse("rbm64"),
        Err(FunctionError::NotImplemented("rbm64".into()))
    );
    assert!(
        F::parse("rbm64")
            .unwrap_err()
            .to_string()
            .contains("does not implement")
    );
    assert!(
        F::parse("median")
            .unwrap_err()
            .to_string()
            .contains("unknown")
    );
    for f in [F::Sum, F::Listagg, F::BoolOr, F::FirstNonNullValue] {
        assert_eq!(F::parse(f.name()), Ok(f));
    }
}
