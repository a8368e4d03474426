//! Merge engines against pypaimon 2.1.0, through the `lakejoin` binary and
//! `integration-tests/py/engines_oracle.py`:
//! - an aggregation table created and written by lakejoin over several commits reads the
//!   same with pypaimon as with `lakejoin table scan`, and the other way round (pypaimon
//!   writes, lakejoin scans);
//! - first-row tables likewise, after `lakejoin table compact --full`: pypaimon's batch
//!   read skips the level-0 files of first-row tables, so only compacted data is visible
//!   to it.
//!
//! pypaimon 2.1.0 merges aggregation tables without retractions, so the data here has
//! none (retractions are covered by the unit and property tests).
//!
//! Needs the Python environment of `scripts/test.sh`: `LAKEJOIN_PYTHON`, else
//! `<crate>/.venv/bin/python`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

const SEED: u64 = 0x5EED_E461_0001;

fn python() -> PathBuf {
    let python = std::env::var_os("LAKEJOIN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    assert!(
        python.exists(),
        "no Python interpreter at {}: run scripts/test.sh (it prepares <crate>/.venv with \
         pypaimon 2.1.0) or set LAKEJOIN_PYTHON to a Python with pypaimon 2.1.0",
        python.display()
    );
    python
}

/// Runs `program args`, feeding `stdin`; returns stdout, failing the test on a bad exit.
fn run(program: &Path, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{} {args:?} failed: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn lakejoin(args: &[&str], stdin: &str) -> String {
    run(Path::new(env!("CARGO_BIN_EXE_lakejoin")), args, stdin)
}

fn oracle(args: &[&str], stdin: &str) -> String {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("integration-tests/py/engines_oracle.py");
    let mut full = vec![script.to_str().unwrap()];
    full.extend_from_slice(args);
    run(&python(), &full, stdin)
}

fn pypaimon_rows(warehouse: &str, table: &str) -> Vec<Value> {
    let out = oracle(&["read", warehouse, table], "");
    serde_json::from_str(&out).expect("the oracle prints a JSON list")
}

fn lakejoin_rows(warehouse: &str, table: &str) -> Vec<Value> {
    lakejoin(
        &["table", "scan", "--warehouse", warehouse, "--table", table],
        "",
    )
    .lines()
    .map(|l| serde_json::from_str(l).expect("scan prints JSON lines"))
    .collect()
}

/// A column of the cross-check tables and how to draw its values.
struct Column {
    name: &'static str,
    ty: &'static str,
    values: fn(&mut StdRng) -> Value,
}

fn int(rng: &mut StdRng) -> Value {
    json!(rng.random_range(-50..50))
}

fn string(rng: &mut StdRng) -> Value {
    // Blank strings are skipped by listagg; they must be skipped on both sides.
    json!(*["a", "b", "c", "dd", " ", ""].choose(rng).unwrap())
}

// Skewed so that bool_and and bool_or results vary between keys.
fn mostly_true(rng: &mut StdRng) -> Value {
    json!(rng.random_bool(0.93))
}

fn mostly_false(rng: &mut StdRng) -> Value {
    json!(rng.random_bool(0.07))
}

fn decimal(rng: &mut StdRng) -> Value {
    let cents: i64 = rng.random_range(-10_000..10_000);
    json!(format!(
        "{}{}.{:02}",
        if cents < 0 { "-" } else { "" },
        cents.abs() / 100,
        cents.abs() % 100
    ))
}

fn factor(rng: &mut StdRng) -> Value {
    // Exact binary fractions: both sides multiply the same doubles in the same order.
    json!(*[0.5, 1.0, 1.5, 2.0, -1.0].choose(rng).unwrap())
}

/// `commits` commits of `per_commit` rows over keys 0..keys; every value is null with
/// probability 0.2.
fn random_commits(
    rng: &mut StdRng,
    columns: &[Column],
    commits: usize,
    per_commit: usize,
    keys: i32,
) -> Vec<Vec<Map<String, Value>>> {
    (0..commits)
        .map(|_| {
            (0..per_commit)
                .map(|_| {
                    let mut row = Map::new();
                    row.insert("k".into(), json!(rng.random_range(0..keys)));
                    for c in columns {
                        if rng.random_bool(0.8) {
                            row.insert(c.name.into(), (c.values)(rng));
                        } else {
                            row.insert(c.name.into(), Value::Null);
                        }
                    }
                    row
                })
                .collect()
        })
        .collect()
}

fn create_args<'a>(
    warehouse: &'a str,
    table: &'a str,
    columns: &[Column],
    engine: &'a str,
    options: &'a [String],
) -> Vec<String> {
    let mut args: Vec<String> = [
        "table",
        "create",
        "--warehouse",
        warehouse,
        "--table",
        table,
        "--column",
        "k:INT",
        "--primary-key",
        "k",
        "--buckets",
        "2",
        "--merge-engine",
        engine,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for c in columns {
        args.push("--column".into());
        args.push(format!("{}:{}", c.name, c.ty));
    }
    for o in options {
        args.push("--option".into());
        args.push(o.clone());
    }
    args
}

fn write_with_lakejoin(warehouse: &str, table: &str, commits: &[Vec<Map<String, Value>>]) {
    for commit in commits {
        let lines: String = commit
            .iter()
            .map(|r| format!("{}\n", Value::Object(r.clone())))
            .collect();
        lakejoin(
            &["table", "write", "--warehouse", warehouse, "--table", table],
            &lines,
        );
    }
}

fn write_with_pypaimon(
    warehouse: &str,
    table: &str,
    columns: &[Column],
    options: &BTreeMap<&str, &str>,
    commits: &[Vec<Map<String, Value>>],
) {
    let mut cols = vec![json!(["k", "INT"])];
    cols.extend(columns.iter().map(|c| json!([c.name, c.ty])));
    let spec = json!({
        "columns": cols,
        "primary_keys": ["k"],
        "options": options,
        "commits": commits,
    });
    oracle(&["write", warehouse, table], &spec.to_string());
}

/// Sum of `column` per key over all commits (null when every value was null).
fn expected_sums(commits: &[Vec<Map<String, Value>>], column: &str) -> BTreeMap<i64, Value> {
    let mut sums: BTreeMap<i64, Option<i64>> = BTreeMap::new();
    for row in commits.iter().flatten() {
        let key = row["k"].as_i64().unwrap();
        let entry = sums.entry(key).or_default();
        if let Some(v) = row[column].as_i64() {
            *entry = Some(entry.unwrap_or(0) + v);
        }
    }
    sums.into_iter().map(|(k, v)| (k, json!(v))).collect()
}

fn by_key(rows: &[Value], column: &str) -> BTreeMap<i64, Value> {
    rows.iter()
        .map(|r| (r["k"].as_i64().unwrap(), r[column].clone()))
        .collect()
}

fn aggregation_columns() -> Vec<Column> {
    vec![
        Column {
            name: "total",
            ty: "BIGINT",
            values: int,
        },
        Column {
            name: "amount",
            ty: "DECIMAL(12,2)",
            values: decimal,
        },
        Column {
            name: "factor",
            ty: "DOUBLE",
            values: factor,
        },
        Column {
            name: "lo",
            ty: "INT",
            values: int,
        },
        Column {
            name: "hi",
            ty: "STRING",
            values: string,
        },
        Column {
            name: "tags",
            ty: "STRING",
            values: string,
        },
        Column {
            name: "all_ok",
            ty: "BOOLEAN",
            values: mostly_true,
        },
        Column {
            name: "any_ok",
            ty: "BOOLEAN",
            values: mostly_false,
        },
        Column {
            name: "first",
            ty: "INT",
            values: int,
        },
        Column {
            name: "first_nn",
            ty: "INT",
            values: int,
        },
        Column {
            name: "last",
            ty: "STRING",
            values: string,
        },
        Column {
            name: "note",
            ty: "STRING",
            values: string,
        },
    ]
}

const AGGREGATION_OPTIONS: [(&str, &str); 12] = [
    ("fields.total.aggregate-function", "sum"),
    ("fields.amount.aggregate-function", "sum"),
    ("fields.factor.aggregate-function", "product"),
    ("fields.lo.aggregate-function", "min"),
    ("fields.hi.aggregate-function", "max"),
    ("fields.tags.aggregate-function", "listagg"),
    ("fields.tags.list-agg-delimiter", ";"),
    ("fields.all_ok.aggregate-function", "bool_and"),
    ("fields.any_ok.aggregate-function", "bool_or"),
    ("fields.first.aggregate-function", "first_value"),
    ("fields.first_nn.aggregate-function", "first_non_null_value"),
    ("fields.last.aggregate-function", "last_value"),
];

#[test]
fn aggregation_written_by_lakejoin_reads_the_same_in_pypaimon() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().to_str().unwrap();
    let columns = aggregation_columns();
    // `note` follows the engine default, last_non_null_value.
    let options: Vec<String> = AGGREGATION_OPTIONS
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let args = create_args(warehouse, "db.agg", &columns, "aggregation", &options);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lakejoin(&args, "");
    let mut rng = StdRng::seed_from_u64(SEED);
    let commits = random_commits(&mut rng, &columns, 4, 40, 9);
    write_with_lakejoin(warehouse, "db.agg", &commits);

    let ours = lakejoin_rows(warehouse, "db.agg");
    assert_eq!(by_key(&ours, "total"), expected_sums(&commits, "total"));
    assert_eq!(pypaimon_rows(warehouse, "db.agg"), ours);
}

#[test]
fn aggregation_written_by_pypaimon_reads_the_same_in_lakejoin() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().to_str().unwrap();
    let mut columns = aggregation_columns();
    columns.push(Column {
        name: "ts",
        ty: "BIGINT",
        values: int,
    });
    let mut options: BTreeMap<&str, &str> = AGGREGATION_OPTIONS.into_iter().collect();
    options.insert("bucket", "2");
    options.insert("merge-engine", "aggregation");
    // Versions ordered by `ts` (which keeps its last value); `note` takes the table default.
    options.insert("sequence.field", "ts");
    options.insert("fields.default-aggregate-function", "first_value");
    let mut rng = StdRng::seed_from_u64(SEED + 1);
    let commits = random_commits(&mut rng, &columns, 4, 40, 9);
    write_with_pypaimon(warehouse, "db.agg", &columns, &options, &commits);

    let theirs = pypaimon_rows(warehouse, "db.agg");
    assert_eq!(by_key(&theirs, "total"), expected_sums(&commits, "total"));
    assert_eq!(lakejoin_rows(warehouse, "db.agg"), theirs);
}

fn first_row_columns() -> Vec<Column> {
    vec![
        Column {
            name: "v",
            ty: "INT",
            values: int,
        },
        Column {
            name: "s",
            ty: "STRING",
            values: string,
        },
    ]
}

/// The first row of each key in write order.
fn expected_first_rows(commits: &[Vec<Map<String, Value>>]) -> Vec<Value> {
    let mut first: BTreeMap<i64, Value> = BTreeMap::new();
    for row in commits.iter().flatten() {
        first
            .entry(row["k"].as_i64().unwrap())
            .or_insert_with(|| Value::Object(row.clone()));
    }
    first.into_values().collect()
}

#[test]
fn first_row_written_by_lakejoin_reads_the_same_in_pypaimon_after_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().to_str().unwrap();
    let columns = first_row_columns();
    let args = create_args(warehouse, "db.first", &columns, "first-row", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lakejoin(&args, "");
    let mut rng = StdRng::seed_from_u64(SEED + 2);
    let commits = random_commits(&mut rng, &columns, 3, 20, 12);
    write_with_lakejoin(warehouse, "db.first", &commits);
    let compact = [
        "table",
        "compact",
        "--warehouse",
        warehouse,
        "--table",
        "db.first",
        "--full",
    ];
    lakejoin(&compact, "");

    let ours = lakejoin_rows(warehouse, "db.first");
    assert_eq!(ours, expected_first_rows(&commits));
    assert_eq!(pypaimon_rows(warehouse, "db.first"), ours);
}

#[test]
fn first_row_written_by_pypaimon_reads_the_same_after_lakejoin_compacts_it() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().to_str().unwrap();
    let columns = first_row_columns();
    let options = BTreeMap::from([("bucket", "2"), ("merge-engine", "first-row")]);
    let mut rng = StdRng::seed_from_u64(SEED + 3);
    let commits = random_commits(&mut rng, &columns, 3, 20, 12);
    write_with_pypaimon(warehouse, "db.first", &columns, &options, &commits);
    // Only level-0 files so far: pypaimon's batch read shows nothing yet.
    assert_eq!(pypaimon_rows(warehouse, "db.first"), Vec::<Value>::new());
    let compact = [
        "table",
        "compact",
        "--warehouse",
        warehouse,
        "--table",
        "db.first",
        "--full",
    ];
    lakejoin(&compact, "");

    let theirs = pypaimon_rows(warehouse, "db.first");
    assert_eq!(theirs, expected_first_rows(&commits));
    assert_eq!(lakejoin_rows(warehouse, "db.first"), theirs);
}
