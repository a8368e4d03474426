//! Commits racing snapshot expiry, through the table writer, the compactor and another
//! writer, with object-store faults holding a commit at the moment that matters: a
//! commit whose base snapshot expires while it is built, and commits in doubt whose
//! snapshot may have been expired before their retry looked (docs/format.md §9.1, §9.2).
//! After each the table is checked through the store without faults: rows equal to a
//! model (a summing table, so a change applied twice or lost shows), and what orphan
//! cleaning finds.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use lakejoin::error::{Error, ErrorKind};
use lakejoin::lsm::compact::full_compact;
use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::snapshot::{CommitKind, Snapshot};
use support::faulty_store::{Fault, Op, Schedule};
use support::faulty_table::{
    Backing, Setup, clean_every_orphan, round_properties, setup, setup_schema,
};

const USER: &str = "writer";

/// +1 on `key` through `writer`, and in `model`.
fn plus_one(writer: &mut TableWriter, model: &mut HashMap<i32, i64>, key: i32) {
    writer
        .write(RowKind::Insert, vec![Datum::Int(key), Datum::BigInt(1)])
        .unwrap();
    *model.entry(key).or_default() += 1;
}

/// Two commits of another writer (+1 on key 7 each), then an expiry that keeps only the
/// newest snapshot; the ids it expired.
async fn commit_twice_and_expire_all_but_the_newest(
    s: &Setup,
    model: &mut HashMap<i32, i64>,
) -> Vec<i64> {
    commit_and_expire_all_but_the_newest(s, model, 2).await
}

/// [`commit_twice_and_expire_all_but_the_newest`] with `commits` commits.
async fn commit_and_expire_all_but_the_newest(
    s: &Setup,
    model: &mut HashMap<i32, i64>,
    commits: usize,
) -> Vec<i64> {
    commit_compact_and_expire(s, model, commits, false).await
}

/// [`commit_and_expire_all_but_the_newest`], with a full compaction before the expiry
/// when `compact`.
async fn commit_compact_and_expire(
    s: &Setup,
    model: &mut HashMap<i32, i64>,
    commits: usize,
    compact: bool,
) -> Vec<i64> {
    let mut other = TableWriter::new(s.table.clone(), "other").await.unwrap();
    for _ in 0..commits {
        plus_one(&mut other, model, 7);
        other.commit(BTreeMap::new()).await.unwrap().unwrap();
    }
    other.close().await.unwrap();
    if compact {
        full_compact(&s.table, "compactor").await.unwrap().unwrap();
    }
    // Expiry keeps a snapshot committed in the current millisecond even with no time
    // retained: wait for the clock to pass the newest one.
    let newest = s
        .clean
        .latest_snapshot()
        .await
        .unwrap()
        .unwrap()
        .time_millis;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while now_millis() <= newest {
        assert!(
            std::time::Instant::now() < deadline,
            "the clock stands still"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let expiry = ExpireConfig {
        retain_min: 1,
        retain_max: usize::MAX,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    expire_snapshots(&s.table, &expiry).await.unwrap().expired
}

fn now_millis() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since_epoch.as_millis()).unwrap()
}

/// A commit held after it read the latest snapshot, while other commits land and expiry
/// removes both the snapshot it builds on and the id it would take, lands on top of the
/// newest snapshot: not in the freed id, outside the lineage, where its rows would be
/// lost and its files never removed.
#[tokio::test]
async fn a_commit_whose_base_snapshot_expired_meanwhile_lands_on_the_newest() {
    const WAIT: Duration = Duration::from_secs(30);
    let s = setup(Backing::Memory, 1, 10).await;
    let mut model = HashMap::new();
    let mut held = TableWriter::new(s.table.clone(), USER).await.unwrap();
    plus_one(&mut held, &mut model, 1);
    held.commit(round_properties(0)).await.unwrap().unwrap();

    // The next commit writes its delta manifest list, reads snapshot 1, and is held
    // writing its base list.
    let pause = s.faulty.pause_after(Op::Put, "manifest/manifest-list-", 1);
    plus_one(&mut held, &mut model, 2);
    let commit = tokio::spawn(async move {
        let landed = held.commit(round_properties(1)).await;
        held.close().await.unwrap();
        landed
    });
    pause.reached(WAIT).await;
    let expired = commit_twice_and_expire_all_but_the_newest(&s, &mut model).await;
    assert_eq!(expired, vec![1, 2]);
    pause.release();

    let landed = tokio::time::timeout(WAIT, commit)
        .await
        .expect("the held commit finishes")
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(landed.id, 4, "the held commit took a freed snapshot id");
    assert_eq!(s.clean.snapshot_ids().await.unwrap(), vec![3, 4]);
    assert_eq!(support::cdc::rows_of(&s.clean).await, model);
    let orphans = clean_every_orphan(&s.clean).await;
    assert!(orphans.is_empty(), "files left behind: {orphans:?}");
}

/// A commit of `writer` (+1 on key 1) whose `snapshot-2` create gets `create_fault` and
/// whose read-back fails, so it is in doubt; its retry is held while `meanwhile` runs
/// (other commits and an expiry), then released. The commit's outcome, what `meanwhile`
/// returned, and the writer.
async fn commit_in_doubt_while<T>(
    s: &Setup,
    model: &mut HashMap<i32, i64>,
    create_fault: Fault,
    meanwhile: impl AsyncFnOnce(&mut HashMap<i32, i64>) -> T,
) -> (lakejoin::error::Result<Option<Snapshot>>, T, TableWriter) {
    const WAIT: Duration = Duration::from_secs(30);
    let mut writer = TableWriter::new(s.table.clone(), USER).await.unwrap();
    plus_one(&mut writer, model, 1);
    writer.commit(round_properties(0)).await.unwrap().unwrap();

    let landing = s.faulty.pause(Op::Create, "snapshot/snapshot-2");
    s.faulty.inject(
        Op::Create,
        "snapshot/snapshot-2",
        create_fault,
        Schedule::Nth(1),
    );
    s.faulty.inject(
        Op::Get,
        "snapshot/snapshot-2",
        Fault::FailBefore,
        Schedule::Nth(1),
    );
    plus_one(&mut writer, model, 2);
    let commit = tokio::spawn(async move {
        let outcome = writer.commit(round_properties(1)).await;
        (outcome, writer)
    });
    landing.reached(WAIT).await;
    // Its retry is held as it starts, before it looks for the snapshot it may have written.
    let retry = s.faulty.pause(Op::Get, "snapshot/LATEST");
    landing.release();
    retry.reached(WAIT).await;
    let during = meanwhile(model).await;
    retry.release();
    let (outcome, writer) = tokio::time::timeout(WAIT, commit)
        .await
        .expect("the commit finishes")
        .unwrap();
    s.faulty.clear();
    (outcome, during, writer)
}

/// [`commit_in_doubt_while`] another writer commits twice and expiry keeps only the
/// newest snapshot; then the writer commits once more (+1 on key 3). The commit's
/// outcome, and the ids expired.
async fn commit_in_doubt_across_an_expiry(
    s: &Setup,
    model: &mut HashMap<i32, i64>,
    create_fault: Fault,
) -> (lakejoin::error::Result<Option<Snapshot>>, Vec<i64>) {
    let (outcome, expired, mut writer) =
        commit_in_doubt_while(s, model, create_fault, async |model| {
            commit_twice_and_expire_all_but_the_newest(s, model).await
        })
        .await;
    // The writer goes on committing on the table.
    plus_one(&mut writer, model, 3);
    writer.commit(round_properties(2)).await.unwrap().unwrap();
    writer.close().await.unwrap();
    (outcome, expired)
}

/// A landed commit whose manifest a later manifest merge (30 commits on) rewrote, and
/// whose snapshot expired before its retry looked: it is found by its data file, live in
/// the newest snapshot.
#[tokio::test]
async fn a_landed_commit_whose_manifest_was_merged_away_is_found_by_its_files() {
    let s = setup(Backing::Memory, 1, 10).await;
    let mut model = HashMap::new();
    let (outcome, expired, writer) =
        commit_in_doubt_while(&s, &mut model, Fault::LoseResponse, async |model| {
            commit_and_expire_all_but_the_newest(&s, model, 31).await
        })
        .await;
    writer.close().await.unwrap();
    // The other writer's commits, and its compactions.
    let newest = *expired.last().unwrap() + 1;
    assert_eq!(expired, (1..newest).collect::<Vec<_>>());
    assert!(newest > 32, "{newest}");
    let landed = outcome.unwrap().unwrap();
    assert_eq!(landed.commit_identifier, 2);
    assert_eq!(s.clean.snapshot_ids().await.unwrap(), vec![newest]);
    // The commit's own manifest is no longer named by the newest snapshot.
    let latest = s.clean.snapshot(newest).await.unwrap();
    let names: Vec<String> = s
        .clean
        .snapshot_manifests(&latest)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.file_name)
        .collect();
    assert!(names.len() < 30, "{names:?}");
    assert_eq!(support::cdc::rows_of(&s.clean).await, model);
}

/// The same, and a full compaction then replaced the commit's data file (the expiry
/// deleted the file): the compaction's snapshot, which the table keeps, shows the commit
/// by deleting its file.
#[tokio::test]
async fn a_landed_commit_whose_file_a_kept_compaction_replaced_is_found_by_it() {
    let s = setup(Backing::Memory, 1, 10).await;
    let mut model = HashMap::new();
    let (outcome, expired, writer) =
        commit_in_doubt_while(&s, &mut model, Fault::LoseResponse, async |model| {
            commit_compact_and_expire(&s, model, 31, true).await
        })
        .await;
    writer.close().await.unwrap();
    let newest = *expired.last().unwrap() + 1;
    assert!(newest > 33, "{newest}");
    let landed = outcome.unwrap().unwrap();
    assert_eq!(landed.commit_identifier, 2);
    let kept = s.clean.snapshot(newest).await.unwrap();
    assert_eq!(kept.commit_kind, CommitKind::Compact);
    assert_eq!(support::cdc::rows_of(&s.clean).await, model);
}

/// A commit in doubt that did not land, whose files orphan cleaning removed while it was
/// in doubt, after expiry removed the snapshot it may have been: nothing tells whether
/// it landed, so the writer stops with the reason rather than guess (publishing again
/// could apply it twice; dropping it could lose it).
#[tokio::test]
async fn a_commit_in_doubt_whose_files_were_cleaned_away_stops_the_writer() {
    let s = setup(Backing::Memory, 1, 10).await;
    let mut model = HashMap::new();
    let (outcome, orphans, writer) =
        commit_in_doubt_while(&s, &mut model, Fault::FailBefore, async |model| {
            commit_twice_and_expire_all_but_the_newest(&s, model).await;
            clean_every_orphan(&s.clean).await
        })
        .await;
    drop(writer);
    assert!(!orphans.is_empty());
    let err = outcome.unwrap_err();
    assert!(matches!(err, Error::CommitOutcomeLost { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Fatal);
    assert!(err.to_string().contains("is gone"), "{err}");
}

/// A writer's commit that landed while its response and the read-back were lost, and
/// that expiry removed before the retry looked for it, is recognised from what the expiry
/// left: it is not published again (its rows twice, in a snapshot naming the delta list
/// the expiry deleted, which no reader could open).
#[tokio::test]
async fn a_landed_commit_expired_before_its_retry_is_not_published_again() {
    let s = setup(Backing::Memory, 1, 10).await;
    let mut model = HashMap::new();
    let (outcome, expired) =
        commit_in_doubt_across_an_expiry(&s, &mut model, Fault::LoseResponse).await;
    assert_eq!(expired, vec![1, 2, 3]);
    let landed = outcome.unwrap().unwrap();
    // The id it may first have taken, expired like its own: offsets mirrored to the
    // consumer group under it are used once the table keeps none of its writer's.
    assert_eq!(landed.id, 2);
    assert_eq!(landed.commit_identifier, 2);
    assert_eq!(landed.properties, Some(round_properties(1)));
    assert_eq!(s.clean.snapshot_ids().await.unwrap(), vec![4, 5]);
    assert_eq!(support::cdc::rows_of(&s.clean).await, model);
    let orphans = clean_every_orphan(&s.clean).await;
    assert!(orphans.is_empty(), "files left behind: {orphans:?}");
}

/// The same on a table whose changelog outlives its snapshots (`changelog-producer` =
/// `input`, changelog retained longer): expiry keeps the commit's snapshot record as a
/// long-lived changelog, which identifies it exactly, under its own id.
#[tokio::test]
async fn a_landed_commit_expired_into_a_long_lived_changelog_is_found_there() {
    let mut schema = support::cdc::summing_schema(10);
    schema
        .options
        .insert("changelog-producer".into(), "input".into());
    let s = setup_schema(Backing::Memory, 1, schema).await;
    let mut model = HashMap::new();
    let (outcome, expired) =
        commit_in_doubt_across_an_expiry(&s, &mut model, Fault::LoseResponse).await;
    assert_eq!(expired, vec![1, 2, 3]);
    let landed = outcome.unwrap().unwrap();
    assert_eq!((landed.id, landed.commit_identifier), (2, 2));
    // Its own record, not one pieced together from the newest snapshot: the table had
    // two rows' worth of changes then (one per commit of the writer), four at the end.
    assert_eq!(landed.total_record_count, 2);
    assert!(landed.changelog_manifest_list.is_some());
    assert_eq!(support::cdc::rows_of(&s.clean).await, model);
}

/// The same, but the create failed before it applied: the snapshot expiry removed was
/// another writer's, so the commit is published, once, under new manifest lists.
#[tokio::test]
async fn a_commit_in_doubt_that_did_not_land_is_published_after_an_expiry() {
    let s = setup(Backing::Memory, 1, 10).await;
    let mut model = HashMap::new();
    let (outcome, expired) =
        commit_in_doubt_across_an_expiry(&s, &mut model, Fault::FailBefore).await;
    assert_eq!(expired, vec![1, 2]);
    let landed = outcome.unwrap().unwrap();
    assert_eq!((landed.id, landed.commit_identifier), (4, 2));
    assert_eq!(s.clean.snapshot_ids().await.unwrap(), vec![3, 4, 5]);
    assert_eq!(support::cdc::rows_of(&s.clean).await, model);
    // The commit's first delta list and its in-doubt attempt's base list, unused.
    let orphans = clean_every_orphan(&s.clean).await;
    assert_eq!(orphans.len(), 2, "{orphans:?}");
    assert!(
        orphans
            .iter()
            .all(|o| o.path.contains("manifest/manifest-list-")),
        "{orphans:?}"
    );
}

/// A compaction whose snapshot landed while both its response and the read-back were
/// lost, and which expiry removed before the retry looked for it, is recognised as
/// landed: its output files are live in every snapshot built on it since, and stay.
#[tokio::test]
async fn a_landed_compaction_expired_before_its_retry_keeps_its_files() {
    const WAIT: Duration = Duration::from_secs(30);
    let s = setup(Backing::Memory, 1, 10).await;
    let mut model = HashMap::new();
    let mut writer = TableWriter::new(s.table.clone(), USER).await.unwrap();
    for round in 0..3 {
        plus_one(&mut writer, &mut model, round as i32);
        writer
            .commit(round_properties(round))
            .await
            .unwrap()
            .unwrap();
    }
    writer.close().await.unwrap();
    assert_eq!(s.clean.snapshot_ids().await.unwrap(), vec![1, 2, 3]);

    // The compaction's snapshot 4 lands, but its response and the read-back fail.
    let landing = s.faulty.pause(Op::Create, "snapshot/snapshot-4");
    s.faulty.inject(
        Op::Create,
        "snapshot/snapshot-4",
        Fault::LoseResponse,
        Schedule::Nth(1),
    );
    s.faulty.inject(
        Op::Get,
        "snapshot/snapshot-4",
        Fault::FailBefore,
        Schedule::Nth(1),
    );
    let compaction = tokio::spawn({
        let table = s.table.clone();
        async move { full_compact(&table, "compactor").await }
    });
    landing.reached(WAIT).await;
    // Its retry is held as it starts, before it looks for the landed snapshot.
    let retry = s.faulty.pause(Op::Get, "snapshot/LATEST");
    landing.release();
    retry.reached(WAIT).await;
    let expired = commit_twice_and_expire_all_but_the_newest(&s, &mut model).await;
    assert_eq!(expired, vec![1, 2, 3, 4, 5]);
    retry.release();

    let landed = tokio::time::timeout(WAIT, compaction)
        .await
        .expect("the compaction finishes")
        .unwrap()
        .unwrap()
        .expect("the compaction committed");
    assert_eq!(landed.commit_kind, CommitKind::Compact);
    s.faulty.clear();
    assert_eq!(s.clean.snapshot_ids().await.unwrap(), vec![6]);
    assert_eq!(support::cdc::rows_of(&s.clean).await, model);
    let orphans = clean_every_orphan(&s.clean).await;
    assert!(orphans.is_empty(), "files left behind: {orphans:?}");
}
