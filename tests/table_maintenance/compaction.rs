//! Compaction: writers compacting automatically after their commits (waiting for it or
//! appending while it runs, never for write-only tables, always out of level 0 where
//! batch readers skip it), and COMPACT commits that conflict (inputs gone, an overlapping
//! output, compactors racing). Compaction rewrites files under live readers and writers,
//! so every test checks that no snapshot's rows change and that files on a level ≥ 1
//! never overlap.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use lakejoin::Error;
use lakejoin::lsm::compact::{CompactScope, Compactor, full_compact};
use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::Warehouse;
use lakejoin::table::commit::CommitRequest;
use lakejoin::table::datum::{Datum, Row};
use lakejoin::table::manifest::{FileKind, ManifestEntry};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::snapshot::CommitKind;
use object_store::ObjectStoreExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{
    Model, assert_levels_disjoint, assert_only_referenced_files_remain, create, live,
    local_warehouse, max_runs, objects_under, random_changes, row, scan_at, snapshots, sorted_runs,
    within,
};

/// Waiting for compaction after each commit: every bucket stays within the trigger, the
/// rows never change, and every COMPACT snapshot reads exactly like the one before it.
#[tokio::test]
async fn auto_compaction_keeps_sorted_runs_within_the_trigger() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[]).await;
    let trigger = table.options().maintenance.compaction_trigger;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(7);
    let mut expected: BTreeMap<i64, Vec<Row>> = BTreeMap::new();
    for commit in 0..40 {
        let n = rng.random_range(1..25);
        random_changes(&mut rng, &mut writer, &mut model, n, 60);
        within(writer.commit(BTreeMap::new())).await.unwrap();
        within(writer.wait_for_compaction()).await.unwrap();
        let runs = sorted_runs(&table).await;
        assert!(
            max_runs(&runs) <= trigger,
            "commit {commit}: {runs:?} exceeds the trigger {trigger}"
        );
        assert_eq!(
            scan_at(&table, None).await,
            model.expected(),
            "commit {commit}"
        );
        let latest = table.latest_snapshot_id().await.unwrap().unwrap();
        for id in expected.len() as i64 + 1..=latest {
            expected.insert(id, model.expected());
        }
    }
    within(writer.close()).await.unwrap();
    let all = snapshots(&table).await;
    let compactions = all
        .iter()
        .filter(|s| s.commit_kind == CommitKind::Compact)
        .count();
    assert!(compactions >= 5, "only {compactions} COMPACT snapshots");
    for s in &all {
        assert_eq!(
            scan_at(&table, Some(s)).await,
            expected[&s.id],
            "snapshot {}",
            s.id
        );
        if s.commit_kind == CommitKind::Compact {
            assert_ne!(
                s.commit_user, "cdc",
                "compaction must not use the writer's user"
            );
        }
        let rows: i64 = table
            .live_files(s)
            .await
            .unwrap()
            .iter()
            .map(|f| f.file.row_count)
            .sum();
        assert_eq!(
            s.total_record_count, rows,
            "totalRecordCount of snapshot {}",
            s.id
        );
    }
    assert_levels_disjoint(&table).await;
    // The writer's own latest snapshot is still an APPEND one (it resumes from it).
    let own = table.latest_snapshot_of_user("cdc").await.unwrap().unwrap();
    assert_eq!(own.commit_kind, CommitKind::Append);
    assert_eq!(own.commit_identifier, 40);
}

/// Without waiting, the writer keeps appending while compaction runs on another task:
/// every APPEND snapshot holds exactly the rows written so far, no bucket grows past
/// `num-sorted-run.stop-trigger`, and closing the writer leaves it within the trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_appends_while_compaction_runs_in_the_background() {
    let (_dir, wh) = local_warehouse();
    let table = create(
        &wh,
        &[
            ("num-sorted-run.compaction-trigger", "3"),
            ("sequence.field", "seq"),
        ],
    )
    .await;
    let options = table.options().maintenance.clone();
    assert_eq!(options.stop_trigger, 6);
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(true);
    let mut rng = StdRng::seed_from_u64(11);
    let mut appends: Vec<(i64, Vec<Row>)> = Vec::new();
    for commit in 0..30 {
        let n = rng.random_range(1..30);
        random_changes(&mut rng, &mut writer, &mut model, n, 40);
        let snapshot = within(writer.commit(BTreeMap::new()))
            .await
            .unwrap()
            .unwrap();
        appends.push((snapshot.id, model.expected()));
        let runs = sorted_runs(&table).await;
        assert!(
            max_runs(&runs) <= options.stop_trigger,
            "commit {commit}: {runs:?} exceeds the stop trigger"
        );
    }
    within(writer.close()).await.unwrap();
    assert!(max_runs(&sorted_runs(&table).await) <= options.compaction_trigger);
    assert_eq!(scan_at(&table, None).await, model.expected());
    for (id, rows) in &appends {
        let s = table.snapshot(*id).await.unwrap();
        assert_eq!(
            &scan_at(&table, Some(&s)).await,
            rows,
            "APPEND snapshot {id}"
        );
    }
    let all = snapshots(&table).await;
    for pair in all.windows(2) {
        if pair[1].commit_kind == CommitKind::Compact {
            assert_eq!(
                scan_at(&table, Some(&pair[1])).await,
                scan_at(&table, Some(&pair[0])).await,
                "COMPACT snapshot {} changed the rows",
                pair[1].id
            );
        }
    }
    assert!(all.iter().any(|s| s.commit_kind == CommitKind::Compact));
    assert_levels_disjoint(&table).await;
}

#[tokio::test]
async fn write_only_tables_are_never_compacted_by_writers() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("write-only", "true"), ("bucket", "1")]).await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    for i in 0..12 {
        writer
            .write(RowKind::Insert, row(i, i.into(), None))
            .unwrap();
        within(writer.commit(BTreeMap::new())).await.unwrap();
    }
    within(writer.wait_for_compaction()).await.unwrap();
    within(writer.close()).await.unwrap();
    assert!(
        snapshots(&table)
            .await
            .iter()
            .all(|s| s.commit_kind == CommitKind::Append)
    );
    assert_eq!(max_runs(&sorted_runs(&table).await), 12);
    // An explicit compaction (the separate job of a write-only table) still works.
    let mut compactor = Compactor::new(table.clone(), "job").unwrap();
    let report = compactor.compact(&CompactScope::all()).await.unwrap();
    assert!(report.snapshot.is_some());
    assert_eq!(report.max_sorted_runs(), 1);
    assert_eq!(scan_at(&table, None).await.len(), 12);
}

/// Tables whose batch readers skip level 0 (deletion vectors here; first-row once its
/// merge function exists) never keep data there after a commit; lakejoin's reader skips
/// level 0 for them exactly as Java and pypaimon do.
#[tokio::test]
async fn level0_is_compacted_up_where_readers_skip_it() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("deletion-vectors.enabled", "true")]).await;
    assert!(table.options().batch_scan_skips_level0());
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(3);
    for commit in 0..8 {
        random_changes(&mut rng, &mut writer, &mut model, 10, 20);
        within(writer.commit(BTreeMap::new())).await.unwrap();
        let files = live(&table).await;
        assert!(
            files.iter().all(|f| f.file.level > 0),
            "commit {commit} left level-0 files"
        );
        // Java and pypaimon concatenate the levels of such tables without merging, so a
        // table without deletion vectors must hold each key once: one run per bucket.
        assert_eq!(max_runs(&sorted_runs(&table).await), 1, "commit {commit}");
        assert_eq!(scan_at(&table, None).await, model.expected());
    }
    within(writer.close()).await.unwrap();

    // With writers not compacting, the rows stay invisible, as they do to pypaimon,
    // until a compaction moves them up.
    let wh = Warehouse::in_memory();
    let table = create(
        &wh,
        &[("deletion-vectors.enabled", "true"), ("write-only", "true")],
    )
    .await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    writer.write(RowKind::Insert, row(1, 10, None)).unwrap();
    within(writer.commit(BTreeMap::new())).await.unwrap();
    assert!(scan_at(&table, None).await.is_empty());
    let report = Compactor::new(table.clone(), "job")
        .unwrap()
        .compact(&CompactScope::all())
        .await
        .unwrap();
    assert!(report.snapshot.is_some(), "level 0 must be forced up");
    assert_eq!(scan_at(&table, None).await, vec![row(1, 10, None)]);

    // A table with deletion vectors (Java's, here an index manifest Java wrote): lakejoin
    // reads them but refuses to rewrite the files they apply to.
    let mut latest = table.latest_snapshot().await.unwrap().unwrap();
    latest.index_manifest = Some("index-manifest-from-java-0".into());
    let java_index = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/java/deletion_vectors/bitmap32/index-manifest"),
    )
    .unwrap();
    table
        .store()
        .put(
            &table.path_of("manifest/index-manifest-from-java-0"),
            java_index.into(),
        )
        .await
        .unwrap();
    let location = table.path_of(&format!("snapshot/snapshot-{}", latest.id));
    table
        .store()
        .put(&location, latest.to_json().into())
        .await
        .unwrap();
    let err = Compactor::new(table.clone(), "job")
        .unwrap()
        .compact(&CompactScope::full())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("deletion vectors"), "{err}");

    // `compaction.force-up-level-0` forces the same without hiding level 0 from reads.
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("compaction.force-up-level-0", "true")]).await;
    assert!(!table.options().batch_scan_skips_level0());
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    writer.write(RowKind::Insert, row(1, 10, None)).unwrap();
    within(writer.commit(BTreeMap::new())).await.unwrap();
    assert!(live(&table).await.iter().all(|f| f.file.level > 0));
    within(writer.close()).await.unwrap();
}

/// A file whose keys overlap no other file of the compaction moves up a level as it is
/// (Java's upgrade: a DELETE and an ADD of the same file); overlapping ones are merged;
/// and expiring the snapshots from before the move keeps the moved files.
#[tokio::test]
async fn files_that_overlap_nothing_move_up_without_a_rewrite() {
    let (_dir, wh) = local_warehouse();
    // A 1-byte target makes every file "large" (at least 70% of it).
    let options = [
        ("bucket", "1"),
        ("target-file-size", "1"),
        ("write-only", "true"),
    ];
    let table = create(&wh, &options).await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut commit = |writer: &mut TableWriter, keys: Vec<i32>| {
        for k in keys {
            writer
                .write(RowKind::Insert, row(k, -i64::from(k), None))
                .unwrap();
            model.apply(k, Some(-i64::from(k)), None);
        }
    };
    // Four files of growing keys, then one whose keys touch the second and third.
    for first in [0, 100, 200, 300] {
        commit(&mut writer, (first..first + 100).collect());
        within(writer.commit(BTreeMap::new())).await.unwrap();
    }
    commit(&mut writer, vec![150, 250]);
    within(writer.commit(BTreeMap::new())).await.unwrap();
    within(writer.close()).await.unwrap();
    let before = live(&table).await;
    assert_eq!(before.len(), 5);

    let report = Compactor::new(table.clone(), "compactor")
        .unwrap()
        .compact(&CompactScope::full())
        .await
        .unwrap();
    assert_eq!((report.files_upgraded, report.files_rewritten), (2, 3));
    let after = live(&table).await;
    assert!(after.iter().all(|f| f.file.level == 5), "{after:?}");
    let kept: Vec<&ManifestEntry> = after
        .iter()
        .filter(|f| before.iter().any(|b| b.file.file_name == f.file.file_name))
        .collect();
    // The files of keys 0..100 and 300..400, with what they held.
    assert_eq!(kept.len(), 2, "{after:?}");
    for f in kept {
        let old = before
            .iter()
            .find(|b| b.file.file_name == f.file.file_name)
            .unwrap();
        assert_eq!(
            (old.file.row_count, old.file.file_size),
            (100, f.file.file_size)
        );
    }
    assert_eq!(scan_at(&table, None).await, model.expected());

    let config = ExpireConfig {
        retain_min: 1,
        retain_max: 1,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    expire_snapshots(&table, &config).await.unwrap();
    assert_eq!(snapshots(&table).await.len(), 1);
    assert_eq!(scan_at(&table, None).await, model.expected());
    assert_only_referenced_files_remain(&table).await;
    assert_levels_disjoint(&table).await;
}

/// Small files whose keys overlap no other's are still rewritten into one (each is below
/// 70% of the target, as Java's rule has it), but without a merge: their columns are
/// copied a batch at a time, and the table reads the same. A file with a retraction the
/// full compaction drops is merged instead, and the retraction is gone.
#[tokio::test]
async fn small_files_that_overlap_nothing_are_copied_without_a_merge() {
    let (_dir, wh) = local_warehouse();
    let table = create(&wh, &[("bucket", "1"), ("write-only", "true")]).await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    // Three files of growing keys, each several read batches long, some values null.
    for first in [0, 3000, 6000] {
        for k in first..first + 3000 {
            let v = (k % 7 != 0).then(|| i64::from(k) * 31);
            let mut r = row(k, v.unwrap_or(0), Some(i64::from(k % 5)));
            if v.is_none() {
                r[1] = Datum::Null;
            }
            writer.write(RowKind::Insert, r.clone()).unwrap();
            model.rows.insert(k, (v, Some(i64::from(k % 5))));
        }
        within(writer.commit(BTreeMap::new())).await.unwrap();
    }
    let report = Compactor::new(table.clone(), "compactor")
        .unwrap()
        .compact(&CompactScope::full())
        .await
        .unwrap();
    let counts = (
        report.files_rewritten,
        report.files_copied,
        report.files_written,
    );
    assert_eq!(counts, (3, 3, 1));
    let after = live(&table).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].file.row_count, 9000);
    let expected: Vec<Row> = model
        .rows
        .iter()
        .map(|(&k, &(v, seq))| {
            let mut r = row(k, v.unwrap_or(0), seq);
            if v.is_none() {
                r[1] = Datum::Null;
            }
            r
        })
        .collect();
    assert_eq!(scan_at(&table, None).await, expected);

    // A file of keys after every other, one of them retracted: with the small file
    // already on the top level, merged and not copied.
    writer.write(RowKind::Delete, row(20_000, 0, None)).unwrap();
    writer.write(RowKind::Insert, row(20_001, 1, None)).unwrap();
    within(writer.commit(BTreeMap::new())).await.unwrap();
    within(writer.close()).await.unwrap();
    let report = Compactor::new(table.clone(), "compactor")
        .unwrap()
        .compact(&CompactScope::full())
        .await
        .unwrap();
    assert_eq!((report.files_rewritten, report.files_copied), (2, 0));
    let mut expected = expected;
    expected.push(row(20_001, 1, None));
    assert_eq!(scan_at(&table, None).await, expected);
    let top = live(&table).await;
    assert!(
        top.iter().all(|f| f.file.delete_row_count == Some(0)),
        "{top:?}"
    );
    assert_levels_disjoint(&table).await;
}

// ---------------------------------------------------------------------------------------
// COMPACT commit conflicts
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn compact_commit_fails_when_its_inputs_are_gone_or_its_output_overlaps() {
    let wh = Warehouse::in_memory();
    let table = create(&wh, &[("bucket", "1")]).await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    for i in 0..3 {
        writer.write(RowKind::Insert, row(i, 1, None)).unwrap();
        writer.write(RowKind::Insert, row(i + 10, 1, None)).unwrap();
        within(writer.commit(BTreeMap::new())).await.unwrap();
    }
    let stale = live(&table).await;
    let before = scan_at(&table, None).await;
    // Someone else compacts first.
    full_compact(&table, "other").await.unwrap().unwrap();
    let latest = table.latest_snapshot_id().await.unwrap();

    // A compaction planned on the old files must not commit on top of that.
    let late = CommitRequest {
        commit_user: "late".into(),
        commit_identifier: 1,
        kind: CommitKind::Compact,
        entries: stale
            .iter()
            .map(|e| ManifestEntry {
                kind: FileKind::Delete,
                ..e.clone()
            })
            .collect(),
        changelog: Vec::new(),
        properties: BTreeMap::new(),
    };
    match table.commit(late).await {
        Err(Error::CommitConflict { reason, .. }) => {
            assert!(reason.contains("no longer live"), "{reason}")
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Two files overlapping on one level ≥ 1.
    let top = live(&table).await.remove(0);
    let mut twin = top.clone();
    twin.file.file_name = "data-twin.parquet".into();
    let overlap = CommitRequest {
        commit_user: "late".into(),
        commit_identifier: 2,
        kind: CommitKind::Compact,
        entries: vec![twin],
        changelog: Vec::new(),
        properties: BTreeMap::new(),
    };
    match table.commit(overlap).await {
        Err(Error::CommitConflict { reason, .. }) => {
            assert!(reason.contains("overlap"), "{reason}")
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(table.latest_snapshot_id().await.unwrap(), latest);
    assert_eq!(scan_at(&table, None).await, before);
    // The rejected commits left no manifests behind.
    let latest = table.latest_snapshot().await.unwrap().unwrap();
    let mut referenced: HashSet<String> = HashSet::new();
    for s in snapshots(&table).await {
        referenced.insert(s.base_manifest_list.clone());
        referenced.insert(s.delta_manifest_list.clone());
        for m in table.snapshot_manifests(&s).await.unwrap() {
            referenced.insert(m.file_name);
        }
    }
    for object in objects_under(&table, "manifest").await {
        let name = object.rsplit('/').next().unwrap().to_string();
        assert!(referenced.contains(&name), "unreferenced {object}");
    }
    assert_eq!(latest.commit_kind, CommitKind::Compact);
}

/// Two compactors racing on the same buckets: one may lose, plans again, and the table
/// stays correct (files never overlap on a level, rows never change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_compactors_plan_again_and_never_corrupt_the_table() {
    let (_dir, wh) = local_warehouse();
    let table = create(
        &wh,
        &[
            ("write-only", "true"),
            ("num-sorted-run.compaction-trigger", "2"),
        ],
    )
    .await;
    let mut writer = TableWriter::new(table.clone(), "cdc").await.unwrap();
    let mut model = Model::new(false);
    let mut rng = StdRng::seed_from_u64(5);
    for round in 0..6 {
        for _ in 0..4 {
            random_changes(&mut rng, &mut writer, &mut model, 15, 30);
            within(writer.commit(BTreeMap::new())).await.unwrap();
        }
        let scope = if round % 2 == 0 {
            CompactScope::all()
        } else {
            CompactScope::full()
        };
        let mut a = Compactor::new(table.clone(), format!("a-{round}")).unwrap();
        let mut b = Compactor::new(table.clone(), format!("b-{round}")).unwrap();
        let (sa, sb) = (scope.clone(), scope);
        let ta = tokio::spawn(async move { a.compact(&sa).await });
        let tb = tokio::spawn(async move { b.compact(&sb).await });
        let ra = ta.await.unwrap().unwrap();
        let rb = tb.await.unwrap().unwrap();
        assert!(
            ra.snapshot.is_some() || rb.snapshot.is_some(),
            "round {round}"
        );
        assert_eq!(
            scan_at(&table, None).await,
            model.expected(),
            "round {round}"
        );
        assert_levels_disjoint(&table).await;
    }
}
