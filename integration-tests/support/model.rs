//! Models of what a primary-key table holds after a sequence of changes, for the tests to
//! compare a reader's rows with: deduplicate (newest version wins) and partial-update
//! (non-null fields merge, in sequence order).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{TableSpec, full_row, key_of};

/// Model of a deduplicate table: the newest version of a key wins, -U/-D remove it.
#[derive(Default)]
pub struct DedupModel {
    rows: BTreeMap<String, Value>,
}

impl DedupModel {
    /// Applies rows in order; `kind` is the row kind (`+I`, `-U`, `+U`, `-D`).
    pub fn apply(&mut self, spec: &TableSpec, kind: &str, row: &Value) {
        let key = key_of(row, &spec.primary_key);
        match kind {
            "+I" | "+U" => {
                self.rows.insert(key, full_row(spec, row));
            }
            "-U" | "-D" => {
                self.rows.remove(&key);
            }
            other => panic!("unknown row kind {other}"),
        }
    }

    pub fn rows(&self) -> Vec<Value> {
        self.rows.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }
}

/// Model of a partial-update table with `sequence.field`, as Paimon computes it: each commit
/// first folds the rows of a key (ordered by sequence field, then arrival) into one row that
/// keeps the newest sequence value; reads then fold those per-commit rows ordered by
/// (sequence field, commit order). For every field the last non-null value wins.
pub struct PartialUpdateModel {
    spec: TableSpec,
    /// Per key: the folded row of every commit, in commit order.
    versions: BTreeMap<String, Vec<Value>>,
}

impl PartialUpdateModel {
    pub fn new(spec: &TableSpec) -> Self {
        PartialUpdateModel {
            spec: spec.clone(),
            versions: BTreeMap::new(),
        }
    }

    fn sequence_of(&self, row: &Value) -> Vec<i64> {
        self.spec
            .sequence_field
            .iter()
            .map(|field| {
                row.get(field)
                    .and_then(Value::as_i64)
                    .unwrap_or_else(|| panic!("model needs an integer {field} in {row}"))
            })
            .collect()
    }

    fn fold(&self, rows: &[&Value]) -> Value {
        let mut indexed: Vec<(Vec<i64>, usize, &Value)> = rows
            .iter()
            .enumerate()
            .map(|(index, row)| (self.sequence_of(row), index, *row))
            .collect();
        indexed.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        let mut result = full_row(&self.spec, &json!({}));
        for (_, _, row) in indexed {
            for column in self.spec.column_names() {
                if let Some(value) = row.get(&column)
                    && !value.is_null()
                {
                    result[&column] = value.clone();
                }
            }
        }
        result
    }

    /// One commit's rows (all inserts).
    pub fn commit(&mut self, rows: &[Value]) {
        let mut by_key: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for row in rows {
            by_key
                .entry(key_of(row, &self.spec.primary_key))
                .or_default()
                .push(row);
        }
        for (key, rows) in by_key {
            let folded = self.fold(&rows);
            self.versions.entry(key).or_default().push(folded);
        }
    }

    /// A full compaction folds all versions of a key into one row.
    pub fn compact(&mut self) {
        let keys: Vec<String> = self.versions.keys().cloned().collect();
        for key in keys {
            let folded = self.fold(&self.versions[&key].iter().collect::<Vec<_>>());
            self.versions.insert(key, vec![folded]);
        }
    }

    pub fn rows(&self) -> Vec<Value> {
        self.versions
            .values()
            .map(|versions| self.fold(&versions.iter().collect::<Vec<_>>()))
            .collect()
    }
}
