//! The metrics of one join of an enrich pipeline: what the pipeline counts per fact
//! ([`JoinMetrics`]: hits, misses, latency) and what the join's lookups count themselves
//! ([`LookupMetrics`]: retries, waits, refreshes, cache size). The lookups report
//! readiness and cache size through closures, so this module knows nothing of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use super::Histogram;

/// Counters and gauges of one join's lookups (hits, misses and latency are counted per
/// fact by [`JoinMetrics`]).
#[derive(Debug, Default)]
pub(crate) struct LookupMetrics {
    pub(crate) retries: AtomicU64,
    /// Facts held by `wait_for_cdc`, and those released by `max_wait` instead.
    pub(crate) waits: AtomicU64,
    pub(crate) wait_timeouts: AtomicU64,
    pub(crate) cache_rows: AtomicU64,
    pub(crate) cache_bytes: AtomicU64,
    /// Snapshot the join reads, and how long after its commit it became visible here.
    pub(crate) snapshot_id: AtomicI64,
    pub(crate) refresh_lag_millis: AtomicU64,
    pub(crate) refreshes: AtomicU64,
    /// Time the `full` cache took to load (last load).
    pub(crate) load_millis: AtomicU64,
}

impl LookupMetrics {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Counters of one join of an enrich pipeline.
pub(crate) struct JoinMetrics {
    /// The joined table.
    pub(crate) table: String,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    /// Time a fact spends in this join (cache, table read, retries).
    pub(crate) latency: Histogram,
    /// Whether the join's cache is ready to serve. Strategies that must load a whole
    /// table before serving (`cache = "full"`) set it to false until loaded; readiness
    /// waits for it.
    pub(crate) cache_loaded: AtomicBool,
    /// Rows held by the join's cache, read when metrics are scraped.
    cache_rows: Option<Box<dyn Fn() -> u64 + Send + Sync>>,
    /// Whether the join's lookups can serve (a `full` cache has loaded), read by
    /// readiness checks.
    ready: Option<Box<dyn Fn() -> bool + Send + Sync>>,
    /// The counters the join's lookups keep themselves.
    lookup: Option<Arc<LookupMetrics>>,
}

impl std::fmt::Debug for JoinMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinMetrics")
            .field("table", &self.table)
            .field("hits", &self.hits)
            .field("misses", &self.misses)
            .finish_non_exhaustive()
    }
}

impl JoinMetrics {
    pub(crate) fn new(table: &str) -> Self {
        JoinMetrics {
            table: table.to_string(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            latency: Histogram::default(),
            cache_loaded: AtomicBool::new(true),
            cache_rows: None,
            ready: None,
            lookup: None,
        }
    }

    /// Reports the counters a join's lookups keep (`metrics`), their readiness (`ready`)
    /// and their cache size (`cache_rows`); the closures run on scrapes and readiness
    /// checks, never where facts flow.
    pub(crate) fn with_lookup(
        mut self,
        metrics: Arc<LookupMetrics>,
        ready: impl Fn() -> bool + Send + Sync + 'static,
        cache_rows: impl Fn() -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.lookup = Some(metrics);
        self.ready = Some(Box::new(ready));
        self.cache_rows = Some(Box::new(cache_rows));
        self
    }

    /// Whether the join can serve lookups (a `full` cache has loaded).
    pub(crate) fn is_loaded(&self) -> bool {
        self.cache_loaded.load(Ordering::Relaxed) && self.ready.as_ref().is_none_or(|ready| ready())
    }

    pub(crate) fn lookup_metrics(&self) -> Option<&Arc<LookupMetrics>> {
        self.lookup.as_ref()
    }

    #[cfg(test)]
    /// Reports the cache size through `rows` (called on each scrape, never on the hot path).
    pub(crate) fn with_cache_rows(
        mut self,
        rows: impl Fn() -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.cache_rows = Some(Box::new(rows));
        self
    }

    /// `hits + misses` facts went through the join, each in `elapsed`.
    pub(crate) fn record(&self, hits: u64, misses: u64, elapsed: Duration) {
        if hits > 0 {
            self.hits.fetch_add(hits, Ordering::Relaxed);
        }
        if misses > 0 {
            self.misses.fetch_add(misses, Ordering::Relaxed);
        }
        self.latency.observe_many(hits + misses, elapsed);
    }

    pub(crate) fn cache_rows(&self) -> Option<u64> {
        self.cache_rows.as_ref().map(|rows| rows())
    }
}
