//! Pipeline metrics: counters, gauges and fixed-bucket histograms on atomics (no lock is
//! taken where records flow), a registry of the running pipelines, readiness, and the
//! Prometheus text exposition format.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

mod join;

pub(crate) use join::{JoinMetrics, LookupMetrics};

/// Upper bounds (seconds) of the latency histograms' buckets, from 100 µs (a cached
/// lookup) to 10 s (a large commit to object storage); `+Inf` follows.
pub(crate) const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A latency histogram with the fixed [`LATENCY_BUCKETS`]: one atomic per bucket and one
/// for the sum, so `observe` never blocks.
#[derive(Debug)]
pub(crate) struct Histogram {
    /// Per-bucket (not cumulative) counts; the last one is `+Inf`.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

/// What a histogram held at one moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistogramSnapshot {
    /// Cumulative counts per bucket of [`LATENCY_BUCKETS`], then `+Inf` (= the count).
    pub(crate) cumulative: Vec<u64>,
    pub(crate) sum_seconds: f64,
}

impl HistogramSnapshot {
    pub(crate) fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

impl Histogram {
    pub(crate) fn observe(&self, elapsed: Duration) {
        self.observe_many(1, elapsed);
    }

    /// `n` observations of `elapsed` each (the facts of a poll batch share its lookup
    /// time): two atomic additions, however many facts.
    pub(crate) fn observe_many(&self, n: u64, elapsed: Duration) {
        if n == 0 {
            return;
        }
        let seconds = elapsed.as_secs_f64();
        let index = LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[index].fetch_add(n, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos
            .fetch_add(nanos.saturating_mul(n), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let mut total = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect();
        HistogramSnapshot {
            cumulative,
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// Consumer lag of one partition: records in the partition not yet consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionLag {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) lag: i64,
}

/// Counters of one pipeline.
#[derive(Debug, Default)]
pub struct PipelineMetrics {
    /// Records consumed.
    pub records_in: AtomicU64,
    /// Poll batches the facts were taken in (enrich): `records_in` over this is the mean
    /// batch size, which falls toward 1 once the pipeline keeps up with its input.
    pub fact_batches: AtomicU64,
    pub(crate) records_out: AtomicU64,
    /// Records sent to the dead-letter topic (or only logged without one).
    pub dead_lettered: AtomicU64,
    /// Facts dropped by an INNER join without a match.
    pub(crate) dropped: AtomicU64,
    pub(crate) join_hits: AtomicU64,
    pub(crate) join_misses: AtomicU64,
    pub(crate) join_retries: AtomicU64,
    /// Attempts of held facts that failed again (enrich: a lookup or the schema registry
    /// failing; the fact is tried again, never dead-lettered).
    pub held_retries: AtomicU64,
    /// Table commits (CDC).
    pub(crate) commits: AtomicU64,
    /// Table commits that failed and are retried (CDC).
    pub commit_failures: AtomicU64,
    pub(crate) rows_written: AtomicU64,
    /// Duration of table commits (CDC).
    pub(crate) commit_latency: Histogram,
    /// Id of the last snapshot committed to the pipeline's table (CDC; 0: none yet), or
    /// whose changes were all acknowledged (changelog).
    pub(crate) snapshot_id: AtomicU64,
    /// Snapshots of the table not yet produced (changelog).
    pub(crate) snapshot_lag: AtomicU64,
    /// Per join, in configuration order (enrich).
    pub(crate) joins: Vec<JoinMetrics>,
    /// Whether the consumer has partitions assigned (sampled off the hot path).
    pub assigned: AtomicBool,
    /// Whether the consumer's group gave it an assignment, even of no partition (more
    /// instances than partitions): such a member is working, and ready.
    pub(crate) joined: AtomicBool,
    /// Lag per assigned partition (sampled off the hot path).
    lag: Mutex<Vec<PartitionLag>>,
    /// Why the pipeline's table cannot be written right now (CDC): set while its commits
    /// fail, cleared by the next successful one. Makes the process unready.
    table_fault: Mutex<Option<String>>,
    /// Why the pipeline's Kafka client cannot work right now (the broker refuses it, or
    /// its records cannot be decoded), from the client's own reports. Makes the process
    /// unready.
    kafka_fault: Mutex<Option<String>>,
    /// Why facts are held right now (enrich): set while a lookup or the schema registry
    /// fails them, cleared when a held fact goes through. Makes the process unready.
    hold_fault: Mutex<Option<String>>,
    /// Why the pipeline stopped on its own (it cannot continue); the others keep running.
    stopped: Mutex<Option<String>>,
}

impl PipelineMetrics {
    /// Metrics of an enrich pipeline with these joins.
    pub(crate) fn with_joins(joins: Vec<JoinMetrics>) -> Self {
        PipelineMetrics {
            joins,
            ..PipelineMetrics::default()
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// One fact went through join `join` (in `[[enrich.join]]` order): the pipeline's
    /// hit or miss, and the join's own counters and latency. The one recorder of both
    /// enrich paths, a poll batch and a fact on its own.
    pub(crate) fn record_join(&self, join: usize, matched: bool, elapsed: Duration) {
        self.record_joins(join, u64::from(matched), u64::from(!matched), elapsed);
    }

    /// [`Self::record_join`] of `hits + misses` facts at once, each having taken
    /// `elapsed`: a poll batch counts its facts with a few atomic additions per join, not
    /// a few per fact, which every worker thread would contend for.
    pub(crate) fn record_joins(&self, join: usize, hits: u64, misses: u64, elapsed: Duration) {
        if hits > 0 {
            Self::add(&self.join_hits, hits);
        }
        if misses > 0 {
            Self::add(&self.join_misses, misses);
        }
        if let Some(m) = self.joins.get(join) {
            m.record(hits, misses, elapsed);
        }
    }

    /// Share of join lookups that found a row, 0..=1 (1 when there were none).
    pub(crate) fn hit_rate(&self) -> f64 {
        let hits = Self::get(&self.join_hits) as f64;
        let total = hits + Self::get(&self.join_misses) as f64;
        if total == 0.0 { 1.0 } else { hits / total }
    }

    pub(crate) fn set_lag(&self, lag: Vec<PartitionLag>) {
        *self.lag.lock().unwrap_or_else(|e| e.into_inner()) = lag;
    }

    pub(crate) fn lag(&self) -> Vec<PartitionLag> {
        self.lag.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records (`Some`) or clears (`None`) why the pipeline's table cannot be written.
    pub(crate) fn set_table_fault(&self, fault: Option<String>) {
        *self.table_fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }

    /// Records (`Some`) or clears (`None`) why the pipeline's Kafka client cannot work.
    pub(crate) fn set_kafka_fault(&self, fault: Option<String>) {
        *self.kafka_fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }

    /// Records that the pipeline stopped, and why.
    pub(crate) fn set_stopped(&self, reason: String) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
    }

    pub(crate) fn stopped(&self) -> Option<String> {
        self.stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records (`Some`) or clears (`None`) why facts are held.
    pub(crate) fn set_hold_fault(&self, fault: Option<String>) {
        *self.hold_fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }

    pub(crate) fn hold_fault(&self) -> Option<String> {
        self.hold_fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn kafka_fault(&self) -> Option<String> {
        self.kafka_fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn table_fault(&self) -> Option<String> {
        self.table_fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sum of the partitions' lag (0 before the first sample).
    pub(crate) fn total_lag(&self) -> i64 {
        self.lag().iter().map(|p| p.lag).sum()
    }
}

/// What a pipeline does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineKind {
    Cdc,
    Enrich,
    Changelog,
}

impl PipelineKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PipelineKind::Cdc => "cdc",
            PipelineKind::Enrich => "enrich",
            PipelineKind::Changelog => "changelog",
        }
    }
}

/// A registered pipeline.
#[derive(Debug, Clone)]
pub(crate) struct PipelineEntry {
    pub(crate) name: String,
    pub(crate) kind: PipelineKind,
    /// The table a CDC pipeline writes.
    pub(crate) table: Option<String>,
    pub(crate) metrics: Arc<PipelineMetrics>,
}

/// The pipelines of one `lakejoin run` and its lifecycle state, shared with the HTTP
/// endpoint. One per process run, passed explicitly (no global state).
#[derive(Debug, Default)]
pub struct Registry {
    pipelines: RwLock<Vec<PipelineEntry>>,
    started: AtomicBool,
    stopping: AtomicBool,
    /// The shared producer's current fault (the broker refuses it), asked at each
    /// readiness check.
    producer_fault: RwLock<Option<FaultSource>>,
}

/// Where a client's current fault is read from.
#[derive(Clone)]
pub(crate) struct FaultSource(pub(crate) Arc<dyn Fn() -> Option<String> + Send + Sync>);

impl std::fmt::Debug for FaultSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultSource")
    }
}

impl Registry {
    /// Sets where the shared producer's fault is read from (once, while starting).
    pub(crate) fn set_producer_fault(&self, source: FaultSource) {
        *self
            .producer_fault
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(source);
    }

    /// Adds a pipeline (done once, while starting).
    pub fn register(
        &self,
        name: &str,
        kind: PipelineKind,
        table: Option<&str>,
        metrics: Arc<PipelineMetrics>,
    ) {
        self.pipelines
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(PipelineEntry {
                name: name.to_string(),
                kind,
                table: table.map(str::to_string),
                metrics,
            });
    }

    pub(crate) fn pipelines(&self) -> Vec<PipelineEntry> {
        self.pipelines
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every pipeline is built and running.
    pub fn set_started(&self) {
        self.started.store(true, Ordering::SeqCst);
    }

    /// A graceful shutdown began: no longer ready.
    pub(crate) fn set_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// `Ok` when every pipeline is running with its consumer assigned and its caches
    /// loaded; otherwise every reason it is not.
    pub fn readiness(&self) -> std::result::Result<(), Vec<String>> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err(vec!["shutting down".into()]);
        }
        if !self.started.load(Ordering::SeqCst) {
            return Err(vec!["starting: opening tables and pipelines".into()]);
        }
        let mut reasons = Vec::new();
        let producer_fault = self
            .producer_fault
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(fault) = producer_fault.and_then(|source| (source.0)()) {
            reasons.push(format!("Kafka producer: {fault}"));
        }
        for p in self.pipelines() {
            if let Some(reason) = p.metrics.stopped() {
                reasons.push(format!("pipeline {} stopped: {reason}", p.name));
                continue;
            }
            if !p.metrics.assigned.load(Ordering::Relaxed)
                && !p.metrics.joined.load(Ordering::Relaxed)
            {
                reasons.push(format!(
                    "pipeline {}: no Kafka partitions assigned yet",
                    p.name
                ));
            }
            if let Some(fault) = p.metrics.kafka_fault() {
                reasons.push(format!("pipeline {}: Kafka: {fault}", p.name));
            }
            if let Some(fault) = p.metrics.hold_fault() {
                reasons.push(format!("pipeline {}: {fault}", p.name));
            }
            if let Some(fault) = p.metrics.table_fault() {
                reasons.push(format!(
                    "pipeline {}: table {}: {fault}",
                    p.name,
                    p.table.as_deref().unwrap_or("?")
                ));
            }
            for (i, join) in p.metrics.joins.iter().enumerate() {
                if !join.is_loaded() {
                    reasons.push(format!(
                        "pipeline {}: join[{i}] ({}): cache still loading",
                        p.name, join.table
                    ));
                }
            }
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons)
        }
    }

    /// Every metric in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let pipelines = self.pipelines();
        let mut out = Exposition::default();
        out.family(
            "lakejoin_build_info",
            "gauge",
            "Always 1; the version label tells the lakejoin version.",
        );
        out.sample(
            "lakejoin_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1,
        );
        out.family(
            "lakejoin_ready",
            "gauge",
            "1 when /health/ready answers 200 (every consumer assigned, caches loaded).",
        );
        out.sample("lakejoin_ready", &[], u64::from(self.readiness().is_ok()));

        let counter = |out: &mut Exposition,
                       name: &str,
                       help: &str,
                       kinds: &[PipelineKind],
                       get: fn(&PipelineMetrics) -> &AtomicU64| {
            out.family(name, "counter", help);
            for p in pipelines.iter().filter(|p| kinds.contains(&p.kind)) {
                out.sample(
                    name,
                    &[("pipeline", &p.name), ("kind", p.kind.as_str())],
                    PipelineMetrics::get(get(&p.metrics)),
                );
            }
        };
        use PipelineKind::{Cdc, Changelog, Enrich};
        counter(
            &mut out,
            "lakejoin_records_consumed_total",
            "Kafka records consumed.",
            &[Cdc, Enrich],
            |m| &m.records_in,
        );
        counter(
            &mut out,
            "lakejoin_records_dead_lettered_total",
            "Bad records sent to the dead-letter topic (or logged without one).",
            &[Cdc, Enrich],
            |m| &m.dead_lettered,
        );
        counter(
            &mut out,
            "lakejoin_records_produced_total",
            "Enriched records, or table changes (changelog), acknowledged by the broker.",
            &[Enrich, Changelog],
            |m| &m.records_out,
        );
        counter(
            &mut out,
            "lakejoin_facts_held_retries_total",
            "Attempts of facts held because a lookup or the schema registry failed (tried again, never dead-lettered).",
            &[Enrich],
            |m| &m.held_retries,
        );
        counter(
            &mut out,
            "lakejoin_fact_batches_total",
            "Poll batches facts were taken in (records consumed / batches = mean batch size).",
            &[Enrich],
            |m| &m.fact_batches,
        );
        counter(
            &mut out,
            "lakejoin_records_dropped_total",
            "Facts dropped by an INNER join without a match.",
            &[Enrich],
            |m| &m.dropped,
        );
        counter(
            &mut out,
            "lakejoin_rows_written_total",
            "Row changes handed to the table writer.",
            &[Cdc],
            |m| &m.rows_written,
        );
        counter(
            &mut out,
            "lakejoin_commits_total",
            "Table commits (snapshots with the consumed offsets).",
            &[Cdc],
            |m| &m.commits,
        );
        counter(
            &mut out,
            "lakejoin_commit_failures_total",
            "Table commits that failed and are retried (full or read-only warehouse, store errors).",
            &[Cdc],
            |m| &m.commit_failures,
        );

        out.family(
            "lakejoin_commit_duration_seconds",
            "histogram",
            "Duration of table commits: flush, manifests, snapshot.",
        );
        for p in pipelines.iter().filter(|p| p.kind == Cdc) {
            out.histogram(
                "lakejoin_commit_duration_seconds",
                &[("pipeline", &p.name)],
                &p.metrics.commit_latency.snapshot(),
            );
        }
        out.family(
            "lakejoin_table_snapshot_id",
            "gauge",
            "Id of the last snapshot this process committed to the table (CDC), or whose \
             changes it produced (changelog); 0: none yet.",
        );
        for p in pipelines
            .iter()
            .filter(|p| p.kind == Cdc || p.kind == Changelog)
        {
            out.sample(
                "lakejoin_table_snapshot_id",
                &[
                    ("pipeline", &p.name),
                    ("table", p.table.as_deref().unwrap_or("")),
                ],
                PipelineMetrics::get(&p.metrics.snapshot_id),
            );
        }

        out.family(
            "lakejoin_changelog_lag_snapshots",
            "gauge",
            "Snapshots of the table whose changes the changelog pipeline has not produced yet.",
        );
        for p in pipelines.iter().filter(|p| p.kind == Changelog) {
            out.sample(
                "lakejoin_changelog_lag_snapshots",
                &[
                    ("pipeline", &p.name),
                    ("table", p.table.as_deref().unwrap_or("")),
                ],
                PipelineMetrics::get(&p.metrics.snapshot_lag),
            );
        }

        let joins: Vec<(&PipelineEntry, String, &JoinMetrics)> = pipelines
            .iter()
            .flat_map(|p| {
                p.metrics
                    .joins
                    .iter()
                    .enumerate()
                    .map(move |(i, j)| (p, i.to_string(), j))
            })
            .collect();
        let join_labels = |p: &'_ PipelineEntry, i: &'_ str, j: &'_ JoinMetrics| {
            [
                ("pipeline", p.name.clone()),
                ("join", i.to_string()),
                ("table", j.table.clone()),
            ]
        };
        for (name, help, get) in [
            (
                "lakejoin_lookup_hits_total",
                "Facts whose join found a row.",
                (|j| &j.hits) as fn(&JoinMetrics) -> &AtomicU64,
            ),
            (
                "lakejoin_lookup_misses_total",
                "Facts whose join found no row (or had no key).",
                |j| &j.misses,
            ),
        ] {
            out.family(name, "counter", help);
            for (p, i, j) in &joins {
                let labels = join_labels(p, i, j);
                out.sample(name, &borrow(&labels), PipelineMetrics::get(get(j)));
            }
        }
        out.family(
            "lakejoin_lookup_duration_seconds",
            "histogram",
            "Time a fact spends in one join: cache, table read and retries.",
        );
        for (p, i, j) in &joins {
            let labels = join_labels(p, i, j);
            out.histogram(
                "lakejoin_lookup_duration_seconds",
                &borrow(&labels),
                &j.latency.snapshot(),
            );
        }
        for (name, kind, help, get) in [
            (
                "lakejoin_lookup_retries_total",
                "counter",
                "Lookups repeated after a miss (retry).",
                (|m| &m.retries) as fn(&LookupMetrics) -> &AtomicU64,
            ),
            (
                "lakejoin_lookup_waits_total",
                "counter",
                "Facts held by wait_for_cdc until the dimension caught up.",
                |m| &m.waits,
            ),
            (
                "lakejoin_lookup_wait_timeouts_total",
                "counter",
                "Facts released by max_wait before the dimension caught up.",
                |m| &m.wait_timeouts,
            ),
            (
                "lakejoin_lookup_refreshes_total",
                "counter",
                "Snapshots the join's cache moved to.",
                |m| &m.refreshes,
            ),
            (
                "lakejoin_lookup_cache_bytes",
                "gauge",
                "Bytes held by the join's cache (full: measured; partial: estimated).",
                |m| &m.cache_bytes,
            ),
            (
                "lakejoin_lookup_refresh_lag_milliseconds",
                "gauge",
                "At the last refresh, how long after its commit the newest snapshot became visible.",
                |m| &m.refresh_lag_millis,
            ),
            (
                "lakejoin_lookup_load_milliseconds",
                "gauge",
                "Time the full cache took to load (last load).",
                |m| &m.load_millis,
            ),
        ] {
            out.family(name, kind, help);
            for (p, i, j) in &joins {
                if let Some(m) = j.lookup_metrics() {
                    let labels = join_labels(p, i, j);
                    out.sample(name, &borrow(&labels), PipelineMetrics::get(get(m)));
                }
            }
        }
        out.family(
            "lakejoin_lookup_snapshot_id",
            "gauge",
            "Snapshot of the joined table the join reads.",
        );
        for (p, i, j) in &joins {
            if let Some(m) = j.lookup_metrics() {
                let labels = join_labels(p, i, j);
                let id = m.snapshot_id.load(Ordering::Relaxed).max(0) as u64;
                out.sample("lakejoin_lookup_snapshot_id", &borrow(&labels), id);
            }
        }
        out.family(
            "lakejoin_lookup_cache_rows",
            "gauge",
            "Keys (hits and misses) held by the join's cache.",
        );
        for (p, i, j) in &joins {
            if let Some(rows) = j.cache_rows() {
                let labels = join_labels(p, i, j);
                out.sample("lakejoin_lookup_cache_rows", &borrow(&labels), rows);
            }
        }

        out.family(
            "lakejoin_consumer_assigned",
            "gauge",
            "1 when the pipeline's consumer has Kafka partitions assigned.",
        );
        for p in &pipelines {
            out.sample(
                "lakejoin_consumer_assigned",
                &[("pipeline", &p.name)],
                u64::from(p.metrics.assigned.load(Ordering::Relaxed)),
            );
        }
        out.family(
            "lakejoin_consumer_lag",
            "gauge",
            "Records in the partition after the consumer's position (high watermark minus position).",
        );
        for p in &pipelines {
            for lag in p.metrics.lag() {
                out.sample(
                    "lakejoin_consumer_lag",
                    &[
                        ("pipeline", &p.name),
                        ("topic", &lag.topic),
                        ("partition", &lag.partition.to_string()),
                    ],
                    lag.lag,
                );
            }
        }
        out.text
    }
}

fn borrow<'a, const N: usize>(
    labels: &'a [(&'static str, String); N],
) -> [(&'static str, &'a str); N] {
    std::array::from_fn(|i| (labels[i].0, labels[i].1.as_str()))
}

/// Writes metric families in the Prometheus text format.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.text.push_str(name);
        write_labels(&mut self.text, labels);
        let _ = writeln!(self.text, " {value}");
    }

    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let bucket = format!("{name}_bucket");
        for (i, count) in h.cumulative.iter().enumerate() {
            let le = LATENCY_BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, count);
        }
        self.sample(&format!("{name}_sum"), labels, h.sum_seconds);
        self.sample(&format!("{name}_count"), labels, h.count());
    }
}

fn write_labels(out: &mut String, labels: &[(&str, &str)]) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (i, (key, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{key}=\"{}\"", escape_label(value));
    }
    out.push('}');
}

/// Label values escape `\`, `"` and newlines.
pub(crate) fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text escapes `\` and newlines.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests;
