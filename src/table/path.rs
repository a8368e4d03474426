//! Partition and bucket directory names (docs/format.md §1.1), as Java's `PartitionPathUtils`
//! and pypaimon compute them with the default `partition.legacy-name=true`.
//!
//! Readers never store these paths: they recompute them from the `_PARTITION` row, so a
//! writer must spell every value exactly as they do.

use std::fmt::Write as _;

use super::datum::{Datum, Timestamp, format_decimal};
use super::types::DataType;

/// Characters Java's `PartitionPathUtils` escapes besides controls (< 0x20) and 0x7F.
const ESCAPED: &[u8] = b"\"#%'*/:=?\\{}[]^";

fn needs_escape(c: char) -> bool {
    c < ' ' || c == '\x7F' || (c.is_ascii() && ESCAPED.contains(&(c as u8)))
}

/// Java PartitionPathUtils escaping (%XX uppercase for chars < 0x20, 0x7F and
/// `" # % ' * / : = ? \ { } [ ] ^`). Spaces and non-ASCII characters are kept.
pub(crate) fn escape_path_name(text: &str) -> String {
    if !text.chars().any(needs_escape) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            // Every escaped char is ASCII, so two hex digits suffice.
            let _ = write!(out, "%{:02X}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// Java `Character.isWhitespace`: Unicode space separators except the no-break spaces
/// (U+00A0, U+2007, U+202F), plus U+0009..U+000D and U+001C..U+001F. (Python's
/// `str.isspace`, used by pypaimon, also counts U+0085, U+00A0, U+2007 and U+202F.)
fn is_java_whitespace(c: char) -> bool {
    matches!(c,
        '\u{9}'..='\u{D}'
        | '\u{1C}'..='\u{20}'
        | '\u{1680}'
        | '\u{2000}'..='\u{2006}'
        | '\u{2008}'..='\u{200A}'
        | '\u{2028}'
        | '\u{2029}'
        | '\u{205F}'
        | '\u{3000}')
}

/// Text of one partition value (legacy naming): strings as-is, integers decimal, boolean
/// true/false, DATE as epoch days integer, TIMESTAMP (and TIMESTAMP_LTZ, in UTC) as Java
/// `LocalDateTime.toString` (e.g. `2024-01-01T10:00`, seconds/fractions only when
/// non-zero), FLOAT/DOUBLE as Java (19+) `Float/Double.toString`, DECIMAL as
/// `BigDecimal.toPlainString` with the column's scale (e.g. `1.50`).
///
/// BINARY/VARBINARY get pypaimon's spelling (Python `bytes` repr such as `b'ab\x00'`):
/// Java prints an identity hash there, which no reader can reproduce.
///
/// `None` for null or empty/whitespace-only strings (caller substitutes the default name).
pub(crate) fn partition_value_text(value: &Datum, data_type: &DataType) -> Option<String> {
    Some(match value {
        Datum::Null => return None,
        Datum::String(s) => {
            if s.chars().all(is_java_whitespace) {
                return None;
            }
            s.to_string()
        }
        Datum::Boolean(b) => b.to_string(),
        Datum::TinyInt(v) => v.to_string(),
        Datum::SmallInt(v) => v.to_string(),
        Datum::Int(v) => v.to_string(),
        Datum::BigInt(v) => v.to_string(),
        // Legacy naming prints the internal int (days since epoch), not a date.
        Datum::Date(days) => days.to_string(),
        Datum::Float(v) => java_float_to_string(*v),
        Datum::Double(v) => java_double_to_string(*v),
        Datum::Decimal(unscaled) => {
            let scale = match data_type {
                DataType::Decimal { scale, .. } => *scale,
                _ => 0,
            };
            format_decimal(*unscaled, scale)
        }
        Datum::Timestamp(ts) => java_local_date_time_string(*ts),
        Datum::Bytes(bytes) => python_bytes_repr(bytes),
    })
}

/// `"k1=v1/k2=v2/"` (names and values escaped, in key order, trailing slash), `""` for no
/// partition keys. Null, empty and whitespace-only values become `default_name`. The three
/// slices have one entry per partition key; extra entries of a longer slice are ignored.
pub fn partition_path(
    names: &[String],
    values: &[Datum],
    types: &[DataType],
    default_name: &str,
) -> String {
    let mut out = String::new();
    for ((name, value), ty) in names.iter().zip(values).zip(types) {
        out.push_str(&escape_path_name(name));
        out.push('=');
        match partition_value_text(value, ty) {
            Some(text) => out.push_str(&escape_path_name(&text)),
            None => out.push_str(&escape_path_name(default_name)),
        }
        out.push('/');
    }
    out
}

/// `"bucket-<n>"`.
pub(crate) fn bucket_dir(bucket: i32) -> String {
    format!("bucket-{bucket}")
}

/// Java `Double.toString` (JDK 19+): the shortest decimal (at least two digits) that
/// rounds back to the value, the one closest to it (ties to an even last digit).
pub(crate) fn java_double_to_string(v: f64) -> String {
    let abs = v.abs();
    java_fp_to_string(v, format!("{abs:e}"), |digits| {
        let text = format!("{abs:.digits$e}");
        (text.parse::<f64>() == Ok(abs)).then_some(text)
    })
}

/// Java `Float.toString` (JDK 19+), digits chosen for the `f32` value itself.
pub(crate) fn java_float_to_string(v: f32) -> String {
    let abs = v.abs();
    java_fp_to_string(f64::from(v), format!("{abs:e}"), |digits| {
        let text = format!("{abs:.digits$e}");
        (text.parse::<f32>() == Ok(abs)).then_some(text)
    })
}

/// Java's layout of a float or double (`value`, widened losslessly): its special values,
/// else the digits of `shortest` (Rust's shortest round-trip, `{:e}`) or, with as many
/// digits, `rounded` (the closest that still round-trips in the value's own type).
fn java_fp_to_string(
    value: f64,
    shortest: String,
    rounded: impl Fn(usize) -> Option<String>,
) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_owned();
    }
    let closest = closest_with_len(&shortest, rounded);
    java_fp_layout(value.is_sign_negative(), &closest)
}

/// Java's choice of digits given Rust's shortest round-trip form `shortest` (`1.2345e-5`).
/// Rust finds the shortest length but not always the closest decimal of that length (it
/// does not round ties to even), and Java never uses fewer than two digits. So take the
/// correctly rounded decimal of that length (at least two digits) when it round-trips,
/// which `rounded(fraction_digits)` checks; it is then the closest one.
fn closest_with_len(shortest: &str, rounded: impl Fn(usize) -> Option<String>) -> String {
    let len = split_sci(shortest).map_or(1, |(digits, _)| digits.len());
    rounded(len.max(2) - 1).unwrap_or_else(|| shortest.to_owned())
}

/// Splits Rust's `{:e}` output (`1.2345e-5`) into significant digits and exponent.
fn split_sci(text: &str) -> Option<(String, i32)> {
    let (mantissa, exp) = text.split_once('e')?;
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    Some((digits, exp.parse().ok()?))
}

/// Lays out a finite non-zero magnitude given in Rust's `{:e}` form the way Java does:
/// plain for 1e-3 <= |v| < 1e7, else computerized scientific notation.
fn java_fp_layout(negative: bool, sci: &str) -> String {
    let Some((digits, exp)) = split_sci(sci) else {
        return sci.to_owned();
    };
    let trimmed = digits.trim_end_matches('0');
    let digits = if trimmed.is_empty() { "0" } else { trimmed };
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                let (int_part, frac) = digits.split_at(int_len);
                out.push_str(int_part);
                out.push('.');
                out.push_str(frac);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(digits);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        out.push('.');
        out.push_str(if rest.is_empty() { "0" } else { rest });
        let _ = write!(out, "E{exp}");
    }
    out
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Java `LocalDateTime.toString` of the timestamp's UTC wall-clock fields:
/// `uuuu-MM-ddTHH:mm[:ss[.fff|.ffffff|.fffffffff]]`.
fn java_local_date_time_string(ts: Timestamp) -> String {
    let secs = ts.millis.div_euclid(1000);
    let nano = (ts.millis.rem_euclid(1000) as u32) * 1_000_000 + ts.nanos_of_milli;
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let second_of_day = secs.rem_euclid(86_400);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
    );
    let mut out = String::with_capacity(32);
    // Java pads years to four digits and marks years beyond 9999 with '+'.
    if year.abs() < 1000 {
        let sign = if year < 0 { "-" } else { "" };
        let _ = write!(out, "{sign}{:04}", year.abs());
    } else if year > 9999 {
        let _ = write!(out, "+{year}");
    } else {
        let _ = write!(out, "{year}");
    }
    let _ = write!(out, "-{month:02}-{day:02}T{hour:02}:{minute:02}");
    if second > 0 || nano > 0 {
        let _ = write!(out, ":{second:02}");
        if nano > 0 {
            if nano.is_multiple_of(1_000_000) {
                let _ = write!(out, ".{:03}", nano / 1_000_000);
            } else if nano.is_multiple_of(1000) {
                let _ = write!(out, ".{:06}", nano / 1000);
            } else {
                let _ = write!(out, ".{nano:09}");
            }
        }
    }
    out
}

/// Python's `repr(bytes)`, which pypaimon uses as the partition text of binary values.
fn python_bytes_repr(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::with_capacity(bytes.len() + 3);
    out.push('b');
    out.push(quote as char);
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if b == quote => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7E => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push(quote as char);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::parse_timestamp;
    use crate::table::testkit::example_partition;
    use crate::table::types::MAX_LENGTH;

    const STRING: DataType = DataType::Varchar(MAX_LENGTH);
    const DEFAULT: &str = "__DEFAULT_PARTITION__";

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn format_doc_directories() {
        let keys = names(&["p_int", "p_date", "p_str", "p_bool"]);
        let (types, values) = example_partition();
        let path = partition_path(&keys, &values, &types, DEFAULT);
        assert_eq!(path, "p_int=7/p_date=19723/p_str=a b%2Fc%3Dd/p_bool=true/");
        assert_eq!(
            format!("{path}{}/", bucket_dir(0)),
            "p_int=7/p_date=19723/p_str=a b%2Fc%3Dd/p_bool=true/bucket-0/"
        );

        let values = [
            Datum::Int(-1),
            Datum::Date(1),
            Datum::String(String::new().into()),
            Datum::Boolean(false),
        ];
        assert_eq!(
            partition_path(&keys, &values, &types, DEFAULT),
            "p_int=-1/p_date=1/p_str=__DEFAULT_PARTITION__/p_bool=false/"
        );
        let values = [Datum::Null, Datum::Null, Datum::Null, Datum::Null];
        assert_eq!(
            partition_path(&keys, &values, &types, DEFAULT),
            "p_int=__DEFAULT_PARTITION__/p_date=__DEFAULT_PARTITION__/\
             p_str=__DEFAULT_PARTITION__/p_bool=__DEFAULT_PARTITION__/"
        );
        assert_eq!(partition_path(&[], &[], &[], DEFAULT), "");
        assert_eq!(bucket_dir(-2), "bucket--2");
    }

    #[test]
    fn escaping_follows_java() {
        assert_eq!(
            escape_path_name("\"#%'*/:=?\\{}[]^"),
            "%22%23%25%27%2A%2F%3A%3D%3F%5C%7B%7D%5B%5D%5E"
        );
        assert_eq!(escape_path_name("a\u{0}\u{1f}\u{7f}b"), "a%00%1F%7Fb");
        assert_eq!(
            escape_path_name("é ü 日本 ~!@$&()+,;<>`|"),
            "é ü 日本 ~!@$&()+,;<>`|"
        );
        // Names are escaped too.
        assert_eq!(
            partition_path(
                &names(&["a=b"]),
                &[Datum::Int(1)],
                &[DataType::Int],
                DEFAULT
            ),
            "a%3Db=1/"
        );
    }

    #[test]
    fn whitespace_only_strings_use_the_default() {
        for blank in ["", " ", "\t\n", "\u{3000}", "\u{1f}"] {
            assert_eq!(
                partition_value_text(&Datum::String(blank.into()), &STRING),
                None,
                "{blank:?}"
            );
        }
        // Java keeps no-break spaces.
        assert_eq!(
            partition_value_text(&Datum::String("\u{a0}".into()), &STRING).as_deref(),
            Some("\u{a0}")
        );
        assert_eq!(
            partition_value_text(&Datum::String(" x ".into()), &STRING).as_deref(),
            Some(" x ")
        );
    }

    fn ts_text(text: &str, nanos_extra: u32) -> String {
        let mut ts = parse_timestamp(text).unwrap();
        ts.nanos_of_milli += nanos_extra;
        partition_value_text(&Datum::Timestamp(ts), &DataType::Timestamp(9)).unwrap()
    }

    #[test]
    fn timestamps_print_like_local_date_time() {
        assert_eq!(ts_text("2024-01-01 10:00:00", 0), "2024-01-01T10:00");
        assert_eq!(ts_text("2024-01-01 10:00:05", 0), "2024-01-01T10:00:05");
        assert_eq!(
            ts_text("2024-01-01 10:00:00.5", 0),
            "2024-01-01T10:00:00.500"
        );
        assert_eq!(
            ts_text("2024-01-01 10:00:00.123456", 0),
            "2024-01-01T10:00:00.123456"
        );
        assert_eq!(
            ts_text("2024-01-01 10:00:00.123456", 789),
            "2024-01-01T10:00:00.123456789"
        );
        assert_eq!(
            ts_text("1969-12-31 23:59:59.999", 0),
            "1969-12-31T23:59:59.999"
        );
        assert_eq!(ts_text("0001-01-01 00:00:00", 0), "0001-01-01T00:00");
        let far = Timestamp {
            millis: 253_402_300_800_000, // 10000-01-01
            nanos_of_milli: 0,
        };
        assert_eq!(java_local_date_time_string(far), "+10000-01-01T00:00");
        let before_year_zero = Timestamp {
            millis: -62_198_755_200_000, // -0001-01-01
            nanos_of_milli: 0,
        };
        assert_eq!(
            java_local_date_time_string(before_year_zero),
            "-0001-01-01T00:00"
        );
        let extreme = Timestamp {
            millis: i64::MIN,
            nanos_of_milli: 999_999,
        };
        assert!(!java_local_date_time_string(extreme).is_empty());
    }

    #[test]
    fn floats_print_like_java() {
        let cases = [
            (1.0, "1.0"),
            (-1.5, "-1.5"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (0.001, "0.001"),
            (1.0e-4, "1.0E-4"),
            (9_999_999.0, "9999999.0"),
            (1.0e7, "1.0E7"),
            (1.234_567_8e7, "1.2345678E7"),
            (1.0e23, "1.0E23"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (5e-324, "4.9E-324"),
            (f64::MAX, "1.7976931348623157E308"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
            (123.456, "123.456"),
            (0.3, "0.3"),
        ];
        for (v, text) in cases {
            assert_eq!(java_double_to_string(v), text, "{v:e}");
        }
        let cases = [
            (1.0f32, "1.0"),
            (0.1, "0.1"),
            (1.0e10, "1.0E10"),
            (3.4028235e38, "3.4028235E38"),
            (1.4e-45, "1.4E-45"),
            (16_777_216.0, "1.6777216E7"),
            // Exactly halfway between 7342.9062 and 7342.9063: Java takes the even digit.
            (7342.0 + 29.0 / 32.0, "7342.9062"),
            (f32::INFINITY, "Infinity"),
        ];
        for (v, text) in cases {
            assert_eq!(java_float_to_string(v), text, "{v:e}");
        }
    }

    #[test]
    fn other_types_text() {
        let dec = DataType::Decimal {
            precision: 10,
            scale: 2,
        };
        assert_eq!(
            partition_value_text(&Datum::Decimal(150), &dec).as_deref(),
            Some("1.50")
        );
        assert_eq!(
            partition_value_text(&Datum::Decimal(-5), &dec).as_deref(),
            Some("-0.05")
        );
        assert_eq!(
            partition_value_text(&Datum::Decimal(0), &dec).as_deref(),
            Some("0.00")
        );
        assert_eq!(
            partition_value_text(&Datum::BigInt(i64::MIN), &DataType::BigInt).as_deref(),
            Some("-9223372036854775808")
        );
        assert_eq!(
            partition_value_text(&Datum::TinyInt(-3), &DataType::TinyInt).as_deref(),
            Some("-3")
        );
        assert_eq!(
            partition_value_text(&Datum::Date(-1), &DataType::Date).as_deref(),
            Some("-1")
        );
        let bin = DataType::Varbinary(MAX_LENGTH);
        assert_eq!(
            partition_value_text(&Datum::Bytes(b"a'\\\x00\xff\n".to_vec()), &bin).as_deref(),
            Some("b\"a'\\\\\\x00\\xff\\n\"")
        );
        assert_eq!(
            partition_value_text(&Datum::Bytes(b"'\"".to_vec()), &bin).as_deref(),
            Some("b'\\'\"'")
        );
        assert_eq!(
            partition_value_text(&Datum::Bytes(vec![]), &bin).as_deref(),
            Some("b''")
        );
    }
}
