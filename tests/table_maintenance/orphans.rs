//! Orphan-file cleaning: only old files no snapshot references are removed (leftovers of
//! failed writes, temporary snapshot files), never a fresh file a writer is about to
//! commit, and a table whose manifests are missing is refused rather than cleaned, since
//! its referenced files cannot be known.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
use lakejoin::lsm::orphan::{OrphanCleanConfig, clean_orphan_files};
use lakejoin::table::Warehouse;
use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::{create, history, local_warehouse, scan_at, snapshots};

fn set_mtime(path: &std::path::Path, when: SystemTime) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(when).unwrap();
}

fn all_local_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all_local_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[tokio::test]
async fn orphan_cleaning_removes_old_unreferenced_files_only() {
    let (_dir, wh) = local_warehouse();
    let table = create(&wh, &[("num-sorted-run.compaction-trigger", "3")]).await;
    let (model, _) = history(&table, 10, 4).await;
    let config = ExpireConfig {
        retain_min: 1,
        retain_max: 4,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    expire_snapshots(&table, &config).await.unwrap();
    let local = table.local_dir().unwrap().to_path_buf();
    let two_days_ago = SystemTime::now() - Duration::from_secs(2 * 86_400);

    // Leftovers of failed writes.
    let put = |relative: &'static str| {
        let location: Path = table.path_of(relative);
        let store = table.store().clone();
        async move { store.put(&location, "junk".into()).await.unwrap() }
    };
    put("bucket-0/data-orphan-old.parquet").await;
    put("manifest/manifest-orphan-old-0").await;
    put("manifest/manifest-list-orphan-old-0").await;
    put("snapshot/.snapshot-99.0f1e.tmp").await;
    std::fs::write(
        local.join("bucket-1/data-interrupted.parquet#1"),
        b"partial",
    )
    .unwrap();
    // Everything present so far is old, referenced or not.
    let mut files = Vec::new();
    all_local_files(&local, &mut files);
    for f in &files {
        set_mtime(f, two_days_ago);
    }
    // A file a writer is about to commit: unreferenced but fresh.
    put("bucket-1/data-being-committed.parquet").await;

    let expected: BTreeSet<String> = [
        "bucket-0/data-orphan-old.parquet",
        "bucket-1/data-interrupted.parquet#1",
        "manifest/manifest-list-orphan-old-0",
        "manifest/manifest-orphan-old-0",
        "snapshot/.snapshot-99.0f1e.tmp",
    ]
    .into_iter()
    .map(String::from)
    .collect();

    let dry = clean_orphan_files(
        &table,
        &OrphanCleanConfig {
            older_than: Duration::from_secs(86_400),
            dry_run: true,
        },
    )
    .await
    .unwrap();
    let found: BTreeSet<String> = dry.removed.iter().map(|f| f.path.clone()).collect();
    assert_eq!(found, expected);
    assert!(local.join("bucket-0/data-orphan-old.parquet").exists());
    assert!(local.join("bucket-1/data-interrupted.parquet#1").exists());

    let report = clean_orphan_files(&table, &OrphanCleanConfig::default())
        .await
        .unwrap();
    let removed: BTreeSet<String> = report.removed.iter().map(|f| f.path.clone()).collect();
    assert_eq!(removed, expected);
    assert_eq!(report.too_recent.len(), 1);
    assert_eq!(
        report.too_recent[0].path,
        "bucket-1/data-being-committed.parquet"
    );
    assert!(report.referenced > 0);
    for path in &expected {
        assert!(!local.join(path).exists(), "{path} still exists");
    }
    assert!(local.join("bucket-1/data-being-committed.parquet").exists());
    assert!(local.join("schema/schema-0").exists());
    // Every remaining snapshot is complete.
    for s in snapshots(&table).await {
        scan_at(&table, Some(&s)).await;
    }
    assert_eq!(scan_at(&table, None).await, model.expected());
    // A second run finds nothing old.
    let again = clean_orphan_files(&table, &OrphanCleanConfig::default())
        .await
        .unwrap();
    assert!(again.removed.is_empty());
}

#[tokio::test]
async fn orphan_cleaning_refuses_a_table_with_missing_manifests() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[]).await;
    history(&table, 3, 9).await;
    let latest = table.latest_snapshot().await.unwrap().unwrap();
    let list = table.path_of(&format!("manifest/{}", latest.delta_manifest_list));
    table.store().delete(&list).await.unwrap();
    let err = clean_orphan_files(
        &table,
        &OrphanCleanConfig {
            older_than: Duration::ZERO,
            dry_run: false,
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}
