//! A shard's primary index of the `full` cache: arena offsets by key fingerprint.

use super::table_hash;

/// Slot of a free [`RowTable`] entry: offset `u32::MAX` is never a record's start.
const EMPTY: u64 = u64::MAX;

/// A shard's primary index: open addressing with linear probing over 8-byte slots
/// `fingerprint << 32 | arena offset`. Chosen over a SwissTable (whose control bytes and
/// slots are separate cache lines) because a hit then costs one cache miss in the table
/// and one in the arena, and because the fingerprint in the slot rules out almost every
/// non-matching row without reading it, and lets the table grow, shrink and delete
/// (backward shift, no tombstones) without touching the arena.
#[derive(Default)]
pub(super) struct RowTable {
    /// A power of two in length (or empty), at most 7/8 full.
    slots: Vec<u64>,
    len: usize,
}

impl RowTable {
    /// A table for `rows` rows: the smallest power of two (at least 16) that holds them
    /// at a load of at most 7/8.
    pub(super) fn with_room_for(rows: usize) -> Self {
        let mut capacity = 16usize;
        while capacity / 8 * 7 < rows {
            capacity *= 2;
        }
        RowTable {
            slots: vec![EMPTY; capacity],
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<u64>()
    }

    /// Bucket a fingerprint probes first (the top bits of [`table_hash`]; the shard took
    /// the fingerprint's own top bits).
    pub(super) fn home(&self, fingerprint: u32) -> usize {
        (table_hash(fingerprint) >> 32) as usize & self.slots.len().wrapping_sub(1)
    }

    /// The slot a fingerprint probes first (read to bring its cache line in early).
    pub(super) fn home_slot(&self, fingerprint: u32) -> Option<u64> {
        self.slots.get(self.home(fingerprint)).copied()
    }

    /// (slot index, offset) of every row with this fingerprint.
    pub(super) fn matching(&self, fingerprint: u32) -> impl Iterator<Item = (usize, u32)> + '_ {
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = self.home(fingerprint);
        let mut left = self.slots.len();
        std::iter::from_fn(move || {
            while left > 0 {
                left -= 1;
                let slot = *self.slots.get(i)?;
                let at = i;
                i = (i + 1) & mask;
                if slot == EMPTY {
                    left = 0;
                } else if (slot >> 32) as u32 == fingerprint {
                    return Some((at, slot as u32));
                }
            }
            None
        })
    }

    /// Slot index of the row with this fingerprint whose offset satisfies `eq`.
    pub(super) fn find(&self, fingerprint: u32, mut eq: impl FnMut(u32) -> bool) -> Option<usize> {
        self.matching(fingerprint)
            .find(|&(_, at)| eq(at))
            .map(|(i, _)| i)
    }

    pub(super) fn offset(&self, index: usize) -> Option<u32> {
        self.slots
            .get(index)
            .filter(|&&slot| slot != EMPTY)
            .map(|&slot| slot as u32)
    }

    pub(super) fn set_offset(&mut self, index: usize, offset: u32) {
        if let Some(slot) = self.slots.get_mut(index).filter(|s| **s != EMPTY) {
            *slot = (*slot & !0xFFFF_FFFF) | u64::from(offset);
        }
    }

    /// (fingerprint, offset) of every row.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.slots
            .iter()
            .filter(|&&slot| slot != EMPTY)
            .map(|&slot| ((slot >> 32) as u32, slot as u32))
    }

    /// Adds a row (its key must not be in the table yet), doubling the table when full.
    pub(super) fn insert(&mut self, fingerprint: u32, offset: u32) {
        if (self.len + 1) * 8 > self.slots.len() * 7 {
            let mut bigger = RowTable::with_room_for(self.len + 1);
            for (fp, at) in self.iter() {
                bigger.put(fp, at);
            }
            *self = bigger;
        }
        self.put(fingerprint, offset);
    }

    /// Writes into the first free slot from the home bucket; the table has room.
    pub(super) fn put(&mut self, fingerprint: u32, offset: u32) {
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = self.home(fingerprint);
        for _ in 0..self.slots.len() {
            if let Some(slot) = self.slots.get_mut(i)
                && *slot == EMPTY
            {
                *slot = (u64::from(fingerprint) << 32) | u64::from(offset);
                self.len += 1;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Empties slot `index`, shifting later entries of its probe run back so lookups
    /// need no tombstones; shrinks the table when it is mostly empty.
    pub(super) fn remove_at(&mut self, index: usize) {
        let mask = self.slots.len().wrapping_sub(1);
        if self.offset(index).is_none() {
            return;
        }
        let mut hole = index;
        let mut j = (index + 1) & mask;
        for _ in 0..self.slots.len() {
            let slot = self.slots.get(j).copied().unwrap_or(EMPTY);
            if slot == EMPTY {
                break;
            }
            let home = self.home((slot >> 32) as u32);
            // The entry at `j` may move back to `hole` when `hole` is not before its home
            // (cyclically): its distance from home exceeds the hole's distance to `j`.
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                if let Some(h) = self.slots.get_mut(hole) {
                    *h = slot;
                }
                hole = j;
            }
            j = (j + 1) & mask;
        }
        if let Some(h) = self.slots.get_mut(hole) {
            *h = EMPTY;
        }
        self.len -= 1;
        if self.slots.len() > 16 && self.len * 8 < self.slots.len() {
            let mut smaller = RowTable::with_room_for(self.len * 2);
            for (fp, at) in self.iter() {
                smaller.put(fp, at);
            }
            *self = smaller;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn row_table_probes_wraps_and_deletes_without_tombstones() {
        let mut table = RowTable::default();
        assert_eq!(table.find(7, |_| true), None);
        // Fingerprints sharing a home bucket (same value) and neighbours, enough to grow
        // the table several times and to wrap around its end.
        let mut model = BTreeMap::new();
        for i in 0..200u32 {
            let fp = if i % 3 == 0 {
                42
            } else {
                i.wrapping_mul(0x9E37_79B9)
            };
            table.insert(fp, i);
            model.insert(i, fp);
        }
        assert_eq!(table.len(), 200);
        let check = |table: &RowTable, model: &BTreeMap<u32, u32>| {
            assert_eq!(table.len(), model.len());
            assert_eq!(table.iter().count(), model.len());
            for (&at, &fp) in model {
                let i = table.find(fp, |o| o == at).expect("present");
                assert_eq!(table.offset(i), Some(at));
            }
            let same_home: Vec<u32> = table.matching(42).map(|(_, at)| at).collect();
            assert_eq!(
                same_home.len(),
                model.values().filter(|&&fp| fp == 42).count()
            );
        };
        check(&table, &model);
        for i in (0..200u32).filter(|i| i % 2 == 0 || i % 7 == 0) {
            let fp = model.remove(&i).unwrap();
            let index = table.find(fp, |o| o == i).unwrap();
            table.remove_at(index);
            assert_eq!(table.find(fp, |o| o == i), None);
            check(&table, &model);
        }
        let fp = model.remove(&1).unwrap();
        let index = table.find(fp, |o| o == 1).unwrap();
        table.set_offset(index, 1000);
        assert_eq!(table.find(fp, |o| o == 1000), Some(index));
        model.insert(1000, fp);
        check(&table, &model);
        // Mostly empty tables shrink.
        let big = table.slots.len();
        for (at, fp) in std::mem::take(&mut model) {
            let index = table.find(fp, |o| o == at).unwrap();
            table.remove_at(index);
        }
        assert_eq!(table.len(), 0);
        assert!(table.slots.len() < big, "{} slots", table.slots.len());
        table.remove_at(0); // empty slot: no-op
        assert_eq!(table.len(), 0);
    }
}
