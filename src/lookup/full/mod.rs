//! The `full` lookup cache: a whole primary-key table in memory, compactly.
//!
//! **Rows.** Each row is kept once, as its Paimon BinaryRow bytes, in the append-only byte
//! arena of one of [`SHARDS`] shards. A record is a LEB128 length counted in 8-byte words
//! (a BinaryRow is whole words, so rows under 1 KiB take one byte) followed by the row.
//! Lookups decode only the projected fields straight from those bytes.
//!
//! **Primary index.** Per shard a [`RowTable`]: linear probing over 8-byte slots holding
//! the key's fingerprint and the record's arena offset. The key is not stored a second
//! time: a probe whose fingerprint matches is compared with the key fields read in place
//! from the stored row ([`binary_row::field_image`]). At a load of 7/16..7/8 the table
//! costs 9–18 bytes a row, the record prefix 1, and the arena grows by an eighth at a time
//! instead of doubling, so a typical 100-byte row costs ~1.1–1.3× its BinaryRow size. A
//! hit touches two cache lines that are likely misses: its slot and its record.
//!
//! **Hashing.** A key's 32-bit fingerprint is foldhash (seeded per cache) over its field
//! images; its top [`SHARD_BITS`] bits pick the shard and [`table_hash`] spreads it into
//! a home bucket, so the table is rebuilt from its slots alone when it grows or shrinks.
//!
//! **Secondary indexes** (joins on non-key columns) map the fingerprint of a row's index
//! columns to its key fingerprint: 8 bytes an entry, in their own [`SHARDS`] shards keyed
//! by the value fingerprint, so `get_by` reads one secondary shard and then only the
//! primary shards of the candidates, where each row is verified against the probe (hash
//! collisions cost time, never correctness). Fingerprints rather than offsets keep them
//! valid when a shard compacts. A table without secondary indexes pays nothing for them.
//!
//! **Concurrency.** Every shard is an `RwLock`; a write locks one primary shard and then,
//! one at a time, the secondary shards it changes (lock order: primary before secondary;
//! `get_by` never holds both). A refresh writing one shard never blocks lookups in the
//! others.
//!
//! **Garbage.** Replacing or removing a row leaves its old record in the arena. A shard is
//! compacted (live records copied into a right-sized arena, its index rebuilt) once its
//! garbage exceeds a quarter of its live records (and 16 KiB), so the arena stays within
//! 1.25× of them; each dead byte costs at most four copied bytes. The shard's write lock
//! is held during the copy, which is why shards are many and small.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hashbrown::HashTable;

mod row_table;

use row_table::RowTable;

use crate::error::{Error, Result};
use crate::table::binary_row::{self, FieldImage};
use crate::table::datum::{Datum, Row, compare_rows};
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// Bits of a fingerprint that pick a shard.
const SHARD_BITS: u32 = 6;
/// Shards of the primary index and of each secondary index: enough that writers rarely
/// meet readers and a compaction copies a small part of the table.
const SHARDS: usize = 1 << SHARD_BITS;
/// A shard compacts once its garbage is more than 1/COMPACT_RATIO of its live records…
const COMPACT_RATIO: usize = 4;
/// …and at least this many bytes, so small shards do not compact on every update.
const COMPACT_MIN_GARBAGE: usize = 16 * 1024;
/// Keys [`FullCache::get_many`] works on at a time: enough misses in flight to cover the
/// memory latency, few enough that the chunk's slots and records stay in L1.
const BATCH: usize = 32;
/// Smallest arena allocation.
const MIN_ARENA: usize = 1024;
/// Largest arena: offsets are `u32`.
const MAX_ARENA: usize = u32::MAX as usize;
/// A thread's scratch buffer is dropped after use when it grew larger than this (one huge
/// row must not pin its memory).
const MAX_SCRATCH: usize = 64 * 1024;

thread_local! {
    /// Encoding buffer of probes and upserted rows, so lookups allocate only their result.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's (cleared) scratch buffer, or a fresh one when it is in use.
fn with_scratch<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    let mut buf = SCRATCH.try_with(Cell::take).unwrap_or_default();
    buf.clear();
    let out = f(&mut buf);
    if buf.capacity() <= MAX_SCRATCH {
        let _ = SCRATCH.try_with(|cell| cell.set(buf));
    }
    out
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// Shard of a fingerprint: its top bits.
fn shard_of(fingerprint: u32) -> usize {
    (fingerprint >> (32 - SHARD_BITS)) as usize
}

/// Hash-table hash of a fingerprint: the multiply spreads all 32 bits into the top ones,
/// where [`RowTable`] takes its buckets and hashbrown (secondary indexes) its tags; the
/// low bits, hashbrown's buckets, are a permutation of the fingerprint's.
fn table_hash(fingerprint: u32) -> u64 {
    u64::from(fingerprint).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Some columns of an encoded row: `positions` of BinaryRow `body` with `arity` fields,
/// typed by `types` (parallel to `positions`).
#[derive(Clone, Copy)]
struct Fields<'a> {
    body: &'a [u8],
    arity: usize,
    positions: &'a [usize],
    types: &'a [DataType],
}

impl<'a> Fields<'a> {
    fn images(self) -> impl Iterator<Item = Result<Option<FieldImage<'a>>>> {
        self.positions
            .iter()
            .zip(self.types)
            .map(move |(&pos, ty)| binary_row::field_image(self.body, self.arity, pos, ty))
    }

    /// Whether every field equals its counterpart in `other`; a null (or unreadable)
    /// field equals nothing.
    fn same_values(self, other: Fields<'_>) -> bool {
        self.positions.len() == other.positions.len()
            && self
                .images()
                .zip(other.images())
                .all(|pair| matches!(pair, (Ok(Some(a)), Ok(Some(b))) if a == b))
    }
}

/// Columns a row is looked up by: the primary key or a secondary index.
struct Columns {
    /// Table column indices.
    positions: Vec<usize>,
    types: Vec<DataType>,
    /// `0..len`: the positions in a probe row that holds only these columns.
    probe: Vec<usize>,
}

impl Columns {
    fn new(positions: Vec<usize>, table_types: &[DataType]) -> Self {
        Columns {
            types: positions
                .iter()
                .filter_map(|&p| table_types.get(p).copied())
                .collect(),
            probe: (0..positions.len()).collect(),
            positions,
        }
    }

    fn len(&self) -> usize {
        self.positions.len()
    }

    /// These columns in a full row of `arity` fields.
    fn in_row<'a>(&'a self, body: &'a [u8], arity: usize) -> Fields<'a> {
        Fields {
            body,
            arity,
            positions: &self.positions,
            types: &self.types,
        }
    }

    /// These columns in a probe row encoded with `self.types`.
    fn in_probe<'a>(&'a self, body: &'a [u8]) -> Fields<'a> {
        Fields {
            body,
            arity: self.types.len(),
            positions: &self.probe,
            types: &self.types,
        }
    }
}

/// One row's entry in a secondary index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SecondaryEntry {
    /// Fingerprint of the row's index columns (what the entry is found by).
    value: u32,
    /// Fingerprint of the row's primary key (where the row is).
    key: u32,
}

struct SecondaryIndex {
    columns: Columns,
    shards: Box<[RwLock<HashTable<SecondaryEntry>>; SHARDS]>,
}

impl SecondaryIndex {
    fn shard(&self, value: u32) -> &RwLock<HashTable<SecondaryEntry>> {
        &self.shards[shard_of(value)]
    }

    fn insert(&self, value: u32, key: u32) {
        write(self.shard(value)).insert_unique(
            table_hash(value),
            SecondaryEntry { value, key },
            |e| table_hash(e.value),
        );
    }

    /// Removes one entry equal to (`value`, `key`): equal entries (rows whose keys share a
    /// fingerprint) are interchangeable.
    fn remove(&self, value: u32, key: u32) {
        let target = SecondaryEntry { value, key };
        let mut table = write(self.shard(value));
        if let Ok(entry) = table.find_entry(table_hash(value), |e| *e == target) {
            entry.remove();
        }
        // Give memory back once most entries are gone (a factor 4 of hysteresis keeps
        // this amortized constant).
        if table.len() < table.capacity() / 4 {
            table.shrink_to_fit(|e| table_hash(e.value));
        }
    }

    /// Key fingerprints of the rows whose index columns may have fingerprint `value`.
    fn candidates(&self, value: u32) -> Vec<u32> {
        read(self.shard(value))
            .iter_hash(table_hash(value))
            .filter(|e| e.value == value)
            .map(|e| e.key)
            .collect()
    }

    fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| read(s).allocation_size())
            .sum::<usize>()
            + std::mem::size_of_val(&*self.shards)
    }
}

/// One shard of rows: an arena of records and the index of their offsets.
#[derive(Default)]
struct Shard {
    /// Records: LEB128 row length in 8-byte words, then the BinaryRow. Append-only
    /// between compactions.
    arena: Vec<u8>,
    /// Key fingerprints and offsets of the live records.
    rows: RowTable,
    /// Bytes of dead records in `arena`.
    garbage: usize,
    /// Sum of the live rows' BinaryRow lengths (record prefixes not counted).
    row_bytes: usize,
}

impl Shard {
    /// Accounts the record at `offset` as garbage.
    fn retire(&mut self, offset: u32) {
        if let Some((body, len)) = record(&self.arena, offset) {
            self.garbage += len;
            self.row_bytes = self.row_bytes.saturating_sub(body.len());
        }
    }
}

/// The BinaryRow of the record at `offset` and the record's length, prefix included;
/// `None` when the bytes there are not a record (never for offsets of a live row).
fn record(arena: &[u8], offset: u32) -> Option<(&[u8], usize)> {
    let start = offset as usize;
    let mut at = start;
    let mut words = 0usize;
    for shift in (0..35).step_by(7) {
        let byte = *arena.get(at)?;
        at += 1;
        words |= usize::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            let len = words.checked_mul(8)?;
            let body = arena.get(at..at.checked_add(len)?)?;
            // Load the record's last cache line now, in parallel with the reads of its
            // first ones (a row spans 2–3 lines; strings live at its end).
            std::hint::black_box(body.last().copied());
            return Some((body, at - start + len));
        }
    }
    None
}

/// Appends a record of BinaryRow `body` and returns its offset. Grows the arena by an
/// eighth (not double) when full, so unused capacity stays under 1/8 of it; large
/// reallocations are mostly done in place by the allocator (mremap).
fn push_record(arena: &mut Vec<u8>, body: &[u8]) -> Result<u32> {
    if !body.len().is_multiple_of(8) {
        return Err(Error::format(format!(
            "BinaryRow of {} bytes is not whole 8-byte words",
            body.len()
        )));
    }
    let mut prefix = [0u8; 5];
    let mut prefix_len = 0;
    let mut words = body.len() / 8;
    for byte in prefix.iter_mut() {
        *byte = (words & 0x7F) as u8;
        words >>= 7;
        prefix_len += 1;
        if words == 0 {
            break;
        }
        *byte |= 0x80;
    }
    let offset = arena.len();
    let end = offset + prefix_len + body.len();
    if words != 0 || end > MAX_ARENA {
        return Err(Error::Data(format!(
            "a row of {} bytes does not fit a full-cache shard (4 GiB each)",
            body.len()
        )));
    }
    if end > arena.capacity() {
        // `end <= MAX_ARENA`, so the target still holds the record.
        let target = end
            .max(arena.capacity() + arena.capacity() / 8)
            .clamp(MIN_ARENA, MAX_ARENA);
        arena.reserve_exact(target - offset);
    }
    arena.extend_from_slice(prefix.get(..prefix_len).unwrap_or_default());
    arena.extend_from_slice(body);
    Ok(offset as u32)
}

/// A whole table in memory for lookup joins, by primary key and by secondary indexes.
pub struct FullCache {
    schema: Arc<TableSchema>,
    /// Types of all columns, in schema order.
    types: Vec<DataType>,
    key: Columns,
    secondary: Vec<SecondaryIndex>,
    hash_state: foldhash::fast::RandomState,
    shards: Box<[RwLock<Shard>; SHARDS]>,
    /// Tests force fingerprint collisions with a narrow mask.
    #[cfg(test)]
    fingerprint_mask: u32,
}

impl std::fmt::Debug for FullCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullCache")
            .field("columns", &self.types.len())
            .field("primary_keys", &self.schema.primary_keys)
            .field("secondary_indexes", &self.secondary.len())
            .field("rows", &self.len())
            .finish()
    }
}

impl FullCache {
    /// `secondary`: for each secondary index, the table column indices it is keyed by
    /// (joins on non-primary-key columns). Errors (`Error::Config`) when an index is
    /// empty or names a column out of range, or the table has no usable primary key.
    pub fn new(schema: Arc<TableSchema>, secondary: Vec<Vec<usize>>) -> Result<Self> {
        let types: Vec<DataType> = schema.fields.iter().map(|f| f.data_type).collect();
        let n = types.len();
        if schema.primary_keys.is_empty() {
            return Err(Error::Config(
                "the full lookup cache needs a table with a primary key".into(),
            ));
        }
        let mut key = Vec::with_capacity(schema.primary_keys.len());
        for name in &schema.primary_keys {
            let index = schema.field_index(name).ok_or_else(|| {
                Error::Config(format!("primary key `{name}` is not a column of the table"))
            })?;
            key.push(index);
        }
        let mut indexes = Vec::with_capacity(secondary.len());
        for (i, columns) in secondary.into_iter().enumerate() {
            if columns.is_empty() {
                return Err(Error::Config(format!("secondary index {i} has no columns")));
            }
            if let Some(c) = columns.iter().find(|&&c| c >= n) {
                return Err(Error::Config(format!(
                    "secondary index {i}: column {c} is out of range (the table has {n} columns)"
                )));
            }
            indexes.push(SecondaryIndex {
                columns: Columns::new(columns, &types),
                shards: Box::new(std::array::from_fn(|_| RwLock::default())),
            });
        }
        Ok(FullCache {
            key: Columns::new(key, &types),
            types,
            schema,
            secondary: indexes,
            hash_state: foldhash::fast::RandomState::default(),
            shards: Box::new(std::array::from_fn(|_| RwLock::default())),
            #[cfg(test)]
            fingerprint_mask: u32::MAX,
        })
    }

    pub fn schema(&self) -> &Arc<TableSchema> {
        &self.schema
    }

    /// Inserts or replaces the row of its primary key (row = all columns in schema order).
    /// A null key column, a wrong arity or a value of the wrong type is `Error::Data`.
    pub fn upsert(&self, row: &[Datum]) -> Result<()> {
        let n = self.types.len();
        check_arity("row", row.len(), n)?;
        for &k in &self.key.positions {
            if row.get(k).is_none_or(Datum::is_null) {
                let name = self.schema.fields.get(k).map_or("?", |f| f.name.as_str());
                return Err(Error::Data(format!("primary key column `{name}` is null")));
            }
        }
        with_scratch(|buf| {
            binary_row::encode_into(buf, row, &self.types)?;
            let body: &[u8] = buf;
            let key = self.key.in_row(body, n);
            let fingerprint = self
                .fingerprint(key)?
                .ok_or_else(|| Error::Data("primary key has a null column".into()))?;
            // Computed before taking the lock, to hold it briefly.
            let values: Vec<Option<u32>> = self
                .secondary
                .iter()
                .map(|s| self.fingerprint(s.columns.in_row(body, n)))
                .collect::<Result<_>>()?;
            let mut guard = write(self.shard(fingerprint));
            let shard = &mut *guard;
            let found = shard.rows.find(fingerprint, |at| {
                self.key_at(&shard.arena, at)
                    .is_some_and(|stored| stored.same_values(key))
            });
            let old = match found {
                Some(index) => {
                    let old = shard.rows.offset(index);
                    let at = push_record(&mut shard.arena, body)?;
                    shard.rows.set_offset(index, at);
                    old
                }
                None => {
                    let at = push_record(&mut shard.arena, body)?;
                    shard.rows.insert(fingerprint, at);
                    None
                }
            };
            let old_values = match old {
                Some(at) => self.secondary_values(&shard.arena, at),
                None => Vec::new(),
            };
            if let Some(at) = old {
                shard.retire(at);
            }
            shard.row_bytes += body.len();
            for (i, index) in self.secondary.iter().enumerate() {
                let before = old_values.get(i).copied().flatten();
                let after = values.get(i).copied().flatten();
                if before != after {
                    if let Some(value) = before {
                        index.remove(value, fingerprint);
                    }
                    if let Some(value) = after {
                        index.insert(value, fingerprint);
                    }
                }
            }
            self.maybe_compact(shard);
            Ok(())
        })
    }

    /// Removes the row with this primary key (values in `schema.primary_keys` order);
    /// no-op when absent.
    pub fn remove(&self, key: &[Datum]) -> Result<()> {
        check_arity("primary key", key.len(), self.key.len())?;
        if key.iter().any(Datum::is_null) {
            return Ok(());
        }
        with_scratch(|buf| {
            binary_row::encode_into(buf, key, &self.key.types)?;
            let probe = self.key.in_probe(buf);
            let Some(fingerprint) = self.fingerprint(probe)? else {
                return Ok(());
            };
            let mut guard = write(self.shard(fingerprint));
            let shard = &mut *guard;
            let found = shard.rows.find(fingerprint, |at| {
                self.key_at(&shard.arena, at)
                    .is_some_and(|stored| stored.same_values(probe))
            });
            let Some((index, at)) = found.and_then(|i| Some((i, shard.rows.offset(i)?))) else {
                return Ok(());
            };
            shard.rows.remove_at(index);
            let old_values = self.secondary_values(&shard.arena, at);
            shard.retire(at);
            for (index, value) in self.secondary.iter().zip(old_values) {
                if let Some(value) = value {
                    index.remove(value, fingerprint);
                }
            }
            self.maybe_compact(shard);
            Ok(())
        })
    }

    /// The row of the primary key, decoding only `projection` (table column indices, in
    /// that order). A key containing a null matches nothing. Keys compare as their
    /// BinaryRow images do (floating-point keys by bits, TIMESTAMP(p <= 3) by
    /// milliseconds). Allocates only the result.
    pub fn get(&self, key: &[Datum], projection: &[usize]) -> Result<Option<Row>> {
        check_arity("primary key", key.len(), self.key.len())?;
        self.check_projection(projection)?;
        if key.iter().any(Datum::is_null) {
            return Ok(None);
        }
        with_scratch(|buf| {
            binary_row::encode_into(buf, key, &self.key.types)?;
            let probe = self.key.in_probe(buf);
            let Some(fingerprint) = self.fingerprint(probe)? else {
                return Ok(None);
            };
            let shard = read(self.shard(fingerprint));
            let found = shard.rows.find(fingerprint, |at| {
                self.key_at(&shard.arena, at)
                    .is_some_and(|stored| stored.same_values(probe))
            });
            let Some(at) = found.and_then(|index| shard.rows.offset(index)) else {
                return Ok(None);
            };
            let (body, _) = record(&shard.arena, at).ok_or_else(corrupt)?;
            binary_row::decode_projected(body, &self.types, projection).map(Some)
        })
    }

    /// [`get`](Self::get) for many keys, in their order. A hit costs two likely cache
    /// misses (its slot, its record); here each step is done for a whole chunk of keys
    /// before the next, so the misses of a chunk are in flight together instead of one
    /// after another. Read locks of the shards a chunk touches are taken in shard order
    /// and held for the chunk.
    pub fn get_many(&self, keys: &[&[Datum]], projection: &[usize]) -> Result<Vec<Option<Row>>> {
        self.check_projection(projection)?;
        let mut out = Vec::with_capacity(keys.len());
        with_scratch(|buf| {
            for chunk in keys.chunks(BATCH) {
                self.get_chunk(chunk, projection, buf, &mut out)?;
            }
            Ok(out)
        })
    }

    fn get_chunk(
        &self,
        keys: &[&[Datum]],
        projection: &[usize],
        buf: &mut Vec<u8>,
        out: &mut Vec<Option<Row>>,
    ) -> Result<()> {
        // 1. Encode the probes; fingerprint them.
        buf.clear();
        let mut probes = [(0usize, 0usize, None::<u32>); BATCH];
        for (probe, key) in probes.iter_mut().zip(keys) {
            check_arity("primary key", key.len(), self.key.len())?;
            let start = buf.len();
            if !key.iter().any(Datum::is_null) {
                binary_row::encode_into(buf, key, &self.key.types)?;
            }
            *probe = (start, buf.len(), None);
            if start < buf.len() {
                probe.2 = self.fingerprint(self.key.in_probe(&buf[start..]))?;
            }
        }
        let probes = &probes[..keys.len()];
        // 2. Lock the shards in order (no lock-order cycles with writers or other
        //    batches); load every probe's home slot.
        let mut wanted = 0u64;
        for &(_, _, fingerprint) in probes {
            if let Some(fp) = fingerprint {
                wanted |= 1 << shard_of(fp);
            }
        }
        let guards: Vec<Option<RwLockReadGuard<'_, Shard>>> = (0..SHARDS)
            .map(|s| (wanted & (1 << s) != 0).then(|| read(&self.shards[s])))
            .collect();
        let shard = |fp: u32| guards[shard_of(fp)].as_deref();
        for &(_, _, fingerprint) in probes {
            if let Some(fp) = fingerprint
                && let Some(shard) = shard(fp)
            {
                std::hint::black_box(shard.rows.home_slot(fp));
            }
        }
        // 3. Load the record of every probe's first fingerprint match.
        for &(_, _, fingerprint) in probes {
            if let Some(fp) = fingerprint
                && let Some(shard) = shard(fp)
                && let Some((_, at)) = shard.rows.matching(fp).next()
            {
                std::hint::black_box(record(&shard.arena, at).map(|(body, _)| body.len()));
            }
        }
        // 4. Verify and decode, now from cache.
        for &(start, end, fingerprint) in probes {
            let (Some(fp), Some(probe)) = (fingerprint, buf.get(start..end)) else {
                out.push(None);
                continue;
            };
            let Some(shard) = shard(fp) else {
                out.push(None);
                continue;
            };
            let probe = self.key.in_probe(probe);
            let found = shard.rows.find(fp, |at| {
                self.key_at(&shard.arena, at)
                    .is_some_and(|stored| stored.same_values(probe))
            });
            let Some(at) = found.and_then(|index| shard.rows.offset(index)) else {
                out.push(None);
                continue;
            };
            let (body, _) = record(&shard.arena, at).ok_or_else(corrupt)?;
            out.push(Some(binary_row::decode_projected(
                body,
                &self.types,
                projection,
            )?));
        }
        Ok(())
    }

    /// Every row whose secondary-index columns equal `values` (null matches nothing),
    /// ordered by primary key, each decoded to `projection`.
    pub fn get_by(&self, index: usize, values: &[Datum], projection: &[usize]) -> Result<Vec<Row>> {
        let secondary = self.secondary.get(index).ok_or_else(|| {
            Error::Config(format!(
                "secondary index {index} does not exist ({} defined)",
                self.secondary.len()
            ))
        })?;
        check_arity(
            "secondary index values",
            values.len(),
            secondary.columns.len(),
        )?;
        self.check_projection(projection)?;
        if values.iter().any(Datum::is_null) {
            return Ok(Vec::new());
        }
        let n = self.types.len();
        with_scratch(|buf| {
            binary_row::encode_into(buf, values, &secondary.columns.types)?;
            let probe = secondary.columns.in_probe(buf);
            let Some(value) = self.fingerprint(probe)? else {
                return Ok(Vec::new());
            };
            let mut keys = secondary.candidates(value);
            // Sorted, the keys of one shard are adjacent (the shard is the top bits).
            keys.sort_unstable();
            keys.dedup();
            let mut found: Vec<(Row, Row)> = Vec::new();
            for group in keys.chunk_by(|a, b| shard_of(*a) == shard_of(*b)) {
                let Some(&first) = group.first() else {
                    continue;
                };
                let shard = read(self.shard(first));
                for &key in group {
                    // Exactly this fingerprint: each row belongs to one candidate, so
                    // none is returned twice.
                    for (_, at) in shard.rows.matching(key) {
                        let Some((body, _)) = record(&shard.arena, at) else {
                            continue;
                        };
                        if !secondary.columns.in_row(body, n).same_values(probe) {
                            continue;
                        }
                        found.push((
                            binary_row::decode_projected(body, &self.types, &self.key.positions)?,
                            binary_row::decode_projected(body, &self.types, projection)?,
                        ));
                    }
                }
            }
            found.sort_by(|a, b| compare_rows(&a.0, &b.0));
            Ok(found.into_iter().map(|(_, row)| row).collect())
        })
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| read(s).rows.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| read(s).rows.is_empty())
    }

    /// Heap bytes this structure holds (arenas, index tables, secondary indexes, the shard
    /// arrays), measured from capacities and allocation sizes, not estimated per row.
    pub fn memory_bytes(&self) -> usize {
        let shards: usize = self
            .shards
            .iter()
            .map(|s| {
                let s = read(s);
                s.arena.capacity() + s.rows.memory_bytes()
            })
            .sum();
        shards
            + std::mem::size_of_val(&*self.shards)
            + self
                .secondary
                .iter()
                .map(SecondaryIndex::memory_bytes)
                .sum::<usize>()
    }

    /// Sum over live rows of their BinaryRow size (`binary_row::encode(row).len()`), for
    /// the memory ratio.
    pub fn binary_row_bytes(&self) -> usize {
        self.shards.iter().map(|s| read(s).row_bytes).sum()
    }

    /// Drops every row (a reload) and gives the memory back.
    pub fn clear(&self) {
        // All primary shards first, so no writer is between its primary and secondary
        // updates while the secondary indexes are cleared.
        let mut guards: Vec<_> = self.shards.iter().map(write).collect();
        for index in &self.secondary {
            for table in index.shards.iter() {
                *write(table) = HashTable::new();
            }
        }
        for guard in &mut guards {
            **guard = Shard::default();
        }
    }

    fn shard(&self, fingerprint: u32) -> &RwLock<Shard> {
        &self.shards[shard_of(fingerprint)]
    }

    /// 32-bit fingerprint of `fields` (a hash of their images), `None` when one is null.
    fn fingerprint(&self, fields: Fields<'_>) -> Result<Option<u32>> {
        let mut hasher = self.hash_state.build_hasher();
        for image in fields.images() {
            let Some(image) = image? else {
                return Ok(None);
            };
            hasher.write_u64(image.word);
            hasher.write_usize(image.bytes.len());
            hasher.write(image.bytes);
        }
        let fingerprint = (hasher.finish() >> 32) as u32;
        #[cfg(test)]
        let fingerprint = fingerprint & self.fingerprint_mask;
        Ok(Some(fingerprint))
    }

    /// The key fields of the row stored at `at`.
    fn key_at<'a>(&'a self, arena: &'a [u8], at: u32) -> Option<Fields<'a>> {
        record(arena, at).map(|(body, _)| self.key.in_row(body, self.types.len()))
    }

    /// Fingerprints of the secondary-index columns of the row stored at `at`.
    fn secondary_values(&self, arena: &[u8], at: u32) -> Vec<Option<u32>> {
        let Some((body, _)) = record(arena, at) else {
            return vec![None; self.secondary.len()];
        };
        self.secondary
            .iter()
            .map(|s| {
                self.fingerprint(s.columns.in_row(body, self.types.len()))
                    .ok()
                    .flatten()
            })
            .collect()
    }

    fn check_projection(&self, projection: &[usize]) -> Result<()> {
        let n = self.types.len();
        match projection.iter().find(|&&p| p >= n) {
            Some(p) => Err(Error::Data(format!(
                "projection column {p} is out of range (the table has {n} columns)"
            ))),
            None => Ok(()),
        }
    }

    fn maybe_compact(&self, shard: &mut Shard) {
        let live = shard.arena.len().saturating_sub(shard.garbage);
        if shard.garbage >= COMPACT_MIN_GARBAGE && shard.garbage * COMPACT_RATIO > live {
            self.compact(shard);
        }
    }

    /// Copies the live records into a right-sized arena (an eighth of room to grow) and
    /// rebuilds the index for them, right-sized too.
    fn compact(&self, shard: &mut Shard) {
        let live = shard.arena.len().saturating_sub(shard.garbage);
        let mut arena = Vec::with_capacity((live + live / 8).clamp(MIN_ARENA, MAX_ARENA));
        let mut rows = RowTable::with_room_for(shard.rows.len());
        let mut row_bytes = 0;
        for (fingerprint, at) in shard.rows.iter() {
            let start = at as usize;
            let Some((body, len)) = record(&shard.arena, at) else {
                continue;
            };
            let (Some(bytes), Ok(new_at)) = (
                shard.arena.get(start..start + len),
                u32::try_from(arena.len()),
            ) else {
                continue;
            };
            arena.extend_from_slice(bytes);
            rows.put(fingerprint, new_at);
            row_bytes += body.len();
        }
        *shard = Shard {
            arena,
            rows,
            garbage: 0,
            row_bytes,
        };
    }

    #[cfg(test)]
    fn compact_all(&self) {
        for shard in self.shards.iter() {
            self.compact(&mut write(shard));
        }
    }
}

fn check_arity(what: &str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::Data(format!(
            "{what} has {got} values, expected {expected}"
        )))
    }
}

fn corrupt() -> Error {
    Error::format("full lookup cache: an index entry points outside its arena")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::table::datum::Timestamp;
    use crate::table::types::MAX_LENGTH;

    const STRING: DataType = DataType::Varchar(MAX_LENGTH);

    fn schema(columns: &[(&str, DataType)], primary_key: &[&str]) -> Arc<TableSchema> {
        Arc::new(
            TableSchema::new(
                columns
                    .iter()
                    .map(|(name, ty)| (name.to_string(), *ty, true))
                    .collect(),
                vec![],
                primary_key.iter().map(|k| k.to_string()).collect(),
                BTreeMap::new(),
            )
            .unwrap(),
        )
    }

    fn s(text: &str) -> Datum {
        Datum::String(text.into())
    }

    /// id INT (key), name STRING, country STRING, score BIGINT; secondary index on country.
    fn customers() -> FullCache {
        let schema = schema(
            &[
                ("id", DataType::Int),
                ("name", STRING),
                ("country", STRING),
                ("score", DataType::BigInt),
            ],
            &["id"],
        );
        FullCache::new(schema, vec![vec![2]]).unwrap()
    }

    fn customer(id: i32, name: &str, country: &str, score: i64) -> Row {
        vec![Datum::Int(id), s(name), s(country), Datum::BigInt(score)]
    }

    fn encoded_len(cache: &FullCache, row: &[Datum]) -> usize {
        binary_row::encode(row, &cache.types).unwrap().len()
    }

    #[test]
    fn upsert_replace_remove_get() {
        let cache = customers();
        assert!(cache.is_empty());
        let all = [0, 1, 2, 3];
        assert_eq!(cache.get(&[Datum::Int(1)], &all).unwrap(), None);
        let alice = customer(1, "Alice", "NL", 10);
        let bob = customer(2, "Bob with a long name", "DE", 20);
        cache.upsert(&alice).unwrap();
        cache.upsert(&bob).unwrap();
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.get(&[Datum::Int(1)], &all).unwrap(),
            Some(alice.clone())
        );
        assert_eq!(
            cache.get(&[Datum::Int(2)], &all).unwrap(),
            Some(bob.clone())
        );
        assert_eq!(cache.get(&[Datum::Int(3)], &all).unwrap(), None);

        let alice2 = customer(1, "Alice Smith-Jones", "BE", 11);
        cache.upsert(&alice2).unwrap();
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.get(&[Datum::Int(1)], &all).unwrap(),
            Some(alice2.clone())
        );
        assert_eq!(
            cache.binary_row_bytes(),
            encoded_len(&cache, &alice2) + encoded_len(&cache, &bob)
        );

        cache.remove(&[Datum::Int(1)]).unwrap();
        cache.remove(&[Datum::Int(1)]).unwrap(); // absent: no-op
        cache.remove(&[Datum::Int(99)]).unwrap();
        assert_eq!(cache.get(&[Datum::Int(1)], &all).unwrap(), None);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.binary_row_bytes(), encoded_len(&cache, &bob));
        assert!(cache.memory_bytes() > 0);
    }

    #[test]
    fn projection_decodes_the_selected_columns_in_order() {
        let cache = customers();
        let row = customer(7, "Carol", "a country name longer than 7", -3);
        cache.upsert(&row).unwrap();
        let key = [Datum::Int(7)];
        assert_eq!(
            cache.get(&key, &[3, 1]).unwrap(),
            Some(vec![Datum::BigInt(-3), s("Carol")])
        );
        assert_eq!(
            cache.get(&key, &[2, 2]).unwrap(),
            Some(vec![row[2].clone(), row[2].clone()])
        );
        assert_eq!(cache.get(&key, &[]).unwrap(), Some(vec![]));
        let err = cache.get(&key, &[4]).unwrap_err();
        assert!(matches!(err, Error::Data(_)), "{err}");
        let err = cache.get_by(0, &[row[2].clone()], &[0, 9]).unwrap_err();
        assert!(matches!(err, Error::Data(_)), "{err}");
    }

    #[test]
    fn null_keys_match_nothing_and_are_not_stored() {
        let cache = customers();
        cache.upsert(&customer(1, "A", "NL", 1)).unwrap();
        assert_eq!(cache.get(&[Datum::Null], &[0]).unwrap(), None);
        cache.remove(&[Datum::Null]).unwrap();
        let err = cache
            .upsert(&[Datum::Null, s("x"), s("NL"), Datum::BigInt(1)])
            .unwrap_err();
        assert!(matches!(err, Error::Data(_)), "{err}");
        // Nulls in non-key columns are stored and read back.
        let with_nulls = vec![Datum::Int(2), Datum::Null, Datum::Null, Datum::Null];
        cache.upsert(&with_nulls).unwrap();
        assert_eq!(
            cache.get(&[Datum::Int(2)], &[0, 1, 2, 3]).unwrap(),
            Some(with_nulls)
        );
        assert_eq!(
            cache.get_by(0, &[Datum::Null], &[0]).unwrap(),
            Vec::<Row>::new()
        );
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let cache = customers();
        let data = |r: Result<()>| matches!(r, Err(Error::Data(_)));
        assert!(data(cache.upsert(&[Datum::Int(1)])));
        assert!(data(cache.upsert(&[
            Datum::BigInt(1),
            s("a"),
            s("b"),
            Datum::BigInt(1)
        ])));
        assert!(data(cache.upsert(&[
            Datum::Int(1),
            Datum::Int(2),
            s("b"),
            Datum::Null
        ])));
        assert!(matches!(cache.get(&[], &[0]), Err(Error::Data(_))));
        assert!(matches!(cache.get(&[s("1")], &[0]), Err(Error::Data(_))));
        assert!(data(cache.remove(&[Datum::Int(1), Datum::Int(2)])));
        assert!(matches!(cache.get_by(0, &[], &[0]), Err(Error::Data(_))));
        assert!(matches!(
            cache.get_by(1, &[s("x")], &[0]),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            cache.get_by(0, &[Datum::Int(1)], &[0]),
            Err(Error::Data(_))
        ));
        assert!(cache.is_empty());

        let schema = cache.schema().clone();
        let config = |r: Result<FullCache>| matches!(r, Err(Error::Config(_)));
        assert!(config(FullCache::new(schema.clone(), vec![vec![]])));
        assert!(config(FullCache::new(
            schema.clone(),
            vec![vec![1], vec![4]]
        )));
        let mut no_key = (*schema).clone();
        no_key.primary_keys.clear();
        assert!(config(FullCache::new(Arc::new(no_key), vec![])));
        let mut unknown_key = (*schema).clone();
        unknown_key.primary_keys = vec!["nope".into()];
        assert!(config(FullCache::new(Arc::new(unknown_key), vec![])));
    }

    #[test]
    fn composite_keys_with_strings() {
        // Key (tenant STRING, id BIGINT, region STRING): short (inline) and long strings.
        let schema = schema(
            &[
                ("value", DataType::Double),
                ("region", STRING),
                ("id", DataType::BigInt),
                ("tenant", STRING),
            ],
            &["tenant", "id", "region"],
        );
        let cache = FullCache::new(schema, vec![]).unwrap();
        let tenants = ["a", "abcdefg", "abcdefgh", "a much longer tenant name"];
        let regions = ["", "eu", "eu-west-1-long"];
        let mut expected = BTreeMap::new();
        let mut v = 0.0;
        for t in tenants {
            for id in [-1i64, 0, 1 << 40] {
                for r in regions {
                    v += 1.5;
                    cache
                        .upsert(&[Datum::Double(v), s(r), Datum::BigInt(id), s(t)])
                        .unwrap();
                    expected.insert((t, id, r), v);
                }
            }
        }
        assert_eq!(cache.len(), expected.len());
        for (&(t, id, r), &v) in &expected {
            let key = [s(t), Datum::BigInt(id), s(r)];
            assert_eq!(
                cache.get(&key, &[0, 3]).unwrap(),
                Some(vec![Datum::Double(v), s(t)])
            );
        }
        // Prefixes and near misses of string key parts do not match.
        assert_eq!(
            cache
                .get(&[s("abcdef"), Datum::BigInt(0), s("eu")], &[0])
                .unwrap(),
            None
        );
        assert_eq!(
            cache
                .get(&[s("a"), Datum::BigInt(0), s("eu-west-1")], &[0])
                .unwrap(),
            None
        );
        assert_eq!(
            cache
                .get(&[s("a"), Datum::BigInt(2), s("eu")], &[0])
                .unwrap(),
            None
        );
        cache
            .remove(&[s("abcdefgh"), Datum::BigInt(0), s("")])
            .unwrap();
        assert_eq!(
            cache
                .get(&[s("abcdefgh"), Datum::BigInt(0), s("")], &[0])
                .unwrap(),
            None
        );
        assert_eq!(
            cache
                .get(&[s("abcdefg"), Datum::BigInt(0), s("")], &[3])
                .unwrap(),
            Some(vec![s("abcdefg")])
        );
        assert_eq!(cache.len(), expected.len() - 1);
    }

    #[test]
    fn secondary_index_follows_updates_and_deletes() {
        let schema = schema(
            &[
                ("id", DataType::Int),
                ("name", STRING),
                ("country", STRING),
                ("score", DataType::BigInt),
            ],
            &["id"],
        );
        // Index 0: country; index 1: (score, country).
        let cache = FullCache::new(schema, vec![vec![2], vec![3, 2]]).unwrap();
        let nl = || [s("Netherlands (long)")];
        for id in [5, 3, 9, 1] {
            cache
                .upsert(&customer(id, &format!("c{id}"), "Netherlands (long)", 1))
                .unwrap();
        }
        cache.upsert(&customer(2, "c2", "DE", 1)).unwrap();
        let ids =
            |rows: Vec<Row>| -> Vec<Datum> { rows.into_iter().map(|r| r[0].clone()).collect() };
        // Ordered by primary key.
        assert_eq!(
            ids(cache.get_by(0, &nl(), &[0, 1]).unwrap()),
            vec![Datum::Int(1), Datum::Int(3), Datum::Int(5), Datum::Int(9)]
        );
        assert_eq!(
            cache.get_by(0, &[s("DE")], &[1, 0]).unwrap(),
            vec![vec![s("c2"), Datum::Int(2)]]
        );
        assert_eq!(
            cache.get_by(0, &[s("FR")], &[0]).unwrap(),
            Vec::<Row>::new()
        );
        // Moving a row to another value moves it in the index.
        cache.upsert(&customer(3, "c3", "DE", 2)).unwrap();
        assert_eq!(
            ids(cache.get_by(0, &nl(), &[0]).unwrap()),
            vec![Datum::Int(1), Datum::Int(5), Datum::Int(9)]
        );
        assert_eq!(
            ids(cache.get_by(0, &[s("DE")], &[0]).unwrap()),
            vec![Datum::Int(2), Datum::Int(3)]
        );
        // Updating a non-indexed column keeps the row in place.
        cache
            .upsert(&customer(5, "c5 renamed", "Netherlands (long)", 1))
            .unwrap();
        assert_eq!(
            cache.get_by(0, &nl(), &[1]).unwrap(),
            vec![vec![s("c1")], vec![s("c5 renamed")], vec![s("c9")]]
        );
        // Multi-column index.
        assert_eq!(
            ids(cache.get_by(1, &[Datum::BigInt(1), s("DE")], &[0]).unwrap()),
            vec![Datum::Int(2)]
        );
        assert_eq!(
            ids(cache.get_by(1, &[Datum::BigInt(2), s("DE")], &[0]).unwrap()),
            vec![Datum::Int(3)]
        );
        assert_eq!(
            cache.get_by(1, &[Datum::Null, s("DE")], &[0]).unwrap(),
            Vec::<Row>::new()
        );
        // A null in an indexed column takes the row out of the index.
        cache
            .upsert(&[Datum::Int(9), s("c9"), Datum::Null, Datum::BigInt(1)])
            .unwrap();
        assert_eq!(
            ids(cache.get_by(0, &nl(), &[0]).unwrap()),
            vec![Datum::Int(1), Datum::Int(5)]
        );
        // Deletes.
        cache.remove(&[Datum::Int(1)]).unwrap();
        cache.remove(&[Datum::Int(2)]).unwrap();
        assert_eq!(
            ids(cache.get_by(0, &nl(), &[0]).unwrap()),
            vec![Datum::Int(5)]
        );
        assert_eq!(
            ids(cache.get_by(0, &[s("DE")], &[0]).unwrap()),
            vec![Datum::Int(3)]
        );
        assert_eq!(
            cache.get_by(1, &[Datum::BigInt(1), s("DE")], &[0]).unwrap(),
            Vec::<Row>::new()
        );
        // Back in after a re-insert and a compaction.
        cache
            .upsert(&customer(1, "c1", "Netherlands (long)", 1))
            .unwrap();
        cache.compact_all();
        assert_eq!(
            ids(cache.get_by(0, &nl(), &[0]).unwrap()),
            vec![Datum::Int(1), Datum::Int(5)]
        );
    }

    #[test]
    fn clear_drops_every_row_and_its_memory() {
        let cache = customers();
        for id in 0..5000 {
            cache
                .upsert(&customer(id, "name", "NL", i64::from(id)))
                .unwrap();
        }
        let full = cache.memory_bytes();
        cache.clear();
        assert!(cache.is_empty());
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.binary_row_bytes(), 0);
        assert_eq!(cache.get(&[Datum::Int(7)], &[0]).unwrap(), None);
        assert_eq!(
            cache.get_by(0, &[s("NL")], &[0]).unwrap(),
            Vec::<Row>::new()
        );
        assert!(
            cache.memory_bytes() < full / 10,
            "{} vs {full}",
            cache.memory_bytes()
        );
        cache.upsert(&customer(7, "again", "NL", 1)).unwrap();
        assert_eq!(
            cache.get_by(0, &[s("NL")], &[1]).unwrap(),
            vec![vec![s("again")]]
        );
    }

    #[test]
    fn garbage_compaction_keeps_contents_and_bounds_memory() {
        let cache = customers();
        let rows = 2000;
        for round in 0..40i64 {
            for id in 0..rows {
                let country = if (i64::from(id) + round) % 3 == 0 {
                    "NL"
                } else {
                    "DE"
                };
                cache
                    .upsert(&customer(
                        id,
                        &format!("name {id} round {round}"),
                        country,
                        round,
                    ))
                    .unwrap();
            }
            if round == 20 {
                // Deletes leave garbage too.
                for id in (0..rows).step_by(2) {
                    cache.remove(&[Datum::Int(id)]).unwrap();
                }
            }
        }
        assert_eq!(cache.len(), rows as usize);
        for id in 0..rows {
            assert_eq!(
                cache.get(&[Datum::Int(id)], &[1, 3]).unwrap(),
                Some(vec![s(&format!("name {id} round 39")), Datum::BigInt(39)])
            );
        }
        let nl: Vec<Row> = (0..rows)
            .filter(|id| (i64::from(*id) + 39) % 3 == 0)
            .map(|id| vec![Datum::Int(id)])
            .collect();
        assert_eq!(cache.get_by(0, &[s("NL")], &[0]).unwrap(), nl);
        // 40 versions of every row were written; compaction kept the arenas near the
        // live data (garbage <= live/4 or 16 KiB per shard).
        let live = cache.binary_row_bytes();
        assert!(
            cache.memory_bytes() < 2 * live + SHARDS * COMPACT_MIN_GARBAGE,
            "{} bytes for {live} live",
            cache.memory_bytes()
        );
        cache.compact_all();
        assert!(
            cache.memory_bytes() < 2 * live,
            "{} for {live}",
            cache.memory_bytes()
        );
        for id in (0..rows).step_by(97) {
            assert_eq!(
                cache.get(&[Datum::Int(id)], &[3]).unwrap(),
                Some(vec![Datum::BigInt(39)])
            );
        }
    }

    #[test]
    fn readers_and_a_writer_share_the_cache() {
        fn is_send_sync<T: Send + Sync>() {}
        is_send_sync::<FullCache>();
        let cache = customers();
        for id in 0..1000 {
            cache.upsert(&customer(id, "n", "NL", 0)).unwrap();
        }
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for round in 1..20 {
                    for id in 0..1000 {
                        cache.upsert(&customer(id, "n", "NL", round)).unwrap();
                    }
                }
            });
            for _ in 0..2 {
                scope.spawn(|| {
                    for _ in 0..5 {
                        for id in 0..1000 {
                            let row = cache.get(&[Datum::Int(id)], &[0, 3]).unwrap().unwrap();
                            assert_eq!(row[0], Datum::Int(id));
                        }
                    }
                });
            }
        });
        assert_eq!(cache.len(), 1000);
        assert_eq!(cache.get_by(0, &[s("NL")], &[0]).unwrap().len(), 1000);
    }

    /// The 8-column row of the memory target: INT key, BIGINT, two ~10-character strings,
    /// DOUBLE, DECIMAL(12, 2), TIMESTAMP(3), BOOLEAN.
    fn wide_cache(secondary: Vec<Vec<usize>>) -> FullCache {
        let schema = schema(
            &[
                ("id", DataType::Int),
                ("amount", DataType::BigInt),
                ("name", STRING),
                ("city", STRING),
                ("ratio", DataType::Double),
                (
                    "price",
                    DataType::Decimal {
                        precision: 12,
                        scale: 2,
                    },
                ),
                ("updated", DataType::Timestamp(3)),
                ("active", DataType::Boolean),
            ],
            &["id"],
        );
        FullCache::new(schema, secondary).unwrap()
    }

    fn wide_row(id: i32) -> Row {
        vec![
            Datum::Int(id),
            Datum::BigInt(i64::from(id) * 1_000_003),
            s(&format!("name-{:05}", id % 100_000)),
            s(&format!("city-{:05}", id % 977)),
            Datum::Double(f64::from(id) / 7.0),
            Datum::Decimal(i128::from(id) * 101),
            Datum::Timestamp(Timestamp {
                millis: 1_700_000_000_000 + i64::from(id),
                nanos_of_milli: 0,
            }),
            Datum::Boolean(id % 2 == 0),
        ]
    }

    #[test]
    fn memory_stays_within_one_and_a_half_binary_rows() {
        let cache = wide_cache(vec![]);
        for id in 0..200_000 {
            cache.upsert(&wide_row(id)).unwrap();
        }
        let rows = cache.binary_row_bytes();
        let memory = cache.memory_bytes();
        assert_eq!(rows, 200_000 * encoded_len(&cache, &wide_row(1)));
        let ratio = memory as f64 / rows as f64;
        println!("200,000 rows: {memory} bytes for {rows} BinaryRow bytes, ratio {ratio:.3}");
        assert!(
            ratio <= 1.5,
            "{memory} bytes for {rows} BinaryRow bytes: {ratio:.3}"
        );
        assert_eq!(
            cache.get(&[Datum::Int(123_456)], &[2, 0]).unwrap(),
            Some(vec![s("name-23456"), Datum::Int(123_456)])
        );
    }

    /// Throughput of primary-key hits on one thread; run with
    /// `cargo test --release --lib lookup::full -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn measure_lookups_per_second() {
        const ROWS: i32 = 1_000_000;
        let cache = wide_cache(vec![]);
        let started = std::time::Instant::now();
        for id in 0..ROWS {
            cache.upsert(&wide_row(id)).unwrap();
        }
        let load = started.elapsed();
        let memory = cache.memory_bytes();
        let rows = cache.binary_row_bytes();
        println!(
            "loaded {ROWS} rows in {load:?} ({:.0} upserts/s); memory {memory} bytes, BinaryRow {rows} bytes: ratio {:.3} ({:.1} bytes/row for {:.1})",
            f64::from(ROWS) / load.as_secs_f64(),
            memory as f64 / rows as f64,
            memory as f64 / f64::from(ROWS),
            rows as f64 / f64::from(ROWS),
        );
        // Keys in a random order (xorshift-driven Fisher-Yates), so most probes miss the
        // CPU caches as real join keys do.
        let mut keys: Vec<Datum> = (0..ROWS).map(Datum::Int).collect();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for i in (1..keys.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            keys.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let projection = [1, 2]; // BIGINT and a 10-character STRING
        // Nanoseconds this thread ran on a CPU (the machine may be shared with builds).
        let on_cpu = || -> Option<u64> {
            let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
            text.split_whitespace().next()?.parse().ok()
        };
        let sequential: Vec<Datum> = (0..ROWS).map(Datum::Int).collect();
        // The first 64 random keys, repeated: their rows and slots stay in the CPU
        // caches, which shows the cost of the code apart from memory latency.
        let in_cache: Vec<Datum> = keys
            .iter()
            .take(64)
            .cycle()
            .take(keys.len())
            .cloned()
            .collect();
        for (order, keys) in [
            ("random", keys),
            ("sequential", sequential),
            ("in-cache", in_cache),
        ] {
            let (mut wall, mut cpu) = (f64::MAX, f64::MAX);
            for _ in 0..3 {
                let cpu_start = on_cpu();
                let started = std::time::Instant::now();
                let mut hits = 0usize;
                for key in &keys {
                    if let Some(row) = cache.get(std::slice::from_ref(key), &projection).unwrap() {
                        hits += row.len() / 2;
                    }
                }
                wall = wall.min(started.elapsed().as_secs_f64());
                if let (Some(a), Some(b)) = (cpu_start, on_cpu()) {
                    cpu = cpu.min((b - a) as f64 / 1e9);
                }
                assert_eq!(hits, ROWS as usize);
            }
            println!(
                "{order} keys: {:.0} hit lookups/s by the wall clock ({:.0} ns each), {:.0}/s on CPU ({:.0} ns each)",
                f64::from(ROWS) / wall,
                wall * 1e9 / f64::from(ROWS),
                f64::from(ROWS) / cpu,
                cpu * 1e9 / f64::from(ROWS),
            );
        }
    }

    // Model test: random operations against a BTreeMap.

    /// Key (id INT, name STRING), then grp STRING, val BIGINT, f DOUBLE; secondary
    /// indexes on grp and on (val, grp).
    fn model_cache(colliding: bool) -> FullCache {
        let schema = schema(
            &[
                ("grp", STRING),
                ("id", DataType::Int),
                ("val", DataType::BigInt),
                ("name", STRING),
                ("f", DataType::Double),
            ],
            &["id", "name"],
        );
        let mut cache = FullCache::new(schema, vec![vec![0], vec![2, 0]]).unwrap();
        if colliding {
            // Four fingerprints in two shards: nearly every key and value collides.
            cache.fingerprint_mask = 0x8000_0001;
        }
        cache
    }

    const NAMES: [&str; 3] = ["a", "bb", "a name longer than seven"];
    const GROUPS: [Option<&str>; 3] = [None, Some("x"), Some("a group name of some length")];

    #[derive(Debug, Clone)]
    enum Op {
        Upsert {
            id: i32,
            name: usize,
            grp: usize,
            val: Option<i64>,
            f: i32,
        },
        Remove {
            id: i32,
            name: usize,
        },
        Get {
            id: i32,
            name: usize,
            projection: Vec<usize>,
        },
        GetBy {
            index: usize,
            grp: usize,
            val: Option<i64>,
            projection: Vec<usize>,
        },
        /// More keys than a `get_many` chunk; `None` is a key with a null.
        GetMany {
            keys: Vec<Option<(i32, usize)>>,
            projection: Vec<usize>,
        },
        Compact,
        Clear,
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        let projection = prop::collection::vec(0usize..5, 0..6);
        prop_oneof![
            8 => (0..12i32, 0..3usize, 0..3usize, prop::option::of(0..3i64), any::<i32>())
                .prop_map(|(id, name, grp, val, f)| Op::Upsert { id, name, grp, val, f }),
            3 => (0..12i32, 0..3usize).prop_map(|(id, name)| Op::Remove { id, name }),
            4 => (0..12i32, 0..3usize, projection.clone())
                .prop_map(|(id, name, projection)| Op::Get { id, name, projection }),
            4 => (0..2usize, 0..3usize, prop::option::of(0..3i64), projection.clone())
                .prop_map(|(index, grp, val, projection)| Op::GetBy { index, grp, val, projection }),
            2 => (prop::collection::vec(prop::option::weighted(0.95, (0..12i32, 0..3usize)), 0..80), projection)
                .prop_map(|(keys, projection)| Op::GetMany { keys, projection }),
            1 => Just(Op::Compact),
            1 => Just(Op::Clear),
        ]
    }

    fn model_row(id: i32, name: usize, grp: usize, val: Option<i64>, f: i32) -> Row {
        vec![
            GROUPS[grp].map_or(Datum::Null, s),
            Datum::Int(id),
            val.map_or(Datum::Null, Datum::BigInt),
            s(NAMES[name]),
            Datum::Double(f64::from(f)),
        ]
    }

    fn project(row: &[Datum], projection: &[usize]) -> Row {
        projection.iter().map(|&p| row[p].clone()).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn behaves_like_a_sorted_map(
            ops in prop::collection::vec(op_strategy(), 1..120),
            colliding in any::<bool>(),
        ) {
            let cache = model_cache(colliding);
            // (id, name) orders like the primary key (INT, then STRING bytes).
            let mut model: BTreeMap<(i32, &str), Row> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Upsert { id, name, grp, val, f } => {
                        let row = model_row(id, name, grp, val, f);
                        cache.upsert(&row).unwrap();
                        model.insert((id, NAMES[name]), row);
                    }
                    Op::Remove { id, name } => {
                        cache.remove(&[Datum::Int(id), s(NAMES[name])]).unwrap();
                        model.remove(&(id, NAMES[name]));
                    }
                    Op::Get { id, name, projection } => {
                        let got = cache.get(&[Datum::Int(id), s(NAMES[name])], &projection).unwrap();
                        let expected = model.get(&(id, NAMES[name])).map(|r| project(r, &projection));
                        prop_assert_eq!(got, expected);
                    }
                    Op::GetBy { index, grp, val, projection } => {
                        let grp = GROUPS[grp].map_or(Datum::Null, s);
                        let val = val.map_or(Datum::Null, Datum::BigInt);
                        let (values, columns) = if index == 0 {
                            (vec![grp], vec![0])
                        } else {
                            (vec![val, grp], vec![2, 0])
                        };
                        let got = cache.get_by(index, &values, &projection).unwrap();
                        let expected: Vec<Row> = model
                            .values()
                            .filter(|row| {
                                columns.iter().zip(&values).all(|(&c, v)| !v.is_null() && row[c] == *v)
                            })
                            .map(|row| project(row, &projection))
                            .collect();
                        prop_assert_eq!(got, expected);
                    }
                    Op::GetMany { keys, projection } => {
                        let probes: Vec<Row> = keys
                            .iter()
                            .map(|k| match k {
                                Some((id, name)) => vec![Datum::Int(*id), s(NAMES[*name])],
                                None => vec![Datum::Null, s(NAMES[0])],
                            })
                            .collect();
                        let probes: Vec<&[Datum]> = probes.iter().map(Vec::as_slice).collect();
                        let got = cache.get_many(&probes, &projection).unwrap();
                        let expected: Vec<Option<Row>> = keys
                            .iter()
                            .map(|k| {
                                k.and_then(|(id, name)| model.get(&(id, NAMES[name])))
                                    .map(|r| project(r, &projection))
                            })
                            .collect();
                        prop_assert_eq!(got, expected);
                    }
                    Op::Compact => cache.compact_all(),
                    Op::Clear => {
                        cache.clear();
                        model.clear();
                    }
                }
                prop_assert_eq!(cache.len(), model.len());
                let bytes: usize = model.values().map(|r| encoded_len(&cache, r)).sum();
                prop_assert_eq!(cache.binary_row_bytes(), bytes);
            }
        }
    }
}
