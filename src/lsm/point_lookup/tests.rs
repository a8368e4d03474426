//! Point lookups against a model merge, and local lookup files that go missing, get
//! corrupted or overflow their size bound.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::{LookupOptions, PointLookup};
use crate::lsm::compact::full_compact;
use crate::lsm::writer::TableWriter;
use crate::table::datum::{Datum, Row};
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;
use crate::table::types::{DataType, MAX_LENGTH};
use crate::table::{Table, TableIdentifier, Warehouse};

/// Key (id, tag), a nullable value.
fn schema(options: &[(&str, &str)]) -> TableSchema {
    let mut map = BTreeMap::from([("bucket".to_string(), "2".to_string())]);
    for (k, v) in options {
        map.insert(k.to_string(), v.to_string());
    }
    TableSchema::new(
        vec![
            ("id".into(), DataType::Int, false),
            ("tag".into(), DataType::Varchar(MAX_LENGTH), false),
            ("value".into(), DataType::Varchar(MAX_LENGTH), true),
        ],
        vec![],
        vec!["id".into(), "tag".into()],
        map,
    )
    .unwrap()
}

fn tag(id: i32) -> String {
    // Short (inline) and long (variable-part) strings.
    if id % 2 == 0 {
        format!("t{id}")
    } else {
        format!("a-longer-tag-{id}")
    }
}

fn key(id: i32) -> Vec<Datum> {
    vec![Datum::Int(id), Datum::String(tag(id).into())]
}

fn row(id: i32, value: Option<&str>) -> Row {
    vec![
        Datum::Int(id),
        Datum::String(tag(id).into()),
        value.map_or(Datum::Null, |v| Datum::String(v.into())),
    ]
}

async fn create(options: &[(&str, &str)]) -> Arc<Table> {
    Arc::new(
        Table::create(
            &Warehouse::in_memory(),
            &TableIdentifier::parse("t.lookups").unwrap(),
            schema(options),
        )
        .await
        .unwrap(),
    )
}

#[derive(Debug, Clone)]
struct Change {
    delete: bool,
    id: i32,
    value: Option<String>,
}

fn change() -> impl Strategy<Value = Change> {
    (
        prop::bool::weighted(0.2),
        0..40i32,
        prop::option::of("[a-z]{0,12}"),
    )
        .prop_map(|(delete, id, value)| Change { delete, id, value })
}

async fn write(table: &Arc<Table>, changes: &[Change]) {
    let mut w = TableWriter::new(table.clone(), "test").await.unwrap();
    for c in changes {
        let kind = if c.delete {
            RowKind::Delete
        } else {
            RowKind::Insert
        };
        w.write(kind, row(c.id, c.value.as_deref())).unwrap();
    }
    w.commit(BTreeMap::new()).await.unwrap();
}

/// Commits of changes, a full compaction after `compact_after` of them; every key looked
/// up one by one and in a batch equals the model: the last change of each key wins
/// (deduplicate), a delete removes it; partial-update keeps the last non-null value
/// (deletes left out).
async fn check(partial_update: bool, commits: Vec<Vec<Change>>, compact_after: usize) {
    let options: &[(&str, &str)] = if partial_update {
        &[("merge-engine", "partial-update")]
    } else {
        &[]
    };
    let table = create(options).await;
    // A partial-update delete followed by an update in one commit is merged in the
    // writer's buffer, which the simple model does not follow: no deletes there.
    let commits: Vec<Vec<Change>> = commits
        .into_iter()
        .map(|changes| {
            changes
                .into_iter()
                .map(|c| Change {
                    delete: c.delete && !partial_update,
                    ..c
                })
                .collect()
        })
        .collect();
    let mut model: BTreeMap<i32, Row> = BTreeMap::new();
    for (i, changes) in commits.iter().enumerate() {
        write(&table, changes).await;
        if i + 1 == compact_after {
            full_compact(&table, "compact").await.unwrap();
        }
        for c in changes {
            if c.delete {
                model.remove(&c.id);
            } else if partial_update {
                let current = model.entry(c.id).or_insert_with(|| row(c.id, None));
                if let Some(v) = &c.value {
                    current[2] = Datum::String(v.clone().into());
                }
            } else {
                model.insert(c.id, row(c.id, c.value.as_deref()));
            }
        }
    }
    let lookup = PointLookup::open(table, LookupOptions::default())
        .await
        .unwrap();
    let keys: Vec<Vec<Datum>> = (-1..45).map(key).collect();
    let batch = lookup.get_many(&keys).await.unwrap();
    for (id, got_in_batch) in (-1..45).zip(batch) {
        let want = model.get(&id).cloned();
        assert_eq!(lookup.get(&key(id)).await.unwrap(), want, "key {id}");
        assert_eq!(got_in_batch, want, "key {id} in a batch");
    }
    // The key with another tag is another key.
    let other = vec![Datum::Int(2), Datum::String("t3".into())];
    assert_eq!(lookup.get(&other).await.unwrap(), None);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn lookups_equal_a_model_merge(
        commits in prop::collection::vec(prop::collection::vec(change(), 1..40), 1..6),
        compact_after in 0..6usize,
    ) {
        tokio::runtime::Runtime::new().unwrap().block_on(check(false, commits, compact_after));
    }

    #[test]
    fn partial_update_lookups_equal_a_model_merge(
        commits in prop::collection::vec(prop::collection::vec(change(), 1..40), 1..6),
        compact_after in 0..6usize,
    ) {
        tokio::runtime::Runtime::new().unwrap().block_on(check(true, commits, compact_after));
    }
}

fn local_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

/// A table of ids 0..100 in three commits (several files per bucket).
async fn three_commits() -> Arc<Table> {
    let table = create(&[]).await;
    for part in 0..3 {
        let changes: Vec<Change> = (0..100)
            .filter(|id| id % 3 == part)
            .map(|id| Change {
                delete: false,
                id,
                value: Some(format!("v{id}")),
            })
            .collect();
        write(&table, &changes).await;
    }
    table
}

/// A lookup of [`three_commits`] that keeps its local files in `dir`, with `options`
/// otherwise.
async fn three_commits_cached_in(dir: &std::path::Path, options: LookupOptions) -> PointLookup {
    let options = LookupOptions {
        local_cache_dir: Some(dir.to_path_buf()),
        ..options
    };
    PointLookup::open(three_commits().await, options)
        .await
        .unwrap()
}

async fn assert_all_found(lookup: &PointLookup) {
    for id in 0..100 {
        let want = row(id, Some(&format!("v{id}")));
        assert_eq!(lookup.get(&key(id)).await.unwrap(), Some(want), "key {id}");
    }
}

/// Page budgets the damage tests run with: every record read from the file, and pages
/// held (the default).
const PAGE_BUDGETS: [Option<u64>; 2] = [Some(0), None];

#[tokio::test]
async fn damaged_local_files_are_built_again() {
    for pages in PAGE_BUDGETS {
        damaged_local_files_are_built_again_with(pages).await;
    }
}

async fn damaged_local_files_are_built_again_with(page_cache_max_bytes: Option<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let options = LookupOptions {
        // Files are opened again for every lookup in another file (and their held pages
        // let go).
        max_open_files: 1,
        page_cache_max_bytes,
        ..LookupOptions::default()
    };
    let lookup = three_commits_cached_in(dir.path(), options).await;
    assert_all_found(&lookup).await;
    let files = local_files(dir.path());
    assert_eq!(files.len(), 6, "{files:?}");

    // Truncated in place (a full disk), then overwritten with garbage, then deleted.
    for file in &files {
        let len = std::fs::metadata(file).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(file)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    }
    assert_all_found(&lookup).await;
    for file in local_files(dir.path()) {
        let len = std::fs::metadata(&file).unwrap().len() as usize;
        std::fs::write(&file, vec![0xA5u8; len]).unwrap();
    }
    assert_all_found(&lookup).await;
    for file in local_files(dir.path()) {
        std::fs::remove_file(file).unwrap();
    }
    // The one file still open reads on from its descriptor; the others are built again.
    assert_all_found(&lookup).await;
    assert!(local_files(dir.path()).len() >= 5);
}

#[tokio::test]
async fn bytes_flipped_in_open_files_are_rebuilt_not_returned() {
    for page_cache_max_bytes in PAGE_BUDGETS {
        let options = LookupOptions {
            page_cache_max_bytes,
            ..LookupOptions::default()
        };
        bytes_flipped_in_open_files_are_rebuilt_not_returned_with(options).await;
    }
}

async fn bytes_flipped_in_open_files_are_rebuilt_not_returned_with(options: LookupOptions) {
    let dir = tempfile::tempdir().unwrap();
    let lookup = three_commits_cached_in(dir.path(), options).await;
    assert_all_found(&lookup).await;
    // Every record region corrupted in place while the files are open.
    for file in local_files(dir.path()) {
        let mut bytes = std::fs::read(&file).unwrap();
        let records = bytes.len().saturating_sub(200);
        for b in bytes.iter_mut().take(records).step_by(5) {
            *b ^= 0x11;
        }
        std::fs::write(&file, bytes).unwrap();
    }
    assert_all_found(&lookup).await;
}

#[tokio::test]
async fn local_files_stay_within_their_bound() {
    let dir = tempfile::tempdir().unwrap();
    let options = LookupOptions {
        // About one file (each is a few KiB).
        local_cache_max_bytes: 4 * 1024,
        ..LookupOptions::default()
    };
    let lookup = three_commits_cached_in(dir.path(), options).await;
    for _ in 0..3 {
        assert_all_found(&lookup).await;
    }
    lookup.lookup_files.weighted_bytes().await;
    let left = local_files(dir.path());
    assert!(left.len() < 6, "{left:?}");
    assert!(
        left.iter()
            .all(|f| f.extension().is_some_and(|e| e == "lkp"))
    );
}

#[tokio::test]
async fn keys_of_other_types_are_misses_not_errors() {
    let table = three_commits().await;
    let lookup = PointLookup::open(table, LookupOptions::default())
        .await
        .unwrap();
    // Bucketing needs the right types; a wrong number of key values is a data error.
    assert!(lookup.get(&[Datum::Int(1)]).await.is_err());
    assert_eq!(
        lookup
            .get(&[Datum::Int(1), Datum::String("nope".into())])
            .await
            .unwrap(),
        None
    );
}
