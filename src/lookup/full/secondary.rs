//! Secondary indexes of the `full` lookup cache (joins on non-key columns): 8 bytes an
//! entry, fingerprint to fingerprint, so they stay valid when a primary shard compacts
//! (see the parent module's notes on secondary indexes and lock order).

use std::sync::RwLock;

use hashbrown::HashTable;

use super::columns::Columns;
use super::{SHARDS, read, shard_of, table_hash, write};

/// One row's entry in a secondary index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SecondaryEntry {
    /// Fingerprint of the row's index columns (what the entry is found by).
    value: u32,
    /// Fingerprint of the row's primary key (where the row is).
    key: u32,
}

/// A secondary index: the fingerprints of rows' index columns, each mapped to the row's
/// key fingerprint, in `SHARDS` shards picked by the value fingerprint.
pub(super) struct SecondaryIndex {
    /// The index columns, as the cache stores them.
    pub(super) columns: Columns,
    shards: Box<[RwLock<HashTable<SecondaryEntry>>; SHARDS]>,
}

impl SecondaryIndex {
    pub(super) fn new(columns: Columns) -> Self {
        SecondaryIndex {
            columns,
            shards: Box::new(std::array::from_fn(|_| RwLock::default())),
        }
    }

    fn shard(&self, value: u32) -> &RwLock<HashTable<SecondaryEntry>> {
        &self.shards[shard_of(value)]
    }

    pub(super) fn insert(&self, value: u32, key: u32) {
        write(self.shard(value)).insert_unique(
            table_hash(value),
            SecondaryEntry { value, key },
            |e| table_hash(e.value),
        );
    }

    /// Removes one entry equal to (`value`, `key`): equal entries (rows whose keys share a
    /// fingerprint) are interchangeable.
    pub(super) fn remove(&self, value: u32, key: u32) {
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
    pub(super) fn candidates(&self, value: u32) -> Vec<u32> {
        read(self.shard(value))
            .iter_hash(table_hash(value))
            .filter(|e| e.value == value)
            .map(|e| e.key)
            .collect()
    }

    /// Drops every entry and gives the memory back (the caller holds every primary
    /// shard's write lock).
    #[cfg(test)]
    pub(super) fn clear(&self) {
        for table in self.shards.iter() {
            *write(table) = HashTable::new();
        }
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| read(s).allocation_size())
            .sum::<usize>()
            + std::mem::size_of_val(&*self.shards)
    }
}
