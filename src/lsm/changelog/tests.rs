//! Property tests of the `lookup` changelog against models of the merged rows.
//!
//! Random commits of changes to a few keys are folded as a flush folds them, and each
//! key's changelog is computed against what the earlier commits reduce to. Replaying
//! the changelog onto an empty view (`+I`/`+U` put the row, `-U`/`-D` remove it, and
//! must name the row the view holds) must give, after every commit:
//! - for deduplicate, partial-update, aggregation (`sum`) and first-row: the rows of an
//!   independent model of the engine (last row, last non-null per column, sums, first
//!   row);
//! - for partial-update with sequence groups: the merged rows the engine reads.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::lookup_change;
use crate::lsm::merge::{MergeEngine, SequenceOrder, sort_and_fold};
use crate::table::data_file::KeyValue;
use crate::table::datum::{Datum, Row};
use crate::table::options::TableOptions;
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// A table `k INT` (key), `a INT`, `b INT`, `g INT` with `options`.
fn engine(options: &[(&str, &str)]) -> (MergeEngine, SequenceOrder) {
    let mut map: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.insert("bucket".into(), "1".into());
    let int = DataType::Int;
    let schema = TableSchema::new(
        vec![
            ("k".into(), int, false),
            ("a".into(), int, true),
            ("b".into(), int, true),
            ("g".into(), int, true),
        ],
        vec![],
        vec!["k".into()],
        map,
    )
    .unwrap();
    let options = TableOptions::from_map(&schema.options).unwrap();
    (
        MergeEngine::new(&schema, &options).unwrap(),
        SequenceOrder::new(&schema, &options).unwrap(),
    )
}

/// One change as generated: key, kind, a, b, g.
type Gen = (i32, RowKind, Option<i32>, Option<i32>, Option<i32>);

fn int(v: Option<i32>) -> Datum {
    v.map_or(Datum::Null, Datum::Int)
}

fn row(c: &Gen) -> Row {
    vec![Datum::Int(c.0), int(c.2), int(c.3), int(c.4)]
}

/// The view a changelog replays into, checking each retraction against it.
#[derive(Default)]
struct View(BTreeMap<i32, Row>);

impl View {
    fn apply(&mut self, change: &KeyValue) {
        let Datum::Int(k) = change.row[0] else {
            panic!("key {:?}", change.row[0])
        };
        match change.kind {
            RowKind::Insert | RowKind::UpdateAfter => {
                if change.kind == RowKind::Insert {
                    assert!(!self.0.contains_key(&k), "+I of key {k} the view holds");
                }
                self.0.insert(k, change.row.clone());
            }
            RowKind::UpdateBefore | RowKind::Delete => {
                assert_eq!(
                    self.0.remove(&k).as_ref(),
                    Some(&change.row),
                    "{:?} of key {k} must be the row the view holds",
                    change.kind
                );
            }
        }
    }
}

/// Replays `commits` through `lookup_change`, returning the view after each commit and
/// the merged rows the engine reads after it.
fn replay(
    engine: &MergeEngine,
    order: &SequenceOrder,
    row_deduplicate: bool,
    commits: &[Vec<Gen>],
) -> Vec<(BTreeMap<i32, Row>, BTreeMap<i32, Row>)> {
    let mut states: BTreeMap<i32, Option<KeyValue>> = BTreeMap::new();
    let mut view = View::default();
    let mut seq = 0;
    let mut out = Vec::new();
    for commit in commits {
        let versions: Vec<KeyValue> = commit
            .iter()
            .map(|c| {
                seq += 1;
                KeyValue {
                    sequence_number: seq,
                    kind: c.1,
                    row: row(c),
                }
            })
            .collect();
        for folded in sort_and_fold(versions, &[0], order, engine).unwrap() {
            let Datum::Int(k) = folded.row[0] else {
                unreachable!()
            };
            let before = states.get(&k).cloned().flatten();
            let outcome = lookup_change(engine, order, row_deduplicate, before, folded).unwrap();
            for change in &outcome.changes {
                view.apply(change);
            }
            states.insert(k, outcome.after);
        }
        let merged = states
            .iter()
            .filter_map(|(k, s)| {
                s.as_ref()
                    .filter(|kv| !kv.kind.is_retract())
                    .map(|kv| (*k, kv.row.clone()))
            })
            .collect();
        out.push((view.0.clone(), merged));
    }
    out
}

fn kind_of(retract: bool, delete: bool) -> RowKind {
    match (retract, delete) {
        (false, false) => RowKind::Insert,
        (false, true) => RowKind::UpdateAfter,
        (true, false) => RowKind::UpdateBefore,
        (true, true) => RowKind::Delete,
    }
}

/// Commits of changes to keys 0..4; `retractions` allows -U/-D.
fn commits(retractions: bool) -> impl Strategy<Value = Vec<Vec<Gen>>> {
    let value = proptest::option::weighted(0.7, 0..5i32);
    let change = (
        0..4i32,
        any::<bool>(),
        any::<bool>(),
        value.clone(),
        value.clone(),
        value,
    )
        .prop_map(move |(k, r, d, a, b, g)| (k, kind_of(retractions && r, d), a, b, g));
    proptest::collection::vec(proptest::collection::vec(change, 1..6), 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn deduplicate_changelog_replays_to_the_last_row(commits in commits(true), dedup in any::<bool>()) {
        let (engine, order) = engine(&[]);
        let mut model: BTreeMap<i32, Row> = BTreeMap::new();
        for (commit, (view, merged)) in commits.iter().zip(replay(&engine, &order, dedup, &commits)) {
            for c in commit {
                // The newest version wins; a retraction (-U or -D) removes the key.
                if c.1.is_retract() { model.remove(&c.0); } else { model.insert(c.0, row(c)); }
            }
            prop_assert_eq!(&view, &model);
            prop_assert_eq!(&view, &merged);
        }
    }

    #[test]
    fn partial_update_changelog_replays_to_the_last_non_null_values(commits in commits(false)) {
        let (engine, order) = engine(&[("merge-engine", "partial-update")]);
        let mut model: BTreeMap<i32, Row> = BTreeMap::new();
        for (commit, (view, _)) in commits.iter().zip(replay(&engine, &order, false, &commits)) {
            for c in commit {
                let slot = model.entry(c.0).or_insert_with(|| vec![Datum::Int(c.0), Datum::Null, Datum::Null, Datum::Null]);
                for (i, v) in [c.2, c.3, c.4].into_iter().enumerate() {
                    if let Some(v) = v { slot[i + 1] = Datum::Int(v); }
                }
            }
            prop_assert_eq!(&view, &model);
        }
    }

    #[test]
    fn partial_update_with_sequence_groups_replays_to_the_merged_rows(commits in commits(true)) {
        // Column `g` orders the group of `a` and `b`; retractions clear the group.
        let (engine, order) = engine(&[
            ("merge-engine", "partial-update"),
            ("fields.g.sequence-group", "a,b"),
        ]);
        for (view, merged) in replay(&engine, &order, false, &commits) {
            prop_assert_eq!(view, merged);
        }
    }

    #[test]
    fn aggregation_changelog_replays_to_the_sums(commits in commits(true), dedup in any::<bool>()) {
        let (engine, order) = engine(&[
            ("merge-engine", "aggregation"),
            ("fields.a.aggregate-function", "sum"),
            ("fields.b.aggregate-function", "sum"),
            ("fields.g.aggregate-function", "sum"),
        ]);
        for (view, merged) in replay(&engine, &order, dedup, &commits) {
            prop_assert_eq!(&view, &merged);
        }
        // And the sums themselves, for keys never retracted below what they were given.
        let commits: Vec<Vec<Gen>> = commits
            .into_iter()
            .map(|c| c.into_iter().map(|(k, _, a, b, g)| (k, RowKind::Insert, a, b, g)).collect())
            .collect();
        let mut sums: BTreeMap<i32, [Option<i32>; 3]> = BTreeMap::new();
        for (commit, (view, _)) in commits.iter().zip(replay(&engine, &order, dedup, &commits)) {
            for c in commit {
                let s = sums.entry(c.0).or_default();
                for (slot, v) in s.iter_mut().zip([c.2, c.3, c.4]) {
                    if let Some(v) = v { *slot = Some(slot.unwrap_or(0) + v); }
                }
            }
            let model: BTreeMap<i32, Row> = sums
                .iter()
                .map(|(k, s)| (*k, vec![Datum::Int(*k), int(s[0]), int(s[1]), int(s[2])]))
                .collect();
            prop_assert_eq!(&view, &model);
        }
    }

    #[test]
    fn first_row_changelog_is_one_insert_per_key(commits in commits(false)) {
        let (engine, order) = engine(&[("merge-engine", "first-row")]);
        let mut model: BTreeMap<i32, Row> = BTreeMap::new();
        for (commit, (view, _)) in commits.iter().zip(replay(&engine, &order, false, &commits)) {
            for c in commit {
                model.entry(c.0).or_insert_with(|| row(c));
            }
            prop_assert_eq!(&view, &model);
        }
    }
}

#[test]
fn row_deduplicate_drops_an_update_that_changes_nothing() {
    let (engine, order) = engine(&[]);
    let kv = |seq, a| KeyValue {
        sequence_number: seq,
        kind: RowKind::Insert,
        row: vec![Datum::Int(1), Datum::Int(a), Datum::Null, Datum::Null],
    };
    let changes = lookup_change(&engine, &order, true, Some(kv(1, 5)), kv(2, 5))
        .unwrap()
        .changes;
    assert!(changes.is_empty());
    let changes = lookup_change(&engine, &order, false, Some(kv(1, 5)), kv(2, 5))
        .unwrap()
        .changes;
    let kinds: Vec<RowKind> = changes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [RowKind::UpdateBefore, RowKind::UpdateAfter]);
    // The -U carries the before image with its own sequence number, the +U the after.
    assert_eq!(
        (changes[0].sequence_number, changes[1].sequence_number),
        (1, 2)
    );
}

#[test]
fn a_lone_retraction_of_a_new_aggregation_key_is_merged_as_java_merges_it() {
    let (agg, agg_order) = engine(&[
        ("merge-engine", "aggregation"),
        ("fields.a.aggregate-function", "sum"),
    ]);
    let minus = KeyValue {
        sequence_number: 3,
        kind: RowKind::UpdateBefore,
        row: vec![Datum::Int(1), Datum::Int(4), Datum::Null, Datum::Null],
    };
    let outcome = lookup_change(&agg, &agg_order, false, None, minus).unwrap();
    // Java's lookup compaction merges the -U alone: an insert of -4, in the data file
    // and in the changelog.
    assert_eq!(outcome.written.kind, RowKind::Insert);
    assert_eq!(outcome.written.row[1], Datum::Int(-4));
    let kinds: Vec<RowKind> = outcome.changes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [RowKind::Insert]);
    // A deduplicate -D of a new key stays a -D and changes nothing.
    let (dedup, dedup_order) = engine(&[]);
    let delete = KeyValue {
        sequence_number: 1,
        kind: RowKind::Delete,
        row: vec![Datum::Int(1), Datum::Null, Datum::Null, Datum::Null],
    };
    let outcome = lookup_change(&dedup, &dedup_order, false, None, delete).unwrap();
    assert_eq!(outcome.written.kind, RowKind::Delete);
    assert!(outcome.changes.is_empty());
}
