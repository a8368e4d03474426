//! Tables written by lakejoin read by pypaimon and the other way round.
//!
//! Every test drives the real `lakejoin` binary and pypaimon 2.1.0 (through
//! `integration-tests/py/oracle.py`) on the same table directory and checks both readers
//! against each other and against an in-test model. The tests T1–T8 port the round-trip
//! checks of the early format study; docs/format.md §13 lists them.
//!
//! One test binary, its tests grouped by what they exercise: `deduplicate` (T1, T2,
//! value filters, `sequence.field`), `partial_update` (T3, per-commit folding),
//! `mixed_writers` (T4–T6: each implementation writing the other's tables),
//! `buckets` (T7, dynamic buckets), `compaction` (T8), `merge_engines` (aggregation,
//! first-row), `every_type` (every column type both ways) and `snapshots` (time travel,
//! listings, bad input committing nothing). This file holds what they share: random rows
//! and changes, the deduplicate model's feed, row filters, and the check of a full
//! compaction's result.

#[path = "../support/mod.rs"]
mod support;

mod buckets;
mod compaction;
mod deduplicate;
mod every_type;
mod merge_engines;
mod mixed_writers;
mod partial_update;
mod snapshots;

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use support::{DedupModel, Table, TableSpec, without};

/// Long (> 7 bytes, stored out of line in BinaryRow) and short (inline) key strings.
const KEY_STRINGS: [&str; 5] = [
    "a-much-longer-key-string",
    "another-rather-long-key",
    "short",
    "k",
    "ünïcödé-key-€",
];

fn random_text(rng: &mut StdRng) -> Value {
    if rng.random_bool(0.15) {
        return Value::Null;
    }
    let words = [
        "alpha",
        "beta",
        "gamma",
        "δέλτα",
        "",
        "a somewhat longer value text",
    ];
    json!(format!(
        "{}-{}",
        words.choose(rng).expect("non-empty"),
        rng.random_range(0..1000)
    ))
}

/// A double with an exact short decimal form.
fn random_double(rng: &mut StdRng) -> Value {
    if rng.random_bool(0.15) {
        return Value::Null;
    }
    json!(f64::from(rng.random_range(-8000..8000)) / 8.0)
}

/// Random change for a deduplicate table: +I/+U for a live key mostly, -D sometimes
/// (also for keys that do not exist), and -U/+U pairs.
fn random_dedup_changes(
    rng: &mut StdRng,
    spec: &TableSpec,
    count: usize,
    make_row: &mut dyn FnMut(&mut StdRng) -> Value,
) -> Vec<Value> {
    let mut rows = Vec::new();
    while rows.len() < count {
        let row = make_row(rng);
        let roll = rng.random_range(0..100);
        if roll < 55 {
            rows.push(with_kind(&row, "+I"));
        } else if roll < 75 {
            rows.push(with_kind(&row, "+U"));
        } else if roll < 90 {
            rows.push(with_kind(&row, "-D"));
        } else {
            // An update as CDC sends it: the before image, then the after image.
            rows.push(with_kind(&row, "-U"));
            let mut after = make_row(rng);
            for key in &spec.primary_key {
                after[key] = row[key].clone();
            }
            rows.push(with_kind(&after, "+U"));
        }
    }
    rows
}

fn with_kind(row: &Value, kind: &str) -> Value {
    let mut row = row.clone();
    row["op"] = json!(kind);
    row
}

fn apply_dedup(model: &mut DedupModel, spec: &TableSpec, rows: &[Value], keep_op: bool) {
    for row in rows {
        let kind = row["op"].as_str().expect("op");
        if keep_op {
            model.apply(spec, kind, row);
        } else {
            model.apply(spec, kind, &without(row, "op"));
        }
    }
}

fn filter_rows(rows: &[Value], column: &str, value: &Value) -> Vec<Value> {
    rows.iter()
        .filter(|row| &row[column] == value)
        .cloned()
        .collect()
}

/// After a full compaction (snapshot `id`): a COMPACT snapshot, and every live file a
/// level-5 compaction output with consistent metadata.
fn assert_compacted(context: &str, table: &Table, id: u64) {
    let lakejoin_view = table.lj_snapshots();
    let pypaimon_view = table.py_snapshots();
    assert_eq!(
        pypaimon_view.len() as u64,
        id,
        "{context}: the compaction adds one snapshot: {pypaimon_view:?}"
    );
    let last = &pypaimon_view[id as usize - 1];
    assert_eq!(last["commitKind"], json!("COMPACT"), "{context}: {last}");
    assert_eq!(
        lakejoin_view.last().map(|s| &s["commitKind"]),
        Some(&json!("COMPACT")),
        "{context}: lakejoin table snapshots: {lakejoin_view:?}"
    );
    table.check_latest_commit_files(context, 5, 1);
    let live = table.py_files(None);
    assert!(
        live.iter().all(|f| f["level"] == json!(5)),
        "{context}: after a full compaction only level-5 files are live: {live:?}"
    );
    let mut buckets: Vec<String> = live
        .iter()
        .map(|f| format!("{}/{}", f["partition"], f["bucket"]))
        .collect();
    let count = buckets.len();
    buckets.dedup();
    assert_eq!(
        buckets.len(),
        count,
        "{context}: one output file per bucket (small data): {live:?}"
    );
}
