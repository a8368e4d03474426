//! Tests of writing files: rolling, failures, and the column path's equivalence with rows.

use super::*;
use crate::table::datum::Timestamp;
use crate::table::row_kind::RowKind;
use crate::table::testkit::keyed_schema;
use crate::table::types::DataType;
use crate::table::{TableIdentifier, Warehouse};
use proptest::strategy::Just;

/// An in-memory table of one bucket, keyed by an INT, with a string column, rolling
/// files at `target_file_size`, uncompressed.
async fn table_rolling_at(target_file_size: &str) -> Table {
    let schema = keyed_schema(
        &[("id", DataType::Int), ("note", DataType::Varchar(200))],
        &["id"],
        &[
            ("bucket", "1"),
            ("target-file-size", target_file_size),
            ("file.compression", "none"),
        ],
    );
    let id = TableIdentifier::parse("db.t").unwrap();
    Table::create(&Warehouse::in_memory(), &id, schema)
        .await
        .unwrap()
}

/// Compaction output of `table`'s unpartitioned bucket 0 at `level`.
fn compaction_target<'a>(
    table: &'a Table,
    partition: &'a Row,
    partition_bytes: &'a [u8],
    level: i32,
) -> FileTarget<'a> {
    FileTarget {
        table,
        partition_bytes,
        partition,
        bucket: 0,
        level,
        source: FileSource::Compact,
        options: DataFileWriteOptions::from_table_options("none", 1).unwrap(),
        changelog: false,
    }
}

/// A stream of rows is written as files rolled at `target-file-size` (encoded), each
/// whole and in order, with the key range, counts and sequence bounds of its rows.
#[tokio::test]
async fn a_stream_is_written_as_files_rolled_at_the_target_size() {
    let table = table_rolling_at("160 kb").await;
    let rows: Vec<KeyValue> = (0..20_000)
        .map(|i| KeyValue {
            sequence_number: 100 + i64::from(i),
            kind: if i % 10 == 0 {
                RowKind::Delete
            } else {
                RowKind::Insert
            },
            row: vec![
                Datum::Int(i),
                Datum::String(format!("note {}", i * 7919).into()),
            ],
        })
        .collect();
    let partition = Vec::new();
    let partition_bytes = binary_row::serialize(&[], &[]).unwrap();
    let target = compaction_target(&table, &partition, &partition_bytes, 3);
    let stream: RowStream = Box::new(rows.clone().into_iter().map(Ok));
    let entries = target.write_stream(stream, rows.len()).await.unwrap();
    assert!(entries.len() > 2, "{} files", entries.len());
    let mut read = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let file_rows = table.read_data_file(entry, None).await.unwrap();
        let meta = &entry.file;
        assert_eq!(meta.level, 3);
        assert_eq!(meta.row_count, file_rows.len() as i64);
        let deletes = file_rows.iter().filter(|kv| kv.kind.is_retract()).count();
        assert_eq!(meta.delete_row_count, Some(deletes as i64));
        let first = file_rows.first().unwrap();
        let last = file_rows.last().unwrap();
        let key_types = [DataType::Int];
        assert_eq!(
            meta.min_key,
            binary_row::serialize(&first.row[..1], &key_types).unwrap()
        );
        assert_eq!(
            meta.max_key,
            binary_row::serialize(&last.row[..1], &key_types).unwrap()
        );
        assert_eq!(meta.min_sequence_number, first.sequence_number);
        assert_eq!(meta.max_sequence_number, last.sequence_number);
        if i + 1 < entries.len() {
            // Rolled once past the target, not long after: one chunk at most.
            assert!(
                meta.file_size >= 160 * 1024,
                "file {i}: {} bytes",
                meta.file_size
            );
            assert!(
                meta.file_size < 160 * 1024 * 2,
                "file {i}: {} bytes",
                meta.file_size
            );
        }
        read.extend(file_rows);
    }
    assert_eq!(read, rows);
    // Rows held in memory (a flush) roll at the same points, into the same files.
    let counts = |entries: &[ManifestEntry]| -> Vec<(i64, i64)> {
        entries
            .iter()
            .map(|e| (e.file.row_count, e.file.file_size))
            .collect()
    };
    let flushed = target.write(rows.clone()).await.unwrap();
    assert_eq!(counts(&flushed), counts(&entries));
    // A row that fails to encode fails its file: the files before it are written, and
    // every row from that file's first on is handed back.
    let mut bad = rows.clone();
    bad.last_mut().unwrap().row.truncate(1);
    let (written, failed) = target.write_or_return(bad.clone()).await;
    let (err, back) = failed.expect("the short row fails");
    assert!(err.to_string().contains("row has 1 values"), "{err}");
    assert_eq!(counts(&written), counts(&entries[..entries.len() - 1]));
    let kept: i64 = written.iter().map(|e| e.file.row_count).sum();
    assert_eq!(back.as_slice(), &bad[kept as usize..]);
    // Nothing to write, no file.
    let empty: RowStream = Box::new(std::iter::empty());
    assert!(target.write_stream(empty, 0).await.unwrap().is_empty());
    // A row that fails to come is the write's error.
    let failing: RowStream = Box::new(
        rows.clone()
            .into_iter()
            .take(10)
            .map(Ok)
            .chain(std::iter::once(Err(Error::format("broken input")))),
    );
    let err = target.write_stream(failing, 10).await.unwrap_err();
    assert!(err.to_string().contains("broken input"), "{err}");
}

/// A stream that fails after files were rolled leaves none of them behind.
#[tokio::test]
async fn a_failed_stream_deletes_the_files_it_rolled() {
    use futures::TryStreamExt;

    let table = table_rolling_at("64 kb").await;
    let partition = Vec::new();
    let partition_bytes = binary_row::serialize(&[], &[]).unwrap();
    let target = compaction_target(&table, &partition, &partition_bytes, 1);
    let data_files = || async {
        let all: Vec<_> = table.store().list(None).try_collect().await.unwrap();
        all.into_iter()
            .filter(|m| {
                m.location
                    .filename()
                    .is_some_and(|f| f.starts_with("data-"))
            })
            .count()
    };
    let rows = (0..10_000).map(|i| {
        Ok(KeyValue {
            sequence_number: i64::from(i),
            kind: RowKind::Insert,
            row: vec![
                Datum::Int(i),
                Datum::String(format!("note {}", i * 7919).into()),
            ],
        })
    });
    // The same rows without the failure roll several files: the failure comes after
    // some were stored.
    let whole: RowStream = Box::new(rows.clone());
    let written = target.write_stream(whole, 10_000).await.unwrap();
    assert!(written.len() > 2, "{} files", written.len());
    assert_eq!(data_files().await, written.len());
    delete_data_files(&table, written.iter()).await;
    assert_eq!(data_files().await, 0);
    let failing: RowStream =
        Box::new(rows.chain(std::iter::once(Err(Error::format("input vanished")))));
    let err = target.write_stream(failing, 10_000).await.unwrap_err();
    assert!(err.to_string().contains("input vanished"), "{err}");
    assert_eq!(data_files().await, 0);
}

/// A table of every kind of column, keyed by two, for the copy test below.
fn varied_schema() -> TableSchema {
    let ty = |t: &str| DataType::parse(t).unwrap().0;
    keyed_schema(
        &[
            ("id", DataType::BigInt),
            ("tag", ty("VARCHAR(8)")),
            ("flag", DataType::Boolean),
            ("small", DataType::SmallInt),
            ("amount", ty("DECIMAL(10, 2)")),
            ("big", ty("DECIMAL(30, 4)")),
            ("note", ty("STRING")),
            ("raw", ty("BYTES")),
            ("day", DataType::Date),
            ("at", ty("TIMESTAMP(3)")),
            ("at_micros", ty("TIMESTAMP(6)")),
            ("at_nanos", ty("TIMESTAMP(9)")),
            ("at_zone", ty("TIMESTAMP_LTZ(3)")),
            ("ratio", DataType::Float),
            ("score", DataType::Double),
        ],
        &["id", "tag"],
        &[],
    )
}

/// `n` rows with keys from `first` on, their values drawn from `seed`: some null, some
/// repeating (so that dictionaries pay for some columns of some files), some
/// retractions.
fn varied_rows(first: i64, n: usize, seed: u64) -> Vec<KeyValue> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let repeating = seed.is_multiple_of(2);
    (0..n)
        .map(|i| {
            let mut draw = |modulus: u64| next() % modulus;
            let null = |d: Datum, roll: u64| if roll == 0 { Datum::Null } else { d };
            let spread = if repeating { 5 } else { 1_000_000 };
            let v = draw(spread) as i64;
            let row = vec![
                Datum::BigInt(first + i as i64),
                Datum::String(format!("t{}", draw(3)).into()),
                null(Datum::Boolean(v % 2 == 0), draw(9)),
                null(Datum::SmallInt((v % 30_000) as i16), draw(9)),
                null(Datum::Decimal(i128::from(v) * 101 - 7), draw(9)),
                null(Datum::Decimal(i128::from(v) * 1_000_000_007), draw(9)),
                null(
                    Datum::String(format!("note {v} {}", "x".repeat((v % 40) as usize)).into()),
                    draw(9),
                ),
                null(Datum::Bytes(v.to_le_bytes().to_vec()), draw(9)),
                null(Datum::Date((v % 20_000) as i32), draw(9)),
                null(Datum::Timestamp(Timestamp::from_millis(v * 997)), draw(9)),
                null(
                    Datum::Timestamp(Timestamp::from_micros(v * 997_003)),
                    draw(9),
                ),
                null(
                    Datum::Timestamp(Timestamp::from_nanos(v * 997_003_001)),
                    draw(9),
                ),
                null(Datum::Timestamp(Timestamp::from_millis(-v)), draw(9)),
                null(Datum::Float(v as f32 / 7.0), draw(9)),
                null(Datum::Double(v as f64 / 3.0), draw(9)),
            ];
            KeyValue {
                sequence_number: draw(1_000_000) as i64,
                kind: match draw(10) {
                    0 => RowKind::Delete,
                    1 => RowKind::UpdateBefore,
                    2 => RowKind::UpdateAfter,
                    _ => RowKind::Insert,
                },
                row,
            }
        })
        .collect()
}

/// Every file `input` gives, with what its manifest entry would say.
fn encode_all(mut input: SortedInput, schema: &TableSchema, target: u64) -> Vec<(Bytes, String)> {
    let key_types = schema.types_of(&schema.trimmed_key_indices());
    let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
    let mut files = Vec::new();
    while let Some((bytes, stats)) =
        encode_next_file(&mut input, schema, options, target, 10_000).unwrap()
    {
        let c = &stats.counts;
        let summary = format!(
            "{:?} {:?} {:?} rows {} deletes {} sequence {:?}..{:?}",
            stats.first_key,
            stats.last_key,
            stats.keys.clone().finish(&key_types).unwrap(),
            c.rows,
            c.deletes,
            c.min_sequence,
            c.max_sequence
        );
        files.push((bytes, summary));
    }
    files
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// Files whose keys do not overlap, copied as columns, give the same files (bytes
    /// and manifest statistics) as the merge of their rows: rolled at the same rows,
    /// with the same encodings, whatever the files' sizes and the batches' ends.
    #[test]
    fn copying_columns_writes_the_files_merging_rows_writes(
        sizes in proptest::collection::vec(0usize..2600, 1..5),
        target in proptest::prop_oneof![Just(6_000u64), Just(40_000), Just(1 << 30)],
        seed in proptest::num::u64::ANY,
    ) {
        let schema = varied_schema();
        let options = DataFileWriteOptions::from_table_options("zstd", 1).unwrap();
        let mut first = 0;
        let mut files = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let rows = varied_rows(first, n, seed.wrapping_add(i as u64));
            first += n as i64 + 3;
            if !rows.is_empty() {
                files.push(crate::table::data_file::encode_data_file(&schema, &rows, options).unwrap());
            }
        }
        let open = |bytes: &Bytes| {
            crate::table::data_file::DataFileRows::open(bytes.clone(), &schema, &schema, None).unwrap()
        };
        let rows: RowStream = Box::new(files.iter().map(open).collect::<Vec<_>>().into_iter().flatten());
        let columns: ColumnStream = Box::new(
            files.iter().map(|f| open(f).into_batches().unwrap()).collect::<Vec<_>>().into_iter().flatten(),
        );
        let merged = encode_all(SortedInput::Rows(rows), &schema, target);
        let copied = encode_all(
            SortedInput::Columns(Box::new(ColumnChunks { batches: columns, rest: None })),
            &schema,
            target,
        );
        proptest::prop_assert_eq!(merged.len(), copied.len());
        for (m, c) in merged.iter().zip(&copied) {
            proptest::prop_assert_eq!(&m.1, &c.1);
            proptest::prop_assert!(m.0 == c.0, "the files' bytes differ");
        }
    }
}
