//! The records of one shard of the `full` cache: an append-only arena of rows, each a
//! LEB128 length in 8-byte words followed by its BinaryRow, and the index of the live
//! ones. Kept apart from the cache's lookups so the record format is read and written in
//! one place.

use super::row_table::RowTable;
use crate::error::{Error, Result};

/// Smallest arena allocation.
pub(super) const MIN_ARENA: usize = 1024;
/// Largest arena: offsets are `u32`.
pub(super) const MAX_ARENA: usize = u32::MAX as usize;

/// One shard of rows: an arena of records and the index of their offsets.
#[derive(Default)]
pub(super) struct Shard {
    /// Records: LEB128 row length in 8-byte words, then the BinaryRow. Append-only
    /// between compactions.
    pub(super) arena: Vec<u8>,
    /// Key fingerprints and offsets of the live records.
    pub(super) rows: RowTable,
    /// Bytes of dead records in `arena`.
    pub(super) garbage: usize,
    /// Sum of the live rows' BinaryRow lengths (record prefixes not counted).
    pub(super) row_bytes: usize,
}

impl Shard {
    /// Accounts the record at `offset` as garbage.
    pub(super) fn retire(&mut self, offset: u32) {
        if let Some((body, len)) = record(&self.arena, offset) {
            self.garbage += len;
            self.row_bytes = self.row_bytes.saturating_sub(body.len());
        }
    }
}

/// The BinaryRow of the record at `offset` and the record's length, prefix included;
/// `None` when the bytes there are not a record (never for offsets of a live row).
pub(super) fn record(arena: &[u8], offset: u32) -> Option<(&[u8], usize)> {
    let start = offset as usize;
    let mut at = start;
    let mut words = 0usize;
    for shift in (0..35).step_by(7) {
        let byte = *arena.get(at)?;
        at += 1;
        words |= usize::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            let len = words.checked_mul(8)?;
            let body = arena.get(at..at.checked_add(len)?)?;
            // Load the record's last cache line now, in parallel with the reads of its
            // first ones (a row spans 2–3 lines; strings live at its end).
            std::hint::black_box(body.last().copied());
            return Some((body, at - start + len));
        }
    }
    None
}

/// Appends a record of BinaryRow `body` and returns its offset. Grows the arena by an
/// eighth (not double) when full, so unused capacity stays under 1/8 of it; large
/// reallocations are mostly done in place by the allocator (mremap).
pub(super) fn push_record(arena: &mut Vec<u8>, body: &[u8]) -> Result<u32> {
    if !body.len().is_multiple_of(8) {
        return Err(Error::format(format!(
            "BinaryRow of {} bytes is not whole 8-byte words",
            body.len()
        )));
    }
    let mut prefix = [0u8; 5];
    let mut prefix_len = 0;
    let mut words = body.len() / 8;
    for byte in prefix.iter_mut() {
        *byte = (words & 0x7F) as u8;
        words >>= 7;
        prefix_len += 1;
        if words == 0 {
            break;
        }
        *byte |= 0x80;
    }
    let offset = arena.len();
    let end = offset + prefix_len + body.len();
    if words != 0 || end > MAX_ARENA {
        return Err(Error::Data(format!(
            "a row of {} bytes does not fit a full-cache shard (4 GiB each)",
            body.len()
        )));
    }
    if end > arena.capacity() {
        // `end <= MAX_ARENA`, so the target still holds the record.
        let target = end
            .max(arena.capacity() + arena.capacity() / 8)
            .clamp(MIN_ARENA, MAX_ARENA);
        arena.reserve_exact(target - offset);
    }
    arena.extend_from_slice(prefix.get(..prefix_len).unwrap_or_default());
    arena.extend_from_slice(body);
    Ok(offset as u32)
}
