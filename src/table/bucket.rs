//! Fixed-bucket assignment (docs/format.md §6.1): the BinaryRow image of the bucket-key values
//! is hashed with Paimon's word-wise MurmurHash3 and reduced modulo the bucket count.

use std::cell::RefCell;

use super::binary_row;
use super::datum::Datum;
use super::types::DataType;
use crate::error::Result;

const SEED: u32 = 42;
const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

/// Paimon's MurmurHash3_x86_32 over 4-byte LE words, seed 42 ("hashBytesByWords").
///
/// `bytes.len()` must be a multiple of 4 (a BinaryRow always is); trailing bytes of a
/// shorter last word are ignored, as pypaimon does, but still count in the length mix.
pub(crate) fn hash_bytes_by_words(bytes: &[u8]) -> i32 {
    let mut h = SEED;
    for word in bytes.chunks_exact(4) {
        // chunks_exact yields 4-byte words, so the conversion cannot fail.
        let mut k = u32::from_le_bytes(word.try_into().unwrap_or_default());
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    // Java mixes in the int length; truncating to 32 bits matches it for any real row.
    h ^= bytes.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h as i32
}

/// Java `Math.abs(hash % n)`: `%` truncates toward zero, `abs` comes after it.
///
/// `num_buckets` must be >= 1; 0 (where Java would throw) yields 0 instead of panicking.
pub(crate) fn bucket_for_hash(hash: i32, num_buckets: i32) -> i32 {
    // checked_rem is None for n == 0 and for i32::MIN % -1 (whose Java result is 0).
    hash.checked_rem(num_buckets).map_or(0, i32::abs)
}

thread_local! {
    /// Scratch buffer so hashing a record's bucket key does not allocate.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Paimon hash of a row's bucket-key values: [`hash_bytes_by_words`] over their BinaryRow
/// bytes (no arity prefix). `scratch` is cleared and reused for the image.
pub(crate) fn bucket_key_hash_with(
    scratch: &mut Vec<u8>,
    values: &[Datum],
    types: &[DataType],
) -> Result<i32> {
    scratch.clear();
    binary_row::encode_into(scratch, values, types)?;
    Ok(hash_bytes_by_words(scratch))
}

/// Paimon hash of a row's bucket-key values (see `bucket_key_hash_with`), using a
/// per-thread scratch buffer.
pub fn bucket_key_hash(values: &[Datum], types: &[DataType]) -> Result<i32> {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => bucket_key_hash_with(&mut scratch, values, types),
        // Only reachable through re-entrancy, which cannot happen; stay correct anyway.
        Err(_) => bucket_key_hash_with(&mut Vec::new(), values, types),
    })
}

/// Bucket of a row's bucket-key values: BinaryRow bytes (no arity) hashed, then
/// `bucket_for_hash`.
pub fn bucket_of(values: &[Datum], types: &[DataType], num_buckets: i32) -> Result<i32> {
    Ok(bucket_for_hash(
        bucket_key_hash(values, types)?,
        num_buckets,
    ))
}

/// [`bucket_of`] of some columns of `row`, their image built in `scratch`: a writer
/// buckets each row without copying its key values.
pub(crate) fn bucket_of_columns(
    scratch: &mut Vec<u8>,
    row: &[Datum],
    columns: &[usize],
    types: &[DataType],
    num_buckets: i32,
) -> Result<i32> {
    scratch.clear();
    binary_row::encode_columns_into(scratch, row, columns, types)?;
    Ok(bucket_for_hash(hash_bytes_by_words(scratch), num_buckets))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testkit::unhex;
    use crate::table::types::MAX_LENGTH;

    #[test]
    fn format_doc_table_6_1() {
        let int = [DataType::Int];
        for (id, hash, bucket) in [
            (1, 1_465_514_398, 0),
            (2, 1_340_390_384, 0),
            (3, -771_300_025, 1),
        ] {
            let image = binary_row::encode(&[Datum::Int(id)], &int).unwrap();
            assert_eq!(
                image,
                unhex(&format!("0000000000000000 0{id}00000000000000"))
            );
            assert_eq!(hash_bytes_by_words(&image), hash, "id={id}");
            assert_eq!(bucket_key_hash(&[Datum::Int(id)], &int).unwrap(), hash);
            assert_eq!(bucket_of(&[Datum::Int(id)], &int, 2).unwrap(), bucket);
        }

        let types = [DataType::Int, DataType::Varchar(MAX_LENGTH)];
        let values = [
            Datum::Int(3),
            Datum::String("a-much-longer-key-string".into()),
        ];
        let image = binary_row::encode(&values, &types).unwrap();
        assert_eq!(image.len(), 48);
        assert_eq!(&image[16..24], &unhex("1800000018000000")[..]);
        assert_eq!(hash_bytes_by_words(&image), -789_906_320);
        assert_eq!(bucket_of(&values, &types, 4).unwrap(), 0);

        let types = [DataType::BigInt, DataType::Varchar(MAX_LENGTH)];
        let values = [Datum::BigInt(7), Datum::String("abc".into())];
        let image = binary_row::encode(&values, &types).unwrap();
        assert_eq!(
            image,
            unhex("0000000000000000 0700000000000000 6162630000000083")
        );
        assert_eq!(hash_bytes_by_words(&image), 1_593_333_451);
        assert_eq!(bucket_of(&values, &types, 4).unwrap(), 3);
    }

    #[test]
    fn bucket_follows_java_remainder_then_abs() {
        assert_eq!(bucket_for_hash(-771_300_025, 2), 1);
        assert_eq!(bucket_for_hash(-7, 4), 3);
        assert_eq!(bucket_for_hash(7, 4), 3);
        assert_eq!(bucket_for_hash(i32::MIN, 3), 2);
        assert_eq!(bucket_for_hash(i32::MIN, 1), 0);
        assert_eq!(bucket_for_hash(i32::MIN, -1), 0);
        assert_eq!(bucket_for_hash(5, 0), 0);
    }

    #[test]
    fn mismatched_key_is_an_error() {
        assert!(bucket_of(&[Datum::Int(1)], &[DataType::BigInt], 4).is_err());
        // The scratch buffer is still usable afterwards.
        assert_eq!(bucket_of(&[Datum::Int(1)], &[DataType::Int], 2).unwrap(), 0);
    }

    #[test]
    fn explicit_scratch_matches_thread_local() {
        let mut scratch = vec![9; 100];
        let types = [DataType::Varchar(MAX_LENGTH)];
        let values = [Datum::String("some longer key".into())];
        assert_eq!(
            bucket_key_hash_with(&mut scratch, &values, &types).unwrap(),
            bucket_key_hash(&values, &types).unwrap()
        );
    }
}
