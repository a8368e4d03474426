//! The side-by-side throughput benchmark (issue 7): in one run, against one broker, on the
//! same topics and data, records/s of
//!
//! 1. passthrough: a plain rdkafka consume → produce loop (the machine's limit; run first
//!    and again last, ratios are to the faster of the two),
//! 2. redis: the design lakejoin replaces (one pipelined HGET round trip per poll batch),
//!    and a hand-written join against an in-process hash map (the floor of any enrichment),
//! 3. `lakejoin run` enriching with cache = full, partial and none, one join and three
//!    chained joins (95% of the orders name a known customer, 5% an unknown one),
//! 4. `lakejoin run` CDC ingest: upsert-json into a 4-bucket table, including commits
//!    (and once into a `write-only` table, without the writer's compactions), and a
//!    hand-written ingest into Parquet files (the floor of any ingest),
//!
//! plus the RSS of a `lakejoin run` holding a 1,000,000-row `full` cache. Enrich
//! throughput is counted from the output records' Kafka timestamps (producer CreateTime):
//! records / (last − first output timestamp). Prints a table and writes BENCHMARKS.md (a
//! run of only some cases, CASES, writes its own into BENCH_DIR instead).
//!
//! `scripts/bench.sh` (installs Apache Kafka and redis-server, builds, runs this), or
//! `cargo bench --bench throughput`. Scale with ORDERS, CUSTOMERS, RSS_ROWS; run a subset
//! with CASES (comma-separated case names, or prefixes such as `lakejoin`).

mod callgrind;
mod check;
mod compare;
mod cpu;
mod data;
mod enrich_case;
mod flink;
mod ingest_case;
mod ingest_floor;
mod kafka;
mod lakejoin;
mod loops;
mod previous;
mod ratios;
mod redis;
mod report;
mod setup;
mod util;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use cpu::CpuMeter;
use kafka::{BulkProducer, OutputScan, create_topics, scan_output};
use lakejoin::{Lakejoin, Variant, config_head, covers, metric, table};
use report::{BROKER_PROCESS, CASE_PROCESS, CLIENT_THREADS, CaseResult, Report};
use util::{proc_status_kib, settled_rss_mib, wait_for};

const REDIS_CASE: &str = "redis 1 join";
const HAND_WRITTEN_CASE: &str = "hand-written 1 join, in-process hash map";
const HAND_WRITTEN_INGEST_CASE: &str = "hand-written ingest, Parquet files";
/// The CDC ingest into a `write-only` table: what the ingest costs without the
/// compactions a Paimon writer runs by default.
const WRITE_ONLY_INGEST_CASE: &str = "lakejoin CDC ingest, write-only table";
/// 95% of the orders name a customer no other order names: every miss reaches the table.
const STORM_CASE: &str = "lakejoin partial 1 join, unknown-key storm";
/// Flink + Paimon's lookup join: (case name, topic/dir name, `flink_enrich.py --cache`,
/// parallelism, async lookups). Parallelism 1 matches lakejoin's one pipeline task; 2 uses
/// both cores, with Paimon's async lookups for the default cache, so that Flink is measured
/// in its fastest setting here too.
const FLINK_CASES: [(&str, &str, &str, u32, bool); 4] = [
    (
        "flink + paimon, FULL cache, 1 join",
        "flink-full",
        "full",
        1,
        false,
    ),
    (
        "flink + paimon, default cache, 1 join",
        "flink-default",
        "default",
        1,
        false,
    ),
    (
        "flink + paimon, FULL cache, 1 join, parallelism 2",
        "flink-full-p2",
        "full",
        2,
        false,
    ),
    (
        "flink + paimon, default cache, 1 join, parallelism 2, async lookups",
        "flink-default-p2",
        "default",
        2,
        true,
    ),
];

/// How long a case may go without producing (or committing) anything before it fails.
const STALL: Duration = Duration::from_secs(120);

struct Settings {
    orders: u64,
    customers: u64,
    rss_rows: u64,
    partitions: i32,
    cases: Option<Vec<String>>,
}

/// Whether case `name` is selected by CASES (every case when unset).
fn matches(filter: &Option<Vec<String>>, name: &str) -> bool {
    filter
        .as_ref()
        .is_none_or(|cases| cases.iter().any(|c| name.starts_with(c.as_str())))
}

fn env_u64(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .replace('_', "")
            .parse()
            .with_context(|| format!("{name}={v} is not a number")),
        Err(_) => Ok(default),
    }
}

impl Settings {
    fn from_env() -> Result<Self> {
        let settings = Settings {
            // A million orders: each case runs several seconds past its start-up. With
            // 300,000 (~75 MB) a case lasted about 2 s and a consumer could prefetch most
            // of the topic (librdkafka's 64 MiB queue) before producing, so one run's three
            // passthroughs spread from 166,759 to 292,113 records/s.
            orders: env_u64("ORDERS", 1_000_000)?,
            customers: env_u64("CUSTOMERS", 100_000)?,
            rss_rows: env_u64("RSS_ROWS", 1_000_000)?,
            partitions: env_u64("PARTITIONS", 4)? as i32,
            cases: std::env::var("CASES").ok().map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            }),
        };
        if settings.orders < 100 || settings.customers < 10 || settings.partitions < 1 {
            bail!("ORDERS ≥ 100, CUSTOMERS ≥ 10 and PARTITIONS ≥ 1, please");
        }
        Ok(settings)
    }

    fn wants(&self, case: &str) -> bool {
        matches(&self.cases, case)
    }
}

/// A topic of orders and the customer of each of its orders.
struct Orders {
    topic: String,
    /// The customer of order n (1-based) at n - 1.
    customer_of: Vec<u64>,
}

impl Orders {
    /// Orders naming a known customer: the exact number of matched facts expected.
    fn known(&self, customers: u64) -> u64 {
        self.customer_of
            .iter()
            .filter(|c| (1..=customers).contains(*c))
            .count() as u64
    }
}

/// Everything a case needs: broker, topic names, the loaded warehouse.
struct Bench {
    settings: Settings,
    bootstrap: String,
    dir: PathBuf,
    warehouse: PathBuf,
    run_id: String,
    orders: Orders,
    /// The unknown-key storm's orders (95% unknown customers), produced when its case runs.
    storm: Orders,
    customers_topic: String,
    profiles_topic: String,
    regions_topic: String,
    /// The broker's JVM when the harness started it (its CPU is reported per case).
    broker_pid: Option<u32>,
    /// The lakejoin of every case but the second one of a comparison.
    lakejoin: Variant,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Bench {
    fn topic(&self, base: &str) -> String {
        format!("{base}-{}", self.run_id)
    }

    /// Starts counting the CPU of a case's own process `pid` (and of a lakejoin
    /// process's librdkafka threads), of the broker, and of `others` (label, pid).
    fn meter(&self, pid: u32, others: &[(&'static str, u32)]) -> Result<CpuMeter> {
        let mut processes = vec![(CASE_PROCESS, pid)];
        processes.extend(self.broker_pid.map(|p| (BROKER_PROCESS, p)));
        processes.extend_from_slice(others);
        let meter = CpuMeter::start(&processes)?;
        // The harness's own loops make and drop their clients inside the measured
        // window: their threads are gone when it ends, and cannot be read then.
        if pid == std::process::id() {
            return Ok(meter);
        }
        meter.with_client_threads(CLIENT_THREADS, pid)
    }

    fn new_output(&self, case: &str) -> Result<String> {
        let topic = self.topic(&format!("out-{case}"));
        create_topics(&self.bootstrap, &[(&topic, self.settings.partitions)])?;
        Ok(topic)
    }

    /// Waits until `process` has had `n` enriched records acknowledged by the broker
    /// (`lakejoin_records_produced_total`, /metrics polled every 200 ms); fails when the
    /// count does not move for [`STALL`] or the process exits.
    fn wait_produced(&self, process: &mut Lakejoin, n: u64) -> Result<()> {
        let series =
            "lakejoin_records_produced_total{pipeline=\"orders-enriched\",kind=\"enrich\"}";
        let mut last = 0;
        let mut last_change = Instant::now();
        loop {
            process.check_alive()?;
            let total = metric(&process.metrics()?, series).unwrap_or(0.0) as u64;
            if total >= n {
                return Ok(());
            }
            if total != last {
                last = total;
                last_change = Instant::now();
            } else if last_change.elapsed() > STALL {
                bail!("lakejoin produced {total} of {n} records, then nothing for {STALL:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Reads `topic` back and checks every record: exactly one per order of `orders`,
    /// each the order unchanged plus what `joins` joins add to it (its customer's columns,
    /// or nulls for an unknown customer), and exactly as many with every join matched as
    /// orders name a known customer. `joins` = 0: the orders unchanged.
    fn scan(&self, topic: &str, joins: usize, orders: &Orders) -> Result<OutputScan> {
        let expected = check::Joins {
            count: joins,
            customers: self.settings.customers,
            customer_of: &orders.customer_of,
        };
        let mut checked = check::OutputCheck::default();
        let scan = scan_output(&self.bootstrap, topic, self.settings.orders, |payload| {
            checked.record(payload, expected)
        })?;
        checked
            .verdict()
            .map_err(|e| anyhow::anyhow!("{topic}: {e}"))?;
        if scan.records != self.settings.orders {
            bail!(
                "{topic} holds {} records, expected {}",
                scan.records,
                self.settings.orders
            );
        }
        let hits = if joins == 0 {
            self.settings.orders
        } else {
            orders.known(self.settings.customers)
        };
        if scan.accepted != hits {
            bail!(
                "{} of {} outputs were enriched, expected exactly {hits}",
                scan.accepted,
                scan.records
            );
        }
        Ok(scan)
    }

    /// The harness's plain loop with the producer `settings` (`lean`: the lean ones).
    fn passthrough(&self, case: &str, lean: bool) -> Result<CaseResult> {
        let output = self.new_output(case)?;
        let settings: loops::ProducerSettings<'_> = if lean {
            &kafka::LEAN_PRODUCER_SETTINGS
        } else {
            &kafka::PRODUCER_SETTINGS
        };
        let meter = self.meter(std::process::id(), &[])?;
        loops::passthrough(
            &self.bootstrap,
            &self.orders.topic,
            &output,
            self.settings.orders,
            settings,
        )?;
        let cpu = meter.stop()?;
        let scan = self.scan(&output, 0, &self.orders)?;
        let producer = if lean {
            "lean producer (linger.ms=5, no compression, no idempotence)"
        } else {
            "lakejoin's producer settings"
        };
        Ok(CaseResult::measured(
            &scan,
            &format!("plain rdkafka loop, payload unchanged, {producer}"),
        )?
        .with_cpu(cpu))
    }

    fn hand_written(&self, case: &str, joined: &loops::JoinedText) -> Result<CaseResult> {
        let output = self.new_output(case)?;
        let meter = self.meter(std::process::id(), &[])?;
        loops::hand_written_enrich(
            &self.bootstrap,
            joined,
            &self.orders.topic,
            &output,
            self.settings.orders,
        )?;
        let cpu = meter.stop()?;
        let scan = self.scan(&output, 1, &self.orders)?;
        CaseResult::measured(
            &scan,
            &format!(
                "derived deserializer for the key, pre-rendered columns spliced in, one thread; {:.1}% hits",
                100.0 * scan.accepted as f64 / scan.records as f64
            ),
        )
        .map(|r| r.with_cpu(cpu))
    }

    fn redis(&self, case: &str, redis: &mut redis::Redis, server_pid: u32) -> Result<CaseResult> {
        let output = self.new_output(case)?;
        let meter = self.meter(std::process::id(), &[("redis-server", server_pid)])?;
        loops::redis_enrich(
            &self.bootstrap,
            redis,
            &self.orders.topic,
            &output,
            self.settings.orders,
        )?;
        let cpu = meter.stop()?;
        let scan = self.scan(&output, 1, &self.orders)?;
        CaseResult::measured(
            &scan,
            &format!(
                "1 pipelined HGET round trip per poll batch (≤ 1,000); {:.1}% hits",
                100.0 * scan.accepted as f64 / scan.records as f64
            ),
        )
        .map(|r| r.with_cpu(cpu))
    }

    /// Flink + Paimon's lookup join of the orders with the customers table lakejoin wrote
    /// (`cache`: `full` or `default`). CPU and peak memory are those of the job's Python
    /// process and JVM, from the first output record (the table loaded, the job warmed up)
    /// to the last, scaled to every record.
    fn flink(
        &self,
        case: &str,
        cache: &str,
        parallelism: u32,
        async_lookup: bool,
        install: &std::path::Path,
    ) -> Result<CaseResult> {
        let output = self.new_output(case)?;
        let dir = self.dir.join(case);
        let _ = std::fs::remove_dir_all(&dir);
        let mut job = flink::FlinkJob::start(
            install,
            &dir,
            &flink::FlinkEnrich {
                bootstrap: &self.bootstrap,
                warehouse: &self.warehouse,
                orders: &self.orders.topic,
                output: &output,
                cache,
                parallelism,
                async_lookup,
                group: &self.topic(case),
            },
        )?;
        let count = kafka::TopicCount::new(&self.bootstrap, &output)?;
        let n = self.settings.orders;
        let mut first = 0;
        wait_for("the Flink job's first output", STALL, || {
            job.check_alive()?;
            first = count.records()?;
            Ok(first > 0)
        })?;
        let mut processes: Vec<(&'static str, u32)> =
            job.pids().into_iter().map(|p| (CASE_PROCESS, p)).collect();
        processes.extend(self.broker_pid.map(|p| (BROKER_PROCESS, p)));
        let meter = CpuMeter::start(&processes)?;
        let at_start = count.records()?;
        let mut last = at_start;
        let mut last_change = Instant::now();
        loop {
            job.check_alive()?;
            let now = count.records()?;
            if now >= n {
                break;
            }
            if now != last {
                last = now;
                last_change = Instant::now();
            } else if last_change.elapsed() > STALL {
                bail!("Flink produced {now} of {n} records, then nothing for {STALL:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let measured = meter.stop()?;
        let rss_mib = job.peak_rss_mib();
        drop(job);
        // The window saw n − at_start records; CPU per record scales to all n.
        let scale = n as f64 / (n - at_start.min(n - 1)) as f64;
        let cpu = measured.scaled(scale);
        let scan = self.scan(&output, 1, &self.orders)?;
        CaseResult::measured(
            &scan,
            &format!(
                "PyFlink {} job (parallelism {parallelism}{}), `lookup.cache` {}; {:.1}% with \
                 customer matched; peak RSS {rss_mib:.0} MiB (Python process + JVM); CPU over the \
                 last {} records",
                "2.0.2",
                if async_lookup { ", async lookups" } else { "" },
                if cache == "full" {
                    "FULL"
                } else {
                    "default (AUTO)"
                },
                100.0 * scan.accepted as f64 / scan.records as f64,
                n - at_start,
            ),
        )
        .map(|r| r.with_cpu(cpu).with_peak_rss(rss_mib))
    }

    /// RSS of `lakejoin run` with a `full` cache of `rss_rows` customers, against the same
    /// process with `cache = "none"` (the table not loaded).
    fn rss(&self) -> Result<report::Rss> {
        let rows = self.settings.rss_rows;
        let topic = self.topic("customers-rss");
        let facts = self.topic("idle-facts");
        let output = self.topic("out-rss");
        create_topics(&self.bootstrap, &[(&topic, 4), (&facts, 1), (&output, 1)])?;
        let producer = BulkProducer::new(&self.bootstrap)?;
        for id in 1..=rows {
            let (k, v) = data::customer(id);
            producer.send(&topic, &k, &v)?;
        }
        producer.flush()?;
        let warehouse = self.dir.join("rss-warehouse");
        let mut config = config_head(
            &self.bootstrap,
            &self.topic("rss-load"),
            &warehouse,
            &self.lakejoin.kafka_properties,
        );
        config.push_str(table("shop.customers"));
        config.push_str(&format!(
            "\n[[cdc]]\nname = \"customers-cdc\"\ntopics = [\"{topic}\"]\nformat = \"upsert-json\"\ntable = \"shop.customers\"\n"
        ));
        let mut process = Lakejoin::start(&self.dir, "rss-load", &config, &self.lakejoin.binary)?;
        wait_for(
            &format!("{rows} customers committed"),
            Duration::from_secs(900),
            || {
                process.check_alive()?;
                covers(&warehouse, "shop.customers", "customers-cdc", rows)
            },
        )?;
        process.stop()?;
        let measure = |cache: &str| -> Result<(f64, f64, (f64, f64), String)> {
            let mut config = config_head(
                &self.bootstrap,
                &self.topic(&format!("rss-{cache}")),
                &warehouse,
                &self.lakejoin.kafka_properties,
            );
            config.push_str(table("shop.customers"));
            config.push_str(&format!(
                r#"
[[enrich]]
name = "idle"
topics = ["{facts}"]
output = {{ topic = "{output}" }}

[[enrich.join]]
table = "shop.customers"
on = {{ customer_id = "id" }}
select = ["name", "email", "country", "region", "segment"]
cache = "{cache}"
"#
            ));
            let mut process = Lakejoin::start(
                &self.dir,
                &format!("rss-{cache}"),
                &config,
                &self.lakejoin.binary,
            )?;
            process.wait_ready(Duration::from_secs(300))?;
            let pid = process.pid();
            let rss = proc_status_kib(pid, "VmRSS")? as f64 / 1024.0;
            let hwm = proc_status_kib(pid, "VmHWM")? as f64 / 1024.0;
            let settled = settled_rss_mib(pid, Duration::from_secs(15), Duration::from_secs(60))?;
            let metrics = process.metrics()?;
            let cache_rows = metrics
                .lines()
                .find(|l| l.starts_with("lakejoin_lookup_cache_rows{"))
                .and_then(|l| l.rsplit(' ').next())
                .unwrap_or("?")
                .to_owned();
            let cache_bytes = metrics
                .lines()
                .find(|l| l.starts_with("lakejoin_lookup_cache_bytes{"))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
                .map_or("?".to_owned(), |b| format!("{:.0} MiB", b / 1048576.0));
            let load = metrics
                .lines()
                .find(|l| l.starts_with("lakejoin_lookup_load_milliseconds{"))
                .and_then(|l| l.rsplit(' ').next())
                .unwrap_or("?")
                .to_owned();
            process.stop()?;
            Ok((
                rss,
                hwm,
                settled,
                format!("cache rows {cache_rows}, cache bytes {cache_bytes}, load {load} ms"),
            ))
        };
        let (none_rss, none_hwm, (none_settled, _), _) = measure("none")?;
        let (full_rss, full_hwm, (full_settled, settled_after), full_detail) = measure("full")?;
        Ok(report::Rss {
            rows,
            none_rss,
            none_hwm,
            none_settled,
            full_rss,
            full_hwm,
            full_settled,
            settled_after,
            full_detail,
        })
    }
}

fn work_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("BENCH_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-throughput"),
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("throughput benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    // `cargo bench` passes `--bench`; a test listing (`--list`) must not run the benchmark.
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let settings = Settings::from_env()?;
    let dir = work_dir()?;
    let mut report = Report::start(&settings_line(&settings));
    println!(
        "throughput benchmark; logs and warehouses in {}",
        dir.display()
    );
    let (bootstrap, kafka_broker) = kafka::broker(&dir.join("kafka"))?;
    println!("broker: {bootstrap}");
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let topic = |base: &str| format!("{base}-{run_id}");
    let mut bench = Bench {
        orders: Orders {
            topic: topic("orders"),
            customer_of: Vec::new(),
        },
        storm: Orders {
            topic: topic("storm"),
            customer_of: Vec::new(),
        },
        customers_topic: topic("customers"),
        profiles_topic: topic("profiles"),
        regions_topic: topic("regions"),
        warehouse: dir.join("warehouse"),
        settings,
        bootstrap,
        dir,
        run_id,
        broker_pid: kafka_broker.as_ref().map(|k| k.pid()).transpose()?,
        lakejoin: Variant::from_env(),
    };
    bench.produce_data()?;

    let wants_redis = bench.settings.wants(REDIS_CASE);
    let mut enrich_cases = Vec::new();
    for joins in [1, 3] {
        for cache in ["full", "partial", "none"] {
            let plural = if joins == 1 { "" } else { "s" };
            let name = format!("lakejoin {cache} {joins} join{plural}");
            enrich_cases.push((name, format!("{cache}-{joins}"), cache, joins));
        }
    }
    let mut redis_server = None;
    let mut redis_client = None;
    if wants_redis {
        let server = redis::RedisServer::start(&bench.dir.join("redis.log"))?;
        let mut client = redis::Redis::connect(&server.address)?;
        loops::redis_load(&mut client, bench.settings.customers, data::customer_cached)?;
        println!(
            "redis-server on {}: {} customers loaded",
            server.address, bench.settings.customers
        );
        redis_server = Some(server);
        redis_client = Some(client);
    }
    let flink_install = if FLINK_CASES
        .iter()
        .any(|(name, ..)| bench.settings.wants(name))
    {
        Some(flink::install()?)
    } else {
        None
    };
    if enrich_cases
        .iter()
        .any(|(name, ..)| bench.settings.wants(name))
        || bench.settings.wants(STORM_CASE)
        || flink_install.is_some()
    {
        bench.load_dimensions()?;
    }

    if let Some(comparison) = compare::Comparison::from_env(&bench.lakejoin)? {
        return comparison.run(&bench, &enrich_cases);
    }

    let cases_filter = bench.settings.cases.clone();
    let mut run_case = |name: &str, f: &mut dyn FnMut() -> Result<CaseResult>| {
        if !matches(&cases_filter, name) {
            return;
        }
        println!("\n--- {name}");
        let started = Instant::now();
        let load = report::loadavg();
        let result = f();
        match &result {
            Ok(r) => println!(
                "{name}: {} records, {:.0} records/s ({}) [{:.1} s, load before {load}]",
                r.records,
                r.rate,
                r.detail,
                started.elapsed().as_secs_f64()
            ),
            Err(e) => println!("{name}: FAILED: {e:#}"),
        }
        report.add(name, result);
    };

    run_case("passthrough, lakejoin's producer settings", &mut || {
        bench.passthrough("passthrough", false)
    });
    run_case("passthrough, lean producer", &mut || {
        bench.passthrough("passthrough-lean", true)
    });
    if let (Some(client), Some(server)) = (redis_client.as_mut(), redis_server.as_ref()) {
        let pid = server.pid();
        run_case(REDIS_CASE, &mut || bench.redis("redis", client, pid));
    }
    run_case(HAND_WRITTEN_CASE, &mut || {
        // Rendered before the case's CPU meter starts, as lakejoin loads its cache first.
        let joined = loops::JoinedText::load(bench.settings.customers, data::customer_cached)?;
        bench.hand_written("hand-written", &joined)
    });
    for (name, case, cache, joins) in &enrich_cases {
        run_case(name, &mut || {
            bench.enrich(case, cache, *joins, &bench.orders, &bench.lakejoin)
        });
    }
    run_case(STORM_CASE, &mut || {
        bench.enrich("storm", "partial", 1, &bench.storm, &bench.lakejoin)
    });
    run_case("lakejoin CDC ingest", &mut || {
        bench.ingest("ingest", &bench.lakejoin, false)
    });
    run_case(WRITE_ONLY_INGEST_CASE, &mut || {
        bench.ingest("ingest-write-only", &bench.lakejoin, true)
    });
    run_case(HAND_WRITTEN_INGEST_CASE, &mut || {
        bench.hand_written_ingest("hand-written-ingest")
    });
    if let Some(install) = &flink_install {
        for (name, case, cache, parallelism, async_lookup) in FLINK_CASES {
            run_case(name, &mut || {
                bench.flink(case, cache, parallelism, async_lookup, install)
            });
        }
    }
    run_case("passthrough, lean producer, again (last)", &mut || {
        bench.passthrough("passthrough-last", true)
    });
    drop(redis_server);

    if bench.settings.wants("rss") {
        println!(
            "\n--- RSS with a {}-row full cache",
            bench.settings.rss_rows
        );
        match bench.rss() {
            Ok(rss) => {
                println!("{}", rss.line());
                report.rss = Some(Ok(rss));
            }
            Err(e) => {
                println!("RSS: FAILED: {e:#}");
                report.rss = Some(Err(format!("{e:#}")));
            }
        }
    }

    let failed = report.finish(&bench.dir, bench.settings.cases.is_none())?;
    if failed > 0 {
        bail!(
            "{failed} case(s) failed (see above and the logs in {})",
            bench.dir.display()
        );
    }
    Ok(())
}

pub(crate) fn settings_line(s: &Settings) -> String {
    format!(
        "{} orders ({} partitions), {} customers, {} regions, RSS table {} rows",
        s.orders,
        s.partitions,
        s.customers,
        data::REGIONS,
        s.rss_rows
    )
}
