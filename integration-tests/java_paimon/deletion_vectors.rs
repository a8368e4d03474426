//! Tables Java writes with `deletion-vectors.enabled`: lakejoin scans and looks them up.
//!
//! Why these cases: Java's writer of such a table merges each commit into the levels
//! below at once (lookup compaction) and marks the rows it superseded in the older files
//! as deleted, in a deletion vector, instead of rewriting those files. A reader that
//! ignores the vectors sees every superseded version again: deduplicate keeps the right
//! value only by luck of sequence numbers, a deleted key comes back, and an aggregation
//! adds its old partial sums a second time. (Java refuses deletion vectors on first-row
//! tables: that engine never deletes old data.) So each engine is checked: deduplicate with
//! deletes, aggregation (sum, product), partial-update, partitioned or not, and
//! in both bitmap layouts (32-bit, and `deletion-vectors.bitmap64`).

use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Map, Value, json};

use crate::support::java::{Case, java_writes_lakejoin_reads};
use crate::support::{Table, TableSpec};
use crate::{keyed_spec, maybe, random_commits};

/// Few keys over many commits, so most commits supersede rows of older files.
const KINDS: [(&str, u32); 4] = [("+I", 5), ("+U", 2), ("-U", 1), ("-D", 2)];

fn with_vectors(spec: TableSpec, bitmap64: bool) -> TableSpec {
    let spec = spec.option("deletion-vectors.enabled", "true");
    if bitmap64 {
        spec.option("deletion-vectors.bitmap64", "true")
    } else {
        spec
    }
}

/// Java's read of the same commits is the reference (`expected: None`) and must also
/// differ from what ignoring the vectors would give, which `java_writes_lakejoin_reads`
/// checks through the scan and every lookup.
fn case(spec: TableSpec, seed: u64, values: impl Fn(&mut StdRng, &mut Map<String, Value>)) -> Case {
    let commits = random_commits(seed, &spec, 6, 25, 10, &KINDS, |rng, _, row| {
        values(rng, row)
    });
    Case {
        spec,
        commits,
        expected: None,
    }
}

fn dedup(partitioned: bool, bitmap64: bool) -> Case {
    let spec = with_vectors(
        keyed_spec("db.dv_dedup", &["v:STRING", "n:BIGINT"], partitioned),
        bitmap64,
    );
    case(spec, 0xD5, |rng, row| {
        row.insert(
            "v".into(),
            maybe(rng, 0.8, |rng| {
                json!(format!("v{}", rng.random_range(0..50)))
            }),
        );
        row.insert("n".into(), json!(rng.random_range(-9..9)));
    })
}

fn aggregation(partitioned: bool) -> Case {
    let spec = with_vectors(
        keyed_spec(
            "db.dv_agg",
            &["total:BIGINT", "prod:BIGINT", "last:STRING"],
            partitioned,
        )
        .merge_engine("aggregation")
        .option("fields.total.aggregate-function", "sum")
        .option("fields.prod.aggregate-function", "product")
        .option("fields.last.aggregate-function", "last_value"),
        false,
    );
    // Aggregation with deletion vectors takes no -D (Java: "aggregation does not
    // support delete" without remove-record-on-delete), so +I/+U/-U only.
    let commits = random_commits(
        0xA9,
        &spec,
        6,
        25,
        10,
        &[("+I", 5), ("+U", 2), ("-U", 1)],
        |rng, _, row| {
            row.insert("total".into(), json!(rng.random_range(-100..100)));
            row.insert("prod".into(), json!(rng.random_range(1..3)));
            row.insert(
                "last".into(),
                maybe(rng, 0.7, |rng| {
                    json!(format!("l{}", rng.random_range(0..9)))
                }),
            );
        },
    );
    Case {
        spec,
        commits,
        expected: None,
    }
}

fn partial_update(partitioned: bool) -> Case {
    let spec = with_vectors(
        keyed_spec(
            "db.dv_partial",
            &["a:STRING", "b:INT", "c:DOUBLE"],
            partitioned,
        )
        .merge_engine("partial-update")
        .option("partial-update.ignore-delete", "true"),
        false,
    );
    case(spec, 0x9A, |rng, row| {
        row.insert(
            "a".into(),
            maybe(rng, 0.5, |rng| {
                json!(format!("a{}", rng.random_range(0..9)))
            }),
        );
        row.insert(
            "b".into(),
            maybe(rng, 0.5, |rng| json!(rng.random_range(0..99))),
        );
        row.insert(
            "c".into(),
            maybe(rng, 0.5, |rng| json!(rng.random_range(0..8) as f64 / 2.0)),
        );
    })
}

/// Java wrote deletion vectors into the table, in the 32-bit or 64-bit layout: the cases
/// above would pass without any, so each checks there were some. An index file is a
/// version byte, then vectors of a big-endian size and the magic number (big-endian for
/// 32-bit, little-endian for 64-bit).
fn assert_java_wrote_vectors(table: &Table, bitmap64: bool) {
    let dir = table.path().join("index");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{} has no index directory: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    let mut vectors = 0;
    for file in files {
        let bytes = std::fs::read(&file).expect("index file");
        assert_eq!(bytes.first(), Some(&1), "{}: version byte", file.display());
        // A bucket whose vectors all went away keeps a file of the version byte alone.
        if bytes.len() == 1 {
            continue;
        }
        vectors += 1;
        let magic: [u8; 4] = bytes[5..9].try_into().expect("4 bytes");
        let found = if bitmap64 {
            i32::from_le_bytes(magic)
        } else {
            i32::from_be_bytes(magic)
        };
        let wanted = if bitmap64 {
            1_681_511_377
        } else {
            1_581_511_376
        };
        assert_eq!(found, wanted, "{}: magic number", file.display());
    }
    assert!(
        vectors > 0,
        "Java wrote no deletion vectors in {}",
        dir.display()
    );
}

#[test]
fn deletion_vectors_deduplicate_java_writes_lakejoin_reads() {
    let table = java_writes_lakejoin_reads(dedup(false, false));
    assert_java_wrote_vectors(&table, false);
}

#[test]
fn deletion_vectors_deduplicate_partitioned_java_writes_lakejoin_reads() {
    let table = java_writes_lakejoin_reads(dedup(true, false));
    assert_java_wrote_vectors(&table, false);
}

#[test]
fn deletion_vectors_bitmap64_java_writes_lakejoin_reads() {
    let table = java_writes_lakejoin_reads(dedup(true, true));
    assert_java_wrote_vectors(&table, true);
}

#[test]
fn deletion_vectors_aggregation_java_writes_lakejoin_reads() {
    let table = java_writes_lakejoin_reads(aggregation(false));
    assert_java_wrote_vectors(&table, false);
}

#[test]
fn deletion_vectors_aggregation_partitioned_java_writes_lakejoin_reads() {
    let table = java_writes_lakejoin_reads(aggregation(true));
    assert_java_wrote_vectors(&table, false);
}

#[test]
fn deletion_vectors_partial_update_java_writes_lakejoin_reads() {
    let table = java_writes_lakejoin_reads(partial_update(true));
    assert_java_wrote_vectors(&table, false);
}
