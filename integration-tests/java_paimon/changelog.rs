//! The changelog files of lakejoin's changelog producers (`changelog-producer` =
//! `input`, `lookup` or `full-compaction`), read by Java's streaming and incremental
//! readers and compared with the same reads of a table Java wrote from the same commits,
//! for every merge engine that takes the producer; and lakejoin's own incremental read
//! (`table scan --from-snapshot --audit-log`) of both.
//!
//! Why: Flink jobs downstream of a changelog-producing table read its changelog files,
//! not its data files. Java writes the `lookup` changelog in a COMPACT snapshot after
//! each APPEND, lakejoin in the APPEND snapshot itself (it computes the changes at flush
//! time, through point lookups), so snapshot ids differ; the streaming read, which
//! follows every snapshot with a changelog, must still see the same changes in the same
//! order, key by key. The `full-compaction` changelog is written by full compactions:
//! Java's table is fully compacted by Java (`compact --full`, as Flink's writers do after
//! a checkpoint) where lakejoin's writer compacts its own after each commit, or both by
//! their own `compact --full` after every second commit.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::aggregation::retracting_aggregates_case;
use crate::partial_update::{partial_update_case, sequence_groups_case};
use crate::support::java::ROW_KIND;
use crate::support::{Creator, Table, TableSpec, expect_success, key_of, parse_jsonl};
use crate::{dedup_case, first_row_case};

/// Each key's changes, in the order read: (kind, row without its kind).
type PerKey = BTreeMap<String, Vec<Value>>;

fn per_key(spec: &TableSpec, rows: &[Value], kind_column: &str) -> PerKey {
    let mut out = PerKey::new();
    for row in rows {
        let mut row = row.clone();
        let kind = row
            .as_object_mut()
            .and_then(|o| o.remove(kind_column))
            .unwrap_or_else(|| panic!("no {kind_column} in {row}"));
        let key = key_of(&row, &spec.primary_key);
        out.entry(key)
            .or_default()
            .push(serde_json::json!([kind, row]));
    }
    out
}

/// `lakejoin table scan --from-snapshot FROM --audit-log`.
fn lj_changes(table: &Table, from: u64) -> Vec<Value> {
    let args = vec![
        "--from-snapshot".to_owned(),
        from.to_string(),
        "--audit-log".to_owned(),
    ];
    let out = table.lakejoin(&["table", "scan"], &args, "");
    parse_jsonl(
        "lakejoin table scan --from-snapshot",
        &expect_success("lakejoin table scan --from-snapshot", out),
    )
}

/// Writes `commits` into a Java and a lakejoin table of `spec` with `producer`, and
/// checks that Java's streaming read of both sees the same changes in the same order
/// (and the same changelog record counts), as does lakejoin's incremental read.
fn assert_same_changelog(spec: &TableSpec, producer: &str, commits: &[Vec<Value>]) {
    assert_same_changelog_compacted(spec, producer, commits, None);
}

/// [`assert_same_changelog`]; with `full_every` = `Some(n)` the lakejoin table is
/// `write-only` and both tables are fully compacted by their own `compact --full` after
/// every `n`-th commit instead. Without, a `full-compaction` table is fully compacted by
/// lakejoin's writer, and by Java's `compact --full`, after every commit.
fn assert_same_changelog_compacted(
    spec: &TableSpec,
    producer: &str,
    commits: &[Vec<Value>],
    full_every: Option<usize>,
) {
    let spec = spec.clone().option("changelog-producer", producer);
    let java = Table::create_with_java(spec.clone());
    let lakejoin_spec = match full_every {
        Some(_) => spec.clone().option("write-only", "true"),
        None => spec.clone(),
    };
    let lakejoin = Table::create(lakejoin_spec, Creator::Lakejoin);
    let full_compaction = producer == "full-compaction";
    for (i, commit) in commits.iter().enumerate() {
        java.java_write(commit);
        lakejoin.lj_write(commit, Some(ROW_KIND));
        match full_every {
            Some(n) if (i + 1) % n == 0 => {
                java.java_compact(true);
                lakejoin.lj_compact_full();
            }
            Some(_) => {}
            None if full_compaction => {
                java.java_compact(true);
            }
            None => {}
        }
    }
    for snapshot in lakejoin.java_snapshots() {
        let changelog = snapshot["changelogRecordCount"].as_i64().unwrap_or(0);
        match (producer, snapshot["commitKind"].as_str()) {
            // Every commit is one APPEND snapshot carrying its changelog.
            ("input", Some("APPEND")) => assert!(
                changelog > 0,
                "an APPEND of an input table without changelog: {snapshot}"
            ),
            // Only full compactions write it.
            ("full-compaction", Some("APPEND")) => assert_eq!(
                changelog, 0,
                "an APPEND of a full-compaction table with changelog: {snapshot}"
            ),
            _ => {}
        }
    }
    let counts = |t: &Table| -> i64 {
        t.java_snapshots()
            .iter()
            .map(|s| s["changelogRecordCount"].as_i64().unwrap_or(0))
            .sum()
    };
    let stream = vec![
        "--from-snapshot".to_owned(),
        "1".to_owned(),
        "--timeout-ms".to_owned(),
        "1500".to_owned(),
    ];
    let expected = java.java_changes("stream", &stream);
    let actual = lakejoin.java_changes("stream", &stream);
    assert!(
        !expected.is_empty(),
        "Java's stream of its own table read nothing"
    );
    assert_eq!(
        expected.len(),
        actual.len(),
        "Java's stream: {} changes of Java's table, {} of lakejoin's\nexpected: \
         {expected:#?}\nactual: {actual:#?}",
        expected.len(),
        actual.len()
    );
    let expected = per_key(&spec, &expected, ROW_KIND);
    assert_eq!(
        expected,
        per_key(&spec, &actual, ROW_KIND),
        "Java's stream: Java's table (left) vs lakejoin's (right), key by key"
    );
    assert_eq!(
        counts(&java),
        counts(&lakejoin),
        "changelogRecordCount summed over the snapshots"
    );
    // lakejoin's incremental read sees the same, of either table.
    for (who, table) in [("lakejoin's", &lakejoin), ("Java's", &java)] {
        let mine = per_key(&spec, &lj_changes(table, 0), "rowkind");
        assert_eq!(
            expected, mine,
            "lakejoin's incremental read of {who} table vs Java's stream of Java's"
        );
    }
}

#[test]
fn deduplicate_input_changelog_read_by_java_as_its_own() {
    let case = dedup_case(true);
    assert_same_changelog(&case.spec, "input", &case.commits[..4]);
}

#[test]
fn deduplicate_lookup_changelog_read_by_java_as_its_own() {
    // Unpartitioned: Java 1.4.2's lookup compaction fails on a `/` in a partition value
    // (see `PARTITIONS_WITHOUT_SLASH`).
    let case = dedup_case(false);
    assert_same_changelog(&case.spec, "lookup", &case.commits[..4]);
}

#[test]
fn partial_update_input_changelog_read_by_java_as_its_own() {
    let case = partial_update_case(true);
    assert_same_changelog(&case.spec, "input", &case.commits);
}

#[test]
fn partial_update_lookup_changelog_read_by_java_as_its_own() {
    let case = partial_update_case(false);
    assert_same_changelog(&case.spec, "lookup", &case.commits);
}

#[test]
fn partial_update_sequence_groups_lookup_changelog_read_by_java_as_its_own() {
    let case = sequence_groups_case();
    assert_same_changelog(&case.spec, "lookup", &case.commits);
}

#[test]
fn aggregation_lookup_changelog_read_by_java_as_its_own() {
    let case = retracting_aggregates_case(false);
    assert_same_changelog(&case.spec, "lookup", &case.commits);
}

#[test]
fn first_row_lookup_changelog_read_by_java_as_its_own() {
    let case = first_row_case(false);
    assert_same_changelog(&case.spec, "lookup", &case.commits);
}

#[test]
fn deduplicate_lookup_row_deduplicate_read_by_java_as_its_own() {
    let case = dedup_case(false);
    let spec = case
        .spec
        .clone()
        .option("changelog-producer.row-deduplicate", "true");
    // Every commit twice: the second changes nothing, and produces no -U/+U pairs.
    let commits: Vec<Vec<Value>> = case.commits[..3]
        .iter()
        .flat_map(|c| [c.clone(), c.clone()])
        .collect();
    assert_same_changelog(&spec, "lookup", &commits);
}

/// Java's snapshot expiry keeps every snapshot from a consumer's `nextSnapshot` on, read
/// from a consumer file with the text lakejoin's `[[changelog]]` pipelines write
/// (`table::consumer::consumer_json`, whose unit test pins this text): so Java's
/// maintenance never removes what such a pipeline has not produced yet.
#[test]
fn java_expiry_keeps_what_a_lakejoin_consumer_reads_next() {
    let case = dedup_case(false);
    let table = Table::create(case.spec.clone(), Creator::Lakejoin);
    for commit in case.commits.iter().take(5) {
        table.lj_write(commit, Some(ROW_KIND));
    }
    let ids = |table: &Table| -> Vec<u64> {
        table
            .java_snapshots()
            .iter()
            .map(|s| s["id"].as_u64().expect("snapshot id"))
            .collect()
    };
    // Five commits, and the compactions the writer may have made after them.
    let before = ids(&table);
    let latest = *before.last().expect("snapshots");
    assert!(
        before == (1..=latest).collect::<Vec<_>>() && latest >= 5,
        "{before:?}"
    );
    let consumer = table.path().join("consumer");
    std::fs::create_dir_all(&consumer).unwrap();
    std::fs::write(
        consumer.join("consumer-wide-out"),
        "{\n  \"nextSnapshot\" : 3\n}",
    )
    .unwrap();
    // Without the consumer, keeping one snapshot would expire all but the latest.
    assert_eq!(table.java_expire(1), 2);
    assert_eq!(ids(&table), (3..=latest).collect::<Vec<_>>());
}

#[test]
fn deduplicate_full_compaction_changelog_read_by_java_as_its_own() {
    let case = dedup_case(true);
    assert_same_changelog(&case.spec, "full-compaction", &case.commits[..4]);
}

#[test]
fn deduplicate_full_compaction_row_deduplicate_read_by_java_as_its_own() {
    let case = dedup_case(true);
    let spec = case
        .spec
        .clone()
        .option("changelog-producer.row-deduplicate", "true");
    // Every commit twice: the second changes nothing, and produces no -U/+U pairs.
    let commits: Vec<Vec<Value>> = case.commits[..3]
        .iter()
        .flat_map(|c| [c.clone(), c.clone()])
        .collect();
    assert_same_changelog(&spec, "full-compaction", &commits);
}

#[test]
fn full_compaction_every_second_commit_read_by_java_as_its_own() {
    let case = dedup_case(true);
    assert_same_changelog_compacted(&case.spec, "full-compaction", &case.commits, Some(2));
}

#[test]
fn partial_update_full_compaction_changelog_read_by_java_as_its_own() {
    let case = partial_update_case(true);
    assert_same_changelog(&case.spec, "full-compaction", &case.commits);
}

#[test]
fn partial_update_sequence_groups_full_compaction_changelog_read_by_java_as_its_own() {
    let case = sequence_groups_case();
    assert_same_changelog(&case.spec, "full-compaction", &case.commits);
}

#[test]
fn aggregation_full_compaction_changelog_read_by_java_as_its_own() {
    let case = retracting_aggregates_case(true);
    assert_same_changelog(&case.spec, "full-compaction", &case.commits);
}
