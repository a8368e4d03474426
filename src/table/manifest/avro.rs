//! A small Avro Object Container File (OCF) codec for Paimon's metadata files.
//!
//! Why not `apache_avro::Reader`: it materialises every record as a `Value` tree with an
//! owned `String` per field name, and resolving fields by name on top of that costs a
//! scan per field. Manifests of big tables hold many thousands of entries, so this module
//! compiles the *writer's* schema once into a [`Node`] tree, decodes records into
//! lightweight positional [`Val`]s that borrow bytes from the decompressed block, and lets
//! the caller map field names to positions once per file. apache-avro is still used for
//! the block codecs (deflate, snappy, zstandard).
//!
//! Every input byte is untrusted: all lengths and counts are checked against the bytes
//! that remain, schema nesting is bounded, and errors are returned instead of panicking.

use std::collections::{HashMap, HashSet};

use apache_avro::{Codec, DeflateSettings, ZstandardSettings};
use serde_json::Value as Json;

use crate::error::{Error, Result};

/// The four magic bytes that start every Avro object container file.
const MAGIC: &[u8; 4] = b"Obj\x01";
/// Length of the sync marker that follows the header and every block.
const SYNC_LEN: usize = 16;
/// Deepest schema nesting accepted; Paimon's schemas nest 5 levels, this bounds recursion.
const MAX_SCHEMA_DEPTH: usize = 64;
/// Most items an array or map of zero-byte items may hold (a `null` array costs no bytes
/// per item, so the remaining input cannot bound it).
const MAX_ZERO_SIZE_ITEMS: usize = 1 << 16;
/// Most nodes a compiled schema may have. Named types are copied where they are
/// referenced, so a hostile schema could otherwise grow exponentially.
const MAX_SCHEMA_NODES: usize = 10_000;
/// Uncompressed bytes collected before a block is closed (Java Avro's default interval).
const SYNC_INTERVAL: usize = 64 * 1024;
/// zstd level used when writing; Paimon's Java writer defaults to level 1 for manifests.
const ZSTD_LEVEL: u8 = 1;
/// Most bytes the blocks of one container file may decompress to, all blocks together.
///
/// Why: every block of a file is decompressed and kept until the file is decoded, and a
/// zstd block can expand ~30,000-fold, so a 68 KB manifest held 3 GB. Honest files are
/// far smaller: Paimon rolls a manifest at `manifest.target-file-size` (8 MiB by default)
/// of *compressed* bytes, and manifests compress about 3 to 1 (30,000 entries with
/// random file names and stats: 3.8 MB zstd, 11 MB raw), so a full manifest decompresses
/// to some 25 MiB; manifest lists and index manifests hold one small entry per manifest
/// or index file. 256 MiB is 10 times that, and 32 times the target size for a file that
/// did not compress at all.
pub(crate) const MAX_CONTAINER_DECOMPRESSED_BYTES: usize = 256 << 20;
const _: () = assert!(MAX_CONTAINER_DECOMPRESSED_BYTES >= 32 * (8 << 20));

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

    fn from_name(name: &[u8]) -> Result<Self> {
        match name {
            b"null" => Ok(BlockCodec::Null),
            b"deflate" => Ok(BlockCodec::Deflate),
            b"snappy" => Ok(BlockCodec::Snappy),
            b"zstandard" => Ok(BlockCodec::Zstandard),
            other => Err(Error::format(format!(
                "avro codec {:?} is not supported (supported: null, deflate, snappy, zstandard)",
                String::from_utf8_lossy(other)
            ))),
        }
    }

    fn avro_codec(self) -> Codec {
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
    fn decompress(self, data: &[u8], budget: usize) -> Result<Option<Vec<u8>>> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            Error::format(format!("avro {what} block does not decompress: {e}"))
        };
        Ok(match self {
            BlockCodec::Null => (data.len() <= budget).then(|| data.to_vec()),
            BlockCodec::Deflate => read_bounded(Inflater::new(data), budget, data.len())
                .map_err(|e| corrupt("deflate", &e))?,
            BlockCodec::Snappy => {
                // The block is the snappy data followed by a big-endian CRC-32 of the
                // uncompressed bytes.
                let Some(crc_at) = data.len().checked_sub(4) else {
                    return Err(Error::format(format!(
                        "avro snappy block of {} bytes has no checksum",
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
                    return Err(Error::format(format!(
                        "avro snappy block checksum {actual:#010x} does not match the \
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
const DECOMPRESS_CHUNK: usize = 1 << 20;

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

// ------------------------------------------------------------------------------------------
// Schema
// ------------------------------------------------------------------------------------------

/// A writer schema compiled for decoding. Logical types are dropped: only the physical
/// encoding matters here (a `timestamp-millis` is a `Long`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum(usize),
    Array { items: Box<Node>, item_min: usize },
    Map { values: Box<Node>, value_min: usize },
    Union(Vec<Node>),
    Record(Box<RecordNode>),
}

/// A record of a compiled schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecordNode {
    /// Full name (namespace included).
    pub(crate) name: String,
    pub(crate) fields: Vec<FieldNode>,
}

/// A field of a [`RecordNode`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldNode {
    pub(crate) name: String,
    pub(crate) node: Node,
}

impl RecordNode {
    /// Position of the field called `name` in the writer's record, if it has one.
    pub(crate) fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}

impl Node {
    /// The record this node holds: the node itself, or the one record branch of a union
    /// (how nullable records such as `["null", record]` are written).
    pub(crate) fn as_record(&self) -> Option<&RecordNode> {
        match self {
            Node::Record(r) => Some(r),
            Node::Union(branches) => {
                let mut records = branches.iter().filter_map(|b| match b {
                    Node::Record(r) => Some(r.as_ref()),
                    _ => None,
                });
                let first = records.next();
                if records.next().is_some() {
                    None
                } else {
                    first
                }
            }
            _ => None,
        }
    }

    /// The fewest bytes one value of this node takes; bounds counts read from the input.
    fn min_size(&self) -> usize {
        match self {
            Node::Null => 0,
            Node::Boolean | Node::Int | Node::Long | Node::Bytes | Node::String => 1,
            Node::Enum(_) | Node::Array { .. } | Node::Map { .. } | Node::Union(_) => 1,
            Node::Float => 4,
            Node::Double => 8,
            Node::Fixed(n) => *n,
            Node::Record(r) => r
                .fields
                .iter()
                .fold(0usize, |acc, f| acc.saturating_add(f.node.min_size())),
        }
    }
}

/// Compiles a writer schema given as JSON text.
pub(crate) fn parse_schema(text: &[u8]) -> Result<Node> {
    let json: Json = serde_json::from_slice(text)
        .map_err(|e| Error::format(format!("avro schema is not valid JSON: {e}")))?;
    SchemaParser::default().parse(&json, "", 0)
}

#[derive(Default)]
struct SchemaParser {
    /// Named types (records, enums, fixed) defined so far, by full name, with their size
    /// in nodes.
    named: HashMap<String, (Node, usize)>,
    /// Records whose definition is being parsed; a reference to one is recursion.
    open: HashSet<String>,
    /// Nodes compiled so far, references counted at their full size.
    nodes: usize,
}

impl SchemaParser {
    fn parse(&mut self, json: &Json, namespace: &str, depth: usize) -> Result<Node> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(Error::format("avro schema nests too deeply"));
        }
        self.count_nodes(1)?;
        match json {
            Json::String(name) => self.parse_name(name, namespace),
            Json::Array(branches) => {
                let nodes = branches
                    .iter()
                    .map(|b| self.parse(b, namespace, depth + 1))
                    .collect::<Result<Vec<_>>>()?;
                if nodes.iter().any(|n| matches!(n, Node::Union(_))) {
                    return Err(Error::format("avro union directly inside a union"));
                }
                Ok(Node::Union(nodes))
            }
            Json::Object(map) => {
                let ty = map
                    .get("type")
                    .ok_or_else(|| Error::format("avro schema object without \"type\""))?;
                let Json::String(ty) = ty else {
                    // `{"type": {...}}` or `{"type": [...]}` wraps another schema.
                    return self.parse(ty, namespace, depth + 1);
                };
                match ty.as_str() {
                    "record" | "error" => self.parse_record(map, namespace, depth),
                    "enum" => {
                        let symbols = match map.get("symbols") {
                            Some(Json::Array(s)) => s.len(),
                            _ => return Err(Error::format("avro enum without \"symbols\"")),
                        };
                        let (full, _) = full_name(map, namespace)?;
                        self.define(full, Node::Enum(symbols))
                    }
                    "fixed" => {
                        let size = map
                            .get("size")
                            .and_then(Json::as_u64)
                            .and_then(|s| usize::try_from(s).ok())
                            .ok_or_else(|| Error::format("avro fixed without a valid \"size\""))?;
                        let (full, _) = full_name(map, namespace)?;
                        self.define(full, Node::Fixed(size))
                    }
                    "array" => {
                        let items = map
                            .get("items")
                            .ok_or_else(|| Error::format("avro array without \"items\""))?;
                        let items = self.parse(items, namespace, depth + 1)?;
                        Ok(Node::Array {
                            item_min: items.min_size(),
                            items: Box::new(items),
                        })
                    }
                    "map" => {
                        let values = map
                            .get("values")
                            .ok_or_else(|| Error::format("avro map without \"values\""))?;
                        let values = self.parse(values, namespace, depth + 1)?;
                        Ok(Node::Map {
                            value_min: values.min_size(),
                            values: Box::new(values),
                        })
                    }
                    // A primitive with attributes (e.g. a logicalType) or a named reference.
                    other => self.parse_name(other, namespace),
                }
            }
            other => Err(Error::format(format!(
                "invalid avro schema element {other}"
            ))),
        }
    }

    fn count_nodes(&mut self, n: usize) -> Result<()> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_SCHEMA_NODES {
            return Err(Error::format("avro schema is too large"));
        }
        Ok(())
    }

    fn parse_name(&mut self, name: &str, namespace: &str) -> Result<Node> {
        let primitive = match name {
            "null" => Some(Node::Null),
            "boolean" => Some(Node::Boolean),
            "int" => Some(Node::Int),
            "long" => Some(Node::Long),
            "float" => Some(Node::Float),
            "double" => Some(Node::Double),
            "bytes" => Some(Node::Bytes),
            "string" => Some(Node::String),
            _ => None,
        };
        if let Some(node) = primitive {
            return Ok(node);
        }
        let qualified = if name.contains('.') || namespace.is_empty() {
            name.to_string()
        } else {
            format!("{namespace}.{name}")
        };
        for candidate in [qualified.as_str(), name] {
            if self.open.contains(candidate) {
                return Err(Error::format(format!(
                    "recursive avro type {candidate} is not supported"
                )));
            }
            if let Some((node, size)) = self.named.get(candidate) {
                let (node, size) = (node.clone(), *size);
                self.count_nodes(size)?;
                return Ok(node);
            }
        }
        Err(Error::format(format!("unknown avro type {name:?}")))
    }

    fn parse_record(
        &mut self,
        map: &serde_json::Map<String, Json>,
        namespace: &str,
        depth: usize,
    ) -> Result<Node> {
        let (full, inner_namespace) = full_name(map, namespace)?;
        let Some(Json::Array(fields)) = map.get("fields") else {
            return Err(Error::format(format!(
                "avro record {full} without \"fields\""
            )));
        };
        let nodes_before = self.nodes;
        self.open.insert(full.clone());
        let mut out = Vec::with_capacity(fields.len());
        for field in fields {
            let name = field.get("name").and_then(Json::as_str).ok_or_else(|| {
                Error::format(format!("a field of avro record {full} has no name"))
            })?;
            let ty = field.get("type").ok_or_else(|| {
                Error::format(format!("field {name} of avro record {full} has no type"))
            })?;
            let node = self.parse(ty, &inner_namespace, depth + 1)?;
            out.push(FieldNode {
                name: name.to_string(),
                node,
            });
        }
        self.open.remove(&full);
        let node = Node::Record(Box::new(RecordNode {
            name: full.clone(),
            fields: out,
        }));
        let size = self.nodes - nodes_before + 1;
        self.define_sized(full, node, size)
    }

    fn define(&mut self, full: String, node: Node) -> Result<Node> {
        self.define_sized(full, node, 1)
    }

    fn define_sized(&mut self, full: String, node: Node, size: usize) -> Result<Node> {
        if self
            .named
            .insert(full.clone(), (node.clone(), size))
            .is_some()
        {
            return Err(Error::format(format!("avro type {full} is defined twice")));
        }
        Ok(node)
    }
}

/// The full name of a named type and the namespace its children inherit.
fn full_name(map: &serde_json::Map<String, Json>, enclosing: &str) -> Result<(String, String)> {
    let name = map
        .get("name")
        .and_then(Json::as_str)
        .ok_or_else(|| Error::format("named avro type without \"name\""))?;
    if let Some((ns, _)) = name.rsplit_once('.') {
        return Ok((name.to_string(), ns.to_string()));
    }
    let ns = match map.get("namespace") {
        Some(Json::String(ns)) => ns.as_str(),
        _ => enclosing,
    };
    let full = if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}.{name}")
    };
    Ok((full, ns.to_string()))
}

// ------------------------------------------------------------------------------------------
// Decoding
// ------------------------------------------------------------------------------------------

/// One decoded value. Records are positional (the writer's field order); strings, bytes
/// and fixed values borrow from the block; ints, longs and enum indexes are `Long`; a
/// union decodes to its branch's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val<'a> {
    Null,
    Bool(bool),
    Long(i64),
    Float(f32),
    Double(f64),
    Bytes(&'a [u8]),
    Array(Vec<Val<'a>>),
    Map(Vec<(&'a [u8], Val<'a>)>),
    Record(Vec<Val<'a>>),
}

/// A read position in a byte slice.
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::format("avro data ends early"));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// A zig-zag varint, the encoding of both `int` and `long`.
    pub(crate) fn read_long(&mut self) -> Result<i64> {
        let mut raw: u64 = 0;
        for i in 0..10 {
            let b = self.byte()?;
            if i == 9 && b > 1 {
                return Err(Error::format("avro varint overflows 64 bits"));
            }
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(Error::format("avro varint is longer than 10 bytes"))
    }

    /// A non-negative length that must fit in the remaining input.
    fn read_len(&mut self) -> Result<usize> {
        let len = self.read_long()?;
        usize::try_from(len)
            .ok()
            .filter(|l| *l <= self.remaining())
            .ok_or_else(|| Error::format(format!("invalid avro length {len}")))
    }

    pub(crate) fn read_bytes(&mut self) -> Result<&'a [u8]> {
        let len = self.read_len()?;
        self.take(len)
    }

    /// The item count of the next array/map block (0 ends the array), checked against the
    /// input left and the items already read.
    fn read_block_count(&mut self, item_min: usize, already: usize) -> Result<usize> {
        let raw = self.read_long()?;
        let count = if raw < 0 {
            // A negative count is followed by the block's size in bytes, which we don't need.
            self.read_long()?;
            raw.checked_neg()
                .ok_or_else(|| Error::format("invalid avro block count"))?
        } else {
            raw
        };
        let count = usize::try_from(count)
            .map_err(|_| Error::format(format!("invalid avro block count {raw}")))?;
        let fits = if item_min == 0 {
            already
                .checked_add(count)
                .is_some_and(|t| t <= MAX_ZERO_SIZE_ITEMS)
        } else {
            count
                .checked_mul(item_min)
                .is_some_and(|b| b <= self.remaining())
        };
        if !fits {
            return Err(Error::format(format!(
                "avro block count {count} exceeds the data"
            )));
        }
        Ok(count)
    }
}

/// Decodes one value of `node` at the cursor.
pub(crate) fn decode<'a>(node: &Node, cur: &mut Cursor<'a>) -> Result<Val<'a>> {
    Ok(match node {
        Node::Null => Val::Null,
        Node::Boolean => match cur.byte()? {
            0 => Val::Bool(false),
            1 => Val::Bool(true),
            b => return Err(Error::format(format!("invalid avro boolean {b}"))),
        },
        Node::Int | Node::Long => Val::Long(cur.read_long()?),
        Node::Float => {
            let b = cur.take(4)?;
            Val::Float(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        }
        Node::Double => {
            let b = cur.take(8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Val::Double(f64::from_le_bytes(a))
        }
        Node::Bytes | Node::String => Val::Bytes(cur.read_bytes()?),
        Node::Fixed(n) => Val::Bytes(cur.take(*n)?),
        Node::Enum(symbols) => {
            let i = cur.read_long()?;
            if usize::try_from(i).map_or(true, |i| i >= *symbols) {
                return Err(Error::format(format!("avro enum index {i} out of range")));
            }
            Val::Long(i)
        }
        Node::Array { items, item_min } => {
            let mut out = Vec::new();
            loop {
                let count = cur.read_block_count(*item_min, out.len())?;
                if count == 0 {
                    break;
                }
                out.reserve(count);
                for _ in 0..count {
                    out.push(decode(items, cur)?);
                }
            }
            Val::Array(out)
        }
        Node::Map { values, value_min } => {
            let mut out = Vec::new();
            loop {
                // Every entry also has a key of at least one byte.
                let count = cur.read_block_count(value_min.saturating_add(1), out.len())?;
                if count == 0 {
                    break;
                }
                out.reserve(count);
                for _ in 0..count {
                    let key = cur.read_bytes()?;
                    out.push((key, decode(values, cur)?));
                }
            }
            Val::Map(out)
        }
        Node::Union(branches) => {
            let i = cur.read_long()?;
            let branch = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or_else(|| Error::format(format!("avro union branch {i} out of range")))?;
            decode(branch, cur)?
        }
        Node::Record(record) => {
            let mut out = Vec::with_capacity(record.fields.len());
            for field in &record.fields {
                out.push(decode(&field.node, cur)?);
            }
            Val::Record(out)
        }
    })
}

// ------------------------------------------------------------------------------------------
// Container files
// ------------------------------------------------------------------------------------------

/// A parsed container file: the compiled writer schema and the decompressed blocks.
pub(crate) struct Container {
    pub(crate) schema: Node,
    /// The file's codec; only tests look at it so far.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) codec: BlockCodec,
    pub(crate) blocks: Vec<Block>,
}

/// One data block: `count` records encoded back to back in `data`.
pub(crate) struct Block {
    pub(crate) count: usize,
    pub(crate) data: Vec<u8>,
}

/// Parses a container file, checking its framing and decompressing every block; fails
/// once the blocks decompress to more than [`MAX_CONTAINER_DECOMPRESSED_BYTES`].
pub(crate) fn read_container(bytes: &[u8]) -> Result<Container> {
    read_container_limited(bytes, MAX_CONTAINER_DECOMPRESSED_BYTES)
}

/// [`read_container`] with a cap of `limit` decompressed bytes for the whole file.
pub(crate) fn read_container_limited(bytes: &[u8], limit: usize) -> Result<Container> {
    let mut cur = Cursor::new(bytes);
    if cur.take(MAGIC.len()).ok() != Some(MAGIC.as_slice()) {
        return Err(Error::format("not an avro container file (bad magic)"));
    }
    let mut schema_text = None;
    let mut codec = BlockCodec::Null;
    // The metadata map has at least one key byte and one value-length byte per entry.
    let mut entries = 0;
    loop {
        let count = cur.read_block_count(2, entries)?;
        if count == 0 {
            break;
        }
        entries += count;
        for _ in 0..count {
            let key = cur.read_bytes()?;
            let value = cur.read_bytes()?;
            match key {
                b"avro.schema" => schema_text = Some(value),
                b"avro.codec" => codec = BlockCodec::from_name(value)?,
                _ => {}
            }
        }
    }
    let schema_text =
        schema_text.ok_or_else(|| Error::format("avro container file has no avro.schema"))?;
    let schema = parse_schema(schema_text)?;
    let sync = cur.take(SYNC_LEN)?;

    let record_min = schema.min_size();
    let mut blocks = Vec::new();
    let mut decompressed = 0usize;
    while !cur.at_end() {
        let count = cur.read_long()?;
        let count = usize::try_from(count)
            .map_err(|_| Error::format(format!("invalid avro block record count {count}")))?;
        let data = cur.read_bytes()?;
        if cur.take(SYNC_LEN)? != sync {
            return Err(Error::format("avro block sync marker mismatch"));
        }
        let Some(data) = codec.decompress(data, limit.saturating_sub(decompressed))? else {
            let mib = if limit.is_multiple_of(1 << 20) {
                format!(" ({} MiB)", limit >> 20)
            } else {
                String::new()
            };
            return Err(Error::format(format!(
                "avro container file decompresses to more than {limit} bytes{mib}, the most \
                 lakejoin reads from one metadata file: a corrupt file or a decompression bomb"
            )));
        };
        decompressed += data.len();
        let fits = if record_min == 0 {
            count <= MAX_ZERO_SIZE_ITEMS
        } else {
            count
                .checked_mul(record_min)
                .is_some_and(|b| b <= data.len())
        };
        if !fits {
            return Err(Error::format(format!(
                "avro block claims {count} records in {} bytes",
                data.len()
            )));
        }
        blocks.push(Block { count, data });
    }
    Ok(Container {
        schema,
        codec,
        blocks,
    })
}

// ------------------------------------------------------------------------------------------
// Encoding
// ------------------------------------------------------------------------------------------

/// Appends a zig-zag varint (`int` or `long`).
pub(crate) fn put_long(buf: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.push((z as u8) | 0x80);
        z >>= 7;
    }
    buf.push(z as u8);
}

/// Appends `bytes` (or a UTF-8 `string`): length then content.
pub(crate) fn put_bytes(buf: &mut Vec<u8>, v: &[u8]) {
    put_long(buf, v.len() as i64);
    buf.extend_from_slice(v);
}

/// Appends an array of strings (one block, then the terminating empty block).
pub(crate) fn put_string_array(buf: &mut Vec<u8>, items: &[String]) {
    if !items.is_empty() {
        put_long(buf, items.len() as i64);
        for s in items {
            put_bytes(buf, s.as_bytes());
        }
    }
    put_long(buf, 0);
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
            .map_err(|e| Error::avro("compressing an avro block", e))?;
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
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [
            0,
            1,
            -1,
            63,
            -64,
            64,
            300,
            i32::MAX as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut buf = Vec::new();
            put_long(&mut buf, v);
            let mut cur = Cursor::new(&buf);
            assert_eq!(cur.read_long().unwrap(), v);
            assert!(cur.at_end());
        }
        // Avro spec examples.
        let mut buf = Vec::new();
        put_long(&mut buf, -64);
        assert_eq!(buf, [0x7f]);
        buf.clear();
        put_long(&mut buf, 64);
        assert_eq!(buf, [0x80, 0x01]);
    }

    #[test]
    fn overlong_varint_is_an_error() {
        let buf = [0xffu8; 11];
        assert!(Cursor::new(&buf).read_long().is_err());
        let buf = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Cursor::new(&buf).read_long().is_err());
    }

    #[test]
    fn schema_names_resolve_with_namespaces() {
        let schema = br#"["null", {"type": "record", "name": "r", "namespace": "a.b", "fields": [
            {"name": "x", "type": {"type": "record", "name": "inner", "fields": [
                {"name": "v", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}},
            {"name": "y", "type": "inner"},
            {"name": "z", "type": "a.b.inner"},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3}},
            {"name": "m", "type": {"type": "map", "values": ["null", "string"]}}
        ]}]"#;
        let node = parse_schema(schema).unwrap();
        let record = node.as_record().unwrap();
        assert_eq!(record.name, "a.b.r");
        assert_eq!(record.field_index("z"), Some(2));
        assert_eq!(record.fields[1].node, record.fields[0].node);
        assert_eq!(record.fields[3].node, Node::Enum(2));
        assert_eq!(record.fields[4].node, Node::Fixed(3));
    }

    #[test]
    fn bad_schemas_are_errors() {
        for bad in [
            &br#"{"type": "record", "name": "r", "fields": [{"name": "a", "type": "r"}]}"#[..],
            br#"{"type": "record", "name": "r", "fields": [{"name": "a", "type": "nope"}]}"#,
            br#"{"type": "record", "name": "r"}"#,
            br#"[["null"], "int"]"#,
            br#"{"type": "fixed", "name": "f", "size": -1}"#,
            br#"42"#,
            b"not json",
        ] {
            assert!(
                parse_schema(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let deep = format!(
            "{}\"int\"{}",
            r#"{"type": "array", "items": "#.repeat(100),
            "}".repeat(100)
        );
        assert!(parse_schema(deep.as_bytes()).is_err());

        // Each record references the previous one twice: 2^40 nodes if copied naively.
        let mut types = vec![r#"{"type": "record", "name": "r0", "fields": []}"#.to_string()];
        for i in 1..40 {
            types.push(format!(
                r#"{{"type": "record", "name": "r{i}", "fields": [
                    {{"name": "a", "type": "r{p}"}}, {{"name": "b", "type": "r{p}"}}]}}"#,
                p = i - 1
            ));
        }
        let fields: Vec<String> = types
            .iter()
            .enumerate()
            .map(|(i, t)| format!(r#"{{"name": "f{i}", "type": {t}}}"#))
            .collect();
        let bomb = format!(
            r#"{{"type": "record", "name": "top", "fields": [{}]}}"#,
            fields.join(",")
        );
        let err = parse_schema(bomb.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
    }

    #[test]
    fn huge_counts_are_rejected_without_allocating() {
        let node = Node::Array {
            items: Box::new(Node::Long),
            item_min: 1,
        };
        let mut buf = Vec::new();
        put_long(&mut buf, i64::MAX);
        assert!(decode(&node, &mut Cursor::new(&buf)).is_err());
        let mut buf = Vec::new();
        put_long(&mut buf, i64::MIN);
        assert!(decode(&node, &mut Cursor::new(&buf)).is_err());
        let nulls = Node::Array {
            items: Box::new(Node::Null),
            item_min: 0,
        };
        let mut buf = Vec::new();
        put_long(&mut buf, 1 << 40);
        assert!(decode(&nulls, &mut Cursor::new(&buf)).is_err());
    }

    /// A container file of `"long"` records (a zero byte is the long 0) with the given
    /// blocks, each (record count, block bytes as stored, i.e. compressed by `codec`).
    fn raw_container(codec: BlockCodec, blocks: &[(usize, Vec<u8>)]) -> Vec<u8> {
        let sync = [7u8; SYNC_LEN];
        let mut out = MAGIC.to_vec();
        put_long(&mut out, 2);
        put_bytes(&mut out, b"avro.schema");
        put_bytes(&mut out, b"\"long\"");
        put_bytes(&mut out, b"avro.codec");
        put_bytes(&mut out, codec.name().as_bytes());
        put_long(&mut out, 0);
        out.extend_from_slice(&sync);
        for (count, data) in blocks {
            put_long(&mut out, *count as i64);
            put_bytes(&mut out, data);
            out.extend_from_slice(&sync);
        }
        out
    }

    /// `data` compressed as an Avro block of `codec`.
    fn compressed(codec: BlockCodec, data: &[u8]) -> Vec<u8> {
        match codec {
            BlockCodec::Null => data.to_vec(),
            BlockCodec::Deflate => miniz_oxide::deflate::compress_to_vec(data, 6),
            BlockCodec::Snappy => {
                let mut out = snap::raw::Encoder::new().compress_vec(data).unwrap();
                out.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
                out
            }
            BlockCodec::Zstandard => zstd::bulk::compress(data, 1).unwrap(),
        }
    }

    const CODECS: [BlockCodec; 4] = [
        BlockCodec::Null,
        BlockCodec::Deflate,
        BlockCodec::Snappy,
        BlockCodec::Zstandard,
    ];

    const MIB: usize = 1 << 20;

    fn assert_over_limit(result: Result<Container>, limit: usize, what: &str) {
        let err = match result {
            Ok(file) => panic!(
                "{what}: read {} blocks, expected an error",
                file.blocks.len()
            ),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(&format!("more than {limit} bytes")),
            "{what}: {err}"
        );
    }

    #[test]
    fn the_total_decompressed_size_of_a_file_is_capped() {
        // Three blocks of 400 KiB each: every block is under 1 MiB, the file is not.
        let block = vec![0u8; 400 << 10];
        for codec in CODECS {
            let data = compressed(codec, &block);
            let file = raw_container(codec, &vec![(block.len(), data); 3]);
            assert_over_limit(read_container_limited(&file, MIB), MIB, codec.name());
            // Under a limit the file fits, it reads.
            let read = read_container_limited(&file, 2 * MIB).unwrap();
            assert_eq!(read.blocks.len(), 3, "{}", codec.name());
            // A file exactly at the limit is read too.
            let exact = read_container_limited(&file, 3 * block.len()).unwrap();
            assert_eq!(exact.blocks.len(), 3, "{}", codec.name());
        }
    }

    #[test]
    fn decompression_stops_at_the_limit_inside_a_block() {
        // Each block would decompress to 4 MiB and then fail (a corrupt tail): a reader
        // that decompressed the whole block first would report the corruption; one that
        // stops at the 1 MiB limit reports the limit.
        let zeros = vec![0u8; 4 * MIB];
        // zstd: a valid 4 MiB frame followed by bytes that are no frame.
        let mut zstd_block = compressed(BlockCodec::Zstandard, &zeros);
        zstd_block.extend_from_slice(&[0xAB; 64]);
        // deflate: the stream cut before its end.
        let mut deflate_block = compressed(BlockCodec::Deflate, &zeros);
        deflate_block.truncate(deflate_block.len() - 8);
        // snappy: a header declaring 4 MiB, then nothing of it (checked before allocating).
        let mut snappy_block = Vec::new();
        put_varint_u64(&mut snappy_block, zeros.len() as u64);
        snappy_block.extend_from_slice(&[0u8; 4]);
        // null: the raw block itself is over the limit.
        let null_block = vec![0u8; 2 * MIB];
        for (codec, block) in [
            (BlockCodec::Zstandard, zstd_block),
            (BlockCodec::Deflate, deflate_block),
            (BlockCodec::Snappy, snappy_block),
            (BlockCodec::Null, null_block),
        ] {
            let file = raw_container(codec, &[(1, block)]);
            assert_over_limit(read_container_limited(&file, MIB), MIB, codec.name());
        }
        // A snappy header declaring more than any address space is an error, not a panic.
        let mut huge = Vec::new();
        put_varint_u64(&mut huge, u64::from(u32::MAX));
        huge.extend_from_slice(&[0u8; 4]);
        let file = raw_container(BlockCodec::Snappy, &[(1, huge)]);
        assert!(read_container_limited(&file, MIB).is_err());
    }

    #[test]
    fn blocks_decompress_exactly_across_chunks() {
        // Bigger than several chunks, and not a multiple of the chunk size.
        let data: Vec<u8> = (0..3 * DECOMPRESS_CHUNK + 12_345)
            .map(|i| (i % 251) as u8 ^ (i / 4096) as u8)
            .collect();
        for codec in CODECS {
            let block = compressed(codec, &data);
            let out = codec.decompress(&block, usize::MAX).unwrap().unwrap();
            assert!(out == data, "{}", codec.name());
            let exact = codec.decompress(&block, data.len()).unwrap().unwrap();
            assert!(exact == data, "{}", codec.name());
            assert!(codec.decompress(&block, data.len() - 1).unwrap().is_none());
            // An empty block.
            let empty = compressed(codec, &[]);
            assert_eq!(codec.decompress(&empty, 0).unwrap(), Some(Vec::new()));
        }
    }

    #[test]
    fn corrupt_blocks_under_the_limit_are_format_errors() {
        let data = vec![42u8; 100_000];
        for codec in [
            BlockCodec::Deflate,
            BlockCodec::Snappy,
            BlockCodec::Zstandard,
        ] {
            let mut block = compressed(codec, &data);
            block.truncate(block.len() / 2);
            let err = codec
                .decompress(&block, usize::MAX)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("does not decompress") || err.contains("checksum"),
                "{}: {err}",
                codec.name()
            );
        }
        let mut snappy = compressed(BlockCodec::Snappy, &data);
        let last = snappy.len() - 1;
        snappy[last] ^= 1;
        let err = BlockCodec::Snappy
            .decompress(&snappy, usize::MAX)
            .unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn any_block_bytes_decompress_or_fail_cleanly(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512),
            budget in 0usize..100_000,
        ) {
            for codec in CODECS {
                if let Ok(Some(out)) = codec.decompress(&bytes, budget) {
                    proptest::prop_assert!(out.len() <= budget);
                }
            }
        }
    }

    /// Snappy's length preamble: an unsigned LEB128 varint.
    fn put_varint_u64(buf: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        buf.push(v as u8);
    }

    #[test]
    fn container_round_trip_with_every_codec() {
        let schema = r#"{"type":"record","name":"r","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"]}]}"#;
        for codec in [
            BlockCodec::Null,
            BlockCodec::Deflate,
            BlockCodec::Snappy,
            BlockCodec::Zstandard,
        ] {
            let mut w = ContainerWriter::new(schema, codec);
            for i in 0..20_000i64 {
                w.append(|buf| {
                    put_long(buf, i);
                    put_long(buf, 1);
                    put_bytes(buf, format!("value {i}").as_bytes());
                })
                .unwrap();
            }
            let bytes = w.finish().unwrap();
            let file = read_container(&bytes).unwrap();
            assert_eq!(file.codec, codec);
            assert!(file.blocks.len() > 1, "expected several blocks");
            let mut n = 0i64;
            for block in &file.blocks {
                let mut cur = Cursor::new(&block.data);
                for _ in 0..block.count {
                    let v = decode(&file.schema, &mut cur).unwrap();
                    let expected = format!("value {n}");
                    assert_eq!(
                        v,
                        Val::Record(vec![Val::Long(n), Val::Bytes(expected.as_bytes())])
                    );
                    n += 1;
                }
                assert!(cur.at_end());
            }
            assert_eq!(n, 20_000);

            // apache-avro, an independent implementation, reads the same bytes.
            let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
            assert_eq!(reader.count(), 20_000);
        }
    }
}
