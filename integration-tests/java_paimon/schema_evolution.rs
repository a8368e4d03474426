//! Tables whose schema Java evolved (`ALTER TABLE` through the oracle's `alter`): lakejoin
//! reads the files of every schema version in the latest one, looks up the new column,
//! keeps writing a table of its own after Java changed it, and lookup joins already
//! running keep returning the columns they were planned with.
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

/// Each strategy's answer for `id`, decoded (`get` and the pipeline's `get_many` agree).
async fn join_answers(
    joins: &[std::sync::Arc<lakejoin::lookup::LookupTable>],
    id: i32,
) -> Vec<Option<lakejoin::table::datum::Row>> {
    use lakejoin::table::datum::Datum;
    let mut out = Vec::new();
    for join in joins {
        let one = join.get(&[Datum::Int(id)]).await.unwrap();
        let many = join.get_many(&[&[Datum::Int(id)]]).await.unwrap();
        assert_eq!(many, vec![one.clone()], "get and get_many agree on {id}");
        out.push(one.map(|r| r.decode().unwrap()));
    }
    out
}

/// Lookup joins running while Java changes their table, as Flink's or Spark's `ALTER
/// TABLE` would: a column added first, one moved, one widened, one renamed, then a column
/// the join reads dropped. The joins, planned before the changes, keep returning the
/// columns they were planned with (found by field id) from Java's old and new files, in
/// every cache strategy; after the drop their every lookup is an error naming the column,
/// while a join that does not read it follows the table. Positions planned before the move
/// would have returned other columns' values.
#[tokio::test]
async fn running_joins_keep_their_columns_while_java_adds_moves_and_drops_columns() {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use lakejoin::lookup::{
        LookupSpec, LookupTable, PartialOptions, Strategy as Cache, TableLookups,
    };
    use lakejoin::lsm::point_lookup::{LookupOptions, PointLookup};
    use lakejoin::table::datum::Datum;
    use lakejoin::table::{TableIdentifier, Warehouse};

    let spec = keyed_spec("db.joined", &["name:STRING", "n:INT", "city:STRING"], false);
    let mut table = Table::create_with_java(spec);
    table.java_write(&[
        json!({"id": 1, "name": "ann", "n": 10, "city": "Bern"}),
        json!({"id": 2, "name": "bob", "n": 20, "city": "Genf"}),
    ]);
    let warehouse = Warehouse::from_uri(&table.warehouse, &BTreeMap::new()).unwrap();
    let identifier = TableIdentifier::parse(&table.spec.name).unwrap();
    let opened = lakejoin::table::Table::open(&warehouse, &identifier)
        .await
        .unwrap();
    let point = Arc::new(
        PointLookup::open(Arc::new(opened), LookupOptions::default())
            .await
            .unwrap(),
    );
    let partial = PartialOptions {
        max_rows: 1_000,
        max_bytes: None,
        expire_after_write: None,
        expire_after_access: None,
        cache_missing_keys: true,
    };
    // Joined by id, selecting city, name and n.
    let joins: Vec<Arc<LookupTable>> = [Cache::Full, Cache::Partial(partial), Cache::None]
        .into_iter()
        .map(|strategy| {
            let spec = LookupSpec {
                strategy,
                key_columns: vec![0],
                projection: vec![3, 1, 2],
                partition: None,
            };
            Arc::new(LookupTable::new(point.clone(), spec).unwrap())
        })
        .collect();
    // A join selecting only n, which the drop below leaves alone.
    let n_only = Arc::new(
        LookupTable::new(
            point.clone(),
            LookupSpec {
                strategy: Cache::Full,
                key_columns: vec![0],
                projection: vec![2],
                partition: None,
            },
        )
        .unwrap(),
    );
    let lookups = TableLookups::new(point, [&joins[..], std::slice::from_ref(&n_only)].concat());
    lookups.load().await.unwrap();
    let s = |v: &str| Datum::String(v.into());
    assert_eq!(
        join_answers(&joins, 1).await,
        vec![Some(vec![s("Bern"), s("ann"), Datum::Int(10)]); 3]
    );

    for change in [
        vec!["add-column-first", "zip", "STRING"],
        vec!["move-column", "city", "after", "id"],
        vec!["widen-column", "n", "BIGINT"],
        vec!["rename-column", "name", "full_name"],
    ] {
        let args: Vec<String> = change.iter().map(|s| s.to_string()).collect();
        crate::support::expect_success("java alter", table.java("alter", &args, ""));
    }
    table.spec.columns = [
        ("zip", "STRING"),
        ("id", "INT"),
        ("city", "STRING"),
        ("full_name", "STRING"),
        ("n", "BIGINT"),
    ]
    .iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    let schema = table.java_schema();
    assert_eq!(
        schema["columns"],
        json!([
            ["zip", "STRING"],
            ["id", "INT NOT NULL"],
            ["city", "STRING"],
            ["full_name", "STRING"],
            ["n", "BIGINT"]
        ]),
        "{schema}"
    );
    table.java_write(&[
        json!({"zip": "1200", "id": 2, "city": "Zug", "full_name": "bob", "n": 5_000_000_000_i64}),
        json!({"zip": "8000", "id": 3, "city": "Chur", "full_name": "cy", "n": -1}),
    ]);
    assert!(lookups.refresh().await.unwrap(), "the snapshot moved");
    for (id, want) in [
        (1, vec![s("Bern"), s("ann"), Datum::BigInt(10)]),
        (2, vec![s("Zug"), s("bob"), Datum::BigInt(5_000_000_000)]),
        (3, vec![s("Chur"), s("cy"), Datum::BigInt(-1)]),
    ] {
        assert_eq!(
            join_answers(&joins, id).await,
            vec![Some(want); 3],
            "id {id}"
        );
    }

    crate::support::expect_success(
        "java alter",
        table.java("alter", &["drop-column".into(), "city".into()], ""),
    );
    table.spec.columns.retain(|(name, _)| name != "city");
    table.java_write(&[json!({"zip": "9000", "id": 4, "full_name": "dee", "n": 4})]);
    assert!(lookups.refresh().await.unwrap(), "the snapshot moved");
    // Every lookup of the joins reading `city` fails naming it, rows from before the
    // drop included; the join that does not read it sees Java's new row.
    for join in &joins {
        for id in [1, 4] {
            let error = join.get(&[Datum::Int(id)]).await.unwrap_err().to_string();
            assert!(error.contains("`city` (field id 3)"), "{id}: {error}");
        }
    }
    assert_eq!(
        join_answers(&[n_only], 4).await,
        vec![Some(vec![Datum::BigInt(4)])]
    );
}
