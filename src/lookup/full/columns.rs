//! The columns a `full` cache looks rows up by (the primary key, a secondary index) and
//! their fields read in place from a stored row or a probe: kept apart so the mapping of
//! table columns to a stored row's fields (which holds only the columns the cache keeps)
//! is written once.

use crate::error::Result;
use crate::table::binary_row::{self, FieldImage};
use crate::table::types::DataType;

/// Some columns of an encoded row: `positions` of BinaryRow `body` with `arity` fields,
/// typed by `types` (parallel to `positions`).
#[derive(Clone, Copy)]
pub(super) struct Fields<'a> {
    body: &'a [u8],
    arity: usize,
    positions: &'a [usize],
    types: &'a [DataType],
}

impl<'a> Fields<'a> {
    pub(super) fn images(self) -> impl Iterator<Item = Result<Option<FieldImage<'a>>>> {
        self.positions
            .iter()
            .zip(self.types)
            .map(move |(&pos, ty)| binary_row::field_image(self.body, self.arity, pos, ty))
    }

    /// Whether every field equals its counterpart in `other`; a null (or unreadable)
    /// field equals nothing.
    pub(super) fn same_values(self, other: Fields<'_>) -> bool {
        self.positions.len() == other.positions.len()
            && self
                .images()
                .zip(other.images())
                .all(|pair| matches!(pair, (Ok(Some(a)), Ok(Some(b))) if a == b))
    }
}

/// Columns a row is looked up by: the primary key or a secondary index.
pub(super) struct Columns {
    /// Table column indices.
    pub(super) columns: Vec<usize>,
    /// Their positions among a stored row's fields.
    pub(super) positions: Vec<usize>,
    pub(super) types: Vec<DataType>,
    /// `0..len`: the positions in a probe row that holds only these columns.
    probe: Vec<usize>,
}

impl Columns {
    /// `columns` must be stored (`stored_at` has a position for each).
    pub(super) fn new(
        columns: Vec<usize>,
        stored_at: &[Option<usize>],
        table_types: &[DataType],
    ) -> Self {
        Columns {
            types: columns
                .iter()
                .filter_map(|&c| table_types.get(c).copied())
                .collect(),
            positions: columns
                .iter()
                .filter_map(|&c| stored_at.get(c).copied().flatten())
                .collect(),
            probe: (0..columns.len()).collect(),
            columns,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.positions.len()
    }

    /// These columns in a stored row of `arity` fields.
    pub(super) fn in_row<'a>(&'a self, body: &'a [u8], arity: usize) -> Fields<'a> {
        Fields {
            body,
            arity,
            positions: &self.positions,
            types: &self.types,
        }
    }

    /// These columns in a probe row encoded with `self.types`.
    pub(super) fn in_probe<'a>(&'a self, body: &'a [u8]) -> Fields<'a> {
        Fields {
            body,
            arity: self.types.len(),
            positions: &self.probe,
            types: &self.types,
        }
    }
}
