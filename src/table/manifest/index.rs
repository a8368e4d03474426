//! Index manifests (`manifest/index-manifest-*`, format doc §4.3): the full list of a
//! table's index files (HASH indexes of dynamic buckets, deletion vectors). lakejoin only
//! carries a snapshot's index manifest forward; it reads one to check that the files it
//! names exist (`lakejoin table check`).

use super::avro::{self, Val};
use super::{decode_records, opt_long, opt_string, record_fields, required, take, top_record};
use crate::error::{Error, Result};

/// One index file an index manifest lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFileMeta {
    /// `_INDEX_TYPE`: `HASH`, `DELETION_VECTORS`, …
    pub index_type: String,
    /// `_FILE_NAME`, in the table's `index/` directory unless `external_path` is set.
    pub file_name: String,
    /// `_FILE_SIZE`, in bytes.
    pub file_size: i64,
    /// `_EXTERNAL_PATH`, when the file lives outside the table directory.
    pub external_path: Option<String>,
}

/// Decodes an index manifest written by Java Paimon or pypaimon. Only ADD entries are
/// returned (an index manifest is full state; DELETE entries cancel nothing here).
pub fn decode_index_manifest(bytes: &[u8]) -> Result<Vec<IndexFileMeta>> {
    let file = avro::read_container(bytes)?;
    let record = top_record(&file.schema, "index manifest")?;
    let kind = record.field_index("_KIND");
    let index_type = record.field_index("_INDEX_TYPE");
    let file_name = record.field_index("_FILE_NAME");
    let file_size = record.field_index("_FILE_SIZE");
    let external_path = record.field_index("_EXTERNAL_PATH");
    let entries = decode_records(&file, |v: Val<'_>| {
        let mut m = record_fields(v, "index manifest entry")?;
        let kind = opt_long(take(&mut m, kind), "_KIND")?.unwrap_or(0);
        if !matches!(kind, 0 | 1) {
            return Err(Error::format(format!(
                "unknown index manifest _KIND {kind}"
            )));
        }
        let meta = IndexFileMeta {
            index_type: required(
                opt_string(take(&mut m, index_type), "_INDEX_TYPE")?,
                "_INDEX_TYPE",
            )?,
            file_name: required(
                opt_string(take(&mut m, file_name), "_FILE_NAME")?,
                "_FILE_NAME",
            )?,
            file_size: required(
                opt_long(take(&mut m, file_size), "_FILE_SIZE")?,
                "_FILE_SIZE",
            )?,
            external_path: opt_string(take(&mut m, external_path), "_EXTERNAL_PATH")?,
        };
        Ok((kind == 0).then_some(meta))
    })?;
    Ok(entries.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::manifest::avro::{BlockCodec, ContainerWriter, put_bytes, put_long};

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
                index_type: "HASH".into(),
                file_name: "index-a-0".into(),
                file_size: 120,
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
