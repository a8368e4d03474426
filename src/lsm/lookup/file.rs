//! Point reads in one sorted data file: row-group statistics and bloom filters rule the
//! file out cheaply, the page index narrows the key to a few pages, and a binary search
//! over those decoded rows finds it.

use std::cmp::Ordering;
use std::fs::File;

use arrow::array::{ArrayRef, RecordBatch};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::basic::Type as PhysicalType;
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::statistics::Statistics;

use crate::error::{Error, Result};
use crate::table::data_file::{
    KeyValue, RowKind, SEQUENCE_NUMBER_COLUMN, VALUE_KIND_COLUMN, array_to_datums,
    file_column_names,
};
use crate::table::datum::{Datum, compare_datums};
use crate::table::schema::TableSchema;
use crate::table::types::Field;

/// A key value in the physical form Parquet statistics use; only integer and byte-string
/// keys are pruned this way (other types fall back to reading the row group).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Bound {
    Int(i64),
    Bytes(Vec<u8>),
}

fn bound_of(datum: &Datum) -> Option<Bound> {
    match datum {
        Datum::TinyInt(v) => Some(Bound::Int(*v as i64)),
        Datum::SmallInt(v) => Some(Bound::Int(*v as i64)),
        Datum::Int(v) | Datum::Date(v) => Some(Bound::Int(*v as i64)),
        Datum::BigInt(v) => Some(Bound::Int(*v)),
        Datum::String(s) => Some(Bound::Bytes(s.as_bytes().to_vec())),
        Datum::Bytes(b) => Some(Bound::Bytes(b.clone())),
        _ => None,
    }
}

/// Whether `[min, max]` (unknown ends open) may contain `key`.
fn may_contain(min: &Option<Bound>, max: &Option<Bound>, key: &Bound) -> bool {
    min.as_ref().is_none_or(|m| m <= key) && max.as_ref().is_none_or(|m| key <= m)
}

#[derive(Debug)]
struct PageRange {
    first_row: usize,
    min: Option<Bound>,
    max: Option<Bound>,
}

#[derive(Debug)]
struct RowGroupIndex {
    num_rows: usize,
    min: Option<Bound>,
    max: Option<Bound>,
    pages: Vec<PageRange>,
    /// Bloom filter of each trimmed key column, when the writer made one.
    blooms: Vec<Option<Sbbf>>,
}

/// An open data file ready for point reads. Holds the file handle and decoded metadata.
#[derive(Debug)]
pub struct FileKeyReader {
    file: File,
    metadata: ArrowReaderMetadata,
    projection: ProjectionMask,
    /// Name in the file of each table column (None: column added after the file).
    file_names: Vec<Option<String>>,
    table_fields: Vec<Field>,
    key_indices: Vec<usize>,
    key_physical: Vec<Option<PhysicalType>>,
    row_groups: Vec<RowGroupIndex>,
}

impl FileKeyReader {
    /// Opens `file` written with `file_schema`, for reading rows of `table_schema`.
    pub fn open(file: File, file_schema: &TableSchema, table_schema: &TableSchema) -> Result<Self> {
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let metadata = ArrowReaderMetadata::load(&file, options)
            .map_err(|e| Error::parquet("reading data file footer", e))?;
        let file_names = file_column_names(file_schema, table_schema);
        let parquet = metadata.metadata().clone();
        let descr = parquet.file_metadata().schema_descr();
        let leaf_of = |name: &str| {
            (0..descr.num_columns()).find(|&i| descr.column(i).path().string() == name)
        };
        // Value columns plus the two system columns; `_KEY_*` are read from the values,
        // as pypaimon does.
        let mut wanted: Vec<usize> = file_names
            .iter()
            .flatten()
            .filter_map(|n| leaf_of(n))
            .collect();
        for system in [SEQUENCE_NUMBER_COLUMN, VALUE_KIND_COLUMN] {
            wanted.push(
                leaf_of(system)
                    .ok_or_else(|| Error::format(format!("data file has no {system} column")))?,
            );
        }
        let projection = ProjectionMask::leaves(descr, wanted);
        let key_indices = table_schema.trimmed_key_indices();
        let key_leaves: Vec<Option<usize>> = key_indices
            .iter()
            .map(|&i| file_names[i].as_deref().and_then(leaf_of))
            .collect();
        let key_physical: Vec<Option<PhysicalType>> = key_leaves
            .iter()
            .map(|l| l.map(|l| descr.column(l).physical_type()))
            .collect();
        let mut row_groups = Vec::with_capacity(parquet.num_row_groups());
        for rg in 0..parquet.num_row_groups() {
            let meta = parquet.row_group(rg);
            let num_rows = meta.num_rows().max(0) as usize;
            let (mut min, mut max, mut pages) = (None, None, Vec::new());
            if let Some(Some(leaf)) = key_leaves.first() {
                if let Some(stats) = meta.column(*leaf).statistics() {
                    (min, max) = stats_bounds(stats);
                }
                let page_index = parquet.page_index_for_row_group(rg);
                if let (Some(offsets), Some(columns)) = (
                    page_index.offset_index(*leaf),
                    page_index.column_index(*leaf),
                ) {
                    for (p, location) in offsets.page_locations().iter().enumerate() {
                        let (pmin, pmax) = page_bounds(columns, p);
                        pages.push(PageRange {
                            first_row: location.first_row_index.max(0) as usize,
                            min: pmin,
                            max: pmax,
                        });
                    }
                }
            }
            let blooms = key_leaves
                .iter()
                .map(|leaf| match leaf {
                    Some(l) => Sbbf::read_from_column_chunk(meta.column(*l), &file)
                        .ok()
                        .flatten(),
                    None => None,
                })
                .collect();
            row_groups.push(RowGroupIndex {
                num_rows,
                min,
                max,
                pages,
                blooms,
            });
        }
        Ok(FileKeyReader {
            file,
            metadata,
            projection,
            file_names,
            table_fields: table_schema.fields.clone(),
            key_indices,
            key_physical,
            row_groups,
        })
    }

    /// The version of `key` (trimmed primary-key values) in this file, if any.
    pub fn get(&self, key: &[Datum]) -> Result<Option<KeyValue>> {
        let first = key.first().and_then(bound_of);
        for (rg, index) in self.row_groups.iter().enumerate() {
            if let Some(k) = &first
                && !may_contain(&index.min, &index.max, k)
            {
                continue;
            }
            if !self.bloom_may_contain(index, key) {
                continue;
            }
            let (start, end) = match &first {
                Some(k) => page_rows(index, k),
                None => (0, index.num_rows),
            };
            if start >= end {
                continue;
            }
            if let Some(found) = self.search_rows(rg, start, end, key)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    fn bloom_may_contain(&self, index: &RowGroupIndex, key: &[Datum]) -> bool {
        for ((bloom, physical), value) in index.blooms.iter().zip(&self.key_physical).zip(key) {
            let Some(bloom) = bloom else { continue };
            let present = match (physical, value) {
                (Some(PhysicalType::INT32), Datum::TinyInt(v)) => bloom.check(&(*v as i32)),
                (Some(PhysicalType::INT32), Datum::SmallInt(v)) => bloom.check(&(*v as i32)),
                (Some(PhysicalType::INT32), Datum::Int(v) | Datum::Date(v)) => bloom.check(v),
                (Some(PhysicalType::INT64), Datum::BigInt(v)) => bloom.check(v),
                (Some(PhysicalType::BYTE_ARRAY), Datum::String(s)) => bloom.check(s.as_str()),
                (Some(PhysicalType::BYTE_ARRAY), Datum::Bytes(b)) => bloom.check(b.as_slice()),
                // Other encodings: no opinion.
                _ => true,
            };
            if !present {
                return false;
            }
        }
        true
    }

    /// Decodes rows `start..end` of row group `rg` and binary-searches them for `key`.
    fn search_rows(
        &self,
        rg: usize,
        start: usize,
        end: usize,
        key: &[Datum],
    ) -> Result<Option<KeyValue>> {
        let file = self.file.try_clone().map_err(|e| Error::Io {
            context: "reopening data file".into(),
            source: e,
        })?;
        let selection = RowSelection::from(vec![
            RowSelector::skip(start),
            RowSelector::select(end - start),
        ]);
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.metadata.clone())
                .with_projection(self.projection.clone())
                .with_row_groups(vec![rg])
                .with_row_selection(selection)
                .with_batch_size(end - start)
                .build()
                .map_err(|e| Error::parquet("reading data file rows", e))?;
        for batch in reader {
            let batch = batch.map_err(|e| Error::arrow("decoding data file rows", e))?;
            if let Some(kv) = self.search_batch(&batch, key)? {
                return Ok(Some(kv));
            }
        }
        Ok(None)
    }

    fn column(&self, batch: &RecordBatch, field: usize) -> Option<ArrayRef> {
        let name = self.file_names[field].as_deref()?;
        batch
            .schema()
            .index_of(name)
            .ok()
            .map(|i| batch.column(i).clone())
    }

    fn datum_at(&self, batch: &RecordBatch, field: usize, row: usize) -> Result<Datum> {
        match self.column(batch, field) {
            Some(array) => Ok(
                array_to_datums(&array.slice(row, 1), &self.table_fields[field])?
                    .pop()
                    .unwrap_or(Datum::Null),
            ),
            None => Ok(Datum::Null),
        }
    }

    fn search_batch(&self, batch: &RecordBatch, key: &[Datum]) -> Result<Option<KeyValue>> {
        let (mut lo, mut hi) = (0usize, batch.num_rows());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let mut ord = Ordering::Equal;
            for (k, &field) in key.iter().zip(&self.key_indices) {
                ord = compare_datums(&self.datum_at(batch, field, mid)?, k);
                if ord != Ordering::Equal {
                    break;
                }
            }
            match ord {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return self.key_value_at(batch, mid).map(Some),
            }
        }
        Ok(None)
    }

    fn key_value_at(&self, batch: &RecordBatch, row: usize) -> Result<KeyValue> {
        let schema = batch.schema();
        let int_at = |name: &str| -> Result<i64> {
            let i = schema
                .index_of(name)
                .map_err(|_| Error::format(format!("data file has no {name} column")))?;
            let array = arrow::compute::cast(
                &batch.column(i).slice(row, 1),
                &arrow::datatypes::DataType::Int64,
            )
            .map_err(|e| Error::arrow(name, e))?;
            let values = array
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .ok_or_else(|| Error::format(format!("{name} is not an integer")))?;
            Ok(
                if values.is_empty() || arrow::array::Array::is_null(values, 0) {
                    0
                } else {
                    values.value(0)
                },
            )
        };
        let sequence_number = int_at(SEQUENCE_NUMBER_COLUMN)?;
        let kind_byte = int_at(VALUE_KIND_COLUMN)?;
        let kind = i8::try_from(kind_byte)
            .ok()
            .and_then(RowKind::from_byte)
            .ok_or_else(|| Error::format(format!("invalid _VALUE_KIND {kind_byte}")))?;
        let row = (0..self.table_fields.len())
            .map(|f| self.datum_at(batch, f, row))
            .collect::<Result<Vec<_>>>()?;
        Ok(KeyValue {
            sequence_number,
            kind,
            row,
        })
    }
}

/// Rows of the row group whose pages may hold `key` (all rows without a page index).
fn page_rows(index: &RowGroupIndex, key: &Bound) -> (usize, usize) {
    if index.pages.is_empty() {
        return (0, index.num_rows);
    }
    let mut first = None;
    let mut last = None;
    for (p, page) in index.pages.iter().enumerate() {
        if may_contain(&page.min, &page.max, key) {
            first.get_or_insert(p);
            last = Some(p);
        }
    }
    match (first, last) {
        (Some(f), Some(l)) => {
            let start = index.pages[f].first_row;
            let end = index
                .pages
                .get(l + 1)
                .map_or(index.num_rows, |p| p.first_row);
            (start, end.min(index.num_rows))
        }
        _ => (0, 0),
    }
}

fn stats_bounds(stats: &Statistics) -> (Option<Bound>, Option<Bound>) {
    match stats {
        Statistics::Int32(s) => (
            s.min_opt().map(|v| Bound::Int(*v as i64)),
            s.max_opt().map(|v| Bound::Int(*v as i64)),
        ),
        Statistics::Int64(s) => (
            s.min_opt().map(|v| Bound::Int(*v)),
            s.max_opt().map(|v| Bound::Int(*v)),
        ),
        // Byte-array statistics may be truncated: a truncated min is a prefix (still ≤),
        // a truncated max is rounded up (still ≥), so pruning stays correct.
        Statistics::ByteArray(s) => (
            s.min_opt().map(|v| Bound::Bytes(v.data().to_vec())),
            s.max_opt().map(|v| Bound::Bytes(v.data().to_vec())),
        ),
        _ => (None, None),
    }
}

fn page_bounds(index: &ColumnIndexMetaData, page: usize) -> (Option<Bound>, Option<Bound>) {
    match index {
        ColumnIndexMetaData::INT32(i) => (
            i.min_value(page).map(|v| Bound::Int(*v as i64)),
            i.max_value(page).map(|v| Bound::Int(*v as i64)),
        ),
        ColumnIndexMetaData::INT64(i) => (
            i.min_value(page).map(|v| Bound::Int(*v)),
            i.max_value(page).map(|v| Bound::Int(*v)),
        ),
        ColumnIndexMetaData::BYTE_ARRAY(i) => (
            i.min_value(page).map(|v| Bound::Bytes(v.to_vec())),
            i.max_value(page).map(|v| Bound::Bytes(v.to_vec())),
        ),
        _ => (None, None),
    }
}
