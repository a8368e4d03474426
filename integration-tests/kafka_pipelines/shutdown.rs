//! Graceful shutdown: SIGTERM commits, so a restart replays nothing and loses nothing (and
//! the running process serves health, metrics and progress lines meanwhile); a second
//! signal or `run.shutdown_timeout` ends a shutdown stuck on a lookup without losing the
//! fact, whose offset was never committed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::support::broker::{
    self, Deployment, LakejoinProcess, TestProducer, TopicReader, tail, unique, wait_until,
};
use crate::support::fixture::toml_value;
use crate::support::shop::ShopTopics;
use crate::{Model, debezium, debezium_customers, totals_config};

/// `[observe]` and `[run]` of the graceful-shutdown test: progress lines every second.
const GRACEFUL: &str = r#"
[observe]
listen = "127.0.0.1:0"
progress_interval = "1s"

[run]
shutdown_timeout = "60s"
"#;

/// SIGTERM at random moments while changes and facts stream in, restarting each time:
/// every run exits 0 after committing, and a restart replays nothing after the last
/// commit and loses nothing: the sum-aggregation table read by pypaimon equals the model
/// (a change applied twice or lost would show in the totals), and every order is in the
/// output exactly once. The first run also serves metrics, health and progress lines.
#[test]
fn sigterm_commits_so_a_restart_replays_nothing_and_loses_nothing() {
    const CUSTOMERS: i64 = 100;
    const STOPS: usize = 3;
    let topics = ShopTopics::create(2, 2);
    let payments = unique("payments");
    broker::create_topics(&[(&payments, 2)]);
    let deployment = Deployment::new(
        &totals_config(&topics, &payments, &unique("graceful"))
            .merge(GRACEFUL)
            .build(),
    );
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;
    let mut rng = StdRng::seed_from_u64(0x5167_7e12);
    let model = Model::generate(&mut rng, 12_000, CUSTOMERS, &customers, &payments, &orders);
    let (producer_thread, producing) = model.stream();

    let mut output = TopicReader::new(&enriched);
    for stop in 0..STOPS {
        let before = deployment.snapshot_count("shop.totals");
        let produced_before = output.records.len();
        let mut process = deployment.start();
        if stop == 0 {
            check_endpoint_and_progress(&mut process);
        }
        wait_until(
            "the run committed and produced, or the stream ended",
            || {
                output.poll_for(Duration::from_millis(50));
                (deployment.snapshot_count("shop.totals") > before
                    && output.records.len() > produced_before)
                    || !producing.load(Ordering::SeqCst)
            },
        );
        std::thread::sleep(Duration::from_millis(rng.random_range(0..1_500)));
        process.assert_alive();
        let log = process.terminate();
        assert!(log.contains("stopped cleanly"), "{}", tail(&log, 40));
    }
    producer_thread.join().expect("producer thread");

    let process = deployment.start();
    let expected_totals = model.expected_totals();
    let expected_customers = model.expected_customers();
    deployment.wait_for_table("shop.totals", &expected_totals);
    deployment.wait_for_table("shop.customers", &expected_customers);
    let wanted: BTreeSet<i64> = model.order_ids.iter().copied().collect();
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        output.read_until("every order arrived", |records| {
            let seen: BTreeSet<i64> = records
                .iter()
                .filter_map(|r| r.value["order_id"].as_i64())
                .collect();
            wanted.is_subset(&seen)
        })
    }));
    if let Err(panic) = read {
        let log =
            std::fs::read_to_string(deployment.dir.path().join("lakejoin.log")).unwrap_or_default();
        eprintln!("lakejoin log tail:\n{}", tail(&log, 80));
        std::panic::resume_unwind(panic);
    }
    process.terminate();

    assert_eq!(
        deployment.pypaimon("shop.totals"),
        expected_totals,
        "pypaimon: totals"
    );
    assert_eq!(
        deployment.pypaimon("shop.customers"),
        expected_customers,
        "pypaimon: customers"
    );
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for record in output.drain(Duration::from_secs(1)) {
        *counts
            .entry(record.value["order_id"].as_i64().expect("order_id"))
            .or_default() += 1;
    }
    let twice: Vec<(&i64, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "orders produced more than once across SIGTERM restarts: {twice:?}"
    );
    assert_eq!(counts.keys().copied().collect::<BTreeSet<i64>>(), wanted);
}

/// The running process answers /health/live, turns ready, exposes its metrics, and logs
/// progress lines.
fn check_endpoint_and_progress(process: &mut LakejoinProcess) {
    let address = process.endpoint();
    assert_eq!(
        broker::http_get(address, "/health/live"),
        Some((200, "live\n".to_owned()))
    );
    wait_until("/health/ready answers 200", || {
        broker::http_get(address, "/health/ready").is_some_and(|(status, _)| status == 200)
    });
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some((200, text)) = broker::http_get(address, "/metrics") {
            let value = |series: &str| broker::metric(&text, series).unwrap_or(0.0);
            if value(r#"lakejoin_commits_total{pipeline="payments-cdc",kind="cdc"}"#) > 0.0
                && value(
                    r#"lakejoin_table_snapshot_id{pipeline="payments-cdc",table="shop.totals"}"#,
                ) > 0.0
                && value(r#"lakejoin_commit_duration_seconds_count{pipeline="payments-cdc"}"#) > 0.0
                && value(
                    r#"lakejoin_records_produced_total{pipeline="orders-enriched",kind="enrich"}"#,
                ) > 0.0
                && value(
                    r#"lakejoin_lookup_hits_total{pipeline="orders-enriched",join="0",table="shop.customers"}"#,
                ) + value(
                    r#"lakejoin_lookup_misses_total{pipeline="orders-enriched",join="0",table="shop.customers"}"#,
                ) > 0.0
                && value(
                    r#"lakejoin_lookup_duration_seconds_count{pipeline="orders-enriched",join="0",table="shop.customers"}"#,
                ) > 0.0
                && text.contains(r#"lakejoin_consumer_lag{pipeline="orders-enriched",topic=""#)
                && value("lakejoin_ready") == 1.0
            {
                break;
            }
            last = text;
        }
        assert!(
            Instant::now() < deadline,
            "the metrics never showed commits, lookups and lag:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let progress = process.wait_for_log("progress pipeline=orders-enriched");
    assert!(
        progress.contains("consumed_per_s=")
            && progress.contains("lag=")
            && progress.contains("hit_rate="),
        "{progress}"
    );
    let cdc = process.wait_for_log("progress pipeline=payments-cdc");
    assert!(
        cdc.contains("commits=") && cdc.contains("snapshot="),
        "{cdc}"
    );
}

/// A graceful stop waits for the lookup in hand; a second SIGTERM exits at once (130),
/// and `run.shutdown_timeout` bounds the wait (exit 2). Neither loses the fact: its offset
/// was never committed, so it is enriched once its customer arrives.
#[test]
fn a_second_signal_or_the_shutdown_timeout_ends_a_stuck_shutdown() {
    let topics = ShopTopics::create(1, 1);
    let deployment = Deployment::new(
        &debezium_customers(&topics, "stuck")
            .customers("buckets", 1)
            // A process that exits at once does not leave the group; restarts rejoin sooner.
            .kafka_property("session.timeout.ms", "6000")
            .kafka_property("heartbeat.interval.ms", "500")
            .set("run", "shutdown_timeout", "120s")
            // Retries a miss for a long time, so a fact for an unknown customer keeps the
            // shutdown waiting for its lookup.
            .join(
                "retry",
                toml_value(r#"{ on = "miss", delay = "1s", max_attempts = 100000 }"#),
            )
            .build(),
    );
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;
    let producer = TestProducer::new();
    producer.send(
        &orders,
        "1",
        &json!({"order_id": 1, "customer_id": 7}).to_string(),
    );
    producer.flush();
    let retrying = |process: &mut LakejoinProcess| {
        let address = process.endpoint();
        wait_until("the lookup of customer 7 retries", || {
            broker::http_get(address, "/metrics").is_some_and(|(_, text)| {
                broker::metric(
                    &text,
                    r#"lakejoin_lookup_retries_total{pipeline="orders-enriched",join="0",table="shop.customers"}"#,
                )
                .is_some_and(|n| n > 0.0)
            })
        });
    };

    let mut process = deployment.start();
    retrying(&mut process);
    process.signal("TERM");
    process.wait_for_log("stopping: consumers stop");
    assert_eq!(
        process.wait_exit(Duration::from_secs(2)),
        None,
        "the graceful stop waits for the lookup in hand"
    );
    process.signal("TERM");
    let status = process
        .wait_exit(Duration::from_secs(10))
        .expect("a second SIGTERM exits at once");
    assert_eq!(status.code(), Some(130), "{}", process.log_text());
    assert!(
        process
            .log_text()
            .contains("second signal: exiting at once")
    );

    let mut process = deployment.start_with_env(&[("LAKEJOIN__RUN__SHUTDOWN_TIMEOUT", "1s")]);
    retrying(&mut process);
    process.signal("TERM");
    let status = process
        .wait_exit(Duration::from_secs(20))
        .expect("the shutdown timeout ends the wait");
    assert_eq!(status.code(), Some(2), "{}", process.log_text());
    assert!(
        process
            .log_text()
            .contains("shutdown did not finish within run.shutdown_timeout"),
        "{}",
        process.log_text()
    );

    // Nothing was lost: once customer 7 exists the order comes out enriched.
    producer.send(&customers, "7", &debezium("c", 7, "gus", "se", 10));
    producer.flush();
    let process = deployment.start();
    let mut output = TopicReader::new(&enriched);
    output.read_at_least(1);
    assert_eq!(output.records[0].value["customer_name"], "gus");
    process.terminate();
}
