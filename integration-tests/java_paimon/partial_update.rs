//! partial-update round trips: plain (a `sequence.field` model), `ignore-delete`,
//! `remove-record-on-delete`, sequence groups, and aggregate functions in groups with
//! `remove-record-on-sequence-group` (expected rows worked out from Java's
//! `PartialUpdateMergeFunction`, as the comments say).
//!
//! Why a file of its own: each option's case is long, and they share nothing with the
//! other engines but the helpers of the crate root.

use rand::Rng;
use serde_json::{Value, json};

use crate::support::java::{
    Case, ROW_KIND, java_writes_lakejoin_reads, lakejoin_writes_as_java_does,
    lakejoin_writes_java_reads,
};
use crate::support::{PartialUpdateModel, TableSpec, without};
use crate::{keyed_spec, kind_of, maybe, random_commits, row};

/// Plain partial update ordered by `sequence.field` (the model folds each commit by
/// sequence, then the commits).
pub(crate) fn partial_update_case(partitioned: bool) -> Case {
    let spec = keyed_spec(
        "db.partial",
        &["seq:BIGINT", "a:STRING", "b:INT", "c:DOUBLE"],
        partitioned,
    )
    .merge_engine("partial-update")
    .sequence_field(&["seq"]);
    let commits = random_commits(0x9A27, &spec, 4, 30, 10, &[("+I", 1)], |rng, _, row| {
        row.insert("seq".into(), json!(rng.random_range(0..20)));
        row.insert(
            "a".into(),
            maybe(rng, 0.5, |rng| {
                json!(format!("a{}", rng.random_range(0..9)))
            }),
        );
        row.insert(
            "b".into(),
            maybe(rng, 0.5, |rng| json!(rng.random_range(-9..9))),
        );
        row.insert(
            "c".into(),
            maybe(rng, 0.5, |rng| json!(rng.random_range(-8..8) as f64 / 4.0)),
        );
    });
    let mut model = PartialUpdateModel::new(&spec);
    for commit in &commits {
        let rows: Vec<Value> = commit.iter().map(|r| without(r, ROW_KIND)).collect();
        model.commit(&rows);
    }
    Case {
        expected: Some(model.rows()),
        spec,
        commits,
    }
}

/// `partial-update.ignore-delete`: retractions are dropped, the rest folds in arrival
/// order (the model with no sequence field).
fn partial_update_ignore_delete_case(partitioned: bool) -> Case {
    let spec = keyed_spec("db.partial_ignore", &["a:STRING", "b:INT"], partitioned)
        .merge_engine("partial-update")
        .option("partial-update.ignore-delete", "true");
    let kinds = [("+I", 4), ("+U", 2), ("-U", 1), ("-D", 2)];
    let commits = random_commits(0x16DE, &spec, 4, 30, 12, &kinds, |rng, _, row| {
        row.insert(
            "a".into(),
            maybe(rng, 0.6, |rng| {
                json!(format!("a{}", rng.random_range(0..9)))
            }),
        );
        row.insert(
            "b".into(),
            maybe(rng, 0.6, |rng| json!(rng.random_range(-9..9))),
        );
    });
    let mut model = PartialUpdateModel::new(&spec);
    for commit in &commits {
        let adds: Vec<Value> = commit
            .iter()
            .filter(|r| matches!(kind_of(r), "+I" | "+U"))
            .map(|r| without(r, ROW_KIND))
            .collect();
        model.commit(&adds);
    }
    Case {
        expected: Some(model.rows()),
        spec,
        commits,
    }
}

/// `partial-update.remove-record-on-delete`: a -D removes the row, a -U is ignored.
/// (An insert merged right after a -D with values is in
/// [`java_1_4_2_restarts_a_merge_from_every_column_of_a_retraction`].)
fn remove_record_on_delete_case() -> Case {
    let spec = TableSpec::new(
        "db.partial_remove",
        &["id:INT", "a:STRING", "b:INT"],
        &["id"],
        2,
    )
    .merge_engine("partial-update")
    .option("partial-update.remove-record-on-delete", "true");
    let commits = vec![
        vec![
            row("+I", json!({"id": 1, "a": "one", "b": 1})),
            row("+I", json!({"id": 2, "a": "two", "b": 2})),
            row("+I", json!({"id": 3, "a": "three", "b": 3})),
            row("+I", json!({"id": 4, "a": "four"})),
        ],
        vec![
            // A -U changes nothing.
            row("-U", json!({"id": 1, "a": "one", "b": 1})),
            row("+U", json!({"id": 1, "b": 10})),
            // Removed for good.
            row("-D", json!({"id": 2, "a": "two", "b": 2})),
            // Removed and inserted again in one commit: the commit folds into an insert,
            // so the older file's `a` stays (Paimon folds each commit first).
            row("-D", json!({"id": 3, "a": "three", "b": 3})),
            row("+I", json!({"id": 3, "b": 30})),
        ],
        vec![
            // Removed by a -D without values, inserted again in a later commit.
            row("-D", json!({"id": 4})),
        ],
        vec![row("+I", json!({"id": 4, "b": 40}))],
    ];
    let expected = vec![
        json!({"id": 1, "a": "one", "b": 10}),
        json!({"id": 3, "a": "three", "b": 30}),
        json!({"id": 4, "a": null, "b": 40}),
    ];
    Case {
        spec,
        commits,
        expected: Some(expected),
    }
}

#[test]
fn partial_update_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(partial_update_case(false));
}

#[test]
fn partial_update_partitioned_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(partial_update_case(true));
}

#[test]
fn partial_update_ignore_delete_partitioned_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(partial_update_ignore_delete_case(true));
}

#[test]
fn partial_update_ignore_delete_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(partial_update_ignore_delete_case(false));
}

#[test]
fn partial_update_remove_record_on_delete_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(remove_record_on_delete_case());
}

#[test]
fn partial_update_remove_record_on_delete_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(remove_record_on_delete_case());
}

/// Two sequence groups: each group follows its own sequence column (nulls first), a
/// newer-or-equal version sets the whole group (nulls too), a winning -U/-D clears it.
pub(crate) fn sequence_groups_case() -> Case {
    let spec = TableSpec::new(
        "db.groups",
        &[
            "id:INT", "g1:INT", "a:STRING", "b:STRING", "g2:INT", "c:STRING", "d:INT",
        ],
        &["id"],
        2,
    )
    .merge_engine("partial-update")
    .option("fields.g1.sequence-group", "a,b")
    .option("fields.g2.sequence-group", "c,d");
    let commits = vec![
        vec![
            row("+I", json!({"id": 1, "g1": 1, "a": "a1", "b": "b1"})),
            row("+I", json!({"id": 1, "g2": 5, "c": "c5", "d": 5})),
            row(
                "+I",
                json!({"id": 2, "g1": 3, "a": "a3", "g2": 1, "c": "c1", "d": 1}),
            ),
            row(
                "+I",
                json!({"id": 3, "g1": 1, "a": "x", "b": "y", "g2": 1, "c": "z", "d": 9}),
            ),
        ],
        vec![
            // Older in group 1: ignored; newer in group 2: c becomes null.
            row("+I", json!({"id": 1, "g1": 0, "a": "old", "b": "old"})),
            row("+I", json!({"id": 1, "g2": 6, "d": 6})),
            // Equal sequence: updates.
            row("+I", json!({"id": 2, "g1": 3, "a": "tie", "b": "tie"})),
            // A retraction winning group 1 clears it.
            row("-U", json!({"id": 3, "g1": 2, "a": "x", "b": "y"})),
        ],
        vec![
            // An older retraction changes nothing.
            row("-D", json!({"id": 2, "g2": 0, "c": "c1", "d": 1})),
            row("+I", json!({"id": 3, "g1": 1, "a": "late", "b": "late"})),
            // Inserted and cleared in one commit: the row stays, with group 1 empty.
            row("+I", json!({"id": 4, "g1": 1, "a": "four"})),
            row("-D", json!({"id": 4, "g1": 2, "a": "four"})),
        ],
    ];
    let g = |id: i32, g1: Value, a: Value, b: Value, g2: Value, c: Value, d: Value| json!({"id": id, "g1": g1, "a": a, "b": b, "g2": g2, "c": c, "d": d});
    let null = Value::Null;
    let expected = vec![
        g(
            1,
            json!(1),
            json!("a1"),
            json!("b1"),
            json!(6),
            null.clone(),
            json!(6),
        ),
        g(
            2,
            json!(3),
            json!("tie"),
            json!("tie"),
            json!(1),
            json!("c1"),
            json!(1),
        ),
        g(
            3,
            json!(2),
            null.clone(),
            null.clone(),
            json!(1),
            json!("z"),
            json!(9),
        ),
        g(
            4,
            json!(2),
            null.clone(),
            null.clone(),
            null.clone(),
            null.clone(),
            null,
        ),
    ];
    Case {
        spec,
        commits,
        expected: Some(expected),
    }
}

/// Aggregate functions inside sequence groups: `total` sums (an older version still
/// counts, a retraction subtracts), `tags` joins; a -D winning group `g2` removes the row
/// (`partial-update.remove-record-on-sequence-group`).
fn group_aggregates_case() -> Case {
    let spec = TableSpec::new(
        "db.group_aggregates",
        &[
            "id:INT",
            "g1:INT",
            "total:BIGINT",
            "latest:STRING",
            "g2:INT",
            "tags:STRING",
        ],
        &["id"],
        2,
    )
    .merge_engine("partial-update")
    .option("fields.g1.sequence-group", "total,latest")
    .option("fields.total.aggregate-function", "sum")
    .option("fields.g2.sequence-group", "tags")
    .option("fields.tags.aggregate-function", "listagg")
    .option("fields.tags.ignore-retract", "true")
    .option("partial-update.remove-record-on-sequence-group", "g2");
    let commits = vec![
        vec![
            row("+I", json!({"id": 1, "g1": 1, "total": 10, "latest": "a"})),
            row("+I", json!({"id": 1, "g2": 1, "tags": "x"})),
            row(
                "+I",
                json!({"id": 2, "g1": 1, "total": 5, "latest": "p", "g2": 1, "tags": "t"}),
            ),
        ],
        vec![
            // Older: sums anyway, `latest` stays.
            row("+I", json!({"id": 1, "g1": 0, "total": 3, "latest": "old"})),
            row("+I", json!({"id": 1, "g2": 2, "tags": "y"})),
            // Added and retracted in one commit: +0; `latest` is cleared.
            row("+I", json!({"id": 2, "g1": 2, "total": 4, "latest": "r"})),
            row("-U", json!({"id": 2, "g1": 2, "total": 4, "latest": "r"})),
        ],
        vec![
            row("+I", json!({"id": 2, "g1": 3, "total": 7, "latest": "q"})),
            row("-D", json!({"id": 1, "g2": 3, "tags": "x,y"})),
            row(
                "+I",
                json!({"id": 3, "g1": 1, "total": 1, "g2": 1, "tags": "u"}),
            ),
            row("+I", json!({"id": 3, "g2": 2, "tags": "w"})),
        ],
    ];
    let expected = vec![
        json!({"id": 2, "g1": 3, "total": 12, "latest": "q", "g2": 1, "tags": "t"}),
        json!({"id": 3, "g1": 1, "total": 1, "latest": null, "g2": 2, "tags": "u,w"}),
    ];
    Case {
        spec,
        commits,
        expected: Some(expected),
    }
}

#[test]
fn partial_update_sequence_groups_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(sequence_groups_case());
}

#[test]
fn partial_update_sequence_groups_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(sequence_groups_case());
}

#[test]
fn partial_update_group_aggregates_lakejoin_writes_java_reads() {
    lakejoin_writes_java_reads(group_aggregates_case());
}

#[test]
fn partial_update_group_aggregates_java_writes_lakejoin_reads() {
    java_writes_lakejoin_reads(group_aggregates_case());
}

/// With `partial-update.remove-record-on-sequence-group`, a -U alone in its commit clears
/// its group and a -D alone removes the row, in later merges too (lakejoin used to fold the
/// -U into a delete, which removed the row, and to write the folded -D without its sequence
/// field, which then removed nothing).
#[test]
fn sequence_group_lone_retractions_clear_or_remove() {
    let spec = TableSpec::new(
        "db.lone_group",
        &["id:INT", "s1:INT", "a:STRING"],
        &["id"],
        1,
    )
    .merge_engine("partial-update")
    .option("fields.s1.sequence-group", "a")
    .option("partial-update.remove-record-on-sequence-group", "s1");
    lakejoin_writes_as_java_does(Case {
        spec,
        commits: vec![
            vec![
                row("+I", json!({"id": 1, "s1": 1, "a": "x"})),
                row("+I", json!({"id": 2, "s1": 1, "a": "y"})),
            ],
            vec![
                row("-U", json!({"id": 1, "s1": 2, "a": "x"})),
                row("-D", json!({"id": 2, "s1": 2, "a": "y"})),
            ],
            vec![row("+I", json!({"id": 3, "s1": 1, "a": "z"}))],
        ],
        expected: Some(vec![
            json!({"id": 1, "s1": 2, "a": null}),
            json!({"id": 3, "s1": 1, "a": "z"}),
        ]),
    });
}
