//! Manifest files (`manifest-*`, one [`ManifestEntry`] per data-file change) and manifest
//! lists (`manifest-list-*`, one [`ManifestFileMeta`] per manifest file): pure Avro
//! encode/decode, no I/O. See `docs/format.md` §4. The records are in `model`;
//! the Avro encoding and container files are the crate's Avro core (`crate::avro`), so
//! this module holds only Paimon's layouts: `encode`, `decode`, and `index` for index
//! manifests.
//!
//! **Writing** follows Java Paimon 1.4's layout exactly (a golden test compares the writer
//! schemas with files Java wrote): a plain top-level record (Java ≤ 0.8 wrapped it in a
//! `["null", record]` union) named `record` in namespace `org.apache.paimon.avro.generated`, Java's field
//! order, nested records named after their path (`record__FILE`,
//! `record__FILE__KEY_STATS`, ...), non-null nested records (Java's newest manifest reader
//! rejects a nullable `_FILE`) and `["null", T]` with default `null` for nullable fields.
//! Manifest lists carry exactly Java's fields; pypaimon's extensions `_TOTAL_BUCKETS` and
//! `_EXTRA_FILES` are read by pypaimon with `dict.get` (absent = `None`), so leaving them out
//! only disables pypaimon's manifest-level bucket pruning.
//!
//! **Reading** resolves fields by name from the writer's schema, so the Java style, the
//! pypaimon style (a plain top-level record), older layouts with fewer or nullable fields
//! and unknown extra fields (e.g. pypaimon's `_WRITE_COLS_SEQUENCES`) all decode. Codecs
//! `null`, `deflate`, `snappy` and `zstandard` are accepted.

mod decode;
mod encode;
mod index;
mod model;

pub use decode::{decode_manifest, decode_manifest_list};
pub use encode::{encode_manifest, encode_manifest_list};
pub(crate) use index::{DeletionVectorRange, decode_index_manifest};
pub(crate) use model::FileIdentifier;
pub use model::{
    DataFileMeta, FileKind, FileSource, ManifestCompression, ManifestEntry, ManifestFileMeta,
    SimpleStats,
};

use crate::error::Error;

/// An Avro error of a metadata file is a table-format error (`avro: ...` says which
/// layer found it); a block that does not compress keeps apache-avro's error as source.
impl From<crate::avro::Error> for Error {
    fn from(e: crate::avro::Error) -> Self {
        match e {
            crate::avro::Error::Invalid(message) => Error::format(format!("avro: {message}")),
            crate::avro::Error::Compress(source) => {
                Error::avro("compressing an avro block", *source)
            }
        }
    }
}

#[cfg(test)]
mod tests;
