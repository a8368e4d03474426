//! The temporary directory of a lookup's local files, and the removal of those that
//! stopped processes left behind.
//!
//! Why: a process that is killed (out of memory, `SIGKILL`, a crash loop's restarts) never
//! removes its temporary directory, so its local lookup files (up to
//! `local_cache_max_bytes` each) stay behind. A container that restarts in place keeps its
//! temporary directory, so every restart would add to the disk it fills. Each directory
//! therefore holds a lock file that its process keeps locked (`flock`) while it lives;
//! the kernel releases the lock when the process dies, however it dies. A new lookup
//! removes the directories whose lock it can take. A directory without a lock file is left
//! alone: it is being made right now, or an older lakejoin made it.

use std::fs::{self, File};
use std::path::Path;

use crate::error::{Error, Result};

const PREFIX: &str = "lakejoin-lookup-";
const LOCK: &str = ".owner.lock";

/// A lookup's temporary directory, removed when dropped; locked as its process's while
/// it exists.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    dir: tempfile::TempDir,
    /// Holds the lock for as long as the directory is in use.
    _lock: File,
}

impl ScratchDir {
    /// A new directory in the system's temporary directory, after removing those of
    /// stopped processes there.
    pub(crate) fn create() -> Result<Self> {
        Self::create_in(&std::env::temp_dir())
    }

    fn create_in(parent: &Path) -> Result<Self> {
        let removed = remove_abandoned(parent);
        if removed > 0 {
            tracing::info!(
                directory = %parent.display(),
                removed,
                "removed local lookup directories that stopped processes left behind"
            );
        }
        let io = |context: &str| {
            let context = format!("{context} in {}", parent.display());
            move |source| Error::Io { context, source }
        };
        let dir = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempdir_in(parent)
            .map_err(io("creating a lookup cache directory"))?;
        // Locked under another name, then renamed: no one ever sees the lock file
        // unlocked, and so no one takes the new directory for an abandoned one.
        let pending = dir.path().join(".owner.lock.new");
        let lock = File::create(&pending).map_err(io("creating a lookup directory's lock"))?;
        lock.try_lock().map_err(|e| Error::Io {
            context: format!("locking {}", pending.display()),
            source: e.into(),
        })?;
        fs::rename(&pending, dir.path().join(LOCK))
            .map_err(io("naming a lookup directory's lock"))?;
        Ok(ScratchDir { dir, _lock: lock })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the lookup directories in `parent` whose lock can be taken (their process is
/// gone) and returns how many. Failing to remove one costs disk, not correctness: it is
/// logged and left.
fn remove_abandoned(parent: &Path) -> usize {
    let Ok(entries) = fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let is_lookup_dir = entry.file_name().to_string_lossy().starts_with(PREFIX)
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_lookup_dir {
            continue;
        }
        let path = entry.path();
        // No lock file: being made, or an older lakejoin's. Locked: its process lives.
        let Ok(lock) = File::open(path.join(LOCK)) else {
            continue;
        };
        if lock.try_lock().is_err() {
            continue;
        }
        match fs::remove_dir_all(&path) {
            Ok(()) => removed += 1,
            Err(e) => tracing::warn!(
                directory = %path.display(),
                error = %e,
                "cannot remove a local lookup directory a stopped process left behind"
            ),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup_dirs(parent: &Path) -> Vec<std::path::PathBuf> {
        let mut dirs: Vec<_> = fs::read_dir(parent)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(PREFIX))
            .collect();
        dirs.sort();
        dirs
    }

    /// A directory whose owner is gone (its lock released, as when a process dies) is
    /// removed by the next lookup; one still owned, and one without a lock file, stay.
    #[test]
    fn directories_of_stopped_owners_are_removed_and_live_ones_kept() {
        let parent = tempfile::tempdir().unwrap();
        let live = ScratchDir::create_in(parent.path()).unwrap();
        fs::write(live.path().join("lookup-1.lkp"), b"live").unwrap();
        let stopped = ScratchDir::create_in(parent.path()).unwrap();
        let stopped_path = stopped.path().to_path_buf();
        fs::write(stopped_path.join("lookup-2.lkp"), b"left behind").unwrap();
        // A killed process: its lock is released, its directory stays.
        let ScratchDir { dir, _lock } = stopped;
        let _ = dir.keep();
        drop(_lock);
        let unlocked = parent.path().join(format!("{PREFIX}older"));
        fs::create_dir(&unlocked).unwrap();
        assert_eq!(lookup_dirs(parent.path()).len(), 3);

        let new = ScratchDir::create_in(parent.path()).unwrap();
        let left = lookup_dirs(parent.path());
        assert!(!stopped_path.exists(), "{left:?}");
        assert!(live.path().join("lookup-1.lkp").exists());
        assert!(unlocked.exists());
        assert_eq!(left.len(), 3, "{left:?}");

        // Dropped normally: removed at once.
        let new_path = new.path().to_path_buf();
        drop(new);
        assert!(!new_path.exists());
    }
}
