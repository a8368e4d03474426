//! The `aggregation` merge engine (Java's `AggregateMergeFunction`) and the resolution of
//! each column's aggregate function from the table options.

use super::function::{AggregateFunction, FieldAggregator};
use super::{Admission, CannotRetract, RetractionRefused, init_row};
use crate::error::Result;
use crate::table::data_file::KeyValue;
use crate::table::datum::Datum;
use crate::table::options::TableOptions;
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;
use crate::table::types::Field;

/// The function of a column as configured: its own `fields.<f>.aggregate-function`, else
/// `fields.default-aggregate-function`. Problems name the option key.
pub(crate) struct ConfiguredFunctions<'a> {
    options: &'a TableOptions,
    default: Option<AggregateFunction>,
}

impl<'a> ConfiguredFunctions<'a> {
    pub(crate) fn new(options: &'a TableOptions, problems: &mut Vec<String>) -> Self {
        let default = options
            .default_aggregate_function
            .as_deref()
            .and_then(|name| {
                AggregateFunction::parse(name)
                    .map_err(|e| {
                        problems.push(format!("option `fields.default-aggregate-function`: {e}"))
                    })
                    .ok()
            });
        ConfiguredFunctions { options, default }
    }

    /// The function and the option key it came from.
    pub(crate) fn of(
        &self,
        field: &str,
        problems: &mut Vec<String>,
    ) -> Option<(AggregateFunction, String)> {
        let own = self
            .options
            .field_options
            .get(field)
            .and_then(|o| o.aggregate_function.as_deref());
        match own {
            Some(name) => {
                let key = format!("fields.{field}.aggregate-function");
                match AggregateFunction::parse(name) {
                    Ok(f) => Some((f, key)),
                    Err(e) => {
                        problems.push(format!("option `{key}`: {e}"));
                        None
                    }
                }
            }
            None => self
                .default
                .map(|f| (f, "fields.default-aggregate-function".to_string())),
        }
    }

    /// Builds the aggregator of `field`, reporting a type mismatch against `key`.
    pub(crate) fn build(
        &self,
        field: &Field,
        function: AggregateFunction,
        key: &str,
        problems: &mut Vec<String>,
    ) -> FieldAggregator {
        FieldAggregator::new(field, function, self.options).unwrap_or_else(|e| {
            problems.push(format!("option `{key}` on column `{}`: {e}", field.name));
            // A stand-in so the other columns can still be checked.
            FieldAggregator::fallback(field)
        })
    }
}

/// The `aggregation` merge engine (Java's `AggregateMergeFunction`).
#[derive(Debug, Clone)]
pub(crate) struct Aggregation {
    aggregators: Vec<FieldAggregator>,
    nullable: Vec<bool>,
    remove_record_on_delete: bool,
}

impl Aggregation {
    /// Resolves every column's function: primary-key columns are carried, `sequence.field`
    /// columns take the last value, the rest follow the options (default
    /// last_non_null_value).
    pub(crate) fn new(
        schema: &TableSchema,
        options: &TableOptions,
        problems: &mut Vec<String>,
    ) -> Self {
        let functions = ConfiguredFunctions::new(options, problems);
        let mut aggregators = Vec::with_capacity(schema.fields.len());
        for field in &schema.fields {
            let (function, key) = if options.sequence_fields.contains(&field.name) {
                (AggregateFunction::LastValue, "sequence.field".to_string())
            } else if schema.primary_keys.contains(&field.name) {
                (AggregateFunction::PrimaryKey, "primary-key".to_string())
            } else {
                functions.of(&field.name, problems).unwrap_or((
                    AggregateFunction::LastNonNullValue,
                    "fields.default-aggregate-function".to_string(),
                ))
            };
            let aggregator = functions.build(field, function, &key, problems);
            if options.aggregation_remove_record_on_delete && aggregator.ignores_retract() {
                problems.push(format!(
                    "options `aggregation.remove-record-on-delete` and \
                     `fields.{}.ignore-retract` conflict; set only one",
                    field.name
                ));
            }
            aggregators.push(aggregator);
        }
        for group in &options.sequence_groups {
            problems.push(format!(
                "option `{}`: sequence groups are supported by merge-engine partial-update only",
                group.key
            ));
        }
        Aggregation {
            aggregators,
            nullable: schema.fields.iter().map(|f| f.nullable).collect(),
            remove_record_on_delete: options.aggregation_remove_record_on_delete,
        }
    }

    /// Whether a retraction of `kind` can be merged: every column must define a
    /// retraction, unless the row is a -D removing the key.
    pub(crate) fn admit(&self, kind: RowKind) -> std::result::Result<Admission, RetractionRefused> {
        if kind == RowKind::Delete && self.remove_record_on_delete {
            return Ok(Admission::Keep);
        }
        let columns: Vec<CannotRetract> = self
            .aggregators
            .iter()
            .filter_map(FieldAggregator::cannot_retract)
            .collect();
        if columns.is_empty() {
            return Ok(Admission::Keep);
        }
        Err(RetractionRefused::AggregateFunctions { kind, columns })
    }

    /// Folds the versions of one key, oldest first. The result is an insert, or a delete
    /// when the newest version is a -D under `aggregation.remove-record-on-delete`.
    pub(crate) fn merge(&self, versions: &[KeyValue]) -> Result<Option<KeyValue>> {
        let mut row = vec![Datum::Null; self.aggregators.len()];
        let mut first_taken = vec![false; self.aggregators.len()];
        let mut latest: Option<&KeyValue> = None;
        let mut deleted = false;
        for kv in versions {
            latest = Some(kv);
            deleted = self.remove_record_on_delete && kv.kind == RowKind::Delete;
            if deleted {
                // Java restarts from the NOT NULL columns of the delete row.
                row = init_row(&kv.row, &self.nullable);
                continue;
            }
            let retract = kv.kind.is_retract();
            let columns = row
                .iter_mut()
                .zip(&self.aggregators)
                .zip(first_taken.iter_mut().zip(&kv.row));
            for ((slot, aggregator), (taken, input)) in columns {
                let acc = std::mem::replace(slot, Datum::Null);
                *slot = if retract {
                    aggregator.retract(acc, input)?
                } else {
                    aggregator.agg(taken, acc, input)?
                };
            }
        }
        Ok(latest.map(|last| KeyValue {
            sequence_number: last.sequence_number,
            kind: if deleted {
                RowKind::Delete
            } else {
                RowKind::Insert
            },
            // A folded -D keeps its own values, so its `sequence.field` still orders it
            // among other files' versions (Java would keep only the NOT NULL columns).
            row: if deleted { last.row.clone() } else { row },
        }))
    }
}
