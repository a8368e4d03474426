//! Round trips against Java Paimon 1.4.2, the reference implementation (through the oracle
//! of `integration-tests/java`, see `support/java.rs`): every merge engine and option
//! lakejoin supports, written by lakejoin and read by Java (also after either side's full
//! compaction and expiry), and written by Java and scanned and looked up by lakejoin.
//!
//! Why against Java and not only pypaimon: pypaimon 2.1.0 cannot read retractions of
//! aggregation tables, level 0 of first-row tables, nor partial-update tables with sequence
//! groups or delete options; Java reads them all, and its merge functions define the
//! semantics lakejoin implements. Each case's expected rows come from a model (deduplicate,
//! first-row, plain partial-update) or are worked out by hand from Java's merge functions
//! (the comments say how); random aggregation data is checked against Java alone.
//!
//! Needs `java` (17) and, the first time, `mvn` (see `scripts/java-oracle.sh`).

mod support;

#[path = "java_paimon/aggregation.rs"]
mod aggregation;
#[path = "java_paimon/changelog.rs"]
mod changelog;
#[path = "java_paimon/changes.rs"]
mod changes;
#[path = "java_paimon/deletion_vectors.rs"]
mod deletion_vectors;
#[path = "java_paimon/divergences.rs"]
mod divergences;
#[path = "java_paimon/partial_update.rs"]
mod partial_update;
#[path = "java_paimon/schema_evolution.rs"]
mod schema_evolution;
#[path = "java_paimon/types.rs"]
mod types;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use support::java::{
    Case, ROW_KIND, assert_java_and_lakejoin_read, java_writes_lakejoin_reads,
    lakejoin_writes_java_reads,
};
use support::{
    Creator, DedupModel, Table, TableSpec, assert_same_rows, expect_success, full_row, key_of,
    without,
};

/// Partition values, one with characters a partition path must escape.
const PARTITIONS: [&str; 3] = ["a", "b c", "é=x/y"];

/// Partition values for first-row and deletion-vector tables: Java 1.4.2 names the local lookup files of a
/// first-row (lookup) compaction after the raw partition value (`LookupFile.
/// localFilePrefix`), so a `/` in it makes its own writes fail with "No such file or
/// directory" (a Java bug, see the report).
const PARTITIONS_WITHOUT_SLASH: [&str; 3] = ["a", "b c", "é=x"];

/// Random changes over `keys` ids (and every partition, when the spec has `p`): each row
/// gets a kind drawn from `kinds` (weights) and values from `values`.
fn random_commits(
    seed: u64,
    spec: &TableSpec,
    commits: usize,
    rows_per_commit: usize,
    keys: i32,
    kinds: &[(&str, u32)],
    values: impl Fn(&mut StdRng, &str, &mut Map<String, Value>),
) -> Vec<Vec<Value>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let total: u32 = kinds.iter().map(|(_, w)| w).sum();
    let partitioned = !spec.partition_by.is_empty();
    (0..commits)
        .map(|_| {
            (0..rows_per_commit)
                .map(|_| {
                    let mut pick = rng.random_range(0..total);
                    let kind = kinds
                        .iter()
                        .find(|(_, w)| {
                            let hit = pick < *w;
                            pick = pick.saturating_sub(*w);
                            hit
                        })
                        .map_or("+I", |(k, _)| *k);
                    let mut row = Map::new();
                    row.insert(ROW_KIND.into(), json!(kind));
                    row.insert("id".into(), json!(rng.random_range(0..keys)));
                    if partitioned {
                        let values = if uses_lookup_files(spec) {
                            PARTITIONS_WITHOUT_SLASH
                        } else {
                            PARTITIONS
                        };
                        let p = values[rng.random_range(0..values.len())];
                        row.insert("p".into(), json!(p));
                    }
                    values(&mut rng, kind, &mut row);
                    Value::Object(row)
                })
                .collect()
        })
        .collect()
}

/// Whether Java's writer compacts the table through local lookup files (first-row and
/// deletion-vector tables), whose names a `/` in a partition value breaks.
fn uses_lookup_files(spec: &TableSpec) -> bool {
    spec.merge_engine.as_deref() == Some("first-row")
        || spec
            .options
            .iter()
            .any(|(k, v)| k == "deletion-vectors.enabled" && v == "true")
}

/// A value drawn by `value` with probability `p`, else JSON null.
fn maybe(rng: &mut StdRng, p: f64, value: impl FnOnce(&mut StdRng) -> Value) -> Value {
    if rng.random_bool(p) {
        value(rng)
    } else {
        Value::Null
    }
}

fn keyed_spec(name: &str, columns: &[&str], partitioned: bool) -> TableSpec {
    let mut all = vec!["id:INT"];
    if partitioned {
        all.push("p:STRING");
        let spec = TableSpec::new(name, &[all, columns.to_vec()].concat(), &["p", "id"], 3);
        spec.partition_by(&["p"])
    } else {
        TableSpec::new(name, &[all, columns.to_vec()].concat(), &["id"], 3)
    }
}

fn kind_of(row: &Value) -> &str {
    row.get(ROW_KIND).and_then(Value::as_str).unwrap_or("+I")
}

/// A row of change `kind` (+I, -U, +U, -D).
fn row(kind: &str, values: Value) -> Value {
    let mut row = values;
    row[ROW_KIND] = json!(kind);
    row
}

/// Java sees the columns, keys and options of a table lakejoin creates.
#[test]
fn schema_of_a_lakejoin_table_reads_the_same_in_java() {
    let spec = keyed_spec(
        "db.schema",
        &[
            "total:BIGINT",
            "price:DECIMAL(10,2)",
            "at:TIMESTAMP(3)",
            "tags:VARCHAR(20) NOT NULL",
        ],
        true,
    )
    .merge_engine("aggregation")
    .sequence_field(&["at"])
    .option("fields.total.aggregate-function", "sum")
    .option("fields.tags.aggregate-function", "listagg");
    let table = Table::create(spec, Creator::Lakejoin);
    let schema = table.java_schema();
    let columns = json!([
        ["id", "INT NOT NULL"],
        ["p", "STRING NOT NULL"],
        ["total", "BIGINT"],
        ["price", "DECIMAL(10, 2)"],
        ["at", "TIMESTAMP(3)"],
        ["tags", "VARCHAR(20) NOT NULL"],
    ]);
    assert_eq!(schema["columns"], columns, "{schema}");
    assert_eq!(schema["primary_keys"], json!(["p", "id"]), "{schema}");
    assert_eq!(schema["partition_keys"], json!(["p"]), "{schema}");
    let options = json!({
        "bucket": "3", "fields.tags.aggregate-function": "listagg",
        "fields.total.aggregate-function": "sum", "merge-engine": "aggregation",
        "sequence.field": "at",
    });
    assert_eq!(schema["options"], options, "{schema}");
}

/// A table lakejoin creates has no comment in Java (lakejoin wrote `"comment": null`, as
/// pypaimon does, which Java's `SchemaSerializer` read as the text "null"; fixed).
#[test]
fn lakejoin_table_has_no_comment_in_java() {
    let spec = TableSpec::new("db.no_comment", &["id:INT", "v:STRING"], &["id"], 1);
    let table = Table::create(spec, Creator::Lakejoin);
    let schema = table.java_schema();
    assert_eq!(schema.get("comment"), None, "Java's schema: {schema}");
}

/// Column comments that Java wrote survive lakejoin's schema changes: lakejoin wrote
/// every schema it evolved without them.
#[test]
fn column_comments_survive_a_lakejoin_schema_change() {
    let spec = TableSpec::new("db.comments", &["id:INT", "v:STRING", "n:INT"], &["id"], 1)
        .column_comment("id", "customer id")
        .column_comment("n", "visits, \"so far\"");
    let table = Table::create_with_java(spec);
    let args: Vec<String> = ["--add-column", "city STRING", "--widen", "n BIGINT"]
        .map(String::from)
        .to_vec();
    expect_success(
        "lakejoin table alter",
        table.lakejoin(&["table", "alter"], &args, ""),
    );
    let schema = table.java_schema();
    assert_eq!(schema["schema_id"], json!(1), "{schema}");
    let columns = json!([
        ["id", "INT NOT NULL", "customer id"],
        ["v", "STRING"],
        ["n", "BIGINT", "visits, \"so far\""],
        ["city", "STRING"],
    ]);
    assert_eq!(schema["columns"], columns, "{schema}");
}

// ---------------------------------------------------------------------------------------
// deduplicate and first-row: models

fn dedup_case(partitioned: bool) -> Case {
    let spec = keyed_spec("db.dedup", &["v:STRING", "n:BIGINT"], partitioned);
    let kinds = [("+I", 5), ("+U", 2), ("-U", 1), ("-D", 2)];
    let commits = random_commits(0xDED0, &spec, 5, 40, 15, &kinds, |rng, _, row| {
        let text = ["x", "", "ünï", "long value "].map(|s| json!(s));
        let v = text[rng.random_range(0..text.len())].clone();
        row.insert("v".into(), maybe(rng, 0.8, |_| v));
        let n = json!(rng.random_range(i64::MIN / 2..i64::MAX / 2));
        row.insert("n".into(), maybe(rng, 0.8, |_| n));
    });
    let mut model = DedupModel::default();
    for row in commits.iter().flatten() {
        model.apply(&spec, kind_of(row), &without(row, ROW_KIND));
    }
    Case {
        expected: Some(model.rows()),
        spec,
        commits,
    }
}

/// The first added version of a key wins; `first-row.ignore-delete` drops retractions.
fn first_row_case(partitioned: bool) -> Case {
    let spec = keyed_spec("db.first_row", &["v:STRING", "n:INT"], partitioned)
        .merge_engine("first-row")
        .option("first-row.ignore-delete", "true");
    let kinds = [("+I", 5), ("+U", 2), ("-U", 1), ("-D", 2)];
    let commits = random_commits(0xF125, &spec, 4, 30, 20, &kinds, |rng, _, row| {
        row.insert(
            "v".into(),
            maybe(rng, 0.7, |rng| {
                json!(format!("v{}", rng.random_range(0..99)))
            }),
        );
        row.insert("n".into(), json!(rng.random_range(-5..5)));
    });
    let mut first = BTreeMap::new();
    for row in commits.iter().flatten() {
        if matches!(kind_of(row), "+I" | "+U") {
            first
                .entry(key_of(row, &spec.primary_key))
                .or_insert_with(|| full_row(&spec, &without(row, ROW_KIND)));
        }
    }
    Case {
        expected: Some(first.into_values().collect()),
        spec,
        commits,
    }
}

#[test]
fn deduplicate_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(dedup_case(false));
}

#[test]
fn deduplicate_partitioned_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(dedup_case(true));
}

#[test]
fn deduplicate_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(dedup_case(false));
}

#[test]
fn deduplicate_partitioned_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(dedup_case(true));
}

#[test]
fn first_row_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(first_row_case(false));
}

#[test]
fn first_row_partitioned_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(first_row_case(true));
}

#[test]
fn first_row_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(first_row_case(false));
}

#[test]
fn first_row_partitioned_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(first_row_case(true));
}

/// lakejoin's compaction moves a file whose keys overlap no other file up a level without
/// rewriting it, as Java's does: a DELETE and an ADD of the same file. Java reads the
/// table after the move; Java's expiry, which reads a delta's entries in order and keeps
/// a file that a later ADD names again, keeps the moved files; then Java's compaction and
/// lakejoin's expiry follow. pypaimon reads the moved files too.
#[test]
fn files_lakejoin_moves_up_a_level_survive_java_expiry_and_compaction() {
    // A 1-byte target makes every file "large" (at least 70% of it); a trigger above the
    // commits made so that the one compaction is the explicit one (a write-only table
    // would refuse Java's).
    let spec = TableSpec::new("db.moved", &["id:INT", "name:STRING"], &["id"], 1)
        .option("target-file-size", "1")
        .option("num-sorted-run.compaction-trigger", "10");
    let table = Table::create(spec, Creator::Lakejoin);
    let named = |ids: std::ops::Range<i32>, name: &str| -> Vec<Value> {
        ids.map(|id| json!({"id": id, "name": format!("{name}{id}")}))
            .collect()
    };
    let mut expected: BTreeMap<i32, Value> = BTreeMap::new();
    let write = |expected: &mut BTreeMap<i32, Value>, rows: Vec<Value>| {
        table.lj_write(&rows, None);
        for row in rows {
            let id = row["id"].as_i64().and_then(|id| i32::try_from(id).ok());
            expected.insert(id.expect("an INT id"), row);
        }
    };
    // Four files of growing keys, then one whose keys touch the second and third.
    for first in [0, 100, 200, 300] {
        write(&mut expected, named(first..first + 100, "n"));
    }
    write(
        &mut expected,
        vec![
            json!({"id": 150, "name": "late"}),
            json!({"id": 250, "name": "late"}),
        ],
    );
    let output = table.lakejoin(&["table", "compact"], &["--full".to_owned()], "");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    expect_success("lakejoin table compact --full", output);
    assert!(
        stderr.contains("3 file(s) rewritten into") && stderr.contains("2 moved up a level"),
        "lakejoin's compaction: {stderr}"
    );
    let rows: Vec<Value> = expected.values().cloned().collect();
    assert_java_and_lakejoin_read(&table, "after lakejoin moved two files up", Some(&rows));
    assert_same_rows(
        "pypaimon after lakejoin moved two files up",
        &rows,
        &table.py_read(None, None),
        &table.spec.primary_key,
    );

    write(&mut expected, named(400..410, "n"));
    let rows: Vec<Value> = expected.values().cloned().collect();
    let snapshots = table.java_snapshots().len();
    assert_eq!(table.java_expire(1) as usize, snapshots - 1);
    assert_java_and_lakejoin_read(&table, "after Java expired the move", Some(&rows));
    table.java_compact(true);
    assert_java_and_lakejoin_read(&table, "after Java's full compaction", Some(&rows));
    table.lj_expire(1);
    assert_java_and_lakejoin_read(&table, "after lakejoin's expiry", Some(&rows));
}
