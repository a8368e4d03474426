//! The throughput benchmark's own logic, tested with the suite: the check every output
//! record of a case must pass, the history column read back from BENCHMARKS.md, the
//! CPU readings of a case's process and of its librdkafka threads, the arithmetic of a
//! comparison of two lakejoins, and the instruction count read from callgrind.
//!
//! Why here: the benchmark (benches/throughput/) has no test harness of its own (it is a
//! `harness = false` binary that runs the whole benchmark), so its unit tests would never
//! run. Its pure modules are compiled into this test crate instead.

// The data module serves the benchmark's other cases too.
#![allow(dead_code)]

#[path = "../benches/throughput/callgrind.rs"]
mod callgrind;
#[path = "../benches/throughput/check.rs"]
mod check;
#[path = "../benches/throughput/cpu.rs"]
mod cpu;
#[path = "../benches/throughput/data.rs"]
mod data;
#[path = "../benches/throughput/previous.rs"]
mod previous;
#[path = "../benches/throughput/ratios.rs"]
mod ratios;

use serde_json::{Map, Value};

use check::{Joins, OutputCheck, expected_joined};
use previous::Previous;

const CUSTOMER_OF: [u64; 3] = [3, data::UNKNOWN_BASE + 3, 3];
const ONE: Joins<'static> = Joins {
    count: 1,
    customers: 10,
    customer_of: &CUSTOMER_OF,
};

fn enriched(order: u64, customer: u64, joins: Joins<'_>) -> Vec<u8> {
    let mut record: Map<String, Value> =
        serde_json::from_str(&data::order(order, customer).1).unwrap();
    record.extend(expected_joined(customer, joins).0);
    serde_json::to_vec(&record).unwrap()
}

#[test]
fn correct_records_pass_and_count_their_matches() {
    let mut check = OutputCheck::default();
    assert!(check.record(&enriched(1, 3, ONE), ONE));
    assert!(!check.record(&enriched(2, data::UNKNOWN_BASE + 3, ONE), ONE));
    assert_eq!((check.matched, check.wrong), (1, 0));
    check.verdict().unwrap();
}

#[test]
fn a_wrong_row_a_missing_field_or_a_duplicate_fails() {
    let mut check = OutputCheck::default();
    // Customer 4's columns on an order of customer 3.
    let mut wrong: Map<String, Value> = serde_json::from_slice(&enriched(1, 3, ONE)).unwrap();
    wrong.extend(expected_joined(4, ONE).0);
    check.record(&serde_json::to_vec(&wrong).unwrap(), ONE);
    let mut missing: Map<String, Value> = serde_json::from_slice(&enriched(2, 3, ONE)).unwrap();
    missing.remove("sku");
    check.record(&serde_json::to_vec(&missing).unwrap(), ONE);
    check.record(&enriched(3, 3, ONE), ONE);
    check.record(&enriched(3, 3, ONE), ONE);
    // The right enrichment of the wrong customer.
    check.record(&enriched(3, 5, ONE), ONE);
    assert_eq!(check.wrong, 4, "{:?}", check.examples);
    assert!(check.verdict().is_err());
}

#[test]
fn the_previous_run_is_read_from_its_results_table() {
    let old = "- date: 2026-12-01 22:42 UTC\n- commit: 40db59a979e9\n\n\
        | case | records | records/s | × passthrough | CPU-s per M records | broker |\n\
        | --- | ---: | ---: | ---: | ---: | ---: |\n\
        | lakejoin full 1 join | 300000 | 58,151 | 0.41 | 9.27 | 5.47 |\n\
        | lakejoin CDC ingest | | FAILED: stalled | | | |\n\n\
        | lakejoin full 1 join | 1 | 2 | 3 | 4 | 5 |\n";
    let previous = Previous::parse(old);
    assert_eq!(previous.of("lakejoin full 1 join"), "0.41, 9.27");
    assert_eq!(previous.of("lakejoin CDC ingest"), "failed");
    assert_eq!(previous.of("redis 1 join"), "");
    assert_eq!(
        previous.heading(),
        "previous run (40db59a979e9, 2026-12-01): ×, CPU-s/M"
    );
}

#[test]
fn the_passthrough_expects_the_orders_unchanged() {
    let none = Joins { count: 0, ..ONE };
    let mut check = OutputCheck::default();
    let order = data::order(1, 3).1.into_bytes();
    assert!(check.record(&order, none));
    assert!(!check.record(&enriched(3, 3, ONE), none));
    assert_eq!(check.wrong, 1, "{:?}", check.examples);
}

/// A stat line's command name may hold spaces and parentheses; the times after it are
/// read in clock ticks.
#[test]
fn a_stat_line_gives_its_name_and_cpu_seconds() {
    let ticks: f64 = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    let stat = "4242 (producer pollin) S 1 2 3 0 -1 4194368 10 0 0 0 250 50 0 0 20 0 1 0";
    let (name, seconds) = cpu::parse_stat(stat).unwrap();
    assert_eq!(name, "producer pollin");
    assert!((seconds - 300.0 / ticks).abs() < 1e-9, "{seconds}");
    let odd = "7 (a (b) c) R 1 2 3 0 -1 0 0 0 0 0 7 3 0 0";
    assert_eq!(cpu::parse_stat(odd).unwrap().0, "a (b) c");
    assert!(cpu::parse_stat("7 no name 1 2").is_err());
    assert!(cpu::parse_stat("7 (x) R 1").is_err(), "too few fields");
    assert!(cpu::is_client_thread("rdk:broker1"));
    assert!(cpu::is_client_thread("rdk:main"));
    assert!(!cpu::is_client_thread("tokio-rt-worker"));
}

/// A live librdkafka client's threads are found among this process's threads, and a
/// meter reports them under their own label beside the whole process.
#[test]
fn a_clients_threads_are_found_and_metered() {
    use rdkafka::producer::{BaseProducer, Producer as _};
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        // Nothing listens there: the client still starts its threads.
        .set("bootstrap.servers", "127.0.0.1:9")
        .create()
        .unwrap();
    let pid = std::process::id();
    let threads = cpu::client_threads(pid).unwrap();
    assert!(
        threads.len() >= 2,
        "rdk:main and a broker thread expected, found {threads:?}"
    );
    let meter = cpu::CpuMeter::start(&[("case", pid)])
        .unwrap()
        .with_client_threads("client", pid)
        .unwrap();
    producer.flush(std::time::Duration::from_millis(10)).ok();
    let used = meter.stop().unwrap();
    let (whole, client) = (used.of("case").unwrap(), used.of("client").unwrap());
    // Each thread's time is read in whole ticks: a few ticks of slack.
    assert!((0.0..=whole + 0.1).contains(&client), "{client} of {whole}");
}

#[test]
fn a_comparison_pairs_rounds_and_takes_the_median_ratio() {
    use ratios::{Figures, case_summary, median, paired_ratios};
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[3.0]), Some(3.0));
    assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(median(&[f64::NAN, 2.0]), Some(2.0));
    // A round counts only when both variants have the figure and A's is not zero.
    assert_eq!(
        paired_ratios(
            &[Some(2.0), None, Some(4.0), Some(0.0)],
            &[Some(1.0), Some(9.0), Some(5.0), Some(1.0)]
        ),
        vec![0.5, 1.25]
    );
    let run = |rate: f64, cpu: f64| Figures {
        rate,
        cpu_per_million: Some(cpu),
        peak_rss_mib: None,
        instructions_per_record: None,
    };
    // Round by round B is 10% cheaper while the machine slows down by half: pairing
    // finds the 10% that comparing the variants' own medians would blur.
    let a = [run(100.0, 2.0), run(80.0, 3.0), run(50.0, 4.0)];
    let b = [run(110.0, 1.8), run(88.0, 2.7), run(55.0, 3.6)];
    let summary = case_summary("lakejoin full 1 join", &a, &b);
    assert!(summary.contains("## lakejoin full 1 join"), "{summary}");
    assert!(
        summary.contains("| 2 | 80 | 88 | 3.00 | 2.70 | ? | ? | ? | ? |"),
        "{summary}"
    );
    assert!(
        summary
            .contains("- CPU-s per M records: B/A median 0.900 over 3 rounds (range 0.900–0.900)"),
        "{summary}"
    );
    assert!(
        summary.contains("- records/s: B/A median 1.100 over 3 rounds"),
        "{summary}"
    );
    assert!(summary.contains("- peak RSS: not measured"), "{summary}");
    assert!(
        summary.contains("- instructions per record: not measured"),
        "{summary}"
    );
    assert!(!summary.contains("B − A"), "{summary}");
}

/// Counted instructions: the total read from callgrind's file, and a comparison that
/// gives the median saving per record as well as the ratio.
#[test]
fn a_comparison_of_counted_instructions_gives_what_b_saves_per_record() {
    use callgrind::total_instructions;
    use ratios::{Figures, case_summary, paired_differences};
    let file = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfn=(1) main\n16 3\n\nsummary: 127517\n\n\ntotals: 127517\n";
    assert_eq!(total_instructions(file), Some(127_517));
    assert_eq!(total_instructions("summary: 42\n"), Some(42));
    assert_eq!(total_instructions("events: Ir\n"), None);
    assert_eq!(total_instructions("totals: many\n"), None);
    assert_eq!(
        paired_differences(
            &[Some(10.0), None, Some(7.0)],
            &[Some(8.0), Some(1.0), Some(7.5)]
        ),
        vec![-2.0, 0.5]
    );
    let run = |instructions: f64| Figures {
        rate: 5_000.0,
        cpu_per_million: None,
        peak_rss_mib: None,
        instructions_per_record: Some(instructions),
    };
    let a = [run(25_000.0), run(25_200.0)];
    let b = [run(24_000.0), run(24_400.0)];
    let summary = case_summary("lakejoin full 1 join", &a, &b);
    assert!(
        summary.contains("| 1 | 5000 | 5000 | ? | ? | ? | ? | 25000 | 24000 |"),
        "{summary}"
    );
    assert!(
        summary.contains("- instructions per record: B/A median 0.964 over 2 rounds"),
        "{summary}"
    );
    assert!(
        summary.contains("- instructions per record, B − A: median -900 over 2 rounds"),
        "{summary}"
    );
}
