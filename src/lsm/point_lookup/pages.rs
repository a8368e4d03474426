//! Pages of local lookup files held in memory, as Paimon's lookup joins hold the pages
//! of their local files in a cache bounded by `lookup.cache-max-memory-size`.
//!
//! Why: reading a record with a positioned read is a system call even when the kernel
//! has the page cached, and that call was the largest single cost of a `none` join (a
//! sixth of the process's CPU, ~0.8 µs a lookup, `perf record` of the throughput
//! benchmark). A record in a held page is read from memory.
//!
//! Policy: a page is read whole and kept the first time a lookup touches it, while the
//! budget (shared by the files of one table's lookups) has room; it stays until its file
//! is closed (evicted from the local file cache, or dropped when a compaction retired its
//! data file), which gives its bytes back. There is no eviction of single pages: a
//! lookup file never changes, so a held page never goes stale, and over the budget a
//! lookup reads the file as before. Records are still checked against their checksums
//! after every read, from a page or not.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Bytes of a page: Paimon's `cache-page-size` default.
pub(crate) const PAGE_BYTES: u64 = 64 * 1024;

/// Bytes that pages may still take, shared by the lookup files of one table's lookups.
#[derive(Debug)]
pub(crate) struct PageBudget {
    remaining: AtomicU64,
    #[cfg(test)]
    max_bytes: u64,
}

impl PageBudget {
    pub(crate) fn new(max_bytes: u64) -> Arc<Self> {
        Arc::new(PageBudget {
            remaining: AtomicU64::new(max_bytes),
            #[cfg(test)]
            max_bytes,
        })
    }

    /// Takes `bytes` if they fit.
    fn take(&self, bytes: u64) -> bool {
        self.remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                r.checked_sub(bytes)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.remaining.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Bytes held in pages now.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> u64 {
        self.max_bytes
            .saturating_sub(self.remaining.load(Ordering::Acquire))
    }
}

/// The pages of one open lookup file's records (`0..data_end`).
#[derive(Debug)]
pub(crate) struct FilePages {
    pages: Box<[OnceLock<Box<[u8]>>]>,
    data_end: u64,
    budget: Arc<PageBudget>,
}

impl FilePages {
    pub(crate) fn new(data_end: u64, budget: Arc<PageBudget>) -> Self {
        let count = usize::try_from(data_end.div_ceil(PAGE_BYTES)).unwrap_or(0);
        FilePages {
            pages: (0..count).map(|_| OnceLock::new()).collect(),
            data_end,
            budget,
        }
    }

    /// The bytes `offset..offset + len` when they lie in one page that is held or can be
    /// (then it is read from `file` and kept); `Ok(None)` when they span two pages or the
    /// budget has no room: the caller reads the file.
    pub(crate) fn read(
        &self,
        file: &File,
        offset: u64,
        len: u64,
    ) -> std::io::Result<Option<&[u8]>> {
        let index = offset / PAGE_BYTES;
        let start = index * PAGE_BYTES;
        let end = offset.saturating_add(len);
        if end > (start + PAGE_BYTES).min(self.data_end) {
            return Ok(None);
        }
        let Some(slot) = usize::try_from(index).ok().and_then(|i| self.pages.get(i)) else {
            return Ok(None);
        };
        let page = match slot.get() {
            Some(page) => page,
            None => {
                let page_len = (start + PAGE_BYTES).min(self.data_end) - start;
                if !self.budget.take(page_len) {
                    return Ok(None);
                }
                let mut bytes = vec![0u8; page_len as usize];
                if let Err(e) = file.read_exact_at(&mut bytes, start) {
                    self.budget.give_back(page_len);
                    return Err(e);
                }
                if slot.set(bytes.into_boxed_slice()).is_err() {
                    // Another lookup kept the page first: its copy is the one held.
                    self.budget.give_back(page_len);
                }
                match slot.get() {
                    Some(page) => page,
                    None => return Ok(None),
                }
            }
        };
        let from = (offset - start) as usize;
        Ok(page.get(from..from + len as usize))
    }
}

impl Drop for FilePages {
    fn drop(&mut self) {
        let held: u64 = self
            .pages
            .iter()
            .filter_map(|p| p.get())
            .map(|p| p.len() as u64)
            .sum();
        self.budget.give_back(held);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file_of(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&bytes).unwrap();
        file.flush().unwrap();
        (file, bytes)
    }

    #[test]
    fn ranges_in_one_page_are_read_from_it_and_others_are_left_to_the_caller() {
        let len = (2 * PAGE_BYTES + 100) as usize;
        let (file, bytes) = file_of(len);
        let budget = PageBudget::new(1 << 30);
        let pages = FilePages::new(len as u64, budget.clone());
        let f = file.as_file();
        for (offset, n) in [
            (0u64, 10u64),
            (PAGE_BYTES - 4, 4),
            (PAGE_BYTES + 5, 300),
            (2 * PAGE_BYTES, 100),
        ] {
            let got = pages.read(f, offset, n).unwrap();
            assert_eq!(
                got,
                Some(&bytes[offset as usize..(offset + n) as usize]),
                "{offset}+{n}"
            );
        }
        assert_eq!(budget.held_bytes(), 2 * PAGE_BYTES + 100);
        // Across a page boundary, or past the records: the caller reads the file.
        assert_eq!(pages.read(f, PAGE_BYTES - 4, 5).unwrap(), None);
        assert_eq!(pages.read(f, 2 * PAGE_BYTES + 50, 51).unwrap(), None);
        assert_eq!(pages.read(f, 3 * PAGE_BYTES, 1).unwrap(), None);
        drop(pages);
        assert_eq!(budget.held_bytes(), 0, "a closed file gives its pages back");
    }

    #[test]
    fn pages_are_kept_only_while_the_budget_has_room() {
        let len = (3 * PAGE_BYTES) as usize;
        let (file, bytes) = file_of(len);
        let budget = PageBudget::new(PAGE_BYTES + PAGE_BYTES / 2);
        let pages = FilePages::new(len as u64, budget.clone());
        let f = file.as_file();
        assert_eq!(pages.read(f, 10, 10).unwrap(), Some(&bytes[10..20]));
        assert_eq!(pages.read(f, PAGE_BYTES + 10, 10).unwrap(), None);
        assert_eq!(budget.held_bytes(), PAGE_BYTES);
        // Another file of the same budget takes what is left.
        let other = FilePages::new(PAGE_BYTES / 2, budget.clone());
        assert_eq!(other.read(f, 0, 8).unwrap(), Some(&bytes[..8]));
        assert_eq!(budget.held_bytes(), PAGE_BYTES + PAGE_BYTES / 2);
        drop(pages);
        assert_eq!(budget.held_bytes(), PAGE_BYTES / 2);
        // The bytes given back are taken again.
        let again = FilePages::new(len as u64, budget.clone());
        assert_eq!(
            again.read(f, 2 * PAGE_BYTES + 1, 3).unwrap(),
            Some(&bytes[2 * PAGE_BYTES as usize + 1..2 * PAGE_BYTES as usize + 4])
        );
    }

    #[test]
    fn a_page_that_does_not_read_is_an_error_and_takes_nothing() {
        let (file, _) = file_of(100);
        let budget = PageBudget::new(1 << 20);
        // The file is shorter than the records it is said to hold.
        let pages = FilePages::new(PAGE_BYTES, budget.clone());
        assert!(pages.read(file.as_file(), 0, 10).is_err());
        assert_eq!(budget.held_bytes(), 0);
    }

    #[test]
    fn a_zero_budget_holds_nothing() {
        let (file, _) = file_of(100);
        let pages = FilePages::new(100, PageBudget::new(0));
        assert_eq!(pages.read(file.as_file(), 0, 10).unwrap(), None);
    }
}
