//! Local lookup files: the key-values of one data file laid out for point reads, as
//! Paimon's local lookup store does. A lookup hashes the key, finds the candidate records
//! in an in-memory index sorted by hash, reads each with one positioned read, and checks
//! its checksum and key bytes; nothing else is decoded.
//!
//! Layout (numbers little-endian):
//!
//! ```text
//! record*   u32 body length, then the body:
//!           u32 key length | key bytes | i64 sequence number | i8 row kind | value bytes
//!           | u64 checksum (xxHash64 of the body before it)
//! index     count × (u64 key hash, u64 record offset), sorted
//! footer    u64 index offset | u64 count | u64 checksum (of the index and the two
//!           numbers before it) | u32 version | 4 bytes magic
//! ```
//!
//! A file is written under a temporary name and renamed into place when complete. A file
//! that is truncated or corrupt fails its length, checksum or order checks: an error,
//! never a wrong record.

use std::fs::File;
use std::hash::Hasher;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use twox_hash::XxHash64;

use super::pages::{FilePages, PageBudget};
use crate::error::{Error, Result};
use crate::table::row_kind::RowKind;

const MAGIC: [u8; 4] = *b"LJLF";
const VERSION: u32 = 1;
const FOOTER_LEN: u64 = 32;
const INDEX_ENTRY_LEN: u64 = 16;
/// Bytes of a record read speculatively: most records fit, so most reads are one call.
const FIRST_READ: u64 = 512;
/// Smallest body: key length, sequence number, row kind and checksum.
const MIN_BODY: usize = 4 + 8 + 1 + 8;
const KEY_SEED: u64 = 0x6c61_6b65_6a6f_696e;
const CHECKSUM_SEED: u64 = 0x6c6f_6f6b_7570_6669;

/// Hash of a key's bytes that places it in the index.
pub(crate) type KeyHash = fn(&[u8]) -> u64;

/// xxHash64 of the key bytes: the hash every lookup file uses.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    XxHash64::oneshot(KEY_SEED, key)
}

fn checksum(bytes: &[u8]) -> u64 {
    XxHash64::oneshot(CHECKSUM_SEED, bytes)
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::format(format!(
        "local lookup file {} is corrupt: {what}",
        path.display()
    ))
}

fn io_error(path: &Path, doing: &str, source: std::io::Error) -> Error {
    Error::Io {
        context: format!("{doing} local lookup file {}", path.display()),
        source,
    }
}

/// What a finished lookup file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BuiltFile {
    /// Size on disk.
    pub(crate) file_bytes: u64,
    pub(crate) records: u64,
}

impl BuiltFile {
    /// Memory the index takes while the file is open.
    pub(crate) fn index_bytes(&self) -> u64 {
        self.records * INDEX_ENTRY_LEN
    }
}

/// Writes a lookup file: records in any order, then [`LookupFileWriter::finish`].
pub(crate) struct LookupFileWriter {
    out: BufWriter<File>,
    temp: PathBuf,
    target: PathBuf,
    offset: u64,
    index: Vec<(u64, u64)>,
    hash: KeyHash,
    body: Vec<u8>,
}

impl LookupFileWriter {
    /// A writer of the file `target`, written as `target` plus a temporary suffix first.
    pub(crate) fn create(target: &Path) -> Result<Self> {
        Self::create_with(target, key_hash)
    }

    fn create_with(target: &Path, hash: KeyHash) -> Result<Self> {
        let mut temp = target.as_os_str().to_owned();
        temp.push(".tmp");
        let temp = PathBuf::from(temp);
        let file = File::create(&temp).map_err(|e| io_error(&temp, "creating", e))?;
        Ok(LookupFileWriter {
            out: BufWriter::with_capacity(256 * 1024, file),
            temp,
            target: target.to_path_buf(),
            offset: 0,
            index: Vec::new(),
            hash,
            body: Vec::new(),
        })
    }

    /// Appends the record of one key: its key bytes (which must be canonical: equal keys,
    /// equal bytes), sequence number, row kind and value bytes.
    pub(crate) fn add(
        &mut self,
        key: &[u8],
        sequence_number: i64,
        kind: RowKind,
        value: &[u8],
    ) -> Result<()> {
        let too_big = || {
            Error::Data(format!(
                "a lookup record of {} bytes is too big",
                key.len() + value.len()
            ))
        };
        let key_len = u32::try_from(key.len()).map_err(|_| too_big())?;
        let body = &mut self.body;
        body.clear();
        body.extend_from_slice(&key_len.to_le_bytes());
        body.extend_from_slice(key);
        body.extend_from_slice(&sequence_number.to_le_bytes());
        body.extend_from_slice(&kind.to_byte().to_le_bytes());
        body.extend_from_slice(value);
        let sum = checksum(body);
        body.extend_from_slice(&sum.to_le_bytes());
        let body_len = u32::try_from(body.len()).map_err(|_| too_big())?;
        self.out
            .write_all(&body_len.to_le_bytes())
            .and_then(|()| self.out.write_all(body))
            .map_err(|e| io_error(&self.temp, "writing", e))?;
        self.index.push(((self.hash)(key), self.offset));
        self.offset += 4 + u64::from(body_len);
        Ok(())
    }

    /// Writes the index and footer and renames the file into place.
    pub(crate) fn finish(mut self) -> Result<BuiltFile> {
        self.index.sort_unstable();
        let mut sum = XxHash64::with_seed(CHECKSUM_SEED);
        let mut entry = [0u8; INDEX_ENTRY_LEN as usize];
        for &(hash, offset) in &self.index {
            entry[..8].copy_from_slice(&hash.to_le_bytes());
            entry[8..].copy_from_slice(&offset.to_le_bytes());
            sum.write(&entry);
            self.out
                .write_all(&entry)
                .map_err(|e| io_error(&self.temp, "writing", e))?;
        }
        let records = self.index.len() as u64;
        let mut footer = Vec::with_capacity(FOOTER_LEN as usize);
        footer.extend_from_slice(&self.offset.to_le_bytes());
        footer.extend_from_slice(&records.to_le_bytes());
        sum.write(&footer);
        footer.extend_from_slice(&sum.finish().to_le_bytes());
        footer.extend_from_slice(&VERSION.to_le_bytes());
        footer.extend_from_slice(&MAGIC);
        self.out
            .write_all(&footer)
            .map_err(|e| io_error(&self.temp, "writing", e))?;
        self.out
            .flush()
            .map_err(|e| io_error(&self.temp, "writing", e))?;
        std::fs::rename(&self.temp, &self.target)
            .map_err(|e| io_error(&self.target, "renaming into place", e))?;
        Ok(BuiltFile {
            file_bytes: self.offset + records * INDEX_ENTRY_LEN + FOOTER_LEN,
            records,
        })
    }
}

impl Drop for LookupFileWriter {
    fn drop(&mut self) {
        // An abandoned write leaves no temporary file behind; after a rename this fails
        // harmlessly.
        let _ = std::fs::remove_file(&self.temp);
    }
}

/// One record found by [`LookupFile::get`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) sequence_number: i64,
    pub(crate) kind: RowKind,
    pub(crate) value: &'a [u8],
}

/// An open lookup file: its descriptor, its index, and the pages of its records held in
/// memory.
#[derive(Debug)]
pub(crate) struct LookupFile {
    file: File,
    path: PathBuf,
    hashes: Vec<u64>,
    offsets: Vec<u64>,
    /// Where the records end (the index offset).
    data_end: u64,
    hash: KeyHash,
    pages: FilePages,
}

impl LookupFile {
    /// Opens and checks the file at `path` and loads its index; its pages are held
    /// within `budget`.
    pub(crate) fn open(path: &Path, budget: &Arc<PageBudget>) -> Result<Self> {
        Self::open_with(path, key_hash, budget)
    }

    fn open_with(path: &Path, hash: KeyHash, budget: &Arc<PageBudget>) -> Result<Self> {
        let file = File::open(path).map_err(|e| io_error(path, "opening", e))?;
        let len = file
            .metadata()
            .map_err(|e| io_error(path, "reading metadata of", e))?
            .len();
        if len < FOOTER_LEN {
            return Err(corrupt(
                path,
                format!("{len} bytes, shorter than its footer"),
            ));
        }
        let mut footer = [0u8; FOOTER_LEN as usize];
        file.read_exact_at(&mut footer, len - FOOTER_LEN)
            .map_err(|e| io_error(path, "reading", e))?;
        let word = |at: usize| {
            footer
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        let (data_end, records, stored_sum) = (word(0), word(8), word(16));
        if footer[28..] != MAGIC {
            return Err(corrupt(path, "no lookup file footer"));
        }
        let version = u32::from_le_bytes([footer[24], footer[25], footer[26], footer[27]]);
        if version != VERSION {
            return Err(corrupt(path, format!("unknown version {version}")));
        }
        let index_len = records.checked_mul(INDEX_ENTRY_LEN);
        let expected = index_len
            .and_then(|i| data_end.checked_add(i))
            .and_then(|n| n.checked_add(FOOTER_LEN));
        let (Some(index_len), Some(expected)) = (index_len, expected) else {
            return Err(corrupt(path, "footer sizes overflow"));
        };
        if expected != len {
            return Err(corrupt(
                path,
                format!("{len} bytes where its footer says {expected}"),
            ));
        }
        let index_len = usize::try_from(index_len).map_err(|_| corrupt(path, "index too big"))?;
        let mut index = vec![0u8; index_len];
        file.read_exact_at(&mut index, data_end)
            .map_err(|e| io_error(path, "reading", e))?;
        let mut sum = XxHash64::with_seed(CHECKSUM_SEED);
        sum.write(&index);
        sum.write(&footer[..16]);
        if sum.finish() != stored_sum {
            return Err(corrupt(path, "index checksum mismatch"));
        }
        let n = index_len / INDEX_ENTRY_LEN as usize;
        let mut hashes = Vec::with_capacity(n);
        let mut offsets = Vec::with_capacity(n);
        for entry in index.chunks_exact(INDEX_ENTRY_LEN as usize) {
            let (h, o) = entry.split_at(8);
            let h = u64::from_le_bytes(h.try_into().unwrap_or_default());
            let o = u64::from_le_bytes(o.try_into().unwrap_or_default());
            if hashes.last().is_some_and(|&last| last > h) || o >= data_end {
                return Err(corrupt(path, "index out of order or out of bounds"));
            }
            hashes.push(h);
            offsets.push(o);
        }
        Ok(LookupFile {
            file,
            path: path.to_path_buf(),
            hashes,
            offsets,
            data_end,
            hash,
            pages: FilePages::new(data_end, budget.clone()),
        })
    }

    #[cfg(test)]
    /// Records in the file.
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Calls `found` with every record whose key bytes are `key` (at most one in a file
    /// written from a data file, whose keys are unique).
    ///
    /// `buf` holds the bytes read; a caller probing many keys passes the same one, so a
    /// probe allocates nothing.
    pub(crate) fn get(
        &self,
        key: &[u8],
        buf: &mut Vec<u8>,
        mut found: impl FnMut(Record<'_>) -> Result<()>,
    ) -> Result<()> {
        let target = (self.hash)(key);
        let start = first_at_least(&self.hashes, target);
        for (&h, &offset) in self.hashes[start..].iter().zip(&self.offsets[start..]) {
            if h != target {
                break;
            }
            let body = self.read_body(offset, buf)?;
            let (record_key, record) = parse_body(body).ok_or_else(|| {
                corrupt(&self.path, format!("malformed record at offset {offset}"))
            })?;
            if record_key == key {
                found(record)?;
            }
        }
        Ok(())
    }

    /// The checked body of the record at `offset` (without its checksum): from a held
    /// page when the record lies in one, else read into `buf`.
    fn read_body<'a>(&'a self, offset: u64, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let available = self.data_end.saturating_sub(offset);
        if available < 4 {
            return Err(corrupt(
                &self.path,
                format!("record at offset {offset} is cut off"),
            ));
        }
        let read_error = |e| io_error(&self.path, "reading", e);
        if let Some(prefix) = self.pages.read(&self.file, offset, 4).map_err(read_error)? {
            let body_len = u64::from(u32::from_le_bytes([
                prefix[0], prefix[1], prefix[2], prefix[3],
            ]));
            self.check_length(offset, body_len, available)?;
            if let Some(record) = self
                .pages
                .read(&self.file, offset, 4 + body_len)
                .map_err(read_error)?
            {
                return self.checked(offset, &record[4..]);
            }
        }
        let first = available.min(FIRST_READ) as usize;
        buf.resize(first, 0);
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| io_error(&self.path, "reading", e))?;
        let body_len = u64::from(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]));
        self.check_length(offset, body_len, available)?;
        let total = (4 + body_len) as usize;
        if total > first {
            buf.resize(total, 0);
            self.file
                .read_exact_at(&mut buf[first..], offset + first as u64)
                .map_err(read_error)?;
        }
        self.checked(offset, &buf[4..total])
    }

    /// Whether a record of `body_len` bytes after its length fits the `available` bytes
    /// from its offset to the index, and is long enough to be one.
    fn check_length(&self, offset: u64, body_len: u64, available: u64) -> Result<()> {
        if 4 + body_len > available || body_len < MIN_BODY as u64 {
            return Err(corrupt(
                &self.path,
                format!("record at offset {offset} has a bad length {body_len}"),
            ));
        }
        Ok(())
    }

    /// A record's body and checksum, checked: the body.
    fn checked<'a>(&self, offset: u64, record: &'a [u8]) -> Result<&'a [u8]> {
        let (body, sum) = record.split_at(record.len().saturating_sub(8));
        let sum = u64::from_le_bytes(sum.try_into().unwrap_or_default());
        if checksum(body) != sum {
            return Err(corrupt(
                &self.path,
                format!("checksum mismatch in the record at offset {offset}"),
            ));
        }
        Ok(body)
    }
}

/// The index of the first hash `>= target` in sorted `hashes` (`partition_point`).
///
/// Key hashes are uniform over `u64`, so the position is first guessed from the value
/// (one or two cache misses) and then bracketed by steps that double from there; a
/// binary search over the whole index costs a miss per halving (about 17 for 100,000
/// keys). Uneven hashes only make it slower, never wrong: the answer is always the
/// bracket's `partition_point`.
fn first_at_least(hashes: &[u64], target: u64) -> usize {
    let n = hashes.len();
    if n == 0 {
        return 0;
    }
    let guess = ((u128::from(target) * n as u128) >> 64) as usize;
    let guess = guess.min(n - 1);
    // Find lo < hi with hashes[lo] < target (or lo = none) and hashes[hi] >= target (or
    // hi = n), then search between.
    let (lo, hi) = if hashes[guess] < target {
        let (mut lo, mut step) = (guess, 1);
        loop {
            let hi = (lo + step).min(n);
            if hi == n || hashes[hi] >= target {
                break (lo + 1, hi);
            }
            lo = hi;
            step *= 2;
        }
    } else {
        let (mut hi, mut step) = (guess, 1);
        loop {
            if hi == 0 {
                break (0, 0);
            }
            let lo = hi.saturating_sub(step);
            if hashes[lo] < target {
                break (lo + 1, hi);
            }
            hi = lo;
            step *= 2;
        }
    };
    lo + hashes[lo..hi].partition_point(|&h| h < target)
}

/// Key bytes and record of a checked body; `None` when its lengths do not add up.
fn parse_body(body: &[u8]) -> Option<(&[u8], Record<'_>)> {
    let key_len = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    let rest = body.get(4..)?;
    let key = rest.get(..key_len)?;
    let rest = rest.get(key_len..)?;
    let sequence_number = i64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let kind = RowKind::from_byte(i8::from_le_bytes([*rest.get(8)?]))?;
    let value = rest.get(9..)?;
    Some((
        key,
        Record {
            sequence_number,
            kind,
            value,
        },
    ))
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
