//! The CDC sink (`TableSink`) driven directly with batches of records, as its consumers
//! hand them over: where commits end (`commit_max_rows` inside a batch, the commit
//! interval), and what a change the writer refuses does to the offsets. The same sink
//! under store faults and crashes is in `commit_faults`.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use lakejoin::error::ErrorKind;
use lakejoin::observe::PipelineMetrics;
use lakejoin::pipeline::cdc::{ChangeBatch, OFFSETS_PROPERTY_PREFIX, Offsets, TableSink};
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::snapshot::CommitKind;
use lakejoin::table::types::DataType;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::memory::InMemory;
use object_store::path::Path;

const USER: &str = "writer";
const KEYS: i32 = 10;

/// `db.t` of `support::cdc` in memory: the sink's handle and a second one for checking.
struct Setup {
    table: Arc<Table>,
    clean: Arc<Table>,
}

async fn setup() -> Setup {
    let wh = Warehouse::new(Arc::new(InMemory::new()), Path::from("wh"));
    let id = TableIdentifier::parse("db.t").unwrap();
    let schema = support::cdc::summing_schema(10);
    let table = Arc::new(Table::create(&wh, &id, schema).await.unwrap());
    let clean = Arc::new(Table::open(&wh, &id).await.unwrap());
    Setup { table, clean }
}

/// A consumer hands the sink a partition's run of records in one batch; when
/// `commit_max_rows` is reached inside it, the commit ends exactly at that record (its
/// rows, and its offset in the snapshot), and the rest of the batch goes to the next one.
/// A record without changes moves the offset and counts for nothing.
#[tokio::test]
async fn a_batch_of_records_commits_at_the_record_that_reaches_commit_max_rows() {
    let s = setup().await;
    let config = support::cdc::cdc_config(3);
    let pipelines = vec![(config, Arc::new(PipelineMetrics::default()))];
    let (sink, _committed) = TableSink::open(s.table.clone(), USER, &pipelines, None)
        .await
        .unwrap();
    // Records 0..8 of partition 0, +1 on key = offset; record 4 has no changes.
    let mut batch = ChangeBatch::of_record("p", "changes", 0, 1, None, Vec::new());
    batch.records.clear();
    for offset in 0..8i64 {
        if offset != 4 {
            let one = support::cdc::plus_one(&s.table, offset, offset as i32);
            batch.changes.extend(one.changes);
        }
        batch.records.push(lakejoin::pipeline::cdc::RecordEnd {
            changes_end: batch.changes.len(),
            next_offset: offset + 1,
            timestamp_ms: None,
        });
    }
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(sink.run(rx, stop_rx));
    tx.send(batch).await.unwrap();
    drop(tx);
    run.await.unwrap().unwrap();
    let _ = stop_tx;
    let mut commits = Vec::new();
    for id in s.clean.snapshot_ids().await.unwrap() {
        let snapshot = s.clean.snapshot(id).await.unwrap();
        if snapshot.commit_user != USER || snapshot.commit_kind != CommitKind::Append {
            continue;
        }
        let offsets: Offsets = serde_json::from_str(
            &snapshot.properties.as_ref().unwrap()[&format!("{OFFSETS_PROPERTY_PREFIX}p")],
        )
        .unwrap();
        commits.push((
            snapshot.delta_record_count,
            support::cdc::resume_offset(&offsets),
        ));
    }
    // 0, 1, 2 | 3, (4), 5, 6 | 7.
    assert_eq!(commits, vec![(3, 3), (3, 7), (1, 8)]);
    assert_eq!(support::cdc::rows_of(&s.clean).await.len(), 7);
}

/// The commit interval counts from the last commit, whichever way it came. A stream that
/// reaches `commit_max_rows` inside its batches more often than the interval is committed
/// by row count alone: no interval commit of a few rows lands right after a row-count
/// commit (the interval used to count only from the last commit outside a batch).
#[tokio::test]
async fn the_commit_interval_counts_from_row_count_commits_inside_batches() {
    const INTERVAL: Duration = Duration::from_millis(1000);
    let s = setup().await;
    let pipelines = vec![(
        support::cdc::cdc_config_every(10, "1s"),
        Arc::new(PipelineMetrics::default()),
    )];
    let (sink, _committed) = TableSink::open(s.table.clone(), USER, &pipelines, None)
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let started = tokio::time::Instant::now();
    let run = tokio::spawn(sink.run(rx, stop_rx));
    // Batches of 7 or 8 records for 1.5 intervals, so a commit of 10 rows every ~1.5
    // batches, always inside one: no batch ends at a multiple of 10 records.
    let mut offset = 0i64;
    while started.elapsed() < INTERVAL * 3 / 2 {
        let mut batch = ChangeBatch::of_record("p", "changes", 0, 1, None, Vec::new());
        batch.records.clear();
        let records = if (offset + 7) % 10 == 0 { 8 } else { 7 };
        for _ in 0..records {
            let one = support::cdc::change_batch(&s.table, offset, KEYS as i64);
            batch.changes.extend(one.changes);
            batch.records.push(lakejoin::pipeline::cdc::RecordEnd {
                changes_end: batch.changes.len(),
                next_offset: offset + 1,
                timestamp_ms: None,
            });
            offset += 1;
        }
        tx.send(batch).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_tx.send(true).unwrap();
    run.await.unwrap().unwrap();
    drop(tx);
    let mut rows = Vec::new();
    for id in s.clean.snapshot_ids().await.unwrap() {
        let snapshot = s.clean.snapshot(id).await.unwrap();
        if snapshot.commit_user == USER && snapshot.commit_kind == CommitKind::Append {
            rows.push(snapshot.delta_record_count);
        }
    }
    assert_eq!(
        rows.iter().sum::<i64>(),
        offset,
        "every record is committed once"
    );
    let (last, before) = rows.split_last().unwrap();
    assert!(
        before.iter().all(|&r| r == 10),
        "only row-count commits before the one at the stop, got {rows:?}"
    );
    assert_eq!(*last, (offset - 1) % 10 + 1);
}

/// A change the writer cannot take (here: one checked against a schema the sink never
/// had) stops the sink with an error of its own kind; the records before it are committed
/// and its offset is not, so a restart reads it again instead of losing it.
#[tokio::test]
async fn a_change_the_writer_refuses_stops_the_sink_before_its_offset() {
    let s = setup().await;
    let pipelines = vec![(
        support::cdc::cdc_config(1),
        Arc::new(PipelineMetrics::default()),
    )];
    let (sink, _committed) = TableSink::open(s.table.clone(), USER, &pipelines, None)
        .await
        .unwrap();
    // Another process evolves the table after the sink opened at schema 0.
    let evolved = lakejoin::lsm::evolve_table(&s.table, |_| {
        Ok(vec![
            lakejoin::table::schema_change::SchemaChange::AddColumn {
                name: "w".into(),
                data_type: DataType::BigInt,
            },
        ])
    })
    .await
    .unwrap();
    let foreign = lakejoin::lsm::row_check::RowCheck::new(&evolved)
        .unwrap()
        .check(
            RowKind::Insert,
            vec![Datum::Int(9), Datum::BigInt(1), Datum::BigInt(2)],
        )
        .unwrap()
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(sink.run(rx, stop_rx));
    tx.send(support::cdc::plus_one(&s.table, 0, 0))
        .await
        .unwrap();
    tx.send(support::cdc::plus_one(&s.table, 1, 1))
        .await
        .unwrap();
    tx.send(ChangeBatch::of_record(
        "p",
        "changes",
        0,
        3,
        None,
        vec![foreign],
    ))
    .await
    .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the sink stops")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fatal, "{err}");
    assert!(err.to_string().contains("never had it"), "{err}");
    let (reopened, _) = TableSink::open(s.table.clone(), USER, &pipelines, None)
        .await
        .unwrap();
    assert_eq!(
        support::cdc::resume_offset(&reopened.resume("p").offsets),
        2
    );
    assert_eq!(support::cdc::rows_of(&s.clean).await.len(), 2);
}

/// The consumer group's offsets stand in for the table's only once expiry removed every
/// snapshot of the writer: not on a new table, nor on one whose history is whole (a
/// table dropped and created again under the same group starts at `start_from`).
#[tokio::test]
async fn the_group_offsets_stand_in_only_for_a_writer_whose_snapshots_expired() {
    use lakejoin::lsm::expire::{ExpireConfig, expire_snapshots};
    use lakejoin::lsm::writer::TableWriter;
    let s = setup().await;
    let pipelines = vec![(
        support::cdc::cdc_config(3),
        Arc::new(PipelineMetrics::default()),
    )];
    let fallback = || async {
        let (sink, _) = TableSink::open(s.table.clone(), USER, &pipelines, None)
            .await
            .unwrap();
        let resume = sink.resume("p");
        assert_eq!(resume.writer.user, USER);
        resume.group_fallback.map(|f| f.earliest)
    };
    assert_eq!(fallback().await, None, "a new table");
    for user in ["other", USER, "other", "other"] {
        let mut writer = TableWriter::new(s.table.clone(), user).await.unwrap();
        writer
            .write(RowKind::Insert, vec![Datum::Int(1), Datum::BigInt(1)])
            .unwrap();
        writer.commit(Default::default()).await.unwrap().unwrap();
        writer.close().await.unwrap();
        assert_eq!(fallback().await, None, "a table with its history whole");
    }
    let keep_newest = ExpireConfig {
        retain_min: 2,
        retain_max: 2,
        time_retained: Duration::ZERO,
        max_deletes: usize::MAX,
    };
    assert_eq!(
        expire_snapshots(&s.table, &keep_newest)
            .await
            .unwrap()
            .expired,
        vec![1, 2]
    );
    assert_eq!(fallback().await, Some(3), "the writer's snapshots expired");
}
