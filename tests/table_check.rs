//! `lakejoin table check`: a good table passes (pypaimon's fixture, every snapshot, and a
//! table lakejoin wrote); after a data file is deleted and a manifest corrupted, the
//! check fails naming both, through the library and through the binary's exit code.

use crate::support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use lakejoin::table::check::check_snapshot;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use support::{Corruption, copy_fixture, corrupt, fixture_warehouse};

async fn open(root: &Path) -> Table {
    let warehouse = Warehouse::from_uri(root.to_str().unwrap(), &Default::default()).unwrap();
    Table::open(&warehouse, &TableIdentifier::parse("db.orders").unwrap())
        .await
        .unwrap()
}

fn lakejoin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lakejoin"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lakejoin runs");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("stdin written");
    }
    drop(input);
    child.wait_with_output().expect("lakejoin exits")
}

fn check(root: &Path, table: &str) -> Output {
    lakejoin(
        &[
            "table",
            "check",
            "--warehouse",
            root.to_str().unwrap(),
            "--table",
            table,
        ],
        None,
    )
}

#[tokio::test]
async fn every_snapshot_of_the_pypaimon_fixture_passes() {
    let table = open(&fixture_warehouse()).await;
    let ids = table.snapshot_ids().await.unwrap();
    assert!(ids.len() >= 3, "{ids:?}");
    for id in ids {
        let report = check_snapshot(&table, Some(id)).await.unwrap();
        assert!(report.is_ok(), "snapshot {id}: {:?}", report.problems);
        assert_eq!(report.snapshot_id, Some(id));
        // snapshot, schema, two manifest lists, at least one manifest and data file.
        assert!(report.files_checked >= 6, "{report:?}");
    }
    let dir = copy_fixture();
    let out = check(dir.path(), "db.orders");
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[tokio::test]
async fn a_deleted_data_file_and_a_corrupt_manifest_are_both_reported() {
    let dir = copy_fixture();
    let table = open(dir.path()).await;
    let snapshot = table.latest_snapshot().await.unwrap().unwrap();
    let metas = table.snapshot_manifests(&snapshot).await.unwrap();
    // A manifest to corrupt, and a live data file listed by another manifest (the one
    // behind a corrupt manifest cannot be reached).
    let live = table.live_files(&snapshot).await.unwrap();
    let mut pick = None;
    for meta in &metas {
        let entries = table.read_manifest(&meta.file_name).await.unwrap();
        if let Some(other) = live.iter().find(|f| !entries.contains(f)) {
            pick = Some((meta.file_name.clone(), table.data_file_path(other).unwrap()));
            break;
        }
    }
    let (manifest, data_file) = pick.expect("two manifests with live files");
    let manifest = format!("db.db/orders/manifest/{manifest}");
    let data_file = data_file.to_string();
    corrupt(&dir.path().join(&manifest), Corruption::TruncateHalf);
    std::fs::remove_file(dir.path().join(&data_file)).unwrap();

    let report = check_snapshot(&table, None).await.unwrap();
    let paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths.len(), 2, "{:?}", report.problems);
    assert!(paths.contains(&manifest.as_str()), "{paths:?}");
    assert!(paths.contains(&data_file.as_str()), "{paths:?}");

    let out = check(dir.path(), "db.orders");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains(&manifest), "{stdout}");
    assert!(
        stdout.contains(&format!("{data_file}: missing")),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2 problems"),
        "{:?}",
        out.stderr
    );
}

#[tokio::test]
async fn a_table_lakejoin_wrote_passes_until_a_data_file_is_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().to_str().unwrap();
    let create = lakejoin(
        &[
            "table",
            "create",
            "--warehouse",
            wh,
            "--table",
            "shop.items",
            "--column",
            "id:INT",
            "--column",
            "part:STRING",
            "--column",
            "v:BIGINT",
            "--primary-key",
            "id,part",
            "--partition-by",
            "part",
            "--buckets",
            "2",
        ],
        None,
    );
    assert!(create.status.success(), "{create:?}");
    let location = ["--warehouse", wh, "--table", "shop.items"];
    for batch in 0..3 {
        let lines: String = (0..20)
            .map(|i| {
                format!(
                    "{{\"id\": {i}, \"part\": \"p{}\", \"v\": {batch}}}\n",
                    i % 3
                )
            })
            .collect();
        let write = lakejoin(&[&["table", "write"][..], &location].concat(), Some(&lines));
        assert!(write.status.success(), "{write:?}");
    }
    let out = check(dir.path(), "shop.items");
    assert!(out.status.success(), "{out:?}");

    // Cut one live data file short: the size its manifest records no longer matches.
    let warehouse = Warehouse::from_uri(wh, &Default::default()).unwrap();
    let table = Table::open(&warehouse, &TableIdentifier::parse("shop.items").unwrap())
        .await
        .unwrap();
    let snapshot = table.latest_snapshot().await.unwrap().unwrap();
    let live = table.live_files(&snapshot).await.unwrap();
    let data_file = dir
        .path()
        .join(table.data_file_path(&live[0]).unwrap().to_string());
    corrupt(&data_file, Corruption::DropLastByte);
    let out = check(dir.path(), "shop.items");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let name = data_file.file_name().unwrap().to_str().unwrap();
    assert!(stdout.contains(name), "{stdout}");
}
