//! Tables whose schema Java evolved (`ALTER TABLE` through the oracle's `alter`): lakejoin
//! reads the files of every schema version in the latest one, looks up the new column,
//! and keeps writing a table of its own after Java changed it.
//!
//! Why: a user adds a column with Flink or Spark SQL to a table lakejoin maintains or looks
//! up. Paimon never rewrites old files for that; each data file keeps the schema id it was
//! written with, and readers map its columns by field id: an added column reads as null, a
//! widened one is cast, a renamed one keeps its values, a dropped one disappears.

use serde_json::{Value, json};

use crate::keyed_spec;
use crate::support::java::assert_java_and_lakejoin_read;
use crate::support::{Creator, Table, full_row};

/// The changes, in order: add `zip`, widen `n` to BIGINT, rename `name` to `full_name`,
/// drop `old`.
fn evolve(table: &mut Table) {
    for change in [
        vec!["add-column", "zip", "STRING"],
        vec!["widen-column", "n", "BIGINT"],
        vec!["rename-column", "name", "full_name"],
        vec!["drop-column", "old"],
    ] {
        let args: Vec<String> = change.iter().map(|s| s.to_string()).collect();
        crate::support::expect_success("java alter", table.java("alter", &args, ""));
    }
    table.spec.columns = [
        ("id", "INT"),
        ("full_name", "STRING"),
        ("n", "BIGINT"),
        ("zip", "STRING"),
    ]
    .iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    let schema = table.java_schema();
    assert_eq!(
        schema["columns"],
        json!([
            ["id", "INT NOT NULL"],
            ["full_name", "STRING"],
            ["n", "BIGINT"],
            ["zip", "STRING"]
        ]),
        "{schema}"
    );
    assert_eq!(schema["schema_id"], json!(4), "{schema}");
}

/// Rows before the change, in the first schema.
fn first_rows() -> Vec<Value> {
    (1..=4)
        .map(|id| json!({"id": id, "name": format!("c{id}"), "n": id * 10, "old": "gone"}))
        .collect()
}

/// Rows after the change: an update of 2 that sets the new column and a value only BIGINT
/// holds, a new key 5, a delete of 3.
fn second_rows() -> Vec<Value> {
    vec![
        json!({"id": 2, "full_name": "c2 updated", "n": 5_000_000_000_i64, "zip": "8000"}),
        json!({"id": 5, "full_name": "c5", "n": -1, "zip": "1000"}),
        json!({"id": 3, "_rowkind": "-D"}),
    ]
}

/// What every reader must see after both commits.
fn expected(table: &Table) -> Vec<Value> {
    [
        json!({"id": 1, "full_name": "c1", "n": 10}),
        json!({"id": 2, "full_name": "c2 updated", "n": 5_000_000_000_i64, "zip": "8000"}),
        json!({"id": 4, "full_name": "c4", "n": 40}),
        json!({"id": 5, "full_name": "c5", "n": -1, "zip": "1000"}),
    ]
    .iter()
    .map(|row| full_row(&table.spec, row))
    .collect()
}

fn assert_lookups(table: &Table) {
    for row in expected(table) {
        let key = json!({"id": row["id"]});
        assert_eq!(
            table.lj_get(&key),
            Some(row.clone()),
            "lakejoin table get {key}"
        );
    }
    assert_eq!(table.lj_get(&json!({"id": 3})), None, "3 was deleted");
}

#[test]
fn java_evolves_its_table_lakejoin_reads_every_schema_and_looks_up_the_new_column() {
    let spec = keyed_spec("db.evolved", &["name:STRING", "n:INT", "old:STRING"], false);
    let mut table = Table::create_with_java(spec);
    table.java_write(&first_rows());
    evolve(&mut table);
    table.java_write(&second_rows());
    let expected = expected(&table);
    assert_java_and_lakejoin_read(&table, "old and new files", Some(&expected));
    assert_lookups(&table);
    // After Java's full compaction every file is in the new schema.
    table.java_compact(true);
    assert_java_and_lakejoin_read(&table, "after Java's compaction", Some(&expected));
    assert_lookups(&table);
}

#[test]
fn java_evolves_a_lakejoin_table_and_lakejoin_keeps_writing_it() {
    let spec = keyed_spec("db.evolved", &["name:STRING", "n:INT", "old:STRING"], false);
    let mut table = Table::create(spec, Creator::Lakejoin);
    table.lj_write(&first_rows(), None);
    evolve(&mut table);
    table.lj_write(&second_rows(), Some("_rowkind"));
    let expected = expected(&table);
    assert_java_and_lakejoin_read(&table, "lakejoin wrote across the change", Some(&expected));
    assert_lookups(&table);
    // lakejoin's compaction rewrites the old files in the new schema; Java reads them.
    table.lj_compact_full();
    assert_java_and_lakejoin_read(&table, "after lakejoin's compaction", Some(&expected));
    assert_lookups(&table);
}
