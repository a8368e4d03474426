//! The read side of a `partial` cache: a sharded hash table holding the entries moka
//! holds, so that a hit costs one probe of a flat table instead of moka's concurrent-map
//! walk plus its access log (together about half of a hit's time in a profile).
//!
//! moka stays the policy. It admits and evicts, and its eviction listener removes the
//! evicted entry here. Each entry is tagged with the generation of the insert that made
//! it, and a removal names a generation, so a late notice about an older value never
//! removes a newer one. A front entry reports its reads to moka at most once per
//! `touch_interval`, which keeps moka's recency (and its idle expiry) that precise.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hashbrown::HashTable;

use super::CacheKey;
use crate::lookup::ProjectedRow;

/// Shards of the table: enough that a refresh invalidating keys seldom meets a reader.
const SHARDS: usize = 32;

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// The shard of a hash: bits the table itself does not use for its slot index (low
/// bits) or its control byte (top seven).
fn shard_index(hash: u64) -> usize {
    (hash >> 40) as usize % SHARDS
}

/// One cached key. Times are milliseconds since the cache was made.
struct FrontEntry {
    key: CacheKey,
    row: Option<ProjectedRow>,
    generation: u64,
    inserted_ms: u64,
    accessed_ms: AtomicU64,
    /// When moka last heard of a read of this entry.
    touched_ms: AtomicU64,
}

/// When entries expire, and how often moka hears of reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrontTimes {
    pub(crate) expire_after_write_ms: Option<u64>,
    pub(crate) expire_after_access_ms: Option<u64>,
    pub(crate) touch_interval_ms: u64,
}

/// A front hit: the cached row (`None`: a remembered miss) and whether moka must now
/// hear of the read.
pub(crate) struct FrontHit {
    pub(crate) row: Option<ProjectedRow>,
    pub(crate) touch: bool,
}

/// The front read-locked whole: a batch's hits are read in place, with no lock or
/// reference count taken per key (each is an atomic read-modify-write, which also keeps
/// the next key's memory reads from starting early).
pub(crate) struct FrontRead<'a> {
    front: &'a Front,
    shards: Vec<RwLockReadGuard<'a, HashTable<FrontEntry>>>,
}

impl FrontRead<'_> {
    /// `Some((row, touch))` for a live entry, as [`Front::get`], the row borrowed.
    pub(crate) fn get(&self, key: &[u8], now_ms: u64) -> Option<(Option<&ProjectedRow>, bool)> {
        let hash = self.front.hash(key);
        let shard = self.shards.get(shard_index(hash))?;
        self.front.live(shard, hash, key, now_ms)
    }
}

pub(crate) struct Front {
    shards: Box<[RwLock<HashTable<FrontEntry>>]>,
    hasher: foldhash::fast::RandomState,
    times: FrontTimes,
}

impl Front {
    pub(crate) fn new(times: FrontTimes) -> Self {
        Front {
            shards: (0..SHARDS).map(|_| RwLock::new(HashTable::new())).collect(),
            hasher: foldhash::fast::RandomState::default(),
            times,
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(key)
    }

    fn shard(&self, hash: u64) -> &RwLock<HashTable<FrontEntry>> {
        &self.shards[shard_index(hash)]
    }

    /// The live entry of `key` at `now_ms`; an expired entry is a miss (the insert that
    /// follows the miss replaces it, and moka's expiry removes it otherwise).
    pub(crate) fn get(&self, key: &[u8], now_ms: u64) -> Option<FrontHit> {
        let hash = self.hash(key);
        let shard = read(self.shard(hash));
        let (row, touch) = self.live(&shard, hash, key, now_ms)?;
        Some(FrontHit {
            row: row.cloned(),
            touch,
        })
    }

    /// Every shard read-locked, for probing a batch of keys (in shard order, as every
    /// batch takes them: no lock-order cycles; writers take one shard at a time).
    pub(crate) fn read_all(&self) -> FrontRead<'_> {
        FrontRead {
            front: self,
            shards: self.shards.iter().map(read).collect(),
        }
    }

    /// The row of `key`'s live entry in `shard` and whether moka must now hear of the
    /// read; records the read.
    fn live<'s>(
        &self,
        shard: &'s HashTable<FrontEntry>,
        hash: u64,
        key: &[u8],
        now_ms: u64,
    ) -> Option<(Option<&'s ProjectedRow>, bool)> {
        let entry = shard.find(hash, |e| e.key.as_bytes() == key)?;
        if let Some(ttl) = self.times.expire_after_write_ms
            && now_ms.saturating_sub(entry.inserted_ms) >= ttl
        {
            return None;
        }
        if let Some(tti) = self.times.expire_after_access_ms {
            if now_ms.saturating_sub(entry.accessed_ms.load(Ordering::Relaxed)) >= tti {
                return None;
            }
            entry.accessed_ms.store(now_ms, Ordering::Relaxed);
        }
        let touch = now_ms.saturating_sub(entry.touched_ms.load(Ordering::Relaxed))
            >= self.times.touch_interval_ms;
        if touch {
            entry.touched_ms.store(now_ms, Ordering::Relaxed);
        }
        Some((entry.row.as_ref(), touch))
    }

    /// Adds or replaces the entry of `key`.
    pub(crate) fn insert(
        &self,
        key: CacheKey,
        row: Option<ProjectedRow>,
        generation: u64,
        now_ms: u64,
    ) {
        let hash = self.hash(key.as_bytes());
        let entry = FrontEntry {
            key,
            row,
            generation,
            inserted_ms: now_ms,
            accessed_ms: AtomicU64::new(now_ms),
            touched_ms: AtomicU64::new(now_ms),
        };
        let mut shard = write(self.shard(hash));
        match shard.find_mut(hash, |e| e.key == entry.key) {
            Some(slot) => *slot = entry,
            None => {
                shard.insert_unique(hash, entry, |e| self.hash(e.key.as_bytes()));
            }
        }
    }

    /// Removes the entry of `key`, or only the one made by `generation` when given.
    pub(crate) fn remove(&self, key: &[u8], generation: Option<u64>) {
        let hash = self.hash(key);
        let mut shard = write(self.shard(hash));
        if let Ok(found) = shard.find_entry(hash, |e| {
            e.key.as_bytes() == key && generation.is_none_or(|g| g == e.generation)
        }) {
            found.remove();
        }
    }

    pub(crate) fn clear(&self) {
        for shard in self.shards.iter() {
            *write(shard) = HashTable::new();
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| read(s).len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::Datum;
    use crate::table::types::DataType;

    fn times() -> FrontTimes {
        FrontTimes {
            expire_after_write_ms: None,
            expire_after_access_ms: None,
            touch_interval_ms: 1_000,
        }
    }

    fn row(v: i32) -> Option<ProjectedRow> {
        Some(ProjectedRow::of(vec![Datum::Int(v)], &[DataType::Int]))
    }

    #[test]
    fn a_removal_of_an_older_generation_keeps_the_newer_entry() {
        let front = Front::new(times());
        front.insert(CacheKey::new(b"k"), row(1), 1, 0);
        front.insert(CacheKey::new(b"k"), row(2), 2, 0);
        front.remove(b"k", Some(1));
        assert_eq!(front.get(b"k", 0).map(|h| h.row), Some(row(2)));
        front.remove(b"k", Some(2));
        assert!(front.get(b"k", 0).is_none());
        assert_eq!(front.len(), 0);
    }

    #[test]
    fn reads_reach_moka_once_per_interval() {
        let front = Front::new(times());
        front.insert(CacheKey::new(b"k"), None, 1, 0);
        let touches: Vec<bool> = [10, 999, 1_000, 1_500, 2_000, 2_001]
            .iter()
            .map(|&now| front.get(b"k", now).map(|h| h.touch))
            .collect::<Option<_>>()
            .expect("hits");
        assert_eq!(touches, [false, false, true, false, true, false]);
    }

    #[test]
    fn expired_entries_are_misses() {
        let front = Front::new(FrontTimes {
            expire_after_write_ms: Some(100),
            expire_after_access_ms: Some(30),
            touch_interval_ms: 10,
        });
        front.insert(CacheKey::new(b"k"), row(1), 1, 0);
        // Read every 20 ms: idle expiry never comes, write expiry does.
        for now in [20, 40, 60, 80] {
            assert!(front.get(b"k", now).is_some(), "at {now} ms");
        }
        assert!(front.get(b"k", 100).is_none(), "written 100 ms ago");
        front.insert(CacheKey::new(b"k"), row(1), 2, 100);
        assert!(front.get(b"k", 129).is_some());
        assert!(front.get(b"k", 160).is_none(), "idle for 31 ms");
    }

    #[test]
    fn many_keys_spread_over_shards_and_clear() {
        let front = Front::new(times());
        for i in 0..10_000_u32 {
            front.insert(
                CacheKey::new(&i.to_be_bytes()),
                row(i as i32),
                u64::from(i),
                0,
            );
        }
        assert_eq!(front.len(), 10_000);
        assert!(front.shards.iter().all(|s| read(s).len() > 100));
        for i in (0..10_000_u32).step_by(7) {
            assert_eq!(
                front.get(&i.to_be_bytes(), 0).map(|h| h.row),
                Some(row(i as i32))
            );
        }
        front.clear();
        assert_eq!(front.len(), 0);
    }
}
