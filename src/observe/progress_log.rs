//! One progress line per pipeline every `[observe] progress_interval`: throughput over
//! the interval, consumer lag, lookup hit rate (enrich) or commits (CDC); for changelog
//! pipelines the changes produced, the last snapshot produced and the snapshots behind.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{PipelineKind, PipelineMetrics, Registry};

/// Cumulative counters of a pipeline at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) records_in: u64,
    pub(crate) records_out: u64,
    pub(crate) rows_written: u64,
    pub(crate) dead_lettered: u64,
    pub(crate) commits: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
}

impl Totals {
    pub(crate) fn of(m: &PipelineMetrics) -> Self {
        Totals {
            records_in: PipelineMetrics::get(&m.records_in),
            records_out: PipelineMetrics::get(&m.records_out),
            rows_written: PipelineMetrics::get(&m.rows_written),
            dead_lettered: PipelineMetrics::get(&m.dead_lettered),
            commits: PipelineMetrics::get(&m.commits),
            hits: PipelineMetrics::get(&m.join_hits),
            misses: PipelineMetrics::get(&m.join_misses),
        }
    }
}

/// What a pipeline did over one interval.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    pub(crate) consumed_per_s: f64,
    pub(crate) produced_per_s: f64,
    pub(crate) rows_per_s: f64,
    pub(crate) commits: u64,
    pub(crate) dead_lettered: u64,
    /// Share of lookups that found a row over the interval; `None` without lookups.
    pub(crate) hit_rate: Option<f64>,
}

impl Progress {
    pub(crate) fn between(before: Totals, now: Totals, elapsed: Duration) -> Self {
        let seconds = elapsed.as_secs_f64().max(1e-3);
        let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / seconds;
        let hits = now.hits.saturating_sub(before.hits);
        let lookups = hits + now.misses.saturating_sub(before.misses);
        Progress {
            consumed_per_s: rate(before.records_in, now.records_in),
            produced_per_s: rate(before.records_out, now.records_out),
            rows_per_s: rate(before.rows_written, now.rows_written),
            commits: now.commits.saturating_sub(before.commits),
            dead_lettered: now.dead_lettered.saturating_sub(before.dead_lettered),
            hit_rate: (lookups > 0).then(|| hits as f64 / lookups as f64),
        }
    }
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "n/a".to_string(), |r| format!("{:.1}%", r * 100.0))
}

/// Logs a progress line per pipeline every `interval` until `stop`.
pub(crate) async fn report(
    registry: Arc<Registry>,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut last: BTreeMap<String, Totals> = BTreeMap::new();
    let mut last_at = Instant::now();
    for p in registry.pipelines() {
        last.insert(p.name.clone(), Totals::of(&p.metrics));
    }
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() { return; }
                continue;
            }
        }
        let elapsed = last_at.elapsed();
        last_at = Instant::now();
        for p in registry.pipelines() {
            let now = Totals::of(&p.metrics);
            let before = last.insert(p.name.clone(), now).unwrap_or_default();
            let progress = Progress::between(before, now, elapsed);
            let lag = p.metrics.total_lag();
            match p.kind {
                PipelineKind::Cdc => tracing::info!(
                    pipeline = %p.name,
                    table = p.table.as_deref().unwrap_or(""),
                    consumed_per_s = %format!("{:.1}", progress.consumed_per_s),
                    rows_per_s = %format!("{:.1}", progress.rows_per_s),
                    commits = progress.commits,
                    snapshot = PipelineMetrics::get(&p.metrics.snapshot_id),
                    lag,
                    dead_lettered = progress.dead_lettered,
                    "progress"
                ),
                PipelineKind::Changelog => tracing::info!(
                    pipeline = %p.name,
                    table = p.table.as_deref().unwrap_or(""),
                    changes_out_per_s = %format!("{:.1}", progress.produced_per_s),
                    produced_through = PipelineMetrics::get(&p.metrics.snapshot_id),
                    lag_snapshots = PipelineMetrics::get(&p.metrics.snapshot_lag),
                    "progress"
                ),
                PipelineKind::Enrich => tracing::info!(
                    pipeline = %p.name,
                    consumed_per_s = %format!("{:.1}", progress.consumed_per_s),
                    produced_per_s = %format!("{:.1}", progress.produced_per_s),
                    lag,
                    hit_rate = %percent(progress.hit_rate),
                    dead_lettered = progress.dead_lettered,
                    "progress"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_measured_over_the_interval() {
        let before = Totals {
            records_in: 100,
            records_out: 90,
            hits: 80,
            misses: 20,
            commits: 3,
            ..Totals::default()
        };
        let now = Totals {
            records_in: 300,
            records_out: 250,
            hits: 230,
            misses: 70,
            commits: 5,
            dead_lettered: 1,
            ..Totals::default()
        };
        let p = Progress::between(before, now, Duration::from_secs(10));
        assert_eq!(p.consumed_per_s, 20.0);
        assert_eq!(p.produced_per_s, 16.0);
        assert_eq!(p.commits, 2);
        assert_eq!(p.dead_lettered, 1);
        assert_eq!(p.hit_rate, Some(0.75));
        assert_eq!(percent(p.hit_rate), "75.0%");
        let idle = Progress::between(now, now, Duration::from_secs(10));
        assert_eq!(idle.hit_rate, None);
        assert_eq!(percent(idle.hit_rate), "n/a");
    }
}
