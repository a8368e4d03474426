//! The columns a `full` cache looks rows up by (the primary key, a secondary index) and
//! their fields read in place from a stored row or a probe: kept apart so the mapping of
//! table columns to a stored row's fields (which holds only the columns the cache keeps)
//! is written once.

use std::borrow::Cow;
use std::sync::Arc;

use crate::error::{Error, Result};
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
    /// `columns` (table column indices) in stored rows whose fields are `stored_at`'s.
    /// A column out of range or not stored is `Error::Config`: the positions and types
    /// must stay parallel, or a key would be compared with too few fields.
    pub(super) fn new(
        columns: Vec<usize>,
        stored_at: &[Option<usize>],
        table_types: &[DataType],
    ) -> Result<Self> {
        let mut positions = Vec::with_capacity(columns.len());
        let mut types = Vec::with_capacity(columns.len());
        for &c in &columns {
            match (stored_at.get(c).copied().flatten(), table_types.get(c)) {
                (Some(position), Some(ty)) => {
                    positions.push(position);
                    types.push(*ty);
                }
                _ => {
                    return Err(Error::Config(format!(
                        "column {c} is not among the cache's stored columns"
                    )));
                }
            }
        }
        Ok(Columns {
            types,
            positions,
            probe: (0..columns.len()).collect(),
            columns,
        })
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

/// Where a projection's columns sit among the stored fields, and their types.
pub(super) type StoredProjection<'a> = (Cow<'a, [usize]>, Arc<[DataType]>);

/// Where the table columns of `projection` are among the fields of rows that store the
/// table columns `stored` (`stored_at` maps a table column to its position there).
pub(super) fn stored_positions(
    stored: &[usize],
    stored_at: &[Option<usize>],
    projection: &[usize],
) -> Result<Vec<usize>> {
    projection
        .iter()
        .map(|&p| match stored_at.get(p) {
            Some(Some(position)) => Ok(*position),
            Some(None) => Err(Error::Data(format!(
                "projection column {p} is not kept by this full cache (it keeps {stored:?})"
            ))),
            None => Err(Error::Data(format!(
                "projection column {p} is out of range (the table has {} columns)",
                stored_at.len()
            ))),
        })
        .collect()
}
