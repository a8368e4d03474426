//! Avro binary ⇄ JSON values, walking a compiled [`Node`] tree. Decoding checks every
//! length and count against the bytes left; encoding converts the JSON form (and lenient
//! variants such as numeric strings) and names the field that does not fit.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::NaiveTime;
use serde_json::{Map, Value};

use super::{EncodeError, Field, MAX_ZERO_SIZE_ITEMS, Node, TsUnit};
use crate::codec::error::{shorten, snippet};
use crate::codec::row::unscaled_from_be;
use crate::table::datum::{
    Datum, Timestamp, date_to_days, datum_to_json, format_decimal, parse_decimal, parse_timestamp,
};
use crate::table::types::DataType;

// Decoding

pub(super) struct Cursor<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    /// Zero-byte collection items decoded so far (bounded per datum).
    zero_size_items: usize,
}

pub(super) type DResult<T> = std::result::Result<T, String>;

impl<'a> Cursor<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Cursor {
            bytes,
            pos: 0,
            zero_size_items: 0,
        }
    }

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

pub(super) fn decode(node: &Node, cur: &mut Cursor<'_>) -> DResult<Value> {
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
            Value::String(format_decimal(unscaled, scale))
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
    loop {
        let count = cur.block_count()?;
        if count == 0 {
            return Ok(());
        }
        for _ in 0..count {
            let before = cur.pos;
            item(cur)?;
            if cur.pos == before {
                cur.zero_size_items += 1;
                if cur.zero_size_items > MAX_ZERO_SIZE_ITEMS {
                    return Err(format!(
                        "more than {MAX_ZERO_SIZE_ITEMS} zero-byte collection items in one datum"
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

// Encoding

pub(super) fn put_long(out: &mut Vec<u8>, v: i64) {
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

pub(super) fn encode_record(
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
pub(super) fn encode(
    node: &Node,
    value: &Value,
    strict: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
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
