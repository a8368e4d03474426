//! Object-store faults injected into real commits (through the table writer and the CDC
//! sink), on InMemory and LocalFileSystem stores. After each run the table is checked
//! through the store without faults: snapshot ids contiguous, every snapshot readable in
//! full (no torn table), each commit exactly once with its identifier and properties, the
//! rows equal to a model (an aggregation table summing +1 per change, so a change applied
//! twice or lost shows), and orphan cleaning removes only what nothing references.

use crate::support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lakejoin::error::{Error, ErrorKind};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::observe::PipelineMetrics;
use lakejoin::pipeline::cdc::{ChangeBatch, OFFSETS_PROPERTY_PREFIX, Offsets, TableSink};
use lakejoin::table::Table;
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::snapshot::{CommitKind, Snapshot};
use proptest::prelude::*;
use support::faulty_store::{Fault, Op, Schedule};
use support::faulty_table::{BACKINGS, Backing, clean_every_orphan, round_properties, setup};

const USER: &str = "writer";
const KEYS: i32 = 10;

/// Keys changed (+1 each) in round `round`.
fn round_keys(round: usize) -> Vec<i32> {
    (0..3)
        .map(|j| ((round * 7 + j * 3) as i32) % KEYS)
        .collect()
}

/// Commits until it succeeds; every failure must be transient. Returns the snapshot and
/// how many commit calls failed.
async fn commit_until_done(writer: &mut TableWriter, round: usize) -> (Snapshot, u32) {
    let mut failures = 0;
    loop {
        match writer.commit(round_properties(round)).await {
            Ok(Some(s)) => return (s, failures),
            Ok(None) => panic!("round {round}: nothing to commit"),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Transient, "round {round}: {e}");
                failures += 1;
                assert!(failures < 200, "round {round}: commit keeps failing: {e}");
            }
        }
    }
}

/// What a scenario did.
#[derive(Debug, Default, Clone, Copy)]
struct Figures {
    faults: u64,
    failed_calls: u32,
    orphans_removed: usize,
}

/// Checks the table through the clean store: contiguous ids, every snapshot readable,
/// the APPEND commits of `USER` exactly `rounds` with identifiers 1..=rounds and the
/// matching properties, rows equal to `model`.
async fn check_table(clean: &Table, model: &HashMap<i32, i64>, rounds: usize) {
    let ids = clean.snapshot_ids().await.unwrap();
    let expected: Vec<i64> = (1..=ids.len() as i64).collect();
    assert_eq!(ids, expected, "snapshot ids are not contiguous");
    let mut appends = Vec::new();
    for id in &ids {
        let s = clean.snapshot(*id).await.unwrap();
        // Reads every manifest and data file the snapshot references.
        scan(clean, Some(&s), &ScanFilter::default())
            .await
            .unwrap_or_else(|e| panic!("snapshot {id} is torn: {e}"));
        if s.commit_user == USER && s.commit_kind == CommitKind::Append {
            appends.push(s);
        }
    }
    let identifiers: Vec<i64> = appends.iter().map(|s| s.commit_identifier).collect();
    assert_eq!(
        identifiers,
        (1..=rounds as i64).collect::<Vec<_>>(),
        "each commit exactly once, in order"
    );
    for s in &appends {
        let round = s.properties.as_ref().and_then(|p| p.get("test.round"));
        assert_eq!(
            round.map(String::as_str),
            Some((s.commit_identifier - 1).to_string().as_str()),
            "snapshot {} carries another commit's properties",
            s.id
        );
    }
    assert_eq!(support::cdc::rows_of(clean).await, *model);
}

type Rule = (Op, &'static str, Fault, Schedule);

/// Runs `rounds` commits through a `TableWriter` with `rules` injected, checks the table,
/// then cleans orphans (everything unreferenced, regardless of age) and checks again.
async fn run_scenario(backing: Backing, seed: u64, rules: &[Rule], rounds: usize) -> Figures {
    let s = setup(backing, seed, 10).await;
    let mut writer = TableWriter::new(s.table.clone(), USER).await.unwrap();
    for (op, path, fault, schedule) in rules {
        s.faulty.inject(*op, path, *fault, *schedule);
    }
    let mut model: HashMap<i32, i64> = HashMap::new();
    let mut figures = Figures::default();
    for round in 0..rounds {
        for key in round_keys(round) {
            writer
                .write(RowKind::Insert, vec![Datum::Int(key), Datum::BigInt(1)])
                .unwrap();
            *model.entry(key).or_default() += 1;
        }
        let (_, failed) = commit_until_done(&mut writer, round).await;
        figures.failed_calls += failed;
    }
    s.faulty.clear();
    writer.close().await.ok();
    figures.faults = s.faulty.injected();
    check_table(&s.clean, &model, rounds).await;
    figures.orphans_removed = clean_every_orphan(&s.clean).await.len();
    check_table(&s.clean, &model, rounds).await;
    figures
}

async fn run_everywhere(name: &str, rules: &[Rule]) -> Figures {
    let mut total = Figures::default();
    for (i, backing) in BACKINGS.into_iter().enumerate() {
        let f = run_scenario(backing, 7 + i as u64, rules, 12).await;
        assert!(f.faults > 0, "{name} on {backing:?}: no fault was injected");
        total.faults += f.faults;
        total.failed_calls += f.failed_calls;
        total.orphans_removed += f.orphans_removed;
    }
    eprintln!("{name}: {total:?}");
    total
}

const SNAPSHOT: &str = "snapshot/snapshot-";

#[tokio::test]
async fn snapshot_writes_failing_before_they_apply_are_retried() {
    run_everywhere(
        "fail before snapshot write",
        &[(
            Op::Create,
            SNAPSHOT,
            Fault::FailBefore,
            Schedule::EveryNth(2),
        )],
    )
    .await;
}

#[tokio::test]
async fn a_lost_snapshot_response_is_recognised_as_our_commit() {
    let f = run_everywhere(
        "lost snapshot response",
        &[(
            Op::Create,
            SNAPSHOT,
            Fault::LoseResponse,
            Schedule::EveryNth(2),
        )],
    )
    .await;
    // Read back at once, so the commit call itself succeeds.
    assert_eq!(f.failed_calls, 0);
}

#[tokio::test]
async fn a_lost_snapshot_response_whose_read_back_fails_stays_in_doubt_until_resolved() {
    run_everywhere(
        "lost snapshot response, read-back failing",
        &[
            (
                Op::Create,
                SNAPSHOT,
                Fault::LoseResponse,
                Schedule::EveryNth(2),
            ),
            (
                Op::Get,
                SNAPSHOT,
                Fault::FailBefore,
                Schedule::Probability(0.4),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn already_exists_for_our_own_applied_create_is_recognised() {
    run_everywhere(
        "AlreadyExists after the create applied",
        &[(
            Op::Create,
            SNAPSHOT,
            Fault::AppliedThenAlreadyExists,
            Schedule::EveryNth(2),
        )],
    )
    .await;
}

#[tokio::test]
async fn a_spurious_already_exists_is_retried() {
    run_everywhere(
        "spurious AlreadyExists",
        &[(
            Op::Create,
            SNAPSHOT,
            Fault::SpuriousAlreadyExists,
            Schedule::EveryNth(2),
        )],
    )
    .await;
}

#[tokio::test]
async fn failed_manifest_and_data_file_writes_leave_only_orphans() {
    let f = run_everywhere(
        "manifest and data file writes failing or losing responses",
        &[
            (
                Op::Put,
                "manifest/",
                Fault::FailBefore,
                Schedule::EveryNth(3),
            ),
            (
                Op::Put,
                "manifest/",
                Fault::LoseResponse,
                Schedule::EveryNth(4),
            ),
            (Op::Put, "bucket-", Fault::FailBefore, Schedule::EveryNth(3)),
            (
                Op::Put,
                "bucket-",
                Fault::LoseResponse,
                Schedule::EveryNth(4),
            ),
        ],
    )
    .await;
    // Lost responses left files that no snapshot references; cleaning found them.
    assert!(f.orphans_removed > 0, "{f:?}");
}

#[tokio::test]
async fn truncated_reads_are_detected_and_retried() {
    run_everywhere(
        "truncated reads",
        &[
            (
                Op::Get,
                "manifest/",
                Fault::TruncateRead,
                Schedule::EveryNth(3),
            ),
            (
                Op::Get,
                SNAPSHOT,
                Fault::TruncateRead,
                Schedule::EveryNth(4),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn latency_listing_and_hint_failures_do_not_break_commits() {
    run_everywhere(
        "latency, listing and hint failures",
        &[
            (
                Op::Create,
                SNAPSHOT,
                Fault::Latency(Duration::from_millis(20)),
                Schedule::EveryNth(2),
            ),
            (
                Op::Get,
                "manifest/",
                Fault::Latency(Duration::from_millis(5)),
                Schedule::EveryNth(2),
            ),
            (
                Op::List,
                "snapshot",
                Fault::FailBefore,
                Schedule::EveryNth(2),
            ),
            (Op::Get, "LATEST", Fault::FailBefore, Schedule::EveryNth(2)),
            (
                Op::Put,
                "LATEST",
                Fault::LoseResponse,
                Schedule::EveryNth(2),
            ),
            (Op::Head, SNAPSHOT, Fault::FailBefore, Schedule::EveryNth(3)),
        ],
    )
    .await;
}

/// A commit whose snapshot landed unseen and whose every later look failed ends with
/// `CommitOutcomeUnknown`; the next commit call resolves it without committing twice.
#[tokio::test]
async fn an_unknown_outcome_is_resolved_by_the_next_commit_exactly_once() {
    for backing in BACKINGS {
        let s = setup(backing, 1, 2).await;
        let mut writer = TableWriter::new(s.table.clone(), USER).await.unwrap();
        writer
            .write(RowKind::Insert, vec![Datum::Int(1), Datum::BigInt(1)])
            .unwrap();
        s.faulty
            .inject(Op::Create, SNAPSHOT, Fault::LoseResponse, Schedule::Nth(1));
        // Every later look at the snapshot fails, so the commit cannot tell it landed.
        s.faulty
            .inject(Op::Get, SNAPSHOT, Fault::FailBefore, Schedule::FirstN(1000));
        let err = writer.commit(round_properties(0)).await.unwrap_err();
        assert!(
            matches!(err, Error::CommitOutcomeUnknown { since: 0, .. }),
            "{backing:?}: {err}"
        );
        assert!(writer.has_commit_in_doubt());
        // It did land.
        assert_eq!(s.clean.snapshot_ids().await.unwrap(), vec![1]);
        s.faulty.clear();
        let resolved = writer.commit(round_properties(0)).await.unwrap().unwrap();
        assert_eq!((resolved.id, resolved.commit_identifier), (1, 1));
        assert!(!writer.has_commit_in_doubt());
        writer
            .write(RowKind::Insert, vec![Datum::Int(1), Datum::BigInt(1)])
            .unwrap();
        let next = writer.commit(round_properties(1)).await.unwrap().unwrap();
        assert_eq!((next.id, next.commit_identifier), (2, 2));
        check_table(&s.clean, &HashMap::from([(1, 2)]), 2).await;
    }
}

/// A second writer with the same commit user (a fenced writer that still committed)
/// makes the first one stop instead of building on offsets it did not write.
#[tokio::test]
async fn a_foreign_commit_of_our_user_stops_the_writer() {
    let s = setup(Backing::Memory, 1, 10).await;
    let mut first = TableWriter::new(s.table.clone(), USER).await.unwrap();
    let mut second = TableWriter::new(s.table.clone(), USER).await.unwrap();
    second
        .write(RowKind::Insert, vec![Datum::Int(1), Datum::BigInt(1)])
        .unwrap();
    second.commit(round_properties(0)).await.unwrap().unwrap();
    first
        .write(RowKind::Insert, vec![Datum::Int(2), Datum::BigInt(1)])
        .unwrap();
    let err = first.commit(round_properties(0)).await.unwrap_err();
    assert!(
        matches!(err, Error::ForeignCommitOfUser { snapshot: 1, .. }),
        "{err}"
    );
    assert_eq!(s.clean.snapshot_ids().await.unwrap(), vec![1]);
}

fn fault_strategy() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::FailBefore),
        Just(Fault::LoseResponse),
        Just(Fault::AppliedThenAlreadyExists),
        Just(Fault::SpuriousAlreadyExists),
        Just(Fault::TruncateRead),
        Just(Fault::Latency(Duration::from_millis(1))),
    ]
}

fn rule_strategy() -> impl Strategy<Value = Rule> {
    (
        prop_oneof![
            Just(Op::Put),
            Just(Op::Create),
            Just(Op::Get),
            Just(Op::Head),
            Just(Op::List),
        ],
        prop_oneof![
            Just("snapshot/"),
            Just("manifest/"),
            Just("bucket-"),
            Just("LATEST"),
            Just(""),
        ],
        fault_strategy(),
        // Schedules that leave every request a chance: a deterministic every-k-th fault
        // can hit the same step of each retry forever, which no commit protocol outlives.
        prop_oneof![
            (1..30u64).prop_map(Schedule::Nth),
            (1..4u64).prop_map(Schedule::FirstN),
            (1..30u32).prop_map(|p| Schedule::Probability(f64::from(p) / 100.0)),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random fault schedules over a sequence of commits: the table always ends equal to
    /// the model with every commit exactly once.
    #[test]
    fn random_fault_schedules_never_lose_or_duplicate_a_commit(
        rules in proptest::collection::vec(rule_strategy(), 1..7),
        local in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let backing = if local { Backing::Local } else { Backing::Memory };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let figures = rt.block_on(run_scenario(backing, seed, &rules, 8));
        eprintln!("random schedule on {backing:?}: {figures:?}");
    }
}

// ----- the CDC path: TableSink commits offsets with the data -----

fn cdc_config() -> lakejoin::config::CdcConfig {
    support::cdc::cdc_config(7)
}

fn batch(table: &Table, offset: i64) -> ChangeBatch {
    support::cdc::change_batch(table, offset, KEYS as i64)
}

/// The CDC sink commits under random faults and is killed at random points; each restart
/// resumes from the offsets in the table. In the end every record of the topic is in the
/// table exactly once and the last snapshot's offsets are the end of the topic.
async fn cdc_crash_and_fault_run(backing: Backing, seed: u64, records: i64) -> (u64, u32) {
    let s = setup(backing, seed, 10).await;
    let config = cdc_config();
    let pipelines = vec![(config, Arc::new(PipelineMetrics::default()))];
    for (op, fault) in [
        (Op::Create, Fault::LoseResponse),
        (Op::Create, Fault::AppliedThenAlreadyExists),
        (Op::Put, Fault::FailBefore),
        (Op::Put, Fault::LoseResponse),
        (Op::Get, Fault::TruncateRead),
        (Op::Get, Fault::FailBefore),
    ] {
        s.faulty.inject(op, "", fault, Schedule::Probability(0.04));
    }
    let mut restarts = 0u32;
    let mut rng_state = seed;
    loop {
        let (sink, mut committed) =
            match TableSink::open(s.table.clone(), USER, &pipelines, None).await {
                Ok(opened) => opened,
                // Opening reads the table through the faulty store too.
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
                    continue;
                }
            };
        let from = support::cdc::resume_offset(&sink.resume("p").offsets);
        if from >= records {
            break;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let run = tokio::spawn(sink.run(rx, stop_rx));
        // Kill this incarnation after a pseudo-random number of records (or let it
        // finish the topic and stop cleanly).
        rng_state = rng_state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let kill_after = from + 1 + (rng_state >> 33) as i64 % 40;
        let mut offset = from;
        while offset < records.min(kill_after) {
            if tx.send(batch(&s.table, offset)).await.is_err() {
                break;
            }
            offset += 1;
        }
        if offset >= records {
            drop(tx);
            let _ = stop_tx.send(true);
            match run.await.unwrap() {
                Ok(()) => {}
                Err(e) => assert_eq!(e.kind(), ErrorKind::Transient, "{e}"),
            }
        } else {
            // Wait (bounded) for a commit of this incarnation, then kill it mid-flight.
            let _ = tokio::time::timeout(Duration::from_secs(2), committed.changed()).await;
            run.abort();
            let _ = run.await;
        }
        restarts += 1;
        assert!(restarts < 500, "no progress");
    }
    let injected = s.faulty.injected();
    s.faulty.clear();
    let latest = s
        .clean
        .latest_snapshot_of_user(USER)
        .await
        .unwrap()
        .unwrap();
    let offsets: Offsets = serde_json::from_str(
        &latest.properties.as_ref().unwrap()[&format!("{OFFSETS_PROPERTY_PREFIX}p")],
    )
    .unwrap();
    assert_eq!(support::cdc::resume_offset(&offsets), records);
    let mut model: HashMap<i32, i64> = HashMap::new();
    for offset in 0..records {
        *model.entry((offset % KEYS as i64) as i32).or_default() += 1;
    }
    assert_eq!(
        support::cdc::rows_of(&s.clean).await,
        model,
        "a change was lost or applied twice"
    );
    let ids = s.clean.snapshot_ids().await.unwrap();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>());
    for id in ids {
        let snapshot = s.clean.snapshot(id).await.unwrap();
        scan(&s.clean, Some(&snapshot), &ScanFilter::default())
            .await
            .unwrap_or_else(|e| panic!("snapshot {id} is torn: {e}"));
    }
    (injected, restarts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_sink_killed_and_faulted_keeps_every_change_exactly_once() {
    for (i, backing) in BACKINGS.into_iter().enumerate() {
        let (faults, restarts) = cdc_crash_and_fault_run(backing, 11 + i as u64, 300).await;
        eprintln!("cdc {backing:?}: {faults} faults injected, {restarts} sink incarnations");
        assert!(faults > 0 && restarts > 1);
    }
}
