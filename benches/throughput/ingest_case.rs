//! The lakejoin CDC ingest case: `lakejoin run` with one upsert-json `[[cdc]]` pipeline of
//! the orders into a 4-bucket table, timed from the first order consumed to the commit
//! whose snapshot covers them all; and its floor, the hand-written ingest of ingest_floor.rs.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::ingest_floor::hand_written_ingest;
use crate::lakejoin::{Lakejoin, Variant, config_head, covers, metric, snapshots, table};
use crate::report::CaseResult;
use crate::util::proc_status_kib;
use crate::{Bench, STALL, now_ms};

/// Rows per commit of `n` orders: the largest divisor of `n` that is at most lakejoin's
/// default `commit_max_rows` (100,000) and gives at least 3 commits, so that the last
/// commit comes exactly at the last order. (A remainder would wait for the 5 s
/// `commit_interval`, which measures the end of the data set, not the ingest.)
fn commit_rows(n: u64) -> u64 {
    (3..=n)
        .find(|k| n.is_multiple_of(*k) && n / k <= 100_000)
        .map_or(n, |k| n / k)
}

impl Bench {
    /// The floor under the CDC ingest (ingest_floor.rs): the orders into Parquet files of
    /// as many rows as lakejoin commits at a time, timed from the first order consumed to
    /// the last file closed.
    pub(super) fn hand_written_ingest(&self, case: &str) -> Result<CaseResult> {
        let n = self.settings.orders;
        let rows = commit_rows(n);
        let dir = self.dir.join(format!("{case}-files"));
        let meter = self.meter(std::process::id(), &[])?;
        let span = hand_written_ingest(
            &self.bootstrap,
            &self.orders.topic,
            n,
            &dir,
            usize::try_from(rows)?,
        )?;
        let cpu = meter.stop()?;
        let seconds = span.last.duration_since(span.first).as_secs_f64();
        if seconds <= 0.0 {
            bail!("the last file was closed no later than the first order arrived");
        }
        Ok(CaseResult {
            records: n,
            rate: n as f64 / seconds,
            detail: format!(
                "derived deserializer into Arrow builders, {} zstd Parquet files of {rows} rows ({:.1} MiB), one thread; no table",
                span.files,
                span.bytes as f64 / (1024.0 * 1024.0)
            ),
            cpu,
            peak_rss_mib: None,
            instructions_per_record: None,
        })
    }

    /// CDC ingest of the orders as upsert-json into a 4-bucket table (`write_only`: one
    /// whose writer never compacts): rows / (commit time of the snapshot covering every
    /// order − the moment the first order was consumed).
    pub(super) fn ingest(
        &self,
        case: &str,
        lakejoin: &Variant,
        write_only: bool,
    ) -> Result<CaseResult> {
        let n = self.settings.orders;
        let warehouse = self.dir.join(format!("{case}-warehouse"));
        let commit_max_rows = commit_rows(n);
        let mut config = config_head(
            &self.bootstrap,
            &self.topic(case),
            &warehouse,
            &lakejoin.kafka_properties,
        );
        config.push_str(table("shop.orders"));
        if write_only {
            config.push_str("options = { \"write-only\" = \"true\" }\n");
        }
        config.push_str(&format!(
            "\n[[cdc]]\nname = \"orders-cdc\"\ntopics = [\"{}\"]\nformat = \"upsert-json\"\ntable = \"shop.orders\"\ncommit_max_rows = {commit_max_rows}\n",
            self.orders.topic
        ));
        if lakejoin.callgrind.is_some() {
            // Natively the ingest ends before the 5 s timer commits; ~50× slower it would
            // not, and each extra commit (and the compaction it may start) would make the
            // count depend on the run's speed.
            config.push_str("commit_interval = \"1h\"\n");
        }
        let spawned_ms = now_ms();
        let mut process = Lakejoin::start_variant(&self.dir, case, &config, lakejoin)?;
        let pid = process.pid();
        // CPU from the endpoint's start to the covering commit (start-up included).
        let meter = self.meter(pid, &[])?;
        let series = "lakejoin_records_consumed_total{pipeline=\"orders-cdc\",kind=\"cdc\"}";
        // The start: the last moment /metrics (sampled every 10 ms) still showed nothing
        // consumed, or the spawn when the first sample already showed records. An early
        // bound, so the rate errs low, never high.
        let deadline = Instant::now() + STALL;
        let mut start_ms = spawned_ms;
        loop {
            process.check_alive()?;
            let before = now_ms();
            if metric(&process.metrics()?, series).unwrap_or(0.0) > 0.0 {
                break;
            }
            start_ms = before;
            if Instant::now() > deadline {
                bail!("orders-cdc consumed nothing within {STALL:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut last_covered = 0;
        let mut last_change = Instant::now();
        loop {
            process.check_alive()?;
            if covers(&warehouse, "shop.orders", "orders-cdc", n)? {
                break;
            }
            let covered = snapshots(&warehouse, "shop.orders", "orders-cdc")?
                .iter()
                .filter_map(|s| s.covered)
                .max()
                .unwrap_or(0);
            if covered != last_covered {
                last_covered = covered;
                last_change = Instant::now();
            } else if last_change.elapsed() > STALL {
                bail!("shop.orders stalled at {covered} of {n} committed rows");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let cpu = meter.stop()?;
        let rss_mib = proc_status_kib(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0;
        let instructions = process.stop_counting()?;
        let all = snapshots(&warehouse, "shop.orders", "orders-cdc")?;
        let appends: Vec<_> = all.iter().filter(|s| s.covered.is_some()).collect();
        let last = appends
            .iter()
            .find(|s| s.covered >= Some(n))
            .context("no snapshot covers every order")?;
        let first = appends.first().context("no snapshot")?;
        let span_ms = last.time_millis - start_ms;
        if span_ms <= 0 {
            bail!("the covering commit is not after the first consumed record");
        }
        let rate = n as f64 * 1000.0 / span_ms as f64;
        let between = if last.id != first.id {
            let rows = n - first.covered.unwrap_or(0);
            format!(
                "; between its first and last commit {:.0} rows/s",
                rows as f64 * 1000.0 / (last.time_millis - first.time_millis).max(1) as f64
            )
        } else {
            String::new()
        };
        let commits = appends.iter().filter(|s| s.id <= last.id).count();
        Ok(CaseResult {
            records: n,
            rate,
            detail: format!(
                "{commits} commits (commit_max_rows {commit_max_rows}), {} snapshots in all{between}; peak RSS {rss_mib:.0} MiB",
                all.iter().filter(|s| s.id <= last.id).count()
            ),
            cpu,
            peak_rss_mib: Some(rss_mib),
            instructions_per_record: None,
        }
        .with_instructions(instructions))
    }
}
