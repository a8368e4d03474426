//! Writer fencing: two writers configured for one table (same commit user, as two
//! lakejoin processes with one config) race for it, round after round, on InMemory and
//! LocalFileSystem stores. Exactly one writes at a time; the other fails fast naming the
//! holder, or stands by and takes over once the holder stops heartbeating. The old
//! holder keeps committing as if nothing happened and is refused once fenced. No
//! acknowledged commit is lost, none appears twice, and no snapshot of an older epoch
//! follows one of a newer epoch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lakejoin::error::Error;
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::Datum;
use lakejoin::table::fence::{FenceOptions, OnConflict, WriterFence};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::snapshot::CommitKind;
use lakejoin::table::types::DataType;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;

use crate::support;
use support::faulty_store::{FaultyStore, Op};

const USER: &str = "lakejoin:group:db.t";
const ROUNDS: usize = 100;
const LEASE: Duration = Duration::from_millis(60);
const HEARTBEAT: Duration = Duration::from_millis(20);

fn options(on_conflict: OnConflict) -> FenceOptions {
    FenceOptions {
        on_conflict,
        lease_timeout: LEASE,
        heartbeat_interval: HEARTBEAT,
    }
}

async fn new_table(store: Arc<dyn ObjectStore>) -> Arc<Table> {
    let schema = TableSchema::new(
        vec![
            ("id".into(), DataType::Int, false),
            ("v".into(), DataType::BigInt, true),
        ],
        vec![],
        vec!["id".into()],
        BTreeMap::from([
            ("bucket".to_string(), "1".to_string()),
            ("merge-engine".to_string(), "aggregation".to_string()),
            ("fields.v.aggregate-function".to_string(), "sum".to_string()),
            // Only the writers' own commits, so snapshots = acknowledged commits.
            ("write-only".to_string(), "true".to_string()),
        ]),
    )
    .unwrap();
    let wh = Warehouse::new(store, Path::from("wh"));
    let id = TableIdentifier::parse("db.t").unwrap();
    Arc::new(Table::create(&wh, &id, schema).await.unwrap())
}

/// One +1 commit by a fenced writer, recording who and which epoch made it.
async fn commit_one(
    writer: &mut TableWriter,
    name: &str,
    fence: &WriterFence,
) -> lakejoin::error::Result<i64> {
    writer
        .write(RowKind::Insert, vec![Datum::Int(0), Datum::BigInt(1)])
        .unwrap();
    let properties = BTreeMap::from([
        ("test.writer".to_string(), name.to_string()),
        ("test.epoch".to_string(), fence.epoch().to_string()),
    ]);
    Ok(writer.commit(properties).await?.expect("a commit").id)
}

fn is_fenced(e: &Error) -> bool {
    matches!(
        e,
        Error::WriterFenced { .. } | Error::ForeignCommitOfUser { .. }
    )
}

#[derive(Debug, Default)]
struct Tally {
    acknowledged: u64,
    refused_fail_fast: u64,
    fenced_commits: u64,
    takeovers: u64,
    max_takeover: Duration,
}

/// One round: both race to claim with `fail`; the winner commits; then it goes silent
/// (no heartbeat, no release) while still committing, the loser stands by and takes
/// over, the winner's commits are refused, the new holder commits and releases.
async fn round(table: &Arc<Table>, r: usize, tally: &mut Tally) {
    let (a, b) = tokio::join!(
        WriterFence::acquire(table, "writer-a", options(OnConflict::Fail)),
        WriterFence::acquire(table, "writer-b", options(OnConflict::Fail)),
    );
    let (winner, loser_name) = match (a, b) {
        (Ok(f), Err(e)) => {
            assert!(
                e.to_string().contains("writer-a") && e.to_string().contains("db.t"),
                "{e}"
            );
            (f, "writer-b")
        }
        (Err(e), Ok(f)) => {
            assert!(
                e.to_string().contains("writer-b") && e.to_string().contains("db.t"),
                "{e}"
            );
            (f, "writer-a")
        }
        (a, b) => panic!("round {r}: not exactly one writer: {a:?} / {b:?}"),
    };
    tally.refused_fail_fast += 1;
    let winner = Arc::new(winner);
    let winner_name = winner.holder().to_string();
    let mut old = TableWriter::new(table.clone(), USER).await.unwrap();
    old.set_fence(winner.clone());
    commit_one(&mut old, &winner_name, &winner).await.unwrap();
    tally.acknowledged += 1;

    // The winner goes silent but keeps committing; the loser stands by.
    let silent_since = Instant::now();
    let standby = {
        let table = table.clone();
        tokio::spawn(async move {
            WriterFence::acquire(&table, loser_name, options(OnConflict::Standby)).await
        })
    };
    let mut cadence = tokio::time::interval(Duration::from_millis(5));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        cadence.tick().await;
        assert!(
            Instant::now() < deadline,
            "round {r}: the old writer was never fenced"
        );
        match commit_one(&mut old, &winner_name, &winner).await {
            Ok(_) => tally.acknowledged += 1,
            Err(e) if is_fenced(&e) => {
                tally.fenced_commits += 1;
                break;
            }
            Err(e) => panic!("round {r}: {e}"),
        }
    }
    let new = Arc::new(standby.await.unwrap().unwrap());
    let took = silent_since.elapsed();
    tally.takeovers += 1;
    tally.max_takeover = tally.max_takeover.max(took);
    assert!(new.epoch() > winner.epoch());
    // The old writer stays refused.
    assert!(winner.check().await.is_err());
    assert!(winner.heartbeat().await.is_err());

    // The new holder commits; if the old writer's last commit landed after the new
    // writer read the table, it restarts from that commit, as a restarted process does.
    let new_name = new.holder().to_string();
    let mut attempts = 0;
    loop {
        let mut writer = TableWriter::new(table.clone(), USER).await.unwrap();
        writer.set_fence(new.clone());
        match commit_one(&mut writer, &new_name, &new).await {
            Ok(_) => {
                tally.acknowledged += 1;
                break;
            }
            Err(Error::ForeignCommitOfUser { .. }) if attempts < 3 => attempts += 1,
            Err(e) => panic!("round {r}: the new holder could not commit: {e}"),
        }
    }
    new.release().await.unwrap();
}

async fn race(store: Arc<dyn ObjectStore>, label: &str) {
    let table = new_table(store).await;
    let mut tally = Tally::default();
    for r in 0..ROUNDS {
        round(&table, r, &mut tally).await;
    }
    // 0 lost, 0 duplicated: one snapshot per acknowledged commit, each once.
    let ids = table.snapshot_ids().await.unwrap();
    assert_eq!(ids.len() as u64, tally.acknowledged, "{label}: {tally:?}");
    let mut last_epoch = 0u64;
    let mut last_identifier = 0i64;
    for id in &ids {
        let s = table.snapshot(*id).await.unwrap();
        assert_eq!(s.commit_kind, CommitKind::Append);
        assert!(
            s.commit_identifier > last_identifier,
            "{label}: identifier reused at {id}"
        );
        last_identifier = s.commit_identifier;
        let epoch: u64 = s.properties.as_ref().unwrap()["test.epoch"]
            .parse()
            .unwrap();
        assert!(
            epoch >= last_epoch,
            "{label}: snapshot {id} of epoch {epoch} follows one of epoch {last_epoch}"
        );
        last_epoch = epoch;
    }
    let rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
    assert_eq!(
        rows,
        vec![vec![
            Datum::Int(0),
            Datum::BigInt(tally.acknowledged as i64)
        ]],
        "{label}: an acknowledged commit was lost or applied twice"
    );
    // Takeover within the lease plus a heartbeat of standby polling, plus slack for a
    // loaded machine.
    assert!(
        tally.max_takeover < LEASE + HEARTBEAT + Duration::from_secs(2),
        "{label}: {tally:?}"
    );
    eprintln!("{label}: {ROUNDS} rounds, {tally:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_in_memory_one_writes_nothing_lost_or_duplicated() {
    race(Arc::new(InMemory::new()), "InMemory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_on_local_disk_one_writes_nothing_lost_or_duplicated() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    race(Arc::new(store), "LocalFileSystem").await;
}

/// A holder that heartbeats keeps its table: a standby does not take over while it
/// lives, and takes over promptly once it releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeating_holder_keeps_the_table_until_it_releases() {
    let table = new_table(Arc::new(InMemory::new())).await;
    let holder = Arc::new(
        WriterFence::acquire(&table, "writer-a", options(OnConflict::Fail))
            .await
            .unwrap(),
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let beating = {
        let holder = holder.clone();
        tokio::spawn(async move { holder.keep_alive(stop_rx).await })
    };
    let standby = {
        let table = table.clone();
        tokio::spawn(async move {
            WriterFence::acquire(&table, "writer-b", options(OnConflict::Standby)).await
        })
    };
    // Several leases pass while the holder heartbeats: the standby must still wait.
    let watch_until = Instant::now() + LEASE * 5;
    let mut look = tokio::time::interval(HEARTBEAT);
    while Instant::now() < watch_until {
        look.tick().await;
        assert!(!standby.is_finished(), "took over from a live holder");
        holder.check().await.unwrap();
    }
    stop_tx.send(true).unwrap();
    beating.await.unwrap().unwrap();
    let released = Instant::now();
    holder.release().await.unwrap();
    let new = tokio::time::timeout(Duration::from_secs(5), standby)
        .await
        .expect("standby took over after the release")
        .unwrap()
        .unwrap();
    assert_eq!(new.epoch(), 2);
    assert!(released.elapsed() < LEASE + Duration::from_secs(2));
}

/// The CDC sink of a writer that was taken over stops with an error naming the new
/// holder, and publishes nothing after the takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_cdc_sink_stops_naming_the_new_holder() {
    use lakejoin::pipeline::cdc::TableSink;

    let table = new_table(Arc::new(InMemory::new())).await;
    let old = Arc::new(
        WriterFence::acquire(&table, "writer-a", options(OnConflict::Fail))
            .await
            .unwrap(),
    );
    let pipelines = cdc_pipeline();
    let (sink, mut committed) = TableSink::open(table.clone(), USER, &pipelines, Some(old))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(sink.run(rx, stop_rx));
    let batch = |offset: i64| support::cdc::plus_one(&table, offset, 0);
    tx.send(batch(0)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), committed.changed())
        .await
        .expect("first commit")
        .unwrap();
    // The holder goes silent; another writer takes over once the lease is gone.
    let new = WriterFence::acquire(&table, "writer-b", options(OnConflict::Standby))
        .await
        .unwrap();
    assert_eq!(new.epoch(), 2);
    let before = table.snapshot_ids().await.unwrap();
    let _ = tx.send(batch(1)).await;
    let err = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the fenced sink stops")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, Error::WriterFenced { holder, epoch: 2, .. } if holder == "writer-b"),
        "{err}"
    );
    assert!(err.to_string().contains("db.t"), "{err}");
    assert_eq!(table.snapshot_ids().await.unwrap(), before);
}

/// The config of one CDC pipeline into `db.t`, committing after every row.
fn cdc_pipeline() -> Vec<(
    lakejoin::config::CdcConfig,
    Arc<lakejoin::observe::PipelineMetrics>,
)> {
    let config = lakejoin::config::from_toml(
        "test",
        r#"
[kafka]
bootstrap_servers = "unused:9092"
[warehouse]
uri = "memory://"
[[table]]
name = "db.t"
columns = [{ name = "id", type = "INT NOT NULL" }, { name = "v", type = "BIGINT" }]
primary_key = ["id"]
buckets = 1
[[cdc]]
name = "p"
topics = ["changes"]
format = "json"
table = "db.t"
commit_max_rows = 1
"#,
    )
    .unwrap()
    .cdc[0]
        .clone();
    vec![(
        config,
        Arc::new(lakejoin::observe::PipelineMetrics::default()),
    )]
}

/// The race of issue 16 item 4, forced step by step: the old holder passed its fence
/// check and is about to publish snapshot 2 (its second +1, input offset 1) when the new
/// holder claims the table and reads where to resume: snapshot 1, offset 1. Only then
/// does the old holder's snapshot land. The new holder replays offset 1; it must not
/// commit it on top of snapshot 2 (the sum would count it twice) but stop, naming the
/// snapshot, so that a restart resumes after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_published_while_the_next_writer_resumes_is_not_applied_twice() {
    use lakejoin::pipeline::cdc::TableSink;
    const WAIT: Duration = Duration::from_secs(10);

    let store = FaultyStore::new(Arc::new(InMemory::new()), 7);
    let table = new_table(store.clone()).await;
    let old_fence = Arc::new(
        WriterFence::acquire(&table, "writer-a", options(OnConflict::Fail))
            .await
            .unwrap(),
    );
    let pipelines = cdc_pipeline();
    let (old, mut old_committed) =
        TableSink::open(table.clone(), USER, &pipelines, Some(old_fence))
            .await
            .unwrap();
    let (old_tx, old_rx) = tokio::sync::mpsc::channel(4);
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let old_run = tokio::spawn(old.run(old_rx, stop_rx.clone()));
    old_tx
        .send(support::cdc::plus_one(&table, 0, 0))
        .await
        .unwrap();
    tokio::time::timeout(WAIT, old_committed.changed())
        .await
        .expect("first commit")
        .unwrap();

    // The old holder checks its fence, then is held just before publishing snapshot 2.
    let publish = store.pause(Op::Create, "snapshot/snapshot-2");
    old_tx
        .send(support::cdc::plus_one(&table, 1, 0))
        .await
        .unwrap();
    publish.reached(WAIT).await;

    // The new holder claims the table (the old one's lease lapses meanwhile) and reads
    // its resume offsets; it is held before its writer looks at the latest snapshot.
    let new_fence = Arc::new(
        WriterFence::acquire(&table, "writer-b", options(OnConflict::Standby))
            .await
            .unwrap(),
    );
    let resumed = store.pause(Op::Get, "snapshot/LATEST");
    let opening = tokio::spawn({
        let table = table.clone();
        let pipelines = pipelines.clone();
        async move { TableSink::open(table, USER, &pipelines, Some(new_fence)).await }
    });
    resumed.reached(WAIT).await;
    publish.release();
    tokio::time::timeout(WAIT, old_committed.changed())
        .await
        .expect("the old holder's late snapshot")
        .unwrap();
    assert_eq!(table.snapshot_ids().await.unwrap(), vec![1, 2]);
    resumed.release();
    let (new, mut new_committed) = tokio::time::timeout(WAIT, opening)
        .await
        .expect("the new sink opens")
        .unwrap()
        .unwrap();
    let from = new.resume("p").offsets;
    assert_eq!(
        from.get("changes").and_then(|p| p.get(&0)),
        Some(&1),
        "resumed from snapshot 1: {from:?}"
    );

    // It replays offset 1, which snapshot 2 already holds.
    let (new_tx, new_rx) = tokio::sync::mpsc::channel(4);
    let new_run = tokio::spawn(new.run(new_rx, stop_rx));
    new_tx
        .send(support::cdc::plus_one(&table, 1, 0))
        .await
        .unwrap();
    let err = tokio::time::timeout(WAIT, async {
        tokio::select! {
            stopped = new_run => stopped.unwrap().unwrap_err(),
            Ok(()) = new_committed.changed() => {
                let rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
                let ids = table.snapshot_ids().await.unwrap();
                panic!("the new holder committed offset 1 again on top of snapshot 2: {rows:?} {ids:?}")
            }
        }
    })
    .await
    .expect("the new sink stops");
    assert!(
        matches!(&err, Error::ForeignCommitOfUser { snapshot: 2, .. }),
        "{err}"
    );
    assert_eq!(table.snapshot_ids().await.unwrap(), vec![1, 2]);
    let rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][1], Datum::BigInt(2), "each +1 counted once");
    // A restart resumes after the late snapshot.
    let (restarted, _) = TableSink::open(table.clone(), USER, &pipelines, None)
        .await
        .unwrap();
    let from = restarted.resume("p").offsets;
    assert_eq!(
        from.get("changes").and_then(|p| p.get(&0)),
        Some(&2),
        "{from:?}"
    );
    drop(old_tx);
    let _ = old_run.await;
}
