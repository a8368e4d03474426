//! The merge engines besides deduplicate and partial-update: aggregation with the
//! functions both implementations support, against a model of Paimon's folding rules, and
//! first-row, whose level-0 files pypaimon skips in batch reads so lakejoin's writer must
//! compact them up after every commit.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::assert_compacted;
use crate::support::{Creator, Table, TableSpec, full_row};

/// (column, type, aggregate function) of the aggregation test table.
const AGGREGATES: [(&str, &str, &str); 12] = [
    ("s_big", "BIGINT", "sum"),
    ("s_dbl", "DOUBLE", "sum"),
    ("s_dec", "DECIMAL(12,2)", "sum"),
    ("prod", "BIGINT", "product"),
    ("mx", "INT", "max"),
    ("mn", "STRING", "min"),
    ("lv", "STRING", "last_value"),
    ("lnn", "STRING", "last_non_null_value"),
    ("fv", "STRING", "first_value"),
    ("fnn", "STRING", "first_non_null_value"),
    ("la", "STRING", "listagg"),
    ("band", "BOOLEAN", "bool_and"),
];

fn aggregation_spec(name: &str) -> TableSpec {
    let mut columns = vec!["k:INT".to_owned()];
    columns.extend(AGGREGATES.iter().map(|(c, t, _)| format!("{c}:{t}")));
    columns.push("bor:BOOLEAN".to_owned());
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut spec = TableSpec::new(name, &columns, &["k"], 2).merge_engine("aggregation");
    for (column, _, function) in AGGREGATES {
        spec = spec.option(&format!("fields.{column}.aggregate-function"), function);
    }
    spec.option("fields.bor.aggregate-function", "bool_or")
}

/// Folds rows of one key in arrival order with the aggregate functions (Paimon's rules:
/// nulls are ignored except by last_value/first_value; listagg skips blank strings).
fn aggregate_model(spec: &TableSpec, rows: &[Value]) -> Vec<Value> {
    let mut by_key: std::collections::BTreeMap<i64, Value> = std::collections::BTreeMap::new();
    let mut functions: Vec<(&str, &str)> = AGGREGATES.iter().map(|(c, _, f)| (*c, *f)).collect();
    functions.push(("bor", "bool_or"));
    for row in rows {
        let key = row["k"].as_i64().expect("k");
        let Some(acc) = by_key.get_mut(&key) else {
            by_key.insert(key, full_row(spec, row));
            continue;
        };
        for (column, function) in &functions {
            let input = row.get(*column).cloned().unwrap_or(Value::Null);
            let current = acc[*column].clone();
            let merged = match (*function, &current, &input) {
                ("last_value", _, _) => input.clone(),
                ("first_value", _, _) => current.clone(),
                (_, _, Value::Null) => current.clone(),
                (_, Value::Null, _) => input.clone(),
                ("sum", Value::String(a), Value::String(b)) => {
                    json!(cents_to_decimal(decimal_to_cents(a) + decimal_to_cents(b)))
                }
                ("sum", a, b) if a.is_i64() => json!(a.as_i64().unwrap() + b.as_i64().unwrap()),
                ("sum", a, b) => json!(a.as_f64().unwrap() + b.as_f64().unwrap()),
                ("product", a, b) => json!(a.as_i64().unwrap() * b.as_i64().unwrap()),
                ("max", a, b) => json!(a.as_i64().unwrap().max(b.as_i64().unwrap())),
                ("min", Value::String(a), Value::String(b)) => json!(a.min(b)),
                ("last_non_null_value", _, _) => input.clone(),
                ("first_non_null_value", _, _) => current.clone(),
                ("listagg", Value::String(a), Value::String(b)) => {
                    if b.trim().is_empty() {
                        current.clone()
                    } else if a.trim().is_empty() {
                        input.clone()
                    } else {
                        json!(format!("{a},{b}"))
                    }
                }
                ("bool_and", a, b) => json!(a.as_bool().unwrap() && b.as_bool().unwrap()),
                ("bool_or", a, b) => json!(a.as_bool().unwrap() || b.as_bool().unwrap()),
                other => panic!("model: unexpected {other:?}"),
            };
            acc[*column] = merged;
        }
    }
    by_key.into_values().collect()
}

fn decimal_to_cents(text: &str) -> i64 {
    let negative = text.starts_with('-');
    let (whole, fraction) = text.trim_start_matches('-').split_once('.').expect("d.dd");
    let cents =
        whole.parse::<i64>().expect("whole") * 100 + fraction.parse::<i64>().expect("cents");
    if negative { -cents } else { cents }
}

fn cents_to_decimal(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", cents.abs() / 100, cents.abs() % 100)
}

fn random_aggregate_rows(rng: &mut StdRng, count: usize) -> Vec<Value> {
    let words = ["pear", "apple", "fig", "plum", "kiwi"];
    let mut rows = Vec::new();
    for _ in 0..count {
        let mut word = || json!(*words.choose(rng).expect("non-empty"));
        let mut row = json!({
            "mn": word(),
            "lv": word(),
            "lnn": word(),
            "fv": word(),
            "fnn": word(),
            "la": word(),
        });
        row["k"] = json!(rng.random_range(0..5));
        row["s_big"] = json!(rng.random_range(-1000..1000));
        row["s_dbl"] = json!(f64::from(rng.random_range(-64..64)) / 4.0);
        row["s_dec"] = json!(cents_to_decimal(rng.random_range(-10_000..10_000)));
        row["prod"] = json!(rng.random_range(-3..4));
        row["mx"] = json!(rng.random_range(-100..100));
        row["band"] = json!(rng.random_bool(0.8));
        row["bor"] = json!(rng.random_bool(0.2));
        let columns: Vec<&str> = AGGREGATES
            .iter()
            .map(|(c, _, _)| *c)
            .chain(["bor"])
            .collect();
        for column in columns {
            if rng.random_bool(0.2) {
                row[column] = Value::Null;
            }
        }
        rows.push(row);
    }
    rows
}

/// Aggregation engine with the functions both implementations support, written by either
/// side over several commits (folded per commit, then across commits), read by both, and
/// compacted by lakejoin.
#[test]
fn aggregation_engine_both_writers() {
    let spec = aggregation_spec("db.agg");
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    let mut rng = StdRng::seed_from_u64(9);
    let mut all_rows = Vec::new();
    for commit in 1..=4 {
        let rows = random_aggregate_rows(&mut rng, 12);
        if commit % 2 == 1 {
            table.lj_write(&rows, None);
            table.check_latest_commit_files(&format!("aggregation commit {commit}"), 0, 0);
        } else {
            table.py_write(&rows);
        }
        all_rows.extend(rows);
        table.assert_both_read(
            &format!("aggregation after commit {commit}"),
            &aggregate_model(&spec, &all_rows),
        );
    }
    table.lj_compact_full();
    assert_compacted("aggregation", &table, 5);
    table.assert_both_read(
        "aggregation after compaction",
        &aggregate_model(&spec, &all_rows),
    );
    let rows = random_aggregate_rows(&mut rng, 12);
    table.py_write(&rows);
    all_rows.extend(rows);
    table.assert_both_read(
        "aggregation after pypaimon's append on the compacted table",
        &aggregate_model(&spec, &all_rows),
    );
}

/// first-row keeps the first version of a key. pypaimon (like Java) skips level-0 files of
/// first-row tables in batch reads, so lakejoin's writer compacts level 0 up after every
/// commit: pypaimon sees the rows at once, and still after a full compaction.
#[test]
fn first_row_engine_visible_to_pypaimon_after_compaction() {
    let spec =
        TableSpec::new("db.first", &["id:INT", "v:STRING"], &["id"], 2).merge_engine("first-row");
    let table = Table::create(spec.clone(), Creator::Lakejoin);
    table.lj_write(
        &[
            json!({"id": 1, "v": "first"}),
            json!({"id": 1, "v": "second in the same commit"}),
            json!({"id": 2, "v": "first"}),
        ],
        None,
    );
    table.lj_write(
        &[
            json!({"id": 2, "v": "later"}),
            json!({"id": 3, "v": "first"}),
        ],
        None,
    );
    let expected = vec![
        json!({"id": 1, "v": "first"}),
        json!({"id": 2, "v": "first"}),
        json!({"id": 3, "v": "first"}),
    ];
    table.assert_both_read("first-row, level 0 compacted up by the writer", &expected);
    table.lj_compact_full();
    table.assert_both_read("first-row after a full compaction", &expected);
}
