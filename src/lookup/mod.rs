//! Lookup tables for joins: a table's point lookups behind a cache of recent keys, kept
//! fresh from this process's commits (immediately) and from other writers' snapshots
//! (every refresh interval).

pub mod full;

use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;

use crate::error::Result;
use crate::lsm::lookup::PointLookup;
use crate::table::binary_row;
use crate::table::datum::{Datum, Row};
use crate::table::types::DataType;

/// Cache settings of one join.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// 0 disables the cache: every lookup reads the table.
    pub max_rows: u64,
    pub expire_after_write: Option<Duration>,
    pub expire_after_access: Option<Duration>,
}

/// A table's point lookups behind an LRU cache of keys, misses included, so a stream of
/// unknown keys does not read the table each time.
pub struct LookupTable {
    lookup: Arc<PointLookup>,
    key_types: Vec<DataType>,
    cache: Option<Cache<Vec<u8>, Option<Arc<Row>>>>,
}

impl std::fmt::Debug for LookupTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupTable")
            .field("lookup", &self.lookup)
            .finish()
    }
}

impl LookupTable {
    pub fn new(lookup: Arc<PointLookup>, options: &CacheOptions) -> Self {
        let schema = lookup.table().schema();
        let key_indices: Vec<usize> = schema
            .primary_keys
            .iter()
            .filter_map(|k| schema.field_index(k))
            .collect();
        let cache = (options.max_rows > 0).then(|| {
            let mut builder = Cache::builder().max_capacity(options.max_rows);
            if let Some(ttl) = options.expire_after_write {
                builder = builder.time_to_live(ttl);
            }
            if let Some(tti) = options.expire_after_access {
                builder = builder.time_to_idle(tti);
            }
            builder.build()
        });
        LookupTable {
            key_types: schema.types_of(&key_indices),
            lookup,
            cache,
        }
    }

    pub fn point_lookup(&self) -> &Arc<PointLookup> {
        &self.lookup
    }

    /// The current row of `key` (primary-key values in `primary_keys` order).
    pub async fn get(&self, key: &[Datum]) -> Result<Option<Arc<Row>>> {
        let Some(cache) = &self.cache else {
            return Ok(self.lookup.get(key).await?.map(Arc::new));
        };
        let cache_key = binary_row::encode(key, &self.key_types)?;
        if let Some(hit) = cache.get(&cache_key) {
            return Ok(hit);
        }
        let row = self.lookup.get(key).await?.map(Arc::new);
        cache.insert(cache_key, row.clone());
        Ok(row)
    }

    /// Moves to the table's latest snapshot; cached entries are dropped when it changed,
    /// so no cached value is older than the last refresh.
    pub async fn refresh(&self) -> Result<bool> {
        let changed = self.lookup.refresh().await?;
        if changed && let Some(cache) = &self.cache {
            cache.invalidate_all();
        }
        Ok(changed)
    }
}
