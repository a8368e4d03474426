//! A bounded walk over the Thrift page headers of a Parquet column chunk, run before the
//! parquet crate decodes a data file. Its header reader skips a field it does not know
//! element by element without checking that the input still holds the elements, so a
//! corrupt header claiming 2^31 of them spins for minutes (found by the `data_file` fuzz
//! target). Here a collection may claim at most as many elements as bytes remain, since
//! every element of the Thrift compact protocol takes at least one byte; the walk is
//! therefore linear in the chunk's size.

/// Deepest nesting of structs and collections accepted (the parquet crate's own limit).
const MAX_DEPTH: u32 = 64;

/// Compact-protocol type ids.
const BOOLEAN_TRUE: u8 = 1;
const BOOLEAN_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// `PageHeader.compressed_page_size` (field 3, i32).
const COMPRESSED_PAGE_SIZE: i16 = 3;

/// Why the walk refused a Thrift struct: what it found at the byte it stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ThriftError {
    #[error("header ends before its last field")]
    Truncated,
    #[error("a field of {len} bytes with {left} left")]
    FieldTooLong { len: usize, left: usize },
    #[error("varint longer than 10 bytes")]
    VarintTooLong,
    /// More elements than the remaining bytes could hold (the case that made the parquet
    /// crate spin).
    #[error("a collection of {size} elements with {left} bytes left")]
    CollectionTooLarge { size: u64, left: usize },
    #[error("nested too deeply")]
    TooDeep,
    #[error("unknown Thrift type {0}")]
    UnknownType(u8),
    #[error("field id out of range")]
    FieldIdOutOfRange,
    #[error("header without compressed_page_size")]
    NoCompressedPageSize,
}

/// Where a column chunk or footer fails the walk. The caller names the file and chunk,
/// and turns it into `Error::Format`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PageHeaderError {
    /// Page header `page` (counting from 0, dictionary page first) is malformed.
    #[error("page {page}: {source}")]
    Page {
        page: usize,
        #[source]
        source: ThriftError,
    },
    /// Page header `page` is well formed but claims more bytes than the chunk has left.
    #[error("page {page}: {compressed} compressed bytes do not fit the {chunk_len}-byte chunk")]
    PastChunkEnd {
        page: usize,
        compressed: i64,
        chunk_len: usize,
    },
    /// The file's `FileMetaData` is malformed.
    #[error("footer: {0}")]
    Footer(#[source] ThriftError),
}

/// Checks that the column chunk `chunk` (its bytes, dictionary page first) is a sequence
/// of well-formed page headers, each followed by its page, ending inside the chunk.
pub(crate) fn check_column_chunk(chunk: &[u8]) -> Result<(), PageHeaderError> {
    let mut pos = 0;
    let mut page = 0;
    while pos < chunk.len() {
        let mut reader = Reader {
            buf: &chunk[pos..],
            pos: 0,
        };
        let compressed =
            page_header(&mut reader).map_err(|source| PageHeaderError::Page { page, source })?;
        let next = usize::try_from(compressed)
            .ok()
            .and_then(|c| (pos + reader.pos).checked_add(c))
            .filter(|&next| next <= chunk.len())
            .ok_or(PageHeaderError::PastChunkEnd {
                page,
                compressed,
                chunk_len: chunk.len(),
            })?;
        pos = next;
        page += 1;
    }
    Ok(())
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Result<u8, ThriftError> {
        let b = *self.buf.get(self.pos).ok_or(ThriftError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), ThriftError> {
        if n > self.remaining() {
            return Err(ThriftError::FieldTooLong {
                len: n,
                left: self.remaining(),
            });
        }
        self.pos += n;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, ThriftError> {
        let mut value = 0_u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ThriftError::VarintTooLong)
    }

    fn zigzag(&mut self) -> Result<i64, ThriftError> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A collection's element count, refused when the rest of the input cannot hold
    /// that many elements of `min_bytes` each.
    fn count(&mut self, size: u64, min_bytes: usize) -> Result<usize, ThriftError> {
        usize::try_from(size)
            .ok()
            .filter(|&n| n.saturating_mul(min_bytes) <= self.remaining())
            .ok_or(ThriftError::CollectionTooLarge {
                size,
                left: self.remaining(),
            })
    }

    /// Skips a value of compact type `kind`; `in_collection` because a boolean inside a
    /// list takes a byte, while a boolean field is held in its field header.
    fn skip_value(&mut self, kind: u8, in_collection: bool, depth: u32) -> Result<(), ThriftError> {
        if depth == 0 {
            return Err(ThriftError::TooDeep);
        }
        match kind {
            BOOLEAN_TRUE | BOOLEAN_FALSE => {
                if in_collection {
                    self.skip(1)?;
                }
            }
            BYTE => self.skip(1)?,
            I16 | I32 | I64 => {
                self.varint()?;
            }
            DOUBLE => self.skip(8)?,
            UUID => self.skip(16)?,
            BINARY => {
                let len = self.varint()?;
                self.skip(usize::try_from(len).unwrap_or(usize::MAX))?;
            }
            LIST | SET => {
                let header = self.byte()?;
                let element = header & 0x0f;
                let size = match header >> 4 {
                    15 => self.varint()?,
                    short => u64::from(short),
                };
                for _ in 0..self.count(size, 1)? {
                    self.skip_value(element, true, depth - 1)?;
                }
            }
            MAP => {
                let size = self.varint()?;
                let n = self.count(size, 2)?;
                if n > 0 {
                    let types = self.byte()?;
                    for _ in 0..n {
                        self.skip_value(types >> 4, true, depth - 1)?;
                        self.skip_value(types & 0x0f, true, depth - 1)?;
                    }
                }
            }
            STRUCT => {
                self.fields(depth - 1, |_, _, _| Ok(false))?;
            }
            other => return Err(ThriftError::UnknownType(other)),
        }
        Ok(())
    }

    /// Walks a struct's fields up to its stop byte. `visit(reader, id, type)` may read a
    /// field itself and return `true`; other fields are skipped.
    fn fields(
        &mut self,
        depth: u32,
        mut visit: impl FnMut(&mut Self, i16, u8) -> Result<bool, ThriftError>,
    ) -> Result<(), ThriftError> {
        let mut last_id: i16 = 0;
        loop {
            let header = self.byte()?;
            let kind = header & 0x0f;
            // The type nibble alone marks the end, as in Thrift's own readers.
            if kind == 0 {
                return Ok(());
            }
            let id = match header >> 4 {
                0 => i16::try_from(self.zigzag()?).map_err(|_| ThriftError::FieldIdOutOfRange)?,
                delta => last_id.wrapping_add(i16::from(delta)),
            };
            last_id = id;
            if !visit(self, id, kind)? {
                self.skip_value(kind, false, depth)?;
            }
        }
    }
}

/// Checks the Thrift structure of a Parquet file's footer (`FileMetaData`) the same way,
/// before the parquet crate parses it: its slice reader skips a list of booleans without
/// consuming input, so a footer claiming 2^31 of them spins (found by the `data_file` fuzz
/// target). Files without the plain `PAR1` footer are left to the parquet crate.
pub(crate) fn check_footer(file: &[u8]) -> Result<(), PageHeaderError> {
    let Some(tail) = file.len().checked_sub(8).map(|at| &file[at..]) else {
        return Ok(());
    };
    if &tail[4..] != b"PAR1" {
        return Ok(());
    }
    let len = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize;
    let Some(start) = (file.len() - 8).checked_sub(len) else {
        return Ok(());
    };
    let mut reader = Reader {
        buf: &file[start..file.len() - 8],
        pos: 0,
    };
    reader
        .fields(MAX_DEPTH, |_, _, _| Ok(false))
        .map_err(PageHeaderError::Footer)
}

/// Reads one `PageHeader` and returns its `compressed_page_size`.
fn page_header(reader: &mut Reader<'_>) -> Result<i64, ThriftError> {
    let mut compressed = None;
    reader.fields(MAX_DEPTH, |r, id, kind| {
        if id == COMPRESSED_PAGE_SIZE && kind == I32 {
            compressed = Some(r.zigzag()?);
            return Ok(true);
        }
        Ok(false)
    })?;
    compressed.ok_or(ThriftError::NoCompressedPageSize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header of `compressed` bytes with a data page header (num_values 7).
    fn header(compressed: i64) -> Vec<u8> {
        let zz = |v: i64| ((v << 1) ^ (v >> 63)) as u64;
        let varint = |mut v: u64, out: &mut Vec<u8>| loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        };
        let mut out = Vec::new();
        out.push(0x15); // field 1, i32: type
        varint(zz(0), &mut out);
        out.push(0x15); // field 2, i32: uncompressed_page_size
        varint(zz(compressed), &mut out);
        out.push(0x15); // field 3, i32: compressed_page_size
        varint(zz(compressed), &mut out);
        out.push(0x2c); // field 5, struct: data_page_header
        out.push(0x15); // field 1, i32: num_values
        varint(zz(7), &mut out);
        out.push(0x00);
        out.push(0x00);
        out
    }

    #[test]
    fn pages_that_fill_the_chunk_pass() {
        let mut chunk = header(3);
        chunk.extend([1, 2, 3]);
        chunk.extend(header(0));
        assert_eq!(check_column_chunk(&chunk), Ok(()));
        assert_eq!(check_column_chunk(&[]), Ok(()));
    }

    #[test]
    fn a_page_past_the_chunk_end_is_an_error() {
        let mut chunk = header(4);
        chunk.extend([1, 2, 3]);
        let err = check_column_chunk(&chunk).unwrap_err();
        assert!(
            matches!(
                err,
                PageHeaderError::PastChunkEnd {
                    page: 0,
                    compressed: 4,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("page 0: 4 compressed bytes"),
            "{err}"
        );
        let err = check_column_chunk(&header(-1)).unwrap_err().to_string();
        assert!(err.contains("-1 compressed bytes"), "{err}");
    }

    #[test]
    fn a_collection_larger_than_the_input_is_refused_at_once() {
        // field 9 (unknown to Paimon's pages), a list of 2^31 binaries, then nothing.
        let mut chunk = vec![0x19, 0xf8];
        chunk.extend([0x80, 0x80, 0x80, 0x80, 0x08]);
        let err = check_column_chunk(&chunk).unwrap_err().to_string();
        assert!(err.contains("a collection of 2147483648 elements"), "{err}");
        // A map of 2^31 entries.
        let chunk = [0x1b, 0x80, 0x80, 0x80, 0x80, 0x08, 0x88];
        let err = check_column_chunk(&chunk).unwrap_err().to_string();
        assert!(err.contains("a collection of 2147483648 elements"), "{err}");
    }

    #[test]
    fn truncated_or_deep_headers_are_errors() {
        let full = header(0);
        for cut in 1..full.len() {
            assert!(check_column_chunk(&full[..cut]).is_err(), "cut at {cut}");
        }
        // 100 nested structs.
        let mut deep = vec![0x1c; 100];
        deep.extend(vec![0; 101]);
        assert!(
            check_column_chunk(&deep).unwrap_err()
                == PageHeaderError::Page {
                    page: 0,
                    source: ThriftError::TooDeep
                }
        );
    }

    #[test]
    fn a_footer_claiming_more_booleans_than_bytes_is_refused() {
        // FileMetaData with field 9 (unknown): a list of 2^31 booleans, then nothing.
        let mut file = b"PAR1".to_vec();
        let footer = [0x19, 0xf1, 0x80, 0x80, 0x80, 0x80, 0x08];
        file.extend(footer);
        file.extend((footer.len() as u32).to_le_bytes());
        file.extend(b"PAR1");
        let err = check_footer(&file).unwrap_err();
        assert_eq!(
            err,
            PageHeaderError::Footer(ThriftError::CollectionTooLarge {
                size: 1 << 31,
                left: 0
            })
        );
        assert_eq!(
            err.to_string(),
            "footer: a collection of 2147483648 elements with 0 bytes left"
        );
        // Not a plain Parquet file, or too short: left to the parquet crate.
        assert_eq!(check_footer(b"PAR1"), Ok(()));
        assert_eq!(check_footer(b"0123456789PARE"), Ok(()));
    }

    #[test]
    fn footers_written_by_the_parquet_crate_pass() {
        use crate::table::data_file::{DataFileWriteOptions, KeyValue, encode_data_file};
        use crate::table::datum::Datum;
        use crate::table::row_kind::RowKind;
        use crate::table::testkit::keyed_schema;
        use crate::table::types::DataType;
        let schema = keyed_schema(
            &[("k", DataType::Int), ("v", DataType::Varchar(20))],
            &["k"],
            &[],
        );
        let rows: Vec<KeyValue> = (0..1000)
            .map(|i| KeyValue {
                sequence_number: i,
                kind: RowKind::Insert,
                row: vec![Datum::Int(i as i32), Datum::String(format!("v{i}").into())],
            })
            .collect();
        let file = encode_data_file(
            &schema,
            &rows,
            DataFileWriteOptions::from_table_options("zstd", 1).unwrap(),
        )
        .unwrap();
        assert_eq!(check_footer(&file), Ok(()));
    }

    proptest::proptest! {
        /// Any bytes: an answer, never a panic, in time linear in the input.
        #[test]
        fn any_bytes_are_checked_without_panicking(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = check_column_chunk(&bytes);
            let _ = check_footer(&bytes);
        }
    }
}
