//! Avro object container files: a header (magic, metadata with the writer's schema and
//! the block codec, a sync marker), then blocks of records. Reading checks the framing,
//! compiles the writer's schema and decompresses every block under a cap on the whole
//! file, which the caller sets (it knows how large an honest file of its kind gets).

use super::block::BlockCodec;
use super::{Cursor, Error, Node, Result, Val, parse, put_bytes, put_long, read};

/// The four magic bytes that start every Avro object container file.
const MAGIC: &[u8; 4] = b"Obj\x01";
/// Length of the sync marker that follows the header and every block.
const SYNC_LEN: usize = 16;
/// Uncompressed bytes collected before a block is closed (Java Avro's default interval).
const SYNC_INTERVAL: usize = 64 * 1024;

/// A parsed container file: the compiled writer schema and the decompressed blocks.
pub(crate) struct Container {
    pub(crate) schema: Node,
    #[cfg(test)]
    pub(crate) codec: BlockCodec,
    pub(crate) blocks: Vec<Block>,
}

/// One data block: `count` records encoded back to back in `data`.
pub(crate) struct Block {
    pub(crate) count: usize,
    pub(crate) data: Vec<u8>,
}

impl Container {
    /// Decodes every record of every block, in order, through `convert`.
    pub(crate) fn records<T, E: From<Error>>(
        &self,
        mut convert: impl FnMut(Val<'_>) -> Result<T, E>,
    ) -> Result<Vec<T>, E> {
        let total = self.blocks.iter().map(|b| b.count).sum();
        let mut out = Vec::with_capacity(total);
        for block in &self.blocks {
            let mut cur = Cursor::new(&block.data);
            for _ in 0..block.count {
                out.push(convert(read(&self.schema, &mut cur)?)?);
            }
            // Leftover bytes mean the records were not what the schema says.
            if !cur.at_end() {
                return Err(Error::invalid(format!(
                    "block has {} bytes after its last record",
                    cur.remaining()
                ))
                .into());
            }
        }
        Ok(out)
    }
}

/// Parses a container file, checking its framing and decompressing every block; fails
/// once the blocks decompress to more than `limit` bytes together.
pub(crate) fn read_container(bytes: &[u8], limit: usize) -> Result<Container> {
    let mut cur = Cursor::new(bytes);
    if cur.take(MAGIC.len()).ok() != Some(MAGIC.as_slice()) {
        return Err(Error::invalid("not an Avro container file (bad magic)"));
    }
    let mut schema_text = None;
    let mut codec = BlockCodec::Null;
    // The metadata map has at least one key byte and one value-length byte per entry.
    cur.collection(2, |cur| {
        let key = cur.bytes()?;
        let value = cur.bytes()?;
        match key {
            b"avro.schema" => schema_text = Some(value),
            b"avro.codec" => codec = BlockCodec::from_name(value)?,
            _ => {}
        }
        Ok(())
    })?;
    let schema_text =
        schema_text.ok_or_else(|| Error::invalid("container file has no avro.schema"))?;
    let schema = parse(schema_text).map_err(|e| e.within("schema"))?;
    let sync = cur.take(SYNC_LEN)?;

    let record_min = schema.min_size();
    let mut blocks = Vec::new();
    let mut decompressed = 0usize;
    while !cur.at_end() {
        let at = cur.position();
        let count = cur.long()?;
        let count = usize::try_from(count).map_err(|_| {
            Error::invalid(format!("block at offset {at} has record count {count}"))
        })?;
        let data = cur.bytes()?;
        if cur.take(SYNC_LEN)? != sync {
            return Err(Error::invalid(format!(
                "sync marker of the block at offset {at} does not match the header's"
            )));
        }
        let Some(data) = codec.decompress(data, limit.saturating_sub(decompressed))? else {
            let mib = if limit.is_multiple_of(1 << 20) {
                format!(" ({} MiB)", limit >> 20)
            } else {
                String::new()
            };
            return Err(Error::invalid(format!(
                "container file decompresses to more than {limit} bytes{mib}, the most \
                 lakejoin reads from one file: a corrupt file or a decompression bomb"
            )));
        };
        decompressed += data.len();
        let fits = if record_min == 0 {
            count <= super::MAX_ZERO_SIZE_ITEMS
        } else {
            count
                .checked_mul(record_min)
                .is_some_and(|b| b <= data.len())
        };
        if !fits {
            return Err(Error::invalid(format!(
                "block at offset {at} claims {count} records in {} bytes",
                data.len()
            )));
        }
        blocks.push(Block { count, data });
    }
    Ok(Container {
        schema,
        #[cfg(test)]
        codec,
        blocks,
    })
}

/// Writes a container file record by record.
pub(crate) struct ContainerWriter {
    out: Vec<u8>,
    block: Vec<u8>,
    count: usize,
    codec: BlockCodec,
    sync: [u8; SYNC_LEN],
}

impl ContainerWriter {
    /// Starts a file whose writer schema is the JSON text `schema`.
    pub(crate) fn new(schema: &str, codec: BlockCodec) -> Self {
        let sync = *uuid::Uuid::new_v4().as_bytes();
        let mut out = Vec::with_capacity(schema.len() + 64);
        out.extend_from_slice(MAGIC);
        put_long(&mut out, 2);
        put_bytes(&mut out, b"avro.schema");
        put_bytes(&mut out, schema.as_bytes());
        put_bytes(&mut out, b"avro.codec");
        put_bytes(&mut out, codec.name().as_bytes());
        put_long(&mut out, 0);
        out.extend_from_slice(&sync);
        ContainerWriter {
            out,
            block: Vec::new(),
            count: 0,
            codec,
            sync,
        }
    }

    /// Appends one record, encoded by `encode` into the current block.
    pub(crate) fn append(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        encode(&mut self.block);
        self.count += 1;
        if self.block.len() >= SYNC_INTERVAL {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let mut data = std::mem::take(&mut self.block);
        self.codec
            .avro_codec()
            .compress(&mut data)
            .map_err(|e| Error::Compress(Box::new(e)))?;
        put_long(&mut self.out, self.count as i64);
        put_bytes(&mut self.out, &data);
        self.out.extend_from_slice(&self.sync);
        self.count = 0;
        Ok(())
    }

    /// Closes the last block and returns the file's bytes.
    pub(crate) fn finish(mut self) -> Result<Vec<u8>> {
        self.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests;
