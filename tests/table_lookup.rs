//! Point lookups agree with the merge-on-read scan for every key, before and after
//! compaction, on local and in-memory (remote-like) stores.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use lakejoin::lsm::compact::full_compact;
use lakejoin::lsm::point_lookup::{LookupOptions, PointLookup};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::{Datum, Row};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::types::{DataType, MAX_LENGTH};
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Change {
    kind: RowKind,
    id: i64,
    name: String,
    part: i32,
    v: Option<i64>,
}

fn change() -> impl Strategy<Value = Change> {
    (
        prop_oneof![4 => Just(RowKind::Insert), 1 => Just(RowKind::Delete)],
        0..40i64,
        prop_oneof![
            Just("a".to_string()),
            Just("a-longer-key-string".to_string()),
            "[a-c]{0,9}"
        ],
        0..2i32,
        proptest::option::of(0..1000i64),
    )
        .prop_map(|(kind, id, name, part, v)| Change {
            kind,
            id,
            name,
            part,
            v,
        })
}

fn schema(engine: &str) -> TableSchema {
    TableSchema::new(
        vec![
            ("id".into(), DataType::BigInt, false),
            ("name".into(), DataType::Varchar(MAX_LENGTH), false),
            ("part".into(), DataType::Int, false),
            ("v".into(), DataType::BigInt, true),
        ],
        vec!["part".into()],
        vec!["id".into(), "name".into(), "part".into()],
        BTreeMap::from([
            ("bucket".to_string(), "2".to_string()),
            ("merge-engine".to_string(), engine.to_string()),
            (
                "partial-update.ignore-delete".to_string(),
                "true".to_string(),
            ),
        ]),
    )
    .unwrap()
}

fn row(c: &Change) -> Row {
    vec![
        Datum::BigInt(c.id),
        Datum::String(c.name.clone().into()),
        Datum::Int(c.part),
        c.v.map_or(Datum::Null, Datum::BigInt),
    ]
}

fn key_of(r: &Row) -> Vec<Datum> {
    vec![r[0].clone(), r[1].clone(), r[2].clone()]
}

/// Every key ever written (present or deleted) must look up to what the scan says.
async fn assert_lookups_match_scan(
    table: &Arc<Table>,
    lookup: &PointLookup,
    keys: &BTreeSet<(i64, String, i32)>,
) {
    lookup.refresh().await.unwrap();
    let rows = scan(table, None, &ScanFilter::default()).await.unwrap();
    // Datum is not Ord (floats); its Debug text is a faithful map key here.
    let expected: BTreeMap<String, Row> = rows
        .into_iter()
        .map(|r| (format!("{:?}", key_of(&r)), r))
        .collect();
    for (id, name, part) in keys {
        let key = vec![
            Datum::BigInt(*id),
            Datum::String(name.clone().into()),
            Datum::Int(*part),
        ];
        let got = lookup.get(&key).await.unwrap();
        assert_eq!(
            got.as_ref(),
            expected.get(&format!("{key:?}")),
            "key {key:?}"
        );
    }
    let many = lookup
        .get_many(
            &keys
                .iter()
                .map(|(i, n, p)| {
                    vec![
                        Datum::BigInt(*i),
                        Datum::String(n.clone().into()),
                        Datum::Int(*p),
                    ]
                })
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    assert_eq!(many.iter().filter(|r| r.is_some()).count(), expected.len());
}

async fn run(warehouse: Warehouse, engine: &str, commits: Vec<Vec<Change>>) {
    let id = TableIdentifier::parse("db.t").unwrap();
    let table = Arc::new(
        Table::create(&warehouse, &id, schema(engine))
            .await
            .unwrap(),
    );
    let lookup = PointLookup::open(table.clone(), LookupOptions::default())
        .await
        .unwrap();
    let mut keys = BTreeSet::new();
    for commit in &commits {
        let mut w = TableWriter::new(table.clone(), "lookup-test")
            .await
            .unwrap();
        for c in commit {
            keys.insert((c.id, c.name.clone(), c.part));
            w.write(c.kind, row(c)).unwrap();
        }
        w.commit(BTreeMap::new()).await.unwrap();
    }
    assert_lookups_match_scan(&table, &lookup, &keys).await;
    full_compact(&table, "compactor").await.unwrap();
    assert_lookups_match_scan(&table, &lookup, &keys).await;
}

fn commits() -> impl Strategy<Value = Vec<Vec<Change>>> {
    proptest::collection::vec(proptest::collection::vec(change(), 0..40), 1..6)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn lookups_equal_scan_on_local_disk(commits in commits(), partial in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let wh = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
        let engine = if partial { "partial-update" } else { "deduplicate" };
        runtime().block_on(run(wh, engine, commits));
    }

    #[test]
    fn lookups_equal_scan_on_a_remote_store(commits in commits()) {
        runtime().block_on(run(Warehouse::in_memory(), "deduplicate", commits));
    }
}

#[tokio::test]
async fn lookups_use_pages_of_a_large_file() {
    let dir = tempfile::tempdir().unwrap();
    let wh = Warehouse::from_uri(dir.path().to_str().unwrap(), &BTreeMap::new()).unwrap();
    let id = TableIdentifier::parse("db.big").unwrap();
    let table = Arc::new(
        Table::create(&wh, &id, schema("deduplicate"))
            .await
            .unwrap(),
    );
    let mut w = TableWriter::new(table.clone(), "t").await.unwrap();
    for i in 0..20_000i64 {
        w.write(
            RowKind::Insert,
            row(&Change {
                kind: RowKind::Insert,
                id: i,
                name: format!("n{}", i % 7),
                part: 0,
                v: Some(i),
            }),
        )
        .unwrap();
    }
    w.commit(BTreeMap::new()).await.unwrap();
    let lookup = PointLookup::open(table.clone(), LookupOptions::default())
        .await
        .unwrap();
    for i in [0i64, 1, 4095, 4096, 12_345, 19_999] {
        let key = vec![
            Datum::BigInt(i),
            Datum::String(format!("n{}", i % 7).into()),
            Datum::Int(0),
        ];
        let got = lookup.get(&key).await.unwrap().expect("present");
        assert_eq!(got[3], Datum::BigInt(i));
        let wrong_name = vec![Datum::BigInt(i), Datum::String("zz".into()), Datum::Int(0)];
        assert_eq!(lookup.get(&wrong_name).await.unwrap(), None);
    }
    let absent = vec![
        Datum::BigInt(20_000),
        Datum::String("n0".into()),
        Datum::Int(0),
    ];
    assert_eq!(lookup.get(&absent).await.unwrap(), None);
    let bad = lookup.get(&[Datum::BigInt(1)]).await.unwrap_err();
    assert!(bad.to_string().contains("needs 3 values"), "{bad}");
}
