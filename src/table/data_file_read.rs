//! Reading data files (docs/format.md §7): a file's rows in the table's current schema,
//! one Arrow batch at a time.
//!
//! Why a module of its own, apart from writing: merges (scans, compaction) read many
//! files at once and must hold only a batch of each, so the reader is an iterator; and a
//! corrupt file (found by the `data_file` fuzz target) must come back as an error from
//! every step of it, never as a panic.

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int8Array, Int16Array, Int32Array, Int64Array, RecordBatch, TimestampMicrosecondArray,
    TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray,
};
use arrow::compute::cast;
use arrow::datatypes::TimeUnit;
use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use super::data_file::{KeyValue, SEQUENCE_NUMBER_COLUMN, VALUE_KIND_COLUMN};
use super::datum::{Datum, Row, Timestamp};
use super::deletion_vector::DeletionVector;
use super::row_kind::RowKind;
use super::schema::TableSchema;
use super::types::{DataType, Field};
use crate::error::{Error, Result};

/// Rows decoded at a time: few, so that a merge of many runs holds little.
const BATCH_ROWS: usize = 1024;

/// The name in a file written with `file_schema` of each column of `table_schema`, matched
/// by the stable field id (`None`: the column was added after the file was written).
pub(crate) fn file_column_names(
    file_schema: &TableSchema,
    table_schema: &TableSchema,
) -> Vec<Option<String>> {
    table_schema
        .fields
        .iter()
        .map(|f| {
            file_schema
                .fields
                .iter()
                .find(|ff| ff.id == f.id)
                .map(|ff| ff.name.clone())
        })
        .collect()
}

/// The system column `name` (`_SEQUENCE_NUMBER`, `_VALUE_KIND`) of a batch, read through
/// `column`, cast to the Arrow type of `data_type` and downcast to its array type `A`.
fn system_column<A: Array + Clone + 'static>(
    column: &impl Fn(&str) -> Option<ArrayRef>,
    name: &str,
    data_type: DataType,
) -> Result<A> {
    let array =
        column(name).ok_or_else(|| Error::format(format!("data file has no {name} column")))?;
    let array = cast(&array, &data_type.to_arrow()).map_err(|e| Error::arrow(name, e))?;
    array
        .as_any()
        .downcast_ref::<A>()
        .cloned()
        .ok_or_else(|| Error::format(format!("{name} is not {data_type}")))
}

/// Decodes a data file written with `file_schema` into rows of `table_schema` (columns
/// matched by field id, then by name in the file; columns the file lacks are null).
pub fn decode_data_file(
    bytes: Bytes,
    file_schema: &TableSchema,
    table_schema: &TableSchema,
) -> Result<Vec<KeyValue>> {
    DataFileRows::open(bytes, file_schema, table_schema, None)?.collect()
}

/// A data file's rows, decoded one Arrow batch (`BATCH_ROWS` rows) at a time, so a
/// merge of many files holds a batch of each instead of every row of every file. Rows
/// come in file order; those a deletion vector marks are skipped.
pub(crate) struct DataFileRows {
    reader: ParquetRecordBatchReader,
    fields: Vec<Field>,
    /// Per table column, its name in the file (`None`: added after the file was written).
    file_names: Vec<Option<String>>,
    deleted: Option<DeletionVector>,
    /// File position of the next batch's first row.
    position: u64,
    batch: std::vec::IntoIter<KeyValue>,
    /// Ended, or failed (an error is returned once).
    done: bool,
    /// Named in the errors of reading on (see [`Self::in_file`]).
    path: Option<String>,
}

impl DataFileRows {
    /// Checks the footer and the column chunks it lists, and opens the reader.
    pub(crate) fn open(
        bytes: Bytes,
        file_schema: &TableSchema,
        table_schema: &TableSchema,
        deleted: Option<DeletionVector>,
    ) -> Result<Self> {
        let file_names = file_column_names(file_schema, table_schema);
        let reader = without_panics(|| {
            super::page_headers::check_footer(&bytes)
                .map_err(|e| Error::format(format!("data file {e}")))?;
            let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
                .map_err(|e| Error::parquet("opening data file", e))?;
            check_column_chunks(builder.metadata(), &bytes)?;
            // Only the columns a row is made of: not the `_KEY_` copies of the key
            // (a row's key is read from its value columns) nor columns since dropped.
            let wanted = |name: &str| {
                name == SEQUENCE_NUMBER_COLUMN
                    || name == VALUE_KIND_COLUMN
                    || file_names.iter().flatten().any(|n| n == name)
            };
            let roots = builder.parquet_schema().root_schema().get_fields();
            let projection = ProjectionMask::roots(
                builder.parquet_schema(),
                (0..roots.len()).filter(|&i| wanted(roots[i].name())),
            );
            builder
                .with_projection(projection)
                .with_batch_size(BATCH_ROWS)
                .build()
                .map_err(|e| Error::parquet("reading data file", e))
        })?;
        Ok(DataFileRows {
            reader,
            fields: table_schema.fields.clone(),
            file_names,
            deleted,
            position: 0,
            batch: Vec::new().into_iter(),
            done: false,
            path: None,
        })
    }

    /// Names `path` in the errors of the batches read from now on.
    pub(crate) fn in_file(mut self, path: String) -> Self {
        self.path = Some(path);
        self
    }

    /// The next batch's rows (less deleted ones); `None` at the end of the file.
    fn next_batch(&mut self) -> Option<Result<Vec<KeyValue>>> {
        let DataFileRows {
            reader,
            fields,
            file_names,
            deleted,
            position,
            ..
        } = self;
        let batch = without_panics(|| {
            reader
                .next()
                .transpose()
                .map_err(|e| Error::arrow("decoding data file", e))
        });
        let batch = match batch {
            Ok(Some(batch)) => batch,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let first = *position;
        *position += batch.num_rows() as u64;
        Some(without_panics(|| {
            batch_rows(&batch, fields, file_names, first, deleted.as_ref())
        }))
    }
}

impl Iterator for DataFileRows {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Result<KeyValue>> {
        loop {
            if let Some(row) = self.batch.next() {
                return Some(Ok(row));
            }
            if self.done {
                return None;
            }
            match self.next_batch() {
                Some(Ok(rows)) => self.batch = rows.into_iter(),
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(match self.path.take() {
                        Some(path) => e.in_file(path),
                        None => e,
                    }));
                }
                None => {
                    self.done = true;
                    return None;
                }
            }
        }
    }
}

/// Runs a step of the parquet reader, turning its panics into errors. The parquet crate
/// still panics on some corrupt page data (definition levels that overrun their buffer,
/// found by the `data_file` fuzz target): a corrupt file must be an error, not a crash
/// of the pipeline. Nothing is shared across the boundary.
fn without_panics<T>(step: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)).unwrap_or_else(|panic| {
        let reason = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::format(format!(
            "data file is corrupt: the parquet reader failed ({reason})"
        )))
    })
}

/// The rows of one Arrow batch whose first row is at file position `first`, in table
/// columns `fields`, less those `deleted` marks.
fn batch_rows(
    batch: &RecordBatch,
    fields: &[Field],
    file_names: &[Option<String>],
    first: u64,
    deleted: Option<&DeletionVector>,
) -> Result<Vec<KeyValue>> {
    let schema = batch.schema();
    let column = |name: &str| -> Option<ArrayRef> {
        schema.index_of(name).ok().map(|i| batch.column(i).clone())
    };
    let seq: Int64Array = system_column(&column, SEQUENCE_NUMBER_COLUMN, DataType::BigInt)?;
    let kind: Int8Array = system_column(&column, VALUE_KIND_COLUMN, DataType::TinyInt)?;
    // Rows are filled a column at a time, straight from the arrays.
    let mut rows: Vec<Row> = (0..batch.num_rows())
        .map(|_| Vec::with_capacity(fields.len()))
        .collect();
    for (field, file_name) in fields.iter().zip(file_names) {
        match file_name.as_deref().and_then(column) {
            Some(a) => push_datums(&a, field, &mut rows)?,
            None => rows.iter_mut().for_each(|row| row.push(Datum::Null)),
        }
    }
    let mut out = Vec::with_capacity(batch.num_rows());
    for (r, row) in rows.into_iter().enumerate() {
        if deleted.is_some_and(|d| d.is_deleted(first + r as u64)) {
            continue;
        }
        let kind_byte = if kind.is_null(r) { 0 } else { kind.value(r) };
        let kind = RowKind::from_byte(kind_byte)
            .ok_or_else(|| Error::format(format!("invalid _VALUE_KIND {kind_byte}")))?;
        out.push(KeyValue {
            sequence_number: seq.value(r),
            kind,
            row,
        });
    }
    Ok(out)
}

/// Checks that every column chunk the footer describes lies inside the file. The parquet
/// crate asserts (panics) on a negative offset or size when it reads the chunk, and a
/// corrupt footer can say anything: found by the `data_file` fuzz target.
fn check_column_chunks(
    metadata: &parquet::file::metadata::ParquetMetaData,
    file: &[u8],
) -> Result<()> {
    let file_len = file.len() as u64;
    for (rg, group) in metadata.row_groups().iter().enumerate() {
        for (c, column) in group.columns().iter().enumerate() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            let len = column.compressed_size();
            let inside = u64::try_from(start)
                .ok()
                .zip(u64::try_from(len).ok())
                .and_then(|(start, len)| start.checked_add(len))
                .is_some_and(|end| end <= file_len);
            if !inside {
                return Err(Error::format(format!(
                    "data file footer: column chunk {c} of row group {rg} claims bytes \
                     {start}+{len} of a {file_len}-byte file"
                )));
            }
            // In range: checked just above.
            let chunk = &file[start as usize..(start + len) as usize];
            super::page_headers::check_column_chunk(chunk)
                .map_err(|e| Error::format(format!("column chunk {c} of row group {rg}: {e}")))?;
        }
    }
    Ok(())
}

/// Converts one Arrow column to datums of `field`'s type and adds datum `i` to `rows[i]`,
/// casting first so files written with other physical types (large strings, other
/// timestamp units) read the same.
fn push_datums(array: &ArrayRef, field: &Field, rows: &mut [Row]) -> Result<()> {
    let target = field.data_type.to_arrow();
    let array = if array.data_type() == &target {
        array.clone()
    } else {
        cast(array, &target).map_err(|e| Error::arrow(format!("column `{}`", field.name), e))?
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::data_file::{DataFileWriteOptions, encode_data_file};
    use crate::table::testkit::keyed_schema;

    /// A file read into a later schema: a renamed column is found by its field id, a
    /// widened one is cast, a column added since reads as null, and a column the table no
    /// longer has is not read at all (nor are the `_KEY_` copies).
    #[test]
    fn a_file_is_read_into_the_tables_current_columns() {
        let file_schema = keyed_schema(
            &[
                ("id", DataType::Int),
                ("name", DataType::Varchar(20)),
                ("gone", DataType::Varchar(20)),
                ("age", DataType::Int),
            ],
            &["id"],
            &[],
        );
        let rows: Vec<KeyValue> = (0..3000)
            .map(|i| KeyValue {
                sequence_number: i64::from(i),
                kind: if i % 7 == 0 {
                    RowKind::Delete
                } else {
                    RowKind::Insert
                },
                row: vec![
                    Datum::Int(i),
                    Datum::String(format!("name {i}").into()),
                    Datum::String("dropped".into()),
                    if i % 5 == 0 {
                        Datum::Null
                    } else {
                        Datum::Int(i % 90)
                    },
                ],
            })
            .collect();
        let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
        let bytes = encode_data_file(&file_schema, &rows, options).unwrap();

        let mut table_schema = file_schema.clone();
        table_schema.fields.retain(|f| f.name != "gone");
        table_schema.fields[1].name = "full_name".into();
        table_schema.fields[2].data_type = DataType::BigInt;
        let mut city = table_schema.fields[1].clone();
        city.id = 100;
        city.name = "city".into();
        table_schema.fields.push(city);

        let got = decode_data_file(bytes, &file_schema, &table_schema).unwrap();
        let want: Vec<KeyValue> = rows
            .into_iter()
            .map(|kv| KeyValue {
                row: vec![
                    kv.row[0].clone(),
                    kv.row[1].clone(),
                    match kv.row[3] {
                        Datum::Int(a) => Datum::BigInt(i64::from(a)),
                        _ => Datum::Null,
                    },
                    Datum::Null,
                ],
                ..kv
            })
            .collect();
        assert_eq!(got, want);
    }
}
