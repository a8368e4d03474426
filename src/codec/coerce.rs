//! Coercing a JSON value to a column's type, the way CDC tools spell values: `0`/`1`
//! booleans, RFC 3339 timestamps with a zone, epoch numbers in a configured unit, and the
//! Kafka Connect / Debezium logical types a record's schema names ([`Semantic`]), such as
//! base64 decimals and epoch days. Errors say what was expected and what came.
//!
//! Apart from `row` (which decides where a column's value comes from and checks the
//! row) because the Avro decoder and the Debezium schema reader share these rules.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::DateTime;
use serde_json::Value;

use super::EpochUnit;
use super::error::CoerceError;
use crate::table::datum::{Datum, Timestamp, datum_from_json, format_decimal, parse_timestamp};
use crate::table::types::DataType;

/// What a schema says about a field whose JSON value alone is ambiguous (Kafka Connect
/// and Debezium logical types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Semantic {
    /// Epoch milliseconds (`io.debezium.time.Timestamp`, Connect `Timestamp`).
    EpochMillis,
    /// Epoch microseconds (`io.debezium.time.MicroTimestamp`).
    EpochMicros,
    /// Epoch nanoseconds (`io.debezium.time.NanoTimestamp`).
    EpochNanos,
    /// Days since the epoch (`io.debezium.time.Date`, Connect `Date`).
    EpochDays,
    /// Connect `Decimal`: base64 of the big-endian two's-complement unscaled value.
    Decimal { scale: u32 },
    /// `io.debezium.data.VariableScaleDecimal`: `{"scale": s, "value": base64}`.
    VariableDecimal,
}

/// Semantics of the fields of a row object, by top-level field name.
pub(crate) type Hints = HashMap<String, Semantic>;

/// The semantic of a Kafka Connect schema name (`io.debezium.time.MicroTimestamp`, …),
/// with the Connect parameters for decimals.
pub(crate) fn semantic_of(name: &str, scale: Option<&str>) -> Option<Semantic> {
    Some(match name {
        "io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp" => {
            Semantic::EpochMillis
        }
        "io.debezium.time.MicroTimestamp" => Semantic::EpochMicros,
        "io.debezium.time.NanoTimestamp" => Semantic::EpochNanos,
        "io.debezium.time.Date" | "org.apache.kafka.connect.data.Date" => Semantic::EpochDays,
        "org.apache.kafka.connect.data.Decimal" => Semantic::Decimal {
            scale: scale?.trim().parse().ok()?,
        },
        "io.debezium.data.VariableScaleDecimal" => Semantic::VariableDecimal,
        _ => return None,
    })
}

/// Converts a JSON value to a datum of `ty`: [`datum_from_json`] plus what CDC tools
/// emit — `0`/`1` booleans (MySQL `TINYINT(1)` via Canal), RFC 3339 timestamps with a zone
/// (Debezium `ZonedTimestamp`), epoch numbers in `unit`, timestamps truncated to the
/// column's precision.
pub(crate) fn coerce(value: &Value, ty: &DataType, unit: EpochUnit) -> Result<Datum, CoerceError> {
    match (ty, value) {
        (_, Value::Null) => Ok(Datum::Null),
        (DataType::Boolean, Value::Number(n)) => match n.as_i64() {
            Some(0) => Ok(Datum::Boolean(false)),
            Some(1) => Ok(Datum::Boolean(true)),
            _ => Err(CoerceError::NotBoolean {
                ty: *ty,
                got: value.clone(),
            }),
        },
        (DataType::Boolean, Value::String(s)) if s == "0" || s == "1" => {
            Ok(Datum::Boolean(s == "1"))
        }
        // A nested value in a string column is kept as its JSON text, as Paimon's CDC
        // stores it (a column added for an untyped nested field is a STRING).
        (DataType::Char(_) | DataType::Varchar(_), Value::Object(_) | Value::Array(_)) => {
            datum_from_json(&Value::String(value.to_string()), ty).map_err(CoerceError::Datum)
        }
        (DataType::Timestamp(p) | DataType::TimestampLtz(p), Value::Number(n)) => {
            let v = n.as_i64().ok_or_else(|| CoerceError::NotIntegerEpoch {
                ty: *ty,
                unit,
                got: value.clone(),
            })?;
            let ts = match unit {
                EpochUnit::Millis => Timestamp::from_millis(v),
                EpochUnit::Micros => Timestamp::from_micros(v),
                EpochUnit::Nanos => Timestamp::from_nanos(v),
            };
            Ok(Datum::Timestamp(ts.truncate(*p)))
        }
        (DataType::Timestamp(p) | DataType::TimestampLtz(p), Value::String(s)) => {
            let ts = parse_timestamp(s)
                .or_else(|| parse_zoned_timestamp(s))
                .ok_or_else(|| CoerceError::NotTimestamp { got: value.clone() })?;
            Ok(Datum::Timestamp(ts.truncate(*p)))
        }
        _ => datum_from_json(value, ty).map_err(CoerceError::Datum),
    }
}

/// [`coerce`] for a value whose schema gave a [`Semantic`].
pub(crate) fn coerce_hinted(
    value: &Value,
    ty: &DataType,
    hint: Semantic,
    unit: EpochUnit,
) -> Result<Datum, CoerceError> {
    let is_timestamp = matches!(ty, DataType::Timestamp(_) | DataType::TimestampLtz(_));
    match (hint, value) {
        (Semantic::EpochMillis, Value::Number(_)) if is_timestamp => {
            coerce(value, ty, EpochUnit::Millis)
        }
        (Semantic::EpochMicros, Value::Number(_)) if is_timestamp => {
            coerce(value, ty, EpochUnit::Micros)
        }
        (Semantic::EpochNanos, Value::Number(_)) if is_timestamp => {
            coerce(value, ty, EpochUnit::Nanos)
        }
        (Semantic::EpochDays, Value::Number(n)) if is_timestamp => {
            let days = n
                .as_i64()
                .ok_or_else(|| CoerceError::NotEpochDays { got: value.clone() })?;
            let millis =
                days.checked_mul(86_400_000)
                    .ok_or_else(|| CoerceError::DaysOutOfRange {
                        got: value.clone(),
                        ty: *ty,
                    })?;
            coerce(&Value::from(millis), ty, EpochUnit::Millis)
        }
        (Semantic::Decimal { scale }, Value::String(b64)) => {
            let text = connect_decimal(b64, scale)?;
            coerce(&Value::String(text), ty, unit)
        }
        (Semantic::VariableDecimal, Value::Object(o)) => {
            let not_decimal = || CoerceError::NotVariableDecimal { got: value.clone() };
            let scale = o
                .get("scale")
                .and_then(Value::as_u64)
                .and_then(|s| u32::try_from(s).ok())
                .ok_or_else(not_decimal)?;
            let Some(Value::String(b64)) = o.get("value") else {
                return Err(not_decimal());
            };
            let text = connect_decimal(b64, scale)?;
            coerce(&Value::String(text), ty, unit)
        }
        _ => coerce(value, ty, unit),
    }
}

/// Decimal text of a Kafka Connect decimal: base64 of the big-endian two's-complement
/// unscaled value.
fn connect_decimal(b64: &str, scale: u32) -> Result<String, CoerceError> {
    let bytes = BASE64
        .decode(b64.as_bytes())
        .map_err(|source| CoerceError::NotBase64 {
            text: b64.to_string(),
            source,
        })?;
    let unscaled =
        unscaled_from_be(&bytes).ok_or(CoerceError::DecimalTooWide { len: bytes.len() })?;
    let scale = u8::try_from(scale).map_err(|_| CoerceError::ScaleTooLarge { scale })?;
    Ok(format_decimal(unscaled, scale))
}

/// A big-endian two's-complement integer of any length as an i128, if it fits.
pub(crate) fn unscaled_from_be(bytes: &[u8]) -> Option<i128> {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let sign_byte = if negative { 0xFF } else { 0x00 };
    // Drop redundant sign-extension bytes.
    let mut start = 0;
    while bytes.len() - start > 16 && bytes[start] == sign_byte {
        start += 1;
    }
    let significant = &bytes[start..];
    if significant.len() > 16 {
        return None;
    }
    let mut buf = [sign_byte; 16];
    buf[16 - significant.len()..].copy_from_slice(significant);
    let value = i128::from_be_bytes(buf);
    // A 17th byte that was dropped must agree with the sign of what is left.
    if start > 0 && (value < 0) != negative {
        return None;
    }
    Some(value)
}

/// `2024-01-01T10:00:00.123Z` or with an offset, as UTC.
fn parse_zoned_timestamp(text: &str) -> Option<Timestamp> {
    let dt = DateTime::parse_from_rfc3339(text.trim()).ok()?;
    let nanos = dt.timestamp_subsec_nanos();
    Some(Timestamp {
        millis: dt
            .timestamp()
            .checked_mul(1000)?
            .checked_add((nanos / 1_000_000) as i64)?,
        nanos_of_milli: nanos % 1_000_000,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::table::types::MAX_LENGTH;

    /// What a coercion to a TIMESTAMP column gives.
    fn ts(millis: i64, nanos_of_milli: u32) -> Result<Datum, CoerceError> {
        Ok(Datum::Timestamp(Timestamp {
            millis,
            nanos_of_milli,
        }))
    }

    #[test]
    fn coerces_what_cdc_tools_emit() {
        let u = EpochUnit::Millis;
        assert_eq!(
            coerce(&json!("1"), &DataType::Boolean, u),
            Ok(Datum::Boolean(true))
        );
        assert_eq!(
            coerce(&json!(0), &DataType::Boolean, u),
            Ok(Datum::Boolean(false))
        );
        assert!(coerce(&json!(2), &DataType::Boolean, u).is_err());
        assert_eq!(
            coerce(&json!({"a": [1, 2]}), &DataType::Varchar(MAX_LENGTH), u),
            Ok(Datum::String(r#"{"a":[1,2]}"#.into()))
        );
        assert!(coerce(&json!([1, 2, 3]), &DataType::Varchar(3), u).is_err());
        let zoned = coerce(
            &json!("2024-01-01T10:00:00.5+01:00"),
            &DataType::Timestamp(3),
            u,
        );
        assert_eq!(zoned, ts(1_704_099_600_500, 0));
        assert_eq!(
            coerce(
                &json!(1_500_123),
                &DataType::Timestamp(3),
                EpochUnit::Micros
            ),
            ts(1500, 0)
        );
        assert_eq!(
            coerce(
                &json!(1_500_123),
                &DataType::Timestamp(6),
                EpochUnit::Micros
            ),
            ts(1500, 123_000)
        );
        let err = coerce(&json!("noon"), &DataType::Timestamp(3), u).unwrap_err();
        assert!(matches!(err, CoerceError::NotTimestamp { .. }), "{err}");
        assert!(err.to_string().contains("RFC 3339"), "{err}");
        let err = coerce(&json!(1.5), &DataType::Timestamp(3), u).unwrap_err();
        assert!(err.to_string().contains("integer epoch"), "{err}");
    }

    #[test]
    fn schema_hints_fix_units_and_decode_connect_decimals() {
        let u = EpochUnit::Millis;
        let ts6 = DataType::Timestamp(6);
        assert_eq!(
            coerce_hinted(&json!(1_500_123), &ts6, Semantic::EpochMicros, u),
            Ok(Datum::Timestamp(Timestamp::from_micros(1_500_123)))
        );
        assert_eq!(
            coerce_hinted(
                &json!(1_500_123_456),
                &DataType::Timestamp(9),
                Semantic::EpochNanos,
                u
            ),
            Ok(Datum::Timestamp(Timestamp::from_nanos(1_500_123_456)))
        );
        // A hint does not turn a number into a timestamp for a BIGINT column.
        assert_eq!(
            coerce_hinted(&json!(5), &DataType::BigInt, Semantic::EpochMicros, u),
            Ok(Datum::BigInt(5))
        );
        assert_eq!(
            coerce_hinted(&json!(1), &DataType::Timestamp(3), Semantic::EpochDays, u),
            ts(86_400_000, 0)
        );
        let dec = DataType::Decimal {
            precision: 10,
            scale: 2,
        };
        // "BNI=" is 0x04D2 = 1234, "+y4=" is 0xFB2E = -1234.
        assert_eq!(
            coerce_hinted(&json!("BNI="), &dec, Semantic::Decimal { scale: 2 }, u),
            Ok(Datum::Decimal(1234))
        );
        assert_eq!(
            coerce_hinted(&json!("+y4="), &dec, Semantic::Decimal { scale: 2 }, u),
            Ok(Datum::Decimal(-1234))
        );
        assert_eq!(
            coerce_hinted(
                &json!({"scale": 1, "value": "BNI="}),
                &dec,
                Semantic::VariableDecimal,
                u
            ),
            Ok(Datum::Decimal(12340))
        );
        assert_eq!(
            coerce_hinted(
                &json!("BNI="),
                &DataType::Varchar(20),
                Semantic::Decimal { scale: 3 },
                u
            ),
            Ok(Datum::String("1.234".into()))
        );
        let err = coerce_hinted(&json!("!!"), &dec, Semantic::Decimal { scale: 2 }, u).unwrap_err();
        assert!(err.to_string().contains("base64"), "{err}");
        // The base64 error stays reachable as the source.
        assert!(std::error::Error::source(&err).is_some(), "{err:?}");
    }

    #[test]
    fn big_endian_unscaled_values() {
        assert_eq!(unscaled_from_be(&[]), Some(0));
        assert_eq!(unscaled_from_be(&[0xFF]), Some(-1));
        assert_eq!(unscaled_from_be(&[0x00, 0x80]), Some(128));
        let mut wide = vec![0xFF; 20];
        wide[19] = 0xFE;
        assert_eq!(unscaled_from_be(&wide), Some(-2));
        let mut too_wide = vec![0x00; 20];
        too_wide[2] = 1;
        assert_eq!(unscaled_from_be(&too_wide), None);
        // 17 bytes whose dropped sign byte disagrees with the rest.
        let mut flip = vec![0x00; 17];
        flip[1] = 0x80;
        assert_eq!(unscaled_from_be(&flip), None);
    }
}
