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

/// lakejoin evolves its own table (`lakejoin table alter`, the change a CDC pipeline
/// makes on its own): Java and pypaimon read the files of both schemas in the new one,
/// the old rows' new column as null, and Java's schema is lakejoin's `schema-1` (new field
/// id 4 for `zip`, `n` widened in place). Then Java writes into it and lakejoin reads.
#[test]
fn lakejoin_evolves_its_table_and_java_and_pypaimon_read_both_schemas() {
    let spec = keyed_spec(
        "db.lj_evolved",
        &["name:STRING", "n:INT", "old:STRING"],
        false,
    );
    let mut table = Table::create(spec, Creator::Lakejoin);
    table.lj_write(&first_rows(), None);
    let printed = crate::support::expect_success(
        "lakejoin table alter",
        table.lakejoin(
            &["table", "alter"],
            &[
                "--add-column".to_owned(),
                "zip STRING".to_owned(),
                "--widen".to_owned(),
                "n BIGINT".to_owned(),
            ],
            "",
        ),
    );
    let written: Value = serde_json::from_str(printed.trim()).unwrap();
    assert_eq!(written["id"], json!(1), "{written}");
    assert_eq!(written["highestFieldId"], json!(4), "{written}");
    assert_eq!(
        written["fields"].as_array().unwrap().last().unwrap(),
        &json!({"id": 4, "name": "zip", "type": "STRING"})
    );
    table.spec.columns = [
        ("id", "INT"),
        ("name", "STRING"),
        ("n", "BIGINT"),
        ("old", "STRING"),
        ("zip", "STRING"),
    ]
    .iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    let schema = table.java_schema();
    assert_eq!(schema["schema_id"], json!(1), "{schema}");
    assert_eq!(
        schema["columns"],
        json!([
            ["id", "INT NOT NULL"],
            ["name", "STRING"],
            ["n", "BIGINT"],
            ["old", "STRING"],
            ["zip", "STRING"]
        ]),
        "{schema}"
    );
    table.lj_write(
        &[
            json!({"id": 2, "name": "c2 updated", "n": 5_000_000_000_i64, "old": null, "zip": "8000"}),
            json!({"id": 5, "name": "c5", "n": -1, "old": "x", "zip": "1000"}),
        ],
        None,
    );
    let expected: Vec<Value> = [
        json!({"id": 1, "name": "c1", "n": 10, "old": "gone"}),
        json!({"id": 2, "name": "c2 updated", "n": 5_000_000_000_i64, "zip": "8000"}),
        json!({"id": 3, "name": "c3", "n": 30, "old": "gone"}),
        json!({"id": 4, "name": "c4", "n": 40, "old": "gone"}),
        json!({"id": 5, "name": "c5", "n": -1, "old": "x", "zip": "1000"}),
    ]
    .iter()
    .map(|row| full_row(&table.spec, row))
    .collect();
    assert_java_and_lakejoin_read(
        &table,
        "lakejoin's schema-1 over schema-0 files",
        Some(&expected),
    );
    table.assert_both_read("pypaimon reads lakejoin's evolved table", &expected);
    // A refused change writes nothing.
    let refused = table.lakejoin(
        &["table", "alter"],
        &["--widen".to_owned(), "n INT".to_owned()],
        "",
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("only widening is allowed"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(table.java_schema()["schema_id"], json!(1));
    // Java writes in the evolved schema; lakejoin reads it.
    table.java_write(&[
        json!({"id": 6, "name": "c6", "n": 7_000_000_000_i64, "old": null, "zip": "3000"}),
    ]);
    let mut expected = expected;
    expected.push(full_row(
        &table.spec,
        &json!({"id": 6, "name": "c6", "n": 7_000_000_000_i64, "zip": "3000"}),
    ));
    assert_java_and_lakejoin_read(&table, "Java wrote in lakejoin's schema-1", Some(&expected));
}
