use super::super::pages::PAGE_BYTES;
use super::*;

fn no_pages() -> Arc<PageBudget> {
    PageBudget::new(0)
}

/// Page budgets a file is read with: none (every record read from the file), two pages
/// (the first records from pages, the others from the file) and room for every page.
fn budgets() -> [Arc<PageBudget>; 3] {
    [
        no_pages(),
        PageBudget::new(2 * PAGE_BYTES),
        PageBudget::new(1 << 30),
    ]
}

/// Key, sequence number, row kind, value.
type Record = (Vec<u8>, i64, RowKind, Vec<u8>);

fn write(dir: &Path, hash: KeyHash, records: &[Record]) -> PathBuf {
    let target = dir.join("file.lookup");
    let mut w = LookupFileWriter::create_with(&target, hash).unwrap();
    for (k, s, kind, v) in records {
        w.add(k, *s, *kind, v).unwrap();
    }
    let built = w.finish().unwrap();
    assert_eq!(built.file_bytes, std::fs::metadata(&target).unwrap().len());
    assert_eq!(built.records, records.len() as u64);
    target
}

fn get(file: &LookupFile, key: &[u8]) -> Result<Vec<(i64, RowKind, Vec<u8>)>> {
    let mut out = Vec::new();
    file.get(key, &mut Vec::new(), |r| {
        out.push((r.sequence_number, r.kind, r.value.to_vec()));
        Ok(())
    })?;
    Ok(out)
}

/// `sample(n)` written with the real key hash in a new temporary directory (dropped with
/// the returned guard).
fn sample_file(n: usize) -> (tempfile::TempDir, Vec<Record>, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let records = sample(n);
    let path = write(dir.path(), key_hash, &records);
    (dir, records, path)
}

fn sample(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let kind = if i % 7 == 3 {
                RowKind::Delete
            } else {
                RowKind::Insert
            };
            // Some values are longer than the first read.
            let value = vec![i as u8; (i * 37) % 1500];
            (format!("key-{i}").into_bytes(), i as i64 * 3, kind, value)
        })
        .collect()
}

#[test]
fn round_trip() {
    let (dir, records, path) = sample_file(300);
    assert!(!dir.path().join("file.lookup.tmp").exists());
    for budget in budgets() {
        let file = LookupFile::open(&path, &budget).unwrap();
        assert_eq!(file.len(), 300);
        // Twice: the second pass reads the pages the first one kept.
        for _ in 0..2 {
            for (k, s, kind, v) in &records {
                assert_eq!(get(&file, k).unwrap(), vec![(*s, *kind, v.clone())]);
            }
        }
        assert!(get(&file, b"key-300").unwrap().is_empty());
        assert!(get(&file, b"").unwrap().is_empty());
    }
}

#[test]
fn records_are_read_from_held_pages_once_kept() {
    let (_dir, records, path) = sample_file(300);
    let budget = PageBudget::new(1 << 30);
    let file = LookupFile::open(&path, &budget).unwrap();
    for (k, ..) in &records {
        get(&file, k).unwrap();
    }
    let held = budget.held_bytes();
    assert_eq!(held, file.data_end, "every page of the records is held");
    // The file changes under the open lookup file: its records come from memory.
    std::fs::write(&path, b"").unwrap();
    for (k, s, kind, v) in &records {
        let found = get(&file, k);
        // A record across two pages is still read from the file (now empty): an error.
        if let Ok(found) = found {
            assert_eq!(found, vec![(*s, *kind, v.clone())]);
        }
    }
    let from_pages = records
        .iter()
        .filter(|(k, ..)| get(&file, k).is_ok())
        .count();
    assert!(from_pages > records.len() * 9 / 10, "{from_pages}");
    drop(file);
    assert_eq!(budget.held_bytes(), 0);
}

#[test]
fn empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), key_hash, &[]);
    let file = LookupFile::open(&path, &no_pages()).unwrap();
    assert!(file.is_empty());
    assert!(get(&file, b"x").unwrap().is_empty());
}

#[test]
fn hash_collisions_compare_key_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let records = sample(50);
    // Every key has the same hash, and a prefix of keys a quarter of another.
    let constant: KeyHash = |_| 42;
    let path = write(dir.path(), constant, &records);
    for budget in budgets() {
        let file = LookupFile::open_with(&path, constant, &budget).unwrap();
        for (k, s, kind, v) in &records {
            assert_eq!(get(&file, k).unwrap(), vec![(*s, *kind, v.clone())]);
        }
        assert!(get(&file, b"key-").unwrap().is_empty());
        assert!(get(&file, b"missing").unwrap().is_empty());
    }
    // A few buckets of collisions.
    let few: KeyHash = |k| k.len() as u64 % 3;
    let path = write(dir.path(), few, &records);
    let file = LookupFile::open_with(&path, few, &no_pages()).unwrap();
    for (k, s, kind, v) in &records {
        assert_eq!(get(&file, k).unwrap(), vec![(*s, *kind, v.clone())]);
    }
}

#[test]
fn truncated_files_are_errors() {
    let (_dir, _, path) = sample_file(20);
    let bytes = std::fs::read(&path).unwrap();
    for len in [0, 1, 31, 32, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..len]).unwrap();
        let err = LookupFile::open(&path, &no_pages()).expect_err("truncated");
        assert!(err.to_string().contains("file.lookup"), "{err}");
    }
    std::fs::remove_file(&path).unwrap();
    assert!(LookupFile::open(&path, &no_pages()).is_err());
}

#[test]
fn corrupt_bytes_are_errors_or_misses_never_wrong_records() {
    let (_dir, records, path) = sample_file(40);
    let pristine = std::fs::read(&path).unwrap();
    // Every byte, flipped: the file does not open, or every lookup gives the true record
    // or an error.
    for at in (0..pristine.len()).step_by(3) {
        let mut bytes = pristine.clone();
        bytes[at] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        for budget in budgets() {
            let Ok(file) = LookupFile::open(&path, &budget) else {
                continue;
            };
            for (k, s, kind, v) in &records {
                match get(&file, k) {
                    Ok(found) => assert_eq!(found, vec![(*s, *kind, v.clone())], "byte {at}"),
                    Err(e) => assert!(e.to_string().contains("corrupt"), "{e}"),
                }
            }
        }
    }
}

#[test]
fn a_file_that_is_not_a_lookup_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    std::fs::write(&path, vec![7u8; 100]).unwrap();
    assert!(LookupFile::open(&path, &no_pages()).is_err());
}

#[test]
fn an_abandoned_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("file.lookup");
    let mut w = LookupFileWriter::create(&target).unwrap();
    w.add(b"k", 1, RowKind::Insert, b"v").unwrap();
    drop(w);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

proptest::proptest! {
    /// The guessed-then-bracketed search finds what a binary search finds, for even and
    /// uneven hashes, duplicates included.
    #[test]
    fn first_at_least_is_partition_point(
        mut hashes in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::arbitrary::any::<u64>(),
                0u64..16,
                (u64::MAX - 16)..=u64::MAX,
            ],
            0..300,
        ),
        probes in proptest::collection::vec(proptest::arbitrary::any::<u64>(), 1..20),
        picks in proptest::collection::vec(proptest::arbitrary::any::<usize>(), 1..20),
    ) {
        hashes.sort_unstable();
        let mut targets = probes;
        targets.extend([0, 1, 15, u64::MAX, u64::MAX - 1]);
        targets.extend(picks.iter().filter_map(|&i| hashes.get(i % hashes.len().max(1))));
        for t in targets {
            proptest::prop_assert_eq!(
                first_at_least(&hashes, t),
                hashes.partition_point(|&h| h < t),
                "target {}", t
            );
        }
    }
}
