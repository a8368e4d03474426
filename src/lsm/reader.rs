//! Merge-on-read scan (docs/format.md §8.1): live files of a snapshot, pruned by partition,
//! bucket and key statistics, grouped by bucket, merged per key with the engine.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use super::merge::{MergeEngine, MergedRuns, SequenceOrder};
use crate::error::{Error, Result};
use crate::table::data_file::{DataFileRows, KeyValue};
use crate::table::datum::{Datum, Row, compare_datums, compare_rows};
use crate::table::deletion_vector::DeletionFiles;
use crate::table::manifest::ManifestEntry;
use crate::table::row_kind::RowKind;
use crate::table::snapshot::Snapshot;
use crate::table::types::DataType;
use crate::table::{IO_CONCURRENCY, Table, binary_row, bucket};

/// Equality conditions on columns (`--where col=value`), all of which must hold.
#[derive(Debug, Clone, Default)]
pub struct ScanFilter {
    /// (column index, value)
    pub equals: Vec<(usize, Datum)>,
}

impl ScanFilter {
    pub(crate) fn matches(&self, row: &Row) -> bool {
        self.equals
            .iter()
            .all(|(i, v)| compare_datums(&row[*i], v) == Ordering::Equal && !v.is_null())
    }
}

/// Reads the merged rows of `snapshot` (the latest when `None`) that pass `filter`,
/// sorted by primary key. Deleted keys never appear. Level-0 files are skipped where
/// Paimon's batch reads skip them (see `TableOptions::batch_scan_skips_level0`).
pub async fn scan(
    table: &Table,
    snapshot: Option<&Snapshot>,
    filter: &ScanFilter,
) -> Result<Vec<Row>> {
    Ok(scan_with_kinds(table, snapshot, filter)
        .await?
        .into_iter()
        .map(|(_, row)| row)
        .collect())
}

/// [`scan`], with the row kind of each merged row (`+I` or `+U`): Paimon's `$audit_log`
/// system table read in batch, whose `rowkind` column is this kind.
pub async fn scan_with_kinds(
    table: &Table,
    snapshot: Option<&Snapshot>,
    filter: &ScanFilter,
) -> Result<Vec<(RowKind, Row)>> {
    let latest;
    let snapshot = match snapshot {
        Some(s) => s,
        None => match table.latest_snapshot().await? {
            Some(s) => {
                latest = s;
                &latest
            }
            None => return Ok(Vec::new()),
        },
    };
    let groups = scanned_buckets(table, snapshot, filter).await?;
    let deletions = table.deletion_files(snapshot).await?;
    let deletions = &deletions;
    let engine = Arc::new(MergeEngine::new(table.schema(), table.options())?);
    let order = Arc::new(SequenceOrder::new(table.schema(), table.options())?);
    let reads: Vec<_> = groups
        .into_iter()
        .map(|((partition, _bucket), entries)| {
            let engine = engine.clone();
            let order = order.clone();
            async move {
                read_bucket(
                    table, &partition, &entries, deletions, &engine, &order, filter,
                )
                .await
            }
        })
        .collect();
    let per_bucket: Vec<Vec<(RowKind, Row)>> = futures::stream::iter(reads)
        .buffer_unordered(IO_CONCURRENCY)
        .try_collect()
        .await?;
    let schema = table.schema();
    let pk = schema.primary_key_indices();
    let mut rows: Vec<(RowKind, Row)> = per_bucket.into_iter().flatten().collect();
    rows.sort_by(|(_, a), (_, b)| {
        pk.iter()
            .map(|&i| compare_datums(&a[i], &b[i]))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
    Ok(rows)
}

/// Rows [`scan_in_chunks`] hands over at a time.
const SCAN_CHUNK: usize = 4096;

/// [`scan`] as it is merged: `each` gets the merged rows a chunk (≤ [`SCAN_CHUNK`]) at a
/// time, bucket after bucket (sorted within a bucket, not across buckets). For loading a
/// whole table into a compact structure (a `full` lookup cache): memory holds a few
/// chunks of decoded rows (at most four: two queued, one filling, one in `each`), not a
/// bucket's (a 250,000-row bucket decoded took more than the cache it filled), and the
/// merge, on a blocking thread, runs while `each` takes the chunk before.
pub(crate) async fn scan_in_chunks(
    table: &Table,
    snapshot: &Snapshot,
    filter: &ScanFilter,
    mut each: impl FnMut(Vec<Row>) -> Result<()>,
) -> Result<()> {
    let engine = MergeEngine::new(table.schema(), table.options())?;
    let order = SequenceOrder::new(table.schema(), table.options())?;
    let deletions = table.deletion_files(snapshot).await?;
    let key_indices = table.schema().trimmed_key_indices();
    let partition_indices = table.schema().partition_indices();
    for ((partition, _bucket), entries) in scanned_buckets(table, snapshot, filter).await? {
        let runs = open_runs(table, &entries, &deletions).await?;
        let partition = table.partition_values(&partition)?;
        let (key_indices, order, engine) = (key_indices.clone(), order.clone(), engine.clone());
        let (partition_indices, filter) = (partition_indices.clone(), filter.clone());
        in_chunks(
            move || MergedRuns::new(runs, key_indices, order, engine),
            move |kv| visible_row(kv, &partition_indices, &partition, &filter).map(|(_, row)| row),
            &mut each,
        )
        .await?;
    }
    Ok(())
}

/// Runs the merge `merged` makes on a blocking thread and hands the rows `keep` keeps to
/// `each`, [`SCAN_CHUNK`] at a time. The first error (the merge's, `each`'s, or the merge
/// task's panic) is returned; when `each` fails, the merge stops at its next send.
async fn in_chunks<I>(
    merged: impl FnOnce() -> I + Send + 'static,
    mut keep: impl FnMut(KeyValue) -> Option<Row> + Send + 'static,
    each: &mut impl FnMut(Vec<Row>) -> Result<()>,
) -> Result<()>
where
    I: Iterator<Item = Result<KeyValue>>,
{
    let (chunks, mut received) = tokio::sync::mpsc::channel::<Result<Vec<Row>>>(2);
    let merge = tokio::task::spawn_blocking(move || {
        let mut chunk = Vec::with_capacity(SCAN_CHUNK);
        for kv in merged() {
            match kv {
                Ok(kv) => chunk.extend(keep(kv)),
                Err(e) => {
                    // A closed channel: the receiver already failed.
                    let _ = chunks.blocking_send(Err(e));
                    return;
                }
            }
            if chunk.len() == SCAN_CHUNK {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(SCAN_CHUNK));
                if chunks.blocking_send(Ok(full)).is_err() {
                    return;
                }
            }
        }
        if !chunk.is_empty() {
            let _ = chunks.blocking_send(Ok(chunk));
        }
    });
    while let Some(chunk) = received.recv().await {
        each(chunk?)?;
    }
    merge.await.map_err(|e| Error::task("merge task", e))
}

/// The buckets a scan of `snapshot` reads, with their files, pruned by `filter`.
async fn scanned_buckets(
    table: &Table,
    snapshot: &Snapshot,
    filter: &ScanFilter,
) -> Result<Vec<BucketFiles>> {
    let mut files = table.live_files(snapshot).await?;
    if table.options().batch_scan_skips_level0() {
        // Java's and pypaimon's batch reads ignore level 0 of first-row and
        // deletion-vector tables; read the same rows they do.
        files.retain(|f| f.file.level > 0);
    }
    let files = prune(table, files, filter)?;
    Ok(group_by_bucket(files))
}

/// (serialized partition, bucket) and the live files of that bucket.
pub(crate) type BucketFiles = ((Vec<u8>, i32), Vec<ManifestEntry>);

/// Groups live files by (partition, bucket), keeping manifest order inside a group.
pub(crate) fn group_by_bucket(files: Vec<ManifestEntry>) -> Vec<BucketFiles> {
    let mut groups: BTreeMap<(Vec<u8>, i32), Vec<ManifestEntry>> = BTreeMap::new();
    for f in files {
        groups
            .entry((f.partition.clone(), f.bucket))
            .or_default()
            .push(f);
    }
    groups.into_iter().collect()
}

/// Reads every file of one bucket and merges the versions of each key.
async fn read_bucket(
    table: &Table,
    partition_bytes: &[u8],
    entries: &[ManifestEntry],
    deletions: &DeletionFiles,
    engine: &MergeEngine,
    order: &SequenceOrder,
    filter: &ScanFilter,
) -> Result<Vec<(RowKind, Row)>> {
    let merged = read_and_merge(table, entries, deletions, engine, order).await?;
    let partition = table.partition_values(partition_bytes)?;
    let partition_indices = table.schema().partition_indices();
    Ok(merged
        .into_iter()
        .filter_map(|kv| visible_row(kv, &partition_indices, &partition, filter))
        .collect())
}

/// A merged row as a scan returns it: `None` when it is a retraction or fails `filter`;
/// otherwise with the partition's values, which come from the manifest, not the file
/// (docs/format.md §7.1).
fn visible_row(
    kv: KeyValue,
    partition_indices: &[usize],
    partition: &[Datum],
    filter: &ScanFilter,
) -> Option<(RowKind, Row)> {
    if kv.kind.is_retract() {
        return None;
    }
    let mut row = kv.row;
    for (&i, v) in partition_indices.iter().zip(partition) {
        row[i] = v.clone();
    }
    filter.matches(&row).then_some((kv.kind, row))
}

/// All versions of the files of one bucket (less the rows `deletions` marks deleted),
/// merged to one row per key (retractions included), in key order.
pub(crate) async fn read_and_merge(
    table: &Table,
    entries: &[ManifestEntry],
    deletions: &DeletionFiles,
    engine: &MergeEngine,
    order: &SequenceOrder,
) -> Result<Vec<KeyValue>> {
    let runs = open_runs(table, entries, deletions).await?;
    let key_indices = table.schema().trimmed_key_indices();
    let (engine, order) = (engine.clone(), order.clone());
    tokio::task::spawn_blocking(move || MergedRuns::new(runs, key_indices, order, engine).collect())
        .await
        .map_err(|e| Error::task("merge task", e))?
}

/// The files of one bucket (less the rows `deletions` marks deleted), opened as the
/// sorted runs of a k-way merge to one row per key (`MergedRuns`): each level-0 file is a
/// run, and the files of a higher level, in key order, are one run read file after file
/// (as Java's `ConcatRecordReader` reads them), so the merge decodes one batch per run,
/// not per file. Decoding happens as the merge is read: read it off the async runtime.
pub(crate) async fn open_runs(
    table: &Table,
    entries: &[ManifestEntry],
    deletions: &DeletionFiles,
) -> Result<Vec<SortedRunRows>> {
    let schema = table.schema();
    let runs = sorted_runs(&schema.types_of(&schema.trimmed_key_indices()), entries);
    let opens: Vec<_> = runs
        .iter()
        .flatten()
        .map(|e| table.open_data_file(e, deletions.get(&e.file.file_name)))
        .collect();
    let mut files = futures::stream::iter(opens)
        .buffered(IO_CONCURRENCY)
        .try_collect::<Vec<DataFileRows>>()
        .await?
        .into_iter();
    Ok(runs
        .iter()
        .map(|run| {
            files
                .by_ref()
                .take(run.len())
                .collect::<Vec<_>>()
                .into_iter()
                .flatten()
        })
        .collect())
}

/// One sorted run's rows: its files, read one after the other.
pub(crate) type SortedRunRows = std::iter::Flatten<std::vec::IntoIter<DataFileRows>>;

/// `entries` grouped into sorted runs: every level-0 file alone, and each higher level's
/// files in key order, split where a file's keys do not all follow the previous file's
/// or cannot be read (a damaged or foreign level: separate runs still merge right, only
/// holding more batches).
fn sorted_runs<'e>(
    key_types: &[DataType],
    entries: &'e [ManifestEntry],
) -> Vec<Vec<&'e ManifestEntry>> {
    let key = |bytes: &[u8]| binary_row::deserialize(bytes, key_types).ok();
    let mut runs: Vec<Vec<&ManifestEntry>> = Vec::new();
    let mut levels: BTreeMap<i32, Vec<(Row, Row, &ManifestEntry)>> = BTreeMap::new();
    for e in entries {
        match (e.file.level, key(&e.file.min_key), key(&e.file.max_key)) {
            (level, Some(min), Some(max)) if level > 0 => {
                levels.entry(level).or_default().push((min, max, e));
            }
            // Level 0, or a key range that cannot be read: a run of its own.
            _ => runs.push(vec![e]),
        }
    }
    for (_, mut files) in levels {
        files.sort_by(|a, b| compare_rows(&a.0, &b.0));
        let mut run: Vec<&ManifestEntry> = Vec::new();
        let mut last_max: Option<Row> = None;
        for (min, max, e) in files {
            let follows = last_max
                .as_ref()
                .is_some_and(|previous| compare_rows(previous, &min) == Ordering::Less);
            if !follows && !run.is_empty() {
                runs.push(std::mem::take(&mut run));
            }
            run.push(e);
            last_max = Some(max);
        }
        if !run.is_empty() {
            runs.push(run);
        }
    }
    runs
}

/// Drops files that cannot hold rows matching `filter`: other partitions, other buckets,
/// and files whose key statistics exclude the wanted key values.
fn prune(
    table: &Table,
    files: Vec<ManifestEntry>,
    filter: &ScanFilter,
) -> Result<Vec<ManifestEntry>> {
    if filter.equals.is_empty() {
        return Ok(files);
    }
    let schema = table.schema();
    let partition_indices = schema.partition_indices();
    let key_indices = schema.trimmed_key_indices();
    let key_types = schema.types_of(&key_indices);
    let bucket_indices = schema.bucket_key_indices();
    let wanted = |i: usize| filter.equals.iter().find(|(c, _)| *c == i).map(|(_, v)| v);
    // With every bucket-key column fixed, only one bucket can hold matches.
    let bucket_values: Option<Vec<Datum>> =
        bucket_indices.iter().map(|&i| wanted(i).cloned()).collect();
    let target_bucket = match bucket_values {
        Some(values) if table.options().bucket > 0 => Some(bucket::bucket_of(
            &values,
            &schema.types_of(&bucket_indices),
            table.options().bucket,
        )?),
        _ => None,
    };
    let mut kept = Vec::with_capacity(files.len());
    for f in files {
        if let Some(b) = target_bucket
            && f.total_buckets == table.options().bucket
            && f.bucket != b
        {
            continue;
        }
        if !partition_indices.is_empty() && partition_indices.iter().any(|&i| wanted(i).is_some()) {
            let values = table.partition_values(&f.partition)?;
            let excluded = partition_indices
                .iter()
                .zip(&values)
                .any(|(&i, v)| wanted(i).is_some_and(|w| compare_datums(w, v) != Ordering::Equal));
            if excluded {
                continue;
            }
        }
        if key_indices.iter().any(|&i| wanted(i).is_some()) {
            let mins = binary_row::deserialize(&f.file.key_stats.min_values, &key_types);
            let maxs = binary_row::deserialize(&f.file.key_stats.max_values, &key_types);
            if let (Ok(mins), Ok(maxs)) = (mins, maxs)
                && mins.len() == key_indices.len()
                && maxs.len() == key_indices.len()
            {
                let excluded = key_indices.iter().enumerate().any(|(k, &i)| {
                    wanted(i).is_some_and(|w| {
                        (!mins[k].is_null() && compare_datums(w, &mins[k]) == Ordering::Less)
                            || (!maxs[k].is_null()
                                && compare_datums(w, &maxs[k]) == Ordering::Greater)
                    })
                });
                if excluded {
                    continue;
                }
            }
        }
        kept.push(f);
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsm::levels::tests::file;

    /// A file on `level` holding keys `min..=max`.
    fn ranged(name: &str, level: i32, min: i32, max: i32) -> ManifestEntry {
        let mut f = file(name, level, 1, 0);
        f.file.min_key = binary_row::serialize(&[Datum::Int(min)], &[DataType::Int]).unwrap();
        f.file.max_key = binary_row::serialize(&[Datum::Int(max)], &[DataType::Int]).unwrap();
        f
    }

    #[test]
    fn level0_files_are_runs_and_each_level_one_run_in_key_order() {
        let entries = vec![
            ranged("b", 2, 50, 99),
            ranged("l0-new", 0, 0, 99),
            ranged("a", 2, 0, 49),
            ranged("l0-old", 0, 10, 20),
            ranged("c", 1, 5, 6),
            // Overlaps `a`: a level that is not one sorted run is split, not trusted.
            ranged("d", 3, 0, 10),
            ranged("e", 3, 5, 20),
            ranged("f", 3, 21, 30),
        ];
        let runs: Vec<Vec<&str>> = sorted_runs(&[DataType::Int], &entries)
            .iter()
            .map(|run| run.iter().map(|f| f.file.file_name.as_str()).collect())
            .collect();
        assert_eq!(
            runs,
            vec![
                vec!["l0-new"],
                vec!["l0-old"],
                vec!["c"],
                vec!["a", "b"],
                vec!["d"],
                vec!["e", "f"],
            ]
        );
        // Keys that cannot be read make every file of the level a run of its own.
        let mut damaged = ranged("x", 1, 0, 1);
        damaged.file.min_key = vec![1, 2, 3];
        let other = ranged("y", 1, 2, 3);
        let level = [damaged, other];
        assert_eq!(sorted_runs(&[DataType::Int], &level).len(), 2);
    }

    /// Two buckets of more rows than a chunk, over two commits (updates and deletes to
    /// merge): the chunks hold exactly the rows `scan` returns; an error of `each` stops
    /// the scan and is returned.
    #[tokio::test]
    async fn scan_in_chunks_hands_over_the_merged_rows_in_chunks() {
        use std::collections::BTreeMap;

        use crate::lsm::writer::TableWriter;
        use crate::table::schema::TableSchema;
        use crate::table::{TableIdentifier, Warehouse};

        let schema = TableSchema::new(
            vec![
                ("id".into(), DataType::Int, false),
                ("v".into(), DataType::BigInt, true),
            ],
            vec![],
            vec!["id".into()],
            BTreeMap::from([("bucket".to_string(), "2".to_string())]),
        )
        .unwrap();
        let table = Arc::new(
            Table::create(
                &Warehouse::in_memory(),
                &TableIdentifier::parse("t.chunks").unwrap(),
                schema,
            )
            .await
            .unwrap(),
        );
        let rows = 3 * SCAN_CHUNK as i32;
        for commit in 0..2i64 {
            let mut w = TableWriter::new(table.clone(), "test").await.unwrap();
            for id in 0..rows {
                let kind = if commit == 1 && id % 7 == 0 {
                    RowKind::Delete
                } else {
                    RowKind::Insert
                };
                w.write(kind, vec![Datum::Int(id), Datum::BigInt(commit)])
                    .unwrap();
            }
            w.commit(BTreeMap::new()).await.unwrap();
        }
        let snapshot = table.latest_snapshot().await.unwrap().unwrap();
        let filter = ScanFilter::default();
        let mut chunks = Vec::new();
        scan_in_chunks(&table, &snapshot, &filter, |chunk| {
            chunks.push(chunk);
            Ok(())
        })
        .await
        .unwrap();
        assert!(
            chunks
                .iter()
                .all(|c| !c.is_empty() && c.len() <= SCAN_CHUNK)
        );
        assert!(chunks.len() > 2, "{} chunks", chunks.len());
        let mut got: Vec<Row> = chunks.into_iter().flatten().collect();
        got.sort_by(|a, b| compare_datums(&a[0], &b[0]));
        let expected = scan(&table, Some(&snapshot), &filter).await.unwrap();
        assert_eq!(got.len(), (rows - (rows + 6) / 7) as usize);
        assert_eq!(got, expected);
        assert!(got.iter().all(|r| r[1] == Datum::BigInt(1)));

        let mut calls = 0;
        let stopped = scan_in_chunks(&table, &snapshot, &filter, |_| {
            calls += 1;
            Err(Error::Data("full".into()))
        })
        .await;
        assert!(matches!(stopped, Err(Error::Data(m)) if m == "full"));
        assert_eq!(calls, 1);
    }

    fn kv(id: i32) -> Result<KeyValue> {
        Ok(KeyValue {
            sequence_number: 0,
            kind: RowKind::Insert,
            row: vec![Datum::Int(id)],
        })
    }

    /// A merge that fails after a chunk and a half: the first chunk is handed over, then
    /// the merge's error is returned. A merge that panics is an error too, not a scan that
    /// ended early.
    #[tokio::test]
    async fn a_failing_or_panicking_merge_is_the_scan_error() {
        let mut got = Vec::new();
        let failed = in_chunks(
            || {
                (0..6000)
                    .map(kv)
                    .chain(std::iter::once(Err(Error::format("bad file"))))
            },
            |kv| Some(kv.row),
            &mut |chunk| {
                got.push(chunk.len());
                Ok(())
            },
        )
        .await;
        assert!(matches!(failed, Err(Error::Format(m)) if m == "bad file"));
        assert_eq!(got, [SCAN_CHUNK]);

        let panicked = in_chunks(
            || (0..10).map(|i| if i < 5 { kv(i) } else { panic!("merge bug") }),
            |kv| Some(kv.row),
            &mut |_| Ok(()),
        )
        .await;
        assert!(matches!(panicked, Err(Error::Task { .. })), "{panicked:?}");

        let mut rows = 0;
        in_chunks(
            || (0..5000).map(kv),
            |kv| (kv.row[0] != Datum::Int(7)).then_some(kv.row),
            &mut |chunk| {
                rows += chunk.len();
                Ok(())
            },
        )
        .await
        .unwrap();
        assert_eq!(rows, 4999);
    }
}
