//! Incremental reads: the changes a range of snapshots made, as Paimon's incremental and
//! streaming readers see them (Java's `incremental-between` with the `auto` scan mode,
//! and the follow-up scanners of a streaming read).
//!
//! - A table with a `changelog-producer` is read from its changelog files: each
//!   snapshot's changelog manifest list (`ChangelogFollowUpScanner`), an APPEND's or,
//!   for `full-compaction`, a COMPACT's. A snapshot without one (most compactions, a
//!   commit of nothing, an APPEND of a `full-compaction` table) adds no changes.
//! - A table without is read from the delta files of its APPEND snapshots
//!   (`DeltaFollowUpScanner`): each commit's folded rows, with their row kinds.
//!   Compactions rewrite rows and change nothing, so their snapshots are skipped.
//!
//! `unfaithful_changes` tells which tables these changes are the merged rows' changes
//! of, for the `[[changelog]]` pipelines that produce them to Kafka.
//!
//! Why its own module: the merged scan (`lsm::reader`) answers "what is the table",
//! this one "what happened to it"; `lakejoin table scan --from-snapshot` and the
//! changelog tests read through it.

use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::changelog_options::ChangelogProducer;
use crate::table::datum::Row;
use crate::table::manifest::{FileKind, ManifestEntry};
use crate::table::options::{MergeEngineKind, TableOptions};
use crate::table::row_kind::RowKind;
use crate::table::snapshot::{CommitKind, Snapshot};

/// One change: a row with its kind, and the snapshot that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub snapshot: i64,
    pub kind: RowKind,
    pub row: Row,
}

/// The changes of the snapshots after `from` up to `to` (both ids; `from` may be 0, the
/// empty table), in commit order, and within a snapshot by partition, bucket, file and
/// row. Every snapshot of the range must still exist, or live on as a long-lived
/// changelog.
pub async fn read_changes(table: &Table, from: i64, to: i64) -> Result<Vec<Change>> {
    if from < 0 || to < from {
        return Err(Error::Config(format!(
            "incremental read of {}: the range {from}..{to} is empty or negative \
             (--from-snapshot must be ≥ 0 and ≤ --to-snapshot)",
            table.identifier()
        )));
    }
    let mut changes = Vec::new();
    for id in from + 1..=to {
        // An expired snapshot's changelog may live on (`changelog/changelog-<id>`).
        let snapshot = table.snapshot_or_changelog(id).await?;
        for entry in change_files(table, &snapshot).await? {
            let partition = table.partition_values(&entry.partition)?;
            let partition_indices = table.schema().partition_indices();
            for kv in table.read_data_file(&entry, None).await? {
                let mut row = kv.row;
                // Partition values come from the manifest, not the file (format.md §7.1).
                for (&i, v) in partition_indices.iter().zip(&partition) {
                    if let Some(slot) = row.get_mut(i) {
                        *slot = v.clone();
                    }
                }
                changes.push(Change {
                    snapshot: id,
                    kind: kv.kind,
                    row,
                });
            }
        }
    }
    Ok(changes)
}

/// The files holding the changes of one snapshot, grouped by (partition, bucket) in
/// manifest order.
async fn change_files(table: &Table, snapshot: &Snapshot) -> Result<Vec<ManifestEntry>> {
    let list = if table.options().changelog.produces() {
        snapshot.changelog_manifest_list.as_deref()
    } else if snapshot.commit_kind == CommitKind::Append {
        Some(snapshot.delta_manifest_list.as_str())
    } else {
        None
    };
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let metas = table.read_manifest_list(list).await?;
    let entries = table.read_manifests(&metas).await?;
    let adds: Vec<ManifestEntry> = entries
        .into_iter()
        .filter(|e| e.kind == FileKind::Add)
        .collect();
    Ok(super::reader::group_by_bucket(adds)
        .into_iter()
        .flat_map(|(_, files)| files)
        .collect())
}

/// Why [`read_changes`] of a table with these options does not yield its merged rows'
/// changes, naming the `changelog-producer` that would; `None` when it does. The
/// `lookup` and `full-compaction` changelogs hold the merged rows' before and after
/// images for every merge engine. The `input` changelog, and without a producer the
/// delta files, hold the rows as written: for a deduplicate table each is the whole new
/// row (an upsert stream; without a producer updates come without their before image),
/// for the other engines they are partial rows, increments or ignored duplicates.
pub(crate) fn unfaithful_changes(options: &TableOptions) -> Option<String> {
    let engine = options.merge_engine;
    let what = match engine {
        MergeEngineKind::Deduplicate => return None,
        MergeEngineKind::PartialUpdate => "partial rows",
        MergeEngineKind::Aggregation => "the increments, not the aggregates",
        MergeEngineKind::FirstRow => "later rows that the table ignores",
    };
    let stored = match options.changelog.producer {
        ChangelogProducer::Lookup | ChangelogProducer::FullCompaction => return None,
        ChangelogProducer::Input => "its `input` changelog holds the changes as written",
        ChangelogProducer::None => {
            "it has no changelog producer, and its delta files hold the changes as written"
        }
    };
    Some(format!(
        "{stored}, which for a {} table are {what}; set the table option \
         'changelog-producer' = 'lookup' (its merged rows' changes, at every commit) or \
         'full-compaction' (the same, at every full compaction)",
        engine.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn options(pairs: &[(&str, &str)]) -> TableOptions {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TableOptions::from_map(&map).unwrap()
    }

    #[test]
    fn only_merged_changes_are_faithful() {
        for faithful in [
            &[][..],
            &[("changelog-producer", "input")][..],
            &[
                ("merge-engine", "partial-update"),
                ("changelog-producer", "lookup"),
            ][..],
            &[
                ("merge-engine", "aggregation"),
                ("changelog-producer", "lookup"),
            ][..],
            &[
                ("merge-engine", "first-row"),
                ("changelog-producer", "lookup"),
            ][..],
            &[
                ("merge-engine", "partial-update"),
                ("changelog-producer", "full-compaction"),
            ][..],
            &[
                ("merge-engine", "aggregation"),
                ("changelog-producer", "full-compaction"),
            ][..],
        ] {
            assert_eq!(unfaithful_changes(&options(faithful)), None, "{faithful:?}");
        }
        let partial = unfaithful_changes(&options(&[("merge-engine", "partial-update")])).unwrap();
        assert!(
            partial.contains("no changelog producer")
                && partial.contains("'changelog-producer' = 'lookup'"),
            "{partial}"
        );
        let input = unfaithful_changes(&options(&[
            ("merge-engine", "aggregation"),
            ("changelog-producer", "input"),
        ]))
        .unwrap();
        assert!(
            input.contains("`input`") && input.contains("aggregation"),
            "{input}"
        );
    }
}
