//! Index manifests (`manifest/index-manifest-*`, docs/format.md §4.3): the full list of a
//! table's index files (HASH indexes of dynamic buckets, deletion vectors). lakejoin
//! carries a snapshot's index manifest forward, reads the deletion vectors it lists when
//! it reads the data files they apply to, and checks that the files it names exist
//! (`lakejoin table check`).

use super::decode::{Values, bytes, int, long, mismatch, read_container, string, top_record};
use crate::avro::{Node, Record, Val};
use crate::error::{Error, Result};

/// One index file an index manifest lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexFileMeta {
    /// `_PARTITION`: the serialized partition of the bucket the file indexes.
    pub(crate) partition: Vec<u8>,
    /// `_BUCKET`.
    pub(crate) bucket: i32,
    /// `_INDEX_TYPE`: `HASH`, `DELETION_VECTORS`, …
    pub(crate) index_type: String,
    /// `_FILE_NAME`, in the table's `index/` directory unless `external_path` is set.
    pub(crate) file_name: String,
    /// `_FILE_SIZE`, in bytes.
    pub(crate) file_size: i64,
    /// `_DELETIONS_VECTORS_RANGES`: where each data file's deletion vector lies in a
    /// `DELETION_VECTORS` file (empty for other index types).
    pub(crate) deletion_vectors: Vec<DeletionVectorRange>,
    /// `_EXTERNAL_PATH`, when the file lives outside the table directory.
    pub(crate) external_path: Option<String>,
}

/// One data file's deletion vector inside an index file (Java's `DeletionVectorMeta`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeletionVectorRange {
    /// `f0`: the data file's name.
    pub(crate) data_file: String,
    /// `f1`: byte offset of the vector in the index file.
    pub(crate) offset: i64,
    /// `f2`: its length as Java records it (the bitmap's for 32-bit vectors, the whole
    /// blob's for 64-bit ones; see `table::deletion_vector`).
    pub(crate) length: i64,
    /// `_CARDINALITY`: deleted rows, when the writer recorded it.
    pub(crate) cardinality: Option<i64>,
}

/// Decodes an index manifest written by Java Paimon or pypaimon. Only ADD entries are
/// returned: Java writes an index manifest as the full state (`IndexManifestFileHandler`
/// combines the previous one with the commit's changes), so it holds ADD entries only,
/// and any DELETE entry cancels nothing here.
pub(crate) fn decode_index_manifest(data: &[u8]) -> Result<Vec<IndexFileMeta>> {
    let file = read_container(data)?;
    let record = top_record(&file.schema, "index manifest")?;
    let kind = record.field_index("_KIND");
    let partition = record.field_index("_PARTITION");
    let bucket = record.field_index("_BUCKET");
    let index_type = record.field_index("_INDEX_TYPE");
    let file_name = record.field_index("_FILE_NAME");
    let file_size = record.field_index("_FILE_SIZE");
    let ranges = record.field_index("_DELETIONS_VECTORS_RANGES");
    let range_layout = ranges.and_then(|i| match &record.fields.get(i)?.node {
        Node::Array { items, .. } => items.as_record().map(RangeLayout::new),
        Node::Union(branches) => branches.iter().find_map(|b| match b {
            Node::Array { items, .. } => items.as_record().map(RangeLayout::new),
            _ => None,
        }),
        _ => None,
    });
    let external_path = record.field_index("_EXTERNAL_PATH");
    let entries = file.records(|v: Val<'_>| {
        let mut m = Values::of(v, "index manifest entry")?;
        let kind = m.opt(kind, "_KIND", long)?.unwrap_or(0);
        if !matches!(kind, 0 | 1) {
            return Err(Error::format(format!(
                "unknown index manifest _KIND {kind}"
            )));
        }
        let deletion_vectors = match m.take(ranges) {
            Val::Null => Vec::new(),
            Val::Array(items) => {
                let layout = range_layout.as_ref().ok_or_else(|| {
                    Error::format("_DELETIONS_VECTORS_RANGES is not an array of records")
                })?;
                items
                    .into_iter()
                    .map(|item| layout.read(item))
                    .collect::<Result<_>>()?
            }
            other => return Err(mismatch("_DELETIONS_VECTORS_RANGES", &other)),
        };
        let meta = IndexFileMeta {
            partition: m.opt(partition, "_PARTITION", bytes)?.unwrap_or_default(),
            bucket: m.opt(bucket, "_BUCKET", int)?.unwrap_or(0),
            index_type: m.req(index_type, "_INDEX_TYPE", string)?,
            file_name: m.req(file_name, "_FILE_NAME", string)?,
            file_size: m.req(file_size, "_FILE_SIZE", long)?,
            deletion_vectors,
            external_path: m.opt(external_path, "_EXTERNAL_PATH", string)?,
        };
        Ok((kind == 0).then_some(meta))
    })?;
    Ok(entries.into_iter().flatten().collect())
}

/// Positions of the fields of a `DeletionVectorMeta` record in the writer's schema.
struct RangeLayout {
    data_file: Option<usize>,
    offset: Option<usize>,
    length: Option<usize>,
    cardinality: Option<usize>,
}

impl RangeLayout {
    fn new(record: &Record) -> Self {
        RangeLayout {
            data_file: record.field_index("f0"),
            offset: record.field_index("f1"),
            length: record.field_index("f2"),
            cardinality: record.field_index("_CARDINALITY"),
        }
    }

    fn read(&self, v: Val<'_>) -> Result<DeletionVectorRange> {
        const PATH: &str = "_DELETIONS_VECTORS_RANGES";
        let mut m = Values::of(v, PATH)?;
        Ok(DeletionVectorRange {
            data_file: m.req(self.data_file, PATH, string)?,
            offset: m.req(self.offset, PATH, long)?,
            length: m.req(self.length, PATH, long)?,
            cardinality: m.opt(self.cardinality, PATH, long)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avro::{BlockCodec, ContainerWriter, put_bytes, put_long};

    const SCHEMA: &str = r#"{"type": "record", "name": "IndexManifestEntry", "fields": [
        {"name": "_VERSION", "type": "int"}, {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"}, {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"}, {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"}, {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": null}]}"#;

    fn entry(buf: &mut Vec<u8>, kind: i64, name: &str) {
        put_long(buf, 1);
        put_long(buf, kind);
        put_bytes(buf, &[0, 0, 0, 0]);
        put_long(buf, 0);
        put_bytes(buf, b"HASH");
        put_bytes(buf, name.as_bytes());
        put_long(buf, 120);
        put_long(buf, 30);
        put_long(buf, 0);
    }

    #[test]
    fn index_manifest_lists_added_files() {
        let mut writer = ContainerWriter::new(SCHEMA, BlockCodec::Null);
        writer.append(|b| entry(b, 0, "index-a-0")).unwrap();
        writer.append(|b| entry(b, 1, "index-old-0")).unwrap();
        let bytes = writer.finish().unwrap();
        let files = decode_index_manifest(&bytes).unwrap();
        assert_eq!(
            files,
            vec![IndexFileMeta {
                partition: vec![0, 0, 0, 0],
                bucket: 0,
                index_type: "HASH".into(),
                file_name: "index-a-0".into(),
                file_size: 120,
                deletion_vectors: Vec::new(),
                external_path: None,
            }]
        );
        for cut in [0, 4, bytes.len() / 2, bytes.len() - 1] {
            assert!(
                decode_index_manifest(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn unknown_kind_is_an_error() {
        let mut writer = ContainerWriter::new(SCHEMA, BlockCodec::Null);
        writer.append(|b| entry(b, 7, "index-a-0")).unwrap();
        let err = decode_index_manifest(&writer.finish().unwrap()).unwrap_err();
        assert!(err.to_string().contains("_KIND 7"), "{err}");
    }
}
