//! The aggregation and first-row engines, their admission of retractions and their
//! configuration errors.

use super::{table, try_engine, version};
use crate::lsm::merge::{Admission, MergeEngine, RetractionRefused, sort_and_fold};
use crate::table::datum::Datum;
use crate::table::row_kind::RowKind;
use crate::table::types::DataType;

const STRING: DataType = DataType::Varchar(crate::table::types::MAX_LENGTH);

/// k (key), total (sum), top (max), tags (listagg), note (default), ts (sequence field).
fn agg_columns() -> Vec<(&'static str, DataType, bool)> {
    vec![
        ("k", DataType::Int, false),
        ("total", DataType::BigInt, true),
        ("top", DataType::Int, true),
        ("tags", STRING, true),
        ("note", STRING, true),
        ("ts", DataType::Int, true),
    ]
}

fn agg_row(
    k: i32,
    total: Option<i64>,
    top: Option<i32>,
    tag: Option<&str>,
    note: Option<&str>,
    ts: Option<i32>,
) -> Vec<Datum> {
    vec![
        Datum::Int(k),
        total.map_or(Datum::Null, Datum::BigInt),
        top.map_or(Datum::Null, Datum::Int),
        tag.map_or(Datum::Null, |t| Datum::String(t.into())),
        note.map_or(Datum::Null, |t| Datum::String(t.into())),
        ts.map_or(Datum::Null, Datum::Int),
    ]
}

const AGG_OPTIONS: [(&str, &str); 4] = [
    ("merge-engine", "aggregation"),
    ("fields.total.aggregate-function", "sum"),
    ("fields.top.aggregate-function", "max"),
    ("fields.tags.aggregate-function", "listagg"),
];

fn agg_engine(extra: &[(&str, &str)]) -> MergeEngine {
    let mut options = AGG_OPTIONS.to_vec();
    options.extend_from_slice(extra);
    try_engine(&agg_columns(), &["k"], &options).unwrap().0
}

#[test]
fn aggregation_reduces_each_column_by_its_function() {
    let (engine, order) = try_engine(
        &agg_columns(),
        &["k"],
        &[AGG_OPTIONS.as_slice(), &[("sequence.field", "ts")]].concat(),
    )
    .unwrap();
    let rows = vec![
        version(
            0,
            RowKind::Insert,
            agg_row(1, Some(5), Some(3), Some("a"), Some("x"), Some(2)),
        ),
        version(
            1,
            RowKind::UpdateAfter,
            agg_row(1, None, Some(9), Some("b"), None, None),
        ),
        version(
            2,
            RowKind::Insert,
            agg_row(1, Some(10), Some(4), None, Some("y"), Some(1)),
        ),
    ];
    let folded = sort_and_fold(rows, &[0], &order, &engine).unwrap();
    assert_eq!(folded.len(), 1);
    // Order by ts: (null) seq 1, ts 1 seq 2, ts 2 seq 0. note keeps the last non-null;
    // ts, the sequence field, takes the last value.
    assert_eq!(
        folded[0].row,
        agg_row(1, Some(15), Some(9), Some("b,a"), Some("x"), Some(2))
    );
    assert_eq!(folded[0].kind, RowKind::Insert);
    assert_eq!(
        folded[0].sequence_number, 0,
        "the newest version's sequence number"
    );
}

#[test]
fn default_aggregate_function_applies_to_unconfigured_columns() {
    let engine = agg_engine(&[("fields.default-aggregate-function", "first_non_null_value")]);
    let merged = engine
        .merge(&[
            version(
                0,
                RowKind::Insert,
                agg_row(1, Some(1), None, None, None, Some(7)),
            ),
            version(
                1,
                RowKind::Insert,
                agg_row(1, Some(1), None, None, Some("z"), Some(8)),
            ),
        ])
        .unwrap()
        .unwrap();
    // note and ts (not a sequence field here) keep their first non-null value.
    assert_eq!(
        merged.row,
        agg_row(1, Some(2), None, None, Some("z"), Some(7))
    );
}

#[test]
fn aggregation_refuses_retractions_it_cannot_merge_at_admission() {
    let engine = agg_engine(&[]);
    assert_eq!(engine.admit(RowKind::Insert), Ok(Admission::Keep));
    let err = engine.admit(RowKind::UpdateBefore).unwrap_err().to_string();
    assert!(
        err.contains("`top` (max)")
            && err.contains("`tags` (listagg)")
            && err.contains("ignore-retract"),
        "{err}"
    );
    assert!(!err.contains("`total`"), "sum can retract: {err}");
    let err = engine.admit(RowKind::Delete).unwrap_err().to_string();
    assert!(err.contains("aggregation.remove-record-on-delete"), "{err}");
    // The same rows reaching a merge (files written by others) fail there, by name.
    let err = engine
        .merge(&[version(
            0,
            RowKind::UpdateBefore,
            agg_row(1, Some(1), Some(1), None, None, None),
        )])
        .unwrap_err()
        .to_string();
    assert!(err.contains("`top`") && err.contains("max"), "{err}");
    let dropping = agg_engine(&[("ignore-delete", "true")]);
    assert_eq!(dropping.admit(RowKind::Delete), Ok(Admission::Drop));
}

#[test]
fn retractions_subtract_and_ignore_retract_keeps_the_value() {
    let engine = agg_engine(&[
        ("fields.top.ignore-retract", "true"),
        ("fields.tags.ignore-retract", "true"),
    ]);
    assert_eq!(engine.admit(RowKind::UpdateBefore), Ok(Admission::Keep));
    let merged = engine
        .merge(&[
            version(
                0,
                RowKind::Insert,
                agg_row(1, Some(10), Some(7), Some("a"), Some("n"), None),
            ),
            version(
                1,
                RowKind::UpdateBefore,
                agg_row(1, Some(10), Some(7), Some("a"), Some("n"), None),
            ),
            version(
                2,
                RowKind::UpdateAfter,
                agg_row(1, Some(4), Some(2), Some("b"), None, None),
            ),
        ])
        .unwrap()
        .unwrap();
    // note (last_non_null_value) is cleared by the retraction of its value.
    assert_eq!(
        merged.row,
        agg_row(1, Some(4), Some(7), Some("a,b"), None, None)
    );
    // A key whose only change is a retraction folds to an insert holding the negation,
    // which later merges with the older files (Java's behaviour).
    let only = engine
        .merge(&[version(
            5,
            RowKind::UpdateBefore,
            agg_row(1, Some(3), None, None, None, None),
        )])
        .unwrap()
        .unwrap();
    assert_eq!(only.kind, RowKind::Insert);
    assert_eq!(only.row[1], Datum::BigInt(-3));
}

#[test]
fn remove_record_on_delete_removes_the_key_then_starts_over() {
    let engine = agg_engine(&[("aggregation.remove-record-on-delete", "true")]);
    assert_eq!(engine.admit(RowKind::Delete), Ok(Admission::Keep));
    assert!(
        engine.admit(RowKind::UpdateBefore).is_err(),
        "-U still needs retractable functions"
    );
    let delete = version(
        1,
        RowKind::Delete,
        agg_row(1, Some(10), None, None, None, Some(4)),
    );
    let merged = engine
        .merge(&[
            version(
                0,
                RowKind::Insert,
                agg_row(1, Some(10), Some(1), None, None, None),
            ),
            delete.clone(),
        ])
        .unwrap()
        .unwrap();
    assert_eq!(merged.kind, RowKind::Delete);
    assert_eq!(merged.row, delete.row, "a folded delete keeps its values");
    let merged = engine
        .merge(&[
            version(
                0,
                RowKind::Insert,
                agg_row(1, Some(10), Some(1), None, None, None),
            ),
            delete,
            version(
                2,
                RowKind::Insert,
                agg_row(1, Some(3), None, None, None, None),
            ),
        ])
        .unwrap()
        .unwrap();
    assert_eq!(merged.kind, RowKind::Insert);
    assert_eq!(merged.row, agg_row(1, Some(3), None, None, None, None));
}

#[test]
fn aggregation_options_are_checked_against_the_schema_all_at_once() {
    let err = try_engine(
        &agg_columns(),
        &["k"],
        &[
            ("merge-engine", "aggregation"),
            ("sequence.field", "ts"),
            ("fields.note.aggregate-function", "sum"),
            ("fields.top.aggregate-function", "count"),
            ("fields.total.aggregate-function", "median"),
            ("fields.ts.aggregate-function", "max"),
            ("fields.nope.ignore-retract", "true"),
            ("fields.tags.aggregate-function", "bool_or"),
            ("fields.ts.sequence-group", "tags"),
        ],
    )
    .unwrap_err();
    for needle in [
        "`fields.note.aggregate-function` on column `note`: `sum` needs a numeric column, not STRING",
        "`fields.top.aggregate-function`: `count` was removed",
        "unknown aggregate function `median`",
        "column `ts` is a `sequence.field`",
        "`fields.nope.ignore-retract` names `nope`",
        "`bool_or` needs a BOOLEAN column",
        "sequence groups are supported by merge-engine partial-update only",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in {err}");
    }
    let (schema, _) = table(&agg_columns(), &["k"], &[]);
    let mut map = schema.options.clone();
    map.insert("merge-engine".into(), "aggregation".into());
    map.insert("aggregation.remove-record-on-delete".into(), "true".into());
    map.insert("fields.top.ignore-retract".into(), "true".into());
    map.insert("fields.default-aggregate-function".into(), "nope".into());
    let options = crate::table::options::TableOptions::from_map(&map).unwrap();
    let err = MergeEngine::new(&schema, &options).unwrap_err().to_string();
    assert!(
        err.contains("conflict") && err.contains("fields.top.ignore-retract"),
        "{err}"
    );
    assert!(
        err.contains("`fields.default-aggregate-function`: unknown"),
        "{err}"
    );
}

#[test]
fn first_row_keeps_the_first_version_with_its_own_sequence_number() {
    let columns = [("k", DataType::Int, false), ("v", DataType::Int, true)];
    let (engine, order) = try_engine(&columns, &["k"], &[("merge-engine", "first-row")]).unwrap();
    let rows = vec![
        version(3, RowKind::Insert, vec![Datum::Int(1), Datum::Int(30)]),
        version(4, RowKind::UpdateAfter, vec![Datum::Int(1), Datum::Int(40)]),
        version(5, RowKind::Insert, vec![Datum::Int(2), Datum::Null]),
    ];
    let folded = sort_and_fold(rows, &[0], &order, &engine).unwrap();
    assert_eq!(folded[0].row, vec![Datum::Int(1), Datum::Int(30)]);
    assert_eq!(folded[0].sequence_number, 3);
    assert_eq!(folded[1].row, vec![Datum::Int(2), Datum::Null]);
    let err = engine.admit(RowKind::Delete).unwrap_err();
    assert_eq!(
        err,
        RetractionRefused::FirstRow {
            kind: RowKind::Delete
        }
    );
    assert!(err.to_string().contains("first-row.ignore-delete"), "{err}");
    assert!(
        engine
            .merge(&[version(
                0,
                RowKind::Delete,
                vec![Datum::Int(1), Datum::Null]
            )])
            .is_err()
    );
    // Also after the first row, as in Java.
    assert!(
        engine
            .merge(&[
                version(0, RowKind::Insert, vec![Datum::Int(1), Datum::Null]),
                version(1, RowKind::Delete, vec![Datum::Int(1), Datum::Null]),
            ])
            .is_err()
    );
    let (ignoring, _) = try_engine(
        &columns,
        &["k"],
        &[
            ("merge-engine", "first-row"),
            ("first-row.ignore-delete", "true"),
        ],
    )
    .unwrap();
    assert_eq!(ignoring.admit(RowKind::UpdateBefore), Ok(Admission::Drop));
    let merged = ignoring
        .merge(&[
            version(0, RowKind::Delete, vec![Datum::Int(1), Datum::Null]),
            version(1, RowKind::Insert, vec![Datum::Int(1), Datum::Int(5)]),
        ])
        .unwrap();
    assert_eq!(merged.map(|kv| kv.row[1].clone()), Some(Datum::Int(5)));
    let err = try_engine(
        &columns,
        &["k"],
        &[("merge-engine", "first-row"), ("sequence.field", "v")],
    )
    .unwrap_err();
    assert!(
        err.contains("sequence.field") && err.contains("first-row"),
        "{err}"
    );
}
