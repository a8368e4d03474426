//! Running joins across another writer's schema change: a column added before the others,
//! one moved, one renamed, one widened (what Flink's or Spark's `ALTER TABLE` writes).
//! Every cache strategy keeps returning the columns the join was planned with, found by
//! field id, for rows of the old files and of the new; a dropped column the join reads is
//! an error naming it, never another column's values.
//!
//! The new schema files are written here as Java Paimon writes them (fields reordered,
//! ids kept, `highestFieldId` raised); `integration-tests/java_paimon/schema_evolution.rs`
//! has Java itself make the change.

use std::collections::BTreeMap;
use std::sync::Arc;

use lakejoin::lookup::{LookupSpec, LookupTable, PartialOptions, Strategy as Cache, TableLookups};
use lakejoin::lsm::point_lookup::{LookupOptions, PointLookup};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::{Datum, Row};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::types::{DataType, MAX_LENGTH};
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::{ObjectStoreExt, PutPayload};

fn first_schema() -> TableSchema {
    TableSchema::new(
        vec![
            ("id".into(), DataType::Int, false),
            ("name".into(), DataType::Varchar(MAX_LENGTH), true),
            ("n".into(), DataType::Int, true),
            ("city".into(), DataType::Varchar(MAX_LENGTH), true),
        ],
        vec![],
        vec!["id".into()],
        BTreeMap::from([("bucket".to_string(), "2".to_string())]),
    )
    .unwrap()
}

/// Publishes `schema` as the table's next version, as another writer would.
async fn publish(table: &Table, schema: &TableSchema) -> Table {
    let location = table.path_of(&format!("schema/schema-{}", schema.id));
    table
        .store()
        .put(&location, PutPayload::from(schema.to_json().into_bytes()))
        .await
        .unwrap();
    table.at_newest_schema().await.unwrap()
}

async fn write(table: Arc<Table>, rows: Vec<Row>) {
    let mut writer = TableWriter::new(table, "other-writer").await.unwrap();
    for row in rows {
        writer.write(RowKind::Insert, row).unwrap();
    }
    writer.commit(BTreeMap::new()).await.unwrap();
}

fn s(v: &str) -> Datum {
    Datum::String(v.into())
}

/// Each strategy's answer for `id`, decoded.
async fn answers(joins: &[Arc<LookupTable>], id: i32) -> Vec<Option<Row>> {
    let mut out = Vec::new();
    for join in joins {
        let one = join.get(&[Datum::Int(id)]).await.unwrap();
        let many = join.get_many(&[&[Datum::Int(id)]]).await.unwrap();
        assert_eq!(many, vec![one.clone()], "get and get_many agree on {id}");
        out.push(one.map(|r| r.decode().unwrap()));
    }
    out
}

#[tokio::test]
async fn joins_keep_their_columns_when_another_writer_adds_moves_renames_and_widens() {
    let warehouse = Warehouse::in_memory();
    let table = Arc::new(
        Table::create(
            &warehouse,
            &TableIdentifier::parse("db.customers").unwrap(),
            first_schema(),
        )
        .await
        .unwrap(),
    );
    write(
        table.clone(),
        vec![
            vec![Datum::Int(1), s("ann"), Datum::Int(10), s("Bern")],
            vec![Datum::Int(2), s("bob"), Datum::Int(20), s("Genf")],
        ],
    )
    .await;
    let point = Arc::new(
        PointLookup::open(table.clone(), LookupOptions::default())
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
    // The join selects city, name, n (out of table order) by id.
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
    // Joins on the same table that select only name, listed first and last: they go on
    // after the drop below, whichever order the refresh applies the joins in.
    let name_only = |strategy| {
        let spec = LookupSpec {
            strategy,
            key_columns: vec![0],
            projection: vec![1],
            partition: None,
        };
        Arc::new(LookupTable::new(point.clone(), spec).unwrap())
    };
    let others = vec![name_only(Cache::Full), name_only(Cache::Full)];
    let every: Vec<Arc<LookupTable>> = [&others[..1], &joins[..], &others[1..]].concat();
    let lookups = TableLookups::new(point, every);
    lookups.load().await.unwrap();
    let ann = vec![s("Bern"), s("ann"), Datum::Int(10)];
    assert_eq!(answers(&joins, 1).await, vec![Some(ann); 3]);

    // ALTER TABLE: `zip` added first, `n` widened to BIGINT and moved before `name`,
    // `city` renamed `town`. Field ids stay; only `zip` gets a new one.
    let mut second = first_schema();
    let [id, name, n, city] = <[_; 4]>::try_from(second.fields.clone()).unwrap();
    let mut zip = city.clone();
    (zip.id, zip.name) = (4, "zip".into());
    let mut n = n;
    n.data_type = DataType::BigInt;
    let mut town = city;
    town.name = "town".into();
    second.fields = vec![zip, id, n, name, town];
    (second.id, second.highest_field_id) = (1, 4);
    let evolved = publish(&table, &second).await;
    assert_eq!(evolved.schema().id, 1);
    // A new file in the new layout: 2 updated (a value only BIGINT holds), 3 inserted.
    write(
        Arc::new(evolved),
        vec![
            vec![
                s("1200"),
                Datum::Int(2),
                Datum::BigInt(5_000_000_000),
                s("bob"),
                s("Zug"),
            ],
            vec![
                s("8000"),
                Datum::Int(3),
                Datum::BigInt(-1),
                s("cy"),
                s("Chur"),
            ],
        ],
    )
    .await;
    assert!(lookups.refresh().await.unwrap(), "the snapshot moved");
    // Each strategy returns the planned columns: town (was city), name, n (now BIGINT),
    // for a row of the old files and rows of the new one.
    let ann = vec![s("Bern"), s("ann"), Datum::BigInt(10)];
    let bob = vec![s("Zug"), s("bob"), Datum::BigInt(5_000_000_000)];
    let cy = vec![s("Chur"), s("cy"), Datum::BigInt(-1)];
    assert_eq!(answers(&joins, 1).await, vec![Some(ann); 3]);
    assert_eq!(answers(&joins, 2).await, vec![Some(bob); 3]);
    assert_eq!(answers(&joins, 3).await, vec![Some(cy); 3]);

    // ALTER TABLE DROP COLUMN town: the three joins read it, so from that schema on every
    // lookup of theirs is an error naming it (not the rows before the drop, nor other
    // columns); the joins that do not read it follow the table as before.
    let mut third = second.clone();
    third.fields.retain(|f| f.name != "town");
    third.id = 2;
    let dropped = publish(&table, &third).await;
    write(
        Arc::new(dropped),
        vec![vec![s("9000"), Datum::Int(4), Datum::BigInt(4), s("dee")]],
    )
    .await;
    assert!(lookups.refresh().await.unwrap(), "the snapshot moved");
    for (join, strategy) in joins.iter().zip(["full", "partial", "none"]) {
        for id in [1, 4] {
            let error = join.get(&[Datum::Int(id)]).await.unwrap_err().to_string();
            assert!(
                error.contains("dropped") && error.contains("`city` (field id 3)"),
                "{strategy} {id}: {error}"
            );
            let error = join.get_many(&[&[Datum::Int(id)]]).await.unwrap_err();
            assert!(error.to_string().contains("`city`"), "{strategy} {id}");
        }
    }
    for other in &others {
        assert_eq!(
            answers(std::slice::from_ref(other), 4).await,
            vec![Some(vec![s("dee")])]
        );
        assert_eq!(
            answers(std::slice::from_ref(other), 2).await,
            vec![Some(vec![s("bob")])]
        );
    }
    // The next commit reaches them too: the broken joins keep no one behind.
    write(
        Arc::new(table.at_newest_schema().await.unwrap()),
        vec![vec![s("9001"), Datum::Int(5), Datum::BigInt(5), s("eve")]],
    )
    .await;
    assert!(lookups.refresh().await.unwrap());
    for other in &others {
        assert_eq!(
            answers(std::slice::from_ref(other), 5).await,
            vec![Some(vec![s("eve")])]
        );
    }
}
