//! Avro binary ⇄ JSON objects, and the Confluent wire format.
//!
//! Why not `apache_avro::GenericDatumReader`: it sizes buffers from the length prefixes
//! of the input before reading (a five-byte payload can ask for half a gigabyte), builds
//! an intermediate `Value` tree, loses the Kafka Connect attributes (`connect.name`) that
//! say what a Debezium `long` means, and its decimals lose their scale. This module
//! compiles a schema's JSON once into a [`Node`] tree and decodes straight into the JSON
//! form of `datum_to_json`; apache-avro serves as the oracle in the tests.
//!
//! Every input byte is untrusted: lengths and counts are checked against the bytes that
//! remain, collections of zero-byte items are bounded, and recursion is bounded by the
//! schema, whose depth and size are limited (recursive schemas are refused).
//!
//! JSON form: `int`/`long` numbers, `float`/`double` numbers (non-finite as strings),
//! `bytes`/`fixed` base64, `enum` the symbol, unions the branch's value (no wrapper),
//! `date` `"YYYY-MM-DD"`, `time-*` `"HH:MM:SS[.f]"`, `timestamp-*`/`local-timestamp-*`
//! `"YYYY-MM-DD HH:MM:SS[.f]"`, `decimal` a string with the scale's digits, `uuid` the
//! hyphenated text, `duration` `{"months", "days", "millis"}`. Kafka Connect `Decimal`
//! bytes without a logical type are decimals too.

use std::collections::{HashMap, HashSet};
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::NaiveTime;
use serde_json::{Map, Value};

use super::error::{DecodeError, Part, shorten, snippet};
use super::row::{Hints, Semantic, semantic_of, unscaled_from_be};
use crate::error::{Error, Result};
use crate::table::datum::{
    Datum, Timestamp, date_to_days, datum_to_json, parse_decimal, parse_timestamp,
};
use crate::table::types::DataType;

/// First byte of a Confluent-framed message.
pub const CONFLUENT_MAGIC: u8 = 0;
/// Deepest schema nesting accepted (also bounds recursion when decoding).
const MAX_DEPTH: usize = 64;
/// Most nodes a compiled schema may have; named types are copied where referenced.
const MAX_NODES: usize = 10_000;
/// Most zero-byte items (nulls, empty records) one array or map may hold.
const MAX_ZERO_SIZE_ITEMS: usize = 1 << 16;

/// Splits a Confluent-framed message into its schema id and Avro body.
pub(crate) fn split_confluent(bytes: &[u8]) -> Result<(u32, &[u8]), DecodeError> {
    match bytes {
        [CONFLUENT_MAGIC, a, b, c, d, body @ ..] => {
            Ok((u32::from_be_bytes([*a, *b, *c, *d]), body))
        }
        [] => Err(DecodeError::malformed(Part::Payload, "empty payload")),
        [magic, ..] if *magic != CONFLUENT_MAGIC => Err(DecodeError::malformed(
            Part::Payload,
            format!("expected the Confluent magic byte 0, got {magic}"),
        )),
        _ => Err(DecodeError::malformed(
            Part::Payload,
            format!(
                "{} bytes are too short for a Confluent frame (magic byte + 4-byte schema id)",
                bytes.len()
            ),
        )),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TsUnit {
    Millis,
    Micros,
    Nanos,
}

/// A compiled schema node.
#[derive(Debug, Clone)]
enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum(Vec<String>),
    Array(Box<Node>),
    Map(Box<Node>),
    Union(Vec<Node>),
    Record(Vec<Field>),
    Date,
    TimeMillis,
    TimeMicros,
    Timestamp(TsUnit),
    Decimal {
        precision: usize,
        scale: usize,
        fixed: Option<usize>,
    },
    Uuid {
        fixed: bool,
    },
    Duration,
}

#[derive(Debug, Clone)]
struct Field {
    name: String,
    node: Node,
    default: Option<Value>,
    /// Kafka Connect meaning of a plain `int`/`long` (`io.debezium.time.MicroTimestamp`).
    semantic: Option<Semantic>,
}

impl Node {
    fn name(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Boolean => "boolean",
            Node::Int => "int",
            Node::Long => "long",
            Node::Float => "float",
            Node::Double => "double",
            Node::Bytes => "bytes",
            Node::String => "string",
            Node::Fixed(_) => "fixed",
            Node::Enum(_) => "enum",
            Node::Array(_) => "array",
            Node::Map(_) => "map",
            Node::Union(_) => "union",
            Node::Record(_) => "record",
            Node::Date => "date",
            Node::TimeMillis => "time-millis",
            Node::TimeMicros => "time-micros",
            Node::Timestamp(TsUnit::Millis) => "timestamp-millis",
            Node::Timestamp(TsUnit::Micros) => "timestamp-micros",
            Node::Timestamp(TsUnit::Nanos) => "timestamp-nanos",
            Node::Decimal { .. } => "decimal",
            Node::Uuid { .. } => "uuid",
            Node::Duration => "duration",
        }
    }

    fn depth(&self) -> usize {
        1 + match self {
            Node::Array(n) | Node::Map(n) => n.depth(),
            Node::Union(v) => v.iter().map(Node::depth).max().unwrap_or(0),
            Node::Record(f) => f.iter().map(|f| f.node.depth()).max().unwrap_or(0),
            _ => 0,
        }
    }

    fn accepts_null(&self) -> bool {
        match self {
            Node::Null => true,
            Node::Union(v) => v.iter().any(|n| matches!(n, Node::Null)),
            _ => false,
        }
    }
}

/// A compiled Avro schema: decodes Avro binary into JSON and encodes JSON into Avro.
#[derive(Debug, Clone)]
pub struct AvroSchema {
    root: Node,
    /// Connect semantics of the row fields of a Debezium envelope (`after`/`before`).
    row_hints: Option<Hints>,
}

impl AvroSchema {
    /// Compiles a schema's JSON text (an `.avsc` file or a registry's `schema` string).
    pub fn parse(text: &str) -> Result<Self> {
        let json: Value = serde_json::from_str(text)
            .map_err(|e| Error::Config(format!("Avro schema is not valid JSON: {e}")))?;
        let mut compiler = Compiler::default();
        let root = compiler
            .compile(&json, "", 0)
            .map_err(|e| Error::Config(format!("Avro schema: {e}")))?;
        if root.depth() > MAX_DEPTH {
            return Err(Error::Config(format!(
                "Avro schema nests deeper than {MAX_DEPTH} levels"
            )));
        }
        let row_hints = debezium_row_hints(&root);
        Ok(AvroSchema { root, row_hints })
    }

    /// Semantics of the row fields when this is a Debezium envelope schema.
    pub(crate) fn row_hints(&self) -> Option<&Hints> {
        self.row_hints.as_ref()
    }

    /// Decodes one Avro datum (all of `bytes`) into its JSON form.
    pub fn decode(&self, bytes: &[u8]) -> Result<Value, DecodeError> {
        let mut cur = Cursor { bytes, pos: 0 };
        let value = decode(&self.root, &mut cur)
            .map_err(|e| DecodeError::malformed(Part::Payload, format!("Avro: {e}")))?;
        if cur.pos != bytes.len() {
            return Err(DecodeError::malformed(
                Part::Payload,
                format!("Avro: {} bytes left after the datum", bytes.len() - cur.pos),
            ));
        }
        Ok(value)
    }

    /// Appends the Avro encoding of a JSON value to `out`.
    pub fn encode(&self, value: &Value, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        encode(&self.root, value, false, out)
    }

    /// Appends the Avro encoding of a JSON object (a record) to `out`.
    pub fn encode_object(
        &self,
        object: &Map<String, Value>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match &self.root {
            Node::Record(fields) => encode_record(fields, object, false, out),
            other => Err(EncodeError {
                path: String::new(),
                expected: other.name().to_string(),
                got: "an object".into(),
            }),
        }
    }
}

/// A value that does not fit the output schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    /// Dotted path of the field (`customer.id`, `items.3`); empty for the top level.
    pub path: String,
    /// The Avro type expected there.
    pub expected: String,
    /// The value found (JSON text, shortened) or what was wrong.
    pub got: String,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() {
            "top level".to_string()
        } else {
            format!("field `{}`", self.path)
        };
        write!(f, "{at}: expected {}, got {}", self.expected, self.got)
    }
}

impl std::error::Error for EncodeError {}

impl From<EncodeError> for Error {
    fn from(e: EncodeError) -> Self {
        Error::Data(format!("Avro output: {e}"))
    }
}

impl EncodeError {
    fn new(node: &Node, got: impl Into<String>) -> Self {
        EncodeError {
            path: String::new(),
            expected: node.name().to_string(),
            got: got.into(),
        }
    }

    fn at(mut self, segment: &str) -> Self {
        self.path = if self.path.is_empty() {
            segment.to_string()
        } else {
            format!("{segment}.{}", self.path)
        };
        self
    }
}

/// The Connect semantics of the fields of the `after` (or `before`) record.
fn debezium_row_hints(root: &Node) -> Option<Hints> {
    let Node::Record(fields) = root else {
        return None;
    };
    let row = ["after", "before"].into_iter().find_map(|name| {
        let field = fields.iter().find(|f| f.name == name)?;
        match &field.node {
            Node::Record(r) => Some(r),
            Node::Union(v) => v.iter().find_map(|n| match n {
                Node::Record(r) => Some(r),
                _ => None,
            }),
            _ => None,
        }
    })?;
    Some(
        row.iter()
            .filter_map(|f| Some((f.name.clone(), f.semantic?)))
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------
// Schema compilation
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Compiler {
    named: HashMap<String, Node>,
    in_progress: HashSet<String>,
    nodes: usize,
}

impl Compiler {
    fn count(&mut self, n: usize) -> std::result::Result<(), String> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err(format!("more than {MAX_NODES} schema nodes"));
        }
        Ok(())
    }

    fn compile(
        &mut self,
        json: &Value,
        ns: &str,
        depth: usize,
    ) -> std::result::Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nests deeper than {MAX_DEPTH} levels"));
        }
        self.count(1)?;
        match json {
            Value::String(name) => self.named_or_primitive(name, ns),
            Value::Array(branches) => {
                let mut nodes = Vec::with_capacity(branches.len());
                for b in branches {
                    let node = self.compile(b, ns, depth + 1)?;
                    if matches!(node, Node::Union(_)) {
                        return Err("a union may not directly contain a union".into());
                    }
                    nodes.push(node);
                }
                Ok(Node::Union(nodes))
            }
            Value::Object(obj) => self.complex(obj, ns, depth),
            other => Err(format!("expected a type, got {}", snippet(other))),
        }
    }

    fn named_or_primitive(&mut self, name: &str, ns: &str) -> std::result::Result<Node, String> {
        Ok(match name {
            "null" => Node::Null,
            "boolean" => Node::Boolean,
            "int" => Node::Int,
            "long" => Node::Long,
            "float" => Node::Float,
            "double" => Node::Double,
            "bytes" => Node::Bytes,
            "string" => Node::String,
            _ => {
                let candidates = if name.contains('.') || ns.is_empty() {
                    vec![name.to_string()]
                } else {
                    vec![format!("{ns}.{name}"), name.to_string()]
                };
                for full in &candidates {
                    if self.in_progress.contains(full) {
                        return Err(format!(
                            "type `{full}` refers to itself; recursive schemas are not supported"
                        ));
                    }
                    if let Some(node) = self.named.get(full) {
                        let node = node.clone();
                        self.count(count_nodes(&node))?;
                        return Ok(node);
                    }
                }
                return Err(format!("unknown type `{name}`"));
            }
        })
    }

    fn complex(
        &mut self,
        obj: &Map<String, Value>,
        ns: &str,
        depth: usize,
    ) -> std::result::Result<Node, String> {
        let ty = obj
            .get("type")
            .ok_or_else(|| "a type object without `type`".to_string())?;
        let logical = obj.get("logicalType").and_then(Value::as_str);
        let ty_name = match ty {
            Value::String(s) => s.as_str(),
            // {"type": {...}} or {"type": [...]}: a wrapped type.
            other => return self.compile(other, ns, depth + 1),
        };
        let base = match ty_name {
            "record" | "error" => return self.record(obj, ns, depth),
            "enum" => {
                let (full, _) = full_name(obj, ns)?;
                let symbols = obj
                    .get("symbols")
                    .and_then(Value::as_array)
                    .ok_or_else(|| format!("enum `{full}` needs `symbols`"))?
                    .iter()
                    .map(|s| {
                        s.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| format!("enum `{full}` has a non-string symbol"))
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                let node = Node::Enum(symbols);
                self.define(full, &node)?;
                return Ok(node);
            }
            "fixed" => {
                let (full, _) = full_name(obj, ns)?;
                let size = obj
                    .get("size")
                    .and_then(Value::as_u64)
                    .and_then(|s| usize::try_from(s).ok())
                    .ok_or_else(|| format!("fixed `{full}` needs a non-negative `size`"))?;
                let node = match logical {
                    Some("decimal") => decimal(obj, Some(size)).unwrap_or(Node::Fixed(size)),
                    Some("uuid") if size == 16 => Node::Uuid { fixed: true },
                    Some("duration") if size == 12 => Node::Duration,
                    _ => Node::Fixed(size),
                };
                self.define(full, &node)?;
                return Ok(node);
            }
            "array" => {
                let items = obj
                    .get("items")
                    .ok_or_else(|| "array needs `items`".to_string())?;
                return Ok(Node::Array(Box::new(self.compile(items, ns, depth + 1)?)));
            }
            "map" => {
                let values = obj
                    .get("values")
                    .ok_or_else(|| "map needs `values`".to_string())?;
                return Ok(Node::Map(Box::new(self.compile(values, ns, depth + 1)?)));
            }
            other => self.named_or_primitive(other, ns)?,
        };
        // Logical types on primitives; an invalid one falls back to the base type.
        Ok(match (logical, &base) {
            (Some("date"), Node::Int) => Node::Date,
            (Some("time-millis"), Node::Int) => Node::TimeMillis,
            (Some("time-micros"), Node::Long) => Node::TimeMicros,
            (Some("timestamp-millis" | "local-timestamp-millis"), Node::Long) => {
                Node::Timestamp(TsUnit::Millis)
            }
            (Some("timestamp-micros" | "local-timestamp-micros"), Node::Long) => {
                Node::Timestamp(TsUnit::Micros)
            }
            (Some("timestamp-nanos" | "local-timestamp-nanos"), Node::Long) => {
                Node::Timestamp(TsUnit::Nanos)
            }
            (Some("decimal"), Node::Bytes) => decimal(obj, None).unwrap_or(base),
            (Some("uuid"), Node::String) => Node::Uuid { fixed: false },
            (None, Node::Bytes)
                if obj.get("connect.name").and_then(Value::as_str)
                    == Some("org.apache.kafka.connect.data.Decimal") =>
            {
                connect_decimal(obj).unwrap_or(base)
            }
            _ => base,
        })
    }

    fn record(
        &mut self,
        obj: &Map<String, Value>,
        ns: &str,
        depth: usize,
    ) -> std::result::Result<Node, String> {
        let (full, own_ns) = full_name(obj, ns)?;
        let fields_json = obj
            .get("fields")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("record `{full}` needs `fields`"))?;
        self.in_progress.insert(full.clone());
        let mut fields = Vec::with_capacity(fields_json.len());
        let mut seen = HashSet::new();
        for f in fields_json {
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a field of record `{full}` has no name"))?;
            if !seen.insert(name) {
                return Err(format!("record `{full}` has field `{name}` twice"));
            }
            let ty = f
                .get("type")
                .ok_or_else(|| format!("field `{full}.{name}` has no type"))?;
            let node = self
                .compile(ty, &own_ns, depth + 1)
                .map_err(|e| format!("field `{full}.{name}`: {e}"))?;
            let semantic = connect_semantic(ty).filter(|_| {
                matches!(&node, Node::Int | Node::Long)
                    || matches!(&node, Node::Union(v) if v.iter().any(|n| matches!(n, Node::Int | Node::Long)))
            });
            fields.push(Field {
                name: name.to_string(),
                node,
                default: f.get("default").cloned(),
                semantic,
            });
        }
        self.in_progress.remove(&full);
        let node = Node::Record(fields);
        self.define(full, &node)?;
        Ok(node)
    }

    fn define(&mut self, full: String, node: &Node) -> std::result::Result<(), String> {
        if self.named.contains_key(&full) {
            return Err(format!("type `{full}` is defined twice"));
        }
        self.named.insert(full, node.clone());
        Ok(())
    }
}

fn count_nodes(node: &Node) -> usize {
    1 + match node {
        Node::Array(n) | Node::Map(n) => count_nodes(n),
        Node::Union(v) => v.iter().map(count_nodes).sum(),
        Node::Record(f) => f.iter().map(|f| count_nodes(&f.node)).sum(),
        _ => 0,
    }
}

/// Full name and namespace of a named type (`name` may be dotted).
fn full_name(
    obj: &Map<String, Value>,
    enclosing: &str,
) -> std::result::Result<(String, String), String> {
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| "a named type without `name`".to_string())?;
    if let Some((ns, _)) = name.rsplit_once('.') {
        return Ok((name.to_string(), ns.to_string()));
    }
    let ns = match obj.get("namespace").and_then(Value::as_str) {
        Some(ns) => ns.to_string(),
        None => enclosing.to_string(),
    };
    let full = if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}.{name}")
    };
    Ok((full, ns))
}

fn decimal(obj: &Map<String, Value>, fixed: Option<usize>) -> Option<Node> {
    let precision = usize::try_from(obj.get("precision")?.as_u64()?).ok()?;
    let scale = match obj.get("scale") {
        None => 0,
        Some(s) => usize::try_from(s.as_u64()?).ok()?,
    };
    (precision >= 1 && scale <= precision).then_some(Node::Decimal {
        precision,
        scale,
        fixed,
    })
}

/// A Connect `Decimal` written as plain bytes with `connect.parameters.scale`.
fn connect_decimal(obj: &Map<String, Value>) -> Option<Node> {
    let params = obj.get("connect.parameters")?;
    let scale = params
        .get("scale")?
        .as_str()?
        .trim()
        .parse::<usize>()
        .ok()?;
    let precision = params
        .get("connect.decimal.precision")
        .and_then(Value::as_str)
        .and_then(|p| p.trim().parse::<usize>().ok())
        .unwrap_or(38)
        .max(scale);
    Some(Node::Decimal {
        precision,
        scale,
        fixed: None,
    })
}

/// The Connect semantic of a field type (its own or its non-null branch's `connect.name`).
fn connect_semantic(ty: &Value) -> Option<Semantic> {
    match ty {
        Value::Object(o) => {
            let name = o.get("connect.name")?.as_str()?;
            let scale = o
                .get("connect.parameters")
                .and_then(|p| p.get("scale"))
                .and_then(Value::as_str);
            semantic_of(name, scale)
        }
        Value::Array(branches) => branches.iter().find_map(connect_semantic),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

type DResult<T> = std::result::Result<T, String>;

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(format!(
                "needs {n} bytes at offset {}, {} left",
                self.pos,
                self.remaining()
            ));
        }
        let slice = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    fn long(&mut self) -> DResult<i64> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let [b] = self.take(1)? else {
                return Err("truncated varint".into());
            };
            let b = *b;
            if i == 9 && b > 1 {
                return Err(format!("varint at offset {} overflows 64 bits", self.pos));
            }
            value |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(format!(
            "varint at offset {} is longer than 10 bytes",
            self.pos
        ))
    }

    fn int(&mut self) -> DResult<i32> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| format!("int value {v} out of range"))
    }

    fn len(&mut self) -> DResult<usize> {
        let n = self.long()?;
        let n = usize::try_from(n).map_err(|_| format!("negative length {n}"))?;
        if n > self.remaining() {
            return Err(format!(
                "length {n} at offset {} exceeds the {} bytes left",
                self.pos,
                self.remaining()
            ));
        }
        Ok(n)
    }

    fn index(&mut self, count: usize, what: &str) -> DResult<usize> {
        let i = self.long()?;
        usize::try_from(i)
            .ok()
            .filter(|i| *i < count)
            .ok_or_else(|| format!("{what} index {i} out of range 0..{count}"))
    }

    /// The item count of the next array/map block (0 ends the collection).
    fn block_count(&mut self) -> DResult<usize> {
        let n = self.long()?;
        if n < 0 {
            // A negative count is followed by the block's size in bytes.
            self.long()?;
        }
        let n = n.checked_abs().ok_or("block count overflows")?;
        usize::try_from(n).map_err(|_| format!("block count {n} too large"))
    }
}

fn decode(node: &Node, cur: &mut Cursor<'_>) -> DResult<Value> {
    Ok(match node {
        Node::Null => Value::Null,
        Node::Boolean => match cur.take(1)? {
            [0] => Value::Bool(false),
            [1] => Value::Bool(true),
            other => return Err(format!("invalid boolean byte {other:?}")),
        },
        Node::Int => Value::from(cur.int()?),
        Node::Long => Value::from(cur.long()?),
        Node::Float => {
            let b = cur.take(4)?;
            let f = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            datum_to_json(&Datum::Float(f), &DataType::Float)
        }
        Node::Double => {
            let b = cur.take(8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            datum_to_json(&Datum::Double(f64::from_le_bytes(a)), &DataType::Double)
        }
        Node::Bytes => {
            let n = cur.len()?;
            Value::String(BASE64.encode(cur.take(n)?))
        }
        Node::String => {
            let n = cur.len()?;
            let bytes = cur.take(n)?;
            Value::String(
                std::str::from_utf8(bytes)
                    .map_err(|e| format!("string is not UTF-8: {e}"))?
                    .to_string(),
            )
        }
        Node::Fixed(size) => Value::String(BASE64.encode(cur.take(*size)?)),
        Node::Enum(symbols) => {
            let i = cur.index(symbols.len(), "enum")?;
            Value::String(symbols[i].clone())
        }
        Node::Union(branches) => {
            let i = cur.index(branches.len(), "union")?;
            decode(&branches[i], cur)?
        }
        Node::Array(item) => {
            let mut items = Vec::new();
            collection(cur, |cur| {
                items.push(decode(item, cur)?);
                Ok(())
            })?;
            Value::Array(items)
        }
        Node::Map(item) => {
            let mut map = Map::new();
            collection(cur, |cur| {
                let n = cur.len()?;
                let key = std::str::from_utf8(cur.take(n)?)
                    .map_err(|e| format!("map key is not UTF-8: {e}"))?
                    .to_string();
                map.insert(key, decode(item, cur)?);
                Ok(())
            })?;
            Value::Object(map)
        }
        Node::Record(fields) => {
            let mut map = Map::with_capacity(fields.len());
            for f in fields {
                let v = decode(&f.node, cur).map_err(|e| format!("field `{}`: {e}", f.name))?;
                map.insert(f.name.clone(), v);
            }
            Value::Object(map)
        }
        Node::Date => datum_to_json(&Datum::Date(cur.int()?), &DataType::Date),
        Node::TimeMillis => time_json(i64::from(cur.int()?) * 1_000_000),
        Node::TimeMicros => {
            let us = cur.long()?;
            match us.checked_mul(1000) {
                Some(ns) => time_json(ns),
                None => Value::from(us),
            }
        }
        Node::Timestamp(unit) => {
            let v = cur.long()?;
            let ts = match unit {
                TsUnit::Millis => Timestamp {
                    millis: v,
                    nanos_of_milli: 0,
                },
                TsUnit::Micros => Timestamp::from_micros(v),
                TsUnit::Nanos => Timestamp::from_nanos(v),
            };
            datum_to_json(&Datum::Timestamp(ts), &DataType::Timestamp(9))
        }
        Node::Decimal { scale, fixed, .. } => {
            let bytes = match fixed {
                Some(size) => cur.take(*size)?,
                None => {
                    let n = cur.len()?;
                    cur.take(n)?
                }
            };
            let unscaled = unscaled_from_be(bytes).ok_or_else(|| {
                format!("decimal of {} bytes does not fit 38 digits", bytes.len())
            })?;
            let scale =
                u8::try_from(*scale).map_err(|_| format!("decimal scale {scale} too large"))?;
            Value::String(crate::table::datum::format_decimal(unscaled, scale))
        }
        Node::Uuid { fixed: true } => {
            let b = cur.take(16)?;
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Value::String(uuid::Uuid::from_bytes(a).hyphenated().to_string())
        }
        Node::Uuid { fixed: false } => decode(&Node::String, cur)?,
        Node::Duration => {
            let b = cur.take(12)?;
            let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
            serde_json::json!({"months": u(0), "days": u(4), "millis": u(8)})
        }
    })
}

/// Reads the blocks of an array or map, calling `item` once per item.
fn collection(
    cur: &mut Cursor<'_>,
    mut item: impl FnMut(&mut Cursor<'_>) -> DResult<()>,
) -> DResult<()> {
    let mut zero_size = 0usize;
    loop {
        let count = cur.block_count()?;
        if count == 0 {
            return Ok(());
        }
        for _ in 0..count {
            let before = cur.pos;
            item(cur)?;
            if cur.pos == before {
                zero_size += 1;
                if zero_size > MAX_ZERO_SIZE_ITEMS {
                    return Err(format!(
                        "more than {MAX_ZERO_SIZE_ITEMS} zero-byte items in one collection"
                    ));
                }
            }
        }
    }
}

/// `HH:MM:SS[.f]` of nanoseconds since midnight; the number when outside a day.
fn time_json(nanos: i64) -> Value {
    let secs = nanos.div_euclid(1_000_000_000);
    let frac = nanos.rem_euclid(1_000_000_000) as u32;
    match u32::try_from(secs)
        .ok()
        .and_then(|s| NaiveTime::from_num_seconds_from_midnight_opt(s, frac))
    {
        Some(t) => {
            let base = t.format("%H:%M:%S").to_string();
            if frac == 0 {
                Value::String(base)
            } else {
                let f = format!("{frac:09}");
                Value::String(format!("{base}.{}", f.trim_end_matches('0')))
            }
        }
        None => Value::from(nanos),
    }
}

/// Nanoseconds since midnight of `HH:MM:SS[.f]`.
fn parse_time(text: &str) -> Option<i64> {
    let t = NaiveTime::parse_from_str(text.trim(), "%H:%M:%S%.f")
        .or_else(|_| NaiveTime::parse_from_str(text.trim(), "%H:%M"))
        .ok()?;
    use chrono::Timelike;
    Some(i64::from(t.num_seconds_from_midnight()) * 1_000_000_000 + i64::from(t.nanosecond()))
}

// ---------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------

fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

fn encode_record(
    fields: &[Field],
    object: &Map<String, Value>,
    strict: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    for f in fields {
        let value = match (object.get(&f.name), &f.default) {
            (Some(v), _) => v,
            (None, Some(default)) => default,
            (None, None) if f.node.accepts_null() => &Value::Null,
            (None, None) => {
                return Err(EncodeError {
                    path: f.name.clone(),
                    expected: f.node.name().to_string(),
                    got: "missing field".into(),
                });
            }
        };
        encode(&f.node, value, strict, out).map_err(|e| e.at(&f.name))?;
    }
    Ok(())
}

/// Encodes `value` as `node`. `strict` accepts only the JSON form's own types (used to
/// pick a union branch before trying lenient conversions such as `"42"` → long).
fn encode(node: &Node, value: &Value, strict: bool, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let wrong = || EncodeError::new(node, shorten(&snippet(value), 80));
    let integer = |v: &Value| -> Option<i64> {
        match v {
            Value::Number(n) => n.as_i64(),
            Value::String(s) if !strict => s.trim().parse().ok(),
            _ => None,
        }
    };
    let float = |v: &Value| -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => {
                let s = s.trim();
                if !strict || matches!(s, "NaN" | "inf" | "-inf" | "Infinity" | "-Infinity") {
                    s.parse().ok()
                } else {
                    None
                }
            }
            _ => None,
        }
    };
    match node {
        Node::Null => {
            if !value.is_null() {
                return Err(wrong());
            }
        }
        Node::Boolean => {
            let b = match value {
                Value::Bool(b) => *b,
                Value::String(s) if !strict && s.eq_ignore_ascii_case("true") => true,
                Value::String(s) if !strict && s.eq_ignore_ascii_case("false") => false,
                _ => return Err(wrong()),
            };
            out.push(u8::from(b));
        }
        Node::Int => {
            let v = integer(value)
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(wrong)?;
            put_long(out, i64::from(v));
        }
        Node::Long => put_long(out, integer(value).ok_or_else(wrong)?),
        Node::Float => {
            out.extend_from_slice(&(float(value).ok_or_else(wrong)? as f32).to_le_bytes())
        }
        Node::Double => out.extend_from_slice(&float(value).ok_or_else(wrong)?.to_le_bytes()),
        Node::Bytes => {
            let Value::String(s) = value else {
                return Err(wrong());
            };
            let b = BASE64.decode(s.as_bytes()).map_err(|_| wrong())?;
            put_bytes(out, &b);
        }
        Node::String => match value {
            Value::String(s) => put_bytes(out, s.as_bytes()),
            Value::Number(_) | Value::Bool(_) if !strict => {
                put_bytes(out, value.to_string().as_bytes())
            }
            _ => return Err(wrong()),
        },
        Node::Fixed(size) => {
            let Value::String(s) = value else {
                return Err(wrong());
            };
            let b = BASE64.decode(s.as_bytes()).map_err(|_| wrong())?;
            if b.len() != *size {
                return Err(EncodeError::new(
                    node,
                    format!("{} bytes for fixed({size})", b.len()),
                ));
            }
            out.extend_from_slice(&b);
        }
        Node::Enum(symbols) => {
            let i = value
                .as_str()
                .and_then(|s| symbols.iter().position(|x| x == s))
                .ok_or_else(|| EncodeError {
                    path: String::new(),
                    expected: format!("one of the enum symbols {symbols:?}"),
                    got: snippet(value),
                })?;
            put_long(out, i as i64);
        }
        Node::Union(branches) => {
            if value.is_null()
                && let Some(i) = branches.iter().position(|n| matches!(n, Node::Null))
            {
                put_long(out, i as i64);
                return Ok(());
            }
            let mut scratch = Vec::new();
            for pass_strict in [true, false] {
                if !pass_strict && strict {
                    break;
                }
                for (i, branch) in branches.iter().enumerate() {
                    if matches!(branch, Node::Null) {
                        continue;
                    }
                    scratch.clear();
                    if encode(branch, value, pass_strict, &mut scratch).is_ok() {
                        put_long(out, i as i64);
                        out.extend_from_slice(&scratch);
                        return Ok(());
                    }
                }
            }
            let names: Vec<&str> = branches.iter().map(Node::name).collect();
            return Err(EncodeError {
                path: String::new(),
                expected: format!("one of [{}]", names.join(", ")),
                got: snippet(value),
            });
        }
        Node::Array(item) => {
            let Value::Array(items) = value else {
                return Err(wrong());
            };
            if !items.is_empty() {
                put_long(out, items.len() as i64);
                for (i, v) in items.iter().enumerate() {
                    encode(item, v, strict, out).map_err(|e| e.at(&i.to_string()))?;
                }
            }
            out.push(0);
        }
        Node::Map(item) => {
            let Value::Object(map) = value else {
                return Err(wrong());
            };
            if !map.is_empty() {
                put_long(out, map.len() as i64);
                for (k, v) in map {
                    put_bytes(out, k.as_bytes());
                    encode(item, v, strict, out).map_err(|e| e.at(k))?;
                }
            }
            out.push(0);
        }
        Node::Record(fields) => {
            let Value::Object(map) = value else {
                return Err(wrong());
            };
            encode_record(fields, map, strict, out)?;
        }
        Node::Date => {
            let days = match value {
                Value::String(s) => chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
                    .map(date_to_days)
                    .map_err(|_| wrong())?,
                Value::Number(_) if !strict => integer(value)
                    .and_then(|d| i32::try_from(d).ok())
                    .ok_or_else(wrong)?,
                _ => return Err(wrong()),
            };
            put_long(out, i64::from(days));
        }
        Node::TimeMillis | Node::TimeMicros => {
            let nanos = match value {
                Value::String(s) => parse_time(s).ok_or_else(wrong)?,
                Value::Number(_) if !strict => {
                    let v = integer(value).ok_or_else(wrong)?;
                    let per = if matches!(node, Node::TimeMillis) {
                        1_000_000
                    } else {
                        1000
                    };
                    v.checked_mul(per).ok_or_else(wrong)?
                }
                _ => return Err(wrong()),
            };
            if matches!(node, Node::TimeMillis) {
                put_long(out, nanos / 1_000_000);
            } else {
                put_long(out, nanos / 1000);
            }
        }
        Node::Timestamp(unit) => {
            let ts = match value {
                Value::String(s) => parse_timestamp(s).ok_or_else(wrong)?,
                Value::Number(_) if !strict => Timestamp {
                    millis: integer(value).ok_or_else(wrong)?,
                    nanos_of_milli: 0,
                },
                _ => return Err(wrong()),
            };
            let v = match unit {
                TsUnit::Millis => Some(ts.millis),
                TsUnit::Micros => ts
                    .millis
                    .checked_mul(1000)
                    .and_then(|m| m.checked_add(i64::from(ts.nanos_of_milli / 1000))),
                TsUnit::Nanos => ts
                    .millis
                    .checked_mul(1_000_000)
                    .and_then(|m| m.checked_add(i64::from(ts.nanos_of_milli))),
            };
            put_long(out, v.ok_or_else(wrong)?);
        }
        Node::Decimal {
            precision,
            scale,
            fixed,
        } => {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) if !strict => n.to_string(),
                _ => return Err(wrong()),
            };
            let (p, s) = match (u8::try_from(*precision), u8::try_from(*scale)) {
                (Ok(p), Ok(s)) if p <= 38 => (p, s),
                _ => (38, u8::try_from(*scale).unwrap_or(38).min(38)),
            };
            let unscaled = parse_decimal(&text, p, s).map_err(|e| EncodeError {
                path: String::new(),
                expected: format!("decimal({precision}, {scale})"),
                got: e,
            })?;
            let full = unscaled.to_be_bytes();
            match fixed {
                Some(size) => {
                    let mut buf = vec![if unscaled < 0 { 0xFF } else { 0 }; *size];
                    let minimal = minimal_be(&full);
                    if minimal.len() > *size {
                        return Err(EncodeError::new(
                            node,
                            format!("{text} needs more than {size} bytes"),
                        ));
                    }
                    let start = *size - minimal.len();
                    buf[start..].copy_from_slice(minimal);
                    out.extend_from_slice(&buf);
                }
                None => put_bytes(out, minimal_be(&full)),
            }
        }
        Node::Uuid { fixed } => {
            let Value::String(s) = value else {
                return Err(wrong());
            };
            let u = uuid::Uuid::parse_str(s.trim()).map_err(|_| wrong())?;
            if *fixed {
                out.extend_from_slice(u.as_bytes());
            } else {
                put_bytes(out, u.hyphenated().to_string().as_bytes());
            }
        }
        Node::Duration => {
            let part = |k: &str| {
                value
                    .get(k)
                    .and_then(Value::as_u64)
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(wrong)
            };
            for k in ["months", "days", "millis"] {
                out.extend_from_slice(&part(k)?.to_le_bytes());
            }
        }
    }
    Ok(())
}

/// The shortest big-endian two's-complement form of a 16-byte value.
fn minimal_be(full: &[u8; 16]) -> &[u8] {
    let mut start = 0;
    while start < 15 {
        let (b, next) = (full[start], full[start + 1]);
        if (b == 0x00 && next & 0x80 == 0) || (b == 0xFF && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    &full[start..]
}

#[cfg(test)]
mod tests {
    use apache_avro::types::Value as AV;
    use apache_avro::Schema;
    use apache_avro::reader::datum::GenericDatumReader;
    use apache_avro::writer::datum::GenericDatumWriter;
    use serde_json::json;

    use super::*;

    /// A schema with every type and logical type.
    fn all_types() -> Value {
        json!({
            "type": "record", "name": "All", "namespace": "t",
            "fields": [
                {"name": "n", "type": "null"},
                {"name": "b", "type": "boolean"},
                {"name": "i", "type": "int"},
                {"name": "l", "type": "long"},
                {"name": "f", "type": "float"},
                {"name": "d", "type": "double"},
                {"name": "by", "type": "bytes"},
                {"name": "s", "type": "string"},
                {"name": "fx", "type": {"type": "fixed", "name": "F3", "size": 3}},
                {"name": "e", "type": {"type": "enum", "name": "Colour",
                                       "symbols": ["RED", "GREEN"]}},
                {"name": "a", "type": {"type": "array", "items": "long"}},
                {"name": "m", "type": {"type": "map", "values": ["null", "string"]}},
                {"name": "u", "type": ["null", "long", "string"]},
                {"name": "r", "type": {"type": "record", "name": "Inner",
                                       "fields": [{"name": "x", "type": "int"}]}},
                {"name": "r2", "type": "Inner"},
                {"name": "date", "type": {"type": "int", "logicalType": "date"}},
                {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
                {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
                {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
                {"name": "tsn", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
                {"name": "lts", "type": {"type": "long",
                                         "logicalType": "local-timestamp-micros"}},
                {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal",
                                         "precision": 10, "scale": 2}},
                {"name": "decf", "type": {"type": "fixed", "name": "D8", "size": 8,
                                          "logicalType": "decimal", "precision": 12,
                                          "scale": 3}},
                {"name": "uu", "type": {"type": "string", "logicalType": "uuid"}},
                {"name": "dur", "type": {"type": "fixed", "name": "Dur", "size": 12,
                                         "logicalType": "duration"}}
            ]
        })
    }

    fn sample() -> Value {
        json!({
            "n": null, "b": true, "i": -7, "l": 1_i64 << 40, "f": 1.5, "d": -0.25,
            "by": "AAEC", "s": "héllo", "fx": "AQID", "e": "GREEN", "a": [1, -2, 3],
            "m": {"k": "v"}, "u": "text", "r": {"x": 1}, "r2": {"x": 2},
            "date": "2024-02-29", "tms": "10:11:12.5", "tus": "23:59:59.000001",
            "tsm": "2024-01-01 10:00:00.123", "tsu": "1969-12-31 23:59:59.999999",
            "tsn": "2024-01-01 10:00:00.123456789", "lts": "2024-01-01 00:00:00",
            "dec": "-12.34", "decf": "123456.789",
            "uu": "67e55044-10b1-426f-9247-bb680e5fe0c8",
            "dur": {"months": 1, "days": 2, "millis": 3}
        })
    }

    #[test]
    fn round_trips_every_type_and_agrees_with_apache_avro() {
        let text = all_types().to_string();
        let ours = AvroSchema::parse(&text).unwrap();
        let mut bytes = Vec::new();
        ours.encode(&sample(), &mut bytes).unwrap();
        assert_eq!(ours.decode(&bytes).unwrap(), sample());
        // apache-avro reads our bytes into the same values.
        let theirs = Schema::parse_str(&text).unwrap();
        let value = GenericDatumReader::builder(&theirs)
            .build()
            .unwrap()
            .read_value(&mut &bytes[..])
            .unwrap();
        let AV::Record(fields) = &value else {
            panic!("record expected")
        };
        let get = |name: &str| fields.iter().find(|(n, _)| n == name).unwrap().1.clone();
        assert_eq!(get("l"), AV::Long(1 << 40));
        assert_eq!(get("s"), AV::String("héllo".into()));
        assert_eq!(get("e"), AV::Enum(1, "GREEN".into()));
        assert_eq!(get("u"), AV::Union(2, Box::new(AV::String("text".into()))));
        assert_eq!(get("date"), AV::Date(19_782));
        assert_eq!(get("tms"), AV::TimeMillis(36_672_500));
        assert_eq!(get("tsu"), AV::TimestampMicros(-1));
        assert_eq!(get("tsn"), AV::TimestampNanos(1_704_103_200_123_456_789));
        assert_eq!(
            get("dec"),
            AV::Decimal(apache_avro::Decimal::from((-1234i64).to_be_bytes().to_vec()))
        );
        // And we read what apache-avro writes.
        let written = GenericDatumWriter::builder(&theirs)
            .build()
            .unwrap()
            .write_value_to_vec(value)
            .unwrap();
        assert_eq!(written, bytes);
    }

    #[test]
    fn lenient_encoding_and_precise_errors() {
        let schema = AvroSchema::parse(&all_types().to_string()).unwrap();
        let mut lenient = sample();
        lenient["i"] = json!("-7");
        lenient["d"] = json!("-0.25");
        lenient["tsm"] = json!(1_704_103_200_123i64);
        lenient["dec"] = json!(-12.34);
        lenient["date"] = json!(19_782);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        schema.encode(&lenient, &mut a).unwrap();
        schema.encode(&sample(), &mut b).unwrap();
        assert_eq!(a, b);
        for (field, value, needle) in [
            ("i", json!(1_i64 << 40), "field `i`: expected int"),
            ("a", json!([1, "x"]), "field `a.1`: expected long"),
            ("r", json!({"y": 1}), "field `r.x`: expected int, got missing field"),
            ("e", json!("BLUE"), "enum symbols"),
            ("fx", json!("AQ=="), "1 bytes for fixed(3)"),
            ("dec", json!("1.234"), "decimal(10, 2)"),
            ("u", json!([1]), "one of [null, long, string]"),
            ("uu", json!("nope"), "expected uuid"),
            ("m", json!({"k": [5]}), "field `m.k`"),
        ] {
            let mut v = sample();
            v[field] = value;
            let err = schema.encode(&v, &mut Vec::new()).unwrap_err().to_string();
            assert!(err.contains(needle), "{field}: {err}");
        }
        let mut missing = sample();
        missing.as_object_mut().unwrap().remove("s");
        let err = schema.encode(&missing, &mut Vec::new()).unwrap_err();
        assert_eq!(err.path, "s");
        // Missing nullable fields become null; defaults are used.
        let opt = AvroSchema::parse(
            &json!({"type": "record", "name": "O", "fields": [
                {"name": "a", "type": ["null", "int"]},
                {"name": "b", "type": "string", "default": "dflt"}]})
            .to_string(),
        )
        .unwrap();
        let mut out = Vec::new();
        opt.encode_object(&Map::new(), &mut out).unwrap();
        assert_eq!(opt.decode(&out).unwrap(), json!({"a": null, "b": "dflt"}));
    }

    #[test]
    fn schema_errors() {
        for (schema, needle) in [
            (json!({"type": "record", "name": "L", "fields": [
                {"name": "next", "type": ["null", "L"]}]}), "recursive"),
            (json!({"type": "record", "name": "R", "fields": [
                {"name": "x", "type": "Nope"}]}), "unknown type `Nope`"),
            (json!({"type": "record", "name": "R", "fields": [
                {"name": "x", "type": "int"}, {"name": "x", "type": "int"}]}), "twice"),
            (json!(["null", ["int"]]), "union"),
            (json!({"type": "enum", "name": "E"}), "symbols"),
            (json!({"type": "fixed", "name": "F", "size": -1}), "size"),
            (json!(5), "expected a type"),
        ] {
            let err = AvroSchema::parse(&schema.to_string()).unwrap_err().to_string();
            assert!(err.contains(needle), "{schema}: {err}");
        }
        let mut deep = json!("int");
        for _ in 0..70 {
            deep = json!({"type": "array", "items": deep});
        }
        let err = AvroSchema::parse(&deep.to_string()).unwrap_err().to_string();
        assert!(err.contains("deeper"), "{err}");
        // Exponential expansion of named types is bounded.
        let mut fields = vec![json!({"name": "f0", "type": {"type": "record", "name": "T0",
            "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]}})];
        for i in 1..20 {
            fields.push(json!({"name": format!("f{i}"), "type": {"type": "record",
                "name": format!("T{i}"), "fields": [
                    {"name": "a", "type": format!("T{}", i - 1)},
                    {"name": "b", "type": format!("T{}", i - 1)}]}}));
        }
        let wide = json!({"type": "record", "name": "W", "fields": fields});
        let err = AvroSchema::parse(&wide.to_string()).unwrap_err().to_string();
        assert!(err.contains("schema nodes"), "{err}");
        // Invalid logical types fall back to the base type.
        let odd = AvroSchema::parse(r#"{"type": "long", "logicalType": "date"}"#).unwrap();
        let mut out = Vec::new();
        odd.encode(&json!(5), &mut out).unwrap();
        assert_eq!(odd.decode(&out).unwrap(), json!(5));
    }

    #[test]
    fn hostile_bytes_fail_without_allocating() {
        let s = AvroSchema::parse(r#""string""#).unwrap();
        // Length 2^62 claimed by a 10-byte input.
        let mut huge = Vec::new();
        put_long(&mut huge, 1 << 62);
        let err = s.decode(&huge).unwrap_err().to_string();
        assert!(err.contains("exceeds"), "{err}");
        let nulls = AvroSchema::parse(r#"{"type": "array", "items": "null"}"#).unwrap();
        let mut many = Vec::new();
        put_long(&mut many, 1 << 40);
        let err = nulls.decode(&many).unwrap_err().to_string();
        assert!(err.contains("zero-byte items"), "{err}");
        let mut negative_block = Vec::new();
        put_long(&mut negative_block, -2);
        put_long(&mut negative_block, 0);
        negative_block.push(0);
        assert_eq!(nulls.decode(&negative_block).unwrap(), json!([null, null]));
        let int = AvroSchema::parse(r#""int""#).unwrap();
        assert!(int.decode(&[0x80; 11]).is_err());
        assert!(int.decode(&[0xFF, 0xFF, 0xFF, 0xFF, 0x7F]).is_err());
        assert!(int.decode(&[2, 0]).unwrap_err().to_string().contains("1 bytes left"));
        let u = AvroSchema::parse(r#"["null", "int"]"#).unwrap();
        assert!(u.decode(&[4]).unwrap_err().to_string().contains("union index 2"));
        let b = AvroSchema::parse(r#""boolean""#).unwrap();
        assert!(b.decode(&[2]).is_err());
        assert!(s.decode(&[2, 0xFF]).unwrap_err().to_string().contains("UTF-8"));
    }

    #[test]
    fn confluent_frames() {
        assert_eq!(split_confluent(&[0, 0, 0, 1, 2, 9]).unwrap(), (258, &[9u8][..]));
        assert_eq!(split_confluent(&[0, 0, 0, 0, 1]).unwrap(), (1, &[][..]));
        for (bytes, needle) in [
            (&[][..], "empty"),
            (&[1, 0, 0, 0, 1][..], "magic byte 0, got 1"),
            (&[0, 0, 0][..], "too short"),
        ] {
            let err = split_confluent(bytes).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn debezium_connect_names_become_hints() {
        let schema = crate::codec::testkit::debezium_avro_schema();
        let hints = schema.row_hints().unwrap();
        assert_eq!(hints.get("updated_at"), Some(&Semantic::EpochMicros));
        assert_eq!(hints.get("born"), Some(&Semantic::EpochDays));
        // `weight` is an Avro decimal already: no hint.
        assert_eq!(hints.get("weight"), None);
        // Connect decimals without a logical type are decimals.
        let bare = AvroSchema::parse(
            r#"{"type": "bytes", "connect.name": "org.apache.kafka.connect.data.Decimal",
                "connect.parameters": {"scale": "2"}}"#,
        )
        .unwrap();
        assert_eq!(bare.decode(&[4, 0x04, 0xD2]).unwrap(), json!("12.34"));
    }
}
