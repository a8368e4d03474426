//! Merge engines (docs/format.md §8.2): how the versions of one primary key fold into one
//! row. The same code folds a write buffer at flush time and merges files on read, as in
//! Paimon, so both always agree.

use std::cmp::Ordering;

mod aggregate;
mod function;
mod partial_update;
mod runs;

pub(crate) use runs::MergedRuns;

pub(crate) use function::AggregateFunction;

use self::aggregate::Aggregation;
use self::partial_update::PartialUpdate;
use crate::error::{Error, Result};
use crate::table::data_file::KeyValue;
use crate::table::datum::{Datum, compare_datums, compare_rows, order_prefix};
use crate::table::options::{MergeEngineKind, TableOptions};
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;

/// Orders versions of one key: `sequence.field` values (nulls first, reversed for
/// `sequence.field.sort-order = descending`), then the sequence number (arrival order).
#[derive(Debug, Clone)]
pub struct SequenceOrder {
    fields: Vec<usize>,
    descending: bool,
}

impl SequenceOrder {
    /// The order configured by `sequence.field` and `sequence.field.sort-order`.
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

    /// Order of two versions of one key: older first.
    pub(crate) fn compare(&self, a: &KeyValue, b: &KeyValue) -> Ordering {
        for &i in &self.fields {
            let ord = compare_datums(column(&a.row, i), column(&b.row, i));
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
pub(crate) enum Admission {
    Keep,
    /// Dropped on purpose (`ignore-delete`): never written to a file.
    Drop,
}

/// Why a table's merge engine refuses a retraction (-U/-D) up front, as Paimon would when
/// merging it: the dead-letter reason, naming the options that would let the table take
/// or drop it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetractionRefused {
    /// first-row keeps the first version and has nothing to retract it with.
    #[error(
        "{} change rejected: a first-row table accepts deletes only with \
         `first-row.ignore-delete` (or `ignore-delete`) = true, which drops them",
        .kind.short_string()
    )]
    FirstRow { kind: RowKind },
    /// partial-update without sequence groups or an option for deletes.
    #[error(
        "{} change rejected: a partial-update table accepts deletes only with \
         `partial-update.ignore-delete`, `partial-update.remove-record-on-delete` or \
         sequence groups (`fields.<f>.sequence-group`)",
        .kind.short_string()
    )]
    PartialUpdate { kind: RowKind },
    /// partial-update: columns of sequence groups whose functions define no retraction.
    #[error(
        "{} change rejected: aggregate functions of columns {} cannot take retractions; \
         set `fields.<column>.ignore-retract` = true",
        .kind.short_string(),
        list(.columns)
    )]
    GroupFunctions {
        kind: RowKind,
        columns: Vec<CannotRetract>,
    },
    /// aggregation: columns whose functions define no retraction.
    #[error(
        "{} change rejected: aggregate functions of columns {} cannot take retractions; set \
         `fields.<column>.ignore-retract` = true{}, or `ignore-delete` = true to drop \
         retractions",
        .kind.short_string(),
        list(.columns),
        if *.kind == RowKind::Delete {
            " or `aggregation.remove-record-on-delete` = true"
        } else {
            ""
        }
    )]
    AggregateFunctions {
        kind: RowKind,
        columns: Vec<CannotRetract>,
    },
}

/// A column whose aggregate function defines no retraction (and that does not set
/// `fields.<column>.ignore-retract`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CannotRetract {
    pub(crate) column: String,
    pub(crate) function: AggregateFunction,
}

impl std::fmt::Display for CannotRetract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` ({})", self.column, self.function.name())
    }
}

/// `` `a` (max), `b` (listagg) ``.
fn list(columns: &[CannotRetract]) -> String {
    let names: Vec<String> = columns.iter().map(ToString::to_string).collect();
    names.join(", ")
}

/// A table's merge engine with its options.
#[derive(Debug, Clone)]
pub struct MergeEngine {
    kind: MergeEngineKind,
    ignore_delete: bool,
    rule: Rule,
}

/// The merge rule of each engine; a `match` keeps the dispatch plain.
#[derive(Debug, Clone)]
enum Rule {
    Deduplicate,
    PartialUpdate(PartialUpdate),
    Aggregation(Aggregation),
    FirstRow,
}

impl MergeEngine {
    /// The engine of a table. Checks every engine option against the schema (unknown
    /// columns, column types of aggregate functions, conflicting options) and reports all
    /// problems at once, naming the option keys.
    pub fn new(schema: &TableSchema, options: &TableOptions) -> Result<Self> {
        let mut problems = Vec::new();
        check_field_options(schema, options, &mut problems);
        let rule = match options.merge_engine {
            MergeEngineKind::Deduplicate => Rule::Deduplicate,
            MergeEngineKind::PartialUpdate => {
                Rule::PartialUpdate(PartialUpdate::new(schema, options, &mut problems))
            }
            MergeEngineKind::Aggregation => {
                Rule::Aggregation(Aggregation::new(schema, options, &mut problems))
            }
            MergeEngineKind::FirstRow => {
                if !options.sequence_fields.is_empty() {
                    problems.push(
                        "option `sequence.field` cannot be used with merge-engine first-row \
                         (the first version to arrive wins)"
                            .to_string(),
                    );
                }
                Rule::FirstRow
            }
        };
        if !problems.is_empty() {
            return Err(Error::Config(problems.join("; ")));
        }
        Ok(MergeEngine {
            kind: options.merge_engine,
            ignore_delete: options.ignore_delete,
            rule,
        })
    }

    /// The configured `merge-engine`.
    pub fn kind(&self) -> MergeEngineKind {
        self.kind
    }

    /// Decides whether a change of `kind` is written; `Err` explains why the table cannot
    /// take it (as Paimon would refuse it when merging), naming the options that would.
    pub(crate) fn admit(&self, kind: RowKind) -> std::result::Result<Admission, RetractionRefused> {
        if !kind.is_retract() {
            return Ok(Admission::Keep);
        }
        if self.ignore_delete {
            return Ok(Admission::Drop);
        }
        match &self.rule {
            Rule::Deduplicate => Ok(Admission::Keep),
            Rule::PartialUpdate(p) => p.admit(kind),
            Rule::Aggregation(a) => a.admit(kind),
            Rule::FirstRow => Err(RetractionRefused::FirstRow { kind }),
        }
    }

    /// Folds the versions of one key, oldest first, into one. `None` when nothing is left
    /// (every version was an ignored retraction). The result may be a retraction, which
    /// a file keeps (it hides older versions) and a reader drops.
    pub(crate) fn merge(&self, versions: &[KeyValue]) -> Result<Option<KeyValue>> {
        match &self.rule {
            Rule::Deduplicate => Ok(self.pick_deduplicate(versions).map(|i| versions[i].clone())),
            Rule::FirstRow => Ok(self.pick_first_row(versions)?.map(|i| versions[i].clone())),
            Rule::PartialUpdate(p) => p.merge(versions),
            Rule::Aggregation(a) => a.merge(versions),
        }
    }

    /// What a key's versions reduce to where Paimon folds them (a write buffer's flush,
    /// a compaction, a read): a lone version is kept as it is, retraction or not, and only
    /// two or more are merged (Java's `ReducerMergeFunctionWrapper`). So a -U alone in a
    /// commit stays a -U, which a later merge retracts (an aggregation merge of it alone
    /// would turn it into an insert of the negated values), and a reader drops it.
    pub(crate) fn reduce(&self, versions: &[KeyValue]) -> Result<Option<KeyValue>> {
        match versions {
            [only] => Ok(Some(only.clone())),
            _ => self.merge(versions),
        }
    }

    /// [`MergeEngine::reduce`] of versions the caller owns, moving rather than copying the
    /// version kept (the rest are left in place).
    pub(crate) fn reduce_owned(&self, versions: &mut [KeyValue]) -> Result<Option<KeyValue>> {
        match versions {
            [only] => Ok(Some(take(only))),
            _ => self.merge_owned(versions),
        }
    }

    /// [`MergeEngine::merge`] of versions the caller owns: the engines that keep one
    /// version unchanged move it out instead of copying it (the rest are left in place).
    pub(crate) fn merge_owned(&self, versions: &mut [KeyValue]) -> Result<Option<KeyValue>> {
        match self.pick(versions) {
            Some(picked) => Ok(picked?.map(|i| take(&mut versions[i]))),
            None => self.merge(versions),
        }
    }

    /// For the engines whose merge keeps one version unchanged (deduplicate, first-row):
    /// which one (`Ok(None)`: none). `None` for the engines that combine versions.
    fn pick(&self, versions: &[KeyValue]) -> Option<Result<Option<usize>>> {
        match &self.rule {
            Rule::Deduplicate => Some(Ok(self.pick_deduplicate(versions))),
            Rule::FirstRow => Some(self.pick_first_row(versions)),
            Rule::PartialUpdate(_) | Rule::Aggregation(_) => None,
        }
    }

    fn pick_deduplicate(&self, versions: &[KeyValue]) -> Option<usize> {
        if self.ignore_delete {
            versions.iter().rposition(|kv| !kv.kind.is_retract())
        } else {
            versions.len().checked_sub(1)
        }
    }

    /// The first added version wins, with its own sequence number (Java's
    /// `FirstRowMergeFunction`); retractions are an error unless ignored.
    fn pick_first_row(&self, versions: &[KeyValue]) -> Result<Option<usize>> {
        // Every version is looked at: Java fails on a retraction wherever it stands.
        if !self.ignore_delete && versions.iter().any(|kv| kv.kind.is_retract()) {
            return Err(Error::format(
                "first-row table holds a -U/-D row, but `first-row.ignore-delete` is not set",
            ));
        }
        Ok(versions.iter().position(|kv| !kv.kind.is_retract()))
    }
}

/// Checks that apply whatever the engine: every `fields.<f>.…` option names columns of
/// the table, and a `sequence.field` column is not aggregated (Paimon's
/// `validateFieldsPrefix` and `validateSequenceField`).
fn check_field_options(schema: &TableSchema, options: &TableOptions, problems: &mut Vec<String>) {
    for (key, names) in &options.field_option_names {
        for name in names {
            if schema.field(name).is_none() {
                problems.push(format!(
                    "option `{key}` names `{name}`, which is not a column of the table"
                ));
            }
        }
    }
    for name in &options.sequence_fields {
        let aggregated = options
            .field_options
            .get(name)
            .is_some_and(|o| o.aggregate_function.is_some());
        if aggregated {
            problems.push(format!(
                "option `fields.{name}.aggregate-function`: column `{name}` is a \
                 `sequence.field` and cannot be aggregated"
            ));
        }
    }
}

/// Moves a version out, leaving an empty one.
fn take(version: &mut KeyValue) -> KeyValue {
    std::mem::replace(
        version,
        KeyValue {
            sequence_number: 0,
            kind: RowKind::Insert,
            row: Vec::new(),
        },
    )
}

/// A row holding only the NOT NULL columns of `values` (Java's `initRow`).
fn init_row(values: &[Datum], nullable: &[bool]) -> Vec<Datum> {
    let mut row = vec![Datum::Null; nullable.len()];
    fill_not_null(&mut row, values, nullable);
    row
}

/// Copies the NOT NULL columns of `values` into `row`.
fn fill_not_null(row: &mut [Datum], values: &[Datum], nullable: &[bool]) {
    for ((slot, value), nullable) in row.iter_mut().zip(values).zip(nullable) {
        if !nullable {
            *slot = value.clone();
        }
    }
}

/// Refuses merge options no reader could merge (unknown columns, aggregate functions on
/// the wrong type, conflicting options, a bad `sequence.field`): the one check both a
/// `[[table]]` definition and a new table's schema pass before anything is written.
pub(crate) fn validate(schema: &TableSchema, options: &TableOptions) -> Result<()> {
    MergeEngine::new(schema, options)?;
    SequenceOrder::new(schema, options)?;
    Ok(())
}

/// Sorts changes by (key, sequence order) and reduces each key's run with the engine
/// ([`MergeEngine::reduce`]), so the result holds one row per key in key order
/// (docs/format.md §7.3).
pub(crate) fn sort_and_fold(
    rows: Vec<KeyValue>,
    key_indices: &[usize],
    order: &SequenceOrder,
    engine: &MergeEngine,
) -> Result<Vec<KeyValue>> {
    let key_cmp = |a: &KeyValue, b: &KeyValue| key_order(a, b, key_indices);
    let mut rows = sort_changes(rows, key_indices, order);
    let mut out = Vec::with_capacity(rows.len());
    for versions in rows.chunk_by_mut(|a, b| key_cmp(a, b) == Ordering::Equal) {
        if let Some(merged) = engine.reduce_owned(versions)? {
            out.push(merged);
        }
    }
    Ok(out)
}

/// Sorts changes by (key, sequence order): the order a flush folds them in, and the
/// order of an `input` changelog file (Java's sorted write buffer).
pub(crate) fn sort_changes(
    mut rows: Vec<KeyValue>,
    key_indices: &[usize],
    order: &SequenceOrder,
) -> Vec<KeyValue> {
    let first = match key_indices.first() {
        Some(&first) if u32::try_from(rows.len()).is_ok() => first,
        _ => {
            rows.sort_by(|a, b| key_order(a, b, key_indices).then_with(|| order.compare(a, b)));
            return rows;
        }
    };
    // The first key column's order prefix decides most comparisons (`order_prefix`).
    // Sorted: (prefix, index) pairs, 16 bytes each; the index breaks ties, so the order
    // is the stable sort's. The rows then move into place in their own vector.
    let mut sorted: Vec<(u8, u64, u32)> = rows
        .iter()
        .enumerate()
        .map(|(i, kv)| {
            let (rank, bits) = order_prefix(column(&kv.row, first));
            (rank, bits, i as u32)
        })
        .collect();
    sorted.sort_unstable_by(|&(rank_a, bits_a, a), &(rank_b, bits_b, b)| {
        let (x, y) = (&rows[a as usize], &rows[b as usize]);
        (rank_a, bits_a)
            .cmp(&(rank_b, bits_b))
            .then_with(|| key_order(x, y, key_indices))
            .then_with(|| order.compare(x, y))
            .then_with(|| a.cmp(&b))
    });
    // Position k takes the row now at `source[k]`: each cycle of the permutation is
    // followed with swaps, and a done position points at itself.
    let mut source: Vec<u32> = sorted.into_iter().map(|(_, _, i)| i).collect();
    for start in 0..source.len() {
        let mut k = start;
        while source[k] as usize != k {
            let from = source[k] as usize;
            source[k] = k as u32;
            if from == start {
                break;
            }
            rows.swap(k, from);
            k = from;
        }
    }
    rows
}

/// Order of two changes by their key columns.
pub(crate) fn key_order(a: &KeyValue, b: &KeyValue, key_indices: &[usize]) -> Ordering {
    for &i in key_indices {
        let ord = compare_datums(column(&a.row, i), column(&b.row, i));
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// Column `i` of a row; a short row reads as null rather than panicking.
fn column(row: &[Datum], i: usize) -> &Datum {
    row.get(i).unwrap_or(&Datum::Null)
}

/// The key columns of a row.
pub(crate) fn key_of(row: &[Datum], key_indices: &[usize]) -> Vec<Datum> {
    key_indices
        .iter()
        .map(|&i| column(row, i).clone())
        .collect()
}

/// Order of two rows by their key columns.
pub(crate) fn compare_keys(a: &[Datum], b: &[Datum], key_indices: &[usize]) -> Ordering {
    compare_rows(&key_of(a, key_indices), &key_of(b, key_indices))
}

#[cfg(test)]
mod tests;
