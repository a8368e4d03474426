//! The `partial` strategy: an LRU of recently looked-up keys (misses included), invalidated
//! key by key from each refresh's changed rows.

mod front;

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use moka::sync::Cache;

use front::{Front, FrontTimes};

use super::{ProjectedRow, RowFields};
use crate::error::Result;

/// Settings of a partial cache.
#[derive(Debug, Clone)]
pub struct PartialOptions {
    pub max_rows: u64,
    /// Bounds the cache by estimated bytes instead of rows.
    pub max_bytes: Option<u64>,
    pub expire_after_write: Option<Duration>,
    pub expire_after_access: Option<Duration>,
    pub cache_missing_keys: bool,
}

/// Longest key kept inline: a one- or two-column key's BinaryRow is 16–24 bytes.
const INLINE_KEY: usize = 30;

/// A cache key: the primary key's BinaryRow bytes, inline when short, so comparing a
/// probe with an entry reads the entry's own memory instead of one more allocation (a
/// likely cache miss on every hit).
#[derive(Clone)]
pub(crate) enum CacheKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl CacheKey {
    pub(crate) fn new(key: &[u8]) -> Self {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE_KEY => {
                let mut bytes = [0; INLINE_KEY];
                bytes[..key.len()].copy_from_slice(key);
                CacheKey::Inline { len, bytes }
            }
            _ => CacheKey::Heap(key.into()),
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            CacheKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            CacheKey::Heap(bytes) => bytes,
        }
    }
}

// Hash and equality are those of the bytes, so lookups can borrow a `[u8]` probe.
impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for CacheKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for CacheKey {}

impl Borrow<[u8]> for CacheKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// What bounds a cache.
#[derive(Debug, Clone, Copy)]
enum Bound {
    Rows(u64),
    Bytes(u64),
}

/// What moka holds per key: the generation of the insert that made it, which the front
/// uses to tell a notice about an old value from one about the current value, and the
/// entry's weight for a byte bound. Not the row: only the front reads it, and moka's
/// value is stored in every entry (with the row, this value was 40 bytes, now 16: 24 of
/// an entry's ~510, `cargo bench --bench lookup`).
#[derive(Clone, Copy)]
struct Stored {
    generation: u64,
    weight: u32,
}

/// An entry's estimated bytes, for `cache_max_bytes`.
fn weight(key: &[u8], row: Option<&ProjectedRow>) -> u32 {
    let bytes = key.len() + row.map_or(0, ProjectedRow::len) + ENTRY_OVERHEAD;
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

/// Serialized primary key → projected row (`None`: the table has no such key).
///
/// Hits are answered by `Front`; moka decides what stays (see `front.rs`).
pub(crate) struct PartialCache {
    front: Arc<Front>,
    /// foldhash instead of moka's default SipHash: keys are short and hashed on every
    /// miss; the per-cache random seed keeps the fact stream from choosing collisions.
    cache: Cache<CacheKey, Stored, foldhash::fast::RandomState>,
    next_generation: AtomicU64,
    started: Instant,
    cache_missing_keys: bool,
    /// moka expires entries idle for `expire_after_access`: it must hear of every read.
    idle_expiry: bool,
    /// The bound moka evicts at, in entries or (with `cache_max_bytes`) bytes.
    bound: Bound,
    /// Orders "insert what was read at snapshot S" against "invalidate what changed after
    /// S": a refresh holds it exclusively while it invalidates, a lookup shares it while
    /// it checks that its snapshot is still current and inserts. Without it a lookup that
    /// read the old snapshot could insert its stale row right after the invalidation.
    epoch: RwLock<()>,
}

/// How often at most moka hears of the reads of one entry: a quarter of the idle expiry,
/// so that moka never idles out an entry that is being read (it may expire one idle for
/// 3/4 of `expire_after_access` or more), and otherwise every 5 s. moka's LRU order is
/// then exact to 5 s, which is all an eviction order needs; telling it of reads once a
/// second cost a moka lookup on most hits when keys come round every few seconds (a
/// sixth of a `partial` join's CPU in a profile).
fn touch_interval(expire_after_access: Option<Duration>) -> Duration {
    let most = Duration::from_secs(5);
    expire_after_access.map_or(most, |tti| (tti / 4).min(most))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl PartialCache {
    pub(crate) fn new(options: &PartialOptions) -> Self {
        let front = Arc::new(Front::new(FrontTimes {
            expire_after_write_ms: options.expire_after_write.map(millis),
            expire_after_access_ms: options.expire_after_access.map(millis),
            touch_interval_ms: millis(touch_interval(options.expire_after_access)),
        }));
        let mut builder = Cache::builder();
        builder = match options.max_bytes {
            Some(bytes) => builder
                .weigher(|_: &CacheKey, stored: &Stored| stored.weight)
                .max_capacity(bytes),
            None => builder.max_capacity(options.max_rows),
        };
        if let Some(ttl) = options.expire_after_write {
            builder = builder.time_to_live(ttl);
        }
        if let Some(tti) = options.expire_after_access {
            builder = builder.time_to_idle(tti);
        }
        let evicted_from = front.clone();
        builder = builder.eviction_listener(move |key: Arc<CacheKey>, stored: Stored, _cause| {
            evicted_from.remove(key.as_bytes(), Some(stored.generation));
        });
        PartialCache {
            front,
            cache: builder.build_with_hasher(foldhash::fast::RandomState::default()),
            next_generation: AtomicU64::new(0),
            started: Instant::now(),
            cache_missing_keys: options.cache_missing_keys,
            idle_expiry: options.expire_after_access.is_some(),
            bound: match options.max_bytes {
                Some(bytes) => Bound::Bytes(bytes),
                None => Bound::Rows(options.max_rows),
            },
            epoch: RwLock::new(()),
        }
    }

    /// The cache's clock, for [`PartialCache::get_at`].
    pub(crate) fn now_ms(&self) -> u64 {
        millis(self.started.elapsed())
    }

    /// `Some(cached)` on a hit (`cached` is `None` for a remembered miss).
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<ProjectedRow>> {
        self.get_at(key, self.now_ms())
    }

    /// [`PartialCache::get`] at a time read once for a whole batch of keys.
    pub(crate) fn get_at(&self, key: &[u8], now_ms: u64) -> Option<Option<ProjectedRow>> {
        let hit = self.front.get(key, now_ms)?;
        if hit.touch && self.reads_matter() && !self.touch(key) {
            return None;
        }
        Some(hit.row)
    }

    /// Whether moka must now hear of reads: for its idle expiry, or, once the cache is
    /// three quarters full, for its eviction order. Below that nothing is evicted and the
    /// order decides nothing; telling moka of reads anyway (a moka lookup each, and its
    /// read log) was a twentieth of a `partial` join's CPU in a profile, with every key
    /// cached and the cache a seventh full. Past the mark, each entry's next read (at
    /// most `touch_interval` later) brings moka's order up to date.
    fn reads_matter(&self) -> bool {
        let (used, bound) = match self.bound {
            Bound::Rows(rows) => (self.cache.entry_count(), rows),
            Bound::Bytes(bytes) => (self.cache.weighted_size(), bytes),
        };
        self.idle_expiry || used >= bound / 4 * 3
    }

    /// Tells moka of a read of `key`; `false` if moka had let the entry go (idle expiry
    /// by its older view of the reads), and so the front now does too. Never called
    /// under the front's locks: moka may run its housekeeping here, whose eviction
    /// listener locks the front.
    fn touch(&self, key: &[u8]) -> bool {
        let kept = self.cache.get(key).is_some();
        if !kept {
            self.front.remove(key, None);
        }
        kept
    }

    /// Hands the row of each of `keys` to `visit`, in order (`None`: no key, or no row):
    /// a key with `Some` in `looked_up` (read from the table's files) that one, any other
    /// its cached row, read in place under the front's read locks. If a key is neither
    /// cached nor looked up, nothing is visited and the misses' indexes are returned, to
    /// be looked up and passed again; an empty list means every key was visited.
    ///
    /// A hit that moka is told of here is visited even if moka has just let it go (its
    /// idle expiry runs on an older view of the reads than the front's own); the front
    /// drops it afterwards, as for [`PartialCache::get_at`].
    pub(crate) fn visit_many(
        &self,
        keys: &[Option<&[u8]>],
        looked_up: &[Option<Option<ProjectedRow>>],
        now_ms: u64,
        visit: &mut impl FnMut(Option<RowFields<'_>>) -> Result<()>,
    ) -> Result<Vec<usize>> {
        let mut touched = Vec::new();
        let visited = {
            let front = self.front.read_all();
            let mut rows: Vec<Option<&ProjectedRow>> = Vec::with_capacity(keys.len());
            let mut misses = Vec::new();
            for (i, key) in keys.iter().enumerate() {
                let row = match (key, looked_up.get(i)) {
                    (_, Some(Some(read))) => read.as_ref(),
                    (None, _) => None,
                    (Some(key), _) => match front.get(key, now_ms) {
                        Some((row, touch)) => {
                            if touch {
                                touched.push(*key);
                            }
                            row
                        }
                        None => {
                            misses.push(i);
                            None
                        }
                    },
                };
                rows.push(row);
            }
            if misses.is_empty() {
                rows.iter().flatten().for_each(|row| row.prefetch());
                rows.into_iter()
                    .try_for_each(|row| visit(row.map(ProjectedRow::fields)))
                    .map(|()| misses)
            } else {
                Ok(misses)
            }
        };
        if !touched.is_empty() && self.reads_matter() {
            for key in touched {
                self.touch(key);
            }
        }
        visited
    }

    /// Caches what a lookup read at `read_snapshot`, unless the table moved on since
    /// (`current_snapshot` is asked under the epoch lock).
    pub(crate) fn insert(
        &self,
        key: &[u8],
        row: Option<ProjectedRow>,
        read_snapshot: Option<i64>,
        current_snapshot: impl FnOnce() -> Option<i64>,
    ) {
        if row.is_none() && !self.cache_missing_keys {
            return;
        }
        let _shared = self.epoch.read().unwrap_or_else(|p| p.into_inner());
        if current_snapshot() == read_snapshot {
            let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
            let weight = weight(key, row.as_ref());
            let key = CacheKey::new(key);
            // The front first: if moka turns the entry away at once, its listener then
            // finds the entry to remove.
            self.front
                .insert(key.clone(), row, generation, self.now_ms());
            self.cache.insert(key, Stored { generation, weight });
        }
    }

    pub(crate) fn invalidate<'a>(&self, keys: impl IntoIterator<Item = &'a [u8]>) {
        let _exclusive = self.epoch.write().unwrap_or_else(|p| p.into_inner());
        for key in keys {
            self.front.remove(key, None);
            self.cache.invalidate(key);
        }
    }

    pub(crate) fn invalidate_all(&self) {
        let _exclusive = self.epoch.write().unwrap_or_else(|p| p.into_inner());
        self.front.clear();
        self.cache.invalidate_all();
    }

    pub(crate) fn entry_count(&self) -> u64 {
        self.cache.entry_count()
    }

    /// Estimated bytes of the cached entries (the weighted size when bounded by bytes).
    pub(crate) fn weighted_size(&self) -> u64 {
        self.cache.weighted_size()
    }
}

/// Heap bytes of an entry besides its row and key: moka's bookkeeping (~250 bytes in six
/// allocations), the front's slot with its table's spare room (~125), the row's `Arc`
/// header and the tables' growth. `cargo bench --bench lookup` counts ~490 bytes an entry
/// whole (a two-column row, or none); an estimate of the parts alone (192 bytes) let a
/// `cache_max_bytes` bound hold twice its size.
const ENTRY_OVERHEAD: usize = 450;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::Datum;
    use crate::table::types::DataType;

    fn options() -> PartialOptions {
        PartialOptions {
            max_rows: 100,
            max_bytes: None,
            expire_after_write: None,
            expire_after_access: None,
            cache_missing_keys: true,
        }
    }

    #[test]
    fn hits_misses_and_invalidation() {
        let cache = PartialCache::new(&options());
        let row = ProjectedRow::of(vec![Datum::Int(1)], &[DataType::Int]);
        cache.insert(b"a", Some(row.clone()), Some(1), || Some(1));
        cache.insert(b"b", None, Some(1), || Some(1));
        assert_eq!(cache.get(b"a"), Some(Some(row)));
        assert_eq!(cache.get(b"b"), Some(None), "a remembered miss");
        assert_eq!(cache.get(b"c"), None);
        cache.invalidate([b"a".as_slice()]);
        assert_eq!(cache.get(b"a"), None);
        assert_eq!(cache.get(b"b"), Some(None));
        cache.invalidate_all();
        assert_eq!(cache.get(b"b"), None);
    }

    /// A batch is visited only once every key is cached or read, and then in the keys'
    /// order: a hit, no key, a row read from the files, a remembered miss.
    #[test]
    fn a_batch_is_visited_in_order_once_no_key_is_missing() {
        let cache = PartialCache::new(&options());
        let types: std::sync::Arc<[DataType]> = [DataType::Int].into();
        let row = |v| Some(ProjectedRow::of(vec![Datum::Int(v)], &types));
        cache.insert(b"a", row(1), None, || None);
        cache.insert(b"m", None, None, || None);
        let keys: [Option<&[u8]>; 4] = [Some(b"a"), None, Some(b"b"), Some(b"m")];
        let mut seen = Vec::new();
        let mut scratch = Vec::new();
        let mut visit = |r: Option<RowFields<'_>>| {
            seen.push(match r {
                Some(fields) => Some(fields.to_projected(&mut scratch, &types)?.decode()?),
                None => None,
            });
            Ok(())
        };
        let mut read = vec![None; keys.len()];
        assert_eq!(cache.visit_many(&keys, &read, 0, &mut visit).unwrap(), [2]);
        read[2] = Some(row(2));
        assert!(
            cache
                .visit_many(&keys, &read, 0, &mut visit)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            seen,
            [
                Some(vec![Datum::Int(1)]),
                None,
                Some(vec![Datum::Int(2)]),
                None
            ]
        );
    }

    /// moka hears of reads for its idle expiry always, for its eviction order only once
    /// the cache is three quarters full (by rows, or by bytes when bounded by bytes).
    #[test]
    fn reads_reach_moka_once_its_order_can_matter() {
        let fill = |cache: &PartialCache, keys: std::ops::Range<u32>| {
            for i in keys {
                cache.insert(&i.to_be_bytes(), None, None, || None);
            }
            cache.cache.run_pending_tasks();
        };
        let rows = PartialCache::new(&options());
        assert!(!rows.reads_matter(), "empty");
        fill(&rows, 0..74);
        assert!(!rows.reads_matter(), "74 of 100 rows");
        fill(&rows, 74..75);
        assert!(rows.reads_matter(), "75 of 100 rows");

        let idle = PartialCache::new(&PartialOptions {
            expire_after_access: Some(Duration::from_secs(60)),
            ..options()
        });
        assert!(idle.reads_matter(), "idle expiry needs every read");

        let bytes = PartialCache::new(&PartialOptions {
            max_bytes: Some(100 * (ENTRY_OVERHEAD as u64 + 4)),
            ..options()
        });
        fill(&bytes, 0..50);
        assert!(!bytes.reads_matter(), "half the bytes");
        fill(&bytes, 50..80);
        assert!(bytes.reads_matter(), "80% of the bytes");
    }

    #[test]
    fn keys_equal_and_hash_as_their_bytes_inline_or_not() {
        use std::hash::BuildHasher;
        let state = foldhash::fast::FixedState::default();
        for len in [0, 1, INLINE_KEY - 1, INLINE_KEY, INLINE_KEY + 1, 300] {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let key = CacheKey::new(&bytes);
            assert_eq!(key.as_bytes(), bytes.as_slice());
            assert_eq!(matches!(key, CacheKey::Inline { .. }), len <= INLINE_KEY);
            assert_eq!(state.hash_one(&key), state.hash_one(bytes.as_slice()));
            let cache = PartialCache::new(&options());
            cache.insert(&bytes, None, None, || None);
            assert_eq!(cache.get(&bytes), Some(None), "length {len}");
        }
        assert!(CacheKey::new(b"ab") != CacheKey::new(b"ab\0"));
    }

    #[test]
    fn a_read_of_an_older_snapshot_is_not_cached() {
        let cache = PartialCache::new(&options());
        cache.insert(b"a", None, Some(1), || Some(2));
        assert_eq!(cache.get(b"a"), None);
    }

    #[test]
    fn misses_are_not_cached_when_disabled() {
        let cache = PartialCache::new(&PartialOptions {
            cache_missing_keys: false,
            ..options()
        });
        cache.insert(b"a", None, Some(1), || Some(1));
        assert_eq!(cache.get(b"a"), None);
    }

    #[test]
    fn a_byte_bound_evicts_by_size() {
        let cache = PartialCache::new(&PartialOptions {
            max_bytes: Some(10_000),
            ..options()
        });
        for i in 0..1_000_i32 {
            let row = ProjectedRow::of(
                vec![Datum::String("x".repeat(100).into())],
                &[DataType::Varchar(1000)],
            );
            cache.insert(&i.to_be_bytes(), Some(row), None, || None);
        }
        cache.cache.run_pending_tasks();
        assert!(cache.weighted_size() <= 10_000, "{}", cache.weighted_size());
        assert!(cache.entry_count() < 1_000);
    }

    #[test]
    fn the_front_holds_no_more_than_moka_after_evictions() {
        let cache = PartialCache::new(&PartialOptions {
            max_rows: 100,
            ..options()
        });
        for i in 0..10_000_i32 {
            let row = ProjectedRow::of(vec![Datum::Int(i)], &[DataType::Int]);
            cache.insert(&i.to_be_bytes(), Some(row), None, || None);
        }
        cache.cache.run_pending_tasks();
        assert!(cache.entry_count() <= 100);
        assert_eq!(cache.front.len() as u64, cache.entry_count());
        // What is still cached is what was inserted last for its key.
        for i in 0..10_000_i32 {
            if let Some(row) = cache.get(&i.to_be_bytes()) {
                assert_eq!(
                    row,
                    Some(ProjectedRow::of(vec![Datum::Int(i)], &[DataType::Int]))
                );
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, Option<i32>),
        Get(u8),
        Invalidate(u8),
        InvalidateAll,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..40_u8, proptest::option::of(any::<i32>())).prop_map(|(k, v)| Op::Insert(k, v)),
            6 => (0..40_u8).prop_map(Op::Get),
            1 => (0..40_u8).prop_map(Op::Invalidate),
            1 => Just(Op::InvalidateAll),
        ]
    }

    proptest::proptest! {
        /// A hit returns what was inserted last for the key and not invalidated since;
        /// with room for every key nothing is lost; with little room the front never
        /// outgrows moka.
        #[test]
        fn hits_are_the_latest_insert(ops in proptest::collection::vec(op(), 1..300), roomy: bool) {
            let cache = PartialCache::new(&PartialOptions {
                max_rows: if roomy { 1_000 } else { 8 },
                ..options()
            });
            let mut model: std::collections::HashMap<u8, Option<i32>> = Default::default();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let row = v.map(|v| ProjectedRow::of(vec![Datum::Int(v)], &[DataType::Int]));
                        cache.insert(&[k], row, None, || None);
                        model.insert(k, v);
                    }
                    Op::Get(k) => {
                        let got = cache.get(&[k]).map(|r| r.map(|r| r.decode().unwrap()[0].clone()));
                        let want = model.get(&k).map(|v| v.map(Datum::Int));
                        if roomy || got.is_some() {
                            proptest::prop_assert_eq!(got, want, "key {}", k);
                        }
                    }
                    Op::Invalidate(k) => {
                        cache.invalidate([[k].as_slice()]);
                        model.remove(&k);
                    }
                    Op::InvalidateAll => {
                        cache.invalidate_all();
                        model.clear();
                    }
                }
            }
            cache.cache.run_pending_tasks();
            proptest::prop_assert!(cache.front.len() as u64 <= cache.entry_count().max(model.len() as u64));
            if !roomy {
                proptest::prop_assert!(cache.front.len() <= 8 + 1, "{}", cache.front.len());
            }
        }
    }
}
