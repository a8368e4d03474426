//! Bounded local lookup files: one per data file, built for point reads, so lookups
//! against object storage do not pay a GET per read and never decompress. Data files are
//! immutable (unique names), so a lookup file never goes stale; the least recently used
//! ones are deleted when the files and their in-memory indexes are over the size bound.

use std::path::PathBuf;
use std::sync::Arc;

use moka::future::Cache;

use super::file::{BuiltFile, LookupFile};
use super::pages::PageBudget;
use crate::error::{Error, Result};

/// A built local file, weighed by its size on disk plus its index in memory.
#[derive(Debug)]
struct LocalFile {
    path: PathBuf,
    weight_kib: u32,
}

/// Local lookup files under one directory, bounded in bytes, and the open ones, bounded in
/// number.
#[derive(Clone)]
pub(crate) struct LocalFileCache {
    dir: PathBuf,
    files: Cache<String, Arc<LocalFile>>,
    open: moka::sync::Cache<String, Arc<LookupFile>>,
    /// Bytes the open files' pages may hold in memory.
    pages: Arc<PageBudget>,
}

impl std::fmt::Debug for LocalFileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFileCache")
            .field("dir", &self.dir)
            .finish()
    }
}

impl LocalFileCache {
    /// A cache in `dir` (created if missing) holding at most `max_bytes` of files and
    /// indexes, with at most `max_open` files open, whose pages hold at most
    /// `max_page_bytes` in memory.
    pub(crate) fn new(
        dir: PathBuf,
        max_bytes: u64,
        max_open: u64,
        max_page_bytes: u64,
    ) -> Result<Self> {
        std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
            context: format!("creating lookup cache directory {}", dir.display()),
            source: e,
        })?;
        let open: moka::sync::Cache<String, Arc<LookupFile>> =
            moka::sync::Cache::new(max_open.max(1));
        let evicted = open.clone();
        let files = Cache::builder()
            // Weighed in KiB so files up to 4 TiB fit moka's u32 weights.
            .weigher(|_name: &String, file: &Arc<LocalFile>| file.weight_kib)
            .max_capacity((max_bytes / 1024).max(1))
            .eviction_listener(move |name: Arc<String>, file: Arc<LocalFile>, _cause| {
                // The open file goes too, so its index no longer takes memory; readers
                // still holding it keep their descriptor (unlinking is safe on Unix).
                evicted.invalidate(name.as_str());
                let _ = std::fs::remove_file(&file.path);
            })
            .build();
        Ok(LocalFileCache {
            dir,
            files,
            open,
            pages: PageBudget::new(max_page_bytes),
        })
    }

    /// The open local file for `key`, written by `build` on first use into the path it is
    /// given (concurrent callers of one key share a single build). Errors of `build` are
    /// returned as they are; a local file that does not open is an `Err` of the outer
    /// result's inner value, so the caller can [`invalidate`](Self::invalidate) and retry.
    pub(crate) async fn get_or_build<F, Fut>(
        &self,
        key: &str,
        build: F,
    ) -> Result<Result<Arc<LookupFile>>>
    where
        F: FnOnce(PathBuf) -> Fut,
        Fut: std::future::Future<Output = Result<BuiltFile>>,
    {
        if let Some(file) = self.open.get(key) {
            return Ok(Ok(file));
        }
        let target = self
            .dir
            .join(format!("lookup-{}.lkp", uuid::Uuid::new_v4()));
        // The builder opens its file before the cache may evict (and delete) it.
        let mut fresh: Option<Arc<LookupFile>> = None;
        let local = self
            .files
            .try_get_with(key.to_string(), async {
                let built = build(target.clone()).await?;
                let file = LookupFile::open(&target, &self.pages).inspect_err(|_| {
                    let _ = std::fs::remove_file(&target);
                })?;
                fresh = Some(Arc::new(file));
                let weight = (built.file_bytes + built.index_bytes()).div_ceil(1024);
                Ok::<_, Error>(Arc::new(LocalFile {
                    path: target.clone(),
                    weight_kib: weight.clamp(1, u32::MAX as u64) as u32,
                }))
            })
            .await
            .map_err(|e: Arc<Error>| {
                Error::format(format!("building the lookup file of {key}: {e}"))
            })?;
        let opened = match fresh {
            Some(file) => Ok(file),
            None => LookupFile::open(&local.path, &self.pages).map(Arc::new),
        };
        Ok(opened.inspect(|file| self.open.insert(key.to_string(), file.clone())))
    }

    /// Forgets (and deletes) the local file of `key`, so the next use builds it again.
    pub(crate) async fn invalidate(&self, key: &str) {
        self.open.invalidate(key);
        self.files.invalidate(key).await;
    }

    #[cfg(test)]
    /// Bytes currently held (approximate, KiB granularity).
    pub(crate) async fn weighted_bytes(&self) -> u64 {
        self.files.run_pending_tasks().await;
        self.files.weighted_size() * 1024
    }
}
