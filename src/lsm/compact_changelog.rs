//! The merge of a compaction that writes the top level of a `full-compaction` table, with
//! its changelog (Java's `FullChangelogMergeTreeCompactRewriter`): only such compactions
//! write the top level, and every one of them merges all of the bucket, so for each key
//! the top level holds what the previous one emitted, and the changelog is the way from
//! that row to the merged row of every level (`changelog::full_compaction_change`).
//!
//! Why its own module: a plain compaction merges versions without caring which level
//! they came from (`reader::read_and_merge`); this one must tell the top level's versions
//! apart, which `compact` (planning and committing rounds) need not know about.

use futures::{StreamExt, TryStreamExt};

use super::changelog::full_compaction_change;
use super::merge::{MergeEngine, SequenceOrder, key_order};
use crate::error::{Error, Result};
use crate::table::data_file::KeyValue;
use crate::table::manifest::ManifestEntry;
use crate::table::{IO_CONCURRENCY, Table};

/// What a compaction to the top level writes: the merged rows (one per key, in key
/// order, retractions included) and the changelog rows (in key order).
#[derive(Debug, Default)]
pub(crate) struct MergedWithChangelog {
    pub(crate) rows: Vec<KeyValue>,
    pub(crate) changes: Vec<KeyValue>,
}

/// Reads `entries` (every file of one bucket; deletion vectors are not supported by
/// compaction) and merges them, computing the changelog against the versions read from
/// files on `top_level`.
pub(crate) async fn merge_with_changelog(
    table: &Table,
    entries: &[ManifestEntry],
    top_level: i32,
    engine: &MergeEngine,
    order: &SequenceOrder,
    row_deduplicate: bool,
) -> Result<MergedWithChangelog> {
    let reads: Vec<_> = entries
        .iter()
        .map(|e| async move {
            let rows = table.read_data_file(e, None).await?;
            Ok::<_, Error>((rows, e.file.level == top_level))
        })
        .collect();
    let files: Vec<(Vec<KeyValue>, bool)> = futures::stream::iter(reads)
        .buffered(IO_CONCURRENCY)
        .try_collect()
        .await?;
    let key_indices = table.schema().trimmed_key_indices();
    let engine = engine.clone();
    let order = order.clone();
    tokio::task::spawn_blocking(move || {
        fold_with_changelog(files, &key_indices, &order, &engine, row_deduplicate)
    })
    .await
    .map_err(|e| Error::task("merge task", e))?
}

/// Sorts the versions of every file (each tagged: read from the top level) by key and
/// sequence order, as `merge::sort_and_fold` does, and folds each key's versions with
/// its changelog.
fn fold_with_changelog(
    files: Vec<(Vec<KeyValue>, bool)>,
    key_indices: &[usize],
    order: &SequenceOrder,
    engine: &MergeEngine,
    row_deduplicate: bool,
) -> Result<MergedWithChangelog> {
    let mut tagged: Vec<(KeyValue, bool)> = files
        .into_iter()
        .flat_map(|(rows, top)| rows.into_iter().map(move |kv| (kv, top)))
        .collect();
    // Stable, like `sort_changes`: versions equal in sequence order keep file order.
    tagged.sort_by(|(a, _), (b, _)| key_order(a, b, key_indices).then_with(|| order.compare(a, b)));
    let mut out = MergedWithChangelog::default();
    let mut versions = Vec::new();
    for group in tagged
        .chunk_by_mut(|(a, _), (b, _)| key_order(a, b, key_indices) == std::cmp::Ordering::Equal)
    {
        let top = group.iter().position(|(_, top)| *top);
        versions.clear();
        versions.extend(group.iter_mut().map(|(kv, _)| take(kv)));
        let mut outcome = full_compaction_change(engine, row_deduplicate, &mut versions, top)?;
        out.changes.append(&mut outcome.changes);
        out.rows.extend(outcome.merged);
    }
    Ok(out)
}

/// Moves a version out of the sorted buffer, leaving an empty one.
fn take(kv: &mut KeyValue) -> KeyValue {
    KeyValue {
        sequence_number: kv.sequence_number,
        kind: kv.kind,
        row: std::mem::take(&mut kv.row),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::Datum;
    use crate::table::options::TableOptions;
    use crate::table::row_kind::RowKind;
    use crate::table::schema::TableSchema;
    use crate::table::types::DataType;

    fn engine(options: &[(&str, &str)]) -> (MergeEngine, SequenceOrder) {
        let mut map: std::collections::BTreeMap<String, String> = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.insert("bucket".into(), "1".into());
        let schema = TableSchema::new(
            vec![
                ("k".into(), DataType::Int, false),
                ("v".into(), DataType::Int, true),
            ],
            vec![],
            vec!["k".into()],
            map,
        )
        .unwrap();
        let options = TableOptions::from_map(&schema.options).unwrap();
        (
            MergeEngine::new(&schema, &options).unwrap(),
            SequenceOrder::new(&schema, &options).unwrap(),
        )
    }

    fn kv(seq: i64, kind: RowKind, k: i32, v: i32) -> KeyValue {
        KeyValue {
            sequence_number: seq,
            kind,
            row: vec![Datum::Int(k), Datum::Int(v)],
        }
    }

    fn summary(rows: &[KeyValue]) -> Vec<(RowKind, i32, i32)> {
        rows.iter()
            .map(|kv| match (&kv.row[0], &kv.row[1]) {
                (Datum::Int(k), Datum::Int(v)) => (kv.kind, *k, *v),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// Key 1 new, 2 updated, 3 deleted, 4 untouched, 5 updated to the same value, 6 new
    /// and deleted again, across a top-level file and two newer ones.
    fn files() -> Vec<(Vec<KeyValue>, bool)> {
        use RowKind::*;
        let top = vec![
            kv(0, Insert, 2, 20),
            kv(1, Insert, 3, 30),
            kv(2, Insert, 4, 40),
            kv(3, Insert, 5, 50),
        ];
        let level1 = vec![
            kv(4, Insert, 1, 10),
            kv(5, UpdateAfter, 2, 21),
            kv(6, Insert, 6, 60),
        ];
        let level0 = vec![
            kv(7, Delete, 3, 30),
            kv(8, UpdateAfter, 5, 50),
            kv(9, Delete, 6, 60),
        ];
        vec![(level0, false), (top, true), (level1, false)]
    }

    #[test]
    fn changes_run_from_the_top_level_to_the_merged_rows() {
        use RowKind::*;
        let (engine, order) = engine(&[]);
        let out = fold_with_changelog(files(), &[0], &order, &engine, false).unwrap();
        assert_eq!(
            summary(&out.changes),
            vec![
                (Insert, 1, 10),
                (UpdateBefore, 2, 20),
                (UpdateAfter, 2, 21),
                (Delete, 3, 30),
                (UpdateBefore, 5, 50),
                (UpdateAfter, 5, 50),
            ]
        );
        assert_eq!(
            summary(&out.rows),
            vec![
                (Insert, 1, 10),
                (UpdateAfter, 2, 21),
                (Delete, 3, 30),
                (Insert, 4, 40),
                (UpdateAfter, 5, 50),
                (Delete, 6, 60),
            ]
        );
        // With row-deduplicate, key 5's unchanged row emits nothing.
        let out = fold_with_changelog(files(), &[0], &order, &engine, true).unwrap();
        assert_eq!(out.changes.len(), 4);
        assert!(summary(&out.changes).iter().all(|c| c.1 != 5));
    }

    #[test]
    fn aggregates_change_from_the_last_full_compaction() {
        use RowKind::*;
        let (engine, order) = engine(&[
            ("merge-engine", "aggregation"),
            ("fields.v.aggregate-function", "sum"),
        ]);
        let files = vec![
            (vec![kv(0, Insert, 1, 5), kv(1, Insert, 2, 7)], true),
            (vec![kv(2, Insert, 1, 3), kv(3, UpdateBefore, 2, 7)], false),
            (vec![kv(4, Insert, 1, 2), kv(5, Insert, 3, 1)], false),
        ];
        let out = fold_with_changelog(files, &[0], &order, &engine, false).unwrap();
        assert_eq!(
            summary(&out.changes),
            vec![
                (UpdateBefore, 1, 5),
                (UpdateAfter, 1, 10),
                (UpdateBefore, 2, 7),
                (UpdateAfter, 2, 0),
                (Insert, 3, 1),
            ]
        );
    }
}
