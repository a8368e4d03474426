//! The results: the printed table and BENCHMARKS.md (overwritten each run).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::WRITE_ONLY_INGEST_CASE;
use crate::cpu::CpuUse;
use crate::kafka::OutputScan;
use crate::previous::Previous;

/// One measured case.
#[derive(Debug)]
pub struct CaseResult {
    pub records: u64,
    pub rate: f64,
    pub detail: String,
    /// CPU seconds of the case's processes while it ran.
    pub cpu: CpuUse,
    /// Peak resident memory of the case's own process(es), MiB.
    pub peak_rss_mib: Option<f64>,
    /// Instructions of the lakejoin process per record, start-up included (callgrind.rs).
    pub instructions_per_record: Option<f64>,
}

impl CaseResult {
    pub fn measured(scan: &OutputScan, detail: &str) -> Result<Self> {
        Ok(CaseResult {
            records: scan.records,
            rate: scan.rate()?,
            detail: format!(
                "{detail}; output {} span {} ms",
                scan.timestamp_kind,
                scan.last_ms - scan.first_ms
            ),
            cpu: CpuUse::default(),
            peak_rss_mib: None,
            instructions_per_record: None,
        })
    }

    /// With the instructions callgrind counted for the case's `records`, if it ran under
    /// callgrind.
    pub fn with_instructions(mut self, instructions: Option<u64>) -> Self {
        if let Some(total) = instructions {
            let per_record = total as f64 / self.records.max(1) as f64;
            self.instructions_per_record = Some(per_record);
            self.detail.push_str(&format!(
                "; under callgrind: {per_record:.0} instructions per record, start-up included (records/s, CPU and RSS mean nothing then)"
            ));
        }
        self
    }

    pub fn with_peak_rss(mut self, mib: f64) -> Self {
        self.peak_rss_mib = Some(mib);
        self
    }

    pub fn with_cpu(mut self, cpu: CpuUse) -> Self {
        self.cpu = cpu;
        self
    }

    /// CPU seconds per million records of the process labelled `label`.
    pub fn cpu_per_million(&self, label: &str) -> Option<f64> {
        self.cpu
            .of(label)
            .map(|s| s * 1e6 / self.records.max(1) as f64)
    }
}

/// RSS of the `full`-cache process against the same process without a cache.
#[derive(Debug)]
pub struct Rss {
    pub rows: u64,
    pub none_rss: f64,
    pub none_hwm: f64,
    /// Once RSS stops falling (`util::settled_rss_mib`).
    pub none_settled: f64,
    pub full_rss: f64,
    pub full_hwm: f64,
    pub full_settled: f64,
    /// Seconds after ready the `full` process's RSS settled.
    pub settled_after: f64,
    pub full_detail: String,
}

impl Rss {
    pub fn line(&self) -> String {
        format!(
            "RSS when ready: {:.0} MiB with a {}-row full cache (peak {:.0} MiB; settled {:.0} MiB {:.0} s after ready; {}), {:.0} MiB with cache = none (peak {:.0} MiB, settled {:.0} MiB): the cache adds {:.0} MiB when ready, {:.0} MiB settled",
            self.full_rss,
            self.rows,
            self.full_hwm,
            self.full_settled,
            self.settled_after,
            self.full_detail,
            self.none_rss,
            self.none_hwm,
            self.none_settled,
            self.full_rss - self.none_rss,
            self.full_settled - self.none_settled
        )
    }
}

/// The CPU label of a case's own process: lakejoin, or the harness running its own loop.
pub const CASE_PROCESS: &str = "case";
/// The CPU label of the Kafka broker's JVM.
pub const BROKER_PROCESS: &str = "broker";
/// Label of the case process's librdkafka threads (part of its own CPU).
pub const CLIENT_THREADS: &str = "of which librdkafka's own threads";

/// What a case must reach (issue 18), and how that reads.
#[derive(Debug, Clone, Copy)]
struct Target {
    /// At least this times the passthrough's records/s.
    ratio: Option<f64>,
    /// At least this many records/s, whatever the passthrough did.
    rate: Option<f64>,
    /// At most this many CPU-seconds of the case's own process per million records.
    cpu: Option<f64>,
    text: &'static str,
}

impl Target {
    const fn ratio(ratio: f64, text: &'static str) -> Self {
        Target {
            ratio: Some(ratio),
            rate: None,
            cpu: None,
            text,
        }
    }

    /// Whether `result` (at `ratio` to the passthrough) meets every part of the target;
    /// `None` when a part cannot be judged.
    fn met(&self, result: &CaseResult, ratio: Option<f64>) -> Option<bool> {
        let mut met = true;
        if let Some(t) = self.ratio {
            met &= ratio? >= t;
        }
        if let Some(t) = self.rate {
            met &= result.rate >= t;
        }
        if let Some(t) = self.cpu {
            met &= result.cpu_per_million(CASE_PROCESS)? <= t;
        }
        Some(met)
    }
}

/// The target of a case.
fn target(name: &str) -> Option<Target> {
    // The alternatives are measured, not held to lakejoin's targets.
    if name.starts_with("redis") || name.starts_with("flink") || name.starts_with("hand-written") {
        return None;
    }
    if name.ends_with("unknown-key storm") {
        return Some(Target {
            ratio: None,
            rate: Some(100_000.0),
            cpu: None,
            text: "≥ 100,000/s",
        });
    }
    if name == "lakejoin CDC ingest" {
        return Some(Target::ratio(0.8, "≥ 0.8"));
    }
    if name.ends_with("full 1 join") {
        return Some(Target {
            ratio: Some(0.8),
            rate: None,
            cpu: Some(2.5),
            text: "≥ 0.8, ≤ 2.5 CPU-s/M",
        });
    }
    if name.ends_with("1 join") {
        return Some(Target::ratio(0.7, "≥ 0.7"));
    }
    if name.ends_with("3 joins") {
        return Some(Target::ratio(0.6, "≥ 0.6"));
    }
    None
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn git(args: &[&str]) -> String {
    Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "?".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "?".into())
}

pub struct Report {
    settings: String,
    /// The commit and whether tracked files differed from it, taken at the start (the
    /// binaries were built from that state).
    commit: String,
    started: String,
    load_start: String,
    cases: Vec<(String, std::result::Result<CaseResult, String>, String)>,
    pub rss: Option<std::result::Result<Rss, String>>,
}

impl Report {
    pub fn start(settings: &str) -> Self {
        let dirty = if git(&["status", "--porcelain", "--untracked-files=no"]).is_empty() {
            ""
        } else {
            " (with uncommitted changes)"
        };
        Report {
            settings: settings.to_owned(),
            commit: format!("{}{dirty}", git(&["rev-parse", "--short=12", "HEAD"])),
            started: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
            load_start: loadavg(),
            cases: Vec::new(),
            rss: None,
        }
    }

    pub fn add(&mut self, name: &str, result: Result<CaseResult>) {
        let load = loadavg();
        self.cases
            .push((name.to_owned(), result.map_err(|e| format!("{e:#}")), load));
    }

    /// The passthrough rate the ratios refer to: the fastest of its runs.
    fn limit(&self) -> Option<f64> {
        self.cases
            .iter()
            .filter(|(name, ..)| name.starts_with("passthrough"))
            .filter_map(|(_, r, _)| r.as_ref().ok().map(|r| r.rate))
            .reduce(f64::max)
    }

    /// The markdown table; `previous` is the last run's (see [`Previous`]).
    fn table(&self, previous: &Previous) -> String {
        let limit = self.limit();
        let mut out = format!(
            "| case | records | records/s | × passthrough | CPU-s per M records | broker CPU-s per M | target | met | load after | {} |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | ---: |\n",
            previous.heading()
        );
        for (name, result, load) in &self.cases {
            match result {
                Ok(r) => {
                    let ratio = limit.map(|l| r.rate / l);
                    let (target_text, met) = match target(name) {
                        Some(t) => (
                            t.text,
                            match t.met(r, ratio) {
                                Some(true) => "yes",
                                Some(false) => "**no**",
                                None => "?",
                            },
                        ),
                        None => ("", ""),
                    };
                    let cpu = |label| {
                        r.cpu_per_million(label)
                            .map_or("?".into(), |c| format!("{c:.2}"))
                    };
                    let _ = writeln!(
                        out,
                        "| {name} | {} | {} | {} | {} | {} | {target_text} | {met} | {load} | {} |",
                        r.records,
                        thousands(r.rate),
                        ratio.map_or("?".into(), |r| format!("{r:.2}")),
                        cpu(CASE_PROCESS),
                        cpu(BROKER_PROCESS),
                        previous.of(name),
                    );
                }
                Err(e) => {
                    let first_line = e.lines().next().unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "| {name} | | FAILED: {} | | | | {} | **no** | {load} | {} |",
                        first_line.replace('|', "/"),
                        target(name).map_or("", |t| t.text),
                        previous.of(name),
                    );
                }
            }
        }
        out
    }

    /// lakejoin against Flink + Paimon, same cache kind (records per CPU-second of the
    /// case's own process(es) and peak memory), and against the hand-written floors.
    fn versus(&self) -> String {
        let ok = |name: &str| {
            self.cases
                .iter()
                .find(|(n, ..)| n == name)
                .and_then(|(_, r, _)| r.as_ref().ok())
        };
        let mut out = String::new();
        // Each Flink setting (parallelism 1, and 2 with async lookups) against the same
        // lakejoin case: the target holds against Flink's best.
        for (ours, theirs) in [
            ("lakejoin full 1 join", "flink + paimon, FULL cache, 1 join"),
            (
                "lakejoin full 1 join",
                "flink + paimon, FULL cache, 1 join, parallelism 2",
            ),
            (
                "lakejoin partial 1 join",
                "flink + paimon, default cache, 1 join",
            ),
            (
                "lakejoin partial 1 join",
                "flink + paimon, default cache, 1 join, parallelism 2, async lookups",
            ),
        ] {
            let (Some(a), Some(b)) = (ok(ours), ok(theirs)) else {
                continue;
            };
            // Records per CPU-second of the case's own process(es).
            let per_cpu = |r: &CaseResult| r.cpu_per_million(CASE_PROCESS).map(|c| 1e6 / c);
            let line = match (per_cpu(a), per_cpu(b), a.peak_rss_mib, b.peak_rss_mib) {
                (Some(pa), Some(pb), Some(ra), Some(rb)) => format!(
                    "- {ours} vs {theirs}: {:.1}× the records per CPU-second (target ≥ 5: {}), \
                     {:.2}× its peak RSS ({ra:.0} vs {rb:.0} MiB; target ≤ 0.2: {}), {:.1}× its records/s\n",
                    pa / pb,
                    if pa / pb >= 5.0 { "yes" } else { "**no**" },
                    ra / rb,
                    if ra / rb <= 0.2 { "yes" } else { "**no**" },
                    a.rate / b.rate,
                ),
                _ => format!("- {ours} vs {theirs}: CPU or memory not measured\n"),
            };
            out.push_str(&line);
        }
        // The hand-written loops are the floors under any enrichment and any ingest of this
        // data: how close lakejoin comes to them, and where the targets lie against them.
        let limit = self.limit();
        for (ours, floor, cpu_target, ratio_target) in [
            (
                "lakejoin full 1 join",
                "hand-written 1 join, in-process hash map",
                Some(2.5),
                Some(0.8),
            ),
            (
                "lakejoin CDC ingest",
                "hand-written ingest, Parquet files",
                None,
                Some(0.8),
            ),
            // Like for like: the floor keeps no table, so it never compacts either.
            (
                WRITE_ONLY_INGEST_CASE,
                "hand-written ingest, Parquet files",
                None,
                None,
            ),
        ] {
            let (Some(a), Some(b)) = (ok(ours), ok(floor)) else {
                continue;
            };
            let (Some(ca), Some(cb)) = (
                a.cpu_per_million(CASE_PROCESS),
                b.cpu_per_million(CASE_PROCESS),
            ) else {
                let _ = writeln!(out, "- {ours} vs {floor}: CPU not measured");
                continue;
            };
            let meets = |met: bool| if met { "meets" } else { "misses" };
            let mut line = format!(
                "- {ours} vs {floor} (its floor): {:.2}× its CPU per record ({ca:.2} vs {cb:.2} \
                 CPU-s per M), {:.2}× its records/s",
                ca / cb,
                a.rate / b.rate,
            );
            if ratio_target.is_some() || cpu_target.is_some() {
                line.push_str("; the floor itself");
            }
            if let (Some(l), Some(target)) = (limit, ratio_target) {
                let r = b.rate / l;
                let _ = write!(
                    line,
                    " is {r:.2}× the passthrough ({} ≥ {target})",
                    meets(r >= target)
                );
            }
            if let Some(t) = cpu_target {
                let _ = write!(line, " and {} ≤ {t} CPU-s per M", meets(cb <= t));
            }
            let _ = writeln!(out, "{line}");
        }
        out
    }

    fn details(&self) -> String {
        let mut out = String::new();
        for (name, result, _) in &self.cases {
            match result {
                Ok(r) => {
                    let others: String = r
                        .cpu
                        .by_process
                        .iter()
                        .filter(|(label, _)| ![CASE_PROCESS, BROKER_PROCESS].contains(label))
                        .map(|(label, s)| {
                            format!(
                                "; {label} {:.2} CPU-s per M records",
                                s * 1e6 / r.records.max(1) as f64
                            )
                        })
                        .collect();
                    let _ = writeln!(out, "- {name}: {}{others}", r.detail);
                }
                Err(e) => {
                    let _ = writeln!(out, "- {name}: FAILED: {e}");
                }
            }
        }
        out
    }

    /// Prints the table and writes BENCHMARKS.md; the number of failed cases. A run of
    /// every case writes the repository's; a run of some (CASES) writes one in `work_dir`,
    /// so that trying a case leaves the committed results alone.
    pub fn finish(&self, work_dir: &Path, every_case: bool) -> Result<usize> {
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("BENCHMARKS.md");
        let old = std::fs::read_to_string(&committed).unwrap_or_default();
        let path = if every_case {
            committed
        } else {
            work_dir.join("BENCHMARKS.md")
        };
        let table = self.table(&Previous::parse(&old));
        let rss = match &self.rss {
            Some(Ok(rss)) => rss.line(),
            Some(Err(e)) => format!("RSS: FAILED: {e}"),
            None => "RSS: not measured in this run (CASES)".to_owned(),
        };
        println!("\n{}\n{table}\n{}\n{rss}\n", self.settings, self.versus());
        let failed = self.cases.iter().filter(|(_, r, _)| r.is_err()).count()
            + usize::from(matches!(self.rss, Some(Err(_))));
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let command = std::env::var("BENCH_COMMAND")
            .unwrap_or_else(|_| "cargo bench --bench throughput".to_owned());
        let text = format!(
            "# Throughput benchmark\n\n\
             Generated by `{command}` (benches/throughput/); overwritten by every run except its last section.\n\n\
             - date: {started}\n\
             - commit: {commit}\n\
             - machine: {cores} cores (`nproc`), {cpu}\n\
             - load average (1, 5, 15 min) at the start: {load_start}, at the end: {load_end}\n\
             - broker: {broker}\n\
             - data: {settings}\n\n\
             ## Results\n\n\
             Ratios are to the fastest of the three passthrough runs. \"load after\" is the\n\
             load average when the case finished.\n\n\
             {table}\n\
             {versus}\n\
             {rss}\n\n\
             Details:\n\n\
             {details}\n\
             {method}",
            started = self.started,
            commit = self.commit,
            cpu = cpu_model(),
            load_start = self.load_start,
            load_end = loadavg(),
            broker = if std::env::var("KAFKA_BOOTSTRAP").is_ok() {
                "KAFKA_BOOTSTRAP (an external broker)".to_owned()
            } else {
                "Apache Kafka 4.4.0 (KRaft, one node, scripts/kafka/broker.sh), started by the \
                 benchmark on loopback"
                    .to_owned()
            },
            settings = self.settings,
            versus = self.versus(),
            details = self.details(),
            method = METHOD,
        );
        // The hand-kept record of optimisations (before/after runs) outlives the run.
        let history = old
            .find(HISTORY)
            .map(|at| old[at..].to_owned())
            .unwrap_or_default();
        let text = format!("{text}\n{history}");
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!(
            "wrote {} (logs and configs of this run in {})",
            path.display(),
            work_dir.display()
        );
        Ok(failed)
    }
}

/// Heading of BENCHMARKS.md's last section, kept by hand and carried over by each run.
const HISTORY: &str = "## History of optimisations";

fn thousands(rate: f64) -> String {
    let digits = format!("{:.0}", rate);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

const METHOD: &str = "## Method

- **One run, one broker, same data.** The benchmark starts Apache Kafka (one KRaft node) on
  free loopback ports the way `scripts/test.sh` does (or uses `KAFKA_BOOTSTRAP`), and produces the
  data once: customers (10 fields), customer profiles (6 fields) and regions (5 fields) as
  upsert JSON keyed by their primary key, and orders (10 fields, ~250 bytes) keyed by
  `order_id`. An order names a known customer with probability 0.95 (uniform over all
  customers) and an unknown id otherwise (deterministic xorshift sequence). Every case reads
  the same orders topic from its beginning into a fresh output topic of its own.
- **Throughput from the output records' timestamps**: records / (last − first output record
  timestamp), the producer's CreateTime set when the record is handed to librdkafka. Start-up,
  consumer-group joins and cache loading happen before the first output and are not counted;
  the harness does not read the output while a case runs (it polls lakejoin's
  `lakejoin_records_produced_total` every 200 ms; its own loops count for themselves) and reads
  it afterwards to check every record (benches/throughput/check.rs): exactly one output per
  order, each carrying its order's own fields unchanged, the customer the orders topic gave
  it, and exactly the columns of that customer (and, with three joins, of its profile and
  region) that the data generator wrote, or nulls for an unknown customer; and exactly as
  many with every join matched as orders name a known customer. One wrong record fails the
  case.
- **unknown-key storm**: a second orders topic in which 95% of the orders name a customer
  that no other order names (so every miss reaches the table's files; the `partial` cache
  cannot answer it from memory) and 5% a known one; `partial` cache, one join. Its target
  is absolute (≥ 100,000 facts/s), not a ratio.
- **Targets** (issue 18): `full` 1 join ≥ 0.8× passthrough and ≤ 2.5 CPU-seconds per million
  records of lakejoin's process; `partial` and `none` 1 join ≥ 0.7×; 3 chained joins ≥ 0.6×;
  CDC ingest ≥ 0.8×. The previous-run column repeats the ratio and CPU of the run this
  one overwrote, as its BENCHMARKS.md recorded them.
- **passthrough**: a plain rdkafka loop in the harness (BaseConsumer on every partition,
  BaseProducer), payload and key unchanged, once with lakejoin's producer settings and once
  with a lean producer (librdkafka's defaults, no idempotence, `linger.ms=5`, no
  compression); the lean one runs again last. The ratios are to the fastest of the three,
  so neither lakejoin's own settings nor a machine that got busier during the run flatter
  lakejoin.
- **CPU**: user + system seconds from `/proc/<pid>/stat` (every thread), per million
  records, for the case's own process (lakejoin from `/health/ready` to the last output
  acknowledged; the harness process for its own loops, which run alone in it) and,
  separately, for the broker's JVM and for redis-server. The CDC ingest counts lakejoin from
  its start to the covering commit. Of a lakejoin process, the details also give its
  librdkafka threads' part (`/proc/<pid>/task/*/stat` of the threads named `rdk:*` and of
  the producer's delivery-report thread): the Kafka client's own work, fetching, building
  and compressing batches, a floor under what lakejoin's code can reach; the client's calls
  on lakejoin's threads (consuming and producing each record) are not in it.
- **redis**: the design lakejoin replaces. redis-server (Debian package, persistence off) is
  started by the benchmark, the customers are loaded into the hash `customers` (field = id,
  value = the five selected columns as the JSON text to splice into an order, as the
  hand-written join keeps them). Per poll batch (one blocking poll, then whatever
  librdkafka has already fetched, up to 1,000 records), each order is read as the
  hand-written join reads it, then one pipelined round trip of one `HGET` per order; the
  value replaces the order's closing brace and the record is produced.
- **hand-written 1 join, in-process hash map**: the floor under any enrichment of this data,
  a loop written for it in the harness process (one thread plus librdkafka's). The five
  selected columns of every customer are rendered once as the JSON text appended to an
  order (`,\"customer_name\":…}`; an all-null text for a miss) and kept in a hash map by
  id. Per order: a derived `serde` deserializer validates the payload and reads
  `customer_id`, the map gives the columns, they replace the closing brace, and the
  record is produced with lakejoin's producer settings. It has no table, cache policy,
  offsets, dead letters, metrics or name clashes to handle, so no general pipeline can
  use less CPU per record for this join; lakejoin's `full` 1 join is measured against it.
- **hand-written ingest, Parquet files**: the floor under any CDC ingest of the orders, a
  loop in the harness process (one thread plus librdkafka's). Per order, a derived `serde`
  deserializer validates the payload and reads its ten fields into Arrow column builders;
  every `commit_max_rows` rows (as lakejoin's case commits) the builders are written as one
  Parquet file (zstd level 1, Paimon's default) to local disk. It keeps no table (no key
  order, merge, sequence numbers, buckets, manifests, snapshots or compaction). Rows/s =
  orders / (last file closed − first order consumed); lakejoin's CDC ingest is measured
  against it.
- **Every producer but the lean passthrough's uses lakejoin's output settings**
  (`enable.idempotence`, `acks=all`, `linger.ms=5`, `compression.type=lz4`,
  `partitioner=murmur2_random`), and every
  consumer librdkafka's defaults.
- **lakejoin enrich**: `target/release/lakejoin run` with one `[[enrich]]` pipeline. One join:
  `shop.customers` on `customer_id`, five columns. Three chained joins: that, then
  `shop.customer_profile` on `customer_id` (three columns), then `shop.regions` on the first
  join's output `customer_region` (three columns); every join uses the case's cache
  (`partial` with `cache_max_rows = 1000000`). The dimension tables are loaded once, before
  the enrich cases, by a `lakejoin run` with three upsert-json CDC pipelines, stopped when the
  snapshots cover every record, then compacted with `lakejoin table compact --full`.
- **lakejoin CDC ingest**: a `lakejoin run` with one upsert-json CDC pipeline of the orders
  into `shop.orders` (4 buckets, deduplicate), defaults except `commit_max_rows`: the largest
  divisor of the order count that is ≤ 100,000 (the default) and gives ≥ 3 commits, so the
  last commit is triggered by the last order and not by the 5 s `commit_interval` timer (which
  would measure the end of the data set). rows/s = orders / (commit time of the snapshot whose
  recorded Kafka offsets cover every order − the last moment `/metrics`, sampled every 10 ms,
  still showed nothing consumed; the process start if the first sample already showed
  records: an early bound, so the figure errs low). So it includes
  decoding, the writer, Parquet files, manifests and every commit up to the one that makes the
  last order visible. The detail line also gives the rate between the first and the last commit.
- **lakejoin CDC ingest, write-only table**: the same into a table with `write-only = true`,
  whose writer never compacts (Paimon's option for tables a separate job compacts): the
  ingest's own cost, like for like with the hand-written floor, which keeps no table either.
- **RSS**: a table of RSS_ROWS customers (10 columns) loaded by a CDC run; then `lakejoin run`
  with one enrich pipeline over an empty topic joining that table, once with `cache = \"none\"`
  and once with `cache = \"full\"`. VmRSS (and VmHWM, the peak) from `/proc/<pid>/status` as
  soon as `/health/ready` answers 200 (a `full` cache is loaded by then).
- **Load**: the machine is shared (other builds and tests may run at the same time); the load
  averages above and per case say how busy it was. Compare ratios within one run, not
  absolute figures across runs.
";
