//! Lookup-join strategies on a 1,000,000-row, 8-column table, in one run: lookups/s on
//! one core and latency percentiles for `full`, `partial` (hits) and `none`; memory per
//! row of the `full` cache against the rows' BinaryRow size, and heap bytes per `partial`
//! entry (a cached row, a remembered miss); time to load it; time for each strategy to
//! apply a refresh that changed 10,000 rows.
//!
//! `cargo bench --bench lookup` (ROWS=… to change the size).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use lakejoin::lookup::{LookupSpec, LookupTable, PartialOptions, Strategy, TableLookups};
use lakejoin::lsm::compact::full_compact;
use lakejoin::lsm::point_lookup::{LookupOptions, PointLookup};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::{Table, TableIdentifier, Warehouse};

mod common;
use common::{keys, percentile, row, schema};

/// The system allocator, counting the bytes asked for and not yet freed, so the benchmark
/// can tell what a `partial` cache entry costs (its row, moka's bookkeeping, the front
/// table's slot and their growth), which no estimate inside the cache sees whole.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's pointer, layout and size.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Keys per `get_many` call: the enrich pipeline's lookup batch.
const LOOKUP_BATCH: usize = 256;

/// A join on `id` returning `name` and `city`, with its own point lookups.
async fn join(table: &Arc<Table>, strategy: Strategy) -> (Arc<TableLookups>, Arc<LookupTable>) {
    let point = Arc::new(
        PointLookup::open(table.clone(), LookupOptions::default())
            .await
            .expect("point lookups"),
    );
    let spec = LookupSpec {
        strategy,
        key_columns: vec![0],
        projection: vec![1, 2],
        partition: None,
    };
    let lookup = Arc::new(LookupTable::new(point.clone(), spec).expect("lookup table"));
    let lookups = Arc::new(TableLookups::new(point, vec![lookup.clone()]));
    (lookups, lookup)
}

/// Hits per second on one core (no timing per lookup) and latency percentiles (timed
/// individually, on a separate pass).
async fn measure(lookup: &LookupTable, ids: &[i64], label: &str) {
    let t = Instant::now();
    let mut hits = 0usize;
    for &id in ids {
        if lookup
            .get(&[Datum::BigInt(id)])
            .await
            .expect("get")
            .is_some()
        {
            hits += 1;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(hits, ids.len(), "{label}: every key is in the table");
    // Batched as the enrich pipeline looks up a poll batch.
    let probes: Vec<[Datum; 1]> = ids.iter().map(|&id| [Datum::BigInt(id)]).collect();
    let t = Instant::now();
    let mut batched_hits = 0usize;
    for batch in probes.chunks(LOOKUP_BATCH) {
        let keys: Vec<&[Datum]> = batch.iter().map(|k| k.as_slice()).collect();
        let rows = lookup.get_many(&keys).await.expect("get_many");
        batched_hits += rows.iter().filter(|r| r.is_some()).count();
    }
    let batched_secs = t.elapsed().as_secs_f64();
    assert_eq!(
        batched_hits,
        ids.len(),
        "{label}: every key is in the table"
    );
    let mut latencies = Vec::with_capacity(ids.len().min(200_000));
    for &id in ids.iter().take(200_000) {
        let t = Instant::now();
        let _ = lookup.get(&[Datum::BigInt(id)]).await.expect("get");
        latencies.push(t.elapsed());
    }
    latencies.sort();
    println!(
        "{label}: {:>10.0} lookups/s one by one, {:>10.0} lookups/s in batches of \
         {LOOKUP_BATCH}, p50 {:?}, p99 {:?}, p99.9 {:?} ({} lookups)",
        ids.len() as f64 / secs,
        ids.len() as f64 / batched_secs,
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        ids.len()
    );
}

fn main() {
    let rows: i64 = std::env::var("ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    // One core: a current-thread runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let wh = Warehouse::from_uri(dir.path().to_str().expect("utf-8 path"), &BTreeMap::new())
        .expect("warehouse");
    println!("table: {rows} rows × 8 columns, 4 buckets, fully compacted, local disk");
    rt.block_on(async {
        let table = Arc::new(
            Table::create(
                &wh,
                &TableIdentifier::parse("bench.customers").expect("id"),
                schema(),
            )
            .await
            .expect("create"),
        );
        let mut w = TableWriter::new(table.clone(), "bench")
            .await
            .expect("writer");
        for id in 0..rows {
            w.write(RowKind::Insert, row(id, 0)).expect("write");
        }
        w.commit(BTreeMap::new()).await.expect("commit");
        full_compact(&table, "bench-compact")
            .await
            .expect("compact");

        // full: load, memory, hits.
        let (full_lookups, full) = join(&table, Strategy::Full).await;
        let t = Instant::now();
        full_lookups.load().await.expect("load");
        let load = t.elapsed();
        let (cached, heap, binary_rows) = full.full_cache_size().expect("a full cache");
        println!(
            "full: load {:.2} s ({:.0} rows/s); {cached} rows, {:.1} heap bytes/row, \
             BinaryRow of the kept columns {:.1} bytes/row, ratio {:.2}",
            load.as_secs_f64(),
            cached as f64 / load.as_secs_f64(),
            heap as f64 / cached as f64,
            binary_rows as f64 / cached as f64,
            heap as f64 / binary_rows as f64
        );
        measure(&full, &keys(2_000_000, rows, 11), "full   ").await;

        // partial: a hot set of 100,000 keys, warmed first; then hits.
        let (partial_lookups, partial) = join(
            &table,
            Strategy::Partial(PartialOptions {
                max_rows: 1_000_000,
                max_bytes: None,
                expire_after_write: None,
                expire_after_access: None,
                cache_missing_keys: true,
            }),
        )
        .await;
        let hot = keys(100_000, rows, 13);
        let t = Instant::now();
        for &id in &hot {
            partial.get(&[Datum::BigInt(id)]).await.expect("warm");
        }
        println!(
            "partial: warmed {} keys in {:.2} s (misses read the table)",
            hot.len(),
            t.elapsed().as_secs_f64()
        );
        let hits: Vec<i64> = hot.iter().cycle().take(2_000_000).copied().collect();
        measure(&partial, &hits, "partial").await;
        // Heap per entry: 100,000 more rows of the table (the local lookup files are built
        // by now), then 100,000 keys the table does not have (remembered misses).
        let hot_set: std::collections::HashSet<i64> = hot.iter().copied().collect();
        let more: Vec<i64> = keys(200_000, rows, 29)
            .into_iter()
            .filter(|id| !hot_set.contains(id))
            .collect::<std::collections::HashSet<_>>()
            .into_iter()
            .take(100_000)
            .collect();
        let absent: Vec<i64> = (rows..rows + 100_000).collect();
        for (what, ids) in [("cached row", &more), ("remembered miss", &absent)] {
            let before = LIVE_BYTES.load(Ordering::Relaxed);
            for &id in ids {
                partial.get(&[Datum::BigInt(id)]).await.expect("warm");
            }
            let after = LIVE_BYTES.load(Ordering::Relaxed);
            println!(
                "partial: {:.0} heap bytes per {what} ({} new entries)",
                after.saturating_sub(before) as f64 / ids.len() as f64,
                ids.len()
            );
        }
        // A byte bound against the heap it lets the cache use.
        let bound: u64 = 20 << 20;
        let before = LIVE_BYTES.load(Ordering::Relaxed);
        let (_bounded_lookups, bounded) = join(
            &table,
            Strategy::Partial(PartialOptions {
                max_rows: 1_000_000,
                max_bytes: Some(bound),
                expire_after_write: None,
                expire_after_access: None,
                cache_missing_keys: true,
            }),
        )
        .await;
        for &id in &keys(200_000, rows, 31) {
            bounded.get(&[Datum::BigInt(id)]).await.expect("warm");
        }
        let after = LIVE_BYTES.load(Ordering::Relaxed);
        println!(
            "partial: cache_max_bytes {} MiB: {} entries, heap {:.1} MiB (local lookup \
             files' indexes included: 16 bytes a table row)",
            bound >> 20,
            bounded.cached_rows(),
            after.saturating_sub(before) as f64 / f64::from(1 << 20)
        );

        // none: every lookup is a point read. The first lookup in each data file builds
        // its local lookup file; that is timed on its own, then the lookups.
        let (none_lookups, none) = join(&table, Strategy::None).await;
        let t = Instant::now();
        for &id in &keys(1_000, rows, 23) {
            none.get(&[Datum::BigInt(id)]).await.expect("warm");
        }
        println!(
            "none   : first 1,000 lookups (building every file's local lookup file) in {:.2} s",
            t.elapsed().as_secs_f64()
        );
        measure(&none, &keys(20_000, rows, 17), "none   ").await;

        // A commit that changes 10,000 rows; each strategy applies it.
        let mut w = TableWriter::new(table.clone(), "bench")
            .await
            .expect("writer");
        for id in keys(10_000, rows, 19) {
            w.write(RowKind::Insert, row(id, 1)).expect("write");
        }
        w.commit(BTreeMap::new()).await.expect("commit");
        for (label, lookups) in [
            ("full   ", &full_lookups),
            ("partial", &partial_lookups),
            ("none   ", &none_lookups),
        ] {
            let t = Instant::now();
            assert!(lookups.refresh().await.expect("refresh"), "a new snapshot");
            println!(
                "{label}: refresh with 10,000 changed rows applied in {:?}",
                t.elapsed()
            );
        }
        let changed = keys(1, rows, 19)[0];
        let got = full.get(&[Datum::BigInt(changed)]).await.expect("get");
        assert!(got.is_some(), "the changed row is still there");
    });
}
