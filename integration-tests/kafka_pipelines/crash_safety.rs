//! Crash safety: `kill -9` at random moments while changes and facts stream in, restarting
//! each time. A crash must neither lose a change nor apply one twice (the sum-aggregation
//! totals would show either), and may output an order again only when it lay in the
//! replay window after the enrich group's last committed offset; the helpers here track
//! each kill's window and explain missing orders when the test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support;
use crate::support::broker::{
    self, Deployment, TestProducer, TopicReader, tail, unique, wait_until,
};
use crate::support::shop::ShopTopics;
use crate::{Model, order_id, totals_config};

/// `kill -9` at random moments while changes and facts stream in, restarting each time.
/// The sum-aggregation table would count a change applied twice (or lost) in its totals,
/// so pypaimon reading exactly the model proves exactly-once CDC; every order is in the
/// output at least once, and an order is output more than once only when it lay in the
/// replay window of a kill: already output, but at or after the offset the enrich group
/// had committed when the process died. Each restart comes straight after the kill, under
/// the same `group_instance_id`, with librdkafka's default session timeout.
#[test]
fn kill_9_mid_stream_loses_nothing_and_applies_nothing_twice() {
    const CUSTOMERS: i64 = 150;
    const KILLS: usize = 20;
    const STEPS: i64 = 24_000;
    let started = Instant::now();
    let group = unique("crash");
    let enrich_group = format!("{group}-orders-enriched");
    let topics = ShopTopics::create(2, 2);
    let payments = unique("payments");
    broker::create_topics(&[(&payments, 2)]);
    let deployment = Deployment::new(&totals_config(&topics, &payments, &group).build());
    let ShopTopics {
        customers,
        orders,
        enriched,
    } = topics;

    // The model, computed before anything is produced; the producer thread streams it.
    let mut rng = StdRng::seed_from_u64(0x1a4e_7015);
    let model = Model::generate(&mut rng, STEPS, CUSTOMERS, &customers, &payments, &orders);
    // Each run gets its share of the stream, so every run is killed while changes and
    // facts are still coming in.
    let released = Arc::new(AtomicUsize::new(0));
    let (producer_thread, producing) = model.stream_gated(released.clone());
    let chunks_per_run = model.changes.len().div_ceil(100) / (KILLS + 1);

    // Each run is killed at a random moment after it made progress (a table commit), so
    // every kill lands mid-stream: while consuming, writing files, committing or producing.
    let mut output = TopicReader::new(&enriched);
    let markers = TestProducer::new();
    let mut kills = Vec::new();
    let mut commits_before_kill = Vec::new();
    while kills.len() < KILLS {
        released.fetch_add(chunks_per_run, Ordering::SeqCst);
        let before = deployment.snapshot_count("shop.totals");
        let produced_before = output.records.len();
        let mut process = deployment.start();
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
        process.kill_9();
        commits_before_kill.push(deployment.snapshot_count("shop.totals") - before);
        kills.push(after_kill(
            kills.len(),
            &enrich_group,
            &orders,
            &enriched,
            &markers,
            &mut output,
        ));
    }
    assert!(
        producing.load(Ordering::SeqCst),
        "every kill came before the end of the stream"
    );
    released.store(usize::MAX, Ordering::SeqCst);
    producer_thread.join().expect("producer thread");

    let process = deployment.start();
    let expected_customers = model.expected_customers();
    let expected_totals = model.expected_totals();
    deployment.wait_for_table("shop.totals", &expected_totals);
    deployment.wait_for_table("shop.customers", &expected_customers);

    let wanted: BTreeSet<i64> = model.order_ids.iter().copied().collect();
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        output.read_until("every order arrived", |records| {
            let seen: BTreeSet<i64> = records.iter().filter_map(order_id).collect();
            wanted.is_subset(&seen)
        })
    }));
    if let Err(panic) = read {
        let log =
            std::fs::read_to_string(deployment.dir.path().join("lakejoin.log")).unwrap_or_default();
        eprintln!("lakejoin log tail:\n{}", tail(&log, 80));
        let kept = std::env::temp_dir().join(format!("lakejoin-{group}.log"));
        let _ = std::fs::write(&kept, &log);
        eprintln!("the whole lakejoin log: {}", kept.display());
        diagnose_missing_orders(&group, &orders, &wanted, &output.records);
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

    // Every order's position in the input, to place the duplicates against the offsets
    // the enrich group had committed at each kill.
    let mut input = TopicReader::new(&orders);
    input.read_until("every order is read back from the input", |records| {
        records.iter().filter_map(order_id).count() >= wanted.len()
    });
    let position: BTreeMap<i64, (i32, i64)> = input
        .records
        .iter()
        .filter_map(|r| order_id(r).map(|id| (id, (r.partition, r.offset))))
        .collect();
    let records = output.drain(Duration::from_secs(1));
    let mut outputs: BTreeMap<i64, usize> = BTreeMap::new();
    let mut order_records = 0;
    for record in records {
        if record.value.get("marker").is_some() {
            continue;
        }
        let id = order_id(record).unwrap_or_else(|| panic!("not an order: {record:?}"));
        assert!(wanted.contains(&id), "an order nobody sent: {record:?}");
        *outputs.entry(id).or_default() += 1;
        order_records += 1;
    }
    // A fact is output again only by a run that starts below it: at a kill, it had been
    // output, but the committed offset of its partition was not yet past it.
    let windows: Vec<usize> = kills
        .iter()
        .map(|kill| {
            kill.output_before
                .iter()
                .filter(|id| kill.in_window(position[id]))
                .count()
        })
        .collect();
    let mut duplicates = 0;
    for (id, n) in &outputs {
        if *n < 2 {
            continue;
        }
        duplicates += n - 1;
        let at = position[id];
        let replays = kills
            .iter()
            .filter(|kill| kill.output_before.contains(id) && kill.in_window(at))
            .count();
        assert!(
            n - 1 <= replays,
            "order {id} (orders partition {}, offset {}) was output {n} times, but lay in the \
             replay window (output, not yet committed) of only {replays} kill(s); committed \
             offsets at each kill: {:?}",
            at.0,
            at.1,
            kills.iter().map(|k| &k.committed).collect::<Vec<_>>()
        );
    }
    assert!(duplicates <= windows.iter().sum::<usize>());
    eprintln!(
        "crash safety: {} kills, {} restarts, {} orders, {order_records} output records, \
         {duplicates} duplicates (each in the replay window after the last offset commit \
         before a kill; window sizes per kill: {windows:?}); table commits per killed run: \
         {commits_before_kill:?}; {:.0} s",
        kills.len(),
        kills.len(),
        wanted.len(),
        started.elapsed().as_secs_f64()
    );
}

/// What the `kill -9` test knows about one kill.
struct Kill {
    /// The enrich group's committed offset of each orders partition when the process died.
    committed: Vec<Option<i64>>,
    /// Orders output before the kill.
    output_before: BTreeSet<i64>,
}

impl Kill {
    /// Whether the order at `(partition, offset)` of the input is at or after the committed
    /// offset, so the next run consumes it again.
    fn in_window(&self, (partition, offset): (i32, i64)) -> bool {
        let committed = self
            .committed
            .get(partition as usize)
            .copied()
            .flatten()
            .unwrap_or(0);
        offset >= committed
    }
}

/// After kill `k`: marks the end of what the dead process output with a marker record in
/// each output partition and reads up to the markers, and reads the offsets the enrich
/// group had committed.
fn after_kill(
    k: usize,
    enrich_group: &str,
    orders: &str,
    enriched: &str,
    markers: &TestProducer,
    output: &mut TopicReader,
) -> Kill {
    for partition in 0..2 {
        markers.send_to(
            enriched,
            partition,
            "marker",
            &json!({"marker": k}).to_string(),
        );
    }
    markers.flush();
    output.read_until(&format!("the markers after kill {k}"), |records| {
        let marked: BTreeSet<i32> = records
            .iter()
            .filter(|r| r.value.get("marker").and_then(Value::as_u64) == Some(k as u64))
            .map(|r| r.partition)
            .collect();
        marked.len() == 2
    });
    Kill {
        committed: broker::committed_offsets(enrich_group, orders, 2),
        output_before: output.records.iter().filter_map(order_id).collect(),
    }
}

/// Why orders are missing from the output: the broker's watermarks of the orders topic,
/// what a reader gets from it, where the missing orders are, and the enrich group's
/// committed offsets.
fn diagnose_missing_orders(
    group: &str,
    orders: &str,
    wanted: &BTreeSet<i64>,
    output: &[support::broker::Record],
) {
    let seen: BTreeSet<i64> = output
        .iter()
        .filter_map(|r| r.value["order_id"].as_i64())
        .collect();
    let missing: BTreeSet<i64> = wanted.difference(&seen).copied().collect();
    let watermarks = broker::watermarks(orders, 2);
    let enrich_group = format!("{group}-orders-enriched");
    let committed = broker::committed_offsets(&enrich_group, orders, 2);
    eprintln!("{}", broker::describe_group(&enrich_group));
    let mut input = TopicReader::new(orders);
    input.poll_for(Duration::from_secs(10));
    let mut per_partition: BTreeMap<i32, (usize, i64)> = BTreeMap::new();
    let mut missing_at = Vec::new();
    for r in &input.records {
        let e = per_partition.entry(r.partition).or_insert((0, -1));
        e.0 += 1;
        e.1 = e.1.max(r.offset);
        if let Some(id) = r.value["order_id"].as_i64()
            && missing.contains(&id)
        {
            missing_at.push((r.partition, r.offset, id));
        }
    }
    let in_input: BTreeSet<i64> = input
        .records
        .iter()
        .filter_map(|r| r.value["order_id"].as_i64())
        .collect();
    let never_read: Vec<i64> = wanted.difference(&in_input).copied().collect();
    eprintln!(
        "orders topic {orders}: watermarks {watermarks:?}, read back (count, max offset) per \
         partition {per_partition:?}, {} of {} orders readable (unreadable: {:?}…); \
         committed by the enrich group {committed:?}; {} orders missing from the output, \
         at (partition, offset, id) {:?}…",
        in_input.len(),
        wanted.len(),
        never_read.iter().take(10).collect::<Vec<_>>(),
        missing.len(),
        missing_at.iter().take(10).collect::<Vec<_>>(),
    );
}
