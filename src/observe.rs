//! Pipeline counters, shared by the pipelines that update them and whoever reports them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one pipeline.
#[derive(Debug, Default)]
pub struct PipelineMetrics {
    pub records_in: AtomicU64,
    pub records_out: AtomicU64,
    /// Records sent to the dead-letter topic (or only logged without one).
    pub dead_lettered: AtomicU64,
    /// Facts dropped by an INNER join without a match.
    pub dropped: AtomicU64,
    pub join_hits: AtomicU64,
    pub join_misses: AtomicU64,
    pub join_retries: AtomicU64,
    /// Table commits (CDC).
    pub commits: AtomicU64,
    pub rows_written: AtomicU64,
}

impl PipelineMetrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Share of join lookups that found a row, 0..=1 (1 when there were none).
    pub fn hit_rate(&self) -> f64 {
        let hits = Self::get(&self.join_hits) as f64;
        let total = hits + Self::get(&self.join_misses) as f64;
        if total == 0.0 { 1.0 } else { hits / total }
    }
}
