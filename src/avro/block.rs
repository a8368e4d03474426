//! The block codecs of Avro container files (`null`, `deflate`, `snappy`, `zstandard`),
//! decompressing under a byte budget. Why not apache-avro's `Codec::decompress`: it bounds
//! a block only by its process-wide allocation limit (512 MiB), and not a file; a zstd
//! block can expand ~30,000-fold. Compression (writing) does go through apache-avro, whose
//! output is what lakejoin has always written.

use apache_avro::{Codec, DeflateSettings, ZstandardSettings};

use super::{Error, Result};

/// zstd level used when writing; Paimon's Java writer defaults to level 1 for manifests.
const ZSTD_LEVEL: u8 = 1;

/// A block codec of an Avro container file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockCodec {
    Null,
    Deflate,
    Snappy,
    Zstandard,
}

impl BlockCodec {
    /// The value of the `avro.codec` metadata entry.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BlockCodec::Null => "null",
            BlockCodec::Deflate => "deflate",
            BlockCodec::Snappy => "snappy",
            BlockCodec::Zstandard => "zstandard",
        }
    }

    pub(super) fn from_name(name: &[u8]) -> Result<Self> {
        match name {
            b"null" => Ok(BlockCodec::Null),
            b"deflate" => Ok(BlockCodec::Deflate),
            b"snappy" => Ok(BlockCodec::Snappy),
            b"zstandard" => Ok(BlockCodec::Zstandard),
            other => Err(Error::invalid(format!(
                "codec {:?} is not supported (supported: null, deflate, snappy, zstandard)",
                String::from_utf8_lossy(other)
            ))),
        }
    }

    pub(super) fn avro_codec(self) -> Codec {
        match self {
            BlockCodec::Null => Codec::Null,
            BlockCodec::Deflate => Codec::Deflate(DeflateSettings::default()),
            BlockCodec::Snappy => Codec::Snappy,
            BlockCodec::Zstandard => Codec::Zstandard(ZstandardSettings::new(ZSTD_LEVEL)),
        }
    }

    /// Decompresses one block, or returns `None` as soon as its output would exceed
    /// `budget` bytes: zstd and deflate are read as streams, a chunk at a time, and
    /// stopped one byte past the budget; a snappy block's declared length is checked
    /// before anything is allocated. (apache-avro's `Codec::decompress` bounds a block
    /// only by its process-wide allocation limit, 512 MiB, and not a file.)
    pub(super) fn decompress(self, data: &[u8], budget: usize) -> Result<Option<Vec<u8>>> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            Error::invalid(format!("{what} block does not decompress: {e}"))
        };
        Ok(match self {
            BlockCodec::Null => (data.len() <= budget).then(|| data.to_vec()),
            BlockCodec::Deflate => read_bounded(Inflater::new(data), budget, data.len())
                .map_err(|e| corrupt("deflate", &e))?,
            BlockCodec::Snappy => {
                // The block is the snappy data followed by a big-endian CRC-32 of the
                // uncompressed bytes.
                let Some(crc_at) = data.len().checked_sub(4) else {
                    return Err(Error::invalid(format!(
                        "snappy block of {} bytes has no checksum",
                        data.len()
                    )));
                };
                let (compressed, crc) = data.split_at(crc_at);
                let len =
                    snap::raw::decompress_len(compressed).map_err(|e| corrupt("snappy", &e))?;
                if len > budget {
                    return Ok(None);
                }
                let mut out = vec![0; len];
                let written = snap::raw::Decoder::new()
                    .decompress(compressed, &mut out)
                    .map_err(|e| corrupt("snappy", &e))?;
                out.truncate(written);
                let expected = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
                let actual = crc32fast::hash(&out);
                if expected != actual {
                    return Err(Error::invalid(format!(
                        "snappy block checksum {actual:#010x} does not match the \
                         recorded {expected:#010x}"
                    )));
                }
                Some(out)
            }
            BlockCodec::Zstandard => {
                let decoder = zstd::stream::read::Decoder::with_buffer(data)
                    .map_err(|e| corrupt("zstd", &e))?;
                read_bounded(decoder, budget, data.len()).map_err(|e| corrupt("zstd", &e))?
            }
        })
    }
}

/// Size of the chunks a stream is decompressed in, after the first.
pub(super) const DECOMPRESS_CHUNK: usize = 1 << 20;

/// Reads `reader` to its end, or returns `None` as soon as it yields more than `budget`
/// bytes. Reads in chunks joined at the end rather than into one growing buffer, which
/// would reallocate by doubling and hold up to three times the budget while copying
/// (`table scan` of a 66 KB zstd bomb peaked at 841 MB that way, at 325 MB in chunks,
/// against 2.7 GB with no cap). The first chunk is sized from the
/// compressed length, so an honest block (64 KiB of records) is one chunk, not copied.
fn read_bounded(
    mut reader: impl std::io::Read,
    budget: usize,
    compressed_len: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut total = 0usize;
    let mut size = compressed_len
        .saturating_mul(8)
        .clamp(4096, DECOMPRESS_CHUNK);
    loop {
        // One byte past the budget tells an output that fills it from a larger one.
        let want = size.min(budget.saturating_sub(total).saturating_add(1));
        let mut chunk = Vec::with_capacity(want);
        let n = (&mut reader)
            .take(u64::try_from(want).unwrap_or(u64::MAX))
            .read_to_end(&mut chunk)?;
        total = total.saturating_add(n);
        if total > budget {
            return Ok(None);
        }
        if n > 0 {
            chunks.push(chunk);
        }
        if n < want {
            break;
        }
        size = DECOMPRESS_CHUNK;
    }
    Ok(Some(if chunks.len() == 1 {
        chunks.swap_remove(0)
    } else {
        chunks.concat()
    }))
}

/// A raw deflate stream (Avro's `deflate` codec) as a reader, so that it is decompressed
/// a chunk at a time like zstd. Bytes after the end of the stream are ignored, as Java's
/// `Inflater` and miniz_oxide's one-shot functions ignore them.
struct Inflater<'a> {
    state: Box<miniz_oxide::inflate::stream::InflateState>,
    input: &'a [u8],
    ended: bool,
}

impl<'a> Inflater<'a> {
    fn new(input: &'a [u8]) -> Self {
        Inflater {
            state: miniz_oxide::inflate::stream::InflateState::new_boxed(
                miniz_oxide::DataFormat::Raw,
            ),
            input,
            ended: false,
        }
    }
}

impl std::io::Read for Inflater<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        use miniz_oxide::{MZError, MZFlush, MZStatus};
        use std::io::{Error as IoError, ErrorKind};
        while !self.ended && !out.is_empty() {
            let step = miniz_oxide::inflate::stream::inflate(
                &mut self.state,
                self.input,
                out,
                MZFlush::None,
            );
            self.input = self.input.get(step.bytes_consumed..).unwrap_or_default();
            match step.status {
                Ok(MZStatus::StreamEnd) => self.ended = true,
                Ok(_) => {}
                // No progress is possible: the input ended before the stream did.
                Err(MZError::Buf) => {
                    return Err(IoError::new(
                        ErrorKind::UnexpectedEof,
                        "deflate stream ends early",
                    ));
                }
                Err(e) => {
                    return Err(IoError::new(
                        ErrorKind::InvalidData,
                        format!("corrupt deflate stream ({e:?})"),
                    ));
                }
            }
            if step.bytes_written > 0 {
                return Ok(step.bytes_written);
            }
            if step.bytes_consumed == 0 && !self.ended {
                return Err(IoError::new(
                    ErrorKind::InvalidData,
                    "deflate stream makes no progress",
                ));
            }
        }
        Ok(0)
    }
}
