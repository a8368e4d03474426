//! The cost of durable commits on a local warehouse (issue 16, item 3).
//!
//! A local warehouse fsyncs every file it writes and its directory before the put
//! returns (`Warehouse::from_uri`), so that a snapshot never outlives its files in a
//! power loss. This measures what that costs per commit against the same store without
//! fsync, on the same disk, in one run: commits of a CDC-sized batch (1,000 rows of 8
//! columns into 4 buckets: 4 data files, a manifest, two manifest lists, the snapshot
//! and the LATEST hint), the two stores taking turns commit by commit so that the
//! machine's noise falls on both alike.
//!
//! `cargo bench --bench commit` (COMMITS=… to change the count, ROWS=… rows per commit).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::local::LocalFileSystem;
use object_store::path::Path;

mod common;
use common::{percentile, row, schema};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

struct Side {
    label: &'static str,
    writer: TableWriter,
    latencies: Vec<Duration>,
}

fn main() {
    let commits = env_or("COMMITS", 200);
    let rows = env_or("ROWS", 1_000) as i64;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let durable_dir = dir.path().join("durable");
    let plain_dir = dir.path().join("plain");
    std::fs::create_dir_all(&plain_dir).expect("mkdir");
    println!(
        "commit: {commits} commits of {rows} rows × 8 columns, 4 buckets, local disk {}",
        dir.path().display()
    );
    let mut sides = rt.block_on(async {
        let durable = Warehouse::from_uri(durable_dir.to_str().expect("utf-8"), &BTreeMap::new())
            .expect("warehouse");
        let mut plain = Warehouse::new(
            Arc::new(LocalFileSystem::new_with_prefix(&plain_dir).expect("store")),
            Path::default(),
        );
        plain.local_root = Some(plain_dir.clone());
        let id = TableIdentifier::parse("bench.t").expect("id");
        let mut sides = Vec::new();
        for (label, wh) in [("fsync", &durable), ("no fsync", &plain)] {
            let table = Arc::new(Table::create(wh, &id, schema()).await.expect("create"));
            sides.push(Side {
                label,
                writer: TableWriter::new(table, "bench").await.expect("writer"),
                latencies: Vec::with_capacity(commits),
            });
        }
        let mut next_id = 0i64;
        for round in 0..commits {
            // Alternate which side goes first, so neither always follows the other.
            let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            let batch: Vec<i64> = (next_id..next_id + rows).collect();
            next_id += rows;
            for i in order {
                let side = &mut sides[i];
                for key in &batch {
                    side.writer
                        .write(RowKind::Insert, row(*key, round as i64))
                        .expect("write");
                }
                let t = Instant::now();
                side.writer.commit(BTreeMap::new()).await.expect("commit");
                side.latencies.push(t.elapsed());
            }
        }
        sides
    });
    let mut means = Vec::new();
    for side in &mut sides {
        side.latencies.sort();
        let mean = side.latencies.iter().sum::<Duration>() / side.latencies.len() as u32;
        means.push(mean);
        println!(
            "{:>8}: commit p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms",
            side.label,
            percentile(&side.latencies, 0.50).as_secs_f64() * 1e3,
            percentile(&side.latencies, 0.99).as_secs_f64() * 1e3,
            mean.as_secs_f64() * 1e3,
        );
    }
    println!(
        "durability costs {:.2} ms per commit ({:.2}× the commit without fsync)",
        (means[0].as_secs_f64() - means[1].as_secs_f64()) * 1e3,
        means[0].as_secs_f64() / means[1].as_secs_f64()
    );
}
