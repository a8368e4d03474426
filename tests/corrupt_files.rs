//! A corrupt or truncated table file (schema, snapshot, manifest list, manifest, data
//! file) is an error that names the file on both read paths, the merge-on-read scan and
//! the point lookup; never a panic. A corrupt `LATEST` hint is ignored, as Paimon does.

use crate::support;

use std::path::PathBuf;
use std::sync::Arc;

use lakejoin::lsm::point_lookup::{LookupOptions, PointLookup};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::table::datum::Row;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use support::{CORRUPTIONS, copy_fixture, corrupt};

fn orders() -> TableIdentifier {
    TableIdentifier::parse("db.orders").unwrap()
}

async fn open(root: &std::path::Path) -> lakejoin::Result<Arc<Table>> {
    let warehouse = Warehouse::from_uri(root.to_str().unwrap(), &Default::default())?;
    Ok(Arc::new(Table::open(&warehouse, &orders()).await?))
}

/// Every file the latest snapshot reads, by kind, relative to the warehouse root.
async fn referenced_files(root: &std::path::Path) -> Vec<(&'static str, String)> {
    let table = open(root).await.unwrap();
    let snapshot = table.latest_snapshot().await.unwrap().unwrap();
    let mut files = vec![
        ("schema", "db.db/orders/schema/schema-0".to_string()),
        (
            "snapshot",
            format!("db.db/orders/snapshot/snapshot-{}", snapshot.id),
        ),
    ];
    for list in [&snapshot.base_manifest_list, &snapshot.delta_manifest_list] {
        files.push(("manifest list", format!("db.db/orders/manifest/{list}")));
    }
    for meta in table.snapshot_manifests(&snapshot).await.unwrap() {
        files.push((
            "manifest",
            format!("db.db/orders/manifest/{}", meta.file_name),
        ));
    }
    for entry in table.live_files(&snapshot).await.unwrap() {
        files.push((
            "data file",
            table.data_file_path(&entry).unwrap().to_string(),
        ));
    }
    files
}

async fn scan_rows(root: &std::path::Path) -> lakejoin::Result<Vec<Row>> {
    let table = open(root).await?;
    scan(&table, None, &ScanFilter::default()).await
}

/// Looks every key up; the first error, if any.
async fn lookup_all(root: &std::path::Path, rows: &[Row]) -> lakejoin::Result<()> {
    let table = open(root).await?;
    let lookup = PointLookup::open(table.clone(), LookupOptions::default()).await?;
    let key_indices: Vec<usize> = table
        .schema()
        .primary_keys
        .iter()
        .map(|k| table.schema().field_index(k).unwrap())
        .collect();
    for row in rows {
        let key: Vec<_> = key_indices.iter().map(|&i| row[i].clone()).collect();
        lookup.get(&key).await?;
    }
    Ok(())
}

#[tokio::test]
async fn every_corrupt_file_is_an_error_naming_it() {
    let pristine = copy_fixture();
    let rows = scan_rows(pristine.path()).await.unwrap();
    assert!(!rows.is_empty());
    lookup_all(pristine.path(), &rows).await.unwrap();
    let files = referenced_files(pristine.path()).await;
    let kinds: std::collections::BTreeSet<_> = files.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds.len(), 5, "{files:?}");

    for (kind, file) in &files {
        for how in CORRUPTIONS {
            let dir = copy_fixture();
            corrupt(&dir.path().join(file), how);
            let what = format!("{kind} {file} ({how:?})");
            let err = scan_rows(dir.path())
                .await
                .expect_err(&format!("scan with a corrupt {what}"));
            let message = err.to_string();
            assert!(message.contains(file.as_str()), "scan, {what}: {message}");
            let err = lookup_all(dir.path(), &rows)
                .await
                .expect_err(&format!("lookups with a corrupt {what}"));
            let message = err.to_string();
            assert!(message.contains(file.as_str()), "lookup, {what}: {message}");
        }
    }
}

#[tokio::test]
async fn a_corrupt_latest_hint_is_ignored() {
    let pristine = copy_fixture();
    let rows = scan_rows(pristine.path()).await.unwrap();
    for how in CORRUPTIONS {
        let dir = copy_fixture();
        let hint: PathBuf = dir.path().join("db.db/orders/snapshot/LATEST");
        corrupt(&hint, how);
        assert_eq!(scan_rows(dir.path()).await.unwrap(), rows, "{how:?}");
        lookup_all(dir.path(), &rows).await.unwrap();
    }
}
