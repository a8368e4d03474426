//! Values of table columns, their order, and their JSON text form.
//!
//! JSON form (used by `lakejoin table write/scan` and the pypaimon tests): numbers and
//! booleans as JSON, DECIMAL as a string (`"12.30"`), DATE as `"YYYY-MM-DD"`, TIMESTAMP
//! as `"YYYY-MM-DD HH:MM:SS[.fffffffff]"` (fraction trimmed, omitted when zero), BYTES as
//! base64.

use std::cmp::Ordering;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, NaiveDate, NaiveDateTime};
use compact_str::CompactString;
use serde_json::Value;

use super::types::DataType;

/// A timestamp as Paimon stores it: epoch milliseconds plus nanoseconds within the milli.
/// For TIMESTAMP (no zone) the wall-clock time is counted as if it were UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    pub millis: i64,
    /// 0..=999_999
    pub nanos_of_milli: u32,
}

impl Timestamp {
    pub(crate) fn from_millis(millis: i64) -> Self {
        Timestamp {
            millis,
            nanos_of_milli: 0,
        }
    }

    pub(crate) fn from_micros(micros: i64) -> Self {
        Timestamp {
            millis: micros.div_euclid(1000),
            nanos_of_milli: (micros.rem_euclid(1000) * 1000) as u32,
        }
    }

    pub(crate) fn from_nanos(nanos: i64) -> Self {
        Timestamp {
            millis: nanos.div_euclid(1_000_000),
            nanos_of_milli: nanos.rem_euclid(1_000_000) as u32,
        }
    }

    /// Epoch microseconds, truncating sub-microsecond digits; `None` outside the
    /// ±292,000 years an i64 of microseconds holds (any i64 of milliseconds is a valid
    /// timestamp, so a value read from a message or file can be out of that range).
    pub(crate) fn checked_micros(self) -> Option<i64> {
        let micros = i128::from(self.millis) * 1000 + i128::from(self.nanos_of_milli / 1000);
        i64::try_from(micros).ok()
    }

    /// Epoch nanoseconds, `None` outside the years 1677..2262 that an i64 can hold.
    pub(crate) fn checked_nanos(self) -> Option<i64> {
        let nanos = i128::from(self.millis) * 1_000_000 + i128::from(self.nanos_of_milli);
        i64::try_from(nanos).ok()
    }

    /// Whether a column of TIMESTAMP(`precision`) can store this value: precisions 0..=3
    /// are stored in milliseconds (any value), 4..=6 in i64 microseconds, 7..=9 in i64
    /// nanoseconds.
    pub(crate) fn fits_precision(self, precision: u8) -> bool {
        match precision {
            0..=3 => true,
            4..=6 => self.checked_micros().is_some(),
            _ => self.checked_nanos().is_some(),
        }
    }

    /// Drops digits beyond `precision` fractional-second digits.
    pub fn truncate(self, precision: u8) -> Self {
        let total_nanos_in_second =
            (self.millis.rem_euclid(1000) as u64) * 1_000_000 + self.nanos_of_milli as u64;
        let unit = 10u64.pow(9 - precision.min(9) as u32);
        let kept = total_nanos_in_second / unit * unit;
        let second_millis = self.millis - self.millis.rem_euclid(1000);
        Timestamp {
            millis: second_millis + (kept / 1_000_000) as i64,
            nanos_of_milli: (kept % 1_000_000) as u32,
        }
    }
}

/// One column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    Boolean(bool),
    TinyInt(i8),
    SmallInt(i16),
    Int(i32),
    BigInt(i64),
    Float(f32),
    Double(f64),
    /// Unscaled value; precision and scale come from the column type.
    Decimal(i128),
    /// Kept inline up to 24 bytes (`CompactString`): most column strings are short
    /// (codes, names, statuses), and a heap block per string was allocated by the
    /// decoder, freed on another thread after the flush, and again for every row a
    /// compaction reads (BENCHMARKS.md, session 42).
    String(CompactString),
    Bytes(Vec<u8>),
    /// Days since 1970-01-01.
    Date(i32),
    Timestamp(Timestamp),
}

/// A row: one datum per column, in schema order.
pub type Row = Vec<Datum>;

impl Datum {
    pub fn is_null(&self) -> bool {
        matches!(self, Datum::Null)
    }
}

/// Java `Float.compare`/`Double.compare`: -0.0 < +0.0, NaN equals NaN and is largest.
fn java_float_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.total_cmp(&b),
    }
}

/// Total order used for keys and sequence fields: nulls first, then the natural order of
/// the type (strings and bytes by unsigned bytes).
pub fn compare_datums(a: &Datum, b: &Datum) -> Ordering {
    use Datum::*;
    match (a, b) {
        (Null, Null) => Ordering::Equal,
        (Null, _) => Ordering::Less,
        (_, Null) => Ordering::Greater,
        (Boolean(x), Boolean(y)) => x.cmp(y),
        (TinyInt(x), TinyInt(y)) => x.cmp(y),
        (SmallInt(x), SmallInt(y)) => x.cmp(y),
        (Int(x), Int(y)) => x.cmp(y),
        (BigInt(x), BigInt(y)) => x.cmp(y),
        (Float(x), Float(y)) => java_float_cmp(*x as f64, *y as f64),
        (Double(x), Double(y)) => java_float_cmp(*x, *y),
        (Decimal(x), Decimal(y)) => x.cmp(y),
        (String(x), String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bytes(x), Bytes(y)) => x.cmp(y),
        (Date(x), Date(y)) => x.cmp(y),
        (Timestamp(x), Timestamp(y)) => x.cmp(y),
        // Different variants never meet in one column; order them stably anyway.
        _ => variant_rank(a).cmp(&variant_rank(b)),
    }
}

fn variant_rank(d: &Datum) -> u8 {
    match d {
        Datum::Null => 0,
        Datum::Boolean(_) => 1,
        Datum::TinyInt(_) => 2,
        Datum::SmallInt(_) => 3,
        Datum::Int(_) => 4,
        Datum::BigInt(_) => 5,
        Datum::Float(_) => 6,
        Datum::Double(_) => 7,
        Datum::Decimal(_) => 8,
        Datum::String(_) => 9,
        Datum::Bytes(_) => 10,
        Datum::Date(_) => 11,
        Datum::Timestamp(_) => 12,
    }
}

/// Where `d` sits in [`compare_datums`]'s order, coarsely: `a < b` implies
/// `order_prefix(a) <= order_prefix(b)`, and equal datums have equal prefixes. So
/// ordering by the prefix first and by `compare_datums` among equal prefixes is ordering
/// by `compare_datums` (Java Paimon's sort buffer keeps a normalized key prefix for the
/// same reason): most comparisons of a sort become two integers, not a match on two
/// enums behind a pointer. The prefix is the variant's rank (the order of mixed variants,
/// which one column never holds), then the value's leading 64 bits in unsigned order;
/// floats, whose order is Java's, get no value bits.
pub fn order_prefix(d: &Datum) -> (u8, u64) {
    // Flipping the sign bit puts signed integers in unsigned order.
    let signed = |v: i64| (v as u64) ^ (1 << 63);
    // The first 8 bytes, zero-padded: shorter is smaller among equal leading bytes.
    let leading = |bytes: &[u8]| {
        let mut word = [0u8; 8];
        let n = bytes.len().min(8);
        word[..n].copy_from_slice(&bytes[..n]);
        u64::from_be_bytes(word)
    };
    let bits = match d {
        Datum::Null | Datum::Float(_) | Datum::Double(_) => 0,
        Datum::Boolean(b) => u64::from(*b),
        Datum::TinyInt(v) => signed(i64::from(*v)),
        Datum::SmallInt(v) => signed(i64::from(*v)),
        Datum::Int(v) | Datum::Date(v) => signed(i64::from(*v)),
        Datum::BigInt(v) => signed(*v),
        Datum::Decimal(v) => (((*v as u128) ^ (1 << 127)) >> 64) as u64,
        Datum::String(v) => leading(v.as_bytes()),
        Datum::Bytes(v) => leading(v),
        Datum::Timestamp(t) => signed(t.millis),
    };
    (variant_rank(d), bits)
}

/// Lexicographic order of two equally long datum slices.
pub fn compare_rows(a: &[Datum], b: &[Datum]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let ord = compare_datums(x, y);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

const EPOCH_DAYS_FROM_CE: i32 = 719_163;

pub(crate) fn date_to_days(date: NaiveDate) -> i32 {
    use chrono::Datelike;
    date.num_days_from_ce() - EPOCH_DAYS_FROM_CE
}

pub(crate) fn days_to_date(days: i32) -> Option<NaiveDate> {
    NaiveDate::from_num_days_from_ce_opt(days.checked_add(EPOCH_DAYS_FROM_CE)?)
}

fn timestamp_to_naive(ts: Timestamp) -> Option<NaiveDateTime> {
    let secs = ts.millis.div_euclid(1000);
    let nanos = (ts.millis.rem_euclid(1000) as u32) * 1_000_000 + ts.nanos_of_milli;
    DateTime::from_timestamp(secs, nanos).map(|dt| dt.naive_utc())
}

/// Formats a timestamp as `YYYY-MM-DD HH:MM:SS[.f]` with trailing zeros of the fraction
/// removed.
pub(crate) fn format_timestamp(ts: Timestamp) -> String {
    match timestamp_to_naive(ts) {
        Some(dt) => {
            let base = dt.format("%Y-%m-%d %H:%M:%S").to_string();
            let nanos = (ts.millis.rem_euclid(1000) as u32) * 1_000_000 + ts.nanos_of_milli;
            if nanos == 0 {
                base
            } else {
                let frac = format!("{nanos:09}");
                format!("{base}.{}", frac.trim_end_matches('0'))
            }
        }
        None => format!("{}ms", ts.millis),
    }
}

/// Parses `YYYY-MM-DD HH:MM:SS[.f]` (a `T` separator is accepted too).
pub(crate) fn parse_timestamp(text: &str) -> Option<Timestamp> {
    let text = text.trim();
    let normalized = text.replacen('T', " ", 1);
    let dt = NaiveDateTime::parse_from_str(&normalized, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(&normalized, "%Y-%m-%d %H:%M"))
        .or_else(|_| {
            NaiveDate::parse_from_str(&normalized, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
        })
        .ok()?;
    let utc = dt.and_utc();
    let secs = utc.timestamp();
    let nanos = utc.timestamp_subsec_nanos();
    Some(Timestamp {
        millis: secs
            .checked_mul(1000)?
            .checked_add((nanos / 1_000_000) as i64)?,
        nanos_of_milli: nanos % 1_000_000,
    })
}

/// Formats an unscaled decimal with `scale` fractional digits.
pub(crate) fn format_decimal(unscaled: i128, scale: u8) -> String {
    let negative = unscaled < 0;
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let body = if scale == 0 {
        digits
    } else if digits.len() > scale {
        format!(
            "{}.{}",
            &digits[..digits.len() - scale],
            &digits[digits.len() - scale..]
        )
    } else {
        format!("0.{}{}", "0".repeat(scale - digits.len()), digits)
    };
    if negative { format!("-{body}") } else { body }
}

/// Why a value does not become a datum of a column's type ([`datum_from_json`],
/// [`parse_decimal`]). It is the text of a dead letter or of a config problem, so it quotes
/// the value and names the type; the caller adds which column or field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ValueError {
    /// Not a value of the type at all (an object for INT, `"yes"` for BOOLEAN).
    #[error("expected {expected}, got {got}")]
    WrongType { expected: DataType, got: Value },
    /// A number outside the type's range.
    #[error("{value} is out of range for {data_type}")]
    OutOfRange { value: Value, data_type: DataType },
    #[error(transparent)]
    TimestampOutOfRange(#[from] TimestampOutOfRange),
    #[error("`{0}` is not a decimal number")]
    NotADecimal(String),
    #[error("`{text}` has more than {scale} fractional digits")]
    TooManyFractionDigits { text: String, scale: u8 },
    #[error("`{text}` does not fit DECIMAL({precision}, {scale})")]
    DecimalTooWide {
        text: String,
        precision: u8,
        scale: u8,
    },
    #[error("string of {chars} characters is longer than {data_type}")]
    StringTooLong { chars: usize, data_type: DataType },
    #[error("expected base64 for {data_type}: {source}")]
    NotBase64 {
        data_type: DataType,
        #[source]
        source: base64::DecodeError,
    },
    #[error("{len} bytes are longer than {data_type}")]
    BytesTooLong { len: usize, data_type: DataType },
    #[error("expected a date `YYYY-MM-DD`, got {got}")]
    NotADate {
        got: Value,
        #[source]
        source: chrono::ParseError,
    },
    #[error("expected a timestamp `YYYY-MM-DD HH:MM:SS[.fff]`, got {got}")]
    NotATimestamp { got: Value },
}

/// A timestamp outside the range its column's Parquet unit can hold (i64 microseconds or
/// nanoseconds): refused where a value enters and again where a file is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value} is out of range for {data_type} ({})", timestamp_range(.data_type))]
pub struct TimestampOutOfRange {
    /// The value as the input spelled it (JSON text or a formatted timestamp).
    pub(crate) value: String,
    pub(crate) data_type: DataType,
}

impl TimestampOutOfRange {
    pub(crate) fn new(value: impl std::fmt::Display, data_type: &DataType) -> Self {
        TimestampOutOfRange {
            value: value.to_string(),
            data_type: *data_type,
        }
    }
}

/// The range a column of the timestamp type `ty` holds, in words.
fn timestamp_range(ty: &DataType) -> &'static str {
    let precision = match ty {
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => *p,
        _ => 0,
    };
    if precision > 6 {
        // Parquet stores precisions above 6 as i64 nanoseconds.
        "1677-09-21 00:12:43.145224192 to 2262-04-11 23:47:16.854775807"
    } else {
        // And 4..=6 as i64 microseconds.
        "-290308-12-21 19:59:05.224192 to 294247-01-10 04:00:54.775807"
    }
}

/// Parses a decimal string into an unscaled value with exactly `scale` digits; rejects
/// values that need more digits than `precision` or more fractional digits than `scale`.
pub(crate) fn parse_decimal(text: &str, precision: u8, scale: u8) -> Result<i128, ValueError> {
    let t = text.trim();
    let (negative, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (int_part, frac_part) = match t.split_once('.') {
        Some((i, f)) => (i, f),
        None => (t, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(ValueError::NotADecimal(text.to_string()));
    }
    let frac_trimmed = frac_part.trim_end_matches('0');
    if frac_trimmed.len() > scale as usize {
        return Err(ValueError::TooManyFractionDigits {
            text: text.to_string(),
            scale,
        });
    }
    let int_digits = int_part.trim_start_matches('0');
    if int_digits.len() + scale as usize > precision as usize {
        return Err(ValueError::DecimalTooWide {
            text: text.to_string(),
            precision,
            scale,
        });
    }
    let mut unscaled: i128 = 0;
    for b in int_digits.bytes() {
        unscaled = unscaled * 10 + (b - b'0') as i128;
    }
    for i in 0..scale as usize {
        let digit = frac_trimmed
            .as_bytes()
            .get(i)
            .map_or(0, |b| (b - b'0') as i128);
        unscaled = unscaled * 10 + digit;
    }
    Ok(if negative { -unscaled } else { unscaled })
}

fn out_of_range(value: &Value, ty: &DataType) -> ValueError {
    ValueError::OutOfRange {
        value: value.clone(),
        data_type: *ty,
    }
}

/// Converts a JSON value to a datum of type `ty`. Strings holding numbers are accepted for
/// numeric columns; null is accepted for any type (nullability is checked by the caller).
/// Whether `s` fits a CHAR or VARCHAR of `n` characters. A character takes at least one
/// byte, so a string of at most `n` bytes fits without counting (most do: STRING is
/// VARCHAR of 2^31 - 1).
pub(crate) fn fits_chars(s: &str, n: u32) -> bool {
    s.len() <= n as usize || s.chars().count() <= n as usize
}

pub(crate) fn datum_from_json(value: &Value, ty: &DataType) -> Result<Datum, ValueError> {
    if value.is_null() {
        return Ok(Datum::Null);
    }
    let wrong = || ValueError::WrongType {
        expected: *ty,
        got: value.clone(),
    };
    let as_i64 = || -> Result<i64, ValueError> {
        match value {
            Value::Number(n) => n.as_i64().ok_or_else(wrong),
            Value::String(s) => s.trim().parse::<i64>().map_err(|_| wrong()),
            _ => Err(wrong()),
        }
    };
    let as_f64 = || -> Result<f64, ValueError> {
        match value {
            Value::Number(n) => n.as_f64().ok_or_else(wrong),
            Value::String(s) => s.trim().parse::<f64>().map_err(|_| wrong()),
            _ => Err(wrong()),
        }
    };
    Ok(match ty {
        DataType::Boolean => match value {
            Value::Bool(b) => Datum::Boolean(*b),
            Value::String(s) if s.eq_ignore_ascii_case("true") => Datum::Boolean(true),
            Value::String(s) if s.eq_ignore_ascii_case("false") => Datum::Boolean(false),
            _ => return Err(wrong()),
        },
        DataType::TinyInt => {
            Datum::TinyInt(i8::try_from(as_i64()?).map_err(|_| out_of_range(value, ty))?)
        }
        DataType::SmallInt => {
            Datum::SmallInt(i16::try_from(as_i64()?).map_err(|_| out_of_range(value, ty))?)
        }
        DataType::Int => Datum::Int(i32::try_from(as_i64()?).map_err(|_| out_of_range(value, ty))?),
        DataType::BigInt => Datum::BigInt(as_i64()?),
        DataType::Float => Datum::Float(as_f64()? as f32),
        DataType::Double => Datum::Double(as_f64()?),
        DataType::Decimal { precision, scale } => {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(wrong()),
            };
            Datum::Decimal(parse_decimal(&text, *precision, *scale)?)
        }
        DataType::Char(n) | DataType::Varchar(n) => {
            let s = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return Err(wrong()),
            };
            if !fits_chars(&s, *n) {
                return Err(ValueError::StringTooLong {
                    chars: s.chars().count(),
                    data_type: *ty,
                });
            }
            Datum::String(s.into())
        }
        DataType::Binary(n) | DataType::Varbinary(n) => {
            let Value::String(s) = value else {
                return Err(wrong());
            };
            let bytes = BASE64
                .decode(s.as_bytes())
                .map_err(|source| ValueError::NotBase64 {
                    data_type: *ty,
                    source,
                })?;
            if bytes.len() > *n as usize {
                return Err(ValueError::BytesTooLong {
                    len: bytes.len(),
                    data_type: *ty,
                });
            }
            Datum::Bytes(bytes)
        }
        DataType::Date => match value {
            Value::String(s) => {
                let date = NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").map_err(|source| {
                    ValueError::NotADate {
                        got: value.clone(),
                        source,
                    }
                })?;
                Datum::Date(date_to_days(date))
            }
            Value::Number(_) => {
                Datum::Date(i32::try_from(as_i64()?).map_err(|_| out_of_range(value, ty))?)
            }
            _ => return Err(wrong()),
        },
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
            let ts = match value {
                Value::String(s) => parse_timestamp(s)
                    .ok_or_else(|| ValueError::NotATimestamp { got: value.clone() })?
                    .truncate(*p),
                // A JSON number is epoch milliseconds.
                Value::Number(_) => Timestamp::from_millis(as_i64()?),
                _ => return Err(wrong()),
            };
            if !ts.fits_precision(*p) {
                return Err(TimestampOutOfRange::new(value, ty).into());
            }
            Datum::Timestamp(ts)
        }
    })
}

/// The JSON form of a datum of type `ty` (the inverse of [`datum_from_json`]).
pub(crate) fn datum_to_json(datum: &Datum, ty: &DataType) -> Value {
    match datum {
        Datum::Null => Value::Null,
        Datum::Boolean(b) => Value::Bool(*b),
        Datum::TinyInt(v) => Value::from(*v),
        Datum::SmallInt(v) => Value::from(*v),
        Datum::Int(v) => Value::from(*v),
        Datum::BigInt(v) => Value::from(*v),
        Datum::Float(v) => float_json(*v as f64, Some(*v)),
        Datum::Double(v) => float_json(*v, None),
        Datum::Decimal(v) => {
            let scale = match ty {
                DataType::Decimal { scale, .. } => *scale,
                _ => 0,
            };
            Value::String(format_decimal(*v, scale))
        }
        Datum::String(s) => Value::String(s.to_string()),
        Datum::Bytes(b) => Value::String(BASE64.encode(b)),
        Datum::Date(days) => match days_to_date(*days) {
            Some(d) => Value::String(d.format("%Y-%m-%d").to_string()),
            None => Value::from(*days),
        },
        Datum::Timestamp(ts) => Value::String(format_timestamp(*ts)),
    }
}

fn float_json(v: f64, as_f32: Option<f32>) -> Value {
    if !v.is_finite() {
        return Value::String(v.to_string());
    }
    // Print FLOAT with its own shortest representation, not the widened f64's digits.
    match as_f32 {
        Some(f) => serde_json::from_str::<Value>(&format!("{f:?}")).unwrap_or(Value::Null),
        None => serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimal_text_round_trips() {
        assert_eq!(parse_decimal("12.3", 10, 2), Ok(1230));
        assert_eq!(format_decimal(1230, 2), "12.30");
        assert_eq!(parse_decimal("-0.05", 10, 2), Ok(-5));
        assert_eq!(format_decimal(-5, 2), "-0.05");
        assert_eq!(parse_decimal("7", 3, 0), Ok(7));
        assert!(parse_decimal("12.345", 10, 2).is_err());
        assert!(parse_decimal("123456789", 10, 2).is_err());
        assert!(parse_decimal("abc", 10, 2).is_err());
        assert!(parse_decimal("", 10, 2).is_err());
    }

    #[test]
    fn timestamp_text_round_trips_and_truncates() {
        let ts = parse_timestamp("2024-01-01 10:00:00.123456").unwrap();
        assert_eq!(ts.millis, 1_704_103_200_123);
        assert_eq!(ts.nanos_of_milli, 456_000);
        assert_eq!(format_timestamp(ts), "2024-01-01 10:00:00.123456");
        assert_eq!(format_timestamp(ts.truncate(3)), "2024-01-01 10:00:00.123");
        assert_eq!(format_timestamp(ts.truncate(0)), "2024-01-01 10:00:00");
        let before_epoch = parse_timestamp("1969-12-31 23:59:59.5").unwrap();
        assert_eq!(before_epoch.millis, -500);
        assert_eq!(format_timestamp(before_epoch), "1969-12-31 23:59:59.5");
    }

    #[test]
    fn json_values_convert_with_precise_errors() {
        assert_eq!(
            datum_from_json(&json!("42"), &DataType::Int),
            Ok(Datum::Int(42))
        );
        assert_eq!(
            datum_from_json(&json!(3_000_000_000i64), &DataType::Int)
                .unwrap_err()
                .to_string(),
            "3000000000 is out of range for INT"
        );
        assert_eq!(
            datum_from_json(&json!("x"), &DataType::BigInt),
            Err(ValueError::WrongType {
                expected: DataType::BigInt,
                got: json!("x")
            })
        );
        assert_eq!(
            datum_from_json(&json!("2024-01-01"), &DataType::Date),
            Ok(Datum::Date(19723))
        );
        assert_eq!(
            datum_to_json(&Datum::Date(19723), &DataType::Date),
            json!("2024-01-01")
        );
        assert!(datum_from_json(&json!("abcd"), &DataType::Varchar(3)).is_err());
        assert_eq!(
            datum_to_json(&Datum::Float(0.1), &DataType::Float),
            json!(0.1)
        );
        let bytes = datum_from_json(&json!("AAEC"), &DataType::Varbinary(10)).unwrap();
        assert_eq!(bytes, Datum::Bytes(vec![0, 1, 2]));
    }

    proptest::proptest! {
        #[test]
        fn micros_are_exact_or_none(millis in proptest::num::i64::ANY, nanos in 0u32..1_000_000) {
            let ts = Timestamp { millis, nanos_of_milli: nanos };
            let exact = i128::from(millis) * 1000 + i128::from(nanos / 1000);
            proptest::prop_assert_eq!(ts.checked_micros(), i64::try_from(exact).ok());
            let exact = i128::from(millis) * 1_000_000 + i128::from(nanos);
            proptest::prop_assert_eq!(ts.checked_nanos(), i64::try_from(exact).ok());
        }

        #[test]
        fn micros_round_trip(micros in proptest::num::i64::ANY) {
            proptest::prop_assert_eq!(Timestamp::from_micros(micros).checked_micros(), Some(micros));
        }
    }

    #[test]
    fn micros_at_the_edge_of_i64() {
        let edge = Timestamp {
            millis: i64::MAX / 1000,
            nanos_of_milli: 807_999,
        };
        assert_eq!(edge.checked_micros(), Some(i64::MAX));
        let past = Timestamp {
            nanos_of_milli: 808_000,
            ..edge
        };
        assert_eq!(past.checked_micros(), None);
        let past = Timestamp {
            millis: i64::MAX / 1000 + 1,
            nanos_of_milli: 0,
        };
        assert_eq!(past.checked_micros(), None);
        let low = Timestamp {
            millis: i64::MIN / 1000 - 1,
            nanos_of_milli: 0,
        };
        assert_eq!(low.checked_micros(), None);
    }

    #[test]
    fn a_json_epoch_beyond_the_microsecond_range_is_out_of_range() {
        // Stored as i64 microseconds (Parquet), so TIMESTAMP(4..6) ends near year 294247.
        let too_big = json!(i64::MAX / 1000 + 1);
        for p in [4, 6] {
            let err = datum_from_json(&too_big, &DataType::Timestamp(p)).unwrap_err();
            assert!(matches!(err, ValueError::TimestampOutOfRange(_)), "{err:?}");
            assert!(err.to_string().contains("out of range"), "{err}");
        }
        // Milliseconds are stored as they are.
        assert!(datum_from_json(&too_big, &DataType::Timestamp(3)).is_ok());
        assert!(datum_from_json(&json!(i64::MAX / 1000), &DataType::Timestamp(6)).is_ok());
    }

    #[test]
    fn order_puts_nulls_first_and_follows_java_for_floats() {
        assert_eq!(
            compare_datums(&Datum::Null, &Datum::Int(i32::MIN)),
            Ordering::Less
        );
        assert_eq!(
            compare_datums(&Datum::Double(-0.0), &Datum::Double(0.0)),
            Ordering::Less
        );
        assert_eq!(
            compare_datums(&Datum::Double(f64::NAN), &Datum::Double(f64::INFINITY)),
            Ordering::Greater
        );
        assert_eq!(
            compare_datums(&Datum::String("é".into()), &Datum::String("z".into())),
            Ordering::Greater
        );
    }
}
