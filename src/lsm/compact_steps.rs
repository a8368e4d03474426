//! Which files of a compaction unit are merged and which only move up a level, as Java's
//! `MergeTreeCompactTask` decides it.
//!
//! The unit's files are split into *sections*: groups whose key ranges overlap each
//! other (chained), in key order. A section of one file overlaps nothing else in the
//! unit, so its rows need no merge: when the file is at least `compaction.min-file-size`
//! (70% of `target-file-size`, Java's `compactionFileSize`) it is *upgraded*: a DELETE
//! and an ADD of the same file, one level up, and no byte rewritten. Smaller files and
//! overlapping sections are merged together, a stretch at a time between upgraded
//! files, so no output can span a file that stays; a lone small file is upgraded too.
//!
//! Without this every compaction rewrote all its input. With keys that mostly grow (an
//! auto-increment id), Java moves whole files up the levels while lakejoin re-encoded
//! the table on every compaction that reached its top level.
//!
//! Why its own module: it is pure planning over file metadata (no I/O), tested here on
//! its own; `compact` executes the steps.

use std::cmp::Ordering;

use crate::table::binary_row;
use crate::table::datum::{Row, compare_rows};
use crate::table::manifest::ManifestEntry;
use crate::table::types::DataType;

/// One step of a bucket's compaction. Steps come in key order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CompactStep {
    /// Merge these files into new files on the output level.
    Rewrite(Vec<ManifestEntry>),
    /// Move this file to the output level as it is.
    Upgrade(Box<ManifestEntry>),
}

/// What decides between merging a file and moving it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepRules {
    /// The level the unit is compacted into.
    pub(crate) output_level: i32,
    /// The bucket's highest level (`num-levels` - 1).
    pub(crate) max_level: i32,
    /// Files below this many bytes are merged with their neighbours rather than moved.
    pub(crate) min_file_size: i64,
    /// The merge drops retractions. A file that may hold some is then not moved onto
    /// the top level as it is (Java's rule), nor left there.
    pub(crate) drop_retractions: bool,
    /// Level-0 files are always merged: a first-row table's outputs must drop the keys
    /// that older levels already hold, which moving the file would not do.
    pub(crate) merge_level0: bool,
}

impl StepRules {
    /// Java's `compactionFileSize`: files this large are "large" and not merged again,
    /// leaving room for outputs that came out a little under the target.
    pub(crate) fn min_file_size(target_file_size: u64) -> i64 {
        i64::try_from(target_file_size / 10 * 7).unwrap_or(i64::MAX)
    }
}

/// The steps that compact `files` (the whole unit) under `rules`. Files already on the
/// output level that need nothing get no step: they stay. When a key range cannot be
/// read (a damaged manifest), every file is merged, as before sections existed.
pub(crate) fn plan_steps(
    files: &[ManifestEntry],
    key_types: &[DataType],
    rules: StepRules,
) -> Vec<CompactStep> {
    let Some(sections) = sections(files, key_types) else {
        return vec![CompactStep::Rewrite(files.to_vec())];
    };
    let mut plan = Planner {
        rules,
        steps: Vec::new(),
        candidate: Vec::new(),
    };
    for section in sections {
        match section.as_slice() {
            [only] if only.file.file_size >= rules.min_file_size => {
                plan.flush();
                plan.upgrade(only);
            }
            _ => plan.candidate.push(section),
        }
    }
    plan.flush();
    plan.steps
}

/// The files grouped into sections of chained overlapping key ranges, in key order;
/// `None` when a key range cannot be read.
fn sections<'f>(
    files: &'f [ManifestEntry],
    key_types: &[DataType],
) -> Option<Vec<Vec<&'f ManifestEntry>>> {
    let mut ranges: Vec<(Row, Row, &ManifestEntry)> = files
        .iter()
        .map(|e| {
            let min = binary_row::deserialize(&e.file.min_key, key_types).ok()?;
            let max = binary_row::deserialize(&e.file.max_key, key_types).ok()?;
            Some((min, max, e))
        })
        .collect::<Option<_>>()?;
    ranges.sort_by(|a, b| compare_rows(&a.0, &b.0).then_with(|| compare_rows(&a.1, &b.1)));
    let mut sections: Vec<Vec<&ManifestEntry>> = Vec::new();
    let mut bound: Option<Row> = None;
    for (min, max, entry) in ranges {
        match (&mut bound, sections.last_mut()) {
            // Starts at or before the section's end: the ranges share a key.
            (Some(end), Some(section)) if compare_rows(&min, end) != Ordering::Greater => {
                section.push(entry);
                if compare_rows(&max, end) == Ordering::Greater {
                    *end = max;
                }
            }
            _ => {
                sections.push(vec![entry]);
                bound = Some(max);
            }
        }
    }
    Some(sections)
}

/// `files` in key order when no two of them share a key (each file's keys are unique and
/// sorted, as a data file's are): merging them is then only reading them one after the
/// other. `None` when two overlap or a key range cannot be read.
pub(crate) fn disjoint_in_key_order(
    files: &[ManifestEntry],
    key_types: &[DataType],
) -> Option<Vec<ManifestEntry>> {
    let sections = sections(files, key_types)?;
    sections
        .into_iter()
        .map(|section| match section.as_slice() {
            [only] => Some((*only).clone()),
            _ => None,
        })
        .collect()
}

/// Java's walk over the sections: merge candidates gather until a file that moves
/// (or stays) ends the stretch.
struct Planner<'f> {
    rules: StepRules,
    steps: Vec<CompactStep>,
    /// Sections (or single small files) waiting to be merged together.
    candidate: Vec<Vec<&'f ManifestEntry>>,
}

impl Planner<'_> {
    /// Merges the waiting candidates; a lone small file is moved instead (merging it
    /// with nothing would only copy it).
    fn flush(&mut self) {
        let candidate = std::mem::take(&mut self.candidate);
        match candidate.as_slice() {
            [] => {}
            [section] if section.len() == 1 => self.upgrade(section[0]),
            _ => self.steps.push(CompactStep::Rewrite(
                candidate.into_iter().flatten().cloned().collect(),
            )),
        }
    }

    /// Moves a file that overlaps nothing else to the output level, unless it must be
    /// merged alone (see [`StepRules`]).
    fn upgrade(&mut self, entry: &ManifestEntry) {
        let rules = &self.rules;
        let may_hold_retractions = entry.file.delete_row_count != Some(0);
        let keeps_retractions_on_top =
            rules.drop_retractions && rules.output_level == rules.max_level && may_hold_retractions;
        let step = if entry.file.level == rules.output_level {
            // Already there. Java leaves it; lakejoin's full compaction also counts a top
            // level with droppable retractions as not yet compact, so those are merged.
            keeps_retractions_on_top.then(|| CompactStep::Rewrite(vec![entry.clone()]))
        } else if keeps_retractions_on_top
            || (rules.merge_level0 && entry.file.level == 0)
            // Never down a level (a picker gives no such unit; merging is always right).
            || entry.file.level > rules.output_level
        {
            Some(CompactStep::Rewrite(vec![entry.clone()]))
        } else {
            Some(CompactStep::Upgrade(Box::new(entry.clone())))
        };
        self.steps.extend(step);
    }
}

/// The entry of `entry`'s file moved to `level`: everything else, the name included,
/// stays (Java's `DataFileMeta.upgrade`).
pub(crate) fn upgraded(entry: &ManifestEntry, level: i32) -> ManifestEntry {
    let mut moved = entry.clone();
    moved.file.level = level;
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsm::levels::tests::file;
    use crate::table::datum::Datum;

    const KEY: [DataType; 1] = [DataType::Int];

    /// A file named `name` on `level` holding keys `min..=max`, `size` bytes.
    fn ranged(name: &str, level: i32, min: i32, max: i32, size: i64) -> ManifestEntry {
        let mut e = file(name, level, size, 0);
        e.file.min_key = binary_row::serialize(&[Datum::Int(min)], &KEY).unwrap();
        e.file.max_key = binary_row::serialize(&[Datum::Int(max)], &KEY).unwrap();
        e
    }

    fn rules(output_level: i32) -> StepRules {
        StepRules {
            output_level,
            max_level: 5,
            min_file_size: 100,
            drop_retractions: false,
            merge_level0: false,
        }
    }

    /// Steps as short strings: `R(a,b)` merges a and b, `U(a)` moves a.
    fn shape(steps: &[CompactStep]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                CompactStep::Rewrite(files) => {
                    let names: Vec<&str> =
                        files.iter().map(|f| f.file.file_name.as_str()).collect();
                    format!("R({})", names.join(","))
                }
                CompactStep::Upgrade(f) => format!("U({})", f.file.file_name),
            })
            .collect()
    }

    fn plan(files: &[ManifestEntry], rules: StepRules) -> Vec<String> {
        shape(&plan_steps(files, &KEY, rules))
    }

    #[test]
    fn disjoint_files_come_in_key_order_and_one_shared_key_is_an_overlap() {
        let names = |files: Option<Vec<ManifestEntry>>| {
            files.map(|f| {
                f.iter()
                    .map(|e| e.file.file_name.clone())
                    .collect::<Vec<_>>()
            })
        };
        let disjoint = [
            ranged("c", 0, 30, 40, 10),
            ranged("a", 0, 0, 10, 10),
            ranged("b", 1, 11, 29, 10),
        ];
        assert_eq!(
            names(disjoint_in_key_order(&disjoint, &KEY)),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        // b ends where c starts: they share key 30.
        let touching = [ranged("b", 0, 11, 30, 10), ranged("c", 0, 30, 40, 10)];
        assert_eq!(names(disjoint_in_key_order(&touching, &KEY)), None);
        let mut unreadable = ranged("x", 0, 0, 1, 10);
        unreadable.file.max_key = vec![1, 2];
        assert_eq!(names(disjoint_in_key_order(&[unreadable], &KEY)), None);
    }

    #[test]
    fn overlapping_sections_are_merged_together_and_large_lone_files_move() {
        let files = [
            ranged("late", 0, 200, 300, 500),
            ranged("a", 0, 0, 10, 500),
            ranged("b", 3, 5, 20, 500),
            ranged("c", 3, 30, 40, 500),
            // Touches c at one key: the same section.
            ranged("d", 0, 40, 50, 10),
        ];
        assert_eq!(plan(&files, rules(3)), ["R(a,b,c,d)", "U(late)"]);
    }

    #[test]
    fn small_files_merge_with_their_neighbours_until_a_large_one() {
        let files = [
            ranged("s1", 0, 0, 1, 10),
            ranged("s2", 0, 2, 3, 10),
            ranged("big", 0, 4, 5, 100),
            ranged("s3", 0, 6, 7, 10),
            ranged("x", 0, 8, 9, 10),
            ranged("y", 1, 9, 12, 10),
        ];
        assert_eq!(plan(&files, rules(4)), ["R(s1,s2)", "U(big)", "R(s3,x,y)"]);
    }

    #[test]
    fn a_lone_small_file_moves() {
        let files = [ranged("s", 0, 0, 1, 10), ranged("big", 1, 4, 5, 100)];
        assert_eq!(plan(&files, rules(2)), ["U(s)", "U(big)"]);
        assert_eq!(plan(&files[..1], rules(2)), ["U(s)"]);
    }

    #[test]
    fn files_already_on_the_output_level_stay_but_end_the_stretch() {
        let files = [
            ranged("s1", 0, 0, 1, 10),
            ranged("s2", 0, 2, 3, 10),
            ranged("top", 5, 4, 5, 100),
            ranged("s3", 0, 6, 7, 10),
        ];
        assert_eq!(plan(&files, rules(5)), ["R(s1,s2)", "U(s3)"]);
    }

    #[test]
    fn retractions_are_not_moved_onto_the_top_level_when_they_would_be_dropped() {
        let mut with_deletes = ranged("d", 0, 0, 1, 100);
        with_deletes.file.delete_row_count = Some(3);
        let mut unknown = ranged("u", 0, 2, 3, 100);
        unknown.file.delete_row_count = None;
        let mut top = ranged("t", 5, 4, 5, 100);
        top.file.delete_row_count = Some(1);
        let files = [with_deletes, unknown, top];
        let dropping = StepRules {
            drop_retractions: true,
            ..rules(5)
        };
        assert_eq!(plan(&files, dropping), ["R(d)", "R(u)", "R(t)"]);
        // Kept retractions (sequence.field tables) or a lower output level: moved.
        assert_eq!(plan(&files, rules(5)), ["U(d)", "U(u)"]);
        assert_eq!(plan(&files[..2], dropping.with_output(4)), ["U(d)", "U(u)"]);
    }

    #[test]
    fn level0_files_of_first_row_tables_are_merged() {
        let files = [ranged("l0", 0, 0, 1, 100), ranged("l2", 2, 4, 5, 100)];
        let first_row = StepRules {
            merge_level0: true,
            ..rules(3)
        };
        assert_eq!(plan(&files, first_row), ["R(l0)", "U(l2)"]);
    }

    #[test]
    fn a_file_above_the_output_level_is_merged_not_moved_down() {
        let files = [ranged("high", 4, 0, 1, 100)];
        assert_eq!(plan(&files, rules(2)), ["R(high)"]);
    }

    #[test]
    fn unreadable_key_ranges_merge_everything() {
        let mut broken = ranged("x", 0, 0, 1, 100);
        broken.file.min_key = vec![1, 2];
        let files = [broken, ranged("y", 0, 4, 5, 100)];
        assert_eq!(plan(&files, rules(3)), ["R(x,y)"]);
    }

    #[test]
    fn an_upgrade_keeps_the_file_and_changes_only_its_level() {
        let before = ranged("f", 0, 0, 1, 100);
        let after = upgraded(&before, 4);
        assert_eq!(after.file.level, 4);
        assert_eq!(
            ManifestEntry {
                file: crate::table::manifest::DataFileMeta {
                    level: 0,
                    ..after.file.clone()
                },
                ..after
            },
            before
        );
    }

    #[test]
    fn java_min_file_size_is_seventy_percent_of_the_target() {
        assert_eq!(StepRules::min_file_size(128 << 20), 93_952_404);
        assert_eq!(StepRules::min_file_size(u64::MAX), i64::MAX);
    }

    impl StepRules {
        fn with_output(self, output_level: i32) -> Self {
            StepRules {
                output_level,
                ..self
            }
        }
    }

    proptest::proptest! {
        /// Every file is in at most one step and moved ones never overlap a merge's
        /// range; merged stretches and moved files come in key order.
        #[test]
        fn steps_cover_each_file_once_in_key_order(
            shape in proptest::collection::vec((0..5i32, 0..40i32, 0..6i32, 1..200i64), 1..14),
        ) {
            let files: Vec<ManifestEntry> = shape
                .iter()
                .enumerate()
                .map(|(i, &(level, min, len, size))| {
                    ranged(&format!("f{i}"), level, min, min + len, size)
                })
                .collect();
            let steps = plan_steps(&files, &KEY, rules(4));
            let mut seen = std::collections::HashSet::new();
            let mut last_max = i32::MIN;
            for step in &steps {
                let group: Vec<&ManifestEntry> = match step {
                    CompactStep::Rewrite(fs) => fs.iter().collect(),
                    CompactStep::Upgrade(f) => vec![f.as_ref()],
                };
                let key = |bytes: &[u8]| match binary_row::deserialize(bytes, &KEY).unwrap()[0] {
                    Datum::Int(k) => k,
                    _ => unreachable!(),
                };
                let lo = group.iter().map(|f| key(&f.file.min_key)).min().unwrap();
                let hi = group.iter().map(|f| key(&f.file.max_key)).max().unwrap();
                proptest::prop_assert!(lo > last_max, "{:?} starts inside the step before", step);
                last_max = hi;
                for f in group {
                    proptest::prop_assert!(seen.insert(f.file.file_name.clone()));
                }
            }
            // What no step names stays: only files already on the output level.
            for f in &files {
                if !seen.contains(&f.file.file_name) {
                    proptest::prop_assert_eq!(f.file.level, 4);
                }
            }
        }
    }
}
