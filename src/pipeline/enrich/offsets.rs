//! Which consumed offsets may be committed: only those below the oldest unfinished fact.

use std::collections::VecDeque;

/// Offsets consumed but not finished (produced and acknowledged, dropped or
/// dead-lettered), per partition. Facts may finish out of order (`ordered = false`,
/// deliveries acknowledged out of order); the committable position of a partition is just
/// before its oldest unfinished offset.
///
/// Bookkeeping is per record, so it is kept cheap: partitions are a short list searched
/// from the one used last (a poll batch comes mostly from one partition), not a hash map
/// that hashes the topic name twice per record; and a partition's offsets are a queue in
/// offset order, as the consumer hands them out, where a fact finished out of order is
/// marked and leaves once it reaches the front (no tree node per record). Positions are
/// handed to the consumer in bulk ([`OffsetTracker::take_moved`]) before a commit, not
/// once per record, which cost a librdkafka call and a partition list each.
#[derive(Debug, Default)]
pub(crate) struct OffsetTracker {
    partitions: Vec<Partition>,
    /// Index in `partitions` of the one used last.
    last: usize,
}

#[derive(Debug)]
struct Partition {
    topic: String,
    partition: i32,
    offsets: PartitionOffsets,
}

#[derive(Debug, Default)]
struct PartitionOffsets {
    /// Offsets begun and not yet done with, ascending, each with whether it finished (a
    /// finished one stays until the offsets before it finish). The front is unfinished.
    pending: VecDeque<(i64, bool)>,
    /// Highest finished offset.
    finished: Option<i64>,
    /// Lowest offset ever begun: nothing below it is ours to store.
    lowest_begun: Option<i64>,
    /// Last offset handed out for storing.
    stored: Option<i64>,
    /// `stored` moved since the last [`OffsetTracker::take_moved`].
    moved: bool,
}

impl PartitionOffsets {
    fn begin(&mut self, offset: i64) {
        match self.pending.back() {
            Some(&(last, _)) if last >= offset => {
                // Consumed again or out of order (a rebalance, a seek back): in its place.
                match self.pending.binary_search_by_key(&offset, |&(o, _)| o) {
                    Ok(at) => {
                        if let Some(entry) = self.pending.get_mut(at) {
                            entry.1 = false;
                        }
                    }
                    Err(at) => self.pending.insert(at, (offset, false)),
                }
            }
            _ => self.pending.push_back((offset, false)),
        }
        self.lowest_begun = Some(self.lowest_begun.map_or(offset, |l| l.min(offset)));
    }

    fn finish(&mut self, offset: i64) {
        let at = match self.pending.front() {
            Some(&(first, _)) if first == offset => Some(0),
            _ => self.pending.binary_search_by_key(&offset, |&(o, _)| o).ok(),
        };
        if let Some(entry) = at.and_then(|at| self.pending.get_mut(at)) {
            entry.1 = true;
        }
        while self.pending.front().is_some_and(|&(_, finished)| finished) {
            self.pending.pop_front();
        }
        self.finished = self.finished.max(Some(offset));
    }
}

impl OffsetTracker {
    /// The offsets of a partition, made on first use.
    fn partition(&mut self, topic: &str, partition: i32) -> &mut PartitionOffsets {
        let found = self.find(topic, partition).unwrap_or_else(|| {
            self.partitions.push(Partition {
                topic: topic.to_string(),
                partition,
                offsets: PartitionOffsets::default(),
            });
            self.partitions.len() - 1
        });
        self.last = found;
        &mut self.partitions[found].offsets
    }

    fn find(&self, topic: &str, partition: i32) -> Option<usize> {
        let is = |p: &Partition| p.partition == partition && p.topic == topic;
        if self.partitions.get(self.last).is_some_and(is) {
            return Some(self.last);
        }
        self.partitions.iter().position(is)
    }

    pub(crate) fn begin(&mut self, topic: &str, partition: i32, offset: i64) {
        self.partition(topic, partition).begin(offset);
    }

    /// Marks an offset finished; returns the offset to store (every offset up to and
    /// including it is finished) when that moved forward.
    pub(crate) fn finish(&mut self, topic: &str, partition: i32, offset: i64) -> Option<i64> {
        let at = self.find(topic, partition)?;
        self.last = at;
        let p = &mut self.partitions.get_mut(at)?.offsets;
        p.finish(offset);
        let done_through = match p.pending.front() {
            Some(&(oldest, _)) => oldest.checked_sub(1).filter(|o| *o >= 0),
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
        for p in &mut self.partitions {
            if let (true, Some(offset)) = (std::mem::take(&mut p.offsets.moved), p.offsets.stored) {
                moved.push((p.topic.as_str(), p.partition, offset));
            }
        }
        moved
    }

    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.partitions
            .iter()
            .flat_map(|p| &p.offsets.pending)
            .filter(|(_, finished)| !finished)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// A partition in the model: pending offsets, highest finished, lowest begun, stored.
    type PartitionModel = (BTreeSet<i64>, Option<i64>, Option<i64>, Option<i64>);

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

        /// Against the plain model (a set of pending offsets per partition) under any
        /// mix of begins, including offsets consumed again or out of order after a
        /// rebalance, and finishes, including of offsets never begun.
        #[test]
        fn matches_a_set_of_pending_offsets(ops in proptest::collection::vec((any::<bool>(), 0..2_i32, 0..24_i64), 0..120)) {
            let mut t = OffsetTracker::default();
            let mut model: [PartitionModel; 2] = Default::default();
            for (is_begin, partition, offset) in ops {
                let m = &mut model[partition as usize];
                if is_begin {
                    t.begin("t", partition, offset);
                    m.0.insert(offset);
                    m.2 = Some(m.2.map_or(offset, |l: i64| l.min(offset)));
                    continue;
                }
                let got = t.finish("t", partition, offset);
                if m.2.is_none() {
                    prop_assert_eq!(got, None);
                    continue;
                }
                m.0.remove(&offset);
                m.1 = m.1.max(Some(offset));
                let through = match m.0.first() {
                    Some(&oldest) => oldest.checked_sub(1).filter(|o| *o >= 0),
                    None => m.1,
                };
                let want = match through {
                    Some(o) if m.3.is_none_or(|s| o > s) && m.2.is_some_and(|l| o >= l) => {
                        m.3 = Some(o);
                        Some(o)
                    }
                    _ => None,
                };
                prop_assert_eq!(got, want);
            }
            prop_assert_eq!(t.pending(), model[0].0.len() + model[1].0.len());
        }
    }
}
