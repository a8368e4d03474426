//! Table engine benchmark on a 1,000,000-row, 8-column table on local disk, in one run:
//! write throughput, point-lookup latency (after full compaction and with 5 level-0
//! runs), `get_many` throughput, full-scan throughput, and pypaimon's scan of the same
//! table as the side-by-side reference.
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
    });
    pypaimon_scan(dir.path(), "bench.compacted", rows);
    pypaimon_scan(dir.path(), "bench.layered", rows);
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
