//! Merge engines (format doc §8.2): how the versions of one primary key fold into one
//! row. The same code folds a write buffer at flush time and merges files on read, as in
//! Paimon, so both always agree.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::table::data_file::{KeyValue, RowKind};
use crate::table::datum::{Datum, compare_datums, compare_rows};
use crate::table::options::{MergeEngineKind, TableOptions};
use crate::table::schema::TableSchema;

/// Orders versions of one key: `sequence.field` values (nulls first, reversed for
/// `sequence.field.sort-order = descending`), then the sequence number (arrival order).
#[derive(Debug, Clone)]
pub struct SequenceOrder {
    fields: Vec<usize>,
    descending: bool,
}

impl SequenceOrder {
    pub fn new(schema: &TableSchema, options: &TableOptions) -> Result<Self> {
        let mut fields = Vec::with_capacity(options.sequence_fields.len());
        let mut missing = Vec::new();
        for name in &options.sequence_fields {
            match schema.field_index(name) {
                Some(i) => fields.push(i),
                None => missing.push(name.as_str()),
            }
        }
        if !missing.is_empty() {
            return Err(Error::Config(format!(
                "option `sequence.field` names columns the table does not have: {}",
                missing.join(", ")
            )));
        }
        Ok(SequenceOrder {
            fields,
            descending: options.sequence_descending,
        })
    }

    pub fn compare(&self, a: &KeyValue, b: &KeyValue) -> Ordering {
        for &i in &self.fields {
            let ord = compare_datums(&a.row[i], &b.row[i]);
            let ord = if self.descending { ord.reverse() } else { ord };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        a.sequence_number.cmp(&b.sequence_number)
    }
}

/// What the engine does with an incoming change before it is buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Keep,
    /// Dropped on purpose (`ignore-delete`): never written to a file.
    Drop,
}

/// A table's merge engine with its options.
#[derive(Debug, Clone)]
pub struct MergeEngine {
    kind: MergeEngineKind,
    ignore_delete: bool,
    remove_record_on_delete: bool,
    num_fields: usize,
}

impl MergeEngine {
    pub fn new(schema: &TableSchema, options: &TableOptions) -> Result<Self> {
        match options.merge_engine {
            MergeEngineKind::Deduplicate | MergeEngineKind::PartialUpdate => {}
            other => {
                return Err(Error::Config(format!(
                    "merge engine `{}` is not supported yet (deduplicate, partial-update)",
                    other.as_str()
                )));
            }
        }
        Ok(MergeEngine {
            kind: options.merge_engine,
            ignore_delete: options.ignore_delete,
            remove_record_on_delete: options.remove_record_on_delete,
            num_fields: schema.fields.len(),
        })
    }

    pub fn kind(&self) -> MergeEngineKind {
        self.kind
    }

    /// Decides whether a change of `kind` is written; `Err` explains why the table cannot
    /// take it (partial-update without a delete option, as Paimon refuses it too).
    pub fn admit(&self, kind: RowKind) -> std::result::Result<Admission, String> {
        if !kind.is_retract() {
            return Ok(Admission::Keep);
        }
        if self.ignore_delete {
            return Ok(Admission::Drop);
        }
        match self.kind {
            MergeEngineKind::PartialUpdate
                if kind == RowKind::Delete && self.remove_record_on_delete =>
            {
                Ok(Admission::Keep)
            }
            MergeEngineKind::PartialUpdate if self.remove_record_on_delete => {
                // Paimon ignores -U when only removal on -D is configured.
                Ok(Admission::Drop)
            }
            MergeEngineKind::PartialUpdate => Err(format!(
                "{} change rejected: a partial-update table accepts deletes only with \
                 `partial-update.ignore-delete` or `partial-update.remove-record-on-delete`",
                kind.short_string()
            )),
            _ => Ok(Admission::Keep),
        }
    }

    /// Folds the versions of one key, oldest first, into one. `None` when nothing is left
    /// (every version was an ignored retraction). The result may be a retraction, which
    /// a file keeps (it hides older versions) and a reader drops.
    pub fn merge(&self, versions: &[KeyValue]) -> Result<Option<KeyValue>> {
        match self.kind {
            MergeEngineKind::PartialUpdate => self.merge_partial_update(versions),
            _ => Ok(self.merge_deduplicate(versions)),
        }
    }

    fn merge_deduplicate(&self, versions: &[KeyValue]) -> Option<KeyValue> {
        if self.ignore_delete {
            versions
                .iter()
                .rev()
                .find(|kv| !kv.kind.is_retract())
                .cloned()
        } else {
            versions.last().cloned()
        }
    }

    fn merge_partial_update(&self, versions: &[KeyValue]) -> Result<Option<KeyValue>> {
        let mut row: Vec<Datum> = vec![Datum::Null; self.num_fields];
        let mut deleted = false;
        let mut latest: Option<&KeyValue> = None;
        for kv in versions {
            if kv.kind.is_retract() {
                if self.ignore_delete {
                    continue;
                }
                if self.remove_record_on_delete {
                    if kv.kind == RowKind::Delete {
                        // The key is removed; later versions start from an empty row.
                        deleted = true;
                        row = kv.row.clone();
                        latest = Some(kv);
                    }
                    continue;
                }
                return Err(Error::format(
                    "partial-update table holds a delete row, but neither \
                     `partial-update.ignore-delete` nor `partial-update.remove-record-on-delete` is set",
                ));
            }
            if deleted {
                row = vec![Datum::Null; self.num_fields];
                deleted = false;
            }
            for (slot, value) in row.iter_mut().zip(&kv.row) {
                if !value.is_null() {
                    *slot = value.clone();
                }
            }
            latest = Some(kv);
        }
        Ok(latest.map(|last| KeyValue {
            sequence_number: last.sequence_number,
            kind: if deleted {
                RowKind::Delete
            } else {
                RowKind::Insert
            },
            row,
        }))
    }
}

/// Sorts changes by (key, sequence order) and folds each key's run with the engine, so
/// the result holds one row per key in key order (format doc §7.3).
pub fn sort_and_fold(
    mut rows: Vec<KeyValue>,
    key_indices: &[usize],
    order: &SequenceOrder,
    engine: &MergeEngine,
) -> Result<Vec<KeyValue>> {
    let key_cmp = |a: &KeyValue, b: &KeyValue| {
        for &i in key_indices {
            let ord = compare_datums(&a.row[i], &b.row[i]);
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    };
    rows.sort_by(|a, b| key_cmp(a, b).then_with(|| order.compare(a, b)));
    let mut out = Vec::with_capacity(rows.len());
    let mut start = 0;
    while start < rows.len() {
        let mut end = start + 1;
        while end < rows.len() && key_cmp(&rows[start], &rows[end]) == Ordering::Equal {
            end += 1;
        }
        if let Some(merged) = engine.merge(&rows[start..end])? {
            out.push(merged);
        }
        start = end;
    }
    Ok(out)
}

/// The key columns of a row.
pub fn key_of(row: &[Datum], key_indices: &[usize]) -> Vec<Datum> {
    key_indices.iter().map(|&i| row[i].clone()).collect()
}

/// Order of two rows by their key columns.
pub fn compare_keys(a: &[Datum], b: &[Datum], key_indices: &[usize]) -> Ordering {
    compare_rows(&key_of(a, key_indices), &key_of(b, key_indices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::types::DataType;
    use std::collections::BTreeMap;

    fn setup(options: &[(&str, &str)]) -> (TableSchema, MergeEngine, SequenceOrder) {
        let mut map: BTreeMap<String, String> = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.insert("bucket".into(), "1".into());
        let schema = TableSchema::new(
            vec![
                ("k".into(), DataType::Int, false),
                ("a".into(), DataType::Int, true),
                ("b".into(), DataType::Int, true),
                ("seq".into(), DataType::Int, true),
            ],
            vec![],
            vec!["k".into()],
            map,
        )
        .unwrap();
        let options = TableOptions::from_map(&schema.options).unwrap();
        let engine = MergeEngine::new(&schema, &options).unwrap();
        let order = SequenceOrder::new(&schema, &options).unwrap();
        (schema, engine, order)
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
        let (_, engine, order) = setup(&[("sequence.field", "seq")]);
        let rows = vec![
            kv(0, RowKind::Insert, [Some(1), Some(10), None, Some(5)]),
            kv(1, RowKind::Insert, [Some(1), Some(11), None, Some(3)]),
            kv(2, RowKind::Delete, [Some(2), None, None, Some(1)]),
            kv(3, RowKind::Insert, [Some(2), Some(20), None, Some(0)]),
        ];
        let folded = sort_and_fold(rows, &[0], &order, &engine).unwrap();
        // Key 1: seq 5 beats the later-arriving seq 3. Key 2: the delete (seq 1) wins.
        assert_eq!(folded[0].row[1], Datum::Int(10));
        assert_eq!(folded[1].kind, RowKind::Delete);
        assert_eq!(folded.len(), 2);
    }

    #[test]
    fn partial_update_overwrites_with_non_null_fields_in_sequence_order() {
        let (_, engine, order) = setup(&[
            ("merge-engine", "partial-update"),
            ("sequence.field", "seq"),
        ]);
        let rows = vec![
            kv(0, RowKind::Insert, [Some(1), Some(1), None, Some(5)]),
            kv(1, RowKind::Insert, [Some(1), None, Some(2), Some(1)]),
            kv(2, RowKind::Insert, [Some(1), Some(9), None, Some(3)]),
        ];
        let folded = sort_and_fold(rows, &[0], &order, &engine).unwrap();
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
        let (_, engine, _) = setup(&[("merge-engine", "partial-update")]);
        assert!(
            engine
                .admit(RowKind::Delete)
                .unwrap_err()
                .contains("ignore-delete")
        );
        let (_, engine, _) = setup(&[
            ("merge-engine", "partial-update"),
            ("partial-update.ignore-delete", "true"),
        ]);
        assert_eq!(engine.admit(RowKind::Delete), Ok(Admission::Drop));
        let (_, engine, order) = setup(&[
            ("merge-engine", "partial-update"),
            ("partial-update.remove-record-on-delete", "true"),
        ]);
        assert_eq!(engine.admit(RowKind::Delete), Ok(Admission::Keep));
        assert_eq!(engine.admit(RowKind::UpdateBefore), Ok(Admission::Drop));
        let rows = vec![
            kv(0, RowKind::Insert, [Some(1), Some(1), Some(1), None]),
            kv(1, RowKind::Delete, [Some(1), None, None, None]),
            kv(2, RowKind::Insert, [Some(1), None, Some(7), None]),
        ];
        let folded = sort_and_fold(rows, &[0], &order, &engine).unwrap();
        // After the delete the row starts empty: `a` is gone.
        assert_eq!(
            folded[0].row,
            kv(0, RowKind::Insert, [Some(1), None, Some(7), None]).row
        );
        assert_eq!(folded[0].kind, RowKind::Insert);
    }

    #[test]
    fn descending_sequence_order_lets_the_smallest_value_win() {
        let (_, engine, order) = setup(&[
            ("sequence.field", "seq"),
            ("sequence.field.sort-order", "descending"),
        ]);
        let rows = vec![
            kv(0, RowKind::Insert, [Some(1), Some(1), None, Some(1)]),
            kv(1, RowKind::Insert, [Some(1), Some(2), None, Some(9)]),
        ];
        let folded = sort_and_fold(rows, &[0], &order, &engine).unwrap();
        assert_eq!(folded[0].row[1], Datum::Int(1));
    }
}
