//! Partial-update sequence groups: each group of columns follows its own sequence.

use super::{try_engine, version};
use crate::lsm::merge::{Admission, MergeEngine, RetractionRefused};
use crate::table::data_file::KeyValue;
use crate::table::datum::Datum;
use crate::table::row_kind::RowKind::{self, Delete, Insert, UpdateBefore};
use crate::table::types::DataType;

/// k, a, b (group of s1), c (group of s2), s1, s2, free (no group).
fn columns() -> Vec<(&'static str, DataType, bool)> {
    let mut cols = vec![("k", DataType::Int, false)];
    for name in ["a", "b", "c", "s1", "s2", "free"] {
        cols.push((name, DataType::Int, true));
    }
    cols
}

const GROUPS: [(&str, &str); 3] = [
    ("merge-engine", "partial-update"),
    ("fields.s1.sequence-group", "a,b"),
    ("fields.s2.sequence-group", "c"),
];

fn engine(extra: &[(&str, &str)]) -> MergeEngine {
    try_engine(&columns(), &["k"], &[GROUPS.as_slice(), extra].concat())
        .unwrap()
        .0
}

/// [a, b, c, s1, s2, free] for key 1.
fn row(values: [Option<i32>; 6]) -> Vec<Datum> {
    std::iter::once(Datum::Int(1))
        .chain(values.iter().map(|v| v.map_or(Datum::Null, Datum::Int)))
        .collect()
}

/// A version of key 1 with [a, b, c, s1, s2, free] = `values`.
fn kv(seq: i64, kind: RowKind, values: [Option<i32>; 6]) -> KeyValue {
    version(seq, kind, row(values))
}

#[test]
fn each_group_follows_its_own_sequence() {
    let merged = engine(&[])
        .merge(&[
            kv(0, Insert, [Some(1), Some(1), None, Some(5), None, None]),
            kv(1, Insert, [None, None, Some(10), None, Some(3), None]),
            // Older for group s1: ignored, although it arrives later.
            kv(2, Insert, [Some(2), None, None, Some(4), None, None]),
            // Newer for s1: the group takes all its values, nulls included.
            kv(3, Insert, [Some(3), None, None, Some(6), None, Some(7)]),
            // Equal sequence for s2 also wins.
            kv(4, Insert, [None, None, None, None, Some(3), None]),
        ])
        .unwrap()
        .unwrap();
    assert_eq!(
        merged.row,
        row([Some(3), None, None, Some(6), Some(3), Some(7)])
    );
    assert_eq!(merged.kind, Insert);
    assert_eq!(merged.sequence_number, 4);
}

#[test]
fn several_sequence_fields_compare_in_order() {
    let cols = columns();
    let (engine, _) = try_engine(
        &cols,
        &["k"],
        &[
            ("merge-engine", "partial-update"),
            ("fields.s1,s2.sequence-group", "a"),
        ],
    )
    .unwrap();
    let merged = engine
        .merge(&[
            kv(0, Insert, [Some(1), None, None, Some(1), Some(5), None]),
            kv(1, Insert, [Some(2), None, None, Some(1), Some(4), None]),
            kv(2, Insert, [Some(3), None, None, Some(2), None, None]),
        ])
        .unwrap()
        .unwrap();
    assert_eq!(merged.row, row([Some(3), None, None, Some(2), None, None]));
}

#[test]
fn a_retraction_clears_the_groups_it_wins() {
    let engine = engine(&[]);
    assert_eq!(engine.admit(Delete), Ok(Admission::Keep));
    assert_eq!(engine.admit(UpdateBefore), Ok(Admission::Keep));
    let merged = engine
        .merge(&[
            kv(
                0,
                Insert,
                [Some(1), Some(2), Some(9), Some(5), Some(1), Some(4)],
            ),
            // Older than s1 = 5: nothing happens.
            kv(
                1,
                UpdateBefore,
                [Some(1), Some(2), None, Some(4), None, None],
            ),
            // Wins group s1 only (s2 is null in it); `free` is outside any group.
            kv(2, Delete, [Some(1), Some(2), None, Some(6), None, Some(4)]),
            // A late insert older than the retraction stays out.
            kv(3, Insert, [Some(8), None, None, Some(5), None, None]),
        ])
        .unwrap()
        .unwrap();
    assert_eq!(merged.kind, Insert);
    assert_eq!(
        merged.row,
        row([None, None, Some(9), Some(6), Some(1), Some(4)])
    );
    // Only retractions: the fold is a retraction itself.
    let merged = engine
        .merge(&[kv(7, Delete, [Some(1), None, None, Some(6), None, None])])
        .unwrap()
        .unwrap();
    assert_eq!(merged.kind, Delete);
    assert_eq!(merged.sequence_number, 7);
}

#[test]
fn remove_record_on_sequence_group_deletes_the_row() {
    let engine = engine(&[("partial-update.remove-record-on-sequence-group", "s1")]);
    let versions = [
        kv(
            0,
            Insert,
            [Some(1), Some(2), Some(9), Some(5), Some(1), Some(4)],
        ),
        kv(1, Delete, [None, None, None, Some(6), None, None]),
    ];
    let merged = engine.merge(&versions).unwrap().unwrap();
    assert_eq!(merged.kind, Delete);
    // A later insert starts from an empty row.
    let mut more = versions.to_vec();
    more.push(kv(2, Insert, [None, None, Some(3), None, Some(2), None]));
    let merged = engine.merge(&more).unwrap().unwrap();
    assert_eq!(merged.kind, Insert);
    assert_eq!(merged.row, row([None, None, Some(3), None, Some(2), None]));
    // A -D of the other group only clears that group.
    let merged = engine
        .merge(&[
            kv(
                0,
                Insert,
                [Some(1), Some(2), Some(9), Some(5), Some(1), None],
            ),
            kv(1, Delete, [None, None, Some(9), None, Some(2), None]),
        ])
        .unwrap()
        .unwrap();
    assert_eq!(merged.kind, Insert);
    assert_eq!(
        merged.row,
        row([Some(1), Some(2), None, Some(5), Some(2), None])
    );
}

#[test]
fn aggregate_functions_inside_a_group() {
    let engine = engine(&[("fields.b.aggregate-function", "sum")]);
    let merged = engine
        .merge(&[
            kv(0, Insert, [Some(1), Some(1), None, Some(5), None, None]),
            // Older: `a` is not taken, but the sum still counts `b`.
            kv(1, Insert, [Some(9), Some(2), None, Some(3), None, None]),
            kv(2, Insert, [Some(4), Some(4), None, Some(6), None, None]),
            kv(
                3,
                UpdateBefore,
                [Some(4), Some(4), None, Some(7), None, None],
            ),
        ])
        .unwrap()
        .unwrap();
    assert_eq!(merged.row, row([None, Some(3), None, Some(7), None, None]));
    // max cannot retract: such a table refuses retractions up front.
    let engine = self::engine(&[("fields.b.aggregate-function", "max")]);
    let err = engine.admit(Delete).unwrap_err();
    assert!(
        matches!(&err, RetractionRefused::GroupFunctions { columns, .. } if columns.len() == 1),
        "{err:?}"
    );
    assert!(err.to_string().contains("`b` (max)"), "{err}");
}

#[test]
fn group_options_are_checked_all_at_once() {
    let err = try_engine(
        &columns(),
        &["k"],
        &[
            GROUPS.as_slice(),
            &[
                ("fields.s2,s1.sequence-group", "a"),
                ("fields.s1.sequence-group", "a,b,zz"),
                ("fields.free.aggregate-function", "sum"),
                ("partial-update.remove-record-on-sequence-group", "a"),
                ("partial-update.remove-record-on-delete", "true"),
            ],
        ]
        .concat(),
    )
    .unwrap_err();
    for needle in [
        "names `zz`, which is not a column",
        "more than one sequence group",
        "`fields.free.aggregate-function` = sum on column `free` needs the column in a sequence group",
        "names `a`, which is not the sequence field of a sequence group",
        "`partial-update.remove-record-on-delete` and `fields.<f>.sequence-group`",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in {err}");
    }
    let err = try_engine(
        &columns(),
        &["k"],
        &[
            GROUPS.as_slice(),
            &[
                ("ignore-delete", "true"),
                ("partial-update.remove-record-on-sequence-group", "s1"),
            ],
        ]
        .concat(),
    )
    .unwrap_err();
    assert!(
        err.contains("remove-record-on-sequence-group` and `ignore-delete`"),
        "{err}"
    );
    // last_non_null_value is the engine's own rule and needs no group.
    assert!(
        try_engine(
            &columns(),
            &["k"],
            &[
                ("merge-engine", "partial-update"),
                ("fields.free.aggregate-function", "last_non_null_value"),
            ],
        )
        .is_ok()
    );
}
