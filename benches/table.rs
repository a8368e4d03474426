//! Table engine benchmark on a 1,000,000-row, 8-column table on local disk, in one run:
//! write throughput, point-lookup latency (after full compaction and with 5 level-0
//! runs), `get_many` throughput, full-scan throughput, and pypaimon's scan of the same
//! table as the side-by-side reference; and the write amplification of compaction when
//! keys grow (an auto-increment id), against the same commits into a write-only table.
//!
//! `cargo bench --bench table` (ROWS=… to change the size; LAKEJOIN_PYTHON for pypaimon).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lakejoin::lsm::compact::full_compact;
use lakejoin::lsm::point_lookup::{LookupOptions, PointLookup};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::{Table, TableIdentifier, Warehouse};

mod common;
use common::{keys, percentile, row, schema};

async fn lookup_latencies(lookup: &PointLookup, rows: i64, label: &str) {
    let warm = keys(20_000, rows, 7);
    for k in &warm {
        lookup.get(&[Datum::BigInt(*k)]).await.expect("lookup");
    }
    let sample = keys(50_000, rows, 11);
    let mut lat = Vec::with_capacity(sample.len());
    let mut hits = 0;
    for k in &sample {
        let t = Instant::now();
        if lookup
            .get(&[Datum::BigInt(*k)])
            .await
            .expect("lookup")
            .is_some()
        {
            hits += 1;
        }
        lat.push(t.elapsed());
    }
    assert_eq!(hits, sample.len(), "every key is present");
    lat.sort();
    println!(
        "point lookup ({label}): p50 {:.1} µs, p99 {:.1} µs, mean {:.1} µs over {} lookups",
        percentile(&lat, 0.50).as_secs_f64() * 1e6,
        percentile(&lat, 0.99).as_secs_f64() * 1e6,
        lat.iter().sum::<Duration>().as_secs_f64() * 1e6 / lat.len() as f64,
        lat.len()
    );
}

async fn get_many_throughput(lookup: &PointLookup, rows: i64, label: &str) {
    let batch: Vec<Vec<Datum>> = keys(100_000, rows, 13)
        .into_iter()
        .map(|k| vec![Datum::BigInt(k)])
        .collect();
    let t = Instant::now();
    let mut found = 0;
    for chunk in batch.chunks(1000) {
        found += lookup
            .get_many(chunk)
            .await
            .expect("get_many")
            .iter()
            .filter(|r| r.is_some())
            .count();
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(found, batch.len());
    println!(
        "get_many ({label}): {:.0} lookups/s (batches of 1000, one core)",
        batch.len() as f64 / secs
    );
}

fn main() {
    let rows: i64 = std::env::var("ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    // One core: a current-thread runtime (blocking encode tasks still use a helper thread).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let wh = Warehouse::from_uri(dir.path().to_str().expect("utf-8 path"), &BTreeMap::new())
        .expect("warehouse");
    println!(
        "table: {rows} rows × 8 columns, 4 buckets, local disk {}",
        dir.path().display()
    );
    rt.block_on(async {
        // Write throughput: every row through the writer, flush and commit included.
        let compacted = Arc::new(
            Table::create(
                &wh,
                &TableIdentifier::parse("bench.compacted").expect("id"),
                schema(),
            )
            .await
            .expect("create"),
        );
        let t = Instant::now();
        let mut w = TableWriter::new(compacted.clone(), "bench")
            .await
            .expect("writer");
        for id in 0..rows {
            w.write(RowKind::Insert, row(id, 0)).expect("write");
        }
        w.commit(BTreeMap::new()).await.expect("commit");
        let secs = t.elapsed().as_secs_f64();
        println!(
            "write: {:.0} rows/s ({rows} rows, one commit, {secs:.2} s)",
            rows as f64 / secs
        );
        let t = Instant::now();
        full_compact(&compacted, "bench-compact")
            .await
            .expect("compact");
        println!("full compaction: {:.2} s", t.elapsed().as_secs_f64());

        // Five overlapping level-0 runs: commit i writes the keys ≡ i (mod 5).
        let layered = Arc::new(
            Table::create(
                &wh,
                &TableIdentifier::parse("bench.layered").expect("id"),
                schema(),
            )
            .await
            .expect("create"),
        );
        for run in 0..5 {
            let mut w = TableWriter::new(layered.clone(), "bench")
                .await
                .expect("writer");
            for id in (run..rows).step_by(5) {
                w.write(RowKind::Insert, row(id, 1)).expect("write");
            }
            w.commit(BTreeMap::new()).await.expect("commit");
        }

        let lookup = PointLookup::open(compacted.clone(), LookupOptions::default())
            .await
            .expect("lookup");
        lookup_latencies(&lookup, rows, "after full compaction").await;
        get_many_throughput(&lookup, rows, "after full compaction").await;
        let lookup = PointLookup::open(layered.clone(), LookupOptions::default())
            .await
            .expect("lookup");
        lookup_latencies(&lookup, rows, "5 level-0 runs").await;
        get_many_throughput(&lookup, rows, "5 level-0 runs").await;

        let t = Instant::now();
        let n = scan(&compacted, None, &ScanFilter::default())
            .await
            .expect("scan")
            .len();
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(n as i64, rows);
        println!(
            "full scan (lakejoin, compacted): {:.0} rows/s ({secs:.2} s)",
            rows as f64 / secs
        );
        let t = Instant::now();
        let n = scan(&layered, None, &ScanFilter::default())
            .await
            .expect("scan")
            .len();
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(n as i64, rows);
        println!(
            "full scan (lakejoin, 5 level-0 runs): {:.0} rows/s ({secs:.2} s)",
            rows as f64 / secs
        );

        growing_keys(&wh, rows).await;
    });
    pypaimon_scan(dir.path(), "bench.compacted", rows);
    pypaimon_scan(dir.path(), "bench.layered", rows);
}

/// Commits of growing keys (36 of `rows / 36` rows), each followed by the compaction the
/// writer waits for, then a full compaction, into a 1-bucket table with a 2 MiB
/// `target-file-size` (so that files reach it); and the same commits into a `write-only`
/// twin, which never compacts. The bytes the first holds beyond the twin's were written
/// by compactions; files that overlap nothing move up a level without being rewritten.
async fn growing_keys(wh: &Warehouse, rows: i64) {
    const COMMITS: i64 = 36;
    let per_commit = (rows / COMMITS).max(1);
    let mut results = Vec::new();
    for (name, write_only) in [("bench.growing", false), ("bench.growing_write_only", true)] {
        let mut schema = schema();
        schema.options.insert("bucket".into(), "1".into());
        schema
            .options
            .insert("target-file-size".into(), "2 mb".into());
        schema
            .options
            .insert("write-only".into(), write_only.to_string());
        let table = Arc::new(
            Table::create(wh, &TableIdentifier::parse(name).expect("id"), schema)
                .await
                .expect("create"),
        );
        let cpu = process_cpu_seconds();
        let mut w = TableWriter::new(table.clone(), "bench")
            .await
            .expect("writer");
        for commit in 0..COMMITS {
            for id in commit * per_commit..(commit + 1) * per_commit {
                w.write(RowKind::Insert, row(id, 0)).expect("write");
            }
            w.commit(BTreeMap::new()).await.expect("commit");
            w.wait_for_compaction().await.expect("compaction");
        }
        w.close().await.expect("close");
        let writes_cpu = process_cpu_seconds() - cpu;
        let cpu = process_cpu_seconds();
        if !write_only {
            full_compact(&table, "bench-compact")
                .await
                .expect("full compaction");
        }
        let full_cpu = process_cpu_seconds() - cpu;
        let bytes = data_bytes(&table).await;
        results.push((writes_cpu, full_cpu, bytes));
    }
    let [(cpu, full_cpu, bytes), (cpu_flush_only, _, flushed)] = results[..] else {
        return;
    };
    println!(
        "growing keys ({COMMITS} commits of {per_commit} rows, target-file-size 2 MiB): \
         {:.1} MiB written for {:.1} MiB flushed ({:.2}x); commits with compaction {cpu:.2} \
         CPU-s, write-only {cpu_flush_only:.2} CPU-s; full compaction after {full_cpu:.2} CPU-s",
        bytes as f64 / (1 << 20) as f64,
        flushed as f64 / (1 << 20) as f64,
        bytes as f64 / flushed.max(1) as f64,
    );
}

/// Bytes of every data file in the table's directory: all ever written, as nothing expired.
async fn data_bytes(table: &Table) -> u64 {
    use futures::TryStreamExt;
    let listed: Vec<_> = table
        .store()
        .list(Some(&table.path_of("bucket-0")))
        .try_collect()
        .await
        .expect("list");
    listed.iter().map(|o| o.size).sum()
}

/// User + system CPU of this process so far, from `/proc/self/stat` (Linux; 0 elsewhere).
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesized command name: utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // USER_HZ is 100 on every Linux this runs on.
    (ticks(11) + ticks(12)) / 100.0
}

/// pypaimon's own read of the same table, timed inside Python (interpreter start excluded).
fn pypaimon_scan(warehouse: &std::path::Path, table: &str, rows: i64) {
    let python = std::env::var("LAKEJOIN_PYTHON")
        .unwrap_or_else(|_| format!("{}/.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let script = r#"
import sys, time
from pypaimon import CatalogFactory
catalog = CatalogFactory.create({'warehouse': sys.argv[1]})
table = catalog.get_table(sys.argv[2])
start = time.perf_counter()
rb = table.new_read_builder()
n = rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows
print(n, time.perf_counter() - start)
"#;
    let out = std::process::Command::new(&python)
        .args(["-c", script, warehouse.to_str().unwrap_or_default(), table])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let mut parts = text.split_whitespace();
            let n: i64 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(-1);
            let secs: f64 = parts
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(f64::NAN);
            assert_eq!(n, rows, "pypaimon read a different row count");
            println!(
                "full scan (pypaimon 2.1.0, {table}): {:.0} rows/s ({secs:.2} s)",
                rows as f64 / secs
            );
        }
        Ok(o) => println!(
            "pypaimon scan failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => println!(
            "pypaimon not available ({python}): {e}; run scripts/test.sh to create the venv"
        ),
    }
}
