//! A full disk, a read-only warehouse and denied access, switched on and off while the
//! CDC sink runs (hermetic: the fault-injecting store returns the OS errors as
//! LocalFileSystem does). While a fault lasts the sink logs an ERROR naming the table,
//! the file and the OS error, the process is not ready, no snapshot (and so no offset)
//! is committed, the sink takes no more changes (its consumers wait), and the commit is
//! retried with a growing, bounded backoff. Once the fault clears the sink continues by
//! itself; a kill while the fault lasts resumes from the last committed offsets. In the
//! end every change is in the table exactly once, every snapshot reads in full, and
//! orphan cleaning removes what failed attempts left behind.

use crate::support;

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lakejoin::lsm::orphan::{OrphanCleanConfig, clean_orphan_files};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::observe::{PipelineKind, PipelineMetrics, Registry};
use lakejoin::pipeline::cdc::{ChangeBatch, OFFSETS_PROPERTY_PREFIX, Offsets, TableSink};
use lakejoin::table::datum::Datum;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::types::DataType;
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use support::faulty_store::{EACCES, ENOSPC, EROFS, Fault, FaultyStore, Op, Schedule};
use tokio::sync::{mpsc, watch};

const USER: &str = "writer";
const KEYS: i64 = 10;
const TABLE: &str = "db.t";

/// Log lines of this test, captured from the sink's `tracing` events.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn schema() -> TableSchema {
    TableSchema::new(
        vec![
            ("id".into(), DataType::Int, false),
            ("v".into(), DataType::BigInt, true),
        ],
        vec![],
        vec!["id".into()],
        [
            ("bucket", "2"),
            ("merge-engine", "aggregation"),
            ("fields.v.aggregate-function", "sum"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    )
    .unwrap()
}

fn cdc_config() -> lakejoin::config::CdcConfig {
    support::cdc::cdc_config(25)
}

/// Record `offset` of the topic: +1 on key `offset % KEYS`.
fn batch(table: &Table, offset: i64) -> ChangeBatch {
    support::cdc::change_batch(table, offset, KEYS)
}

fn resume_offset(offsets: &Offsets) -> i64 {
    offsets
        .get("changes")
        .and_then(|p| p.get(&0))
        .copied()
        .unwrap_or(0)
}

/// Where the last snapshot of `USER` says the topic resumes (0 before any).
async fn committed_offset(table: &Table) -> i64 {
    let Some(latest) = table.latest_snapshot_of_user(USER).await.unwrap() else {
        return 0;
    };
    let offsets: Offsets = serde_json::from_str(
        &latest.properties.as_ref().unwrap()[&format!("{OFFSETS_PROPERTY_PREFIX}p")],
    )
    .unwrap();
    resume_offset(&offsets)
}

/// Polls `condition` every 10 ms until it holds; panics after 20 s.
async fn wait_for(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One incarnation of the sink and the task feeding it the topic from where the table
/// says it resumes (as a CDC consumer does), until `records`.
struct Incarnation {
    run: tokio::task::JoinHandle<lakejoin::error::Result<()>>,
    feeder: tokio::task::JoinHandle<()>,
    stop: watch::Sender<bool>,
    /// Next offset the feeder will send (everything below it was taken by the sink or
    /// sits in the channel).
    sent: Arc<AtomicI64>,
}

const CHANNEL: usize = 16;

async fn start(table: &Arc<Table>, metrics: &Arc<PipelineMetrics>, records: i64) -> Incarnation {
    let pipelines = vec![(cdc_config(), metrics.clone())];
    let (sink, _committed) = TableSink::open(table.clone(), USER, &pipelines, None)
        .await
        .unwrap();
    let from = resume_offset(&sink.resume("p").offsets);
    let (tx, rx) = mpsc::channel(CHANNEL);
    let (stop, stop_rx) = watch::channel(false);
    let run = tokio::spawn(sink.run(rx, stop_rx));
    let sent = Arc::new(AtomicI64::new(from));
    let feeder = {
        let sent = sent.clone();
        let table = table.clone();
        tokio::spawn(async move {
            for offset in from..records {
                if tx.send(batch(&table, offset)).await.is_err() {
                    return;
                }
                sent.store(offset + 1, Ordering::SeqCst);
                // A steady stream, not one burst.
                if offset % 5 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        })
    };
    Incarnation {
        run,
        feeder,
        stop,
        sent,
    }
}

impl Incarnation {
    /// `kill -9`: the tasks stop wherever they are; nothing is flushed or committed.
    async fn kill(self) {
        self.feeder.abort();
        self.run.abort();
        let _ = self.feeder.await;
        let _ = self.run.await;
    }
}

/// The faults of one phase: on which writes, which OS error.
struct Phase {
    name: &'static str,
    op: Op,
    path: &'static str,
    errno: i32,
    os_text: &'static str,
}

const PHASES: [Phase; 5] = [
    Phase {
        name: "disk full on data files",
        op: Op::Put,
        path: "/bucket-",
        errno: ENOSPC,
        os_text: "No space left on device",
    },
    Phase {
        name: "disk full on manifests",
        op: Op::Put,
        path: "/manifest/",
        errno: ENOSPC,
        os_text: "No space left on device",
    },
    Phase {
        name: "disk full on snapshots",
        op: Op::Create,
        path: "/snapshot/snapshot-",
        errno: ENOSPC,
        os_text: "No space left on device",
    },
    Phase {
        name: "permission denied on every write",
        op: Op::Put,
        path: "",
        errno: EACCES,
        os_text: "Permission denied",
    },
    Phase {
        name: "read-only file system on one bucket's data files",
        op: Op::Put,
        path: "/bucket-1/",
        errno: EROFS,
        os_text: "Read-only file system",
    },
];

/// What a run did.
#[derive(Debug, Default)]
struct Figures {
    faults: u64,
    failed_commits: u64,
    kills: u32,
    orphans_removed: usize,
}

async fn run(backing: &str, inner: Arc<dyn ObjectStore>, log: &Captured) -> Figures {
    const RECORDS: i64 = 3_000;
    let faulty = FaultyStore::new(inner.clone(), 5);
    let id = TableIdentifier::parse(TABLE).unwrap();
    let table = Arc::new(
        Table::create(
            &Warehouse::new(faulty.clone(), Path::from("wh")),
            &id,
            schema(),
        )
        .await
        .unwrap(),
    );
    let clean = Table::open(&Warehouse::new(inner, Path::from("wh")), &id)
        .await
        .unwrap();
    let metrics = Arc::new(PipelineMetrics::default());
    metrics.assigned.store(true, Ordering::Relaxed);
    let registry = Registry::default();
    registry.register("p", PipelineKind::Cdc, Some(TABLE), metrics.clone());
    registry.set_started();

    let mut figures = Figures::default();
    let mut sink = start(&table, &metrics, RECORDS).await;
    for (i, phase) in PHASES.iter().enumerate() {
        // Some progress first: commits land while the store is healthy.
        let before = committed_offset(&clean).await;
        wait_for(
            &format!("{}: a commit before the fault", phase.name),
            async || committed_offset(&clean).await > before,
        )
        .await;
        assert!(registry.readiness().is_ok(), "{:?}", registry.readiness());

        // The fault: every matching write fails with the OS error.
        let failures_before = PipelineMetrics::get(&metrics.commit_failures);
        let log_before = log.text().len();
        faulty.inject(
            phase.op,
            phase.path,
            Fault::Os(phase.errno),
            Schedule::Probability(1.0),
        );
        wait_for(
            &format!("{}: three failed commits", phase.name),
            async || PipelineMetrics::get(&metrics.commit_failures) >= failures_before + 3,
        )
        .await;
        // Not ready, with a reason naming the table and the OS error.
        let reasons = registry
            .readiness()
            .expect_err("not ready while commits fail");
        let reason = reasons.join("\n");
        assert!(
            reason.contains(TABLE) && reason.contains(phase.os_text),
            "{}: readiness reason {reason:?}",
            phase.name
        );
        // An ERROR naming the table, the file and the OS error.
        let logged = log.text()[log_before..].to_string();
        let error_line = logged
            .lines()
            .find(|l| l.contains("ERROR") && l.contains("cannot write the table"))
            .unwrap_or_else(|| panic!("{}: no ERROR line in\n{logged}", phase.name));
        assert!(
            error_line.contains(&format!("table={TABLE} "))
                && error_line.contains("file=\"wh/db.db/t/")
                && error_line.contains(phase.os_text)
                && error_line.contains("(os error"),
            "{}: {error_line}",
            phase.name
        );
        // Nothing commits, and the sink takes no more changes: the feeder waits.
        let stuck_at = committed_offset(&clean).await;
        let snapshots = clean.snapshot_ids().await.unwrap().len();
        let sent = sink.sent.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(committed_offset(&clean).await, stuck_at, "{}", phase.name);
        assert_eq!(clean.snapshot_ids().await.unwrap().len(), snapshots);
        assert!(
            sink.sent.load(Ordering::SeqCst) <= sent + CHANNEL as i64 + 1,
            "{}: the sink kept taking changes while it cannot commit",
            phase.name
        );
        // The backoff grows: attempts get rarer (20 ms doubling; bounded at 30 s).
        let attempts = PipelineMetrics::get(&metrics.commit_failures) - failures_before;
        assert!(
            attempts < 12,
            "{}: {attempts} attempts in about a second",
            phase.name
        );

        // Every other fault is survived by a kill: the restart resumes from the offsets of
        // the last snapshot, so the changes the dead sink held are consumed again.
        if i % 2 == 1 {
            sink.kill().await;
            figures.kills += 1;
            let at_kill = PipelineMetrics::get(&metrics.commit_failures);
            sink = start(&table, &metrics, RECORDS).await;
            assert_eq!(
                sink.sent.load(Ordering::SeqCst),
                stuck_at,
                "{}: resumes from the last committed offset",
                phase.name
            );
            wait_for(
                &format!("{}: the restart fails too", phase.name),
                async || PipelineMetrics::get(&metrics.commit_failures) > at_kill,
            )
            .await;
        }

        // The fault clears: the sink continues by itself.
        faulty.clear();
        wait_for(&format!("{}: commits again", phase.name), async || {
            committed_offset(&clean).await > stuck_at
        })
        .await;
        wait_for(&format!("{}: ready again", phase.name), async || {
            registry.readiness().is_ok()
        })
        .await;
        assert!(log.text().contains("table commits succeed again"));
    }
    wait_for("every record committed", async || {
        committed_offset(&clean).await == RECORDS
    })
    .await;
    sink.feeder.await.unwrap();
    sink.stop.send_replace(true);
    sink.run.await.unwrap().unwrap();
    figures.faults = faulty.injected();
    figures.failed_commits = PipelineMetrics::get(&metrics.commit_failures);

    check(&clean, RECORDS, backing).await;
    let report = clean_orphan_files(
        &clean,
        &OrphanCleanConfig {
            older_than: Duration::ZERO,
            dry_run: false,
        },
    )
    .await
    .unwrap();
    figures.orphans_removed = report.removed.len();
    check(&clean, RECORDS, backing).await;
    figures
}

/// Every change exactly once (the sums), contiguous snapshots that all read in full.
async fn check(clean: &Table, records: i64, backing: &str) {
    let ids = clean.snapshot_ids().await.unwrap();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "{backing}");
    for id in ids {
        let snapshot = clean.snapshot(id).await.unwrap();
        scan(clean, Some(&snapshot), &ScanFilter::default())
            .await
            .unwrap_or_else(|e| panic!("{backing}: snapshot {id} is torn: {e}"));
    }
    let mut model: HashMap<i32, i64> = HashMap::new();
    for offset in 0..records {
        *model.entry((offset % KEYS) as i32).or_default() += 1;
    }
    let rows: HashMap<i32, i64> = scan(clean, None, &ScanFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|row| match (&row[0], &row[1]) {
            (Datum::Int(k), Datum::BigInt(v)) => (*k, *v),
            other => panic!("unexpected row {other:?}"),
        })
        .collect();
    assert_eq!(rows, model, "{backing}: a change was lost or applied twice");
}

/// All phases on LocalFileSystem and InMemory, one after the other, in one test so the
/// captured log belongs to it (a current-thread runtime: every task logs through the
/// subscriber set here).
#[tokio::test]
async fn a_full_or_read_only_warehouse_stalls_the_sink_cleanly_and_it_recovers_by_itself() {
    let log = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    for (backing, inner) in [
        ("LocalFileSystem", local),
        (
            "InMemory",
            Arc::new(InMemory::new()) as Arc<dyn ObjectStore>,
        ),
    ] {
        let figures = run(backing, inner, &log).await;
        eprintln!("storage faults on {backing}: {figures:?}");
        assert!(figures.faults > 0 && figures.kills > 0);
    }
}
