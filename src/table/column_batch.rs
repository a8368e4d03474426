//! A data file's rows as Arrow columns in the table's current schema: what the encoder
//! writes and the reader decodes.
//!
//! Why: a compaction whose files overlap no other's keys has nothing to merge, and
//! copies their columns batch by batch into the new files instead of making a row of
//! each value and building the columns again from the rows; that round trip was about a
//! third of such a compaction's CPU. Both directions live here (rows into columns for
//! writing, columns into rows for merging), so that the two stay each other's inverse.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryBuilder, BooleanArray, BooleanBuilder, Date32Array, Date32Builder,
    Decimal128Array, Decimal128Builder, Float32Array, Float32Builder, Float64Array, Float64Builder,
    Int8Array, Int8Builder, Int16Array, Int16Builder, Int32Array, Int32Builder, Int64Array,
    Int64Builder, StringBuilder, TimestampMicrosecondArray, TimestampMicrosecondBuilder,
    TimestampMillisecondArray, TimestampMillisecondBuilder, TimestampNanosecondArray,
    TimestampNanosecondBuilder, TimestampSecondArray, TimestampSecondBuilder,
};
use arrow::datatypes::TimeUnit;
use compact_str::CompactString;

use super::data_file::{KeyValue, SEQUENCE_NUMBER_COLUMN, VALUE_KIND_COLUMN};
use super::datum::{Datum, Row, Timestamp};
use super::deletion_vector::DeletionVector;
use super::row_kind::RowKind;
use super::schema::TableSchema;
use super::types::{DataType, Field};
use crate::error::{Error, Result};

/// Rows of a data file (or a part of one) as columns.
#[derive(Debug, Clone)]
pub(crate) struct ColumnBatch {
    /// Each row's `_SEQUENCE_NUMBER`; no nulls.
    pub(crate) sequence: Int64Array,
    /// Each row's `_VALUE_KIND` byte; no nulls (a byte that is no row kind is an error
    /// where a row is made of it, [`Self::kind_at`]).
    pub(crate) kind: Int8Array,
    /// One array per table column, of the column's Arrow type ([`DataType::to_arrow`]).
    pub(crate) values: Vec<ArrayRef>,
}

impl ColumnBatch {
    /// The columns of `rows`, rows of `schema`.
    pub(crate) fn of_rows(schema: &TableSchema, rows: &[KeyValue]) -> Result<Self> {
        let columns = schema.fields.len();
        let values = schema
            .fields
            .iter()
            .enumerate()
            .map(|(i, field)| {
                column_array(
                    field,
                    rows.iter().map(|kv| value_at(kv, i, columns)),
                    rows.len(),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ColumnBatch {
            sequence: Int64Array::from_iter_values(rows.iter().map(|kv| kv.sequence_number)),
            kind: Int8Array::from_iter_values(rows.iter().map(|kv| kv.kind.to_byte())),
            values,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.sequence.len()
    }

    /// Rows `offset..offset + len` (sharing the arrays' buffers).
    pub(crate) fn slice(&self, offset: usize, len: usize) -> Self {
        ColumnBatch {
            sequence: self.sequence.slice(offset, len),
            kind: self.kind.slice(offset, len),
            values: self.values.iter().map(|v| v.slice(offset, len)).collect(),
        }
    }

    /// The rows of `parts`, one after the other (all of one schema).
    pub(crate) fn concat(parts: &[ColumnBatch]) -> Result<Self> {
        match parts {
            [only] => return Ok(only.clone()),
            [] => return Err(Error::Data("no column batch to concatenate".into())),
            _ => {}
        }
        let concat = |arrays: Vec<&dyn Array>| {
            arrow::compute::concat(&arrays).map_err(|e| Error::arrow("concatenating columns", e))
        };
        let sequence = concat(parts.iter().map(|p| &p.sequence as &dyn Array).collect())?;
        let kind = concat(parts.iter().map(|p| &p.kind as &dyn Array).collect())?;
        let columns = parts.first().map_or(0, |p| p.values.len());
        let values = (0..columns)
            .map(|c| {
                concat(
                    parts
                        .iter()
                        .map(|p| p.values.get(c).map(|a| a.as_ref() as &dyn Array))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| Error::Data("column batches of different schemas".into()))?,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ColumnBatch {
            sequence: typed(&sequence, SEQUENCE_NUMBER_COLUMN)?,
            kind: typed(&kind, VALUE_KIND_COLUMN)?,
            values,
        })
    }

    /// Row `r`'s kind.
    pub(crate) fn kind_at(&self, r: usize) -> Result<RowKind> {
        let byte = self.kind.value(r);
        RowKind::from_byte(byte).ok_or_else(|| Error::format(format!("invalid _VALUE_KIND {byte}")))
    }

    /// The rows, in table columns `fields`, less those `deleted` marks (the batch's
    /// first row is at file position `first`).
    pub(crate) fn rows(
        &self,
        fields: &[Field],
        first: u64,
        deleted: Option<&DeletionVector>,
    ) -> Result<Vec<KeyValue>> {
        // Rows are filled a column at a time, straight from the arrays.
        let mut rows: Vec<Row> = (0..self.len())
            .map(|_| Vec::with_capacity(fields.len()))
            .collect();
        for (field, array) in fields.iter().zip(&self.values) {
            push_datums(array, field, &mut rows)?;
        }
        let mut out = Vec::with_capacity(rows.len());
        for (r, row) in rows.into_iter().enumerate() {
            if deleted.is_some_and(|d| d.is_deleted(first + r as u64)) {
                continue;
            }
            out.push(KeyValue {
                sequence_number: self.sequence.value(r),
                kind: self.kind_at(r)?,
                row,
            });
        }
        Ok(out)
    }

    /// The values of table columns `columns` of each row (a row of those columns each).
    pub(crate) fn rows_of_columns(&self, fields: &[Field], columns: &[usize]) -> Result<Vec<Row>> {
        let mut rows: Vec<Row> = (0..self.len())
            .map(|_| Vec::with_capacity(columns.len()))
            .collect();
        for &c in columns {
            let (Some(field), Some(array)) = (fields.get(c), self.values.get(c)) else {
                return Err(Error::Data(format!("a column batch has no column {c}")));
            };
            push_datums(array, field, &mut rows)?;
        }
        Ok(rows)
    }
}

/// `array` as the array type `A`.
fn typed<A: Array + Clone + 'static>(array: &ArrayRef, name: &str) -> Result<A> {
    array
        .as_any()
        .downcast_ref::<A>()
        .cloned()
        .ok_or_else(|| Error::format(format!("{name} has an unexpected Arrow type")))
}

fn mismatch(field: &Field, datum: &Datum) -> Error {
    Error::Data(format!(
        "column `{}` of type {} cannot hold {datum:?}",
        field.name, field.data_type
    ))
}

/// Column `i` of a row, or why the row does not fit a table of `columns` columns.
fn value_at(kv: &KeyValue, i: usize, columns: usize) -> Result<&Datum> {
    kv.row.get(i).ok_or_else(|| {
        Error::Data(format!(
            "row has {} values, table has {columns}",
            kv.row.len()
        ))
    })
}

/// Builds an Arrow array of one column from `rows`.
fn column_array<'a>(
    field: &Field,
    values: impl Iterator<Item = Result<&'a Datum>> + Clone,
    len: usize,
) -> Result<ArrayRef> {
    // Exact byte capacity for variable-length columns: growing a builder of megabytes
    // copies it and faults in fresh pages each time.
    let payload_bytes = || {
        values
            .clone()
            .map(|v| match v {
                Ok(Datum::String(s)) => s.len(),
                Ok(Datum::Bytes(b)) => b.len(),
                _ => 0,
            })
            .sum::<usize>()
    };
    macro_rules! build {
        // `$conv` returns a `Result`: a value the column's type cannot store.
        ($builder:expr, $variant:ident, checked $conv:expr) => {{
            let mut b = $builder;
            for v in values {
                match v? {
                    Datum::Null => b.append_null(),
                    Datum::$variant(x) => b.append_value($conv(x)?),
                    other => return Err(mismatch(field, &other)),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
        ($builder:expr, $variant:ident, $conv:expr) => {
            build!($builder, $variant, checked(|x| Ok::<_, Error>($conv(x))))
        };
    }
    // The writer checks rows (`check_row`); a row that got past it is rejected here
    // rather than stored as a wrapped or clamped value.
    let unstorable = |t: &Timestamp| {
        Error::Data(format!(
            "column `{}`: {}",
            field.name,
            super::datum::TimestampOutOfRange::new(
                super::datum::format_timestamp(*t),
                &field.data_type
            )
        ))
    };
    let array = match field.data_type {
        DataType::Boolean => build!(BooleanBuilder::with_capacity(len), Boolean, |x: &bool| *x),
        DataType::TinyInt => build!(Int8Builder::with_capacity(len), TinyInt, |x: &i8| *x),
        DataType::SmallInt => build!(Int16Builder::with_capacity(len), SmallInt, |x: &i16| *x),
        DataType::Int => build!(Int32Builder::with_capacity(len), Int, |x: &i32| *x),
        DataType::BigInt => build!(Int64Builder::with_capacity(len), BigInt, |x: &i64| *x),
        DataType::Float => build!(Float32Builder::with_capacity(len), Float, |x: &f32| *x),
        DataType::Double => build!(Float64Builder::with_capacity(len), Double, |x: &f64| *x),
        DataType::Date => build!(Date32Builder::with_capacity(len), Date, |x: &i32| *x),
        DataType::Char(_) | DataType::Varchar(_) => {
            build!(
                StringBuilder::with_capacity(len, payload_bytes()),
                String,
                |x: &'a CompactString| x.as_str()
            )
        }
        DataType::Binary(_) | DataType::Varbinary(_) => {
            build!(
                BinaryBuilder::with_capacity(len, payload_bytes()),
                Bytes,
                |x: &'a Vec<u8>| x.as_slice()
            )
        }
        DataType::Decimal { precision, scale } => {
            let b = Decimal128Builder::with_capacity(len)
                .with_precision_and_scale(precision, scale as i8)
                .map_err(|e| Error::arrow("decimal column", e))?;
            build!(b, Decimal, |x: &i128| *x)
        }
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
            let tz = matches!(field.data_type, DataType::TimestampLtz(_)).then_some("UTC");
            match super::types::timestamp_unit(p) {
                TimeUnit::Second => build!(
                    TimestampSecondBuilder::with_capacity(len).with_timezone_opt(tz),
                    Timestamp,
                    |t: &Timestamp| t.millis.div_euclid(1000)
                ),
                TimeUnit::Millisecond => build!(
                    TimestampMillisecondBuilder::with_capacity(len).with_timezone_opt(tz),
                    Timestamp,
                    |t: &Timestamp| t.millis
                ),
                TimeUnit::Microsecond => build!(
                    TimestampMicrosecondBuilder::with_capacity(len).with_timezone_opt(tz),
                    Timestamp,
                    checked |t: &Timestamp| t.checked_micros().ok_or_else(|| unstorable(t))
                ),
                TimeUnit::Nanosecond => build!(
                    TimestampNanosecondBuilder::with_capacity(len).with_timezone_opt(tz),
                    Timestamp,
                    checked |t: &Timestamp| t.checked_nanos().ok_or_else(|| unstorable(t))
                ),
            }
        }
    };
    Ok(array)
}

/// Adds datum `i` of `array` (of `field`'s Arrow type, [`DataType::to_arrow`]) to
/// `rows[i]`.
fn push_datums(array: &ArrayRef, field: &Field, rows: &mut [Row]) -> Result<()> {
    if array.len() != rows.len() {
        return Err(Error::format(format!(
            "column `{}` has {} values in a batch of {} rows",
            field.name,
            array.len(),
            rows.len()
        )));
    }
    macro_rules! convert {
        ($ty:ty, $f:expr) => {{
            let a = array.as_any().downcast_ref::<$ty>().ok_or_else(|| {
                Error::format(format!(
                    "column `{}` has an unexpected Arrow type",
                    field.name
                ))
            })?;
            for (i, row) in rows.iter_mut().enumerate() {
                row.push(if a.is_null(i) {
                    Datum::Null
                } else {
                    $f(a.value(i))
                });
            }
        }};
    }
    match field.data_type {
        DataType::Boolean => convert!(BooleanArray, Datum::Boolean),
        DataType::TinyInt => convert!(Int8Array, Datum::TinyInt),
        DataType::SmallInt => convert!(Int16Array, Datum::SmallInt),
        DataType::Int => convert!(Int32Array, Datum::Int),
        DataType::BigInt => convert!(Int64Array, Datum::BigInt),
        DataType::Float => convert!(Float32Array, Datum::Float),
        DataType::Double => convert!(Float64Array, Datum::Double),
        DataType::Date => convert!(Date32Array, Datum::Date),
        DataType::Decimal { .. } => convert!(Decimal128Array, Datum::Decimal),
        DataType::Char(_) | DataType::Varchar(_) => {
            convert!(arrow::array::StringArray, |s: &str| Datum::String(s.into()))
        }
        DataType::Binary(_) | DataType::Varbinary(_) => {
            convert!(arrow::array::BinaryArray, |b: &[u8]| Datum::Bytes(
                b.to_vec()
            ))
        }
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => match super::types::timestamp_unit(p)
        {
            TimeUnit::Second => {
                convert!(TimestampSecondArray, |v: i64| Datum::Timestamp(Timestamp {
                    millis: v.saturating_mul(1000),
                    nanos_of_milli: 0
                }))
            }
            TimeUnit::Millisecond => convert!(TimestampMillisecondArray, |v: i64| {
                Datum::Timestamp(Timestamp::from_millis(v))
            }),
            TimeUnit::Microsecond => convert!(TimestampMicrosecondArray, |v: i64| {
                Datum::Timestamp(Timestamp::from_micros(v))
            }),
            TimeUnit::Nanosecond => convert!(TimestampNanosecondArray, |v: i64| {
                Datum::Timestamp(Timestamp::from_nanos(v))
            }),
        },
    }
    Ok(())
}
