//! Unit tests of the merge engines: the functions in `functions`, the aggregation and
//! first-row engines in `engines`, partial-update sequence groups in `groups`, the sort
//! of a flush in `sort`.

mod engines;
mod functions;
mod groups;
mod sort;

use std::collections::BTreeMap;

use super::*;
use crate::table::types::DataType;

/// A table of `columns` (name, type, nullable) with primary key `pk` and `options`.
pub(super) fn table(
    columns: &[(&str, DataType, bool)],
    pk: &[&str],
    options: &[(&str, &str)],
) -> (TableSchema, TableOptions) {
    let mut map: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.insert("bucket".into(), "1".into());
    let schema = TableSchema::new(
        columns
            .iter()
            .map(|(n, t, null)| (n.to_string(), *t, *null))
            .collect(),
        vec![],
        pk.iter().map(|s| s.to_string()).collect(),
        map,
    )
    .unwrap();
    let options = TableOptions::from_map(&schema.options).unwrap();
    (schema, options)
}

/// The engine of such a table, or its configuration error text.
pub(super) fn try_engine(
    columns: &[(&str, DataType, bool)],
    pk: &[&str],
    options: &[(&str, &str)],
) -> std::result::Result<(MergeEngine, SequenceOrder), String> {
    let (schema, options) = table(columns, pk, options);
    let engine = MergeEngine::new(&schema, &options).map_err(|e| e.to_string())?;
    let order = SequenceOrder::new(&schema, &options).map_err(|e| e.to_string())?;
    Ok((engine, order))
}

/// A version with an explicit row.
pub(super) fn version(seq: i64, kind: RowKind, row: Vec<Datum>) -> KeyValue {
    KeyValue {
        sequence_number: seq,
        kind,
        row,
    }
}

/// A table of key `k`, values `a`, `b` and `seq` (all INT) with `options`.
fn setup(options: &[(&str, &str)]) -> (TableSchema, MergeEngine, SequenceOrder) {
    let int = DataType::Int;
    let (schema, options) = table(
        &[
            ("k", int, false),
            ("a", int, true),
            ("b", int, true),
            ("seq", int, true),
        ],
        &["k"],
        options,
    );
    let engine = MergeEngine::new(&schema, &options).unwrap();
    let order = SequenceOrder::new(&schema, &options).unwrap();
    (schema, engine, order)
}

/// A [`setup`] table option: the partial-update engine.
const PARTIAL_UPDATE: (&str, &str) = ("merge-engine", "partial-update");
/// A [`setup`] table option: versions ordered by column `seq`.
const SEQUENCE_BY_SEQ: (&str, &str) = ("sequence.field", "seq");

/// `rows` written to a [`setup`] table with `options`, sorted and folded by key.
fn fold(options: &[(&str, &str)], rows: Vec<KeyValue>) -> Vec<KeyValue> {
    let (_, engine, order) = setup(options);
    sort_and_fold(rows, &[0], &order, &engine).unwrap()
}

fn kv(seq: i64, kind: RowKind, values: [Option<i32>; 4]) -> KeyValue {
    KeyValue {
        sequence_number: seq,
        kind,
        row: values
            .iter()
            .map(|v| v.map_or(Datum::Null, Datum::Int))
            .collect(),
    }
}

#[test]
fn deduplicate_keeps_the_newest_version_even_a_delete() {
    let folded = fold(
        &[SEQUENCE_BY_SEQ],
        vec![
            kv(0, RowKind::Insert, [Some(1), Some(10), None, Some(5)]),
            kv(1, RowKind::Insert, [Some(1), Some(11), None, Some(3)]),
            kv(2, RowKind::Delete, [Some(2), None, None, Some(1)]),
            kv(3, RowKind::Insert, [Some(2), Some(20), None, Some(0)]),
        ],
    );
    // Key 1: seq 5 beats the later-arriving seq 3. Key 2: the delete (seq 1) wins.
    assert_eq!(folded[0].row[1], Datum::Int(10));
    assert_eq!(folded[1].kind, RowKind::Delete);
    assert_eq!(folded.len(), 2);
}

#[test]
fn partial_update_overwrites_with_non_null_fields_in_sequence_order() {
    let folded = fold(
        &[PARTIAL_UPDATE, SEQUENCE_BY_SEQ],
        vec![
            kv(0, RowKind::Insert, [Some(1), Some(1), None, Some(5)]),
            kv(1, RowKind::Insert, [Some(1), None, Some(2), Some(1)]),
            kv(2, RowKind::Insert, [Some(1), Some(9), None, Some(3)]),
        ],
    );
    assert_eq!(folded.len(), 1);
    assert_eq!(
        folded[0].row,
        kv(0, RowKind::Insert, [Some(1), Some(1), Some(2), Some(5)]).row
    );
    assert_eq!(
        folded[0].sequence_number, 0,
        "keeps the sequence number of the last version"
    );
}

#[test]
fn partial_update_delete_needs_an_option() {
    let (_, engine, _) = setup(&[PARTIAL_UPDATE]);
    assert!(
        engine
            .admit(RowKind::Delete)
            .unwrap_err()
            .to_string()
            .contains("ignore-delete")
    );
    let (_, engine, _) = setup(&[PARTIAL_UPDATE, ("partial-update.ignore-delete", "true")]);
    assert_eq!(engine.admit(RowKind::Delete), Ok(Admission::Drop));
    let remove_on_delete = [
        PARTIAL_UPDATE,
        ("partial-update.remove-record-on-delete", "true"),
    ];
    let (_, engine, _) = setup(&remove_on_delete);
    assert_eq!(engine.admit(RowKind::Delete), Ok(Admission::Keep));
    assert_eq!(engine.admit(RowKind::UpdateBefore), Ok(Admission::Drop));
    let folded = fold(
        &remove_on_delete,
        vec![
            kv(0, RowKind::Insert, [Some(1), Some(1), Some(1), None]),
            kv(1, RowKind::Delete, [Some(1), None, None, None]),
            kv(2, RowKind::Insert, [Some(1), None, Some(7), None]),
        ],
    );
    // After the delete the row starts empty: `a` is gone.
    assert_eq!(
        folded[0].row,
        kv(0, RowKind::Insert, [Some(1), None, Some(7), None]).row
    );
    assert_eq!(folded[0].kind, RowKind::Insert);
}

#[test]
fn descending_sequence_order_lets_the_smallest_value_win() {
    let folded = fold(
        &[SEQUENCE_BY_SEQ, ("sequence.field.sort-order", "descending")],
        vec![
            kv(0, RowKind::Insert, [Some(1), Some(1), None, Some(1)]),
            kv(1, RowKind::Insert, [Some(1), Some(2), None, Some(9)]),
        ],
    );
    assert_eq!(folded[0].row[1], Datum::Int(1));
}

proptest::proptest! {
    /// Moving the kept version out of owned versions gives what merging a copy gives,
    /// for every engine and delete setting.
    #[test]
    fn merge_owned_equals_merge(
        kinds in proptest::collection::vec(0..4_u8, 1..6),
        engine_index in 0..4_usize,
        ignore_delete: bool,
    ) {
        let engine_name = ["deduplicate", "first-row", "partial-update", "aggregation"][engine_index];
        let mut options = vec![("merge-engine", engine_name)];
        if ignore_delete {
            options.push(("ignore-delete", "true"));
        }
        let (_, engine, _) = setup(&options);
        let versions: Vec<KeyValue> = kinds
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let kind = [RowKind::Insert, RowKind::UpdateBefore, RowKind::UpdateAfter, RowKind::Delete][k as usize];
                kv(i as i64, kind, [Some(1), Some(i as i32), None, Some(i as i32)])
            })
            .collect();
        let merged = engine.merge(&versions).map_err(|e| e.to_string());
        let mut owned = versions.clone();
        let moved = engine.merge_owned(&mut owned).map_err(|e| e.to_string());
        proptest::prop_assert_eq!(merged, moved);
    }
}
