//! Writes a data file's record batch as Parquet, with `TIMESTAMP(7..9)` columns stored as
//! INT96, as Java Paimon stores them.
//!
//! Why not `ArrowWriter`: it writes nanosecond timestamps as INT64 `TIMESTAMP(NANOS)`,
//! and Java Paimon (1.4) reads a `TIMESTAMP(7..9)` column only as INT96; an INT64 one it
//! takes for epoch milliseconds, returning other instants. The parquet crate cannot write
//! INT96 from Arrow, so the file is assembled here from its parts: the arrow column
//! writers for every other column (the same encoders, statistics, page index and bloom
//! filters `ArrowWriter` uses) and the crate's typed INT96 column writer for those, in
//! schema order, row group by row group.
//!
//! INT96 is Impala's layout: 8 bytes of nanoseconds within the day, then 4 bytes of
//! Julian day, both little-endian. The split is computed as Java's
//! `ParquetRowDataWriter.timestampToInt96` does (Java's truncating `/` and `%` on epoch
//! milliseconds), so lakejoin writes the bytes Java would; the parquet crate's reader
//! recombines them into epoch nanoseconds exactly for either sign.

use std::sync::Arc;

use arrow::array::{Array, RecordBatch, TimestampNanosecondArray};
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{ArrowRowGroupWriterFactory, compute_leaves};
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

/// The Parquet schema `ArrowWriter` would write for `batch`, with the columns marked in
/// `int96` made plain INT96 (same name, repetition and field id; no logical type, as
/// Java writes them).
fn parquet_schema(batch: &RecordBatch, int96: &[bool]) -> Result<Type> {
    let converted = ArrowSchemaConverter::new()
        .convert(batch.schema().as_ref())
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

/// Encodes `batch` as a Parquet file: row groups of at most `row_group_rows` rows, the
/// columns marked in `int96` (nanosecond timestamp arrays) as INT96.
pub(crate) fn write_parquet(
    batch: &RecordBatch,
    int96: &[bool],
    props: WriterProperties,
    row_group_rows: usize,
) -> Result<Vec<u8>> {
    let schema = Arc::new(parquet_schema(batch, int96)?);
    let mut out = Vec::with_capacity(64 * 1024);
    let mut file = SerializedFileWriter::new(&mut out, schema, Arc::new(props))
        .map_err(|e| Error::parquet("opening data file writer", e))?;
    let factory = ArrowRowGroupWriterFactory::new(&file, batch.schema());
    let rows = batch.num_rows();
    let step = row_group_rows.max(1);
    for (index, start) in (0..rows).step_by(step).enumerate() {
        let part = batch.slice(start, step.min(rows - start));
        let writers = factory
            .create_column_writers(index)
            .map_err(|e| Error::parquet("creating column writers", e))?;
        let mut group = file
            .next_row_group()
            .map_err(|e| Error::parquet("starting a row group", e))?;
        let part_schema = part.schema();
        let columns = part.columns().iter().zip(part_schema.fields().iter());
        for ((mut writer, (array, field)), &as_int96) in writers.into_iter().zip(columns).zip(int96)
        {
            if as_int96 {
                write_int96_column(&mut group, array.as_ref(), field.name())?;
                continue;
            }
            for leaf in compute_leaves(field, array)
                .map_err(|e| Error::parquet(format!("column {}", field.name()), e))?
            {
                writer
                    .write(&leaf)
                    .map_err(|e| Error::parquet(format!("writing column {}", field.name()), e))?;
            }
            writer
                .close()
                .and_then(|chunk| chunk.append_to_row_group(&mut group))
                .map_err(|e| Error::parquet(format!("closing column {}", field.name()), e))?;
        }
        group
            .close()
            .map_err(|e| Error::parquet("closing a row group", e))?;
    }
    file.close()
        .map_err(|e| Error::parquet("closing data file", e))?;
    Ok(out)
}

fn write_int96_column<W: std::io::Write + Send>(
    group: &mut parquet::file::writer::SerializedRowGroupWriter<'_, W>,
    array: &dyn Array,
    name: &str,
) -> Result<()> {
    let failed = |e| Error::parquet(format!("writing INT96 column {name}"), e);
    let nanos = array
        .as_any()
        .downcast_ref::<TimestampNanosecondArray>()
        .ok_or_else(|| Error::format(format!("column {name} is not a nanosecond timestamp")))?;
    let values: Vec<Int96> = nanos.iter().flatten().map(int96_of_nanos).collect();
    let levels: Vec<i16> = (0..nanos.len())
        .map(|i| i16::from(nanos.is_valid(i)))
        .collect();
    let mut column = group
        .next_column()
        .map_err(failed)?
        .ok_or_else(|| Error::format(format!("no Parquet column left for {name}")))?;
    let required = column.typed::<Int96Type>().get_descriptor().max_def_level() == 0;
    column
        .typed::<Int96Type>()
        .write_batch(&values, (!required).then_some(levels.as_slice()), None)
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
