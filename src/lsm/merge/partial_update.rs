//! The `partial-update` merge engine (Java's `PartialUpdateMergeFunction`): non-null
//! values overwrite, or, with sequence groups, each group of columns follows its own
//! sequence column(s) so several upstreams can write one wide row.

use std::cmp::Ordering;

use super::aggregate::ConfiguredFunctions;
use super::function::{AggregateFunction, FieldAggregator};
use super::{Admission, CannotRetract, RetractionRefused, fill_not_null, init_row};
use crate::error::{Error, Result};
use crate::table::data_file::KeyValue;
use crate::table::datum::{Datum, compare_datums};
use crate::table::options::TableOptions;
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;

/// One `fields.<s1,s2>.sequence-group` option.
#[derive(Debug, Clone)]
struct Group {
    sequence_fields: Vec<usize>,
    /// Named in `partial-update.remove-record-on-sequence-group`: a -D that wins this
    /// group removes the whole row.
    removes_record: bool,
}

/// How one column merges.
#[derive(Debug, Clone)]
struct Column {
    name: String,
    nullable: bool,
    /// The sequence group the column belongs to (as a member or a sequence field).
    group: Option<usize>,
    /// A sequence field of its group (set with the group, never aggregated).
    is_sequence: bool,
    aggregator: Option<FieldAggregator>,
}

/// The partial-update engine with its options.
#[derive(Debug, Clone)]
pub(crate) struct PartialUpdate {
    ignore_delete: bool,
    remove_record_on_delete: bool,
    groups: Vec<Group>,
    columns: Vec<Column>,
}

impl PartialUpdate {
    /// Reads the sequence groups and per-column functions; reports each bad option.
    pub(crate) fn new(
        schema: &TableSchema,
        options: &TableOptions,
        problems: &mut Vec<String>,
    ) -> Self {
        let mut columns: Vec<Column> = schema
            .fields
            .iter()
            .map(|f| Column {
                name: f.name.clone(),
                nullable: f.nullable,
                group: None,
                is_sequence: false,
                aggregator: None,
            })
            .collect();
        let mut groups = Vec::new();
        for spec in &options.sequence_groups {
            let index = groups.len();
            let mut sequence_fields = Vec::new();
            let named = spec
                .sequence_fields
                .iter()
                .map(|n| (n, true))
                .chain(spec.fields.iter().map(|n| (n, false)));
            for (name, is_sequence) in named {
                let Some(i) = schema.field_index(name) else {
                    problems.push(format!(
                        "option `{}` names `{name}`, which is not a column of the table",
                        spec.key
                    ));
                    continue;
                };
                let Some(column) = columns.get_mut(i) else {
                    continue;
                };
                match column.group {
                    Some(other) if other != index => problems.push(format!(
                        "column `{name}` is in more than one sequence group (option `{}`)",
                        spec.key
                    )),
                    _ => {
                        column.group = Some(index);
                        column.is_sequence |= is_sequence;
                        if is_sequence {
                            sequence_fields.push(i);
                        }
                    }
                }
            }
            groups.push(Group {
                removes_record: spec
                    .sequence_fields
                    .iter()
                    .any(|s| options.remove_record_on_sequence_group.contains(s)),
                sequence_fields,
            });
        }
        for name in &options.remove_record_on_sequence_group {
            let is_group_sequence = options
                .sequence_groups
                .iter()
                .any(|g| g.sequence_fields.contains(name));
            if !is_group_sequence {
                problems.push(format!(
                    "option `partial-update.remove-record-on-sequence-group` names `{name}`, \
                     which is not the sequence field of a sequence group"
                ));
            }
        }
        let conflicts = [
            (
                options.remove_record_on_delete && options.ignore_delete,
                "`partial-update.remove-record-on-delete` and `ignore-delete`",
            ),
            (
                !options.remove_record_on_sequence_group.is_empty() && options.ignore_delete,
                "`partial-update.remove-record-on-sequence-group` and `ignore-delete`",
            ),
            (
                options.remove_record_on_delete && !groups.is_empty(),
                "`partial-update.remove-record-on-delete` and `fields.<f>.sequence-group`",
            ),
        ];
        for (conflict, names) in conflicts {
            if conflict {
                problems.push(format!(
                    "options {names} conflict (Paimon refuses both); set only one"
                ));
            }
        }
        let functions = ConfiguredFunctions::new(options, problems);
        for (column, field) in columns.iter_mut().zip(&schema.fields) {
            if column.is_sequence {
                continue;
            }
            if schema.primary_keys.contains(&field.name) {
                column.aggregator = Some(functions.build(
                    field,
                    AggregateFunction::PrimaryKey,
                    "primary-key",
                    problems,
                ));
                continue;
            }
            let Some((function, key)) = functions.of(&field.name, problems) else {
                continue;
            };
            // Only last_non_null_value (the engine's own rule) works without a group.
            if function != AggregateFunction::LastNonNullValue && column.group.is_none() {
                problems.push(format!(
                    "option `{key}` = {} on column `{}` needs the column in a sequence group \
                     (fields.<sequence-field>.sequence-group)",
                    function.name(),
                    field.name
                ));
            }
            column.aggregator = Some(functions.build(field, function, &key, problems));
        }
        PartialUpdate {
            ignore_delete: options.ignore_delete,
            remove_record_on_delete: options.remove_record_on_delete,
            groups,
            columns,
        }
    }

    /// Decides on a retraction (`ignore-delete` was handled by the caller).
    pub(crate) fn admit(&self, kind: RowKind) -> std::result::Result<Admission, RetractionRefused> {
        if !self.groups.is_empty() {
            let columns: Vec<CannotRetract> = self
                .columns
                .iter()
                .filter(|c| c.group.is_some())
                .filter_map(|c| c.aggregator.as_ref())
                .filter_map(FieldAggregator::cannot_retract)
                .collect();
            if columns.is_empty() {
                return Ok(Admission::Keep);
            }
            return Err(RetractionRefused::GroupFunctions { kind, columns });
        }
        if self.remove_record_on_delete {
            // Paimon ignores -U when only removal on -D is configured.
            return Ok(if kind == RowKind::Delete {
                Admission::Keep
            } else {
                Admission::Drop
            });
        }
        Err(RetractionRefused::PartialUpdate { kind })
    }

    /// Folds the versions of one key, oldest first.
    pub(crate) fn merge(&self, versions: &[KeyValue]) -> Result<Option<KeyValue>> {
        let nullable: Vec<bool> = self.columns.iter().map(|c| c.nullable).collect();
        let mut row = vec![Datum::Null; self.columns.len()];
        let mut first_taken = vec![false; self.columns.len()];
        let mut latest_sequence: Option<i64> = None;
        // Without any add the result is a retraction (Java's `meetInsert`).
        let mut met_insert = false;
        let mut not_null_filled = false;
        let mut deleted: Option<&KeyValue> = None;
        for kv in versions {
            deleted = None;
            if kv.kind.is_retract() {
                if !not_null_filled {
                    fill_not_null(&mut row, &kv.row, &nullable);
                    not_null_filled = true;
                }
                if self.ignore_delete {
                    continue;
                }
                latest_sequence = Some(kv.sequence_number);
                if !self.groups.is_empty() {
                    if self.retract_with_groups(&mut row, &nullable, kv)? {
                        deleted = Some(kv);
                    }
                    continue;
                }
                if self.remove_record_on_delete {
                    if kv.kind == RowKind::Delete {
                        deleted = Some(kv);
                        row = init_row(&kv.row, &nullable);
                    }
                    continue;
                }
                return Err(Error::format(
                    "partial-update table holds a delete row, but neither \
                     `partial-update.ignore-delete`, `partial-update.remove-record-on-delete` \
                     nor sequence groups are set",
                ));
            }
            latest_sequence = Some(kv.sequence_number);
            if self.groups.is_empty() {
                self.update_non_null(&mut row, kv)?;
            } else {
                self.update_with_groups(&mut row, &mut first_taken, kv)?;
            }
            met_insert = true;
            not_null_filled = true;
        }
        let Some(sequence_number) = latest_sequence else {
            return Ok(None);
        };
        let kind = if deleted.is_some() || !met_insert {
            RowKind::Delete
        } else {
            RowKind::Insert
        };
        let row = match deleted {
            // A folded removal keeps its own values (Java 1.4.2 restarts the row from all
            // columns of the -D), so its `sequence.field` and its groups' sequence fields
            // still order it among other files' versions: without them a later merge
            // would not see that the -D wins its group and would keep the row.
            Some(delete) => delete.row.clone(),
            None => row,
        };
        Ok(Some(KeyValue {
            sequence_number,
            kind,
            row,
        }))
    }

    fn update_non_null(&self, row: &mut [Datum], kv: &KeyValue) -> Result<()> {
        for ((slot, column), value) in row.iter_mut().zip(&self.columns).zip(&kv.row) {
            if !value.is_null() {
                *slot = value.clone();
            } else if !column.nullable {
                return Err(Error::Data(format!(
                    "column `{}` is NOT NULL but a partial update leaves it null",
                    column.name
                )));
            }
        }
        Ok(())
    }

    /// Order of `values` against the accumulated `row` in each group; `None` when the
    /// group's sequence fields are all null in `values` (the group is not updated).
    fn group_orders(&self, values: &[Datum], row: &[Datum]) -> Vec<Option<Ordering>> {
        self.groups
            .iter()
            .map(|g| {
                let get = |r: &[Datum], i: usize| r.get(i).cloned().unwrap_or(Datum::Null);
                if g.sequence_fields.iter().all(|&i| get(values, i).is_null()) {
                    return None;
                }
                // Ascending, nulls first (Paimon's UserDefinedSeqComparator for groups).
                Some(
                    g.sequence_fields
                        .iter()
                        .map(|&i| compare_datums(&get(values, i), &get(row, i)))
                        .find(|o| *o != Ordering::Equal)
                        .unwrap_or(Ordering::Equal),
                )
            })
            .collect()
    }

    fn update_with_groups(
        &self,
        row: &mut [Datum],
        first_taken: &mut [bool],
        kv: &KeyValue,
    ) -> Result<()> {
        // The order is taken once per group before any column changes: a newer (or equal)
        // version sets the group's sequence fields to its own, so later columns of the
        // group would compare equal and update just the same.
        let orders = self.group_orders(&kv.row, row);
        let columns = row
            .iter_mut()
            .zip(&self.columns)
            .zip(first_taken.iter_mut().zip(&kv.row));
        for ((slot, column), (taken, input)) in columns {
            let Some(group) = column.group else {
                match &column.aggregator {
                    Some(a) => {
                        let acc = std::mem::replace(slot, Datum::Null);
                        *slot = a.agg(taken, acc, input)?;
                    }
                    None if !input.is_null() => *slot = input.clone(),
                    None => {}
                }
                continue;
            };
            let Some(order) = orders.get(group).copied().flatten() else {
                continue;
            };
            let acc = std::mem::replace(slot, Datum::Null);
            *slot = match (&column.aggregator, order) {
                // A group's columns take the newer version's values, nulls included.
                (None, Ordering::Greater | Ordering::Equal) => input.clone(),
                (Some(a), Ordering::Greater | Ordering::Equal) => a.agg(taken, acc, input)?,
                // An older version still counts for an aggregated column.
                (Some(a), Ordering::Less) => a.agg_reversed(taken, acc, input)?,
                (None, Ordering::Less) => acc,
            };
        }
        Ok(())
    }

    /// Takes a retraction back out of the groups it wins. Returns true when it removes the
    /// whole row (`partial-update.remove-record-on-sequence-group`).
    fn retract_with_groups(
        &self,
        row: &mut Vec<Datum>,
        nullable: &[bool],
        kv: &KeyValue,
    ) -> Result<bool> {
        let orders = self.group_orders(&kv.row, row);
        for (i, column) in self.columns.iter().enumerate() {
            let Some(group) = column.group else {
                continue;
            };
            let Some(order) = orders.get(group).copied().flatten() else {
                continue;
            };
            let input = kv.row.get(i).unwrap_or(&Datum::Null);
            if column.is_sequence && order != Ordering::Less {
                let removes = self.groups.get(group).is_some_and(|g| g.removes_record);
                if kv.kind == RowKind::Delete && removes {
                    *row = init_row(&kv.row, nullable);
                    return Ok(true);
                }
            }
            let Some(slot) = row.get_mut(i) else {
                continue;
            };
            let acc = std::mem::replace(slot, Datum::Null);
            *slot = match (&column.aggregator, order) {
                // The retraction wins the group: its sequence becomes the group's, and
                // the group's columns are cleared (or retracted when aggregated).
                _ if column.is_sequence => {
                    if order == Ordering::Less {
                        acc
                    } else {
                        input.clone()
                    }
                }
                (None, Ordering::Less) => acc,
                (None, _) => Datum::Null,
                (Some(a), _) => a.retract(acc, input)?,
            };
        }
        Ok(false)
    }
}
