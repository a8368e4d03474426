//! The records of Paimon's manifest files and lists as lakejoin holds them (what one
//! data file, one manifest entry, one manifest file are), apart from how they are laid
//! out in Avro (`encode`, `decode`), which follows Java Paimon's schemas.

use crate::avro::BlockCodec;
use crate::error::{Error, Result};

/// The serialized empty row: arity 0 (4 bytes, big-endian) and an 8-byte header.
pub(super) const EMPTY_ROW: [u8; 12] = [0; 12];

/// Column-wise min/max/null-count stats. Rows are "serialized rows" (4-byte big-endian
/// arity + BinaryRow bytes), kept as raw bytes here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SimpleStats {
    /// Serialized row of per-column minimums.
    pub min_values: Vec<u8>,
    /// Serialized row of per-column maximums.
    pub max_values: Vec<u8>,
    /// Per-column null counts; `None` when the writer stored no array.
    pub null_counts: Option<Vec<Option<i64>>>,
}

impl SimpleStats {
    /// Stats over zero columns: empty rows (`00000000 0000000000000000`) and no null counts.
    pub fn empty() -> Self {
        SimpleStats {
            min_values: EMPTY_ROW.to_vec(),
            max_values: EMPTY_ROW.to_vec(),
            null_counts: Some(Vec::new()),
        }
    }
}

/// Whether a manifest entry adds or deletes a data file (`_KIND` 0 / 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// The file becomes live.
    Add,
    /// A previously added file is removed (its identity must match the ADD).
    Delete,
}

impl FileKind {
    pub(super) fn code(self) -> i64 {
        match self {
            FileKind::Add => 0,
            FileKind::Delete => 1,
        }
    }
}

/// How a data file came to be (`_FILE_SOURCE` 0 / 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileSource {
    /// New data written by a writer.
    Append,
    /// Output of a compaction.
    Compact,
}

impl FileSource {
    pub(super) fn code(self) -> i64 {
        match self {
            FileSource::Append => 0,
            FileSource::Compact => 1,
        }
    }
}

/// Metadata of one data file (the `_FILE` record of a manifest entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFileMeta {
    /// File name, relative to the bucket directory.
    pub file_name: String,
    /// Exact size in bytes.
    pub file_size: i64,
    /// All rows, retractions included.
    pub row_count: i64,
    /// Serialized row of the trimmed primary key of the first row.
    pub min_key: Vec<u8>,
    /// Serialized row of the trimmed primary key of the last row.
    pub max_key: Vec<u8>,
    /// Stats of the trimmed primary-key columns (used for pruning, must be correct).
    pub key_stats: SimpleStats,
    /// Stats of the value columns named by `value_stats_cols`.
    pub value_stats: SimpleStats,
    /// Smallest `_SEQUENCE_NUMBER` in the file.
    pub min_sequence_number: i64,
    /// Largest `_SEQUENCE_NUMBER` in the file.
    pub max_sequence_number: i64,
    /// Schema id the file was written with.
    pub schema_id: i64,
    /// LSM level (0 for freshly flushed files).
    pub level: i32,
    /// Sidecar files (file indexes); usually empty.
    pub extra_files: Vec<String>,
    /// Creation time in epoch milliseconds (informational).
    pub creation_time: Option<i64>,
    /// Number of -U/-D rows.
    pub delete_row_count: Option<i64>,
    /// Small file index stored inline.
    pub embedded_file_index: Option<Vec<u8>>,
    /// Append or compaction output.
    pub file_source: Option<FileSource>,
    /// Columns covered by `value_stats`: `None` = all, empty = none.
    pub value_stats_cols: Option<Vec<String>>,
    /// Full path when the file lives outside the table directory.
    pub external_path: Option<String>,
    /// First row id (row tracking); `None` for primary-key tables.
    pub first_row_id: Option<i64>,
    /// Columns of a partial-column file (data evolution); `None` normally.
    pub write_cols: Option<Vec<String>>,
}

/// One record of a manifest file: a data file added to or deleted from a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// Add or delete.
    pub kind: FileKind,
    /// Serialized partition row (the empty row for unpartitioned tables).
    pub partition: Vec<u8>,
    /// Bucket id.
    pub bucket: i32,
    /// Bucket count when the file was written (-1 for dynamic-bucket tables).
    pub total_buckets: i32,
    /// The data file.
    pub file: DataFileMeta,
}

/// Identity of a data file in a table; a DELETE entry cancels the ADD with the same one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct FileIdentifier {
    /// Serialized partition row.
    pub(crate) partition: Vec<u8>,
    /// Bucket id.
    pub(crate) bucket: i32,
    /// LSM level.
    pub(crate) level: i32,
    /// Data file name.
    pub(crate) file_name: String,
    /// Sidecar files.
    pub(crate) extra_files: Vec<String>,
    /// Inline file index.
    pub(crate) embedded_file_index: Option<Vec<u8>>,
    /// External location.
    pub(crate) external_path: Option<String>,
}

impl ManifestEntry {
    /// Identity used to cancel an ADD by a DELETE: (partition, bucket, level, file name,
    /// extra files, embedded index, external path), as Java and pypaimon compare them.
    pub(crate) fn identifier(&self) -> FileIdentifier {
        FileIdentifier {
            partition: self.partition.clone(),
            bucket: self.bucket,
            level: self.file.level,
            file_name: self.file.file_name.clone(),
            extra_files: self.file.extra_files.clone(),
            embedded_file_index: self.file.embedded_file_index.clone(),
            external_path: self.file.external_path.clone(),
        }
    }
}

/// One record of a manifest list: a manifest file and summary stats of its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFileMeta {
    /// Manifest file name in `manifest/`.
    pub file_name: String,
    /// Exact size in bytes.
    pub file_size: i64,
    /// Number of ADD entries.
    pub num_added_files: i64,
    /// Number of DELETE entries.
    pub num_deleted_files: i64,
    /// Min/max/null counts of the partition columns over the entries.
    pub partition_stats: SimpleStats,
    /// Largest schema id among the entries.
    pub schema_id: i64,
    /// Smallest bucket among the entries (pruning hint).
    pub min_bucket: Option<i32>,
    /// Largest bucket among the entries.
    pub max_bucket: Option<i32>,
    /// Smallest level among the entries.
    pub min_level: Option<i32>,
    /// Largest level among the entries.
    pub max_level: Option<i32>,
    /// Smallest row id (row tracking).
    pub min_row_id: Option<i64>,
    /// Largest row id (row tracking).
    pub max_row_id: Option<i64>,
}

/// Block compression of manifest files and lists (table option `manifest.compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ManifestCompression {
    /// Avro codec `zstandard`; Paimon's default.
    #[default]
    Zstd,
    /// Avro codec `deflate`.
    Deflate,
    /// Avro codec `snappy`.
    Snappy,
    /// Avro codec `null`.
    None,
}

impl ManifestCompression {
    /// Parses the option text (case-insensitive): `zstd`/`zstandard`, `deflate`, `snappy`,
    /// `none`/`null`/`uncompressed`. Java and pypaimon also know `bzip2` and `xz`, which
    /// lakejoin does not write.
    pub(crate) fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "zstd" | "zstandard" => Ok(ManifestCompression::Zstd),
            "deflate" => Ok(ManifestCompression::Deflate),
            "snappy" => Ok(ManifestCompression::Snappy),
            "none" | "null" | "uncompressed" => Ok(ManifestCompression::None),
            _ => Err(Error::Config(format!(
                "manifest.compression {text:?} is not supported \
                 (use zstd, deflate, snappy or none)"
            ))),
        }
    }

    pub(super) fn codec(self) -> BlockCodec {
        match self {
            ManifestCompression::Zstd => BlockCodec::Zstandard,
            ManifestCompression::Deflate => BlockCodec::Deflate,
            ManifestCompression::Snappy => BlockCodec::Snappy,
            ManifestCompression::None => BlockCodec::Null,
        }
    }
}
