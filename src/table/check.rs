//! `lakejoin table check`: reads every file a snapshot references (schema, manifest
//! lists, manifests, data and changelog files, index manifest and index files) and
//! reports every one that is missing, has the wrong size or does not parse, instead of
//! stopping at the first, so one run tells an operator everything to restore.

use std::collections::BTreeSet;

use futures::StreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::manifest::{self, FileKind, ManifestEntry};
use super::{IO_CONCURRENCY, Table, data_file, live_entries, read_bytes};
use crate::error::{Error, Result};

/// One file that failed the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    /// The object's path in the store.
    pub path: String,
    /// What is wrong with it (missing, size mismatch, decode error).
    pub problem: String,
}

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// The snapshot checked; `None` when the table has no snapshot yet.
    pub snapshot_id: Option<i64>,
    /// Files read (found or not).
    pub files_checked: usize,
    /// Every problem, sorted by path.
    pub problems: Vec<FileProblem>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn add(&mut self, path: impl ToString, problem: impl ToString) {
        self.problems.push(FileProblem {
            path: path.to_string(),
            problem: problem.to_string(),
        });
    }
}

/// Checks snapshot `snapshot_id` (default: the latest). A missing snapshot that was asked
/// for by id is an error; a missing or corrupt file referenced by the snapshot is a
/// problem in the report. Other store failures (unreachable, denied) are errors too: they
/// say nothing about the table's files.
pub async fn check_snapshot(table: &Table, snapshot_id: Option<i64>) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let id = match snapshot_id {
        Some(id) => id,
        None => match table.latest_snapshot_id().await? {
            Some(id) => id,
            None => return Ok(report),
        },
    };
    report.snapshot_id = Some(id);
    report.files_checked += 1;
    let snapshot = match table.snapshot(id).await {
        Ok(s) => s,
        Err(e @ Error::SnapshotNotFound { .. }) if snapshot_id.is_some() => return Err(e),
        Err(Error::CorruptFile { path, source }) => {
            report.add(path, source);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };

    report.files_checked += 1;
    match table.schema_by_id(snapshot.schema_id).await {
        Ok(_) => {}
        Err(Error::CorruptFile { path, source }) => report.add(path, source),
        Err(e) if is_missing(&e) => report.add(
            table.path_of(&format!("schema/schema-{}", snapshot.schema_id)),
            Unreadable::Missing,
        ),
        Err(e) => return Err(e),
    }

    // Manifest lists, then the manifests they name (each once), then their files.
    let mut lists = vec![
        (snapshot.base_manifest_list.as_str(), false),
        (snapshot.delta_manifest_list.as_str(), false),
    ];
    if let Some(changelog) = &snapshot.changelog_manifest_list {
        lists.push((changelog.as_str(), true));
    }
    let mut manifests = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, changelog) in lists {
        let location = table.manifest_path(name);
        report.files_checked += 1;
        match read_checked(table, &location, None).await? {
            Ok(bytes) => match manifest::decode_manifest_list(&bytes) {
                Ok(metas) => {
                    for meta in metas {
                        if seen.insert(meta.file_name.clone()) {
                            manifests.push((meta, changelog));
                        }
                    }
                }
                Err(e) => report.add(&location, e),
            },
            Err(problem) => report.add(&location, problem),
        }
    }
    let mut data_entries = Vec::new();
    let mut changelog_entries = Vec::new();
    for (meta, changelog) in manifests {
        let location = table.manifest_path(&meta.file_name);
        report.files_checked += 1;
        match read_checked(table, &location, Some(meta.file_size)).await? {
            Ok(bytes) => match manifest::decode_manifest(&bytes) {
                Ok(entries) if changelog => changelog_entries.extend(entries),
                Ok(entries) => data_entries.extend(entries),
                Err(e) => report.add(&location, e),
            },
            Err(problem) => report.add(&location, problem),
        }
    }
    let mut files = live_entries(data_entries);
    files.extend(
        changelog_entries
            .into_iter()
            .filter(|e| e.kind == FileKind::Add),
    );
    report.files_checked += files.len();
    let checks: Vec<_> = files.iter().map(|e| check_data_file(table, e)).collect();
    let results: Vec<Result<Option<FileProblem>>> = futures::stream::iter(checks)
        .buffer_unordered(IO_CONCURRENCY)
        .collect()
        .await;
    for result in results {
        if let Some(problem) = result? {
            report.problems.push(problem);
        }
    }

    if let Some(name) = &snapshot.index_manifest {
        check_index(table, name, &mut report).await?;
    }
    report.problems.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report)
}

/// A data or changelog file: present, of the size its manifest entry records, and
/// decodable as Parquet rows of its schema.
async fn check_data_file(table: &Table, entry: &ManifestEntry) -> Result<Option<FileProblem>> {
    let location = match table.data_file_path(entry) {
        Ok(l) => l,
        Err(e) => {
            return Ok(Some(FileProblem {
                path: entry.file.file_name.clone(),
                problem: e.to_string(),
            }));
        }
    };
    let problem = |problem: String| {
        Ok(Some(FileProblem {
            path: location.to_string(),
            problem,
        }))
    };
    let bytes = match read_checked(table, &location, Some(entry.file.file_size)).await? {
        Ok(bytes) => bytes,
        Err(p) => return problem(p.to_string()),
    };
    let file_schema = match table.schema_by_id(entry.file.schema_id).await {
        Ok(s) => s,
        Err(e) => return problem(format!("its schema {}: {e}", entry.file.schema_id)),
    };
    match data_file::decode_data_file(bytes, &file_schema, table.schema()) {
        Ok(_) => Ok(None),
        Err(e) => problem(e.to_string()),
    }
}

/// The index manifest and the index files it lists: present and of the recorded size.
async fn check_index(table: &Table, name: &str, report: &mut CheckReport) -> Result<()> {
    let location = table.manifest_path(name);
    report.files_checked += 1;
    let files = match read_checked(table, &location, None).await? {
        Ok(bytes) => match manifest::decode_index_manifest(&bytes) {
            Ok(files) => files,
            Err(e) => {
                report.add(&location, e);
                return Ok(());
            }
        },
        Err(problem) => {
            report.add(&location, problem);
            return Ok(());
        }
    };
    for file in files {
        report.files_checked += 1;
        if let Some(external) = &file.external_path {
            report.add(
                external,
                "an external index file, which lakejoin does not check",
            );
            continue;
        }
        let location = table.path_of(&format!("index/{}", file.file_name));
        match table.store().head(&location).await {
            Ok(meta) if meta.size == file.file_size as u64 => {}
            Ok(meta) => report.add(
                &location,
                format!(
                    "size {} bytes, the index manifest records {}",
                    meta.size, file.file_size
                ),
            ),
            Err(object_store::Error::NotFound { .. }) => report.add(&location, Unreadable::Missing),
            Err(e) => return Err(Error::store(format!("checking {location}"), e)),
        }
    }
    Ok(())
}

/// Why a file the snapshot references could not be read as recorded: a problem of the
/// table, reported, as opposed to a store failure, which stops the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Unreadable {
    #[error("missing")]
    Missing,
    #[error("size {actual} bytes, its manifest records {recorded}")]
    WrongSize { actual: usize, recorded: i64 },
}

/// The object's bytes, or why it fails the check (missing, wrong size). Store errors
/// other than "not found" are the outer `Err`.
async fn read_checked(
    table: &Table,
    location: &Path,
    expected_size: Option<i64>,
) -> Result<std::result::Result<bytes::Bytes, Unreadable>> {
    match read_bytes(&**table.store(), location).await {
        Ok(bytes) => match expected_size {
            Some(recorded) if recorded != bytes.len() as i64 => Ok(Err(Unreadable::WrongSize {
                actual: bytes.len(),
                recorded,
            })),
            _ => Ok(Ok(bytes)),
        },
        Err(e) if is_missing(&e) => Ok(Err(Unreadable::Missing)),
        Err(e) => Err(e),
    }
}

fn is_missing(e: &Error) -> bool {
    matches!(
        e,
        Error::Store {
            source: object_store::Error::NotFound { .. },
            ..
        }
    )
}
