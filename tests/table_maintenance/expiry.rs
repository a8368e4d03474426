//! Snapshot expiry: which snapshots `retain_min`, `retain_max`, `time_retained` and
//! `max_deletes` keep, the EARLIEST hint, and expiry next to a running writer. Expiry
//! deletes files, so each test checks that the retained snapshots still read their rows
//! and that exactly the files they reference remain.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lakejoin::Error;
use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::Warehouse;
use object_store::ObjectStoreExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{
    Model, assert_only_referenced_files_remain, create, history, local_warehouse, random_changes,
    scan_at, snapshots, within,
};

#[tokio::test]
async fn expiry_keeps_exactly_the_retained_snapshots_readable() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("num-sorted-run.compaction-trigger", "3")]).await;
    let (model, expected) = history(&table, 24, 1).await;
    let latest = table.latest_snapshot_id().await.unwrap().unwrap();
    assert!(latest > 24, "compactions add snapshots: {latest}");

    // Young snapshots survive the default `snapshot.time-retained` of 1 h.
    let defaults = ExpireConfig::from_options(&table.options().maintenance);
    let report = expire_snapshots(&table, &defaults).await.unwrap();
    assert!(report.expired.is_empty());
    assert_eq!(table.snapshot_ids().await.unwrap().len() as i64, latest);
    let earliest = table.path_of("snapshot/EARLIEST");
    let hint = table
        .store()
        .get(&earliest)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&hint[..], b"1");

    // Keep the newest 6: beyond `retain_max` snapshots go whatever their age.
    let config = ExpireConfig {
        retain_min: 1,
        retain_max: 6,
        ..defaults.clone()
    };
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(report.expired, (1..=latest - 6).collect::<Vec<_>>());
    assert_eq!(report.earliest, Some(latest - 5));
    assert!(report.data_files_deleted > 0 && report.manifests_deleted > 0);
    assert_eq!(
        table.snapshot_ids().await.unwrap(),
        (latest - 5..=latest).collect::<Vec<_>>()
    );
    let hint = table
        .store()
        .get(&earliest)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&hint), (latest - 5).to_string());
    for id in latest - 5..=latest {
        let s = table.snapshot(id).await.unwrap();
        assert_eq!(
            scan_at(&table, Some(&s)).await,
            expected[&id],
            "time travel to {id}"
        );
    }
    assert!(matches!(
        table.snapshot(1).await,
        Err(Error::SnapshotNotFound { .. })
    ));
    assert_only_referenced_files_remain(&table).await;
    assert_eq!(scan_at(&table, None).await, model.expected());

    // Without a time limit all but the newest `retain_min` go, at most `max_deletes` a run.
    let config = ExpireConfig {
        retain_min: 4,
        retain_max: usize::MAX,
        time_retained: Duration::ZERO,
        max_deletes: 1,
    };
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(
        report.expired,
        vec![latest - 5],
        "max_deletes limits one run"
    );
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(report.expired, vec![latest - 4]);
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert!(report.expired.is_empty());
    assert_eq!(table.snapshot_ids().await.unwrap().len(), 4);
    assert_only_referenced_files_remain(&table).await;
    for id in latest - 3..=latest {
        let s = table.snapshot(id).await.unwrap();
        assert_eq!(scan_at(&table, Some(&s)).await, expected[&id]);
    }
}

#[tokio::test]
async fn expiry_stops_at_the_first_snapshot_younger_than_the_time_retained() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[]).await;
    let (_, expected) = history(&table, 8, 2).await;
    // Backdate snapshots 1..=3 by two hours.
    let old = chrono::Utc::now().timestamp_millis() - 2 * 3600 * 1000;
    for id in 1..=3 {
        let mut s = table.snapshot(id).await.unwrap();
        s.time_millis = old;
        let location = table.path_of(&format!("snapshot/snapshot-{id}"));
        table
            .store()
            .put(&location, s.to_json().into())
            .await
            .unwrap();
    }
    let config = ExpireConfig::from_options(&table.options().maintenance);
    assert_eq!(config.time_retained, Duration::from_secs(3600));
    let config = ExpireConfig {
        retain_min: 1,
        ..config
    };
    let report = expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(report.expired, vec![1, 2, 3]);
    assert_eq!(table.snapshot_ids().await.unwrap()[0], 4);
    for (id, rows) in expected.range(4..) {
        let s = table.snapshot(*id).await.unwrap();
        assert_eq!(&scan_at(&table, Some(&s)).await, rows);
    }
    assert_only_referenced_files_remain(&table).await;
    // Bad retention is refused.
    let bad = ExpireConfig {
        retain_min: 3,
        retain_max: 2,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    assert!(matches!(
        expire_snapshots(&table, &bad).await,
        Err(Error::Config(_))
    ));
}

/// Expiry running in a loop next to a writer (with background compaction) on a local
/// store: the writer never fails and the final table is complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_is_safe_next_to_a_running_writer() {
    let (_dir, wh) = local_warehouse();
    let table = create(&wh, &[("num-sorted-run.compaction-trigger", "3")]).await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let expirer = {
        let table = table.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let config = ExpireConfig {
                retain_min: 2,
                retain_max: usize::MAX,
                time_retained: Duration::ZERO,
                max_deletes: usize::MAX,
            };
            let mut expired = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                expired += expire_snapshots(&table, &config)
                    .await
                    .unwrap()
                    .expired
                    .len();
                tokio::task::yield_now().await;
            }
            expired
        })
    };
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(13);
    for _ in 0..30 {
        let n = rng.random_range(1..20);
        random_changes(&mut rng, &mut writer, &mut model, n, 30);
        within(writer.commit(BTreeMap::new())).await.unwrap();
    }
    within(writer.close()).await.unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let expired = expirer.await.unwrap();
    assert!(expired > 0, "the expirer never expired anything");
    assert_eq!(scan_at(&table, None).await, model.expected());
    for s in snapshots(&table).await {
        scan_at(&table, Some(&s)).await;
    }
    assert_only_referenced_files_remain(&table).await;
}
