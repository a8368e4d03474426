//! Reading Avro's binary encoding from untrusted bytes. Every read is checked against the
//! bytes left before anything is taken or allocated, and every error says what was wrong
//! and at which offset, so a corrupt record or file is reported, never a panic or a
//! half-gigabyte allocation from a five-byte input.

use super::{Error, MAX_ZERO_SIZE_ITEMS, Result};

/// A read position in a byte slice, with the zero-byte item budget of the current datum.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Zero-byte collection items read since [`Cursor::start_datum`].
    zero_size_items: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor {
            bytes,
            pos: 0,
            zero_size_items: 0,
        }
    }

    /// Offset of the next byte to read.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// Starts a new datum: the zero-byte item budget is per datum, so that the records of
    /// one block (a container file) each get the budget a lone record gets.
    pub(crate) fn start_datum(&mut self) {
        self.zero_size_items = 0;
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let Some(slice) = self.bytes.get(self.pos..).and_then(|rest| rest.get(..n)) else {
            return Err(Error::invalid(format!(
                "data ends early: needs {n} bytes at offset {}, {} left",
                self.pos,
                self.remaining()
            )));
        };
        self.pos += n;
        Ok(slice)
    }

    /// The next `N` bytes as an array (fixed-size values: floats, uuids, durations).
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A zig-zag varint, the encoding of both `int` and `long`.
    pub(crate) fn long(&mut self) -> Result<i64> {
        let start = self.pos;
        let mut raw: u64 = 0;
        for i in 0..10 {
            let [b] = self.array::<1>()?;
            // The tenth byte holds the 64th bit only.
            if i == 9 && b > 1 {
                return Err(Error::invalid(format!(
                    "varint at offset {start} overflows 64 bits"
                )));
            }
            raw |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(Error::invalid(format!(
            "varint at offset {start} is longer than 10 bytes"
        )))
    }

    /// A varint that must fit an `int`.
    pub(crate) fn int(&mut self) -> Result<i32> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| Error::invalid(format!("int value {v} out of range")))
    }

    pub(crate) fn boolean(&mut self) -> Result<bool> {
        match self.array::<1>()? {
            [0] => Ok(false),
            [1] => Ok(true),
            [b] => Err(Error::invalid(format!(
                "invalid boolean byte {b} at offset {}",
                self.pos - 1
            ))),
        }
    }

    pub(crate) fn float(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.array()?))
    }

    pub(crate) fn double(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// A length prefix, which must be non-negative and fit in the bytes left.
    pub(crate) fn length(&mut self) -> Result<usize> {
        let at = self.pos;
        let n = self.long()?;
        let n = usize::try_from(n).map_err(|_| Error::invalid(format!("negative length {n}")))?;
        if n > self.remaining() {
            return Err(Error::invalid(format!(
                "length {n} at offset {at} exceeds the {} bytes left",
                self.remaining()
            )));
        }
        Ok(n)
    }

    /// `bytes` (or the bytes of a `string`): a length, then the content.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.length()?;
        self.take(n)
    }

    /// A `string`, which must be UTF-8; `what` names it in the error (`map key`).
    pub(crate) fn str(&mut self, what: &str) -> Result<&'a str> {
        let at = self.pos;
        std::str::from_utf8(self.bytes()?)
            .map_err(|e| Error::invalid(format!("{what} at offset {at} is not UTF-8: {e}")))
    }

    /// An index into `count` choices (an enum symbol, a union branch).
    pub(crate) fn index(&mut self, count: usize, what: &str) -> Result<usize> {
        let i = self.long()?;
        usize::try_from(i)
            .ok()
            .filter(|i| *i < count)
            .ok_or_else(|| Error::invalid(format!("{what} index {i} out of range 0..{count}")))
    }

    /// The item of `items` an index picks (a union branch).
    pub(crate) fn pick<'n, T>(&mut self, items: &'n [T], what: &str) -> Result<&'n T> {
        let i = self.index(items.len(), what)?;
        items
            .get(i)
            .ok_or_else(|| Error::invalid(format!("{what} index {i} out of range")))
    }

    /// Reads the blocks of an array or map, calling `item` once per item. Each item takes
    /// at least `item_min` bytes: a block claiming more items than the bytes left can hold
    /// is refused before it is read, and items of no bytes count against the datum's
    /// budget of [`MAX_ZERO_SIZE_ITEMS`].
    pub(crate) fn collection(
        &mut self,
        item_min: usize,
        mut item: impl FnMut(&mut Cursor<'a>) -> Result<()>,
    ) -> Result<()> {
        loop {
            let at = self.pos;
            let count = self.block_count()?;
            if count == 0 {
                return Ok(());
            }
            if item_min == 0 {
                self.zero_size_items = self.zero_size_items.saturating_add(count);
                if self.zero_size_items > MAX_ZERO_SIZE_ITEMS {
                    return Err(Error::invalid(format!(
                        "more than {MAX_ZERO_SIZE_ITEMS} zero-byte collection items in one datum"
                    )));
                }
            } else if count
                .checked_mul(item_min)
                .is_none_or(|b| b > self.remaining())
            {
                return Err(Error::invalid(format!(
                    "block count {count} at offset {at} exceeds the data: {} bytes left",
                    self.remaining()
                )));
            }
            for _ in 0..count {
                item(self)?;
            }
        }
    }

    /// The items of an array or map, each read by `item`, gathered into `C` (a `Vec`, a
    /// JSON object); bounded as [`Cursor::collection`].
    pub(crate) fn items<T, C: Default + Extend<T>>(
        &mut self,
        item_min: usize,
        mut item: impl FnMut(&mut Cursor<'a>) -> Result<T>,
    ) -> Result<C> {
        let mut out = C::default();
        self.collection(item_min, |cur| {
            out.extend(Some(item(cur)?));
            Ok(())
        })?;
        Ok(out)
    }

    /// The item count of the next array/map block (0 ends the collection).
    fn block_count(&mut self) -> Result<usize> {
        let n = self.long()?;
        if n < 0 {
            // A negative count is followed by the block's size in bytes, not needed here.
            self.long()?;
        }
        let n = n
            .checked_abs()
            .ok_or_else(|| Error::invalid(format!("block count {n} overflows")))?;
        usize::try_from(n).map_err(|_| Error::invalid(format!("block count {n} too large")))
    }
}
