//! Schema evolution in the table layer (in memory): `schema-<n+1>` files written
//! create-if-absent, old data files read through the newer schema (an added column is
//! null, a widened one is cast up), new files carry the new schema id, concurrent
//! evolutions both land, and lookups at the new schema see both.

use std::collections::BTreeMap;
use std::sync::Arc;

use lakejoin::lsm::evolve_table;
use lakejoin::lsm::point_lookup::{LookupOptions, PointLookup};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::Datum;
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::schema_change::SchemaChange;
use lakejoin::table::types::{DataType, MAX_LENGTH};
use lakejoin::table::{Table, TableIdentifier, Warehouse};

async fn profile_table(warehouse: &Warehouse) -> Table {
    let schema = TableSchema::new(
        vec![
            ("user_id".into(), DataType::Int, false),
            ("age".into(), DataType::Int, true),
            ("sex".into(), DataType::Varchar(8), true),
        ],
        vec![],
        vec!["user_id".into()],
        BTreeMap::from([("bucket".to_string(), "2".to_string())]),
    )
    .unwrap();
    Table::create(
        warehouse,
        &TableIdentifier::parse("shop.user_profile").unwrap(),
        schema,
    )
    .await
    .unwrap()
}

fn add_city() -> Vec<SchemaChange> {
    vec![SchemaChange::AddColumn {
        name: "city".into(),
        data_type: DataType::Varchar(32),
    }]
}

#[tokio::test]
async fn old_files_read_the_added_column_as_null_and_new_files_carry_the_new_schema() {
    let warehouse = Warehouse::in_memory();
    let table = Arc::new(profile_table(&warehouse).await);
    let mut writer = TableWriter::new(table.clone(), "t").await.unwrap();
    for (id, age) in [(1, 30), (2, 40)] {
        writer
            .write(
                RowKind::Insert,
                vec![Datum::Int(id), Datum::Int(age), Datum::String("f".into())],
            )
            .unwrap();
    }
    writer.commit(BTreeMap::new()).await.unwrap();

    let evolved = evolve_table(&table, |_| {
        Ok(vec![
            SchemaChange::AddColumn {
                name: "city".into(),
                data_type: DataType::Varchar(32),
            },
            SchemaChange::WidenColumn {
                name: "age".into(),
                data_type: DataType::BigInt,
            },
        ])
    })
    .await
    .unwrap();
    assert_eq!(evolved.schema().id, 1);
    assert_eq!(table.newest_schema_id().await.unwrap(), 1);
    let evolved = Arc::new(evolved);
    let mut writer = TableWriter::new(evolved.clone(), "t").await.unwrap();
    writer
        .write(
            RowKind::Insert,
            vec![
                Datum::Int(3),
                Datum::BigInt(5_000_000_000),
                Datum::Null,
                Datum::String("Bern".into()),
            ],
        )
        .unwrap();
    let snapshot = writer.commit(BTreeMap::new()).await.unwrap().unwrap();
    assert_eq!(snapshot.schema_id, 1, "the snapshot names the new schema");
    let files = evolved.live_files(&snapshot).await.unwrap();
    let mut schema_ids: Vec<i64> = files.iter().map(|e| e.file.schema_id).collect();
    schema_ids.sort_unstable();
    assert_eq!(schema_ids.first(), Some(&0), "the old files keep schema 0");
    assert_eq!(schema_ids.last(), Some(&1), "the new file has schema 1");

    // Opened afresh (as another process would), at the newest schema.
    let reopened = Table::open(
        &warehouse,
        &TableIdentifier::parse("shop.user_profile").unwrap(),
    )
    .await
    .unwrap();
    let mut rows = scan(&reopened, None, &ScanFilter::default()).await.unwrap();
    rows.sort_by_key(|r| match r[0] {
        Datum::Int(i) => i,
        _ => 0,
    });
    assert_eq!(
        rows,
        vec![
            vec![
                Datum::Int(1),
                Datum::BigInt(30),
                Datum::String("f".into()),
                Datum::Null
            ],
            vec![
                Datum::Int(2),
                Datum::BigInt(40),
                Datum::String("f".into()),
                Datum::Null
            ],
            vec![
                Datum::Int(3),
                Datum::BigInt(5_000_000_000),
                Datum::Null,
                Datum::String("Bern".into())
            ],
        ]
    );

    // A point lookup at the new schema reads old and new files alike.
    let lookup = PointLookup::open(Arc::new(reopened), LookupOptions::default())
        .await
        .unwrap();
    let old = lookup.get(&[Datum::Int(1)]).await.unwrap().unwrap();
    assert_eq!(old[3], Datum::Null);
    assert_eq!(old[1], Datum::BigInt(30));
    let new = lookup.get(&[Datum::Int(3)]).await.unwrap().unwrap();
    assert_eq!(new[3], Datum::String("Bern".into()));
}

#[tokio::test]
async fn concurrent_evolutions_both_land_in_order_without_overwriting() {
    let warehouse = Warehouse::in_memory();
    let table = profile_table(&warehouse).await;
    let other = Table::open(
        &warehouse,
        &TableIdentifier::parse("shop.user_profile").unwrap(),
    )
    .await
    .unwrap();
    // Both handles start at schema 0; each plans on what it finds newest.
    let (a, b) = tokio::join!(
        evolve_table(&table, |s| s
            .changes_to_fit(&[("city".into(), DataType::Varchar(32))])),
        evolve_table(&other, |s| s
            .changes_to_fit(&[("zip".into(), DataType::Int)])),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut ids = [a.schema().id, b.schema().id];
    ids.sort_unstable();
    assert_eq!(
        ids,
        [1, 2],
        "one published schema-1, the other planned again on it"
    );
    let newest = Table::open(
        &warehouse,
        &TableIdentifier::parse("shop.user_profile").unwrap(),
    )
    .await
    .unwrap();
    let names: Vec<(i32, &str)> = newest
        .schema()
        .fields
        .iter()
        .map(|f| (f.id, f.name.as_str()))
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(
        names.contains(&(3, "city")) || names.contains(&(4, "city")),
        "{names:?}"
    );
    assert_eq!(newest.schema().highest_field_id, 4);

    // Asking for what is already there writes nothing.
    let same = evolve_table(&newest, |s| {
        s.changes_to_fit(&[("city".into(), DataType::Varchar(4))])
    })
    .await
    .unwrap();
    assert_eq!(same.schema().id, 2);
    assert_eq!(newest.newest_schema_id().await.unwrap(), 2);
}

#[tokio::test]
async fn a_refused_change_writes_no_schema() {
    let warehouse = Warehouse::in_memory();
    let table = profile_table(&warehouse).await;
    for changes in [
        vec![SchemaChange::WidenColumn {
            name: "age".into(),
            data_type: DataType::SmallInt,
        }],
        vec![SchemaChange::WidenColumn {
            name: "user_id".into(),
            data_type: DataType::BigInt,
        }],
        add_city().into_iter().chain(add_city()).collect(),
    ] {
        let err = evolve_table(&table, |_| Ok(changes.clone()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("cannot"), "{err}");
    }
    let err = evolve_table(&table, |s| {
        s.changes_to_fit(&[
            ("sex".into(), DataType::Varchar(MAX_LENGTH)),
            ("age".into(), DataType::Varchar(3)),
        ])
    })
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("`age` is INT in the table and VARCHAR(3)"),
        "{err}"
    );
    assert_eq!(table.newest_schema_id().await.unwrap(), 0);
}

#[tokio::test]
async fn a_lookup_opened_before_the_change_moves_to_the_new_schema() {
    let warehouse = Warehouse::in_memory();
    let table = Arc::new(profile_table(&warehouse).await);
    let mut writer = TableWriter::new(table.clone(), "t").await.unwrap();
    writer
        .write(
            RowKind::Insert,
            vec![Datum::Int(1), Datum::Int(30), Datum::String("f".into())],
        )
        .unwrap();
    writer.commit(BTreeMap::new()).await.unwrap();
    let lookup = PointLookup::open(table.clone(), LookupOptions::default())
        .await
        .unwrap();
    assert_eq!(
        lookup.get(&[Datum::Int(1)]).await.unwrap(),
        Some(vec![
            Datum::Int(1),
            Datum::Int(30),
            Datum::String("f".into())
        ])
    );

    let evolved = evolve_table(&table, |s| {
        s.changes_to_fit(&[
            ("age".into(), DataType::BigInt),
            ("city".into(), DataType::Varchar(MAX_LENGTH)),
        ])
    })
    .await
    .unwrap();
    let mut writer = TableWriter::new(Arc::new(evolved), "t").await.unwrap();
    writer
        .write(
            RowKind::Insert,
            vec![
                Datum::Int(3),
                Datum::BigInt(5_000_000_000),
                Datum::Null,
                Datum::String("Bern".into()),
            ],
        )
        .unwrap();
    writer.commit(BTreeMap::new()).await.unwrap();

    // Before the refresh it reads its snapshot in its schema; after it, the new one.
    assert_eq!(lookup.get(&[Datum::Int(3)]).await.unwrap(), None);
    assert!(lookup.refresh().await.unwrap().is_some());
    assert_eq!(
        lookup.get(&[Datum::Int(3)]).await.unwrap(),
        Some(vec![
            Datum::Int(3),
            Datum::BigInt(5_000_000_000),
            Datum::Null,
            Datum::String("Bern".into())
        ]),
        "a widened value is read whole, never cast down to the old type"
    );
    assert_eq!(
        lookup.get(&[Datum::Int(1)]).await.unwrap(),
        Some(vec![
            Datum::Int(1),
            Datum::BigInt(30),
            Datum::String("f".into()),
            Datum::Null
        ]),
        "the old row in the new schema: widened, the new column null"
    );
}

#[tokio::test]
async fn a_handle_older_than_a_file_refuses_to_read_it_instead_of_dropping_columns() {
    let warehouse = Warehouse::in_memory();
    let old = Arc::new(profile_table(&warehouse).await);
    let evolved = Arc::new(evolve_table(&old, |_| Ok(add_city())).await.unwrap());
    let mut writer = TableWriter::new(evolved.clone(), "t").await.unwrap();
    let row = vec![
        Datum::Int(1),
        Datum::Int(30),
        Datum::String("f".into()),
        Datum::String("Bern".into()),
    ];
    writer.write(RowKind::Insert, row.clone()).unwrap();
    writer.commit(BTreeMap::new()).await.unwrap();

    // The handle opened before the change would have read the row without `city` (and a
    // compaction through it would have written that loss back).
    let err = scan(&old, None, &ScanFilter::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("schema 1, newer than schema 0") && err.contains("open the table again"),
        "{err}"
    );
    let reopened = old.at_newest_schema().await.unwrap();
    assert_eq!(
        scan(&reopened, None, &ScanFilter::default()).await.unwrap(),
        vec![row]
    );
}
