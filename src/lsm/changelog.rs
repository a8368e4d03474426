//! The rows of a table's changelog files (docs/format.md §3.1), as Java's writers compute
//! them for each `changelog-producer`:
//!
//! - `input` (`MergeTreeWriter.flushWriteBuffer`): every change of a flush, before the
//!   merge engine folds them, sorted by key and sequence order;
//! - `lookup` (`LookupChangelogMergeFunctionWrapper`, `FirstRowMergeFunctionWrapper`):
//!   for each key a flush changes, the merged row before the change (what the table's
//!   files reduce to) and after it, as `+I`, `-U/+U` or `-D`;
//! - `full-compaction` (`FullChangelogMergeFunctionWrapper`): for each key of a
//!   compaction that writes the top level, the row the top level held (the result of
//!   the previous such compaction) and the merged row of every level, likewise.
//!
//! Why its own module: the writer runs them at flush time and compaction
//! (`compact_changelog`) at the top level, but the rules are the merge engine's; the
//! `lookup` rules are tested here against a model of merged rows, engine by engine, the
//! `full-compaction` ones through the writer (`tests/table_changelog.rs`).

use super::merge::{MergeEngine, SequenceOrder};
use crate::error::Result;
use crate::table::data_file::KeyValue;
use crate::table::options::MergeEngineKind;
use crate::table::row_kind::RowKind;

/// What a flush writes for one key of a `lookup` table.
#[derive(Debug)]
pub(crate) struct LookupOutcome {
    /// The key's row in the flush's data file.
    pub(crate) written: KeyValue,
    /// What the key's versions reduce to afterwards (what a later flush of the same
    /// commit starts from).
    pub(crate) after: Option<KeyValue>,
    /// The changelog rows, in order.
    pub(crate) changes: Vec<KeyValue>,
}

/// The `lookup` changelog of one key: what the table's files reduce to before the
/// flush (`before`, a retraction included, `None` when the key is in no file) and the
/// flush's folded version of the key (`folded`).
///
/// The changelog rows:
/// - no live row before, a live row after: `+I` of the after image;
/// - a live row before, none after: `-D` of the before image;
/// - live rows before and after: `-U` before, `+U` after, unless
///   `changelog-producer.row-deduplicate` is set and the two rows are equal.
///
/// A key in no file whose folded version is a retraction is merged on its own, as
/// Java's lookup compaction merges it (`LookupMergeFunction`, no reducer): an
/// aggregation's lone `-U` becomes an insert of the retracted values, which is also what
/// the data file gets, so the table holds what Java's table holds.
///
/// First-row tables produce only the `+I` of a key seen for the first time, with the
/// kind the kept version has (Java's `FirstRowMergeFunctionWrapper`).
pub(crate) fn lookup_change(
    engine: &MergeEngine,
    order: &SequenceOrder,
    row_deduplicate: bool,
    before: Option<KeyValue>,
    folded: KeyValue,
) -> Result<LookupOutcome> {
    let Some(before) = before else {
        let written = if folded.kind.is_retract() {
            engine
                .merge(std::slice::from_ref(&folded))?
                .unwrap_or(folded)
        } else {
            folded
        };
        let changes = if written.kind.is_retract() {
            Vec::new()
        } else {
            vec![with_kind(&written, insert_kind(engine, &written))]
        };
        return Ok(LookupOutcome {
            after: Some(written.clone()),
            written,
            changes,
        });
    };
    let mut versions = vec![before.clone(), folded.clone()];
    versions.sort_by(|a, b| order.compare(a, b));
    let after = engine.merge(&versions)?;
    let mut changes = Vec::new();
    if engine.kind() == MergeEngineKind::FirstRow {
        // A key the table holds already: first-row keeps that version, and emits nothing.
        return Ok(LookupOutcome {
            written: folded,
            after,
            changes,
        });
    }
    let live_before = !before.kind.is_retract();
    match (live_before, after.as_ref().filter(|a| !a.kind.is_retract())) {
        (false, Some(a)) => changes.push(with_kind(a, RowKind::Insert)),
        (false, None) => {}
        (true, None) => changes.push(with_kind(&before, RowKind::Delete)),
        (true, Some(a)) => {
            if !(row_deduplicate && a.row == before.row) {
                changes.push(with_kind(&before, RowKind::UpdateBefore));
                changes.push(with_kind(a, RowKind::UpdateAfter));
            }
        }
    }
    Ok(LookupOutcome {
        written: folded,
        after,
        changes,
    })
}

/// The kind of the `+I` a new key's row gets: `+I`, except first-row, which keeps the
/// kind of the version it kept.
fn insert_kind(engine: &MergeEngine, folded: &KeyValue) -> RowKind {
    if engine.kind() == MergeEngineKind::FirstRow {
        folded.kind
    } else {
        RowKind::Insert
    }
}

/// What a compaction to the top level of a `full-compaction` table writes for one key,
/// and the changelog rows of the key.
#[derive(Debug)]
pub(crate) struct FullCompactionOutcome {
    /// The key's versions reduced (`None`: nothing left); a retraction is the caller's to
    /// drop or keep, as for any compaction.
    pub(crate) merged: Option<KeyValue>,
    pub(crate) changes: Vec<KeyValue>,
}

/// The `full-compaction` changelog of one key (Java's `FullChangelogMergeFunctionWrapper`):
/// `versions` are every version of the key in the compacted files, oldest first, and
/// `top` the index of the one read from the top level, which only such compactions
/// write, so it is what the last one left: the before image.
///
/// The versions reduce as any compaction reduces them ([`MergeEngine::reduce`]: a lone
/// version is kept as it is). The changelog rows:
/// - no top-level row, a live merged row: `+I` of it;
/// - a top-level row and no live merged row: `-D` of the top-level row;
/// - both: `-U` top-level row, `+U` merged row, unless
///   `changelog-producer.row-deduplicate` is set and the two rows are equal (without
///   it Java emits the pair even then);
/// - the top-level version alone: nothing, the key did not change.
///
/// A retraction on the top level (kept there by tables with `sequence.field`, which
/// never drop them; Java's top level holds none) counts as no row.
pub(crate) fn full_compaction_change(
    engine: &MergeEngine,
    row_deduplicate: bool,
    versions: &mut [KeyValue],
    top: Option<usize>,
) -> Result<FullCompactionOutcome> {
    if top.is_some() && versions.len() == 1 {
        // The top-level version alone: the key did not change.
        return Ok(FullCompactionOutcome {
            merged: engine.reduce_owned(versions)?,
            changes: Vec::new(),
        });
    }
    let before = top
        .and_then(|i| versions.get(i))
        .filter(|kv| !kv.kind.is_retract())
        .cloned();
    let merged = engine.reduce_owned(versions)?;
    let mut changes = Vec::new();
    match (before, merged.as_ref().filter(|m| !m.kind.is_retract())) {
        (None, Some(after)) => changes.push(with_kind(after, RowKind::Insert)),
        (None, None) => {}
        (Some(before), None) => changes.push(with_kind(&before, RowKind::Delete)),
        (Some(before), Some(after)) => {
            if !(row_deduplicate && after.row == before.row) {
                changes.push(with_kind(&before, RowKind::UpdateBefore));
                changes.push(with_kind(after, RowKind::UpdateAfter));
            }
        }
    }
    Ok(FullCompactionOutcome { merged, changes })
}

fn with_kind(kv: &KeyValue, kind: RowKind) -> KeyValue {
    KeyValue {
        sequence_number: kv.sequence_number,
        kind,
        row: kv.row.clone(),
    }
}

#[cfg(test)]
mod tests;
