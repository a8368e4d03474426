//! Bounded local lookup files: one per data file, re-encoded for point reads, so lookups
//! against object storage do not pay a GET per read and never decompress. Data files are
//! immutable (unique names), so a lookup file never goes stale; the least recently used
//! ones are deleted when the cache is over its size.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use moka::future::Cache;

use crate::error::{Error, Result};

/// Local copies of remote files under one directory, bounded in bytes.
#[derive(Clone)]
pub struct LocalFileCache {
    dir: PathBuf,
    files: Cache<String, Arc<PathBuf>>,
}

impl std::fmt::Debug for LocalFileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFileCache")
            .field("dir", &self.dir)
            .finish()
    }
}

impl LocalFileCache {
    /// A cache in `dir` (created if missing) holding at most `max_bytes` of files.
    pub fn new(dir: PathBuf, max_bytes: u64) -> Result<Self> {
        std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
            context: format!("creating lookup cache directory {}", dir.display()),
            source: e,
        })?;
        let files = Cache::builder()
            // Weighed in KiB so files up to 4 TiB fit moka's u32 weights.
            .weigher(|_name: &String, path: &Arc<PathBuf>| {
                std::fs::metadata(path.as_ref())
                    .map(|m| (m.len() / 1024).min(u32::MAX as u64) as u32)
                    .unwrap_or(1)
                    .max(1)
            })
            .max_capacity((max_bytes / 1024).max(1))
            .eviction_listener(|_name, path: Arc<PathBuf>, _cause| {
                // Open readers keep their descriptors; unlinking is safe on Unix.
                let _ = std::fs::remove_file(path.as_ref());
            })
            .build();
        Ok(LocalFileCache { dir, files })
    }

    /// The local file for `key`, produced by `build` on first use (concurrent callers of
    /// one key share a single build).
    pub async fn get_or_build<F>(&self, key: &str, build: F) -> Result<Arc<PathBuf>>
    where
        F: std::future::Future<Output = Result<Bytes>>,
    {
        let target = self
            .dir
            .join(format!("lookup-{}.parquet", uuid::Uuid::new_v4()));
        self.files
            .try_get_with(key.to_string(), async {
                let bytes = build.await?;
                tokio::fs::write(&target, &bytes)
                    .await
                    .map_err(|e| Error::Io {
                        context: format!("writing lookup file {}", target.display()),
                        source: e,
                    })?;
                Ok::<_, Error>(Arc::new(target))
            })
            .await
            .map_err(|e: Arc<Error>| {
                Error::format(format!("building the lookup file of {key}: {e}"))
            })
    }

    /// Bytes currently held (approximate, KiB granularity).
    pub fn weighted_bytes(&self) -> u64 {
        self.files.weighted_size() * 1024
    }
}
