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

/// Projected columns of a looked-up row: BinaryRow bytes, and the types they were
/// written in. The types travel with the bytes because a table's schema can widen a
/// column (INT to BIGINT) while lookups run: a row must be read in the schema it was
/// read in, which the join cannot know. They are shared by every row of a lookup.
#[derive(Clone, PartialEq, Eq)]
pub struct ProjectedRow {
    bytes: Arc<[u8]>,
    types: Arc<[DataType]>,
}

impl std::fmt::Debug for ProjectedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ProjectedRow({} bytes, {:?})",
            self.bytes.len(),
            self.types
        )
    }
}

/// The types of the columns at `positions` of a row whose fields have `types`.
pub(crate) fn projected_types(types: &[DataType], positions: &[usize]) -> Result<Arc<[DataType]>> {
    positions
        .iter()
        .map(|&i| {
            types.get(i).copied().ok_or_else(|| {
                Error::format(format!("column {i} is out of range of the table's row"))
            })
        })
        .collect()
}

impl ProjectedRow {
    /// The fields at `positions` of a stored BinaryRow whose fields have `types`, copied
    /// without decoding; `projected` are [`projected_types`] of them. `scratch` is reused
    /// between calls.
    pub(crate) fn project(
        scratch: &mut Vec<u8>,
        body: &[u8],
        types: &[DataType],
        positions: &[usize],
        projected: &Arc<[DataType]>,
    ) -> Result<Self> {
        scratch.clear();
        binary_row::project_into(scratch, body, types, positions)?;
        Ok(ProjectedRow {
            bytes: Arc::from(scratch.as_slice()),
            types: projected.clone(),
        })
    }

    /// The fields at `positions` of a decoded row; `projected` are their types.
    pub(crate) fn from_row(
        row: Row,
        positions: &[usize],
        projected: &Arc<[DataType]>,
    ) -> Result<Self> {
        let mut row = row;
        let mut values = Vec::with_capacity(positions.len());
        for &i in positions {
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
        let bytes = binary_row::encode(&values, projected)?;
        Ok(ProjectedRow {
            bytes: Arc::from(bytes),
            types: projected.clone(),
        })
    }

    /// A whole decoded row (tests).
    #[cfg(test)]
    pub(crate) fn of(row: Row, types: &[DataType]) -> Self {
        let all: Vec<usize> = (0..row.len()).collect();
        Self::from_row(row, &all, &Arc::from(types)).expect("a row of its types")
    }

    /// The row's fields, read in place.
    pub(crate) fn fields(&self) -> RowFields<'_> {
        RowFields {
            body: &self.bytes,
            types: &self.types,
            positions: None,
        }
    }

    /// The row decoded.
    pub fn decode(&self) -> Result<Row> {
        binary_row::decode(&self.bytes, &self.types)
    }

    /// Loads the row's first and last cache lines without using them: a batch's rows
    /// loaded one after another this way are fetched from memory together, where reading
    /// each only when its turn comes waits for them one at a time.
    pub(crate) fn prefetch(&self) {
        std::hint::black_box((self.bytes.first().copied(), self.bytes.last().copied()));
    }

    /// Size of the BinaryRow in bytes (an estimate of its columns' JSON too).
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// The columns a join reads of a looked-up row, read in place: a projected row's, or
/// a stored row's (a `full` cache hit, read from the cache's memory without copying the
/// columns out first).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowFields<'a> {
    /// A BinaryRow.
    body: &'a [u8],
    /// The types of all of its fields.
    types: &'a [DataType],
    /// The fields read, in order (`None`: all of them).
    positions: Option<&'a [usize]>,
}

impl<'a> RowFields<'a> {
    /// Fields `positions` of the BinaryRow `body`, whose fields have `types`.
    pub(crate) fn of(body: &'a [u8], types: &'a [DataType], positions: &'a [usize]) -> Self {
        RowFields {
            body,
            types,
            positions: Some(positions),
        }
    }

    /// Column `i` (of those read) and its type, a string borrowed.
    pub(crate) fn field(&self, i: usize) -> Result<(FieldValue<'a>, DataType)> {
        let at = match self.positions {
            None => i,
            Some(positions) => *positions.get(i).ok_or_else(|| {
                Error::format(format!("column {i} is out of range of a projected row"))
            })?,
        };
        let ty = self.types.get(at).ok_or_else(|| {
            Error::format(format!("column {at} is out of range of a looked-up row"))
        })?;
        Ok((
            binary_row::field_value(self.body, self.types.len(), at, ty)?,
            *ty,
        ))
    }

    /// An estimate of the columns' size as JSON: the BinaryRow's size.
    pub(crate) fn len_hint(&self) -> usize {
        self.body.len()
    }

    /// The columns copied out into a row of their own; `projected` are their types.
    /// `scratch` is reused between calls.
    pub(crate) fn to_projected(
        self,
        scratch: &mut Vec<u8>,
        projected: &Arc<[DataType]>,
    ) -> Result<ProjectedRow> {
        match self.positions {
            Some(positions) => {
                ProjectedRow::project(scratch, self.body, self.types, positions, projected)
            }
            None => Ok(ProjectedRow {
                bytes: Arc::from(self.body),
                types: projected.clone(),
            }),
        }
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
            let wanted = projected_types(&types, &positions).unwrap();
            let projected =
                ProjectedRow::project(&mut scratch, &body, &types, &positions, &wanted).unwrap();
            let decoded = ProjectedRow::from_row(row(), &positions, &wanted).unwrap();
            assert_eq!(projected, decoded, "{positions:?}");
            let want: Row = positions.iter().map(|&p| row()[p].clone()).collect();
            assert_eq!(projected.decode().unwrap(), want);
            // Read in place from the stored row, the fields are the projected row's, and
            // copying them out gives the projected row.
            let in_place = RowFields::of(&body, &types, &positions);
            for i in 0..=positions.len() {
                let (a, b) = (in_place.field(i), projected.fields().field(i));
                assert_eq!(a.is_err(), b.is_err(), "{positions:?} field {i}");
                if let (Ok(a), Ok(b)) = (a, b) {
                    assert_eq!(a, b, "{positions:?} field {i}");
                }
            }
            let copied = in_place.to_projected(&mut Vec::new(), &wanted).unwrap();
            assert_eq!(copied, projected, "{positions:?}");
        }
    }

    #[test]
    fn fields_are_read_in_place() {
        let types = types();
        let wanted = projected_types(&types, &[1, 2, 0]).unwrap();
        let projected = ProjectedRow::from_row(row(), &[1, 2, 0], &wanted).unwrap();
        assert_eq!(
            projected.fields().field(0).unwrap(),
            (FieldValue::Text(b"a string longer than a slot"), types[1])
        );
        assert_eq!(
            projected.fields().field(1).unwrap(),
            (FieldValue::Null, types[2])
        );
        assert_eq!(
            projected.fields().field(2).unwrap(),
            (FieldValue::Datum(Datum::Int(7)), types[0])
        );
        assert!(projected.fields().field(3).is_err());
        assert!(projected_types(&types, &[3]).is_err());
    }

    /// A row read in a widened schema (INT to BIGINT) is read back in that schema.
    #[test]
    fn a_row_is_read_in_the_types_it_was_written_in() {
        let wide: Arc<[DataType]> = Arc::from([DataType::BigInt]);
        let widened =
            ProjectedRow::from_row(vec![Datum::BigInt(-5_000_000_000)], &[0], &wide).unwrap();
        assert_eq!(
            widened.decode().unwrap(),
            vec![Datum::BigInt(-5_000_000_000)]
        );
        assert_eq!(
            widened.fields().field(0).unwrap(),
            (
                FieldValue::Datum(Datum::BigInt(-5_000_000_000)),
                DataType::BigInt
            )
        );
    }
}
