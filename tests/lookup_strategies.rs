//! The three cache strategies agree with the merge-on-read scan after every refresh:
//! random commits of upserts and deletes (out of order by the sequence field, for
//! `deduplicate` with `sequence.field`, and for `partial-update`), applied incrementally.

use std::collections::BTreeMap;
use std::sync::Arc;

use lakejoin::lookup::{LookupSpec, LookupTable, PartialOptions, Strategy as Cache, TableLookups};
use lakejoin::lsm::point_lookup::{LookupOptions, PointLookup};
use lakejoin::lsm::reader::{ScanFilter, scan};
use lakejoin::lsm::writer::TableWriter;
use lakejoin::table::datum::{Datum, Row};
use lakejoin::table::row_kind::RowKind;
use lakejoin::table::schema::TableSchema;
use lakejoin::table::types::{DataType, MAX_LENGTH};
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use proptest::prelude::*;

fn schema(options: &[(&str, &str)]) -> TableSchema {
    let mut map = BTreeMap::from([("bucket".to_string(), "2".to_string())]);
    for (k, v) in options {
        map.insert(k.to_string(), v.to_string());
    }
    TableSchema::new(
        vec![
            ("id".into(), DataType::Int, false),
            ("name".into(), DataType::Varchar(MAX_LENGTH), true),
            ("ts".into(), DataType::BigInt, true),
        ],
        vec![],
        vec!["id".into()],
        map,
    )
    .unwrap()
}

#[derive(Debug, Clone)]
struct Change {
    delete: bool,
    id: i32,
    name: Option<String>,
    ts: i64,
}

fn change() -> impl Strategy<Value = Change> {
    (
        prop::bool::weighted(0.2),
        0..25i32,
        prop::option::of("[a-d]{1,6}"),
        0..50i64,
    )
        .prop_map(|(delete, id, name, ts)| Change {
            delete,
            id,
            name,
            ts,
        })
}

fn spec(strategy: Cache) -> LookupSpec {
    LookupSpec {
        strategy,
        key_columns: vec![0],
        projection: vec![0, 1, 2],
        partition: None,
    }
}

async fn check(options: &[(&str, &str)], commits: Vec<Vec<Change>>) {
    let warehouse = Warehouse::in_memory();
    let table = Arc::new(
        Table::create(
            &warehouse,
            &TableIdentifier::parse("t.lookups").unwrap(),
            schema(options),
        )
        .await
        .unwrap(),
    );
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
    let joins: Vec<Arc<LookupTable>> = [Cache::Full, Cache::Partial(partial), Cache::None]
        .into_iter()
        .map(|s| Arc::new(LookupTable::new(point.clone(), spec(s)).unwrap()))
        .collect();
    let lookups = TableLookups::new(point, joins.clone());
    lookups.load().await.unwrap();
    let partial_update = options.iter().any(|(_, v)| *v == "partial-update");
    for (round, commit) in commits.into_iter().enumerate() {
        let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
        for c in commit {
            if c.delete && partial_update {
                continue;
            }
            let kind = if c.delete {
                RowKind::Delete
            } else {
                RowKind::Insert
            };
            let name = c.name.map_or(Datum::Null, |s| Datum::String(s.into()));
            writer
                .write(kind, vec![Datum::Int(c.id), name, Datum::BigInt(c.ts)])
                .unwrap();
        }
        writer.commit(BTreeMap::new()).await.unwrap();
        lookups.refresh().await.unwrap();
        let rows = scan(&table, None, &ScanFilter::default()).await.unwrap();
        let expected: BTreeMap<i32, Row> = rows
            .into_iter()
            .map(|r| match r[0] {
                Datum::Int(id) => (id, r),
                _ => unreachable!("INT key"),
            })
            .collect();
        for id in 0..25 {
            let want = expected.get(&id).cloned();
            for (join, name) in joins.iter().zip(["full", "partial", "none"]) {
                // Every strategy is read twice: the second read is a cache hit.
                for _ in 0..2 {
                    let got = join.get(&[Datum::Int(id)]).await.unwrap();
                    let got = got.map(|r| r.decode().unwrap());
                    assert_eq!(
                        got.as_ref(),
                        want.as_ref(),
                        "{options:?}: round {round}, key {id}, cache {name}"
                    );
                }
            }
        }
        // The batched lookup the pipeline uses agrees, keys repeated and out of order.
        let ids: Vec<i32> = (0..25).rev().chain(0..25).collect();
        let probes: Vec<[Datum; 1]> = ids.iter().map(|&id| [Datum::Int(id)]).collect();
        let probes: Vec<&[Datum]> = probes.iter().map(|p| p.as_slice()).collect();
        for (join, name) in joins.iter().zip(["full", "partial", "none"]) {
            let got = join.get_many(&probes).await.unwrap();
            for (id, got) in ids.iter().zip(got) {
                let got = got.map(|r| r.decode().unwrap());
                assert_eq!(
                    got.as_ref(),
                    expected.get(id),
                    "{options:?}: round {round}, get_many key {id}, cache {name}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn deduplicate_with_a_sequence_field(commits in prop::collection::vec(prop::collection::vec(change(), 1..30), 1..6)) {
        tokio::runtime::Runtime::new().unwrap().block_on(check(&[("sequence.field", "ts")], commits));
    }

    #[test]
    fn deduplicate_by_arrival(commits in prop::collection::vec(prop::collection::vec(change(), 1..30), 1..6)) {
        tokio::runtime::Runtime::new().unwrap().block_on(check(&[], commits));
    }

    #[test]
    fn deduplicate_ignoring_deletes(commits in prop::collection::vec(prop::collection::vec(change(), 1..30), 1..6)) {
        tokio::runtime::Runtime::new().unwrap().block_on(check(&[("ignore-delete", "true")], commits));
    }

    #[test]
    fn partial_update(commits in prop::collection::vec(prop::collection::vec(change(), 1..30), 1..6)) {
        tokio::runtime::Runtime::new().unwrap().block_on(check(&[("merge-engine", "partial-update")], commits));
    }
}
