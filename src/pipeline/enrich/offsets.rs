//! Which consumed offsets may be committed: only those below the oldest unfinished fact.

use std::collections::{BTreeSet, HashMap};

/// Offsets consumed but not finished (produced and acknowledged, dropped or
/// dead-lettered), per partition. Facts may finish out of order (`ordered = false`,
/// deliveries acknowledged out of order); the committable position of a partition is just
/// before its oldest unfinished offset.
///
/// Keyed by topic, then partition, so that a record's bookkeeping allocates nothing; and
/// positions are handed to the consumer in bulk ([`OffsetTracker::take_moved`]) before a
/// commit, not once per record, which cost a librdkafka call and a partition list each.
#[derive(Debug, Default)]
pub(crate) struct OffsetTracker {
    partitions: HashMap<String, HashMap<i32, PartitionOffsets>>,
}

#[derive(Debug, Default)]
struct PartitionOffsets {
    pending: BTreeSet<i64>,
    /// Highest finished offset.
    finished: Option<i64>,
    /// Lowest offset ever begun: nothing below it is ours to store.
    lowest_begun: Option<i64>,
    /// Last offset handed out for storing.
    stored: Option<i64>,
    /// `stored` moved since the last [`OffsetTracker::take_moved`].
    moved: bool,
}

impl OffsetTracker {
    pub(crate) fn begin(&mut self, topic: &str, partition: i32, offset: i64) {
        let partitions = match self.partitions.get_mut(topic) {
            Some(partitions) => partitions,
            None => self.partitions.entry(topic.to_string()).or_default(),
        };
        let p = partitions.entry(partition).or_default();
        p.pending.insert(offset);
        p.lowest_begun = Some(p.lowest_begun.map_or(offset, |l| l.min(offset)));
    }

    /// Marks an offset finished; returns the offset to store (every offset up to and
    /// including it is finished) when that moved forward.
    pub(crate) fn finish(&mut self, topic: &str, partition: i32, offset: i64) -> Option<i64> {
        let p = self.partitions.get_mut(topic)?.get_mut(&partition)?;
        p.pending.remove(&offset);
        p.finished = p.finished.max(Some(offset));
        let done_through = match p.pending.first() {
            Some(&oldest) => oldest.checked_sub(1).filter(|o| *o >= 0),
            None => p.finished,
        };
        match done_through {
            Some(o) if p.stored.is_none_or(|s| o > s) && p.lowest_begun.is_some_and(|l| o >= l) => {
                p.stored = Some(o);
                p.moved = true;
                Some(o)
            }
            _ => None,
        }
    }

    /// The partitions whose stored offset moved since the last call: (topic, partition,
    /// offset through which every fact is finished).
    pub(crate) fn take_moved(&mut self) -> Vec<(&str, i32, i64)> {
        let mut moved = Vec::new();
        for (topic, partitions) in &mut self.partitions {
            for (&partition, p) in partitions.iter_mut() {
                if let (true, Some(offset)) = (std::mem::take(&mut p.moved), p.stored) {
                    moved.push((topic.as_str(), partition, offset));
                }
            }
        }
        moved
    }

    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.partitions
            .values()
            .flat_map(HashMap::values)
            .map(|p| p.pending.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn offsets_are_stored_only_below_the_oldest_unfinished_fact() {
        let mut t = OffsetTracker::default();
        for o in 10..14 {
            t.begin("facts", 0, o);
        }
        t.begin("facts", 1, 5);
        assert_eq!(t.finish("facts", 0, 11), None, "10 is still in flight");
        assert_eq!(t.finish("facts", 0, 12), None);
        assert_eq!(t.finish("facts", 0, 10), Some(12), "10, 11 and 12 are done");
        assert_eq!(
            t.finish("facts", 1, 5),
            Some(5),
            "partitions are independent"
        );
        assert_eq!(t.finish("facts", 0, 13), Some(13));
        assert_eq!(t.pending(), 0);
        let mut moved = t.take_moved();
        moved.sort();
        assert_eq!(
            moved,
            vec![("facts", 0, 13), ("facts", 1, 5)],
            "the latest of each"
        );
        assert!(t.take_moved().is_empty(), "nothing moved since");
        assert_eq!(
            t.finish("other", 0, 1),
            None,
            "an unknown partition stores nothing"
        );
    }

    proptest! {
        /// Whatever order facts finish in, a stored offset never passes an unfinished
        /// fact, stored offsets only grow, and the last one covers everything.
        #[test]
        fn stored_offsets_never_pass_an_unfinished_fact(order in Just((0..40_i64).collect::<Vec<_>>()).prop_shuffle()) {
            let mut t = OffsetTracker::default();
            for o in 0..40 {
                t.begin("t", 0, o);
            }
            let mut finished = BTreeSet::new();
            let mut last = -1;
            for o in order {
                finished.insert(o);
                if let Some(stored) = t.finish("t", 0, o) {
                    prop_assert!(stored > last);
                    prop_assert!((0..=stored).all(|x| finished.contains(&x)));
                    last = stored;
                }
            }
            prop_assert_eq!(last, 39);
        }
    }
}
