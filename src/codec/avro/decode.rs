//! Avro binary → the JSON form (see the parent module), straight from the bytes: the
//! reads and their bounds are the Avro core's [`Cursor`]; this walk only says which JSON
//! each node and logical type becomes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::NaiveTime;
use serde_json::{Map, Value};

use super::Node;
use super::logical::{Logical, TsUnit};
use crate::avro::{Cursor, Error, Result};
use crate::codec::coerce::unscaled_from_be;
use crate::table::datum::{Datum, Timestamp, datum_to_json, format_decimal};
use crate::table::types::DataType;

/// Decodes one datum of `node` at the cursor.
pub(super) fn datum(node: &Node, cur: &mut Cursor<'_>) -> Result<Value> {
    cur.start_datum();
    value(node, cur)
}

fn value(node: &Node, cur: &mut Cursor<'_>) -> Result<Value> {
    Ok(match node {
        Node::Null => Value::Null,
        Node::Boolean => Value::Bool(cur.boolean()?),
        Node::Int => Value::from(cur.int()?),
        Node::Long => Value::from(cur.long()?),
        Node::Float => datum_to_json(&Datum::Float(cur.float()?), &DataType::Float),
        Node::Double => datum_to_json(&Datum::Double(cur.double()?), &DataType::Double),
        Node::Bytes => Value::String(BASE64.encode(cur.bytes()?)),
        Node::String => Value::String(cur.str("string")?.to_string()),
        Node::Fixed(size) => Value::String(BASE64.encode(cur.take(*size)?)),
        Node::Enum(symbols) => Value::String(cur.pick(symbols, "enum")?.clone()),
        Node::Union(branches) => value(cur.pick(branches, "union")?, cur)?,
        Node::Array { items, item_min } => {
            Value::Array(cur.items(*item_min, |cur| value(items, cur))?)
        }
        // A key takes a byte at least, so entries never count as zero-byte items.
        Node::Map { values, value_min } => {
            Value::Object(cur.items(value_min.saturating_add(1), |cur| {
                Ok((cur.str("map key")?.to_string(), value(values, cur)?))
            })?)
        }
        Node::Record(record) => {
            let mut map = Map::with_capacity(record.fields.len());
            for f in &record.fields {
                let v = value(&f.node, cur).map_err(|e| e.within(format!("field `{}`", f.name)))?;
                map.insert(f.name.clone(), v);
            }
            Value::Object(map)
        }
        Node::Annotated(logical, inner) => logical_value(logical, inner, cur)?,
    })
}

/// The JSON form of a logical type encoded as `inner`.
fn logical_value(logical: &Logical, inner: &Node, cur: &mut Cursor<'_>) -> Result<Value> {
    Ok(match logical {
        Logical::Date => datum_to_json(&Datum::Date(cur.int()?), &DataType::Date),
        Logical::TimeMillis => time_json(i64::from(cur.int()?) * 1_000_000),
        Logical::TimeMicros => {
            let us = cur.long()?;
            match us.checked_mul(1000) {
                Some(ns) => time_json(ns),
                None => Value::from(us),
            }
        }
        Logical::Timestamp(unit) => {
            let v = cur.long()?;
            let ts = match unit {
                TsUnit::Millis => Timestamp::from_millis(v),
                TsUnit::Micros => Timestamp::from_micros(v),
                TsUnit::Nanos => Timestamp::from_nanos(v),
            };
            datum_to_json(&Datum::Timestamp(ts), &DataType::Timestamp(9))
        }
        Logical::Decimal { scale, .. } => {
            let bytes = match inner {
                Node::Fixed(size) => cur.take(*size)?,
                _ => cur.bytes()?,
            };
            let unscaled = unscaled_from_be(bytes).ok_or_else(|| {
                Error::invalid(format!(
                    "decimal of {} bytes does not fit 38 digits",
                    bytes.len()
                ))
            })?;
            let scale = u8::try_from(*scale)
                .map_err(|_| Error::invalid(format!("decimal scale {scale} too large")))?;
            Value::String(format_decimal(unscaled, scale))
        }
        Logical::Uuid => match inner {
            Node::Fixed(_) => {
                let uuid = uuid::Uuid::from_bytes(cur.array()?);
                Value::String(uuid.hyphenated().to_string())
            }
            _ => value(inner, cur)?,
        },
        Logical::Duration => {
            let b: [u8; 12] = cur.array()?;
            let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
            serde_json::json!({"months": u(0), "days": u(4), "millis": u(8)})
        }
        Logical::Connect(_) => value(inner, cur)?,
    })
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
