//! Which partition a join reads: all of them (the join key names the partition), a
//! fixed one, or the newest (`max_pt()`), followed as new partitions appear.

use std::cmp::Ordering;

use crate::config::PartitionSelection;
use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::datum::{Row, compare_rows, datum_from_json};

/// A join's partition choice, resolved against its table.
#[derive(Debug, Clone, PartialEq)]
pub enum PartitionChoice {
    /// `max_pt()`.
    Newest,
    /// Partition values in `partition_keys` order.
    Fixed(Row),
}

impl PartitionChoice {
    pub(crate) fn resolve(selection: &PartitionSelection, table: &Table) -> Result<Self> {
        let schema = table.schema();
        match selection {
            PartitionSelection::Function(f) if f == PartitionSelection::MAX_PT => {
                Ok(PartitionChoice::Newest)
            }
            PartitionSelection::Function(f) => Err(Error::Config(format!(
                "partition `{f}` of a join on {} is not `max_pt()`",
                table.identifier()
            ))),
            PartitionSelection::Fixed(spec) => {
                let mut values = Vec::with_capacity(schema.partition_keys.len());
                for column in &schema.partition_keys {
                    let (Some(value), Some(field)) = (spec.get(column), schema.field(column))
                    else {
                        return Err(Error::Config(format!(
                            "partition of a join on {}: no value for `{column}`",
                            table.identifier()
                        )));
                    };
                    values.push(datum_from_json(value, &field.data_type).map_err(|e| {
                        Error::Config(format!(
                            "partition of a join on {}: `{column}`: {e}",
                            table.identifier()
                        ))
                    })?);
                }
                Ok(PartitionChoice::Fixed(values))
            }
        }
    }
}

/// The greatest partition (values compared column by column) among serialized ones.
pub(crate) fn newest_partition(table: &Table, partitions: &[Vec<u8>]) -> Result<Option<Row>> {
    let mut newest: Option<Row> = None;
    for bytes in partitions {
        let values = table.partition_values(bytes)?;
        if newest
            .as_ref()
            .is_none_or(|n| compare_rows(&values, n) == Ordering::Greater)
        {
            newest = Some(values);
        }
    }
    Ok(newest)
}
