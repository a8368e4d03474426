//! Paimon's universal compaction picker (after RocksDB's): which sorted runs of a bucket
//! to merge, and into which level. Checked in order:
//!
//! 1. **Size amplification**: when the runs newer than the oldest one together exceed
//!    `compaction.max-size-amplification-percent` of it, merge everything to the top level.
//! 2. **Size ratio**: starting with the newest run, keep adding the next older run while it
//!    is no bigger than the candidates so far plus `compaction.size-ratio` percent.
//! 3. **Run count**: above `num-sorted-run.compaction-trigger` runs, merge the newest
//!    `runs - trigger + 1` runs (plus whatever the size ratio lets in).
//!
//! Nothing is picked below the trigger. The output level is one below the first run left
//! out, never level 0, and the top level when every run is merged.

use super::levels::LevelSortedRun;
use crate::table::manifest::ManifestEntry;
use crate::table::options::MaintenanceOptions;

/// Files to merge and the level to write the result to.
#[derive(Debug, Clone)]
pub(crate) struct CompactUnit {
    /// Level of the output files (≥ 1).
    pub(crate) output_level: i32,
    /// Number of sorted runs merged.
    pub(crate) runs: usize,
    /// The files of those runs.
    pub(crate) files: Vec<ManifestEntry>,
}

impl CompactUnit {
    fn from_runs(output_level: i32, runs: &[LevelSortedRun]) -> Self {
        CompactUnit {
            output_level,
            runs: runs.len(),
            files: runs.iter().flat_map(|r| r.files.iter().cloned()).collect(),
        }
    }

    /// Whether merging changes anything: more than one file, or a file moving level.
    pub(crate) fn is_useful(&self) -> bool {
        match self.files.as_slice() {
            [] => false,
            [only] => only.file.level != self.output_level,
            _ => true,
        }
    }
}

/// The universal compaction strategy with a table's options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UniversalCompaction {
    max_size_amplification_percent: u64,
    size_ratio: u64,
    trigger: usize,
}

impl UniversalCompaction {
    /// `compaction.max-size-amplification-percent`, `compaction.size-ratio` and
    /// `num-sorted-run.compaction-trigger` of the table.
    pub(crate) fn new(options: &MaintenanceOptions) -> Self {
        UniversalCompaction {
            max_size_amplification_percent: options.max_size_amplification_percent,
            size_ratio: options.size_ratio,
            trigger: options.compaction_trigger.max(1),
        }
    }

    /// Picks runs to merge from `runs` (newest first, as [`super::levels::Levels`] lists
    /// them), or `None` when the bucket does not need compaction yet.
    pub(crate) fn pick(&self, max_level: i32, runs: &[LevelSortedRun]) -> Option<CompactUnit> {
        if runs.len() < self.trigger {
            return None;
        }
        if let Some(unit) = self.pick_for_size_amplification(max_level, runs) {
            return Some(unit);
        }
        if let Some(unit) = self.pick_for_size_ratio(max_level, runs, 1, false) {
            return Some(unit);
        }
        if runs.len() > self.trigger {
            let candidates = runs.len() - self.trigger + 1;
            return self.pick_for_size_ratio(max_level, runs, candidates, false);
        }
        None
    }

    /// Like [`UniversalCompaction::pick`], but when that picks nothing still merges all
    /// level-0 files up (Java's `ForceUpLevel0Compaction`, used where readers skip level 0).
    pub(crate) fn pick_forcing_level0_up(
        &self,
        max_level: i32,
        runs: &[LevelSortedRun],
    ) -> Option<CompactUnit> {
        if let Some(unit) = self.pick(max_level, runs) {
            return Some(unit);
        }
        let level0_runs = runs.iter().take_while(|r| r.level <= 0).count();
        if level0_runs == 0 {
            return None;
        }
        self.pick_for_size_ratio(max_level, runs, level0_runs, true)
    }

    fn pick_for_size_amplification(
        &self,
        max_level: i32,
        runs: &[LevelSortedRun],
    ) -> Option<CompactUnit> {
        let (oldest, newer) = runs.split_last()?;
        let newer_size: u128 = newer.iter().map(|r| u128::from(r.total_size())).sum();
        let oldest_size = u128::from(oldest.total_size());
        (newer_size * 100 > u128::from(self.max_size_amplification_percent) * oldest_size)
            .then(|| CompactUnit::from_runs(max_level, runs))
    }

    fn pick_for_size_ratio(
        &self,
        max_level: i32,
        runs: &[LevelSortedRun],
        mut candidates: usize,
        force: bool,
    ) -> Option<CompactUnit> {
        let candidates_size = |n: usize| -> f64 {
            runs.iter()
                .take(n)
                .map(|r| r.total_size() as f64)
                .sum::<f64>()
        };
        let mut size = candidates_size(candidates);
        for next in runs.iter().skip(candidates) {
            let next_size = next.total_size() as f64;
            if size * (100.0 + self.size_ratio as f64) / 100.0 < next_size {
                break;
            }
            size += next_size;
            candidates += 1;
        }
        (force || candidates > 1).then(|| create_unit(runs, max_level, candidates))
    }
}

/// The unit merging the newest `count` runs: written one level below the first run left
/// out, but never to level 0 (more level-0 runs are taken in until a higher run is
/// reached, which is then merged too), and to the top level when every run is merged.
fn create_unit(runs: &[LevelSortedRun], max_level: i32, mut count: usize) -> CompactUnit {
    count = count.min(runs.len());
    let mut output_level = match runs.get(count) {
        None => max_level,
        Some(next) => (next.level - 1).max(0),
    };
    if output_level == 0 {
        for next in &runs[count..] {
            count += 1;
            if next.level != 0 {
                output_level = next.level;
                break;
            }
        }
    }
    if count == runs.len() {
        output_level = max_level;
    }
    CompactUnit::from_runs(output_level, &runs[..count])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsm::levels::tests::file;

    fn strategy(trigger: usize) -> UniversalCompaction {
        UniversalCompaction {
            max_size_amplification_percent: 200,
            size_ratio: 1,
            trigger,
        }
    }

    /// Runs given as (level, size), newest first.
    fn runs(shape: &[(i32, i64)]) -> Vec<LevelSortedRun> {
        shape
            .iter()
            .enumerate()
            .map(|(i, &(level, size))| LevelSortedRun {
                level,
                files: vec![file(&format!("f{i}"), level, size, 100 - i as i64)],
            })
            .collect()
    }

    fn picked(unit: &CompactUnit) -> (i32, usize) {
        (unit.output_level, unit.runs)
    }

    /// (output level, runs) of what `strategy(trigger)` picks from `shape` in a table of
    /// 6 levels.
    fn pick(trigger: usize, shape: &[(i32, i64)]) -> Option<(i32, usize)> {
        strategy(trigger).pick(5, &runs(shape)).map(|u| picked(&u))
    }

    #[test]
    fn nothing_below_the_trigger() {
        assert_eq!(pick(5, &[(0, 1), (0, 1), (0, 1), (0, 1)]), None);
    }

    #[test]
    fn size_amplification_merges_everything_to_the_top() {
        assert_eq!(
            pick(5, &[(0, 60), (0, 60), (0, 60), (1, 50), (5, 100)]),
            Some((5, 5))
        );
    }

    #[test]
    fn size_ratio_merges_similar_newest_runs_below_the_next_level() {
        // 10 ≥ 10 → take it (20); 20.2 ≥ 10 → take it (30); 30.3 < 100 → stop before L3.
        assert_eq!(
            pick(5, &[(0, 10), (0, 10), (0, 10), (3, 100), (5, 100)]),
            Some((2, 3))
        );
    }

    #[test]
    fn run_count_forces_a_merge_and_never_outputs_level_0() {
        // Ratio fails at once (1.01 < 5); 6 runs > 5 → merge the newest 2 (6); the ratio
        // stops before 20, a level-0 run, so runs are taken in up to and including L2.
        assert_eq!(
            pick(5, &[(0, 1), (0, 5), (0, 20), (2, 80), (3, 300), (5, 1000)]),
            Some((2, 4))
        );
        assert_eq!(
            pick(
                5,
                &[(0, 1), (0, 5), (0, 2000), (0, 20), (3, 300), (5, 100_000)]
            ),
            Some((3, 5))
        );
    }

    #[test]
    fn all_level0_merges_to_the_top_level() {
        assert_eq!(pick(3, &[(0, 1), (0, 1), (0, 1), (0, 1)]), Some((5, 4)));
    }

    #[test]
    fn forcing_level0_up_picks_level0_files_alone() {
        let s = strategy(5);
        let unit = s
            .pick_forcing_level0_up(5, &runs(&[(0, 1), (4, 1000), (5, 100_000)]))
            .unwrap();
        assert_eq!(picked(&unit), (3, 1));
        assert!(unit.is_useful());
        assert!(
            s.pick_forcing_level0_up(5, &runs(&[(4, 1), (5, 1)]))
                .is_none()
        );
        let unit = s
            .pick_forcing_level0_up(5, &runs(&[(0, 1), (0, 1)]))
            .unwrap();
        assert_eq!(picked(&unit), (5, 2));
    }

    #[test]
    fn huge_sizes_do_not_overflow() {
        assert_eq!(
            pick(2, &[(0, i64::MAX), (0, i64::MAX), (5, 1)]),
            Some((5, 3))
        );
        assert!(pick(2, &[(0, -5), (5, -1)]).is_some());
    }
}
