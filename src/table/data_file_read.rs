//! Reading data files (docs/format.md §7): a file's rows in the table's current schema,
//! one Arrow batch at a time.
//!
//! Why a module of its own, apart from writing: merges (scans, compaction) read many
//! files at once and must hold only a batch of each, so the reader is an iterator; and a
//! corrupt file (found by the `data_file` fuzz target) must come back as an error from
//! every step of it, never as a panic.

use arrow::array::{Array, ArrayRef, Int8Array, Int64Array, RecordBatch, new_null_array};
use arrow::compute::cast;
use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use super::column_batch::ColumnBatch;
use super::data_file::{KeyValue, SEQUENCE_NUMBER_COLUMN, VALUE_KIND_COLUMN};
use super::deletion_vector::DeletionVector;
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

/// A data file's rows as [`ColumnBatch`]es of `BATCH_ROWS` rows in the table's current
/// columns: what [`DataFileRows`] makes rows of, and what a compaction that needs no merge
/// copies as it is.
pub(crate) struct DataFileBatches {
    reader: ParquetRecordBatchReader,
    fields: Vec<Field>,
    /// Per table column, its name in the file (`None`: added after the file was written).
    file_names: Vec<Option<String>>,
    /// Ended, or failed (an error is returned once).
    done: bool,
    /// Named in the errors of reading on (see [`Self::in_file`]).
    path: Option<String>,
}

impl DataFileBatches {
    /// Checks the footer and the column chunks it lists, and opens the reader.
    pub(crate) fn open(
        bytes: Bytes,
        file_schema: &TableSchema,
        table_schema: &TableSchema,
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
        Ok(DataFileBatches {
            reader,
            fields: table_schema.fields.clone(),
            file_names,
            done: false,
            path: None,
        })
    }

    /// Names `path` in the errors of the batches read from now on.
    pub(crate) fn in_file(mut self, path: String) -> Self {
        self.path = Some(path);
        self
    }

    /// The table's columns.
    pub(crate) fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The next batch; `None` at the end of the file.
    fn next_batch(&mut self) -> Option<Result<ColumnBatch>> {
        let DataFileBatches {
            reader,
            fields,
            file_names,
            ..
        } = self;
        let batch = without_panics(|| {
            reader
                .next()
                .transpose()
                .map_err(|e| Error::arrow("decoding data file", e))
        });
        match batch {
            Ok(Some(batch)) => Some(without_panics(|| columns_of(&batch, fields, file_names))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl Iterator for DataFileBatches {
    type Item = Result<ColumnBatch>;

    fn next(&mut self) -> Option<Result<ColumnBatch>> {
        if self.done {
            return None;
        }
        let next = self.next_batch();
        match next {
            Some(Ok(batch)) => Some(Ok(batch)),
            Some(Err(e)) => {
                self.done = true;
                Some(Err(match self.path.take() {
                    Some(path) => e.in_file(path),
                    None => e,
                }))
            }
            None => {
                self.done = true;
                None
            }
        }
    }
}

/// A file's Arrow batch in table columns `fields`: each column found by its name in the
/// file, cast to its Arrow type (files written with other physical types, such as large
/// strings or other timestamp units, read the same), or all null when the file predates
/// it; the system columns without nulls (a null reads as 0, as before it was checked).
fn columns_of(
    batch: &RecordBatch,
    fields: &[Field],
    file_names: &[Option<String>],
) -> Result<ColumnBatch> {
    let schema = batch.schema();
    let rows = batch.num_rows();
    let column = |name: &str| -> Option<ArrayRef> {
        schema.index_of(name).ok().map(|i| batch.column(i).clone())
    };
    let seq: Int64Array = system_column(&column, SEQUENCE_NUMBER_COLUMN, DataType::BigInt)?;
    let kind: Int8Array = system_column(&column, VALUE_KIND_COLUMN, DataType::TinyInt)?;
    let kind = if kind.null_count() == 0 {
        Int8Array::new(kind.values().clone(), None)
    } else {
        Int8Array::from_iter_values(kind.iter().map(|k| k.unwrap_or(0)))
    };
    let values = fields
        .iter()
        .zip(file_names)
        .map(|(field, file_name)| {
            let target = field.data_type.to_arrow();
            let array = match file_name.as_deref().and_then(column) {
                Some(a) if a.data_type() == &target => a,
                Some(a) => cast(&a, &target)
                    .map_err(|e| Error::arrow(format!("column `{}`", field.name), e))?,
                None => new_null_array(&target, rows),
            };
            if array.len() != rows {
                return Err(Error::format(format!(
                    "column `{}` has {} values in a batch of {rows} rows",
                    field.name,
                    array.len(),
                )));
            }
            Ok(array)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ColumnBatch {
        sequence: Int64Array::new(seq.values().clone(), None),
        kind,
        values,
    })
}

/// A data file's rows, decoded one Arrow batch (`BATCH_ROWS` rows) at a time, so a
/// merge of many files holds a batch of each instead of every row of every file. Rows
/// come in file order; those a deletion vector marks are skipped.
pub(crate) struct DataFileRows {
    batches: DataFileBatches,
    deleted: Option<DeletionVector>,
    /// File position of the next batch's first row.
    position: u64,
    batch: std::vec::IntoIter<KeyValue>,
}

impl DataFileRows {
    /// Checks the footer and the column chunks it lists, and opens the reader.
    pub(crate) fn open(
        bytes: Bytes,
        file_schema: &TableSchema,
        table_schema: &TableSchema,
        deleted: Option<DeletionVector>,
    ) -> Result<Self> {
        Ok(DataFileRows {
            batches: DataFileBatches::open(bytes, file_schema, table_schema)?,
            deleted,
            position: 0,
            batch: Vec::new().into_iter(),
        })
    }

    /// Names `path` in the errors of the batches read from now on.
    pub(crate) fn in_file(mut self, path: String) -> Self {
        self.batches = self.batches.in_file(path);
        self
    }

    /// The file's batches, when no row of it was read yet and no deletion vector
    /// applies (a batch holds every row of its part of the file); else `None`.
    pub(crate) fn into_batches(self) -> Option<DataFileBatches> {
        (self.position == 0 && self.deleted.is_none()).then_some(self.batches)
    }
}

impl Iterator for DataFileRows {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Result<KeyValue>> {
        loop {
            if let Some(row) = self.batch.next() {
                return Some(Ok(row));
            }
            let batch = match self.batches.next()? {
                Ok(batch) => batch,
                Err(e) => return Some(Err(e)),
            };
            let first = self.position;
            self.position += batch.len() as u64;
            let rows =
                without_panics(|| batch.rows(self.batches.fields(), first, self.deleted.as_ref()));
            match rows {
                Ok(rows) => self.batch = rows.into_iter(),
                Err(e) => {
                    // Reading stops at the first error, as it did inside the reader.
                    self.batches.done = true;
                    return Some(Err(match self.batches.path.take() {
                        Some(path) => e.in_file(path),
                        None => e,
                    }));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::data_file::{DataFileWriteOptions, encode_data_file};
    use crate::table::datum::Datum;
    use crate::table::row_kind::RowKind;
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;

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
