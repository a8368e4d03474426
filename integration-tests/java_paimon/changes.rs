//! The changes of lakejoin's commits as Java's change readers see them: an incremental read
//! between snapshots (`incremental-between`), the `$audit_log` system table, and a
//! streaming read from the first snapshot, each compared with the same read of a table
//! Java wrote from the same commits.
//!
//! Why: Flink jobs and Spark's incremental queries downstream of lakejoin read its tables
//! this way, not by a merged batch read. They see each commit's delta files with their row
//! kinds, so lakejoin must fold a commit into the same rows (same kinds) as Java's writer
//! and list them in the delta manifests of the same snapshots.

use serde_json::Value;

use crate::dedup_case;
use crate::partial_update::partial_update_case;
use crate::support::java::ROW_KIND;
use crate::support::{Creator, Table, TableSpec, assert_same_rows};

/// Writes `commits` into a Java table and a lakejoin table; both must end up with one
/// APPEND snapshot per commit (no compaction in between), so snapshot ids line up.
fn both_tables(spec: &TableSpec, commits: &[Vec<Value>]) -> (Table, Table) {
    let java = Table::create_with_java(spec.clone());
    let lakejoin = Table::create(spec.clone(), Creator::Lakejoin);
    for commit in commits {
        java.java_write(commit);
        lakejoin.lj_write(commit, Some(ROW_KIND));
    }
    for table in [&java, &lakejoin] {
        let kinds: Vec<Value> = table
            .java_snapshots()
            .iter()
            .map(|s| s["commitKind"].clone())
            .collect();
        assert!(
            kinds.len() == commits.len() && kinds.iter().all(|k| k == "APPEND"),
            "one APPEND snapshot per commit expected: {kinds:?}"
        );
    }
    (java, lakejoin)
}

/// Every change read, on Java's table (expected) and lakejoin's (actual). Rows of one key
/// keep their order in both (commit order); `key` adds the row kind so a key's -U and +U
/// are told apart.
fn assert_same_changes(spec: &TableSpec, commits: &[Vec<Value>]) {
    let (java, lakejoin) = both_tables(spec, commits);
    let last = commits.len();
    let reads: Vec<(&str, Vec<String>)> = vec![
        ("read-incremental", vec!["1".into(), last.to_string()]),
        ("read-incremental", vec!["0".into(), "1".into()]),
        ("audit-log", vec![]),
        (
            "stream",
            vec![
                "--from-snapshot".into(),
                "1".into(),
                "--timeout-ms".into(),
                "1500".into(),
            ],
        ),
    ];
    for (command, args) in reads {
        let expected = java.java_changes(command, &args);
        let actual = lakejoin.java_changes(command, &args);
        assert!(!expected.is_empty(), "java {command} {args:?} read nothing");
        assert_eq!(
            expected.len(),
            actual.len(),
            "java {command} {args:?}: {} changes of Java's table, {} of lakejoin's\n\
             expected: {expected:#?}\nactual: {actual:#?}",
            expected.len(),
            actual.len()
        );
        assert_eq!(
            expected, actual,
            "java {command} {args:?}: Java's table (left) vs lakejoin's (right), in order"
        );
    }
    // And the merged state, for completeness.
    assert_same_rows(
        "Java's table (expected) vs lakejoin's, Java read",
        &java.java_read(None),
        &lakejoin.java_read(None),
        &spec.primary_key,
    );
}

#[test]
fn deduplicate_changes_read_by_java_as_its_own() {
    let case = dedup_case(true);
    assert_same_changes(&case.spec, &case.commits[..4]);
}

#[test]
fn partial_update_changes_read_by_java_as_its_own() {
    let case = partial_update_case(false);
    assert_same_changes(&case.spec, &case.commits[..4]);
}
