//! The `full` lookup cache: a whole primary-key table in memory, compactly.
//!
//! **Rows.** Each row is kept once, as Paimon BinaryRow bytes of the columns the cache
//! keeps (the primary key, the secondary indexes' columns and those its join selects; a
//! join selecting five columns of a fifty-column table holds five), in the append-only
//! byte arena of one of `SHARDS` shards. A record is a LEB128 length counted in 8-byte words
//! (a BinaryRow is whole words, so rows under 1 KiB take one byte) followed by the row.
//! Lookups copy only the projected fields out of those bytes, as a [`ProjectedRow`]
//! (no string is decoded or allocated on its own).
//!
//! **Primary index.** Per shard a `RowTable`: linear probing over 8-byte slots holding
//! the key's fingerprint and the record's arena offset. The key is not stored a second
//! time: a probe whose fingerprint matches is compared with the key fields read in place
//! from the stored row ([`binary_row::field_image`]). At a load of 7/16..7/8 the table
//! costs 9–18 bytes a row, the record prefix 1, and the arena grows by an eighth at a time
//! instead of doubling, so a typical 100-byte row costs ~1.1–1.3× its BinaryRow size. A
//! hit touches two cache lines that are likely misses: its slot and its record.
//!
//! **Hashing.** A key's 32-bit fingerprint is foldhash (seeded per cache) over its field
//! images; its top `SHARD_BITS` bits pick the shard and `table_hash` spreads it into
//! a home bucket, so the table is rebuilt from its slots alone when it grows or shrinks.
//!
//! **Secondary indexes** (joins on non-key columns) map the fingerprint of a row's index
//! columns to its key fingerprint: 8 bytes an entry, in their own `SHARDS` shards keyed
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

use std::borrow::Cow;
use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

mod arena;
mod columns;
mod row_table;
mod secondary;

use arena::{MAX_ARENA, MIN_ARENA, Shard, push_record, record};
use columns::{Columns, Fields, StoredProjection, stored_positions};
use row_table::RowTable;
use secondary::SecondaryIndex;

use super::ProjectedRow;
use super::projected::{RowFields, projected_types};
use crate::error::{Error, Result};
use crate::table::binary_row;
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

/// The table columns lookups return, their positions among the stored fields and their
/// types.
struct Returned {
    columns: Vec<usize>,
    positions: Vec<usize>,
    types: Arc<[DataType]>,
}

/// A whole table in memory for lookup joins, by primary key and by secondary indexes.
pub(crate) struct FullCache {
    schema: Arc<TableSchema>,
    /// The table column of each field a stored row keeps, in schema order: the primary
    /// key, the secondary indexes' columns and the columns lookups return. The others are
    /// dropped as rows come in (as Paimon's lookup join reads only the projected fields),
    /// so a join selecting a few columns of a wide table holds only those.
    stored: Vec<usize>,
    /// For each table column, its position among the stored fields (`None`: dropped).
    stored_at: Vec<Option<usize>>,
    /// Types of the stored fields.
    types: Vec<DataType>,
    /// The columns a join's lookups return, mapped once (not on every lookup).
    returned: Returned,
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
    /// A cache keeping every column of the table.
    #[cfg(test)]
    pub(crate) fn new(schema: Arc<TableSchema>, secondary: Vec<Vec<usize>>) -> Result<Self> {
        let all: Vec<usize> = (0..schema.fields.len()).collect();
        Self::returning(schema, secondary, &all)
    }

    /// A cache whose lookups return (some of) the table columns `returned`: it keeps
    /// those, the primary key and the `secondary` indexes' columns, and no other.
    /// `secondary`: for each secondary index, the table column indices it is keyed by
    /// (joins on non-primary-key columns). Errors (`Error::Config`) when an index is
    /// empty or names a column out of range, a returned column is out of range, or the
    /// table has no usable primary key.
    pub(crate) fn returning(
        schema: Arc<TableSchema>,
        secondary: Vec<Vec<usize>>,
        returned: &[usize],
    ) -> Result<Self> {
        let table_types: Vec<DataType> = schema.fields.iter().map(|f| f.data_type).collect();
        let n = table_types.len();
        if let Some(c) = returned.iter().find(|&&c| c >= n) {
            return Err(Error::Config(format!(
                "returned column {c} is out of range (the table has {n} columns)"
            )));
        }
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
            indexes.push(columns);
        }
        let mut kept = vec![false; n];
        for &c in returned.iter().chain(&key).chain(indexes.iter().flatten()) {
            if let Some(k) = kept.get_mut(c) {
                *k = true;
            }
        }
        let stored: Vec<usize> = (0..n).filter(|&c| kept[c]).collect();
        let mut stored_at = vec![None; n];
        for (position, &c) in stored.iter().enumerate() {
            stored_at[c] = Some(position);
        }
        let secondary = indexes
            .into_iter()
            .map(|columns| {
                Ok(SecondaryIndex::new(Columns::new(
                    columns,
                    &stored_at,
                    &table_types,
                )?))
            })
            .collect::<Result<_>>()?;
        let types: Vec<DataType> = stored.iter().map(|&c| table_types[c]).collect();
        let positions = stored_positions(&stored, &stored_at, returned)?;
        let returned = Returned {
            types: projected_types(&types, &positions)?,
            positions,
            columns: returned.to_vec(),
        };
        Ok(FullCache {
            key: Columns::new(key, &stored_at, &table_types)?,
            types,
            returned,
            stored,
            stored_at,
            schema,
            secondary,
            hash_state: foldhash::fast::RandomState::default(),
            shards: Box::new(std::array::from_fn(|_| RwLock::default())),
            #[cfg(test)]
            fingerprint_mask: u32::MAX,
        })
    }

    #[cfg(test)]
    pub(crate) fn schema(&self) -> &Arc<TableSchema> {
        &self.schema
    }

    /// Inserts or replaces the row of its primary key (row = all columns in schema order;
    /// only the kept ones are stored). A null key column, a wrong arity or a kept
    /// column's value of the wrong type is `Error::Data`.
    pub(crate) fn upsert(&self, row: &[Datum]) -> Result<()> {
        check_arity("row", row.len(), self.stored_at.len())?;
        for &k in &self.key.columns {
            if row.get(k).is_none_or(Datum::is_null) {
                let name = self.schema.fields.get(k).map_or("?", |f| f.name.as_str());
                return Err(Error::Data(format!("primary key column `{name}` is null")));
            }
        }
        let n = self.types.len();
        with_scratch(|buf| {
            binary_row::encode_columns_into(buf, row, &self.stored, &self.types)?;
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
    pub(crate) fn remove(&self, key: &[Datum]) -> Result<()> {
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

    /// The row of the primary key, only the columns of `projection` (table column indices,
    /// in that order). A key containing a null matches nothing. Keys compare as their
    /// BinaryRow images do (floating-point keys by bits, TIMESTAMP(p <= 3) by
    /// milliseconds). Allocates only the result.
    pub(crate) fn get(&self, key: &[Datum], projection: &[usize]) -> Result<Option<ProjectedRow>> {
        check_arity("primary key", key.len(), self.key.len())?;
        let (projection, types) = self.projection(projection)?;
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
            ProjectedRow::project(&mut Vec::new(), body, &self.types, &projection, &types).map(Some)
        })
    }

    /// [`get`](Self::get) for many keys, in their order.
    pub(crate) fn get_many(
        &self,
        keys: &[&[Datum]],
        projection: &[usize],
    ) -> Result<Vec<Option<ProjectedRow>>> {
        let (_, types) = self.projection(projection)?;
        let mut out = Vec::with_capacity(keys.len());
        let mut scratch = Vec::new();
        self.get_many_with(keys, projection, |row| {
            out.push(
                row.map(|row| row.to_projected(&mut scratch, &types))
                    .transpose()?,
            );
            Ok(())
        })?;
        Ok(out)
    }

    /// Hands the columns `projection` of each key's row (`None`: no row) to `visit`, in
    /// the keys' order, read in place: a join writes them out without copying them into a
    /// row of their own first (that copy and its allocation were a twentieth of a `full`
    /// join's CPU). `visit` runs under the read locks of the shards its chunk of keys
    /// touches, so writers to those shards wait for it; an error from it ends the lookup.
    ///
    /// A hit costs two likely cache misses (its slot, its record); here each step is done
    /// for a whole chunk of keys before the next, so the misses of a chunk are in flight
    /// together instead of one after another. Read locks of the shards a chunk touches are
    /// taken in shard order and held for the chunk.
    pub(crate) fn get_many_with(
        &self,
        keys: &[&[Datum]],
        projection: &[usize],
        mut visit: impl FnMut(Option<RowFields<'_>>) -> Result<()>,
    ) -> Result<()> {
        let (positions, _) = self.projection(projection)?;
        with_scratch(|buf| {
            for chunk in keys.chunks(BATCH) {
                self.get_chunk(chunk, &positions, buf, &mut visit)?;
            }
            Ok(())
        })
    }

    fn get_chunk(
        &self,
        keys: &[&[Datum]],
        positions: &[usize],
        buf: &mut Vec<u8>,
        visit: &mut impl FnMut(Option<RowFields<'_>>) -> Result<()>,
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
        // 4. Verify and hand on, now from cache.
        for &(start, end, fingerprint) in probes {
            let (Some(fp), Some(probe)) = (fingerprint, buf.get(start..end)) else {
                visit(None)?;
                continue;
            };
            let Some(shard) = shard(fp) else {
                visit(None)?;
                continue;
            };
            let probe = self.key.in_probe(probe);
            let found = shard.rows.find(fp, |at| {
                self.key_at(&shard.arena, at)
                    .is_some_and(|stored| stored.same_values(probe))
            });
            let Some(at) = found.and_then(|index| shard.rows.offset(index)) else {
                visit(None)?;
                continue;
            };
            let (body, _) = record(&shard.arena, at).ok_or_else(corrupt)?;
            visit(Some(RowFields::of(body, &self.types, positions)))?;
        }
        Ok(())
    }

    /// Every row whose secondary-index columns equal `values` (null matches nothing),
    /// ordered by primary key, each projected to `projection`.
    pub(crate) fn get_by(
        &self,
        index: usize,
        values: &[Datum],
        projection: &[usize],
    ) -> Result<Vec<ProjectedRow>> {
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
        let (projection, types) = self.projection(projection)?;
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
            let mut found: Vec<(Row, ProjectedRow)> = Vec::new();
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
                            ProjectedRow::project(
                                &mut Vec::new(),
                                body,
                                &self.types,
                                &projection,
                                &types,
                            )?,
                        ));
                    }
                }
            }
            found.sort_by(|a, b| compare_rows(&a.0, &b.0));
            Ok(found.into_iter().map(|(_, row)| row).collect())
        })
    }

    /// The table columns the cache was built to return (in the schema it was loaded in).
    pub(crate) fn returned_columns(&self) -> &[usize] {
        &self.returned.columns
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| read(s).rows.len()).sum()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| read(s).rows.is_empty())
    }

    /// Heap bytes this structure holds (arenas, index tables, secondary indexes, the shard
    /// arrays), measured from capacities and allocation sizes, not estimated per row.
    pub(crate) fn memory_bytes(&self) -> usize {
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

    /// Sum over live rows of the BinaryRow size of their kept columns (what is stored),
    /// for the memory ratio.
    pub(crate) fn binary_row_bytes(&self) -> usize {
        self.shards.iter().map(|s| read(s).row_bytes).sum()
    }

    #[cfg(test)]
    /// Drops every row (a reload) and gives the memory back.
    pub(crate) fn clear(&self) {
        // All primary shards first, so no writer is between its primary and secondary
        // updates while the secondary indexes are cleared.
        let mut guards: Vec<_> = self.shards.iter().map(write).collect();
        for index in &self.secondary {
            index.clear();
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

    /// Where the table columns of `projection` are among the stored fields, and their
    /// types; a column out of the table's range, or one the cache does not keep, is
    /// `Error::Data`. The join's own projection is mapped once, in [`Self::returning`].
    fn projection(&self, projection: &[usize]) -> Result<StoredProjection<'_>> {
        if projection == self.returned.columns {
            return Ok((
                Cow::Borrowed(&self.returned.positions),
                self.returned.types.clone(),
            ));
        }
        let positions = stored_positions(&self.stored, &self.stored_at, projection)?;
        let types = projected_types(&self.types, &positions)?;
        Ok((Cow::Owned(positions), types))
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
mod model_tests;
#[cfg(test)]
mod tests;
