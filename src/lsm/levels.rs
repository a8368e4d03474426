//! The files of one bucket arranged as Paimon's LSM `Levels`: every level-0 file is a
//! sorted run of its own (newest first), every non-empty higher level is one sorted run.

use std::collections::BTreeMap;

use crate::table::manifest::ManifestEntry;

/// One sorted run and the level it lives on.
#[derive(Debug, Clone)]
pub(crate) struct LevelSortedRun {
    /// LSM level (0 for a single level-0 file).
    pub(crate) level: i32,
    /// The files of the run (one file on level 0).
    pub(crate) files: Vec<ManifestEntry>,
}

impl LevelSortedRun {
    /// Sum of the file sizes (negative sizes from a damaged manifest count as 0).
    pub(crate) fn total_size(&self) -> u64 {
        self.files
            .iter()
            .map(|f| u64::try_from(f.file.file_size).unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }
}

/// The live files of one bucket by level.
#[derive(Debug, Clone)]
pub struct Levels {
    /// Level-0 files, newest first (largest max sequence number first, then file name,
    /// as Java orders them).
    level0: Vec<ManifestEntry>,
    /// Files of levels ≥ 1.
    upper: BTreeMap<i32, Vec<ManifestEntry>>,
    /// Number of levels: the configured `num-levels`, or more if a file sits higher.
    num_levels: i32,
}

impl Levels {
    /// Arranges `files` (all of one bucket) with at least `num_levels` levels.
    pub fn new(files: Vec<ManifestEntry>, num_levels: usize) -> Self {
        let mut level0 = Vec::new();
        let mut upper: BTreeMap<i32, Vec<ManifestEntry>> = BTreeMap::new();
        for f in files {
            if f.file.level <= 0 {
                level0.push(f);
            } else {
                upper.entry(f.file.level).or_default().push(f);
            }
        }
        level0.sort_by(|a, b| {
            b.file
                .max_sequence_number
                .cmp(&a.file.max_sequence_number)
                .then_with(|| a.file.file_name.cmp(&b.file.file_name))
        });
        let configured = i32::try_from(num_levels).unwrap_or(i32::MAX).max(2);
        let highest = upper.keys().next_back().copied().unwrap_or(0);
        Levels {
            level0,
            upper,
            num_levels: configured.max(highest.saturating_add(1)),
        }
    }

    /// The highest level (`num-levels` - 1); full compaction writes here.
    pub(crate) fn max_level(&self) -> i32 {
        self.num_levels - 1
    }

    /// The highest level holding a file, 0 if only level 0 does, -1 if the bucket is empty.
    pub(crate) fn non_empty_highest_level(&self) -> i32 {
        match self.upper.keys().next_back() {
            Some(&level) => level,
            None if self.level0.is_empty() => -1,
            None => 0,
        }
    }

    /// Number of sorted runs: one per level-0 file plus one per non-empty higher level.
    pub fn number_of_sorted_runs(&self) -> usize {
        self.level0.len() + self.upper.len()
    }

    /// Number of level-0 files.
    pub fn level0_files(&self) -> usize {
        self.level0.len()
    }

    /// The sorted runs, newest data first: level-0 files, then levels 1, 2, ….
    pub(crate) fn sorted_runs(&self) -> Vec<LevelSortedRun> {
        let mut runs: Vec<LevelSortedRun> = self
            .level0
            .iter()
            .map(|f| LevelSortedRun {
                level: 0,
                files: vec![f.clone()],
            })
            .collect();
        runs.extend(self.upper.iter().map(|(&level, files)| LevelSortedRun {
            level,
            files: files.clone(),
        }));
        runs
    }

    /// The files on levels above `level`.
    pub(crate) fn files_above(&self, level: i32) -> Vec<ManifestEntry> {
        self.upper
            .range(level.saturating_add(1)..)
            .flat_map(|(_, files)| files.iter().cloned())
            .collect()
    }

    /// Every file of the bucket.
    pub(crate) fn all_files(&self) -> Vec<ManifestEntry> {
        let mut files = self.level0.clone();
        files.extend(self.upper.values().flatten().cloned());
        files
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::table::manifest::{DataFileMeta, FileKind, FileSource, SimpleStats};

    /// A manifest entry for a file of `size` bytes on `level` with max sequence `seq`.
    pub(crate) fn file(name: &str, level: i32, size: i64, seq: i64) -> ManifestEntry {
        ManifestEntry {
            kind: FileKind::Add,
            partition: vec![0; 12],
            bucket: 0,
            total_buckets: 1,
            file: DataFileMeta {
                file_name: name.to_string(),
                file_size: size,
                row_count: 1,
                min_key: vec![0; 12],
                max_key: vec![0; 12],
                key_stats: SimpleStats::empty(),
                value_stats: SimpleStats::empty(),
                min_sequence_number: seq,
                max_sequence_number: seq,
                schema_id: 0,
                level,
                extra_files: Vec::new(),
                creation_time: None,
                delete_row_count: Some(0),
                embedded_file_index: None,
                file_source: Some(FileSource::Append),
                value_stats_cols: Some(Vec::new()),
                external_path: None,
                first_row_id: None,
                write_cols: None,
            },
        }
    }

    #[test]
    fn level0_files_are_runs_newest_first_and_levels_are_one_run_each() {
        let levels = Levels::new(
            vec![
                file("a", 0, 10, 1),
                file("b", 3, 10, 0),
                file("c", 0, 10, 7),
                file("d", 3, 10, 0),
                file("e", 5, 10, 0),
            ],
            6,
        );
        let runs = levels.sorted_runs();
        let shape: Vec<(i32, usize)> = runs.iter().map(|r| (r.level, r.files.len())).collect();
        assert_eq!(shape, vec![(0, 1), (0, 1), (3, 2), (5, 1)]);
        assert_eq!(
            runs[0].files[0].file.file_name, "c",
            "newest level-0 file first"
        );
        assert_eq!(levels.number_of_sorted_runs(), 4);
        assert_eq!(levels.non_empty_highest_level(), 5);
        assert_eq!(levels.max_level(), 5);
        assert_eq!(runs[2].total_size(), 20);
    }

    #[test]
    fn levels_grow_to_hold_higher_files() {
        let levels = Levels::new(vec![file("a", 9, 1, 0)], 6);
        assert_eq!(levels.max_level(), 9);
        assert_eq!(Levels::new(Vec::new(), 6).non_empty_highest_level(), -1);
        assert_eq!(
            Levels::new(vec![file("a", 0, 1, 0)], 6).non_empty_highest_level(),
            0
        );
    }
}
