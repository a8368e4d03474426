//! Model test of the `full` cache: random operations against a `BTreeMap`, with forced
//! fingerprint collisions, with and without secondary indexes, and keeping a random
//! subset of the columns (what a join's `select` leaves), so the stored rows' field
//! positions differ from the table's.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::tests::{Decoded, STRING, s, schema};
use super::*;

/// Columns grp STRING, id INT, val BIGINT, name STRING, f DOUBLE; key (id, name).
/// `indexed`: secondary indexes on grp and on (val, grp). Lookups return `returned`
/// (table columns); the cache keeps those, the key and the indexes' columns.
fn model_cache(colliding: bool, indexed: bool, returned: &[usize]) -> FullCache {
    let schema = schema(
        &[
            ("grp", STRING),
            ("id", DataType::Int),
            ("val", DataType::BigInt),
            ("name", STRING),
            ("f", DataType::Double),
        ],
        &["id", "name"],
    );
    let secondary = if indexed {
        vec![vec![0], vec![2, 0]]
    } else {
        Vec::new()
    };
    let mut cache = FullCache::returning(schema, secondary, returned).unwrap();
    if colliding {
        // Four fingerprints in two shards: nearly every key and value collides.
        cache.fingerprint_mask = 0x8000_0001;
    }
    cache
}

const NAMES: [&str; 3] = ["a", "bb", "a name longer than seven"];
const GROUPS: [Option<&str>; 3] = [None, Some("x"), Some("a group name of some length")];

#[derive(Debug, Clone)]
enum Op {
    Upsert {
        id: i32,
        name: usize,
        grp: usize,
        val: Option<i64>,
        f: i32,
    },
    Remove {
        id: i32,
        name: usize,
    },
    Get {
        id: i32,
        name: usize,
        projection: Vec<usize>,
    },
    GetBy {
        index: usize,
        grp: usize,
        val: Option<i64>,
        projection: Vec<usize>,
    },
    /// More keys than a `get_many` chunk; `None` is a key with a null.
    GetMany {
        keys: Vec<Option<(i32, usize)>>,
        projection: Vec<usize>,
    },
    Compact,
    Clear,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let projection = prop::collection::vec(0usize..5, 0..6);
    prop_oneof![
        8 => (0..12i32, 0..3usize, 0..3usize, prop::option::of(0..3i64), any::<i32>())
            .prop_map(|(id, name, grp, val, f)| Op::Upsert { id, name, grp, val, f }),
        3 => (0..12i32, 0..3usize).prop_map(|(id, name)| Op::Remove { id, name }),
        4 => (0..12i32, 0..3usize, projection.clone())
            .prop_map(|(id, name, projection)| Op::Get { id, name, projection }),
        4 => (0..2usize, 0..3usize, prop::option::of(0..3i64), projection.clone())
            .prop_map(|(index, grp, val, projection)| Op::GetBy { index, grp, val, projection }),
        2 => (prop::collection::vec(prop::option::weighted(0.95, (0..12i32, 0..3usize)), 0..80), projection)
            .prop_map(|(keys, projection)| Op::GetMany { keys, projection }),
        1 => Just(Op::Compact),
        1 => Just(Op::Clear),
    ]
}

fn model_row(id: i32, name: usize, grp: usize, val: Option<i64>, f: i32) -> Row {
    vec![
        GROUPS[grp].map_or(Datum::Null, s),
        Datum::Int(id),
        val.map_or(Datum::Null, Datum::BigInt),
        s(NAMES[name]),
        Datum::Double(f64::from(f)),
    ]
}

/// Types of the model table's `columns`.
fn project_types(columns: &[usize]) -> Vec<DataType> {
    let types = [
        STRING,
        DataType::Int,
        DataType::BigInt,
        STRING,
        DataType::Double,
    ];
    columns.iter().map(|&c| types[c]).collect()
}

fn project(row: &[Datum], projection: &[usize]) -> Row {
    projection.iter().map(|&p| row[p].clone()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn behaves_like_a_sorted_map(
        ops in prop::collection::vec(op_strategy(), 1..120),
        colliding in any::<bool>(),
        indexed in any::<bool>(),
        returned in prop::collection::vec(0usize..5, 0..6),
    ) {
        let cache = model_cache(colliding, indexed, &returned);
        let mut kept: Vec<usize> = returned.clone();
        kept.extend([1, 3]);
        if indexed {
            kept.extend([0, 2]);
        }
        kept.sort_unstable();
        kept.dedup();
        // A projection of a column the cache dropped is an error, not a wrong row.
        let keeps = |projection: &[usize]| projection.iter().all(|p| kept.contains(p));
        // (id, name) orders like the primary key (INT, then STRING bytes).
        let mut model: BTreeMap<(i32, &str), Row> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Upsert { id, name, grp, val, f } => {
                    let row = model_row(id, name, grp, val, f);
                    cache.upsert(&row).unwrap();
                    model.insert((id, NAMES[name]), row);
                }
                Op::Remove { id, name } => {
                    cache.remove(&[Datum::Int(id), s(NAMES[name])]).unwrap();
                    model.remove(&(id, NAMES[name]));
                }
                Op::Get { id, name, projection } => {
                    let got = cache.get_row(&[Datum::Int(id), s(NAMES[name])], &projection);
                    if !keeps(&projection) {
                        prop_assert!(matches!(got, Err(Error::Data(_))), "{:?}", got);
                        continue;
                    }
                    let got = got.unwrap();
                    let expected = model.get(&(id, NAMES[name])).map(|r| project(r, &projection));
                    prop_assert_eq!(got, expected);
                }
                Op::GetBy { index, grp, val, projection } => {
                    let grp = GROUPS[grp].map_or(Datum::Null, s);
                    let val = val.map_or(Datum::Null, Datum::BigInt);
                    let (values, columns) = if index == 0 {
                        (vec![grp], vec![0])
                    } else {
                        (vec![val, grp], vec![2, 0])
                    };
                    let got = cache.get_by_rows(index, &values, &projection);
                    if !indexed || !keeps(&projection) {
                        prop_assert!(got.is_err(), "{:?}", got);
                        continue;
                    }
                    let got = got.unwrap();
                    let expected: Vec<Row> = model
                        .values()
                        .filter(|row| {
                            columns.iter().zip(&values).all(|(&c, v)| !v.is_null() && row[c] == *v)
                        })
                        .map(|row| project(row, &projection))
                        .collect();
                    prop_assert_eq!(got, expected);
                }
                Op::GetMany { keys, projection } => {
                    let probes: Vec<Row> = keys
                        .iter()
                        .map(|k| match k {
                            Some((id, name)) => vec![Datum::Int(*id), s(NAMES[*name])],
                            None => vec![Datum::Null, s(NAMES[0])],
                        })
                        .collect();
                    let probes: Vec<&[Datum]> = probes.iter().map(Vec::as_slice).collect();
                    let got = cache.get_rows(&probes, &projection);
                    if !keeps(&projection) {
                        prop_assert!(matches!(got, Err(Error::Data(_))), "{:?}", got);
                        continue;
                    }
                    let got = got.unwrap();
                    let expected: Vec<Option<Row>> = keys
                        .iter()
                        .map(|k| {
                            k.and_then(|(id, name)| model.get(&(id, NAMES[name])))
                                .map(|r| project(r, &projection))
                        })
                        .collect();
                    prop_assert_eq!(got, expected);
                }
                Op::Compact => cache.compact_all(),
                Op::Clear => {
                    cache.clear();
                    model.clear();
                }
            }
            prop_assert_eq!(cache.len(), model.len());
            // The stored bytes are those of the kept columns, as the test works them out.
            let bytes: usize = model
                .values()
                .map(|r| binary_row::encode(&project(r, &kept), &project_types(&kept)).unwrap().len())
                .sum();
            prop_assert_eq!(cache.binary_row_bytes(), bytes);
        }
    }
}
