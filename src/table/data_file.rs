//! Data files of a primary-key table (docs/format.md §7): Parquet with the columns
//! `_KEY_<k>…`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`, then every table column.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{
    DataType as ArrowType, Field as ArrowField, Schema as ArrowSchema, TimeUnit,
};
use bytes::Bytes;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

pub(crate) use super::column_batch::ColumnBatch;
pub(crate) use super::data_file_read::DataFileRows;
pub use super::data_file_read::decode_data_file;
use super::datum::Row;
use super::options::TableOptions;
use super::row_kind::RowKind;
use super::schema::{
    KEY_FIELD_ID_START, SEQUENCE_NUMBER_FIELD_ID, TableSchema, VALUE_KIND_FIELD_ID,
};
use crate::error::{Error, Result};

pub(crate) const KEY_FIELD_PREFIX: &str = "_KEY_";
/// Rows per data page unless the table sets `parquet.page.row.count.limit`. Java Paimon
/// (parquet-mr) allows 20,000, but the writer holds each column's open page
/// uncompressed: with 20,000 a CDC ingest's peak RSS rose by 39% for no CPU saved
/// (BENCHMARKS.md, session 41), so lakejoin keeps its pages small.
pub(crate) const DEFAULT_PAGE_ROWS: usize = 1024;
/// Bytes per data page, before compression, unless the table sets `parquet.page.size`
/// (Java Paimon's default).
pub(crate) const DEFAULT_PAGE_BYTES: usize = 1 << 20;
/// Rows the Parquet writer takes at a time (parquet-rs's default, or a page's row limit
/// if lower): it checks a page's limits after each such batch, so a page ends within
/// this many rows of its byte limit, and at its row limit exactly.
const WRITE_BATCH_ROWS: usize = 1024;
/// Rows per Parquet row group.
pub(crate) const ROW_GROUP_ROWS: usize = 128 * 1024;
/// False-positive rate of the key columns' bloom filters.
pub(crate) const BLOOM_FILTER_FPP: f64 = 0.01;
pub(crate) const SEQUENCE_NUMBER_COLUMN: &str = "_SEQUENCE_NUMBER";
pub(crate) const VALUE_KIND_COLUMN: &str = "_VALUE_KIND";

/// One row of a data file: the full table row with its sequence number and kind.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyValue {
    pub(crate) sequence_number: i64,
    pub(crate) kind: RowKind,
    pub(crate) row: Row,
}

/// Parquet writer settings taken from the table options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataFileWriteOptions {
    pub(crate) compression: Compression,
    /// Most rows per data page (`parquet.page.row.count.limit`).
    pub(crate) page_rows: usize,
    /// Most bytes per data page, before compression (`parquet.page.size`).
    pub(crate) page_bytes: usize,
    /// Dictionary-encode non-key columns.
    pub(crate) dictionary: bool,
}

impl DataFileWriteOptions {
    /// The settings `options` give a table's data files.
    pub(crate) fn for_table(options: &TableOptions) -> Result<Self> {
        Ok(DataFileWriteOptions {
            page_rows: options.parquet_page_rows,
            page_bytes: options.parquet_page_bytes,
            ..Self::from_table_options(&options.file_compression, options.zstd_level)?
        })
    }

    /// From `file.compression` and `file.compression.zstd-level`, with the default page
    /// limits.
    pub(crate) fn from_table_options(compression: &str, zstd_level: i32) -> Result<Self> {
        let compression = match compression {
            "zstd" => Compression::ZSTD(
                ZstdLevel::try_new(zstd_level)
                    .map_err(|e| Error::Config(format!("file.compression.zstd-level: {e}")))?,
            ),
            "snappy" => Compression::SNAPPY,
            "lz4" => Compression::LZ4_RAW,
            "none" | "uncompressed" => Compression::UNCOMPRESSED,
            other => {
                return Err(Error::Config(format!(
                    "file.compression `{other}` is not supported (zstd, snappy, lz4, none)"
                )));
            }
        };
        Ok(DataFileWriteOptions {
            compression,
            page_rows: DEFAULT_PAGE_ROWS,
            page_bytes: DEFAULT_PAGE_BYTES,
            dictionary: true,
        })
    }
}

fn field_with_id(name: &str, data_type: ArrowType, nullable: bool, id: i32) -> ArrowField {
    // Java Paimon writes Parquet field ids; pypaimon maps by name. Writing both serves both.
    ArrowField::new(name, data_type, nullable).with_metadata(HashMap::from([(
        "PARQUET:field_id".to_string(),
        id.to_string(),
    )]))
}

/// The Arrow schema of a data file of `schema`.
pub fn data_file_arrow_schema(schema: &TableSchema) -> ArrowSchema {
    let mut fields = Vec::with_capacity(schema.fields.len() * 2 + 2);
    for i in schema.trimmed_key_indices() {
        let f = &schema.fields[i];
        fields.push(field_with_id(
            &format!("{KEY_FIELD_PREFIX}{}", f.name),
            f.data_type.to_arrow(),
            f.nullable,
            KEY_FIELD_ID_START + f.id,
        ));
    }
    fields.push(field_with_id(
        SEQUENCE_NUMBER_COLUMN,
        ArrowType::Int64,
        false,
        SEQUENCE_NUMBER_FIELD_ID,
    ));
    fields.push(field_with_id(
        VALUE_KIND_COLUMN,
        ArrowType::Int8,
        false,
        VALUE_KIND_FIELD_ID,
    ));
    for f in &schema.fields {
        fields.push(field_with_id(
            &f.name,
            f.data_type.to_arrow(),
            f.nullable,
            f.id,
        ));
    }
    ArrowSchema::new(fields)
}

/// Encodes rows (sorted by key) as one data file: the tests' way to make a file whole
/// (the writers roll files through [`DataFileEncoder`]).
#[cfg(test)]
pub(crate) fn encode_data_file(
    schema: &TableSchema,
    rows: &[KeyValue],
    options: DataFileWriteOptions,
) -> Result<Bytes> {
    let mut encoder = DataFileEncoder::new(schema, options, rows.len(), rows)?;
    encoder.write(rows)?;
    encoder.finish()
}

/// A data file being encoded from rows (sorted by key) added a chunk at a time, so a
/// large file is written without holding its rows: only its bytes and one row group's
/// pages. The same rows give the same bytes however they are chunked.
pub(crate) struct DataFileEncoder {
    schema: TableSchema,
    arrow_schema: Arc<ArrowSchema>,
    writer: super::parquet_writer::ParquetFileWriter,
}

impl DataFileEncoder {
    /// `expected_rows` (an upper bound is fine) sizes the key columns' bloom filters.
    /// `first_rows` are the rows the file starts with (its first
    /// [`SAMPLE_ROWS`](super::dictionary_choice::SAMPLE_ROWS) decide which value columns
    /// get a dictionary; see [`super::dictionary_choice`]): the same rows give the same
    /// file however they are then added.
    pub(crate) fn new(
        schema: &TableSchema,
        options: DataFileWriteOptions,
        expected_rows: usize,
        first_rows: &[KeyValue],
    ) -> Result<Self> {
        let arrow_schema = Arc::new(data_file_arrow_schema(schema));
        let mut props = WriterProperties::builder()
            .set_compression(options.compression)
            .set_data_page_row_count_limit(options.page_rows)
            .set_data_page_size_limit(options.page_bytes)
            .set_write_batch_size(WRITE_BATCH_ROWS.min(options.page_rows))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_dictionary_enabled(options.dictionary)
            // Every row of a file has its own sequence number: a dictionary would only be
            // built to be abandoned (interning took ~9% of a CDC ingest profile).
            .set_column_dictionary_enabled(ColumnPath::from(SEQUENCE_NUMBER_COLUMN), false);
        if options.dictionary {
            for (i, field) in schema.fields.iter().enumerate() {
                if !super::dictionary_choice::dictionary_pays(first_rows, i) {
                    props = props.set_column_dictionary_enabled(
                        ColumnPath::from(field.name.as_str()),
                        false,
                    );
                }
            }
        }
        for i in schema.trimmed_key_indices() {
            let name = &schema.fields[i].name;
            // Keys are unique per file: a dictionary on the key (its `_KEY_` copy and its
            // value column) would never pay off.
            props = props.set_column_dictionary_enabled(
                ColumnPath::from(format!("{KEY_FIELD_PREFIX}{name}")),
                false,
            );
            // Bloom filters on the key columns let other readers skip files without the key.
            let column = ColumnPath::from(name.as_str());
            props = props
                .set_column_dictionary_enabled(column.clone(), false)
                .set_column_bloom_filter_enabled(column.clone(), true)
                .set_column_bloom_filter_fpp(column.clone(), BLOOM_FILTER_FPP)
                .set_column_bloom_filter_max_ndv(
                    column,
                    expected_rows.clamp(1, ROW_GROUP_ROWS) as u64,
                );
        }
        // TIMESTAMP(7..9) columns (nanosecond arrays) are stored as INT96, as Java does.
        let int96: Vec<bool> = arrow_schema
            .fields()
            .iter()
            .map(|f| matches!(f.data_type(), ArrowType::Timestamp(TimeUnit::Nanosecond, _)))
            .collect();
        let writer = super::parquet_writer::ParquetFileWriter::new(
            arrow_schema.clone(),
            int96,
            props.build(),
            ROW_GROUP_ROWS,
        )?;
        Ok(DataFileEncoder {
            schema: schema.clone(),
            arrow_schema,
            writer,
        })
    }

    /// Adds rows after those already added (all sorted by key together).
    pub(crate) fn write(&mut self, rows: &[KeyValue]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        self.write_columns(&ColumnBatch::of_rows(&self.schema, rows)?)
    }

    /// Adds rows, as columns, after those already added (all sorted by key together).
    pub(crate) fn write_columns(&mut self, batch: &ColumnBatch) -> Result<()> {
        if batch.len() == 0 {
            return Ok(());
        }
        let keys = self.schema.trimmed_key_indices();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(keys.len() + 2 + batch.values.len());
        // A `_KEY_` column holds the same values as its value column: the one array twice.
        for i in keys {
            let key = batch
                .values
                .get(i)
                .ok_or_else(|| Error::Data(format!("a column batch has no key column {i}")))?;
            columns.push(key.clone());
        }
        columns.push(Arc::new(batch.sequence.clone()));
        columns.push(Arc::new(batch.kind.clone()));
        columns.extend(batch.values.iter().cloned());
        let batch = RecordBatch::try_new(self.arrow_schema.clone(), columns)
            .map_err(|e| Error::arrow("building data file batch", e))?;
        self.writer.write(&batch)
    }

    /// The file's size so far (its pages not yet flushed included, as encoded).
    pub(crate) fn estimated_size(&self) -> usize {
        self.writer.estimated_size()
    }

    /// The file's bytes.
    pub(crate) fn finish(self) -> Result<Bytes> {
        self.writer.finish().map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::{Datum, Timestamp};
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;
    use std::collections::BTreeMap;

    fn every_type_schema() -> TableSchema {
        let types = [
            "BOOLEAN",
            "TINYINT",
            "SMALLINT",
            "INT",
            "BIGINT",
            "FLOAT",
            "DOUBLE",
            "DECIMAL(10, 2)",
            "DECIMAL(30, 4)",
            "STRING",
            "VARCHAR(5)",
            "CHAR(3)",
            "BYTES",
            "DATE",
            "TIMESTAMP(0)",
            "TIMESTAMP(3)",
            "TIMESTAMP(6)",
            "TIMESTAMP(9)",
        ];
        let mut columns = vec![("id".to_string(), DataType::Int, false)];
        for (i, t) in types.iter().enumerate() {
            let (ty, _) = DataType::parse(t).unwrap();
            columns.push((format!("c{i}"), ty, true));
        }
        TableSchema::new(columns, vec![], vec!["id".into()], BTreeMap::new()).unwrap()
    }

    /// Decodes a crash input of the `data_file` fuzz target, which reads every input as
    /// a file of the pypaimon fixture table `orders`.
    fn decode_fuzz_input(bytes: &'static [u8]) -> Result<Vec<KeyValue>> {
        let schema = TableSchema::from_json(include_str!(
            "../../tests/fixtures/pypaimon/db.db/orders/schema/schema-0"
        ))
        .unwrap();
        decode_data_file(Bytes::from_static(bytes), &schema, &schema)
    }

    #[test]
    fn corrupt_definition_levels_are_an_error() {
        // Found by the `data_file` fuzz target: the parquet reader panics on this page.
        let bytes = include_bytes!(
            "../../fuzz/regressions/data_file/crash-abc26effde9d5ebe2f5a94d03e3ab90b88427cc3"
        );
        assert!(decode_fuzz_input(bytes).is_err());
    }

    #[test]
    fn a_footer_with_a_negative_column_chunk_offset_is_an_error() {
        // Found by the `data_file` fuzz target: the parquet crate asserted on it.
        let bytes = include_bytes!(
            "../../fuzz/regressions/data_file/crash-c4540f6c0ecb3ce991d6a1d80b2c002c068f283d"
        );
        let err = decode_fuzz_input(bytes).unwrap_err();
        assert!(err.to_string().contains("column chunk"), "{err}");
    }

    proptest::proptest! {
        /// Rows added to an encoder in chunks of any size make the file encoding them at
        /// once would, byte for byte, and read back as the same rows.
        #[test]
        fn chunked_encoding_gives_the_same_file(
            values in proptest::collection::vec(
                (proptest::option::of("[a-z]{0,12}"), proptest::option::of(-(1i64 << 50)..(1i64 << 50))),
                0..300,
            ),
            chunks in proptest::collection::vec(1..80usize, 1..10),
        ) {
            let (nanos_type, _) = DataType::parse("TIMESTAMP(9)").unwrap();
            let schema = keyed_schema(
                &[("id", DataType::Int), ("name", DataType::Varchar(100)), ("at", nanos_type)],
                &["id"],
                &[],
            );
            let rows: Vec<KeyValue> = values
                .into_iter()
                .enumerate()
                .map(|(i, (name, at))| KeyValue {
                    sequence_number: i as i64,
                    kind: if i % 7 == 3 { RowKind::Delete } else { RowKind::Insert },
                    row: vec![
                        Datum::Int(i as i32),
                        name.map_or(Datum::Null, |s| Datum::String(s.into())),
                        at.map_or(Datum::Null, |n| Datum::Timestamp(Timestamp::from_nanos(n))),
                    ],
                })
                .collect();
            let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
            let whole = encode_data_file(&schema, &rows, options).unwrap();
            let mut encoder = DataFileEncoder::new(&schema, options, rows.len(), &rows).unwrap();
            let mut rest = rows.as_slice();
            for size in chunks.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (chunk, after) = rest.split_at((*size).min(rest.len()));
                encoder.write(chunk).unwrap();
                rest = after;
            }
            proptest::prop_assert!(encoder.estimated_size() > 0);
            let chunked = encoder.finish().unwrap();
            proptest::prop_assert_eq!(&chunked, &whole);
            proptest::prop_assert_eq!(decode_data_file(chunked, &schema, &schema).unwrap(), rows);
        }
    }

    /// Each `_KEY_` column holds its key column's values (the writer encodes one array
    /// for both), and a reader that skips the `_KEY_` columns gets the same rows.
    #[test]
    fn key_columns_repeat_the_key_values() {
        use arrow::array::AsArray;
        use arrow::datatypes::Int32Type;
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let schema = keyed_schema(
            &[
                ("id", DataType::Int),
                ("name", DataType::Varchar(40)),
                ("note", DataType::Varchar(40)),
            ],
            &["id", "name"],
            &[],
        );
        let rows: Vec<KeyValue> = (0..2500)
            .map(|i| KeyValue {
                sequence_number: i64::from(i),
                kind: RowKind::Insert,
                row: vec![
                    Datum::Int(i / 2),
                    Datum::String(format!("n{}", i % 2).into()),
                    Datum::String(format!("a note long enough to be on the heap {i}").into()),
                ],
            })
            .collect();
        let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
        let bytes = encode_data_file(&schema, &rows, options).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .unwrap()
            .build()
            .unwrap();
        let mut seen = 0;
        for batch in reader {
            let batch = batch.unwrap();
            let column = |name: &str| batch.column_by_name(name).unwrap().clone();
            let (key_id, id) = (column("_KEY_id"), column("id"));
            assert_eq!(
                key_id.as_primitive::<Int32Type>(),
                id.as_primitive::<Int32Type>()
            );
            let (key_name, name) = (column("_KEY_name"), column("name"));
            assert_eq!(key_name.as_string::<i32>(), name.as_string::<i32>());
            seen += batch.num_rows();
        }
        assert_eq!(seen, rows.len());
        assert_eq!(decode_data_file(bytes, &schema, &schema).unwrap(), rows);
    }

    /// Neither the key (`_KEY_id` and `id`) nor the sequence number repeats within a
    /// file, so none gets a dictionary; nor does a value column whose values hardly
    /// repeat (`created`). The row kind and a repeating value column (`city`) do.
    #[test]
    fn only_repeating_value_columns_are_dictionary_encoded() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let schema = keyed_schema(
            &[
                ("id", DataType::Int),
                ("city", DataType::Varchar(16)),
                ("created", DataType::BigInt),
            ],
            &["id"],
            &[],
        );
        let rows: Vec<KeyValue> = (0..3000)
            .map(|i| KeyValue {
                sequence_number: i64::from(i),
                kind: RowKind::Insert,
                row: vec![
                    Datum::Int(i),
                    Datum::String(format!("city{}", i % 3).into()),
                    Datum::BigInt(1_780_000_000_000 + i64::from(i)),
                ],
            })
            .collect();
        let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
        let bytes = encode_data_file(&schema, &rows, options).unwrap();
        let reader = SerializedFileReader::new(bytes).unwrap();
        let group = reader.metadata().row_group(0);
        let with_dictionary: Vec<String> = group
            .columns()
            .iter()
            .filter(|c| c.dictionary_page_offset().is_some())
            .map(|c| c.column_path().string())
            .collect();
        assert_eq!(with_dictionary, ["_VALUE_KIND", "city"]);
    }

    /// A data page ends at its row limit or its byte limit, whichever comes first; the
    /// table's options set both.
    #[test]
    fn data_pages_end_at_the_tables_row_or_byte_limit() {
        use parquet::basic::PageType;
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let schema = keyed_schema(
            &[("id", DataType::BigInt), ("note", DataType::Varchar(200))],
            &["id"],
            &[],
        );
        let rows: Vec<KeyValue> = (0..50_000)
            .map(|i| KeyValue {
                sequence_number: i,
                kind: RowKind::Insert,
                // 100 bytes whose first differs from the row before's (a
                // shared prefix would shrink a DELTA_BYTE_ARRAY page).
                row: vec![
                    Datum::BigInt(i),
                    Datum::String(format!("{}{i:x>99}", i % 10).into()),
                ],
            })
            .collect();
        // The rows of each data page, per column by name (the rows fit one row group).
        let pages = |options: DataFileWriteOptions| -> Vec<(String, Vec<u32>)> {
            let bytes = encode_data_file(&schema, &rows, options).unwrap();
            let reader = SerializedFileReader::new(bytes).unwrap();
            assert_eq!(reader.metadata().num_row_groups(), 1);
            let group = reader.get_row_group(0).unwrap();
            let names = reader.metadata().row_group(0).columns().iter();
            names
                .enumerate()
                .map(|(c, column)| {
                    let pages = group.get_column_page_reader(c).unwrap();
                    let data = pages.map(|page| page.unwrap()).filter(|page| {
                        matches!(
                            page.page_type(),
                            PageType::DATA_PAGE | PageType::DATA_PAGE_V2
                        )
                    });
                    let rows = data.map(|page| page.num_values()).collect();
                    (column.column_path().string(), rows)
                })
                .collect()
        };
        let of = |pages: &[(String, Vec<u32>)], name: &str| -> Vec<u32> {
            let column = pages.iter().find(|(n, _)| n == name);
            column.map(|(_, rows)| rows.clone()).unwrap_or_default()
        };
        let with = |rows: &str, bytes: &str| {
            let options = [
                ("parquet.page.row.count.limit", rows),
                ("parquet.page.size", bytes),
            ];
            let options = options.into_iter().map(|(k, v)| (k.into(), v.into()));
            DataFileWriteOptions::for_table(&TableOptions::from_map(&options.collect()).unwrap())
                .unwrap()
        };
        // lakejoin's default: 1,024 rows a page.
        let default = pages(DataFileWriteOptions::from_table_options("zstd", 1).unwrap());
        let id = of(&default, "id");
        assert_eq!(id.len(), 50_000usize.div_ceil(DEFAULT_PAGE_ROWS), "{id:?}");
        assert!(
            id.iter().all(|r| *r as usize <= DEFAULT_PAGE_ROWS),
            "{id:?}"
        );
        // A row limit below the write batch: exact.
        let small = pages(with("1000", "4194304"));
        assert_eq!(of(&small, "id"), vec![1000; 50]);
        assert_eq!(of(&small, "note"), vec![1000; 50]);
        // Java Paimon's limits (20,000 rows, 1 MiB): 8-byte ids reach the row limit (to
        // the write batch), the 100-byte notes reach 1 MiB after ~10,000 rows.
        let java = pages(with("20000", "1048576"));
        let id = of(&java, "id");
        assert_eq!(id.len(), 3, "{id:?}");
        assert!(id[0] >= 20_000 && id[0] < 20_000 + 1024, "{id:?}");
        let note = of(&java, "note");
        assert!(note[0] > 9_000 && note[0] < 11_000, "{note:?}");
    }

    #[test]
    fn every_type_round_trips_through_parquet() {
        let schema = every_type_schema();
        let ts = |millis, nanos| {
            Datum::Timestamp(Timestamp {
                millis,
                nanos_of_milli: nanos,
            })
        };
        let full = vec![
            Datum::Int(1),
            Datum::Boolean(true),
            Datum::TinyInt(-3),
            Datum::SmallInt(300),
            Datum::Int(-70000),
            Datum::BigInt(1 << 40),
            Datum::Float(0.5),
            Datum::Double(-2.25),
            Datum::Decimal(12345),
            Datum::Decimal(-123456789012345678901234),
            Datum::String("héllo".into()),
            Datum::String("ab".into()),
            Datum::String("xyz".into()),
            Datum::Bytes(vec![0, 255, 7]),
            Datum::Date(19723),
            ts(1_704_103_200_000, 0),
            ts(1_704_103_200_123, 0),
            ts(1_704_103_200_123, 456_000),
            ts(-1, 999_999),
        ];
        let mut nulls = vec![Datum::Int(2)];
        nulls.extend(std::iter::repeat_n(Datum::Null, full.len() - 1));
        let rows = vec![
            KeyValue {
                sequence_number: 7,
                kind: RowKind::Insert,
                row: full,
            },
            KeyValue {
                sequence_number: 9,
                kind: RowKind::Delete,
                row: nulls,
            },
        ];
        let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
        let bytes = encode_data_file(&schema, &rows, options).unwrap();
        let back = decode_data_file(bytes, &schema, &schema).unwrap();
        assert_eq!(back, rows);
    }

    #[test]
    fn a_timestamp_beyond_its_stored_unit_is_a_data_error() {
        // TIMESTAMP(6) is stored as i64 microseconds, TIMESTAMP(9) as i64 nanoseconds.
        for (ty, millis) in [
            ("TIMESTAMP(6)", i64::MAX / 1000 + 1),
            ("TIMESTAMP(6)", i64::MIN / 1000 - 1),
            ("TIMESTAMP(9)", i64::MAX / 1_000_000 + 1),
            ("TIMESTAMP(9)", i64::MIN / 1_000_000 - 1),
        ] {
            let (data_type, _) = DataType::parse(ty).unwrap();
            let schema = keyed_schema(&[("id", DataType::Int), ("t", data_type)], &["id"], &[]);
            let rows = vec![KeyValue {
                sequence_number: 0,
                kind: RowKind::Insert,
                row: vec![
                    Datum::Int(1),
                    Datum::Timestamp(Timestamp {
                        millis,
                        nanos_of_milli: 0,
                    }),
                ],
            }];
            let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
            let err = encode_data_file(&schema, &rows, options).unwrap_err();
            assert!(matches!(err, Error::Data(_)), "{ty} {millis}: {err}");
            assert!(err.to_string().contains("out of range"), "{err}");
        }
    }

    #[test]
    fn a_row_short_of_its_key_column_is_a_data_error() {
        // The key is the second column: the key columns are encoded first, so a row of
        // one value fails there, not later.
        let schema = keyed_schema(&[("v", DataType::Int), ("id", DataType::Int)], &["id"], &[]);
        let rows = vec![KeyValue {
            sequence_number: 0,
            kind: RowKind::Insert,
            row: vec![Datum::Int(1)],
        }];
        let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
        let err = encode_data_file(&schema, &rows, options).unwrap_err();
        assert!(matches!(err, Error::Data(_)), "{err}");
        assert!(
            err.to_string().contains("row has 1 values, table has 2"),
            "{err}"
        );
    }

    #[test]
    fn garbage_bytes_are_an_error_not_a_panic() {
        let schema = every_type_schema();
        assert!(
            decode_data_file(Bytes::from_static(b"PAR1 not really"), &schema, &schema).is_err()
        );
    }
}
