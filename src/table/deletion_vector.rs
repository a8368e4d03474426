//! Deletion vectors: which rows of a data file a Java writer has marked deleted.
//!
//! Why: a table with `deletion-vectors.enabled` is compacted by Java's writer at every
//! commit through lookups, and a row that a newer version supersedes stays in its old file,
//! marked in a bitmap of row positions instead of being rewritten. Readers must drop those
//! rows, or they see superseded versions again (an aggregation would add its old sums
//! twice). The bitmaps live in `DELETION_VECTORS` index files (`index/`), one per bucket,
//! listed by the snapshot's index manifest with each data file's byte range.
//!
//! Layout of one vector at its offset (Java's `DeletionVector.read`):
//! - 32-bit (`BitmapDeletionVector`, the default): big-endian `i32` size, big-endian magic
//!   1581511376, a portable RoaringBitmap, big-endian CRC-32 of magic + bitmap; the range's
//!   length is the size (magic + bitmap).
//! - 64-bit (`Bitmap64DeletionVector`, `deletion-vectors.bitmap64`): big-endian `i32`
//!   size, little-endian magic 1681511377, a portable 64-bit Roaring treemap
//!   (little-endian), big-endian CRC-32; the range's length is the whole blob.
//!
//! Index files themselves start with a version byte (1); the ranges point past it.

use std::collections::HashMap;
use std::sync::Arc;

use object_store::path::Path;
use object_store::{GetOptions, GetRange};
use roaring::{RoaringBitmap, RoaringTreemap};

use super::Table;
use super::manifest::{DeletionVectorRange, decode_index_manifest};
use super::snapshot::Snapshot;
use crate::error::{Error, Result};

/// `_INDEX_TYPE` of deletion-vector index files.
pub(crate) const DELETION_VECTORS_INDEX: &str = "DELETION_VECTORS";

const MAGIC_32: i32 = 1_581_511_376;
const MAGIC_64: i32 = 1_681_511_377;

/// The deleted row positions of one data file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DeletionVector {
    Bitmap32(RoaringBitmap),
    Bitmap64(RoaringTreemap),
}

impl DeletionVector {
    /// Whether the row at `position` (0-based, in file order) is deleted.
    pub(crate) fn is_deleted(&self, position: u64) -> bool {
        match self {
            DeletionVector::Bitmap32(b) => u32::try_from(position).is_ok_and(|p| b.contains(p)),
            DeletionVector::Bitmap64(b) => b.contains(position),
        }
    }

    #[cfg(test)]
    /// How many rows are deleted.
    pub(crate) fn cardinality(&self) -> u64 {
        match self {
            DeletionVector::Bitmap32(b) => b.len(),
            DeletionVector::Bitmap64(b) => b.len(),
        }
    }
}

/// Decodes the vector that starts at `bytes[0]` (its size field), given the length its
/// range records; `bytes` may run past the vector's end.
pub(crate) fn decode_deletion_vector(bytes: &[u8], recorded_length: i64) -> Result<DeletionVector> {
    let be_i32 = |at: usize| -> Result<i32> {
        bytes
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(i32::from_be_bytes)
            .ok_or_else(|| Error::format("deletion vector is truncated"))
    };
    let size = be_i32(0)?;
    let magic = be_i32(4)?;
    let wide = if magic == MAGIC_32 {
        false
    } else if magic.swap_bytes() == MAGIC_64 {
        true
    } else {
        return Err(Error::format(format!(
            "deletion vector has magic number {magic}, neither {MAGIC_32} (32-bit) nor \
             {MAGIC_64} (64-bit)"
        )));
    };
    // 32-bit ranges record the size; 64-bit ones the whole blob (size field and CRC too).
    let expected_size = if wide {
        recorded_length.checked_sub(8)
    } else {
        Some(recorded_length)
    };
    if expected_size != Some(i64::from(size)) || size < 4 {
        return Err(Error::format(format!(
            "deletion vector size {size} does not match its index entry's length \
             {recorded_length}"
        )));
    }
    let size = size as usize;
    let body = bytes
        .get(4..4 + size)
        .ok_or_else(|| Error::format("deletion vector is truncated"))?;
    let crc = be_i32(4 + size)? as u32;
    let actual = crc32fast::hash(body);
    if crc != actual {
        return Err(Error::format(format!(
            "deletion vector checksum {actual:#010x} does not match the recorded {crc:#010x}"
        )));
    }
    let bitmap = &body[4..];
    let corrupt = |e: std::io::Error| Error::format(format!("deletion vector bitmap: {e}"));
    Ok(if wide {
        DeletionVector::Bitmap64(RoaringTreemap::deserialize_from(bitmap).map_err(corrupt)?)
    } else {
        DeletionVector::Bitmap32(RoaringBitmap::deserialize_from(bitmap).map_err(corrupt)?)
    })
}

/// The rows of a data file (in file order) the vector leaves.
pub(crate) fn without_deleted<T>(rows: Vec<T>, vector: &DeletionVector) -> Vec<T> {
    rows.into_iter()
        .enumerate()
        .filter(|(position, _)| !vector.is_deleted(*position as u64))
        .map(|(_, row)| row)
        .collect()
}

/// Where one data file's deletion vector lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeletionFile {
    /// The index file.
    pub(crate) path: Path,
    /// Its size, which bounds the read.
    pub(crate) file_size: u64,
    pub(crate) range: DeletionVectorRange,
}

impl DeletionFile {
    /// Names this vector (index file and offset): a data file whose vector changed
    /// between snapshots reads differently.
    pub(crate) fn identity(&self) -> String {
        format!("{}@{}", self.path, self.range.offset)
    }
}

/// The deletion vectors of one snapshot, by data file name (names are unique in a table).
#[derive(Debug, Clone, Default)]
pub(crate) struct DeletionFiles {
    by_data_file: Arc<HashMap<String, DeletionFile>>,
}

impl DeletionFiles {
    pub(crate) fn get(&self, data_file: &str) -> Option<&DeletionFile> {
        self.by_data_file.get(data_file)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_data_file.is_empty()
    }
}

impl Table {
    /// The deletion vectors `snapshot`'s index manifest lists (none without one).
    pub(crate) async fn deletion_files(&self, snapshot: &Snapshot) -> Result<DeletionFiles> {
        let Some(name) = &snapshot.index_manifest else {
            return Ok(DeletionFiles::default());
        };
        let location = self.manifest_path(name);
        let bytes = super::read_bytes(&*self.store, &location).await?;
        let files = decode_index_manifest(&bytes).map_err(|e| e.in_file(&location))?;
        let mut by_data_file = HashMap::new();
        for file in files {
            if file.index_type != DELETION_VECTORS_INDEX {
                continue;
            }
            if let Some(external) = &file.external_path {
                return Err(Error::format(format!(
                    "deletion vector file {} lives at the external path {external}, which \
                     lakejoin does not read",
                    file.file_name
                )));
            }
            let path = self.path_of(&format!("index/{}", file.file_name));
            for range in file.deletion_vectors {
                by_data_file.insert(
                    range.data_file.clone(),
                    DeletionFile {
                        path: path.clone(),
                        file_size: u64::try_from(file.file_size).unwrap_or(0),
                        range,
                    },
                );
            }
        }
        Ok(DeletionFiles {
            by_data_file: Arc::new(by_data_file),
        })
    }

    /// Reads one deletion vector: its range plus the size field and CRC around it.
    pub(crate) async fn read_deletion_vector(&self, file: &DeletionFile) -> Result<DeletionVector> {
        let range = vector_bytes(file.range.offset, file.range.length, file.file_size)?;
        let options = GetOptions {
            range: Some(GetRange::Bounded(range)),
            ..GetOptions::default()
        };
        let result = self
            .store
            .get_opts(&file.path, options)
            .await
            .map_err(|e| Error::store(format!("reading {}", file.path), e))?;
        let bytes = result
            .bytes()
            .await
            .map_err(|e| Error::store(format!("reading {}", file.path), e))?;
        decode_deletion_vector(&bytes, file.range.length).map_err(|e| {
            e.in_file(format!(
                "{} (vector of {} at {})",
                file.path, file.range.data_file, file.range.offset
            ))
        })
    }
}

/// The bytes of an index file of `file_size` bytes to read for the vector its index entry
/// places at `offset` with `length`: the range plus the size field and CRC (8 bytes), cut
/// at the file's end. Both numbers come from the index manifest, so they are checked.
fn vector_bytes(offset: i64, length: i64, file_size: u64) -> Result<std::ops::Range<u64>> {
    let start = u64::try_from(offset)
        .map_err(|_| Error::format(format!("deletion vector offset {offset}")))?;
    let end = u64::try_from(length)
        .ok()
        .and_then(|length| start.checked_add(length)?.checked_add(8))
        .ok_or_else(|| {
            Error::format(format!(
                "deletion vector length {length} at offset {offset} is out of range"
            ))
        })?;
    // start + 8 cannot overflow: end did not.
    Ok(start..end.min(file_size.max(start + 8)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `data` framed as Java's `serializeTo` writes it: big-endian length, data, CRC32.
    fn java_framed(data: &[u8]) -> Vec<u8> {
        let mut out = (data.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(data);
        out.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
        out
    }

    /// A vector as Java's `BitmapDeletionVector.serializeTo` lays it out.
    fn java_32(positions: &[u32]) -> (Vec<u8>, i64) {
        let bitmap: RoaringBitmap = positions.iter().copied().collect();
        let mut data = MAGIC_32.to_be_bytes().to_vec();
        bitmap.serialize_into(&mut data).unwrap();
        (java_framed(&data), data.len() as i64)
    }

    /// A vector as Java's `Bitmap64DeletionVector.serializeTo` lays it out.
    fn java_64(positions: &[u64]) -> (Vec<u8>, i64) {
        let bitmap: RoaringTreemap = positions.iter().copied().collect();
        let mut data = MAGIC_64.to_le_bytes().to_vec();
        bitmap.serialize_into(&mut data).unwrap();
        let out = java_framed(&data);
        let total = out.len() as i64;
        (out, total)
    }

    #[test]
    fn both_layouts_decode_to_their_positions() {
        let (bytes, length) = java_32(&[0, 3, 70_000]);
        let dv = decode_deletion_vector(&bytes, length).unwrap();
        assert!(dv.is_deleted(0) && dv.is_deleted(3) && dv.is_deleted(70_000));
        assert!(!dv.is_deleted(1) && !dv.is_deleted(u64::MAX));
        assert_eq!(dv.cardinality(), 3);

        let (mut bytes, length) = java_64(&[1, 5_000_000_000]);
        // Whatever follows the vector in the index file is not read.
        bytes.extend_from_slice(&[9; 8]);
        let dv = decode_deletion_vector(&bytes, length).unwrap();
        assert!(dv.is_deleted(1) && dv.is_deleted(5_000_000_000) && !dv.is_deleted(0));
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let (bytes, length) = java_32(&[2, 4, 8]);
        assert!(decode_deletion_vector(&bytes, length + 1).is_err());
        for cut in 0..bytes.len() {
            assert!(
                decode_deletion_vector(&bytes[..cut], length).is_err(),
                "cut {cut}"
            );
        }
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 0x10;
            assert!(
                decode_deletion_vector(&flipped, length).is_err(),
                "byte {i}"
            );
        }
    }

    /// The files Java Paimon 1.4.2 wrote (tests/fixtures/java/deletion_vectors/README.md):
    /// rows 1 and 2 of one data file deleted, in either layout.
    #[test]
    fn java_written_vectors_decode() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/java/deletion_vectors");
        for layout in ["bitmap32", "bitmap64"] {
            let dir = root.join(layout);
            let manifest = std::fs::read(dir.join("index-manifest")).unwrap();
            let index = std::fs::read(dir.join("index-file")).unwrap();
            let files = decode_index_manifest(&manifest).unwrap();
            assert_eq!(files.len(), 1, "{layout}: {files:?}");
            let file = &files[0];
            assert_eq!(file.index_type, DELETION_VECTORS_INDEX);
            assert_eq!((file.bucket, file.file_size), (0, index.len() as i64));
            assert_eq!(file.deletion_vectors.len(), 1, "{layout}: {file:?}");
            let range = &file.deletion_vectors[0];
            assert!(range.data_file.starts_with("data-"), "{range:?}");
            assert_eq!((range.offset, range.cardinality), (1, Some(2)), "{layout}");
            let vector = decode_deletion_vector(&index[1..], range.length).unwrap();
            assert!(
                matches!(
                    (&vector, layout),
                    (DeletionVector::Bitmap32(_), "bitmap32")
                        | (DeletionVector::Bitmap64(_), "bitmap64")
                ),
                "{layout}: {vector:?}"
            );
            let deleted: Vec<u64> = (0..4).filter(|p| vector.is_deleted(*p)).collect();
            assert_eq!(deleted, [1, 2], "{layout}");
        }
    }

    #[test]
    fn index_entry_lengths_and_offsets_at_the_edge_of_i64_are_errors() {
        // A 64-bit vector's recorded length includes the size field and CRC (8 bytes).
        let mut wide = 12i32.to_be_bytes().to_vec();
        wide.extend_from_slice(&MAGIC_64.swap_bytes().to_be_bytes());
        wide.extend_from_slice(&[0u8; 16]);
        for length in [i64::MIN, i64::MIN + 7, -1, 0, i64::MAX] {
            assert!(decode_deletion_vector(&wide, length).is_err(), "{length}");
        }
        let err = vector_bytes(i64::MAX, i64::MAX, 100).unwrap_err();
        assert!(err.to_string().contains("deletion vector"), "{err}");
        let top = i64::MAX as u64;
        assert_eq!(vector_bytes(i64::MAX, 0, u64::MAX).unwrap(), top..top + 8);
        assert!(vector_bytes(-1, 10, 100).is_err());
        assert!(vector_bytes(1, -1, 100).is_err());
        assert_eq!(vector_bytes(1, 20, 100).unwrap(), 1..29);
        // A range past the file's end is cut at the end (the decoder reports it truncated).
        assert_eq!(vector_bytes(90, 20, 100).unwrap(), 90..100);
    }

    proptest::proptest! {
        #[test]
        fn any_range_is_checked_without_overflow(offset in proptest::num::i64::ANY, length in proptest::num::i64::ANY, size in proptest::num::u64::ANY) {
            if let Ok(range) = vector_bytes(offset, length, size) {
                proptest::prop_assert!(range.start <= range.end);
                proptest::prop_assert_eq!(range.start, offset as u64);
            }
        }

        #[test]
        fn any_recorded_length_of_a_wide_vector_is_checked(length in proptest::num::i64::ANY, size in proptest::num::i32::ANY) {
            let mut wide = size.to_be_bytes().to_vec();
            wide.extend_from_slice(&MAGIC_64.swap_bytes().to_be_bytes());
            wide.extend_from_slice(&[0u8; 16]);
            let _ = decode_deletion_vector(&wide, length);
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(0u8.., 0..64), length in -4i64..80) {
            let _ = decode_deletion_vector(&bytes, length);
        }

        #[test]
        fn every_position_set_round_trips(positions in proptest::collection::btree_set(0u32..1_000_000, 0..200)) {
            let positions: Vec<u32> = positions.into_iter().collect();
            let (bytes, length) = java_32(&positions);
            let dv = decode_deletion_vector(&bytes, length).unwrap();
            proptest::prop_assert_eq!(dv.cardinality(), positions.len() as u64);
            for p in &positions {
                proptest::prop_assert!(dv.is_deleted(u64::from(*p)));
            }
        }
    }
}
