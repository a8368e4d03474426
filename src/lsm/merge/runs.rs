//! Merging sorted runs (a level-0 file, or a level's files read one after the other) into
//! one row per key, streaming: Paimon's k-way merge (`SortMergeReader`) followed by the
//! engine's fold of each key's versions.
//!
//! Why not read every file and sort: a compaction or scan of a large bucket would hold
//! every version of every key at once (and a sorted copy), so memory grew with the
//! bucket. A sorted run holds each key once, in key order, so a merge needs only the
//! next row of each run: it holds one decoded batch per run and one key's versions.
//!
//! The result equals [`super::sort_and_fold`] of the runs concatenated in order: versions
//! of one key are folded in (sequence order, run order), as the stable sort orders them.
//! A run that goes backwards (a key, or a key's versions, out of order) is an error: the
//! merge of such a run would silently differ from the sort.

use std::cmp::Ordering;

use super::{MergeEngine, SequenceOrder, key_order};
use crate::error::{Error, Result};
use crate::table::data_file::KeyValue;

/// Rows of sorted runs, merged to one row per key (retractions included), in key order.
pub(crate) struct MergedRuns<I> {
    runs: Vec<I>,
    /// Each run's next row; `None` once the run ended.
    heads: Vec<Option<KeyValue>>,
    /// The runs that have a head, as a binary min-heap by [`Self::compare`].
    heap: Vec<usize>,
    key_indices: Vec<usize>,
    order: SequenceOrder,
    engine: MergeEngine,
    /// One key's versions, reused from key to key.
    versions: Vec<KeyValue>,
    /// The runs' first rows were read.
    started: bool,
    /// An error was returned: the merge is over.
    failed: bool,
}

impl<I: Iterator<Item = Result<KeyValue>>> MergedRuns<I> {
    /// A merge of `runs`; nothing is read until the first row is asked for.
    pub(crate) fn new(
        runs: Vec<I>,
        key_indices: Vec<usize>,
        order: SequenceOrder,
        engine: MergeEngine,
    ) -> Self {
        MergedRuns {
            heads: Vec::with_capacity(runs.len()),
            heap: Vec::with_capacity(runs.len()),
            runs,
            key_indices,
            order,
            engine,
            versions: Vec::new(),
            started: false,
            failed: false,
        }
    }

    /// Reads the first row of every run.
    fn start(&mut self) -> Result<()> {
        self.started = true;
        for run in &mut self.runs {
            self.heads.push(run.next().transpose()?);
        }
        for i in 0..self.runs.len() {
            if self.heads.get(i).is_some_and(Option::is_some) {
                self.heap.push(i);
                self.sift_up(self.heap.len() - 1);
            }
        }
        Ok(())
    }

    /// Order of the heads of runs `a` and `b`: key, then sequence order, then run.
    fn compare(&self, a: usize, b: usize) -> Ordering {
        match (self.head(a), self.head(b)) {
            (Some(x), Some(y)) => key_order(x, y, &self.key_indices)
                .then_with(|| self.order.compare(x, y))
                .then_with(|| a.cmp(&b)),
            _ => a.cmp(&b),
        }
    }

    fn head(&self, run: usize) -> Option<&KeyValue> {
        self.heads.get(run).and_then(Option::as_ref)
    }

    /// Takes the smallest head and moves its run on.
    fn pop(&mut self) -> Result<Option<KeyValue>> {
        let Some(&run) = self.heap.first() else {
            return Ok(None);
        };
        let Some(taken) = self.heads.get_mut(run).and_then(Option::take) else {
            return Ok(None);
        };
        let next = match self.runs.get_mut(run) {
            Some(r) => r.next().transpose()?,
            None => None,
        };
        if let Some(next) = &next {
            let backwards = key_order(next, &taken, &self.key_indices)
                .then_with(|| self.order.compare(next, &taken))
                == Ordering::Less;
            if backwards {
                return Err(Error::format(format!(
                    "sorted run {run} of a merge is not sorted by primary key and sequence \
                     (a data file out of order)"
                )));
            }
        }
        match next {
            Some(next) => {
                if let Some(slot) = self.heads.get_mut(run) {
                    *slot = Some(next);
                }
            }
            None => {
                let last = self.heap.len() - 1;
                self.heap.swap(0, last);
                self.heap.pop();
            }
        }
        if !self.heap.is_empty() {
            self.sift_down(0);
        }
        Ok(Some(taken))
    }

    /// The next key's versions, folded; `None` when every run ended.
    fn next_row(&mut self) -> Result<Option<KeyValue>> {
        if !self.started {
            self.start()?;
        }
        loop {
            let Some(first) = self.pop()? else {
                return Ok(None);
            };
            self.versions.clear();
            self.versions.push(first);
            while let Some(&run) = self.heap.first() {
                let same_key = match (self.head(run), self.versions.first()) {
                    (Some(head), Some(first)) => {
                        key_order(head, first, &self.key_indices) == Ordering::Equal
                    }
                    _ => false,
                };
                if !same_key {
                    break;
                }
                if let Some(version) = self.pop()? {
                    self.versions.push(version);
                }
            }
            if let Some(row) = self.engine.reduce_owned(&mut self.versions)? {
                return Ok(Some(row));
            }
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.compare(self.heap[i], self.heap[parent]) != Ordering::Less {
                break;
            }
            self.heap.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let mut smallest = i;
            for child in [2 * i + 1, 2 * i + 2] {
                if child < self.heap.len()
                    && self.compare(self.heap[child], self.heap[smallest]) == Ordering::Less
                {
                    smallest = child;
                }
            }
            if smallest == i {
                break;
            }
            self.heap.swap(i, smallest);
            i = smallest;
        }
    }
}

impl<I: Iterator<Item = Result<KeyValue>>> Iterator for MergedRuns<I> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Result<KeyValue>> {
        if self.failed {
            return None;
        }
        let next = self.next_row();
        if next.is_err() {
            self.failed = true;
        }
        next.transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsm::merge::sort_and_fold;
    use crate::lsm::merge::tests::try_engine;
    use crate::table::datum::Datum;
    use crate::table::row_kind::RowKind;
    use crate::table::types::DataType;

    /// k (key), v, seq (the `sequence.field` of some engines).
    fn columns() -> Vec<(&'static str, DataType, bool)> {
        vec![
            ("k", DataType::Int, false),
            ("v", DataType::Int, true),
            ("seq", DataType::Int, true),
        ]
    }

    /// Engines whose folds depend on the order of versions.
    fn engines() -> Vec<Vec<(&'static str, &'static str)>> {
        vec![
            vec![],
            vec![("sequence.field", "seq")],
            vec![("merge-engine", "first-row")],
            vec![("merge-engine", "partial-update")],
            vec![
                ("merge-engine", "aggregation"),
                ("fields.v.aggregate-function", "sum"),
            ],
            vec![
                ("merge-engine", "partial-update"),
                ("sequence.field", "seq"),
            ],
        ]
    }

    fn ok_runs(runs: &[Vec<KeyValue>]) -> Vec<std::vec::IntoIter<Result<KeyValue>>> {
        runs.iter()
            .map(|r| r.iter().cloned().map(Ok).collect::<Vec<_>>().into_iter())
            .collect()
    }

    proptest::proptest! {
        /// Merging runs equals sorting them all and folding: same rows, same order, for
        /// every engine; including retractions, equal sequence numbers across runs and
        /// null `sequence.field` values.
        #[test]
        fn merging_sorted_runs_equals_sorting_and_folding(
            engine in 0..6usize,
            runs in proptest::collection::vec(
                proptest::collection::btree_map(
                    0..40i32,
                    (0..8i64, proptest::option::of(-5..5i32), proptest::option::of(0..4i32), 0..4u8),
                    0..30,
                ),
                0..6,
            ),
        ) {
            let options = &engines()[engine];
            let Ok((engine, order)) = try_engine(&columns(), &["k"], options) else {
                return Err(proptest::test_runner::TestCaseError::fail("engine"));
            };
            let runs: Vec<Vec<KeyValue>> = runs
                .into_iter()
                .map(|run| {
                    run.into_iter()
                        .map(|(k, (seq, v, s, kind))| KeyValue {
                            sequence_number: seq,
                            kind: RowKind::from_byte(kind as i8).unwrap_or(RowKind::Insert),
                            row: vec![
                                Datum::Int(k),
                                v.map_or(Datum::Null, Datum::Int),
                                s.map_or(Datum::Null, Datum::Int),
                            ],
                        })
                        .collect()
                })
                .collect();
            let sorted = sort_and_fold(runs.concat(), &[0], &order, &engine);
            let merged: Result<Vec<KeyValue>> =
                MergedRuns::new(ok_runs(&runs), vec![0], order, engine).collect();
            match (sorted, merged) {
                (Ok(sorted), Ok(merged)) => proptest::prop_assert_eq!(sorted, merged),
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string()),
                (a, b) => proptest::prop_assert!(false, "sorted {a:?}, merged {b:?}"),
            }
        }
    }

    #[test]
    fn a_run_out_of_key_order_is_an_error_not_a_wrong_merge() {
        let (engine, order) = try_engine(&columns(), &["k"], &[]).unwrap();
        let kv = |k: i32| KeyValue {
            sequence_number: 0,
            kind: RowKind::Insert,
            row: vec![Datum::Int(k), Datum::Null, Datum::Null],
        };
        let runs = vec![vec![kv(1), kv(3), kv(2)], vec![kv(2)]];
        let merged: Result<Vec<KeyValue>> =
            MergedRuns::new(ok_runs(&runs), vec![0], order, engine).collect();
        let err = merged.unwrap_err().to_string();
        assert!(err.contains("not sorted by primary key"), "{err}");
    }

    #[test]
    fn a_run_error_ends_the_merge_with_that_error() {
        let (engine, order) = try_engine(&columns(), &["k"], &[]).unwrap();
        let kv = |k: i32| KeyValue {
            sequence_number: 0,
            kind: RowKind::Insert,
            row: vec![Datum::Int(k), Datum::Null, Datum::Null],
        };
        let runs = vec![
            vec![Ok(kv(1)), Err(Error::format("broken file")), Ok(kv(5))].into_iter(),
            vec![Ok(kv(2))].into_iter(),
        ];
        let mut merge = MergedRuns::new(runs, vec![0], order, engine);
        // The error comes once, in place of a row, and nothing follows it.
        let first = merge.next();
        assert!(
            matches!(&first, Some(Err(e)) if e.to_string().contains("broken file")),
            "{first:?}"
        );
        assert!(merge.next().is_none());
    }
}
