//! Paimon's BinaryRow memory image: partitions, min/max keys and stats rows in manifests,
//! and the bytes hashed for bucket assignment (format doc §5).
//!
//! Layout of a row with `n` fields (all numbers little-endian):
//! a null-bit area of [`null_bits_width`] bytes (byte 0 is the RowKind, the null bit of
//! field `i` is bit `i + 8`), then one 8-byte slot per field, then the variable part, whose
//! chunks are zero padded to whole 8-byte words. Values that do not fit a slot (strings and
//! bytes longer than 7 bytes, DECIMAL with precision > 18, TIMESTAMP with precision > 3)
//! live in the variable part and their slot holds `(offset << 32) | length-or-nanos`, the
//! offset counting from the start of the BinaryRow.
//!
//! The "serialized row" stored in manifests is a 4-byte big-endian arity followed by the
//! BinaryRow bytes.

use super::datum::{Datum, Row, Timestamp};
use super::types::DataType;
use crate::error::{Error, Result};

/// Serialized row of arity 0: a zero arity prefix and an 8-byte null-bit area.
pub const EMPTY_SERIALIZED_ROW: [u8; 12] = [0; 12];

/// Number of bits before the first null bit (the RowKind byte).
const HEADER_BITS: usize = 8;
/// Longest string or byte array stored inline in its slot.
const MAX_INLINE_LEN: usize = 7;
/// Marks an inline string/bytes slot (highest bit of the slot's last byte).
const INLINE_MARK: u64 = 0x80 << 56;
/// Bytes reserved in the variable part for a DECIMAL with precision > 18.
const BIG_DECIMAL_RESERVED: usize = 16;
/// Largest precision whose unscaled value is stored directly in the slot.
const MAX_COMPACT_DECIMAL_PRECISION: u8 = 18;
/// Largest precision whose epoch milliseconds are stored directly in the slot.
const MAX_COMPACT_TIMESTAMP_PRECISION: u8 = 3;

/// Size in bytes of the null-bit area (including the RowKind byte) of a row of `arity`
/// fields: whole 8-byte words.
pub fn null_bits_width(arity: usize) -> usize {
    (arity.saturating_add(63 + HEADER_BITS) / 64) * 8
}

/// BinaryRow bytes (no arity prefix) of `values`, typed by `types` (same length).
pub fn encode(values: &[Datum], types: &[DataType]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_into(&mut out, values, types)?;
    Ok(out)
}

/// Appends the BinaryRow bytes (no arity prefix) of `values` to `out`, so hot paths can
/// reuse one buffer. Offsets in the image count from where the row starts in `out`. On
/// error `out` is left as it was.
pub fn encode_into(out: &mut Vec<u8>, values: &[Datum], types: &[DataType]) -> Result<()> {
    let base = out.len();
    let result = write_row(out, base, values, types);
    if result.is_err() {
        out.truncate(base);
    }
    result
}

/// The "serialized row" stored in manifests: 4-byte BIG-endian arity + BinaryRow bytes.
pub fn serialize(values: &[Datum], types: &[DataType]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    serialize_into(&mut out, values, types)?;
    Ok(out)
}

/// Appends the serialized row (arity prefix + BinaryRow bytes) to `out`. On error `out` is
/// left as it was.
pub fn serialize_into(out: &mut Vec<u8>, values: &[Datum], types: &[DataType]) -> Result<()> {
    let start = out.len();
    let arity = i32::try_from(values.len())
        .map_err(|_| Error::Data(format!("row of {} fields is too wide", values.len())))?;
    out.extend_from_slice(&arity.to_be_bytes());
    let result = encode_into(out, values, types);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Arity of a serialized row (first 4 bytes BE), Err if < 4 bytes or negative.
pub fn arity(bytes: &[u8]) -> Result<usize> {
    let prefix: [u8; 4] = bytes
        .get(..4)
        .and_then(|p| p.try_into().ok())
        .ok_or_else(|| {
            Error::format(format!(
                "serialized row of {} bytes has no arity prefix",
                bytes.len()
            ))
        })?;
    let arity = i32::from_be_bytes(prefix);
    usize::try_from(arity)
        .map_err(|_| Error::format(format!("serialized row has negative arity {arity}")))
}

/// Inverse of [`serialize`]: decodes a serialized row whose fields have `types`.
///
/// Never panics: truncated or malformed bytes and an arity other than `types.len()` are
/// `Error::Format`. Slots of null fields are not read, so Java's image of a null
/// DECIMAL(p > 18) / TIMESTAMP(p > 3) (reserved variable-part bytes) is accepted too.
pub fn deserialize(bytes: &[u8], types: &[DataType]) -> Result<Row> {
    let n = arity(bytes)?;
    if n != types.len() {
        return Err(Error::format(format!(
            "serialized row has arity {n}, expected {}",
            types.len()
        )));
    }
    let body = bytes.get(4..).unwrap_or_default();
    decode(body, types)
}

/// Decodes BinaryRow bytes (no arity prefix) whose fields have `types`. Never panics.
pub fn decode(body: &[u8], types: &[DataType]) -> Result<Row> {
    decode_fields(body, types, 0..types.len())
}

/// Decodes only the fields at `positions` (in that order, repeats allowed) of BinaryRow
/// bytes whose fields have `types` (all of them, in row order), so a lookup decodes just
/// the columns it selects. Never panics: a position past the row is `Error::Format`.
pub fn decode_projected(body: &[u8], types: &[DataType], positions: &[usize]) -> Result<Row> {
    decode_fields(body, types, positions.iter().copied())
}

fn decode_fields(
    body: &[u8],
    types: &[DataType],
    positions: impl ExactSizeIterator<Item = usize>,
) -> Result<Row> {
    let n = types.len();
    let width = null_bits_width(n);
    let fixed_len = n
        .checked_mul(8)
        .and_then(|slots| slots.checked_add(width))
        .ok_or_else(|| Error::format(format!("row of {n} fields is too wide")))?;
    if body.len() < fixed_len {
        return Err(Error::format(format!(
            "BinaryRow of {} bytes is shorter than its fixed part ({fixed_len} bytes for {n} fields)",
            body.len()
        )));
    }
    let mut row = Vec::with_capacity(positions.len());
    for i in positions {
        let ty = types.get(i).ok_or_else(|| {
            Error::format(format!("field {i} is out of range for a row of {n} fields"))
        })?;
        if is_null_at(body, i) {
            row.push(Datum::Null);
            continue;
        }
        row.push(decode_field(body, width + 8 * i, ty, i)?);
    }
    Ok(row)
}

/// A non-null field's value as bytes that are equal exactly when the values are, to
/// compare and hash fields in place without decoding them. Images are canonical for rows
/// written by [`encode`] (unused slot bytes zero, minimal DECIMAL bytes), whatever the
/// row's arity or the field's position. Like BinaryRow equality, floating-point values
/// compare by their bits (`-0.0 != 0.0`, a NaN equals the same NaN), and TIMESTAMP(p <= 3)
/// by its stored milliseconds.
#[derive(Debug, Clone, Copy, Eq)]
pub struct FieldImage<'a> {
    /// The slot of fixed-size values, the nano-of-millisecond of TIMESTAMP(p > 3), else 0.
    pub word: u64,
    /// The bytes of strings, byte arrays and DECIMAL(p > 18), the epoch-millisecond bytes
    /// of TIMESTAMP(p > 3); empty for fixed-size values.
    pub bytes: &'a [u8],
}

impl PartialEq for FieldImage<'_> {
    fn eq(&self, other: &Self) -> bool {
        // Empty byte slices (every fixed-size value) are not handed to `memcmp`: glibc's
        // AVX-512 version does a masked load even for 0 bytes, and at an empty slice's
        // dangling address that load takes a slow fault-suppression path (measured: a
        // quarter of a lookup's time).
        self.word == other.word
            && self.bytes.len() == other.bytes.len()
            && (self.bytes.is_empty() || self.bytes == other.bytes)
    }
}

/// The image of field `pos` (of type `ty`) of BinaryRow bytes with `arity` fields, `None`
/// when the field is null. Never panics: bad positions and bytes are `Error::Format`.
pub fn field_image<'a>(
    body: &'a [u8],
    arity: usize,
    pos: usize,
    ty: &DataType,
) -> Result<Option<FieldImage<'a>>> {
    if pos >= arity {
        return Err(Error::format(format!(
            "field {pos} is out of range for a row of {arity} fields"
        )));
    }
    let slot_at = null_bits_width(arity) + 8 * pos;
    let slot = u64::from_le_bytes(read_array::<8>(body, slot_at)?);
    if is_null_at(body, pos) {
        return Ok(None);
    }
    let (word, bytes) = match ty {
        DataType::Char(_) | DataType::Varchar(_) | DataType::Binary(_) | DataType::Varbinary(_) => {
            (0, var_len_bytes(body, slot_at, slot, pos)?)
        }
        DataType::Decimal { precision, .. } if *precision > MAX_COMPACT_DECIMAL_PRECISION => {
            (0, var_slice(body, slot >> 32, slot & 0xFFFF_FFFF, pos)?)
        }
        DataType::Timestamp(p) | DataType::TimestampLtz(p)
            if *p > MAX_COMPACT_TIMESTAMP_PRECISION =>
        {
            (slot & 0xFFFF_FFFF, var_slice(body, slot >> 32, 8, pos)?)
        }
        _ => (slot, &[][..]),
    };
    Ok(Some(FieldImage { word, bytes }))
}

fn is_null_at(body: &[u8], pos: usize) -> bool {
    let bit = pos + HEADER_BITS;
    body.get(bit / 8).is_some_and(|b| b & (1 << (bit % 8)) != 0)
}

/// `N` bytes of `body` at `at`, or a format error when they run past its end.
fn read_array<const N: usize>(body: &[u8], at: usize) -> Result<[u8; N]> {
    at.checked_add(N)
        .and_then(|end| body.get(at..end))
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| {
            Error::format(format!(
                "BinaryRow of {} bytes: {N} bytes at offset {at} are out of bounds",
                body.len()
            ))
        })
}

/// The `len` bytes of the variable part at `offset`, bounds checked.
fn var_slice(body: &[u8], offset: u64, len: u64, field: usize) -> Result<&[u8]> {
    usize::try_from(offset)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(o, l)| body.get(o..o.checked_add(l)?))
        .ok_or_else(|| {
            Error::format(format!(
                "BinaryRow of {} bytes: field {field} points to {len} bytes at offset {offset}, out of bounds",
                body.len()
            ))
        })
}

/// Decodes the non-null field `field` whose slot starts at `slot_at`.
fn decode_field(body: &[u8], slot_at: usize, ty: &DataType, field: usize) -> Result<Datum> {
    let slot_bytes = read_array::<8>(body, slot_at)?;
    let slot = u64::from_le_bytes(slot_bytes);
    let [b0, b1, b2, b3, ..] = slot_bytes;
    let low4 = [b0, b1, b2, b3];
    Ok(match ty {
        DataType::Boolean => Datum::Boolean(b0 != 0),
        DataType::TinyInt => Datum::TinyInt(b0 as i8),
        DataType::SmallInt => Datum::SmallInt(i16::from_le_bytes([b0, b1])),
        DataType::Int => Datum::Int(i32::from_le_bytes(low4)),
        DataType::Date => Datum::Date(i32::from_le_bytes(low4)),
        DataType::BigInt => Datum::BigInt(slot as i64),
        DataType::Float => Datum::Float(f32::from_le_bytes(low4)),
        DataType::Double => Datum::Double(f64::from_le_bytes(slot_bytes)),
        DataType::Decimal { precision, .. } => {
            let unscaled = if *precision <= MAX_COMPACT_DECIMAL_PRECISION {
                i128::from(slot as i64)
            } else {
                let len = slot & 0xFFFF_FFFF;
                if !(1..=BIG_DECIMAL_RESERVED as u64).contains(&len) {
                    return Err(Error::format(format!(
                        "field {field}: DECIMAL of {len} bytes (expected 1..=16)"
                    )));
                }
                let bytes = var_slice(body, slot >> 32, len, field)?;
                i128_from_be_twos_complement(bytes)
            };
            check_decimal_precision(unscaled, *precision).map_err(|msg| {
                Error::format(format!("field {field}: stored value does not fit: {msg}"))
            })?;
            Datum::Decimal(unscaled)
        }
        DataType::Char(_) | DataType::Varchar(_) => {
            let bytes = var_len_bytes(body, slot_at, slot, field)?;
            let text = std::str::from_utf8(bytes)
                .map_err(|e| Error::format(format!("field {field}: string is not UTF-8: {e}")))?;
            Datum::String(text.to_owned())
        }
        DataType::Binary(_) | DataType::Varbinary(_) => {
            Datum::Bytes(var_len_bytes(body, slot_at, slot, field)?.to_vec())
        }
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
            if *p <= MAX_COMPACT_TIMESTAMP_PRECISION {
                Datum::Timestamp(Timestamp {
                    millis: slot as i64,
                    nanos_of_milli: 0,
                })
            } else {
                let nanos = slot & 0xFFFF_FFFF;
                if nanos > 999_999 {
                    return Err(Error::format(format!(
                        "field {field}: TIMESTAMP nano-of-millisecond {nanos} > 999999"
                    )));
                }
                let millis =
                    read_array::<8>(body, usize::try_from(slot >> 32).unwrap_or(usize::MAX))?;
                Datum::Timestamp(Timestamp {
                    millis: i64::from_le_bytes(millis),
                    nanos_of_milli: nanos as u32,
                })
            }
        }
    })
}

/// Bytes of a string/binary field whose slot (value `slot`) starts at `slot_at`: inline
/// in the slot (mark bit set) or in the variable part.
fn var_len_bytes(body: &[u8], slot_at: usize, slot: u64, field: usize) -> Result<&[u8]> {
    if slot & INLINE_MARK != 0 {
        let len = ((slot >> 56) & 0x7F) as usize;
        if len > MAX_INLINE_LEN {
            return Err(Error::format(format!(
                "field {field}: inline value of {len} bytes (at most 7 fit a slot)"
            )));
        }
        var_slice(body, slot_at as u64, len as u64, field)
    } else {
        var_slice(body, slot >> 32, slot & 0xFFFF_FFFF, field)
    }
}

/// Sign-extends 1..=16 big-endian two's-complement bytes.
fn i128_from_be_twos_complement(bytes: &[u8]) -> i128 {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut buf = [if negative { 0xFF } else { 0 }; 16];
    let skip = 16usize.saturating_sub(bytes.len());
    for (dst, src) in buf.iter_mut().skip(skip).zip(bytes) {
        *dst = *src;
    }
    i128::from_be_bytes(buf)
}

/// 10^p for p in 0..=38 (10^38 < i128::MAX).
const fn pow10_table() -> [i128; 39] {
    let mut table = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
}
const POW10: [i128; 39] = pow10_table();

/// Rejects unscaled values with more digits than `precision`.
fn check_decimal_precision(unscaled: i128, precision: u8) -> std::result::Result<(), String> {
    let limit = POW10.get(precision as usize).copied().unwrap_or(i128::MAX);
    if unscaled.unsigned_abs() >= limit.unsigned_abs() {
        return Err(format!(
            "unscaled value {unscaled} has more than {precision} digits"
        ));
    }
    Ok(())
}

fn write_row(out: &mut Vec<u8>, base: usize, values: &[Datum], types: &[DataType]) -> Result<()> {
    if values.len() != types.len() {
        return Err(Error::Data(format!(
            "row has {} values but {} types",
            values.len(),
            types.len()
        )));
    }
    let width = null_bits_width(values.len());
    let fixed_len = width + 8 * values.len();
    out.reserve(fixed_len);
    // RowKind INSERT (0), no null bits, zero slots: unused slot bytes must be zero because
    // the image is hashed for bucket assignment.
    out.resize(base + fixed_len, 0);
    for (i, (value, ty)) in values.iter().zip(types).enumerate() {
        let slot_at = base + width + 8 * i;
        write_field(out, base, slot_at, i, value, ty)?;
    }
    Ok(())
}

fn put_slot(out: &mut [u8], slot_at: usize, bytes: [u8; 8]) {
    if let Some(dst) = out.get_mut(slot_at..slot_at + 8) {
        dst.copy_from_slice(&bytes);
    }
}

/// Slot bytes of a value whose little-endian image `le` is shorter than 8 bytes: the rest
/// stays zero (no sign extension), as Java and pypaimon write it.
fn low_bytes(le: &[u8]) -> [u8; 8] {
    let mut slot = [0u8; 8];
    for (dst, src) in slot.iter_mut().zip(le) {
        *dst = *src;
    }
    slot
}

/// Appends a variable-part chunk (zero padded to whole words) and returns its offset from
/// the start of the row.
fn append_var(out: &mut Vec<u8>, base: usize, bytes: &[u8], reserved: usize) -> Result<u64> {
    let offset = out.len() - base;
    let offset = u32::try_from(offset)
        .map_err(|_| Error::Data(format!("BinaryRow grows past 4 GiB (offset {offset})")))?;
    out.extend_from_slice(bytes);
    let padded = reserved.max(bytes.len()).next_multiple_of(8);
    out.resize(out.len() + (padded - bytes.len()), 0);
    Ok(u64::from(offset) << 32)
}

fn write_var_len(out: &mut Vec<u8>, base: usize, slot_at: usize, bytes: &[u8]) -> Result<()> {
    if bytes.len() <= MAX_INLINE_LEN {
        let mut slot = low_bytes(bytes);
        slot[7] = 0x80 | bytes.len() as u8;
        put_slot(out, slot_at, slot);
        return Ok(());
    }
    let len = u32::try_from(bytes.len())
        .map_err(|_| Error::Data(format!("value of {} bytes is too long", bytes.len())))?;
    let offset = append_var(out, base, bytes, 0)?;
    put_slot(out, slot_at, (offset | u64::from(len)).to_le_bytes());
    Ok(())
}

fn write_field(
    out: &mut Vec<u8>,
    base: usize,
    slot_at: usize,
    pos: usize,
    value: &Datum,
    ty: &DataType,
) -> Result<()> {
    let slot = match (ty, value) {
        (_, Datum::Null) => {
            // pypaimon's image: null bit, zero slot, nothing reserved (Java reserves
            // variable-part bytes for non-compact DECIMAL/TIMESTAMP; see format doc §5).
            let bit = pos + HEADER_BITS;
            if let Some(b) = out.get_mut(base + bit / 8) {
                *b |= 1 << (bit % 8);
            }
            return Ok(());
        }
        (DataType::Boolean, Datum::Boolean(v)) => low_bytes(&[u8::from(*v)]),
        (DataType::TinyInt, Datum::TinyInt(v)) => low_bytes(&v.to_le_bytes()),
        (DataType::SmallInt, Datum::SmallInt(v)) => low_bytes(&v.to_le_bytes()),
        (DataType::Int, Datum::Int(v)) | (DataType::Date, Datum::Date(v)) => {
            low_bytes(&v.to_le_bytes())
        }
        (DataType::BigInt, Datum::BigInt(v)) => v.to_le_bytes(),
        (DataType::Float, Datum::Float(v)) => low_bytes(&v.to_le_bytes()),
        (DataType::Double, Datum::Double(v)) => v.to_le_bytes(),
        (DataType::Decimal { precision, scale }, Datum::Decimal(v)) => {
            check_decimal_precision(*v, *precision)
                .map_err(|msg| Error::Data(format!("DECIMAL({precision}, {scale}): {msg}")))?;
            if *precision <= MAX_COMPACT_DECIMAL_PRECISION {
                // Fits i64: at most 18 digits.
                (*v as i64).to_le_bytes()
            } else {
                let image = v.to_be_bytes();
                let len = minimal_twos_complement_len(*v);
                let bytes = image.get(16 - len..).unwrap_or(&image);
                let offset = append_var(out, base, bytes, BIG_DECIMAL_RESERVED)?;
                (offset | len as u64).to_le_bytes()
            }
        }
        (DataType::Char(_) | DataType::Varchar(_), Datum::String(s)) => {
            return write_var_len(out, base, slot_at, s.as_bytes());
        }
        (DataType::Binary(_) | DataType::Varbinary(_), Datum::Bytes(b)) => {
            return write_var_len(out, base, slot_at, b);
        }
        (DataType::Timestamp(p) | DataType::TimestampLtz(p), Datum::Timestamp(ts)) => {
            if ts.nanos_of_milli > 999_999 {
                return Err(Error::Data(format!(
                    "timestamp nano-of-millisecond {} > 999999",
                    ts.nanos_of_milli
                )));
            }
            if *p <= MAX_COMPACT_TIMESTAMP_PRECISION {
                // Sub-millisecond digits are dropped, as Java's writer does.
                ts.millis.to_le_bytes()
            } else {
                let offset = append_var(out, base, &ts.millis.to_le_bytes(), 8)?;
                (offset | u64::from(ts.nanos_of_milli)).to_le_bytes()
            }
        }
        (ty, value) => {
            return Err(Error::Data(format!(
                "field {pos}: value {value:?} does not match type {ty}"
            )));
        }
    };
    put_slot(out, slot_at, slot);
    Ok(())
}

/// Length of Java's `BigInteger.toByteArray()`: `bitLength / 8 + 1`, where the bit length
/// excludes the sign bit. pypaimon computes the length from the magnitude instead, so for
/// -2^(8k-1) (e.g. -128) it writes one extra 0xFF byte; we follow Java.
fn minimal_twos_complement_len(v: i128) -> usize {
    let bit_length = if v < 0 {
        128 - v.leading_ones()
    } else {
        128 - v.leading_zeros()
    };
    (bit_length as usize / 8 + 1).min(16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::datum::compare_datums;
    use crate::table::types::MAX_LENGTH;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    const STRING: DataType = DataType::Varchar(MAX_LENGTH);

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unhex(text: &str) -> Vec<u8> {
        let clean: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        clean
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn example_a_int_key() {
        let bytes = serialize(&[Datum::Int(1)], &[DataType::Int]).unwrap();
        assert_eq!(bytes, unhex("00000001 0000000000000000 0100000000000000"));
        let max = serialize(&[Datum::Int(2)], &[DataType::Int]).unwrap();
        assert_eq!(max, unhex("00000001 0000000000000000 0200000000000000"));
        assert_eq!(
            deserialize(&bytes, &[DataType::Int]).unwrap(),
            vec![Datum::Int(1)]
        );
    }

    #[test]
    fn example_b_long_string_partition() {
        let values = [Datum::String("2024-01-01".into())];
        let bytes = serialize(&values, &[STRING]).unwrap();
        assert_eq!(
            hex(&bytes),
            "00000001\
             0000000000000000\
             0a00000010000000\
             323032342d30312d\
             3031000000000000"
        );
        assert_eq!(deserialize(&bytes, &[STRING]).unwrap(), values);
    }

    #[test]
    fn example_c_four_partition_values() {
        let types = [DataType::Int, DataType::Date, STRING, DataType::Boolean];
        let values = [
            Datum::Int(7),
            Datum::Date(19723),
            Datum::String("a b/c=d".into()),
            Datum::Boolean(true),
        ];
        let bytes = serialize(&values, &types).unwrap();
        assert_eq!(
            hex(&bytes),
            "00000004\
             0000000000000000\
             0700000000000000\
             0b4d000000000000\
             6120622f633d6487\
             0100000000000000"
        );
        assert_eq!(deserialize(&bytes, &types).unwrap(), values);
    }

    #[test]
    fn example_d_null_and_inline_string() {
        let types = [DataType::BigInt, STRING];
        let values = [Datum::Null, Datum::String("abc".into())];
        let bytes = encode(&values, &types).unwrap();
        assert_eq!(
            hex(&bytes),
            "0001000000000000\
             0000000000000000\
             6162630000000083"
        );
        let serialized = serialize(&values, &types).unwrap();
        assert_eq!(deserialize(&serialized, &types).unwrap(), values);
    }

    #[test]
    fn empty_row_and_arity() {
        assert_eq!(serialize(&[], &[]).unwrap(), EMPTY_SERIALIZED_ROW);
        assert_eq!(
            deserialize(&EMPTY_SERIALIZED_ROW, &[]).unwrap(),
            Vec::<Datum>::new()
        );
        assert_eq!(arity(&EMPTY_SERIALIZED_ROW).unwrap(), 0);
        assert_eq!(arity(&[0, 0, 0, 3, 9]).unwrap(), 3);
        assert!(arity(&[0, 0, 1]).is_err());
        assert!(arity(&[0xFF, 0xFF, 0xFF, 0xFF]).is_err());
    }

    #[test]
    fn null_bit_area_grows_past_56_fields() {
        assert_eq!(null_bits_width(0), 8);
        assert_eq!(null_bits_width(56), 8);
        assert_eq!(null_bits_width(57), 16);
        assert_eq!(null_bits_width(120), 16);
        assert_eq!(null_bits_width(121), 24);
        let types = vec![DataType::Int; 60];
        let mut values = vec![Datum::Int(5); 60];
        values[59] = Datum::Null;
        let bytes = encode(&values, &types).unwrap();
        assert_eq!(bytes.len(), 16 + 60 * 8);
        // Field 59 -> bit 67 -> byte 8, bit 3.
        assert_eq!(bytes[8], 1 << 3);
        assert_eq!(decode(&bytes, &types).unwrap(), values);
    }

    #[test]
    fn every_fixed_type_slot() {
        let cases: Vec<(DataType, Datum, &str)> = vec![
            (DataType::Boolean, Datum::Boolean(false), "0000000000000000"),
            (DataType::TinyInt, Datum::TinyInt(-1), "ff00000000000000"),
            (DataType::SmallInt, Datum::SmallInt(-2), "feff000000000000"),
            (DataType::Int, Datum::Int(-1), "ffffffff00000000"),
            (DataType::BigInt, Datum::BigInt(-1), "ffffffffffffffff"),
            (DataType::Float, Datum::Float(1.0), "0000803f00000000"),
            (DataType::Double, Datum::Double(1.0), "000000000000f03f"),
            (DataType::Date, Datum::Date(-1), "ffffffff00000000"),
            (
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                Datum::Decimal(-1230),
                "32fbffffffffffff",
            ),
            (
                DataType::Timestamp(3),
                Datum::Timestamp(Timestamp {
                    millis: 1_704_103_200_123,
                    nanos_of_milli: 0,
                }),
                "7b4577c48c010000",
            ),
            (
                DataType::Varbinary(10),
                Datum::Bytes(vec![]),
                "0000000000000080",
            ),
            (STRING, Datum::String(String::new()), "0000000000000080"),
            (
                DataType::Char(7),
                Datum::String("abcdefg".into()),
                "6162636465666787",
            ),
        ];
        for (ty, value, slot) in cases {
            let bytes = encode(std::slice::from_ref(&value), &[ty]).unwrap();
            assert_eq!(hex(&bytes), format!("0000000000000000{slot}"), "{ty}");
            assert_eq!(decode(&bytes, &[ty]).unwrap(), vec![value], "{ty}");
        }
    }

    #[test]
    fn variable_part_types() {
        // 8-byte binary goes to the variable part.
        let bytes = encode(&[Datum::Bytes((1..=8).collect())], &[DataType::Binary(8)]).unwrap();
        assert_eq!(
            hex(&bytes),
            "0000000000000000 0800000010000000 0102030405060708".replace(' ', "")
        );
        // Big decimal: minimal big-endian two's complement, 16 bytes reserved.
        let ty = DataType::Decimal {
            precision: 38,
            scale: 0,
        };
        let bytes = encode(&[Datum::Decimal(-129)], &[ty]).unwrap();
        assert_eq!(
            hex(&bytes),
            "0000000000000000 0200000010000000 ff7f000000000000 0000000000000000".replace(' ', "")
        );
        // Java writes -128 as the single byte 0x80 (pypaimon writes ff80).
        let bytes = encode(&[Datum::Decimal(-128)], &[ty]).unwrap();
        assert_eq!(
            hex(&bytes),
            "0000000000000000 0100000010000000 8000000000000000 0000000000000000".replace(' ', "")
        );
        let bytes = encode(&[Datum::Decimal(0)], &[ty]).unwrap();
        assert_eq!(&bytes[8..16], &[1, 0, 0, 0, 16, 0, 0, 0]);
        // pypaimon's longer form decodes to the same value.
        let mut pypaimon = bytes.clone();
        pypaimon[8] = 2;
        pypaimon[16] = 0xFF;
        pypaimon[17] = 0x80;
        assert_eq!(
            decode(&pypaimon, &[ty]).unwrap(),
            vec![Datum::Decimal(-128)]
        );
        // Timestamp(6): millis in the variable part, nanos in the slot.
        let ts = Timestamp {
            millis: 1_704_103_200_123,
            nanos_of_milli: 456_000,
        };
        let bytes = encode(&[Datum::Timestamp(ts)], &[DataType::TimestampLtz(6)]).unwrap();
        assert_eq!(
            hex(&bytes),
            "0000000000000000 40f5060010000000 7b4577c48c010000".replace(' ', "")
        );
        assert_eq!(
            decode(&bytes, &[DataType::TimestampLtz(6)]).unwrap(),
            vec![Datum::Timestamp(ts)]
        );
    }

    #[test]
    fn decimal_extremes() {
        let ty = DataType::Decimal {
            precision: 38,
            scale: 10,
        };
        for v in [
            POW10[38] - 1,
            -(POW10[38] - 1),
            i128::from(i64::MIN),
            1,
            -1,
            127,
            128,
        ] {
            let bytes = serialize(&[Datum::Decimal(v)], &[ty]).unwrap();
            assert_eq!(deserialize(&bytes, &[ty]).unwrap(), vec![Datum::Decimal(v)]);
        }
        assert!(matches!(
            encode(&[Datum::Decimal(POW10[38])], &[ty]),
            Err(Error::Data(_))
        ));
        let compact = DataType::Decimal {
            precision: 18,
            scale: 0,
        };
        assert!(encode(&[Datum::Decimal(POW10[18] - 1)], &[compact]).is_ok());
        assert!(matches!(
            encode(&[Datum::Decimal(POW10[18])], &[compact]),
            Err(Error::Data(_))
        ));
    }

    #[test]
    fn java_null_image_of_non_compact_types_is_accepted() {
        let types = [
            DataType::Decimal {
                precision: 20,
                scale: 2,
            },
            DataType::Timestamp(6),
            DataType::Int,
        ];
        // Java: null bits 0 and 1, slots (offset << 32) | 0, 16 + 8 reserved zero bytes.
        let java = unhex(
            "00000003
             0003000000000000
             0000000020000000
             0000000030000000
             0900000000000000
             0000000000000000 0000000000000000
             0000000000000000",
        );
        let row = deserialize(&java, &types).unwrap();
        assert_eq!(row, vec![Datum::Null, Datum::Null, Datum::Int(9)]);
        // Ours (pypaimon's image): nothing reserved.
        assert_eq!(
            hex(&serialize(&row, &types).unwrap()),
            "00000003 0003000000000000 0000000000000000 0000000000000000 0900000000000000"
                .replace(' ', "")
        );
    }

    #[test]
    fn mismatched_values_are_data_errors_and_leave_buffer_untouched() {
        let mut buf = vec![1, 2, 3];
        let err = encode_into(&mut buf, &[Datum::String("x".into())], &[DataType::Int]);
        assert!(matches!(err, Err(Error::Data(_))));
        assert_eq!(buf, vec![1, 2, 3]);
        assert!(matches!(
            encode(&[Datum::Int(1)], &[DataType::Int, DataType::Int]),
            Err(Error::Data(_))
        ));
        let bad_ts = Datum::Timestamp(Timestamp {
            millis: 0,
            nanos_of_milli: 1_000_000,
        });
        assert!(matches!(
            serialize(&[bad_ts], &[DataType::Timestamp(9)]),
            Err(Error::Data(_))
        ));
        assert!(serialize_into(&mut buf, &[Datum::Int(1)], &[DataType::BigInt]).is_err());
        assert_eq!(buf, vec![1, 2, 3]);
    }

    #[test]
    fn encode_into_offsets_are_relative_to_the_row() {
        let values = [Datum::String("longer than seven".into())];
        let mut buf = vec![0xAA; 5];
        encode_into(&mut buf, &values, &[STRING]).unwrap();
        assert_eq!(&buf[5..], encode(&values, &[STRING]).unwrap().as_slice());
    }

    #[test]
    fn malformed_bytes_are_format_errors() {
        let types = [STRING];
        let good = serialize(&[Datum::String("a string of 20 bytes".into())], &types).unwrap();
        // 4 + 8 + 8 + 20 bytes are needed; the trailing padding is not.
        for cut in 0..40 {
            let r = deserialize(&good[..cut], &types);
            assert!(matches!(r, Err(Error::Format(_))), "cut {cut}");
        }
        assert!(deserialize(&good[..40], &types).is_ok());
        // Wrong arity.
        assert!(deserialize(&good, &[STRING, STRING]).is_err());
        // Inline length 8 is invalid.
        let bad_inline = unhex("00000001 0000000000000000 6162636465666788");
        assert!(deserialize(&bad_inline, &types).is_err());
        // Invalid UTF-8.
        let bad_utf8 = unhex("00000001 0000000000000000 ff00000000000081");
        assert!(deserialize(&bad_utf8, &types).is_err());
        // Oversized decimal length.
        let ty = [DataType::Decimal {
            precision: 30,
            scale: 0,
        }];
        let bad_dec =
            unhex("00000001 0000000000000000 1100000010000000 00000000000000000000000000000000 00");
        assert!(deserialize(&bad_dec, &ty).is_err());
    }

    #[test]
    fn decode_projected_reads_only_the_selected_fields() {
        let types = [DataType::Int, STRING, DataType::Double, STRING];
        let values = [
            Datum::Int(7),
            Datum::String("a string longer than seven bytes".into()),
            Datum::Null,
            Datum::String("short".into()),
        ];
        let body = encode(&values, &types).unwrap();
        assert_eq!(
            decode_projected(&body, &types, &[3, 0, 2, 3]).unwrap(),
            vec![
                values[3].clone(),
                values[0].clone(),
                Datum::Null,
                values[3].clone()
            ]
        );
        assert_eq!(decode_projected(&body, &types, &[]).unwrap(), vec![]);
        let err = decode_projected(&body, &types, &[4]).unwrap_err();
        assert!(matches!(err, Error::Format(_)), "{err}");
        assert!(decode_projected(&body[..20], &types, &[0]).is_err());
    }

    #[test]
    fn field_images_compare_values_across_rows_and_positions() {
        let big_decimal = DataType::Decimal {
            precision: 30,
            scale: 2,
        };
        let micros = DataType::Timestamp(6);
        let types = [STRING, DataType::BigInt, big_decimal, micros, STRING];
        let ts = Timestamp {
            millis: 1_700_000_000_123,
            nanos_of_milli: 456_000,
        };
        let values = [
            Datum::String("abc".into()),
            Datum::BigInt(-5),
            Datum::Decimal(-12_345_678_901_234_567_890),
            Datum::Timestamp(ts),
            Datum::String("a longer string value".into()),
        ];
        let row = encode(&values, &types).unwrap();
        for (i, (value, ty)) in values.iter().zip(&types).enumerate() {
            // The same value alone in a one-field row has the same image.
            let alone = encode(std::slice::from_ref(value), &[*ty]).unwrap();
            let a = field_image(&row, types.len(), i, ty).unwrap().unwrap();
            let b = field_image(&alone, 1, 0, ty).unwrap().unwrap();
            assert_eq!(a, b, "field {i}");
        }
        let s = field_image(&row, 5, 0, &STRING).unwrap().unwrap();
        assert_eq!((s.word, s.bytes), (0, &b"abc"[..]));
        let s = field_image(&row, 5, 4, &STRING).unwrap().unwrap();
        assert_eq!(s.bytes, b"a longer string value");
        let t = field_image(&row, 5, 3, &micros).unwrap().unwrap();
        assert_eq!(t.word, 456_000);
        assert_eq!(t.bytes, ts.millis.to_le_bytes());
        // Different values, different images; null has none.
        let other = encode(&[Datum::String("abd".into())], &[STRING]).unwrap();
        assert_ne!(
            field_image(&other, 1, 0, &STRING).unwrap(),
            field_image(&row, 5, 0, &STRING).unwrap()
        );
        let null = encode(&[Datum::Null], &[DataType::Int]).unwrap();
        assert_eq!(field_image(&null, 1, 0, &DataType::Int).unwrap(), None);
        // Out of range position or bytes: errors, not panics.
        assert!(field_image(&row, 5, 5, &STRING).is_err());
        assert!(field_image(&row[..16], 5, 4, &STRING).is_err());
    }

    fn rows_equal(a: &[Datum], b: &[Datum]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| match (x, y) {
                (Datum::Float(x), Datum::Float(y)) => x.to_bits() == y.to_bits(),
                (Datum::Double(x), Datum::Double(y)) => x.to_bits() == y.to_bits(),
                _ => compare_datums(x, y) == Ordering::Equal,
            })
    }

    fn type_strategy() -> impl Strategy<Value = DataType> {
        prop_oneof![
            Just(DataType::Boolean),
            Just(DataType::TinyInt),
            Just(DataType::SmallInt),
            Just(DataType::Int),
            Just(DataType::BigInt),
            Just(DataType::Float),
            Just(DataType::Double),
            Just(DataType::Date),
            (1u8..=38)
                .prop_flat_map(|p| (Just(p), 0..=p))
                .prop_map(|(precision, scale)| { DataType::Decimal { precision, scale } }),
            (1u32..20).prop_map(DataType::Char),
            Just(STRING),
            (1u32..20).prop_map(DataType::Binary),
            Just(DataType::Varbinary(MAX_LENGTH)),
            (0u8..=9).prop_map(DataType::Timestamp),
            (0u8..=9).prop_map(DataType::TimestampLtz),
        ]
    }

    fn value_strategy(ty: DataType) -> BoxedStrategy<Datum> {
        let value: BoxedStrategy<Datum> = match ty {
            DataType::Boolean => any::<bool>().prop_map(Datum::Boolean).boxed(),
            DataType::TinyInt => any::<i8>().prop_map(Datum::TinyInt).boxed(),
            DataType::SmallInt => any::<i16>().prop_map(Datum::SmallInt).boxed(),
            DataType::Int => any::<i32>().prop_map(Datum::Int).boxed(),
            DataType::BigInt => any::<i64>().prop_map(Datum::BigInt).boxed(),
            DataType::Float => any::<u32>()
                .prop_map(|b| Datum::Float(f32::from_bits(b)))
                .boxed(),
            DataType::Double => any::<u64>()
                .prop_map(|b| Datum::Double(f64::from_bits(b)))
                .boxed(),
            DataType::Date => any::<i32>().prop_map(Datum::Date).boxed(),
            DataType::Decimal { precision, .. } => {
                let limit = POW10[precision as usize];
                prop_oneof![
                    (-limit + 1..limit),
                    (-limit.min(1000) + 1..limit.min(1000)),
                    Just(limit - 1),
                    Just(-limit + 1),
                ]
                .prop_map(Datum::Decimal)
                .boxed()
            }
            DataType::Char(_) | DataType::Varchar(_) => ".{0,20}".prop_map(Datum::String).boxed(),
            DataType::Binary(_) | DataType::Varbinary(_) => {
                prop::collection::vec(any::<u8>(), 0..24)
                    .prop_map(Datum::Bytes)
                    .boxed()
            }
            DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
                let nanos = if p <= 3 { 0..1u32 } else { 0..1_000_000u32 };
                (any::<i64>(), nanos)
                    .prop_map(|(millis, nanos_of_milli)| {
                        Datum::Timestamp(Timestamp {
                            millis,
                            nanos_of_milli,
                        })
                    })
                    .boxed()
            }
        };
        prop_oneof![1 => Just(Datum::Null), 4 => value].boxed()
    }

    fn row_strategy() -> impl Strategy<Value = (Vec<DataType>, Vec<Datum>)> {
        prop::collection::vec(type_strategy(), 0..70).prop_flat_map(|types| {
            let values: Vec<_> = types.iter().map(|t| value_strategy(*t)).collect();
            (Just(types), values)
        })
    }

    proptest! {
        #[test]
        fn serialize_round_trips((types, values) in row_strategy()) {
            let bytes = serialize(&values, &types).unwrap();
            prop_assert_eq!(arity(&bytes).unwrap(), values.len());
            prop_assert_eq!((bytes.len() - 4) % 8, 0);
            let back = deserialize(&bytes, &types).unwrap();
            prop_assert!(rows_equal(&back, &values), "{:?} != {:?}", back, values);
        }

        #[test]
        fn projections_and_images_agree_with_decode((types, values) in row_strategy()) {
            let body = encode(&values, &types).unwrap();
            let reversed: Vec<usize> = (0..types.len()).rev().collect();
            let mut projected = decode_projected(&body, &types, &reversed).unwrap();
            projected.reverse();
            prop_assert!(rows_equal(&projected, &values), "{:?} != {:?}", projected, values);
            for (i, (value, ty)) in values.iter().zip(&types).enumerate() {
                let alone = encode(std::slice::from_ref(value), &[*ty]).unwrap();
                let image = field_image(&body, types.len(), i, ty).unwrap();
                prop_assert_eq!(image, field_image(&alone, 1, 0, ty).unwrap());
                prop_assert_eq!(image.is_none(), value.is_null());
            }
        }

        #[test]
        fn deserialize_never_panics_on_garbage(
            bytes in prop::collection::vec(any::<u8>(), 0..200),
            types in prop::collection::vec(type_strategy(), 0..8),
        ) {
            let _ = deserialize(&bytes, &types);
            let _ = decode(&bytes, &types);
            let _ = arity(&bytes);
            for (i, ty) in types.iter().enumerate() {
                let _ = field_image(&bytes, types.len(), i, ty);
                let _ = decode_projected(&bytes, &types, &[i]);
            }
        }

        #[test]
        fn deserialize_never_panics_on_corrupted_rows(
            (types, values) in row_strategy(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = serialize(&values, &types).unwrap();
            for (at, byte) in flips {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            let _ = deserialize(&bytes, &types);
            let end = cut.index(bytes.len() + 1);
            let _ = deserialize(&bytes[..end], &types);
            let body = bytes.get(4..end.max(4)).unwrap_or_default();
            for (i, ty) in types.iter().enumerate() {
                let _ = field_image(body, types.len(), i, ty);
            }
        }
    }
}
