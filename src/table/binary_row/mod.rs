//! Paimon's BinaryRow memory image: partitions, min/max keys and stats rows in manifests,
//! and the bytes hashed for bucket assignment (docs/format.md §5).
//!
//! Layout of a row with `n` fields (all numbers little-endian):
//! a null-bit area of `null_bits_width` bytes (byte 0 is the RowKind, the null bit of
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

#[cfg(test)]
/// Serialized row of arity 0: a zero arity prefix and an 8-byte null-bit area.
pub(crate) const EMPTY_SERIALIZED_ROW: [u8; 12] = [0; 12];

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
pub(crate) fn null_bits_width(arity: usize) -> usize {
    (arity.saturating_add(63 + HEADER_BITS) / 64) * 8
}

/// BinaryRow bytes (no arity prefix) of `values`, typed by `types` (same length).
pub(crate) fn encode(values: &[Datum], types: &[DataType]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_into(&mut out, values, types)?;
    Ok(out)
}

/// Appends the BinaryRow bytes (no arity prefix) of `values` to `out`, so hot paths can
/// reuse one buffer. Offsets in the image count from where the row starts in `out`. On
/// error `out` is left as it was.
pub(crate) fn encode_into(out: &mut Vec<u8>, values: &[Datum], types: &[DataType]) -> Result<()> {
    let base = out.len();
    let result = write_row(out, base, values.iter(), types);
    if result.is_err() {
        out.truncate(base);
    }
    result
}

/// [`encode_into`] of some columns of `row`: `columns[i]` of it, typed `types[i]`. A
/// column out of `row`'s range is `Error::Data`. Lets a cache keep only the columns it
/// returns without cloning the rest of the row.
pub(crate) fn encode_columns_into(
    out: &mut Vec<u8>,
    row: &[Datum],
    columns: &[usize],
    types: &[DataType],
) -> Result<()> {
    if let Some(&c) = columns.iter().find(|&&c| c >= row.len()) {
        return Err(Error::Data(format!(
            "column {c} is out of range of a row of {} values",
            row.len()
        )));
    }
    let base = out.len();
    // In range: checked above.
    let values = columns.iter().map(|&c| &row[c]);
    let result = write_row(out, base, values, types);
    if result.is_err() {
        out.truncate(base);
    }
    result
}

/// [`serialize_into`] of some columns of `row` (see [`encode_columns_into`]): a writer
/// serializes each row's partition without copying its values.
pub(crate) fn serialize_columns_into(
    out: &mut Vec<u8>,
    row: &[Datum],
    columns: &[usize],
    types: &[DataType],
) -> Result<()> {
    with_arity(out, columns.len(), |out| {
        encode_columns_into(out, row, columns, types)
    })
}

/// The "serialized row" stored in manifests: 4-byte BIG-endian arity + BinaryRow bytes.
pub fn serialize(values: &[Datum], types: &[DataType]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    serialize_into(&mut out, values, types)?;
    Ok(out)
}

/// Appends the serialized row (arity prefix + BinaryRow bytes) to `out`. On error `out` is
/// left as it was.
pub(crate) fn serialize_into(
    out: &mut Vec<u8>,
    values: &[Datum],
    types: &[DataType],
) -> Result<()> {
    with_arity(out, values.len(), |out| encode_into(out, values, types))
}

/// The arity of `fields` fields (4 bytes, big-endian), then what `encode` appends; on
/// error `out` is left as it was.
fn with_arity(
    out: &mut Vec<u8>,
    fields: usize,
    encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    let start = out.len();
    let arity = i32::try_from(fields)
        .map_err(|_| Error::Data(format!("row of {fields} fields is too wide")))?;
    out.extend_from_slice(&arity.to_be_bytes());
    let result = encode(out);
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
pub(crate) struct FieldImage<'a> {
    /// The slot of fixed-size values, the nano-of-millisecond of TIMESTAMP(p > 3), else 0.
    pub(crate) word: u64,
    /// The bytes of strings, byte arrays and DECIMAL(p > 18), the epoch-millisecond bytes
    /// of TIMESTAMP(p > 3); empty for fixed-size values.
    pub(crate) bytes: &'a [u8],
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
pub(crate) fn field_image<'a>(
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

/// A field read in place for writing it out: a string's bytes borrowed from the row, any
/// other value decoded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldValue<'a> {
    Null,
    /// A string's bytes, not copied and not yet checked to be UTF-8: whoever writes them
    /// out checks that, while it looks for characters to escape (a separate check was a
    /// second pass over every joined string of every record).
    Text(&'a [u8]),
    Datum(Datum),
}

/// Field `pos` (of type `ty`) of BinaryRow bytes with `arity` fields, reading a string in
/// place. Never panics: bad positions and bytes are `Error::Format`.
pub(crate) fn field_value<'a>(
    body: &'a [u8],
    arity: usize,
    pos: usize,
    ty: &DataType,
) -> Result<FieldValue<'a>> {
    if pos >= arity {
        return Err(Error::format(format!(
            "field {pos} is out of range for a row of {arity} fields"
        )));
    }
    if is_null_at(body, pos) {
        return Ok(FieldValue::Null);
    }
    let slot_at = null_bits_width(arity) + 8 * pos;
    match ty {
        DataType::Char(_) | DataType::Varchar(_) => {
            let slot = u64::from_le_bytes(read_array::<8>(body, slot_at)?);
            var_len_bytes(body, slot_at, slot, pos).map(FieldValue::Text)
        }
        _ => decode_field(body, slot_at, ty, pos).map(FieldValue::Datum),
    }
}

/// Appends the BinaryRow of the fields at `positions` (in that order, repeats allowed) of
/// `body`, whose fields have `types` (all of them, in row order): the bytes that encoding
/// those fields' decoded values writes, copied slot by slot and chunk by chunk instead of
/// decoded and encoded again. Values are not checked here (decoding them is). On error
/// `out` is left as it was.
pub(crate) fn project_into(
    out: &mut Vec<u8>,
    body: &[u8],
    types: &[DataType],
    positions: &[usize],
) -> Result<()> {
    let base = out.len();
    let result = write_projection(out, base, body, types, positions);
    if result.is_err() {
        out.truncate(base);
    }
    result
}

fn write_projection(
    out: &mut Vec<u8>,
    base: usize,
    body: &[u8],
    types: &[DataType],
    positions: &[usize],
) -> Result<()> {
    let arity = types.len();
    let width = null_bits_width(positions.len());
    out.resize(base + width + 8 * positions.len(), 0);
    for (to, &from) in positions.iter().enumerate() {
        let ty = types.get(from).ok_or_else(|| {
            Error::format(format!(
                "field {from} is out of range for a row of {arity} fields"
            ))
        })?;
        let slot_at = base + width + 8 * to;
        let Some(image) = field_image(body, arity, from, ty)? else {
            let bit = to + HEADER_BITS;
            if let Some(b) = out.get_mut(base + bit / 8) {
                *b |= 1 << (bit % 8);
            }
            continue;
        };
        let slot = match ty {
            DataType::Char(_)
            | DataType::Varchar(_)
            | DataType::Binary(_)
            | DataType::Varbinary(_) => {
                write_var_len(out, base, slot_at, image.bytes)?;
                continue;
            }
            DataType::Decimal { precision, .. } if *precision > MAX_COMPACT_DECIMAL_PRECISION => {
                append_var(out, base, image.bytes, BIG_DECIMAL_RESERVED)? | image.bytes.len() as u64
            }
            DataType::Timestamp(p) | DataType::TimestampLtz(p)
                if *p > MAX_COMPACT_TIMESTAMP_PRECISION =>
            {
                append_var(out, base, image.bytes, 8)? | image.word
            }
            _ => image.word,
        };
        put_slot(out, slot_at, slot.to_le_bytes());
    }
    Ok(())
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
            Datum::String(text.into())
        }
        DataType::Binary(_) | DataType::Varbinary(_) => {
            Datum::Bytes(var_len_bytes(body, slot_at, slot, field)?.to_vec())
        }
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
            if *p <= MAX_COMPACT_TIMESTAMP_PRECISION {
                Datum::Timestamp(Timestamp::from_millis(slot as i64))
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

/// An unscaled DECIMAL value with more digits than its precision: a bad value when
/// writing (`Error::Data`), a corrupt image when reading (`Error::Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unscaled value {unscaled} has more than {precision} digits")]
pub struct DecimalOverflow {
    pub unscaled: i128,
    pub precision: u8,
}

/// Rejects unscaled values with more digits than `precision`.
pub(crate) fn check_decimal_precision(
    unscaled: i128,
    precision: u8,
) -> std::result::Result<(), DecimalOverflow> {
    let limit = POW10.get(precision as usize).copied().unwrap_or(i128::MAX);
    if unscaled.unsigned_abs() >= limit.unsigned_abs() {
        return Err(DecimalOverflow {
            unscaled,
            precision,
        });
    }
    Ok(())
}

fn write_row<'a>(
    out: &mut Vec<u8>,
    base: usize,
    values: impl ExactSizeIterator<Item = &'a Datum>,
    types: &[DataType],
) -> Result<()> {
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
    for (i, (value, ty)) in values.zip(types).enumerate() {
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
            // variable-part bytes for non-compact DECIMAL/TIMESTAMP; see docs/format.md §5).
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
mod tests;
