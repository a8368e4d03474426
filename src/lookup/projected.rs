//! A looked-up row as a join hands it on: the join's projected columns as one Paimon
//! BinaryRow in one shared allocation.
//!
//! Why not a decoded `Row`: a decoded row is a vector plus one allocation per string,
//! scattered over the heap. A join reads each looked-up row once, to write its columns
//! into the output, so the `full` cache paid for allocating and UTF-8 checking strings
//! that were only copied out again, and a `partial` cache hit walked several cold
//! allocations per row (a sixth of a `partial` join's CPU in a profile). As BinaryRow
//! bytes, a `full` cache hit is a copy of the projected slots and string bytes out of its
//! arena, a cached row is one allocation with its reference count in front, and the
//! output is written from the bytes, strings borrowed in place.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::table::binary_row::{self, FieldValue};
use crate::table::datum::{Datum, Row};
use crate::table::types::DataType;

/// Projected columns of a looked-up row: BinaryRow bytes whose fields have the join's
/// projected types (which the row does not carry; its reader passes them).
#[derive(Clone, PartialEq, Eq)]
pub struct ProjectedRow(Arc<[u8]>);

impl std::fmt::Debug for ProjectedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProjectedRow({} bytes)", self.0.len())
    }
}

impl ProjectedRow {
    /// The fields at `positions` of a stored BinaryRow whose fields have `types`, copied
    /// without decoding. `scratch` is reused between calls.
    pub(crate) fn project(
        scratch: &mut Vec<u8>,
        body: &[u8],
        types: &[DataType],
        positions: &[usize],
    ) -> Result<Self> {
        scratch.clear();
        binary_row::project_into(scratch, body, types, positions)?;
        Ok(ProjectedRow(Arc::from(scratch.as_slice())))
    }

    /// The fields at `positions` of a decoded row whose fields have `types`.
    pub(crate) fn from_row(row: Row, types: &[DataType], positions: &[usize]) -> Result<Self> {
        let mut row = row;
        let mut values = Vec::with_capacity(positions.len());
        let mut value_types = Vec::with_capacity(positions.len());
        for &i in positions {
            let ty = types.get(i).ok_or_else(|| {
                Error::format(format!("column {i} is out of range of the table's row"))
            })?;
            value_types.push(*ty);
            // A position taken twice: the second copy is cloned from the first.
            let value = match row.get_mut(i) {
                Some(Datum::Null) | None => positions
                    .iter()
                    .position(|&p| p == i)
                    .and_then(|first| values.get(first).cloned())
                    .unwrap_or(Datum::Null),
                Some(value) => std::mem::replace(value, Datum::Null),
            };
            values.push(value);
        }
        let bytes = binary_row::encode(&values, &value_types)?;
        Ok(ProjectedRow(Arc::from(bytes)))
    }

    /// A whole decoded row (tests).
    #[cfg(test)]
    pub(crate) fn of(row: Row, types: &[DataType]) -> Self {
        let all: Vec<usize> = (0..row.len()).collect();
        Self::from_row(row, types, &all).expect("a row of its types")
    }

    /// Field `i`, its string borrowed; `types` are the projected columns' types.
    pub(crate) fn field(&self, i: usize, types: &[DataType]) -> Result<FieldValue<'_>> {
        let ty = types.get(i).ok_or_else(|| {
            Error::format(format!("column {i} is out of range of a projected row"))
        })?;
        binary_row::field_value(&self.0, types.len(), i, ty)
    }

    /// The row decoded; `types` are the projected columns' types.
    pub fn decode(&self, types: &[DataType]) -> Result<Row> {
        binary_row::decode(&self.0, types)
    }

    /// Size of the BinaryRow in bytes (an estimate of its columns' JSON too).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> Vec<DataType> {
        vec![DataType::Int, DataType::Varchar(100), DataType::Double]
    }

    fn row() -> Row {
        vec![
            Datum::Int(7),
            Datum::String("a string longer than a slot".into()),
            Datum::Null,
        ]
    }

    #[test]
    fn from_bytes_and_from_datums_agree() {
        let types = types();
        let body = binary_row::encode(&row(), &types).unwrap();
        for positions in [vec![], vec![1], vec![2, 0], vec![1, 1, 0]] {
            let mut scratch = vec![1, 2, 3];
            let projected = ProjectedRow::project(&mut scratch, &body, &types, &positions).unwrap();
            let decoded = ProjectedRow::from_row(row(), &types, &positions).unwrap();
            assert_eq!(projected, decoded, "{positions:?}");
            let projected_types: Vec<DataType> = positions.iter().map(|&p| types[p]).collect();
            let want: Row = positions.iter().map(|&p| row()[p].clone()).collect();
            assert_eq!(projected.decode(&projected_types).unwrap(), want);
        }
    }

    #[test]
    fn fields_are_read_in_place() {
        let types = types();
        let projected = ProjectedRow::from_row(row(), &types, &[1, 2, 0]).unwrap();
        let projected_types = [types[1], types[2], types[0]];
        assert_eq!(
            projected.field(0, &projected_types).unwrap(),
            FieldValue::Text("a string longer than a slot")
        );
        assert_eq!(
            projected.field(1, &projected_types).unwrap(),
            FieldValue::Null
        );
        assert_eq!(
            projected.field(2, &projected_types).unwrap(),
            FieldValue::Datum(Datum::Int(7))
        );
        assert!(projected.field(3, &projected_types).is_err());
        assert!(ProjectedRow::from_row(row(), &types, &[3]).is_err());
    }
}
