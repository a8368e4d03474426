//! Writes a data file's record batch as Parquet, with `TIMESTAMP(7..9)` columns stored as
//! INT96, as Java Paimon stores them.
//!
//! Why not `ArrowWriter`: it writes nanosecond timestamps as INT64 `TIMESTAMP(NANOS)`,
//! and Java Paimon (1.4) reads a `TIMESTAMP(7..9)` column only as INT96; an INT64 one it
//! takes for epoch milliseconds, returning other instants. The parquet crate cannot write
//! INT96 from Arrow, so the file is assembled here from its parts: the arrow column
//! writers for every other column (the same encoders, statistics, page index and bloom
//! filters `ArrowWriter` uses) and the crate's typed INT96 column writer for those, in
//! schema order, row group by row group. Batches are added as they come, so a file of
//! many row groups never holds more than one open row group in memory.
//!
//! INT96 is Impala's layout: 8 bytes of nanoseconds within the day, then 4 bytes of
//! Julian day, both little-endian. The split is computed as Java's
//! `ParquetRowDataWriter.timestampToInt96` does (Java's truncating `/` and `%` on epoch
//! milliseconds), so lakejoin writes the bytes Java would; the parquet crate's reader
//! recombines them into epoch nanoseconds exactly for either sign.

use std::sync::Arc;

use arrow::array::{Array, RecordBatch, TimestampNanosecondArray};
use arrow::datatypes::{Schema as ArrowSchema, SchemaRef};
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::basic::{Repetition, Type as PhysicalType};
use parquet::data_type::{Int96, Int96Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use crate::error::{Error, Result};

/// The Julian day of 1970-01-01.
const JULIAN_EPOCH_DAY: i64 = 2_440_588;
const MILLIS_PER_DAY: i64 = 86_400_000;
const NANOS_PER_MILLI: i64 = 1_000_000;

/// The INT96 of a timestamp given in epoch nanoseconds, split as Java Paimon splits it.
pub(crate) fn int96_of_nanos(nanos: i64) -> Int96 {
    let millis = nanos.div_euclid(NANOS_PER_MILLI);
    let nano_of_milli = nanos.rem_euclid(NANOS_PER_MILLI);
    // Java: julianDay = mills / MILLIS_IN_DAY + offset; nanosOfDay = mills % MILLIS_IN_DAY
    // * 1e6 + nanoOfMillisecond (both truncating). Within i64 nanoseconds every part fits:
    // |days| < 2^27, |nanos of day| < 2^47.
    let julian_day = millis / MILLIS_PER_DAY + JULIAN_EPOCH_DAY;
    let nanos_of_day = (millis % MILLIS_PER_DAY) * NANOS_PER_MILLI + nano_of_milli;
    let mut value = Int96::new();
    let bits = nanos_of_day as u64;
    value.set_data(bits as u32, (bits >> 32) as u32, julian_day as i32 as u32);
    value
}

/// The Parquet schema `ArrowWriter` would write for `schema`, with the columns marked in
/// `int96` made plain INT96 (same name, repetition and field id; no logical type, as
/// Java writes them).
fn parquet_schema(schema: &ArrowSchema, int96: &[bool]) -> Result<Type> {
    let converted = ArrowSchemaConverter::new()
        .convert(schema)
        .map_err(|e| Error::parquet("deriving the data file's Parquet schema", e))?;
    let root = converted.root_schema();
    let mut fields = Vec::with_capacity(root.get_fields().len());
    for (field, &as_int96) in root.get_fields().iter().zip(int96) {
        if !as_int96 {
            fields.push(field.clone());
            continue;
        }
        let info = field.get_basic_info();
        let mut builder = Type::primitive_type_builder(field.name(), PhysicalType::INT96)
            .with_repetition(if info.has_repetition() {
                info.repetition()
            } else {
                Repetition::OPTIONAL
            });
        if info.has_id() {
            builder = builder.with_id(Some(info.id()));
        }
        let built = builder
            .build()
            .map_err(|e| Error::parquet("building an INT96 column", e))?;
        fields.push(Arc::new(built));
    }
    Type::group_type_builder(root.name())
        .with_fields(fields)
        .build()
        .map_err(|e| Error::parquet("building the data file's Parquet schema", e))
}

/// A Parquet file being written from record batches: row groups of at most
/// `row_group_rows` rows whatever the batches' sizes, the columns marked in `int96`
/// (nanosecond timestamp arrays) as INT96. Only the open row group's encoded pages (and
/// its INT96 values) are buffered besides the file's bytes.
pub(crate) struct ParquetFileWriter {
    file: SerializedFileWriter<Vec<u8>>,
    factory: ArrowRowGroupWriterFactory,
    int96: Vec<bool>,
    row_group_rows: usize,
    /// The open row group, if any rows were written since the last one closed.
    group: Option<OpenGroup>,
    /// Row groups closed so far.
    groups: usize,
}

/// A row group's columns while rows are still being added.
struct OpenGroup {
    /// Per column: its arrow writer, or its INT96 values and definition levels.
    columns: Vec<OpenColumn>,
    rows: usize,
}

enum OpenColumn {
    Arrow(Box<ArrowColumnWriter>),
    Int96 {
        values: Vec<Int96>,
        levels: Vec<i16>,
    },
}

impl ParquetFileWriter {
    pub(crate) fn new(
        schema: SchemaRef,
        int96: Vec<bool>,
        props: WriterProperties,
        row_group_rows: usize,
    ) -> Result<Self> {
        let parquet = Arc::new(parquet_schema(&schema, &int96)?);
        let file =
            SerializedFileWriter::new(Vec::with_capacity(64 * 1024), parquet, Arc::new(props))
                .map_err(|e| Error::parquet("opening data file writer", e))?;
        let factory = ArrowRowGroupWriterFactory::new(&file, schema);
        Ok(ParquetFileWriter {
            file,
            factory,
            int96,
            row_group_rows: row_group_rows.max(1),
            group: None,
            groups: 0,
        })
    }

    /// Adds `batch`'s rows, closing row groups as they fill.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut start = 0;
        while start < batch.num_rows() {
            let group = match &mut self.group {
                Some(group) => group,
                None => self.group.insert(self.open_group()?),
            };
            let take = (self.row_group_rows - group.rows).min(batch.num_rows() - start);
            let part = batch.slice(start, take);
            let part_schema = part.schema();
            let columns = part.columns().iter().zip(part_schema.fields().iter());
            for (column, (array, field)) in group.columns.iter_mut().zip(columns) {
                match column {
                    OpenColumn::Arrow(writer) => {
                        for leaf in compute_leaves(field, array)
                            .map_err(|e| Error::parquet(format!("column {}", field.name()), e))?
                        {
                            writer.write(&leaf).map_err(|e| {
                                Error::parquet(format!("writing column {}", field.name()), e)
                            })?;
                        }
                    }
                    OpenColumn::Int96 { values, levels } => {
                        add_int96(values, levels, array.as_ref(), field.name())?;
                    }
                }
            }
            group.rows += take;
            start += take;
            if group.rows >= self.row_group_rows {
                self.close_group()?;
            }
        }
        Ok(())
    }

    /// The file's size so far: closed row groups, plus the open one's encoded pages.
    pub(crate) fn estimated_size(&self) -> usize {
        let open: usize = self.group.as_ref().map_or(0, |g| {
            g.columns
                .iter()
                .map(|c| match c {
                    OpenColumn::Arrow(w) => w.get_estimated_total_bytes(),
                    OpenColumn::Int96 { values, .. } => values.len() * 12,
                })
                .sum()
        });
        self.file.bytes_written() + open
    }

    /// Closes the open row group and the file; returns its bytes.
    pub(crate) fn finish(mut self) -> Result<Vec<u8>> {
        self.close_group()?;
        self.file
            .into_inner()
            .map_err(|e| Error::parquet("closing data file", e))
    }

    fn open_group(&self) -> Result<OpenGroup> {
        let writers = self
            .factory
            .create_column_writers(self.groups)
            .map_err(|e| Error::parquet("creating column writers", e))?;
        let columns = writers
            .into_iter()
            .zip(&self.int96)
            .map(|(writer, &as_int96)| {
                if as_int96 {
                    OpenColumn::Int96 {
                        values: Vec::new(),
                        levels: Vec::new(),
                    }
                } else {
                    OpenColumn::Arrow(Box::new(writer))
                }
            })
            .collect();
        Ok(OpenGroup { columns, rows: 0 })
    }

    fn close_group(&mut self) -> Result<()> {
        let Some(open) = self.group.take() else {
            return Ok(());
        };
        let mut group = self
            .file
            .next_row_group()
            .map_err(|e| Error::parquet("starting a row group", e))?;
        for column in open.columns {
            match column {
                OpenColumn::Arrow(writer) => writer
                    .close()
                    .and_then(|chunk| chunk.append_to_row_group(&mut group))
                    .map_err(|e| Error::parquet("closing a column chunk", e))?,
                OpenColumn::Int96 { values, levels } => {
                    write_int96_column(&mut group, &values, &levels)?;
                }
            }
        }
        group
            .close()
            .map_err(|e| Error::parquet("closing a row group", e))?;
        self.groups += 1;
        Ok(())
    }
}

/// Appends a nanosecond timestamp array's INT96 values and definition levels.
fn add_int96(
    values: &mut Vec<Int96>,
    levels: &mut Vec<i16>,
    array: &dyn Array,
    name: &str,
) -> Result<()> {
    let nanos = array
        .as_any()
        .downcast_ref::<TimestampNanosecondArray>()
        .ok_or_else(|| Error::format(format!("column {name} is not a nanosecond timestamp")))?;
    values.extend(nanos.iter().flatten().map(int96_of_nanos));
    levels.extend((0..nanos.len()).map(|i| i16::from(nanos.is_valid(i))));
    Ok(())
}

fn write_int96_column<W: std::io::Write + Send>(
    group: &mut parquet::file::writer::SerializedRowGroupWriter<'_, W>,
    values: &[Int96],
    levels: &[i16],
) -> Result<()> {
    let failed = |e| Error::parquet("writing an INT96 column", e);
    let mut column = group
        .next_column()
        .map_err(failed)?
        .ok_or_else(|| Error::format("no Parquet column left for an INT96 column"))?;
    let required = column.typed::<Int96Type>().get_descriptor().max_def_level() == 0;
    column
        .typed::<Int96Type>()
        .write_batch(values, (!required).then_some(levels), None)
        .map_err(failed)?;
    column.close().map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Epoch nanoseconds of an INT96 (the inverse of [`int96_of_nanos`]); `None` beyond i64.
    fn nanos_of_int96(value: &Int96) -> Option<i64> {
        let [low, high, day] = match value.data() {
            [a, b, c] => [*a, *b, *c],
            _ => return None,
        };
        let nanos_of_day = ((u64::from(high) << 32) | u64::from(low)) as i64;
        let days = i64::from(day as i32) - JULIAN_EPOCH_DAY;
        days.checked_mul(MILLIS_PER_DAY * NANOS_PER_MILLI)?
            .checked_add(nanos_of_day)
    }

    /// Batches of any size are cut into row groups of exactly `row_group_rows` rows (the
    /// last one short), INT96 columns included, and read back as written.
    #[test]
    fn batches_fill_row_groups_whatever_their_sizes() {
        use arrow::array::Int32Array;
        use arrow::datatypes::{DataType as ArrowType, Field, TimeUnit};
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

        let schema = Arc::new(ArrowSchema::new(vec![
            Field::new("n", ArrowType::Int32, false),
            Field::new("at", ArrowType::Timestamp(TimeUnit::Nanosecond, None), true),
        ]));
        let mut writer = ParquetFileWriter::new(
            schema.clone(),
            vec![false, true],
            WriterProperties::builder().build(),
            5,
        )
        .unwrap();
        let mut next = 0i32;
        for size in [3usize, 1, 9, 0, 6, 2] {
            let n: Vec<i32> = (next..next + size as i32).collect();
            next += size as i32;
            let at: Vec<Option<i64>> = n
                .iter()
                .map(|&v| (v % 4 != 0).then_some(i64::from(v) * 1_000_000_007))
                .collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int32Array::from(n)),
                    Arc::new(TimestampNanosecondArray::from(at)),
                ],
            )
            .unwrap();
            writer.write(&batch).unwrap();
        }
        let bytes = bytes::Bytes::from(writer.finish().unwrap());
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        let groups: Vec<i64> = builder
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        assert_eq!(groups, vec![5, 5, 5, 5, 1]);
        let mut seen = 0i32;
        for batch in builder.build().unwrap() {
            let batch = batch.unwrap();
            let n = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int32Array>()
                .unwrap();
            let at = batch
                .column(1)
                .as_any()
                .downcast_ref::<TimestampNanosecondArray>()
                .unwrap();
            for i in 0..batch.num_rows() {
                assert_eq!(n.value(i), seen);
                let expected = (seen % 4 != 0).then_some(i64::from(seen) * 1_000_000_007);
                assert_eq!(at.is_valid(i).then(|| at.value(i)), expected, "row {seen}");
                seen += 1;
            }
        }
        assert_eq!(seen, 21);
    }

    #[test]
    fn int96_is_split_as_java_splits_it() {
        // 1970-01-02T00:00:00.000000001: Julian day 2440589, 1 ns into the day.
        let v = int96_of_nanos(86_400_000_000_001);
        assert_eq!(v.data(), &[1, 0, 2_440_589]);
        // One millisecond before the epoch: Java's truncating split keeps day 2440588
        // and a negative time of day.
        let v = int96_of_nanos(-1_000_000);
        let nanos_of_day = ((u64::from(v.data()[1]) << 32) | u64::from(v.data()[0])) as i64;
        assert_eq!((nanos_of_day, v.data()[2]), (-1_000_000, 2_440_588));
    }

    proptest! {
        #[test]
        fn int96_round_trips_every_i64(nanos in any::<i64>()) {
            prop_assert_eq!(nanos_of_int96(&int96_of_nanos(nanos)), Some(nanos));
        }

        #[test]
        fn the_parquet_crate_reads_the_same_instant(nanos in -(1i64 << 62)..(1i64 << 62)) {
            prop_assert_eq!(int96_of_nanos(nanos).to_nanos(), nanos);
        }
    }
}
