//! aggregation round trips: every function lakejoin supports, with retractions where the
//! function takes them and `ignore-retract` where it does not, and
//! `aggregation.remove-record-on-delete`. Random data has no model here: Java writing the
//! same commits into a table of its own is the reference.
//!
//! Why a file of its own: the column lists and value generators are long.

use rand::Rng;
use serde_json::json;

use crate::support::TableSpec;
use crate::support::java::{
    Case, java_writes_lakejoin_reads, lakejoin_writes_as_java_does, lakejoin_writes_java_reads,
};
use crate::{keyed_spec, maybe, random_commits, row};

/// The functions that take retractions, over random +I/+U/-U/-D.
pub(crate) fn retracting_aggregates_case(partitioned: bool) -> Case {
    let spec = keyed_spec(
        "db.aggregates",
        &[
            "s_int:INT",
            "s_dec:DECIMAL(12,2)",
            "s_dbl:DOUBLE",
            "prod:BIGINT",
            "last:STRING",
            "last_nn:STRING",
            "cnt:BIGINT",
        ],
        partitioned,
    )
    .merge_engine("aggregation")
    .option("fields.s_int.aggregate-function", "sum")
    .option("fields.s_dec.aggregate-function", "sum")
    .option("fields.s_dbl.aggregate-function", "sum")
    .option("fields.prod.aggregate-function", "product")
    .option("fields.last.aggregate-function", "last_value")
    .option("fields.cnt.aggregate-function", "sum");
    // last_nn takes the default, last_non_null_value.
    let kinds = [("+I", 5), ("+U", 2), ("-U", 2), ("-D", 1)];
    let commits = random_commits(0xA66, &spec, 5, 30, 8, &kinds, |rng, _, row| {
        row.insert(
            "s_int".into(),
            maybe(rng, 0.8, |rng| json!(rng.random_range(-1000..1000))),
        );
        let cents: i64 = rng.random_range(-99_999..99_999);
        let dec = format!(
            "{}{}.{:02}",
            if cents < 0 { "-" } else { "" },
            cents.abs() / 100,
            cents.abs() % 100
        );
        row.insert("s_dec".into(), maybe(rng, 0.8, |_| json!(dec)));
        // Quarters add exactly, whatever the order of the additions.
        row.insert(
            "s_dbl".into(),
            maybe(rng, 0.8, |rng| {
                json!(rng.random_range(-40..40) as f64 / 4.0)
            }),
        );
        // Factors that retract exactly (no zero: a retraction would divide by it).
        row.insert(
            "prod".into(),
            maybe(rng, 0.6, |rng| json!([1, 2, -1, 3][rng.random_range(0..4)])),
        );
        let text = json!(["x", "y", "é"][rng.random_range(0..3)]);
        row.insert("last".into(), maybe(rng, 0.7, |_| text.clone()));
        row.insert("last_nn".into(), maybe(rng, 0.5, |_| text));
        row.insert("cnt".into(), json!(1));
    });
    Case {
        spec,
        commits,
        expected: None,
    }
}

/// The functions without a retraction, with `fields.<f>.ignore-retract` so -U/-D leave
/// them unchanged.
fn order_aggregates_case(partitioned: bool) -> Case {
    let functions = [
        ("mn", "INT", "min"),
        ("mx", "DECIMAL(8,3)", "max"),
        ("mx_ts", "TIMESTAMP(3)", "max"),
        ("mn_str", "STRING", "min"),
        ("first", "STRING", "first_value"),
        ("first_nn", "INT", "first_non_null_value"),
        ("all_true", "BOOLEAN", "bool_and"),
        ("any_true", "BOOLEAN", "bool_or"),
        ("joined", "STRING", "listagg"),
        ("distinct", "STRING", "listagg"),
    ];
    let columns: Vec<String> = functions
        .iter()
        .map(|(n, t, _)| format!("{n}:{t}"))
        .collect();
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut spec =
        keyed_spec("db.order_aggregates", &columns, partitioned).merge_engine("aggregation");
    for (name, _, function) in functions {
        spec = spec
            .option(&format!("fields.{name}.aggregate-function"), function)
            .option(&format!("fields.{name}.ignore-retract"), "true");
    }
    spec = spec
        .option("fields.distinct.list-agg-delimiter", ";")
        .option("fields.distinct.distinct", "true");
    let kinds = [("+I", 6), ("+U", 2), ("-U", 1), ("-D", 1)];
    let commits = random_commits(0x0DE5, &spec, 4, 30, 8, &kinds, |rng, _, row| {
        row.insert(
            "mn".into(),
            maybe(rng, 0.8, |rng| json!(rng.random_range(i32::MIN..i32::MAX))),
        );
        row.insert(
            "mx".into(),
            maybe(rng, 0.8, |rng| {
                json!(format!(
                    "{}.{:03}",
                    rng.random_range(-9999..9999),
                    rng.random_range(0..1000)
                ))
            }),
        );
        let ts = format!(
            "20{:02}-0{}-1{} 0{}:00:00.{:03}",
            rng.random_range(0..40),
            rng.random_range(1..10),
            rng.random_range(0..10),
            rng.random_range(0..10),
            rng.random_range(0..1000)
        );
        row.insert("mx_ts".into(), maybe(rng, 0.8, |_| json!(ts)));
        let text = ["b", "a", "ä", "Z", "日本", "ab"];
        row.insert(
            "mn_str".into(),
            maybe(rng, 0.8, |rng| json!(text[rng.random_range(0..text.len())])),
        );
        row.insert(
            "first".into(),
            maybe(rng, 0.6, |rng| json!(text[rng.random_range(0..text.len())])),
        );
        row.insert(
            "first_nn".into(),
            maybe(rng, 0.5, |rng| json!(rng.random_range(0..100))),
        );
        row.insert(
            "all_true".into(),
            maybe(rng, 0.8, |rng| json!(rng.random_bool(0.9))),
        );
        row.insert(
            "any_true".into(),
            maybe(rng, 0.8, |rng| json!(rng.random_bool(0.1))),
        );
        row.insert(
            "joined".into(),
            maybe(rng, 0.7, |rng| json!(text[rng.random_range(0..text.len())])),
        );
        let tokens = ["a", "b;c", "a;a", "d"];
        row.insert(
            "distinct".into(),
            maybe(rng, 0.7, |rng| {
                json!(tokens[rng.random_range(0..tokens.len())])
            }),
        );
    });
    Case {
        spec,
        commits,
        expected: None,
    }
}

/// `aggregation.remove-record-on-delete`: a -D removes the key; a later insert starts over.
fn aggregation_remove_record_on_delete_case() -> Case {
    let spec = TableSpec::new(
        "db.agg_remove",
        &["id:INT", "total:BIGINT", "note:STRING"],
        &["id"],
        2,
    )
    .merge_engine("aggregation")
    .option("fields.total.aggregate-function", "sum")
    .option("aggregation.remove-record-on-delete", "true");
    let commits = vec![
        vec![
            row("+I", json!({"id": 1, "total": 10, "note": "a"})),
            row("+I", json!({"id": 2, "total": 20, "note": "b"})),
            row("+I", json!({"id": 3, "total": 30})),
        ],
        vec![
            row("+I", json!({"id": 1, "total": 1})),
            // Removed for good, whatever values the -D carries.
            row("-D", json!({"id": 2, "total": 20, "note": "b"})),
            // Removed by a -D without values ...
            row("-D", json!({"id": 3})),
        ],
        vec![
            // ... and inserted again in a later commit: from scratch.
            row("+I", json!({"id": 3, "total": 3, "note": "again"})),
            row("+I", json!({"id": 1, "total": 100})),
        ],
    ];
    let expected = vec![
        json!({"id": 1, "total": 111, "note": "a"}),
        json!({"id": 3, "total": 3, "note": "again"}),
    ];
    Case {
        spec,
        commits,
        expected: Some(expected),
    }
}

#[test]
fn aggregation_retractions_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(retracting_aggregates_case(false));
}

#[test]
fn aggregation_retractions_partitioned_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(retracting_aggregates_case(true));
}

#[test]
fn aggregation_order_functions_partitioned_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(order_aggregates_case(true));
}

#[test]
fn aggregation_order_functions_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(order_aggregates_case(false));
}

#[test]
fn aggregation_remove_record_on_delete_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(aggregation_remove_record_on_delete_case());
}

#[test]
fn aggregation_remove_record_on_delete_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(aggregation_remove_record_on_delete_case());
}

// ---------------------------------------------------------------------------------------
// A lone version of a key in a commit is kept as it is (Java's ReducerMergeFunctionWrapper)

/// A -U alone in its commit stays a -U: a later merge retracts it (product divides, the
/// last non-null value is cleared), and a key with nothing else is not visible. lakejoin
/// used to merge it alone into an insert of the "negated" values.
#[test]
fn aggregation_lone_retraction_stays_a_retraction() {
    let spec = TableSpec::new(
        "db.lone_agg",
        &["id:INT", "total:BIGINT", "prod:BIGINT", "last_nn:STRING"],
        &["id"],
        1,
    )
    .merge_engine("aggregation")
    .option("fields.total.aggregate-function", "sum")
    .option("fields.prod.aggregate-function", "product");
    lakejoin_writes_as_java_does(Case {
        spec,
        commits: vec![
            vec![
                row(
                    "+I",
                    json!({"id": 1, "total": 10, "prod": 6, "last_nn": "x"}),
                ),
                row(
                    "+I",
                    json!({"id": 2, "total": 5, "prod": 2, "last_nn": "y"}),
                ),
            ],
            vec![
                row(
                    "-U",
                    json!({"id": 1, "total": 10, "prod": 2, "last_nn": "x"}),
                ),
                row(
                    "-U",
                    json!({"id": 3, "total": 4, "prod": 3, "last_nn": "z"}),
                ),
            ],
            vec![row("+U", json!({"id": 2, "total": 1}))],
        ],
        expected: Some(vec![
            json!({"id": 1, "total": 0, "prod": 3, "last_nn": null}),
            json!({"id": 2, "total": 6, "prod": 2, "last_nn": "y"}),
        ]),
    });
}
