//! Tests of the `full` cache: lookups by key and by secondary index, updates, removals,
//! shard compaction, memory, and keeping only the returned columns (the model test
//! against a map is in `model_tests`).

use std::collections::BTreeMap;

use super::*;
use crate::table::datum::Timestamp;
use crate::table::testkit::keyed_schema;
use crate::table::types::MAX_LENGTH;

pub(super) const STRING: DataType = DataType::Varchar(MAX_LENGTH);

/// The cache's lookups with their rows decoded, to compare with datums.
pub(super) trait Decoded {
    fn get_row(&self, key: &[Datum], projection: &[usize]) -> Result<Option<Row>>;
    fn get_rows(&self, keys: &[&[Datum]], projection: &[usize]) -> Result<Vec<Option<Row>>>;
    fn get_by_rows(&self, index: usize, values: &[Datum], projection: &[usize])
    -> Result<Vec<Row>>;
}

impl Decoded for FullCache {
    fn get_row(&self, key: &[Datum], projection: &[usize]) -> Result<Option<Row>> {
        self.get(key, projection)?.map(|r| r.decode()).transpose()
    }

    fn get_rows(&self, keys: &[&[Datum]], projection: &[usize]) -> Result<Vec<Option<Row>>> {
        self.get_many(keys, projection)?
            .into_iter()
            .map(|r| r.map(|r| r.decode()).transpose())
            .collect()
    }

    fn get_by_rows(
        &self,
        index: usize,
        values: &[Datum],
        projection: &[usize],
    ) -> Result<Vec<Row>> {
        self.get_by(index, values, projection)?
            .iter()
            .map(ProjectedRow::decode)
            .collect()
    }
}

pub(super) fn schema(columns: &[(&str, DataType)], primary_key: &[&str]) -> Arc<TableSchema> {
    Arc::new(keyed_schema(columns, primary_key, &[]))
}

pub(super) fn s(text: &str) -> Datum {
    Datum::String(text.into())
}

/// id INT (key), name STRING, country STRING, score BIGINT; secondary index on country.
fn customers() -> FullCache {
    customers_indexed_by(vec![vec![2]])
}

/// The customers table with the secondary indexes `secondary` (column positions each).
fn customers_indexed_by(secondary: Vec<Vec<usize>>) -> FullCache {
    let schema = schema(
        &[
            ("id", DataType::Int),
            ("name", STRING),
            ("country", STRING),
            ("score", DataType::BigInt),
        ],
        &["id"],
    );
    FullCache::new(schema, secondary).unwrap()
}

fn customer(id: i32, name: &str, country: &str, score: i64) -> Row {
    vec![Datum::Int(id), s(name), s(country), Datum::BigInt(score)]
}

/// The whole row of customer `id`, if cached.
fn customer_by_id(cache: &FullCache, id: i32) -> Option<Row> {
    cache.get_row(&[Datum::Int(id)], &[0, 1, 2, 3]).unwrap()
}

/// BinaryRow bytes of the fields of table row `row` that `cache` keeps.
fn encoded_len(cache: &FullCache, row: &[Datum]) -> usize {
    let mut out = Vec::new();
    binary_row::encode_columns_into(&mut out, row, &cache.stored, &cache.types).unwrap();
    out.len()
}

#[test]
fn upsert_replace_remove_get() {
    let cache = customers();
    assert!(cache.is_empty());
    assert_eq!(customer_by_id(&cache, 1), None);
    let alice = customer(1, "Alice", "NL", 10);
    let bob = customer(2, "Bob with a long name", "DE", 20);
    cache.upsert(&alice).unwrap();
    cache.upsert(&bob).unwrap();
    assert_eq!(cache.len(), 2);
    assert_eq!(customer_by_id(&cache, 1), Some(alice.clone()));
    assert_eq!(customer_by_id(&cache, 2), Some(bob.clone()));
    assert_eq!(customer_by_id(&cache, 3), None);

    let alice2 = customer(1, "Alice Smith-Jones", "BE", 11);
    cache.upsert(&alice2).unwrap();
    assert_eq!(cache.len(), 2);
    assert_eq!(customer_by_id(&cache, 1), Some(alice2.clone()));
    assert_eq!(
        cache.binary_row_bytes(),
        encoded_len(&cache, &alice2) + encoded_len(&cache, &bob)
    );

    cache.remove(&[Datum::Int(1)]).unwrap();
    cache.remove(&[Datum::Int(1)]).unwrap(); // absent: no-op
    cache.remove(&[Datum::Int(99)]).unwrap();
    assert_eq!(customer_by_id(&cache, 1), None);
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.binary_row_bytes(), encoded_len(&cache, &bob));
    assert!(cache.memory_bytes() > 0);
}

#[test]
fn projection_decodes_the_selected_columns_in_order() {
    let cache = customers();
    let row = customer(7, "Carol", "a country name longer than 7", -3);
    cache.upsert(&row).unwrap();
    let key = [Datum::Int(7)];
    assert_eq!(
        cache.get_row(&key, &[3, 1]).unwrap(),
        Some(vec![Datum::BigInt(-3), s("Carol")])
    );
    assert_eq!(
        cache.get_row(&key, &[2, 2]).unwrap(),
        Some(vec![row[2].clone(), row[2].clone()])
    );
    assert_eq!(cache.get_row(&key, &[]).unwrap(), Some(vec![]));
    let err = cache.get_row(&key, &[4]).unwrap_err();
    assert!(matches!(err, Error::Data(_)), "{err}");
    let err = cache
        .get_by_rows(0, &[row[2].clone()], &[0, 9])
        .unwrap_err();
    assert!(matches!(err, Error::Data(_)), "{err}");
}

#[test]
fn null_keys_match_nothing_and_are_not_stored() {
    let cache = customers();
    cache.upsert(&customer(1, "A", "NL", 1)).unwrap();
    assert_eq!(cache.get_row(&[Datum::Null], &[0]).unwrap(), None);
    cache.remove(&[Datum::Null]).unwrap();
    let err = cache
        .upsert(&[Datum::Null, s("x"), s("NL"), Datum::BigInt(1)])
        .unwrap_err();
    assert!(matches!(err, Error::Data(_)), "{err}");
    // Nulls in non-key columns are stored and read back.
    let with_nulls = vec![Datum::Int(2), Datum::Null, Datum::Null, Datum::Null];
    cache.upsert(&with_nulls).unwrap();
    assert_eq!(customer_by_id(&cache, 2), Some(with_nulls));
    assert_eq!(
        cache.get_by_rows(0, &[Datum::Null], &[0]).unwrap(),
        Vec::<Row>::new()
    );
    assert_eq!(cache.len(), 2);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let cache = customers();
    let data = |r: Result<()>| matches!(r, Err(Error::Data(_)));
    assert!(data(cache.upsert(&[Datum::Int(1)])));
    assert!(data(cache.upsert(&[
        Datum::BigInt(1),
        s("a"),
        s("b"),
        Datum::BigInt(1)
    ])));
    assert!(data(cache.upsert(&[
        Datum::Int(1),
        Datum::Int(2),
        s("b"),
        Datum::Null
    ])));
    assert!(matches!(cache.get_row(&[], &[0]), Err(Error::Data(_))));
    assert!(matches!(
        cache.get_row(&[s("1")], &[0]),
        Err(Error::Data(_))
    ));
    assert!(data(cache.remove(&[Datum::Int(1), Datum::Int(2)])));
    assert!(matches!(
        cache.get_by_rows(0, &[], &[0]),
        Err(Error::Data(_))
    ));
    assert!(matches!(
        cache.get_by_rows(1, &[s("x")], &[0]),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        cache.get_by_rows(0, &[Datum::Int(1)], &[0]),
        Err(Error::Data(_))
    ));
    assert!(cache.is_empty());

    let schema = cache.schema().clone();
    let config = |r: Result<FullCache>| matches!(r, Err(Error::Config(_)));
    assert!(config(FullCache::new(schema.clone(), vec![vec![]])));
    assert!(config(FullCache::new(
        schema.clone(),
        vec![vec![1], vec![4]]
    )));
    let mut no_key = (*schema).clone();
    no_key.primary_keys.clear();
    assert!(config(FullCache::new(Arc::new(no_key), vec![])));
    let mut unknown_key = (*schema).clone();
    unknown_key.primary_keys = vec!["nope".into()];
    assert!(config(FullCache::new(Arc::new(unknown_key), vec![])));
}

#[test]
fn composite_keys_with_strings() {
    // Key (tenant STRING, id BIGINT, region STRING), out of schema order: short (inline)
    // and long strings. Once with every column, once keeping only `value` and the key,
    // so the key's stored positions are not its table columns.
    let schema = schema(
        &[
            ("value", DataType::Double),
            ("note", STRING),
            ("region", STRING),
            ("id", DataType::BigInt),
            ("tenant", STRING),
        ],
        &["tenant", "id", "region"],
    );
    let whole = FullCache::new(schema.clone(), vec![]).unwrap();
    let pruned = FullCache::returning(schema, vec![], &[0]).unwrap();
    assert_eq!(pruned.stored, [0, 2, 3, 4]);
    for cache in [whole, pruned] {
        composite_keys_with_strings_in(&cache);
    }
}

fn composite_keys_with_strings_in(cache: &FullCache) {
    let tenants = ["a", "abcdefg", "abcdefgh", "a much longer tenant name"];
    let regions = ["", "eu", "eu-west-1-long"];
    let mut expected = BTreeMap::new();
    let mut v = 0.0;
    for t in tenants {
        for id in [-1i64, 0, 1 << 40] {
            for r in regions {
                v += 1.5;
                cache
                    .upsert(&[
                        Datum::Double(v),
                        s("a note long enough not to be inline"),
                        s(r),
                        Datum::BigInt(id),
                        s(t),
                    ])
                    .unwrap();
                expected.insert((t, id, r), v);
            }
        }
    }
    assert_eq!(cache.len(), expected.len());
    for (&(t, id, r), &v) in &expected {
        let key = [s(t), Datum::BigInt(id), s(r)];
        assert_eq!(
            cache.get_row(&key, &[0, 4, 2]).unwrap(),
            Some(vec![Datum::Double(v), s(t), s(r)])
        );
    }
    // Prefixes and near misses of string key parts do not match.
    for near_miss in [
        [s("abcdef"), Datum::BigInt(0), s("eu")],
        [s("a"), Datum::BigInt(0), s("eu-west-1")],
        [s("a"), Datum::BigInt(2), s("eu")],
    ] {
        assert_eq!(
            cache.get_row(&near_miss, &[0]).unwrap(),
            None,
            "{near_miss:?}"
        );
    }
    let removed = [s("abcdefgh"), Datum::BigInt(0), s("")];
    cache.remove(&removed).unwrap();
    assert_eq!(cache.get_row(&removed, &[0]).unwrap(), None);
    assert_eq!(
        cache
            .get_row(&[s("abcdefg"), Datum::BigInt(0), s("")], &[4])
            .unwrap(),
        Some(vec![s("abcdefg")])
    );
    assert_eq!(cache.len(), expected.len() - 1);
}

#[test]
fn secondary_index_follows_updates_and_deletes() {
    // Index 0: country; index 1: (score, country).
    let cache = customers_indexed_by(vec![vec![2], vec![3, 2]]);
    let nl = || [s("Netherlands (long)")];
    for id in [5, 3, 9, 1] {
        cache
            .upsert(&customer(id, &format!("c{id}"), "Netherlands (long)", 1))
            .unwrap();
    }
    cache.upsert(&customer(2, "c2", "DE", 1)).unwrap();
    let ids = |rows: Vec<Row>| -> Vec<Datum> { rows.into_iter().map(|r| r[0].clone()).collect() };
    // Ordered by primary key.
    assert_eq!(
        ids(cache.get_by_rows(0, &nl(), &[0, 1]).unwrap()),
        vec![Datum::Int(1), Datum::Int(3), Datum::Int(5), Datum::Int(9)]
    );
    assert_eq!(
        cache.get_by_rows(0, &[s("DE")], &[1, 0]).unwrap(),
        vec![vec![s("c2"), Datum::Int(2)]]
    );
    assert_eq!(
        cache.get_by_rows(0, &[s("FR")], &[0]).unwrap(),
        Vec::<Row>::new()
    );
    // Moving a row to another value moves it in the index.
    cache.upsert(&customer(3, "c3", "DE", 2)).unwrap();
    assert_eq!(
        ids(cache.get_by_rows(0, &nl(), &[0]).unwrap()),
        vec![Datum::Int(1), Datum::Int(5), Datum::Int(9)]
    );
    assert_eq!(
        ids(cache.get_by_rows(0, &[s("DE")], &[0]).unwrap()),
        vec![Datum::Int(2), Datum::Int(3)]
    );
    // Updating a non-indexed column keeps the row in place.
    cache
        .upsert(&customer(5, "c5 renamed", "Netherlands (long)", 1))
        .unwrap();
    assert_eq!(
        cache.get_by_rows(0, &nl(), &[1]).unwrap(),
        vec![vec![s("c1")], vec![s("c5 renamed")], vec![s("c9")]]
    );
    // Multi-column index.
    assert_eq!(
        ids(cache
            .get_by_rows(1, &[Datum::BigInt(1), s("DE")], &[0])
            .unwrap()),
        vec![Datum::Int(2)]
    );
    assert_eq!(
        ids(cache
            .get_by_rows(1, &[Datum::BigInt(2), s("DE")], &[0])
            .unwrap()),
        vec![Datum::Int(3)]
    );
    assert_eq!(
        cache.get_by_rows(1, &[Datum::Null, s("DE")], &[0]).unwrap(),
        Vec::<Row>::new()
    );
    // A null in an indexed column takes the row out of the index.
    cache
        .upsert(&[Datum::Int(9), s("c9"), Datum::Null, Datum::BigInt(1)])
        .unwrap();
    assert_eq!(
        ids(cache.get_by_rows(0, &nl(), &[0]).unwrap()),
        vec![Datum::Int(1), Datum::Int(5)]
    );
    // Deletes.
    cache.remove(&[Datum::Int(1)]).unwrap();
    cache.remove(&[Datum::Int(2)]).unwrap();
    assert_eq!(
        ids(cache.get_by_rows(0, &nl(), &[0]).unwrap()),
        vec![Datum::Int(5)]
    );
    assert_eq!(
        ids(cache.get_by_rows(0, &[s("DE")], &[0]).unwrap()),
        vec![Datum::Int(3)]
    );
    assert_eq!(
        cache
            .get_by_rows(1, &[Datum::BigInt(1), s("DE")], &[0])
            .unwrap(),
        Vec::<Row>::new()
    );
    // Back in after a re-insert and a compaction.
    cache
        .upsert(&customer(1, "c1", "Netherlands (long)", 1))
        .unwrap();
    cache.compact_all();
    assert_eq!(
        ids(cache.get_by_rows(0, &nl(), &[0]).unwrap()),
        vec![Datum::Int(1), Datum::Int(5)]
    );
}

#[test]
fn clear_drops_every_row_and_its_memory() {
    let cache = customers();
    for id in 0..5000 {
        cache
            .upsert(&customer(id, "name", "NL", i64::from(id)))
            .unwrap();
    }
    let full = cache.memory_bytes();
    cache.clear();
    assert!(cache.is_empty());
    assert_eq!(cache.len(), 0);
    assert_eq!(cache.binary_row_bytes(), 0);
    assert_eq!(cache.get_row(&[Datum::Int(7)], &[0]).unwrap(), None);
    assert_eq!(
        cache.get_by_rows(0, &[s("NL")], &[0]).unwrap(),
        Vec::<Row>::new()
    );
    assert!(
        cache.memory_bytes() < full / 10,
        "{} vs {full}",
        cache.memory_bytes()
    );
    cache.upsert(&customer(7, "again", "NL", 1)).unwrap();
    assert_eq!(
        cache.get_by_rows(0, &[s("NL")], &[1]).unwrap(),
        vec![vec![s("again")]]
    );
}

#[test]
fn garbage_compaction_keeps_contents_and_bounds_memory() {
    let cache = customers();
    let rows = 2000;
    for round in 0..40i64 {
        for id in 0..rows {
            let country = if (i64::from(id) + round) % 3 == 0 {
                "NL"
            } else {
                "DE"
            };
            cache
                .upsert(&customer(
                    id,
                    &format!("name {id} round {round}"),
                    country,
                    round,
                ))
                .unwrap();
        }
        if round == 20 {
            // Deletes leave garbage too.
            for id in (0..rows).step_by(2) {
                cache.remove(&[Datum::Int(id)]).unwrap();
            }
        }
    }
    assert_eq!(cache.len(), rows as usize);
    for id in 0..rows {
        assert_eq!(
            cache.get_row(&[Datum::Int(id)], &[1, 3]).unwrap(),
            Some(vec![s(&format!("name {id} round 39")), Datum::BigInt(39)])
        );
    }
    let nl: Vec<Row> = (0..rows)
        .filter(|id| (i64::from(*id) + 39) % 3 == 0)
        .map(|id| vec![Datum::Int(id)])
        .collect();
    assert_eq!(cache.get_by_rows(0, &[s("NL")], &[0]).unwrap(), nl);
    // 40 versions of every row were written; compaction kept the arenas near the
    // live data (garbage <= live/4 or 16 KiB per shard).
    let live = cache.binary_row_bytes();
    assert!(
        cache.memory_bytes() < 2 * live + SHARDS * COMPACT_MIN_GARBAGE,
        "{} bytes for {live} live",
        cache.memory_bytes()
    );
    cache.compact_all();
    assert!(
        cache.memory_bytes() < 2 * live,
        "{} for {live}",
        cache.memory_bytes()
    );
    for id in (0..rows).step_by(97) {
        assert_eq!(
            cache.get_row(&[Datum::Int(id)], &[3]).unwrap(),
            Some(vec![Datum::BigInt(39)])
        );
    }
}

#[test]
fn readers_and_a_writer_share_the_cache() {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<FullCache>();
    let cache = customers();
    for id in 0..1000 {
        cache.upsert(&customer(id, "n", "NL", 0)).unwrap();
    }
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 1..20 {
                for id in 0..1000 {
                    cache.upsert(&customer(id, "n", "NL", round)).unwrap();
                }
            }
        });
        for _ in 0..2 {
            scope.spawn(|| {
                for _ in 0..5 {
                    for id in 0..1000 {
                        let row = cache.get_row(&[Datum::Int(id)], &[0, 3]).unwrap().unwrap();
                        assert_eq!(row[0], Datum::Int(id));
                    }
                }
            });
        }
    });
    assert_eq!(cache.len(), 1000);
    assert_eq!(cache.get_by_rows(0, &[s("NL")], &[0]).unwrap().len(), 1000);
}

/// The 8-column row of the memory target: INT key, BIGINT, two ~10-character strings,
/// DOUBLE, DECIMAL(12, 2), TIMESTAMP(3), BOOLEAN.
fn wide_cache(secondary: Vec<Vec<usize>>) -> FullCache {
    let schema = schema(
        &[
            ("id", DataType::Int),
            ("amount", DataType::BigInt),
            ("name", STRING),
            ("city", STRING),
            ("ratio", DataType::Double),
            (
                "price",
                DataType::Decimal {
                    precision: 12,
                    scale: 2,
                },
            ),
            ("updated", DataType::Timestamp(3)),
            ("active", DataType::Boolean),
        ],
        &["id"],
    );
    FullCache::new(schema, secondary).unwrap()
}

fn wide_row(id: i32) -> Row {
    vec![
        Datum::Int(id),
        Datum::BigInt(i64::from(id) * 1_000_003),
        s(&format!("name-{:05}", id % 100_000)),
        s(&format!("city-{:05}", id % 977)),
        Datum::Double(f64::from(id) / 7.0),
        Datum::Decimal(i128::from(id) * 101),
        Datum::Timestamp(Timestamp {
            millis: 1_700_000_000_000 + i64::from(id),
            nanos_of_milli: 0,
        }),
        Datum::Boolean(id % 2 == 0),
    ]
}

#[test]
fn memory_stays_within_one_and_a_half_binary_rows() {
    let cache = wide_cache(vec![]);
    for id in 0..200_000 {
        cache.upsert(&wide_row(id)).unwrap();
    }
    let rows = cache.binary_row_bytes();
    let memory = cache.memory_bytes();
    assert_eq!(rows, 200_000 * encoded_len(&cache, &wide_row(1)));
    let ratio = memory as f64 / rows as f64;
    println!("200,000 rows: {memory} bytes for {rows} BinaryRow bytes, ratio {ratio:.3}");
    assert!(
        ratio <= 1.5,
        "{memory} bytes for {rows} BinaryRow bytes: {ratio:.3}"
    );
    assert_eq!(
        cache.get_row(&[Datum::Int(123_456)], &[2, 0]).unwrap(),
        Some(vec![s("name-23456"), Datum::Int(123_456)])
    );
}

/// Throughput of primary-key hits on one thread; run with
/// `cargo test --release --lib lookup::full -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_lookups_per_second() {
    const ROWS: i32 = 1_000_000;
    let cache = wide_cache(vec![]);
    let started = std::time::Instant::now();
    for id in 0..ROWS {
        cache.upsert(&wide_row(id)).unwrap();
    }
    let load = started.elapsed();
    let memory = cache.memory_bytes();
    let rows = cache.binary_row_bytes();
    println!(
        "loaded {ROWS} rows in {load:?} ({:.0} upserts/s); memory {memory} bytes, BinaryRow {rows} bytes: ratio {:.3} ({:.1} bytes/row for {:.1})",
        f64::from(ROWS) / load.as_secs_f64(),
        memory as f64 / rows as f64,
        memory as f64 / f64::from(ROWS),
        rows as f64 / f64::from(ROWS),
    );
    // Keys in a random order (xorshift-driven Fisher-Yates), so most probes miss the
    // CPU caches as real join keys do.
    let mut keys: Vec<Datum> = (0..ROWS).map(Datum::Int).collect();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..keys.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        keys.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let projection = [1, 2]; // BIGINT and a 10-character STRING
    // Nanoseconds this thread ran on a CPU (the machine may be shared with builds).
    let on_cpu = || -> Option<u64> {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        text.split_whitespace().next()?.parse().ok()
    };
    let sequential: Vec<Datum> = (0..ROWS).map(Datum::Int).collect();
    // The first 64 random keys, repeated: their rows and slots stay in the CPU
    // caches, which shows the cost of the code apart from memory latency.
    let in_cache: Vec<Datum> = keys
        .iter()
        .take(64)
        .cycle()
        .take(keys.len())
        .cloned()
        .collect();
    for (order, keys) in [
        ("random", keys),
        ("sequential", sequential),
        ("in-cache", in_cache),
    ] {
        let (mut wall, mut cpu) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            let cpu_start = on_cpu();
            let started = std::time::Instant::now();
            let mut hits = 0usize;
            for key in &keys {
                if let Some(row) = cache
                    .get_row(std::slice::from_ref(key), &projection)
                    .unwrap()
                {
                    hits += row.len() / 2;
                }
            }
            wall = wall.min(started.elapsed().as_secs_f64());
            if let (Some(a), Some(b)) = (cpu_start, on_cpu()) {
                cpu = cpu.min((b - a) as f64 / 1e9);
            }
            assert_eq!(hits, ROWS as usize);
        }
        println!(
            "{order} keys: {:.0} hit lookups/s by the wall clock ({:.0} ns each), {:.0}/s on CPU ({:.0} ns each)",
            f64::from(ROWS) / wall,
            wall * 1e9 / f64::from(ROWS),
            f64::from(ROWS) / cpu,
            cpu * 1e9 / f64::from(ROWS),
        );
    }
}

/// A join selecting two columns of the 8-column row: the cache keeps those and the key,
/// in less than half the bytes, answers as a cache of whole rows does, and refuses a
/// column it dropped by name rather than returning a wrong field.
#[test]
fn a_cache_keeps_only_the_returned_columns_and_the_key() {
    let whole = wide_cache(vec![]);
    let schema = whole.schema().clone();
    let pruned = FullCache::returning(schema, vec![], &[3, 6]).unwrap();
    assert_eq!(pruned.stored, [0, 3, 6]);
    for id in 0..1000 {
        whole.upsert(&wide_row(id)).unwrap();
        pruned.upsert(&wide_row(id)).unwrap();
    }
    assert!(
        pruned.binary_row_bytes() * 2 < whole.binary_row_bytes(),
        "{} vs {}",
        pruned.binary_row_bytes(),
        whole.binary_row_bytes()
    );
    for projection in [&[3, 6][..], &[6, 0, 3], &[0], &[]] {
        let keys: Vec<Row> = (990..1010).map(|id| vec![Datum::Int(id)]).collect();
        let keys: Vec<&[Datum]> = keys.iter().map(Vec::as_slice).collect();
        assert_eq!(
            pruned.get_rows(&keys, projection).unwrap(),
            whole.get_rows(&keys, projection).unwrap(),
            "{projection:?}"
        );
        assert_eq!(
            pruned.get_row(&[Datum::Int(7)], projection).unwrap(),
            whole.get_row(&[Datum::Int(7)], projection).unwrap()
        );
    }
    let dropped = pruned.get(&[Datum::Int(7)], &[3, 2]);
    assert!(
        matches!(&dropped, Err(Error::Data(m)) if m.contains("column 2 is not kept")),
        "{dropped:?}"
    );
    assert!(matches!(
        FullCache::returning(whole.schema().clone(), vec![], &[8]),
        Err(Error::Config(_))
    ));
}
