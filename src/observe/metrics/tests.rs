//! Tests of `observe::metrics`: the Prometheus exposition, histograms and readiness.

use super::*;

#[test]
fn histograms_count_into_fixed_buckets() {
    let h = Histogram::default();
    h.observe(Duration::from_micros(50)); // ≤ 0.0001
    h.observe(Duration::from_micros(100)); // ≤ 0.0001 (bounds are inclusive)
    h.observe(Duration::from_millis(3)); // ≤ 0.005
    h.observe(Duration::from_secs(60)); // +Inf
    let s = h.snapshot();
    assert_eq!(s.cumulative.len(), LATENCY_BUCKETS.len() + 1);
    assert_eq!(s.cumulative[0], 2);
    assert_eq!(s.cumulative[4], 2, "≤ 0.0025");
    assert_eq!(s.cumulative[5], 3, "≤ 0.005");
    assert_eq!(s.cumulative[LATENCY_BUCKETS.len() - 1], 3, "≤ 10");
    assert_eq!(s.count(), 4);
    assert!((s.sum_seconds - 60.00315).abs() < 1e-9, "{}", s.sum_seconds);
}

#[test]
fn histograms_take_concurrent_observations_without_losing_any() {
    let h = Arc::new(Histogram::default());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                for i in 0..10_000u64 {
                    h.observe(Duration::from_micros((i * (t + 1)) % 20_000));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(h.snapshot().count(), 40_000);
}

fn registry() -> Registry {
    let registry = Registry::default();
    let cdc = Arc::new(PipelineMetrics::default());
    PipelineMetrics::add(&cdc.records_in, 7);
    PipelineMetrics::add(&cdc.commits, 2);
    cdc.snapshot_id.store(12, Ordering::Relaxed);
    cdc.commit_latency.observe(Duration::from_millis(40));
    cdc.assigned.store(true, Ordering::Relaxed);
    cdc.set_lag(vec![
        PartitionLag {
            topic: "customers".into(),
            partition: 0,
            lag: 3,
        },
        PartitionLag {
            topic: "customers".into(),
            partition: 1,
            lag: 0,
        },
    ]);
    registry.register(
        "customers-cdc",
        PipelineKind::Cdc,
        Some("shop.customers"),
        cdc,
    );
    let join = JoinMetrics::new("shop.customers").with_cache_rows(|| 42);
    join.record(1, 0, Duration::from_micros(200));
    join.record(0, 1, Duration::from_millis(2));
    let enrich = Arc::new(PipelineMetrics::with_joins(vec![join]));
    PipelineMetrics::add(&enrich.records_in, 5);
    PipelineMetrics::add(&enrich.fact_batches, 2);
    PipelineMetrics::add(&enrich.records_out, 4);
    registry.register("orders \"enriched\"", PipelineKind::Enrich, None, enrich);
    registry
}

#[test]
fn the_exposition_has_every_family_once_with_help_type_and_labelled_samples() {
    let text = registry().render();
    let lines: Vec<&str> = text.lines().collect();
    assert!(text.ends_with('\n'));
    for expected in [
        "# TYPE lakejoin_records_consumed_total counter",
        "lakejoin_records_consumed_total{pipeline=\"customers-cdc\",kind=\"cdc\"} 7",
        "lakejoin_records_consumed_total{pipeline=\"orders \\\"enriched\\\"\",kind=\"enrich\"} 5",
        "lakejoin_records_produced_total{pipeline=\"orders \\\"enriched\\\"\",kind=\"enrich\"} 4",
        "lakejoin_fact_batches_total{pipeline=\"orders \\\"enriched\\\"\",kind=\"enrich\"} 2",
        "lakejoin_commits_total{pipeline=\"customers-cdc\",kind=\"cdc\"} 2",
        "lakejoin_table_snapshot_id{pipeline=\"customers-cdc\",table=\"shop.customers\"} 12",
        "# TYPE lakejoin_commit_duration_seconds histogram",
        "lakejoin_commit_duration_seconds_bucket{pipeline=\"customers-cdc\",le=\"0.025\"} 0",
        "lakejoin_commit_duration_seconds_bucket{pipeline=\"customers-cdc\",le=\"0.05\"} 1",
        "lakejoin_commit_duration_seconds_bucket{pipeline=\"customers-cdc\",le=\"+Inf\"} 1",
        "lakejoin_commit_duration_seconds_sum{pipeline=\"customers-cdc\"} 0.04",
        "lakejoin_commit_duration_seconds_count{pipeline=\"customers-cdc\"} 1",
        "lakejoin_lookup_hits_total{pipeline=\"orders \\\"enriched\\\"\",join=\"0\",table=\"shop.customers\"} 1",
        "lakejoin_lookup_misses_total{pipeline=\"orders \\\"enriched\\\"\",join=\"0\",table=\"shop.customers\"} 1",
        "lakejoin_lookup_duration_seconds_bucket{pipeline=\"orders \\\"enriched\\\"\",join=\"0\",table=\"shop.customers\",le=\"0.00025\"} 1",
        "lakejoin_lookup_duration_seconds_count{pipeline=\"orders \\\"enriched\\\"\",join=\"0\",table=\"shop.customers\"} 2",
        "lakejoin_lookup_cache_rows{pipeline=\"orders \\\"enriched\\\"\",join=\"0\",table=\"shop.customers\"} 42",
        "lakejoin_consumer_lag{pipeline=\"customers-cdc\",topic=\"customers\",partition=\"0\"} 3",
        "lakejoin_consumer_assigned{pipeline=\"orders \\\"enriched\\\"\"} 0",
        "lakejoin_ready 0",
    ] {
        assert!(lines.contains(&expected), "missing {expected:?} in\n{text}");
    }
    // CDC-only families have no enrich samples and vice versa.
    assert!(!text.contains("lakejoin_commits_total{pipeline=\"orders"));
    assert!(!text.contains("lakejoin_records_produced_total{pipeline=\"customers-cdc\""));
    assert!(!text.contains("lakejoin_fact_batches_total{pipeline=\"customers-cdc\""));
    // Every family: HELP then TYPE, once, and its samples right after (contiguous).
    let mut seen = std::collections::HashSet::new();
    let mut current = String::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(seen.insert(name.to_string()), "{name} twice");
            assert!(lines[i + 1].starts_with(&format!("# TYPE {name} ")));
            current = name.to_string();
        } else if !line.starts_with('#') {
            let sample = line.split(['{', ' ']).next().unwrap();
            let family = sample
                .strip_suffix("_bucket")
                .or_else(|| sample.strip_suffix("_sum"))
                .or_else(|| sample.strip_suffix("_count"))
                .filter(|f| *f == current)
                .unwrap_or(sample);
            assert_eq!(family, current, "{line} outside its family");
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}: value {value}");
        }
    }
    // Buckets are cumulative and end with +Inf = count.
    let buckets: Vec<u64> = lines
        .iter()
        .filter(|l| l.starts_with("lakejoin_lookup_duration_seconds_bucket"))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(buckets.len(), LATENCY_BUCKETS.len() + 1);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    assert_eq!(*buckets.last().unwrap(), 2);
}

#[test]
fn readiness_waits_for_start_assignment_and_caches_and_ends_at_shutdown() {
    let registry = registry();
    let reasons = registry.readiness().unwrap_err();
    assert_eq!(reasons, vec!["starting: opening tables and pipelines"]);
    registry.set_started();
    let reasons = registry.readiness().unwrap_err();
    assert_eq!(
        reasons,
        vec!["pipeline orders \"enriched\": no Kafka partitions assigned yet"]
    );
    let pipelines = registry.pipelines();
    let enrich = &pipelines[1].metrics;
    enrich.assigned.store(true, Ordering::Relaxed);
    enrich.joins[0].cache_loaded.store(false, Ordering::Relaxed);
    let reasons = registry.readiness().unwrap_err();
    assert!(reasons[0].contains("join[0] (shop.customers): cache still loading"));
    enrich.joins[0].cache_loaded.store(true, Ordering::Relaxed);
    assert_eq!(registry.readiness(), Ok(()));
    assert!(registry.render().lines().any(|l| l == "lakejoin_ready 1"));
    registry.set_stopping();
    assert_eq!(registry.readiness().unwrap_err(), vec!["shutting down"]);
}

/// More instances than partitions: a member its group gave no partition is ready, as
/// Kafka Streams reports such a member running; a stopped pipeline is not, whatever
/// else holds.
#[test]
fn a_member_without_partitions_is_ready_and_a_stopped_pipeline_is_not() {
    let registry = registry();
    registry.set_started();
    let pipelines = registry.pipelines();
    pipelines[0].metrics.assigned.store(true, Ordering::Relaxed);
    let enrich = &pipelines[1].metrics;
    assert!(registry.readiness().is_err());
    enrich.joined.store(true, Ordering::Relaxed);
    assert_eq!(registry.readiness(), Ok(()));
    enrich.set_stopped("kafka: producing to out: Broker: Topic authorization failed".into());
    assert_eq!(
        registry.readiness().unwrap_err(),
        vec![
            "pipeline orders \"enriched\" stopped: kafka: producing to out: Broker: Topic \
             authorization failed"
        ]
    );
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

#[test]
fn a_failing_table_makes_the_process_unready_until_it_commits_again() {
    let registry = Registry::default();
    let metrics = Arc::new(PipelineMetrics::default());
    metrics.assigned.store(true, Ordering::Relaxed);
    registry.register(
        "c",
        PipelineKind::Cdc,
        Some("shop.customers"),
        metrics.clone(),
    );
    registry.set_started();
    assert!(registry.readiness().is_ok());
    metrics.set_table_fault(Some("commits failing: No space left on device".into()));
    PipelineMetrics::add(&metrics.commit_failures, 2);
    let reasons = registry.readiness().unwrap_err();
    assert_eq!(
        reasons,
        vec!["pipeline c: table shop.customers: commits failing: No space left on device"]
    );
    assert!(
        registry
            .render()
            .lines()
            .any(|l| l == "lakejoin_commit_failures_total{pipeline=\"c\",kind=\"cdc\"} 2")
    );
    metrics.set_table_fault(None);
    assert!(registry.readiness().is_ok());
}

#[test]
fn a_changelog_pipeline_reports_changes_out_its_snapshot_and_its_lag() {
    let registry = Registry::default();
    let m = Arc::new(PipelineMetrics::default());
    PipelineMetrics::add(&m.records_out, 5);
    m.snapshot_id.store(9, Ordering::Relaxed);
    m.snapshot_lag.store(2, Ordering::Relaxed);
    m.joined.store(true, Ordering::Relaxed);
    registry.register("wide-out", PipelineKind::Changelog, Some("shop.w"), m);
    registry.set_started();
    let text = registry.render();
    for line in [
        "lakejoin_records_produced_total{pipeline=\"wide-out\",kind=\"changelog\"} 5",
        "lakejoin_table_snapshot_id{pipeline=\"wide-out\",table=\"shop.w\"} 9",
        "lakejoin_changelog_lag_snapshots{pipeline=\"wide-out\",table=\"shop.w\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    }
    assert_eq!(registry.readiness(), Ok(()));
}

/// A poll batch's facts counted at once read exactly as the same facts counted one by one.
#[test]
fn many_observations_at_once_equal_one_at_a_time() {
    let (one_by_one, at_once) = (Histogram::default(), Histogram::default());
    for elapsed in [Duration::from_micros(300), Duration::from_secs(20)] {
        for _ in 0..5 {
            one_by_one.observe(elapsed);
        }
        at_once.observe_many(5, elapsed);
    }
    at_once.observe_many(0, Duration::from_millis(1));
    assert_eq!(one_by_one.snapshot(), at_once.snapshot());
    assert_eq!(at_once.snapshot().count(), 10);
}
