//! The JSON form (and lenient variants such as numeric strings) → Avro binary, naming the
//! field that does not fit. The bytes are written with the Avro core's writers.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::NaiveTime;
use serde_json::{Map, Value};

use super::logical::{Logical, TsUnit, type_name};
use super::{EncodeError, Field, Node};
use crate::avro::{put_bytes, put_collection, put_long};
use crate::codec::error::{shorten, snippet};
use crate::table::datum::{Timestamp, date_to_days, parse_decimal, parse_timestamp};

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
                    expected: type_name(&f.node).to_string(),
                    got: "missing field".into(),
                });
            }
        };
        encode(&f.node, value, strict, out).map_err(|e| e.at(&f.name))?;
    }
    Ok(())
}

/// A JSON integer (or, unless `strict`, a numeric string).
fn integer(v: &Value, strict: bool) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) if !strict => s.trim().parse().ok(),
        _ => None,
    }
}

/// A JSON number (or a numeric string; strictly, only the names of non-finite values).
fn float(v: &Value, strict: bool) -> Option<f64> {
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
}

fn wrong(node: &Node, value: &Value) -> EncodeError {
    EncodeError::new(node, shorten(&snippet(value), 80))
}

/// Encodes `value` as `node`. `strict` accepts only the JSON form's own types (used to
/// pick a union branch before trying lenient conversions such as `"42"` → long).
pub(super) fn encode(
    node: &Node,
    value: &Value,
    strict: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let wrong = || wrong(node, value);
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
            let v = integer(value, strict)
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(wrong)?;
            put_long(out, i64::from(v));
        }
        Node::Long => put_long(out, integer(value, strict).ok_or_else(wrong)?),
        Node::Float => {
            let f = float(value, strict).ok_or_else(wrong)? as f32;
            out.extend_from_slice(&f.to_le_bytes())
        }
        Node::Double => {
            let f = float(value, strict).ok_or_else(wrong)?;
            out.extend_from_slice(&f.to_le_bytes())
        }
        Node::Bytes => put_bytes(out, &base64(value).ok_or_else(wrong)?),
        Node::String => match value {
            Value::String(s) => put_bytes(out, s.as_bytes()),
            Value::Number(_) | Value::Bool(_) if !strict => {
                put_bytes(out, value.to_string().as_bytes())
            }
            _ => return Err(wrong()),
        },
        Node::Fixed(size) => {
            let b = base64(value).ok_or_else(wrong)?;
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
        Node::Union(branches) => encode_union(branches, value, strict, out)?,
        Node::Array { items, .. } => {
            let Value::Array(values) = value else {
                return Err(wrong());
            };
            put_collection(out, values.iter().enumerate(), |out, (i, v)| {
                encode(items, v, strict, out).map_err(|e| e.at(&i.to_string()))
            })?;
        }
        Node::Map { values, .. } => {
            let Value::Object(map) = value else {
                return Err(wrong());
            };
            put_collection(out, map.iter(), |out, (k, v)| {
                put_bytes(out, k.as_bytes());
                encode(values, v, strict, out).map_err(|e| e.at(k))
            })?;
        }
        Node::Record(record) => {
            let Value::Object(map) = value else {
                return Err(wrong());
            };
            encode_record(&record.fields, map, strict, out)?;
        }
        Node::Annotated(logical, inner) => {
            encode_logical(logical, inner, value, strict, out).ok_or_else(wrong)??
        }
    }
    Ok(())
}

/// The bytes of a base64 JSON string.
fn base64(value: &Value) -> Option<Vec<u8>> {
    BASE64.decode(value.as_str()?.as_bytes()).ok()
}

/// The first branch the value fits: `null` to a null branch, then the branches that take
/// the value as it is, then (unless `strict`) the ones that take a lenient conversion.
fn encode_union(
    branches: &[Node],
    value: &Value,
    strict: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
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
    let names: Vec<&str> = branches.iter().map(type_name).collect();
    Err(EncodeError {
        path: String::new(),
        expected: format!("one of [{}]", names.join(", ")),
        got: snippet(value),
    })
}

/// Encodes a logical type as its `inner` encoding; `None` when the value is not one.
fn encode_logical(
    logical: &Logical,
    inner: &Node,
    value: &Value,
    strict: bool,
    out: &mut Vec<u8>,
) -> Option<Result<(), EncodeError>> {
    match logical {
        Logical::Date => {
            let days = match value {
                Value::String(s) => chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
                    .map(date_to_days)
                    .ok()?,
                Value::Number(_) if !strict => i32::try_from(integer(value, strict)?).ok()?,
                _ => return None,
            };
            put_long(out, i64::from(days));
        }
        Logical::TimeMillis | Logical::TimeMicros => {
            let per = if matches!(logical, Logical::TimeMillis) {
                1_000_000
            } else {
                1000
            };
            let nanos = match value {
                Value::String(s) => parse_time(s)?,
                Value::Number(_) if !strict => integer(value, strict)?.checked_mul(per)?,
                _ => return None,
            };
            put_long(out, nanos / per);
        }
        Logical::Timestamp(unit) => {
            let ts = match value {
                Value::String(s) => parse_timestamp(s)?,
                Value::Number(_) if !strict => Timestamp {
                    millis: integer(value, strict)?,
                    nanos_of_milli: 0,
                },
                _ => return None,
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
            put_long(out, v?);
        }
        Logical::Decimal { precision, scale } => {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) if !strict => n.to_string(),
                _ => return None,
            };
            return Some(encode_decimal(inner, *precision, *scale, &text, out));
        }
        Logical::Uuid => {
            let u = uuid::Uuid::parse_str(value.as_str()?.trim()).ok()?;
            if matches!(inner, Node::Fixed(_)) {
                out.extend_from_slice(u.as_bytes());
            } else {
                put_bytes(out, u.hyphenated().to_string().as_bytes());
            }
        }
        Logical::Duration => {
            let mut parts = [0u32; 3];
            for (part, k) in parts.iter_mut().zip(["months", "days", "millis"]) {
                *part = u32::try_from(value.get(k)?.as_u64()?).ok()?;
            }
            for part in parts {
                out.extend_from_slice(&part.to_le_bytes());
            }
        }
        Logical::Connect(_) => return Some(encode(inner, value, strict, out)),
    }
    Some(Ok(()))
}

/// A decimal's unscaled value, big-endian two's complement: as short as it goes for
/// `bytes`, sign-extended to the size of a `fixed`.
fn encode_decimal(
    inner: &Node,
    precision: usize,
    scale: usize,
    text: &str,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let (p, s) = match (u8::try_from(precision), u8::try_from(scale)) {
        (Ok(p), Ok(s)) if p <= 38 => (p, s),
        _ => (38, u8::try_from(scale).unwrap_or(38).min(38)),
    };
    let unscaled = parse_decimal(text, p, s).map_err(|e| EncodeError {
        path: String::new(),
        expected: format!("decimal({precision}, {scale})"),
        got: e.to_string(),
    })?;
    let full = unscaled.to_be_bytes();
    let minimal = minimal_be(&full);
    match inner {
        Node::Fixed(size) => {
            if minimal.len() > *size {
                return Err(EncodeError {
                    path: String::new(),
                    expected: "decimal".into(),
                    got: format!("{text} needs more than {size} bytes"),
                });
            }
            let mut buf = vec![if unscaled < 0 { 0xFF } else { 0 }; *size];
            let start = *size - minimal.len();
            buf[start..].copy_from_slice(minimal);
            out.extend_from_slice(&buf);
        }
        _ => put_bytes(out, minimal),
    }
    Ok(())
}

/// Nanoseconds since midnight of `HH:MM:SS[.f]`.
fn parse_time(text: &str) -> Option<i64> {
    let t = NaiveTime::parse_from_str(text.trim(), "%H:%M:%S%.f")
        .or_else(|_| NaiveTime::parse_from_str(text.trim(), "%H:%M"))
        .ok()?;
    use chrono::Timelike;
    Some(i64::from(t.num_seconds_from_midnight()) * 1_000_000_000 + i64::from(t.nanosecond()))
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
