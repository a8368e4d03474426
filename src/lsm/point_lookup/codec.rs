//! The bytes of keys and rows in local lookup files: BinaryRow images in the table's
//! current schema. Key images are canonical (equal keys, equal bytes), so a lookup
//! compares bytes instead of decoding keys.

use std::path::Path;

use super::file::{BuiltFile, LookupFileWriter, Record};
use crate::error::{Error, Result};
use crate::table::binary_row;
use crate::table::data_file::KeyValue;
use crate::table::datum::{Datum, Row};
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// Encodes key-values of one table schema into lookup records and back.
#[derive(Debug, Clone)]
pub(crate) struct RowCodec {
    key_indices: Vec<usize>,
    key_types: Vec<DataType>,
    value_types: Vec<DataType>,
}

impl RowCodec {
    pub(crate) fn new(schema: &TableSchema) -> Self {
        let key_indices = schema.trimmed_key_indices();
        RowCodec {
            key_types: schema.types_of(&key_indices),
            key_indices,
            value_types: schema.fields.iter().map(|f| f.data_type).collect(),
        }
    }

    /// Appends the canonical bytes of trimmed primary-key values to `out`.
    pub(crate) fn encode_key(&self, key: &[Datum], out: &mut Vec<u8>) -> Result<()> {
        // Keys compare floating-point values as Java does, where every NaN is equal: give
        // them one image. Everything else already has one image per value.
        let is_nan = |d: &Datum| match d {
            Datum::Float(v) => v.is_nan(),
            Datum::Double(v) => v.is_nan(),
            _ => false,
        };
        if key.iter().any(is_nan) {
            let canonical: Vec<Datum> = key
                .iter()
                .map(|d| match d {
                    Datum::Float(v) if v.is_nan() => Datum::Float(f32::NAN),
                    Datum::Double(v) if v.is_nan() => Datum::Double(f64::NAN),
                    other => other.clone(),
                })
                .collect();
            return binary_row::encode_into(out, &canonical, &self.key_types);
        }
        binary_row::encode_into(out, key, &self.key_types)
    }

    /// Writes the local lookup file of `rows` (rows of this schema) to `target`.
    pub(crate) fn write_file(&self, target: &Path, rows: &[KeyValue]) -> Result<BuiltFile> {
        let mut writer = LookupFileWriter::create(target)?;
        let (mut key, mut value) = (Vec::new(), Vec::new());
        let mut key_values = Vec::with_capacity(self.key_indices.len());
        for kv in rows {
            key_values.clear();
            for &i in &self.key_indices {
                key_values.push(kv.row.get(i).cloned().ok_or_else(|| {
                    Error::format(format!("a row of {} values has no key", kv.row.len()))
                })?);
            }
            key.clear();
            self.encode_key(&key_values, &mut key)?;
            value.clear();
            binary_row::encode_into(&mut value, &kv.row, &self.value_types)?;
            writer.add(&key, kv.sequence_number, kv.kind, &value)?;
        }
        writer.finish()
    }

    /// The key-value of a record read from a lookup file.
    pub(crate) fn decode(&self, record: Record<'_>) -> Result<KeyValue> {
        let row: Row = binary_row::decode(record.value, &self.value_types)?;
        Ok(KeyValue {
            sequence_number: record.sequence_number,
            kind: record.kind,
            row,
        })
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::table::testkit::keyed_schema;

    fn codec(key_type: DataType) -> RowCodec {
        let schema = keyed_schema(&[("k", key_type), ("v", DataType::Int)], &["k"], &[]);
        RowCodec::new(&schema)
    }

    fn key_bytes(codec: &RowCodec, key: Datum) -> Vec<u8> {
        let mut out = Vec::new();
        codec.encode_key(&[key], &mut out).unwrap();
        out
    }

    #[test]
    fn every_nan_has_one_image() {
        let double = codec(DataType::Double);
        let other_nan = f64::from_bits(f64::NAN.to_bits() ^ 1);
        assert!(other_nan.is_nan());
        assert_eq!(
            key_bytes(&double, Datum::Double(f64::NAN)),
            key_bytes(&double, Datum::Double(other_nan))
        );
        // -0.0 and 0.0 are different keys, as Java compares them.
        assert_ne!(
            key_bytes(&double, Datum::Double(0.0)),
            key_bytes(&double, Datum::Double(-0.0))
        );
        let float = codec(DataType::Float);
        let other_nan = f32::from_bits(f32::NAN.to_bits() ^ 1);
        assert_eq!(
            key_bytes(&float, Datum::Float(f32::NAN)),
            key_bytes(&float, Datum::Float(other_nan))
        );
    }

    #[test]
    fn records_decode_to_their_rows() {
        let dir = tempfile::tempdir().unwrap();
        let codec = codec(DataType::Varchar(crate::table::types::MAX_LENGTH));
        let rows: Vec<KeyValue> = (0..20)
            .map(|i| KeyValue {
                sequence_number: i,
                kind: crate::table::row_kind::RowKind::UpdateAfter,
                row: vec![
                    Datum::String(format!("key number {i}").into()),
                    if i % 3 == 0 {
                        Datum::Null
                    } else {
                        Datum::Int(i as i32)
                    },
                ],
            })
            .collect();
        let path = dir.path().join("f.lkp");
        codec.write_file(&path, &rows).unwrap();
        let file = super::super::file::LookupFile::open(
            &path,
            &super::super::pages::PageBudget::new(1 << 20),
        )
        .unwrap();
        for kv in &rows {
            let mut found = Vec::new();
            let key = key_bytes(&codec, kv.row[0].clone());
            file.get(&key, &mut Vec::new(), |r| {
                found.push(codec.decode(r)?);
                Ok(())
            })
            .unwrap();
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].row, kv.row);
            assert_eq!(found[0].sequence_number, kv.sequence_number);
            assert_eq!(found[0].kind, kv.kind);
        }
    }
}
