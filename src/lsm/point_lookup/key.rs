//! Where the values of a lookup key go (partition, bucket, trimmed key), worked out once
//! per table instead of once per lookup.

use crate::error::{Error, Result};
use crate::table::datum::Datum;
use crate::table::schema::TableSchema;
use crate::table::types::DataType;
use crate::table::{Table, binary_row, bucket};

/// The primary-key positions of the columns a lookup needs.
#[derive(Debug, Clone)]
pub(crate) struct KeyLayout {
    table: String,
    key_names: Vec<String>,
    /// Position in the key of each partition column (`None`: not in the key, null).
    partition: Vec<Option<usize>>,
    partition_types: Vec<DataType>,
    /// Position in the key of each trimmed primary-key column.
    trimmed: Vec<Option<usize>>,
    /// Positions of the bucket-key columns, `None` when one is not in the key or the
    /// table has dynamic buckets: then every bucket is searched.
    bucket: Option<Vec<usize>>,
    bucket_types: Vec<DataType>,
    num_buckets: i32,
}

/// A lookup key split up by [`KeyLayout::resolve`].
#[derive(Debug)]
pub(crate) struct ResolvedKey {
    pub(crate) partition: Vec<Datum>,
    pub(crate) partition_bytes: Vec<u8>,
    pub(crate) trimmed: Vec<Datum>,
    /// The bucket of the key, when it can be computed.
    pub(crate) bucket: Option<i32>,
}

impl KeyLayout {
    pub(crate) fn new(table: &Table) -> Self {
        let schema: &TableSchema = table.schema();
        let position = |column: &str| schema.primary_keys.iter().position(|k| k == column);
        let bucket_columns = schema.bucket_key_indices();
        let num_buckets = table.options().bucket;
        let bucket: Option<Vec<usize>> = bucket_columns
            .iter()
            .map(|&i| position(&schema.fields[i].name))
            .collect();
        KeyLayout {
            table: table.identifier().to_string(),
            key_names: schema.primary_keys.clone(),
            partition: schema.partition_keys.iter().map(|k| position(k)).collect(),
            partition_types: schema.types_of(&schema.partition_indices()),
            trimmed: schema
                .trimmed_primary_keys()
                .iter()
                .map(|k| position(k))
                .collect(),
            bucket: bucket.filter(|_| num_buckets > 0),
            bucket_types: schema.types_of(&bucket_columns),
            num_buckets,
        }
    }

    pub(crate) fn num_buckets(&self) -> i32 {
        self.num_buckets
    }

    /// Splits a key (values in primary-key order).
    pub(crate) fn resolve(&self, key: &[Datum]) -> Result<ResolvedKey> {
        if key.len() != self.key_names.len() {
            return Err(Error::Data(format!(
                "a key of {} needs {} values ({}), got {}",
                self.table,
                self.key_names.len(),
                self.key_names.join(", "),
                key.len()
            )));
        }
        let pick = |positions: &[Option<usize>]| -> Vec<Datum> {
            positions
                .iter()
                .map(|p| p.and_then(|p| key.get(p)).cloned().unwrap_or(Datum::Null))
                .collect()
        };
        let partition = pick(&self.partition);
        let partition_bytes = binary_row::serialize(&partition, &self.partition_types)
            .map_err(|e| Error::Data(format!("key of {}: {e}", self.table)))?;
        let bucket = match &self.bucket {
            Some(positions) => {
                let values: Vec<Datum> = positions
                    .iter()
                    .map(|&p| key.get(p).cloned().unwrap_or(Datum::Null))
                    .collect();
                Some(
                    bucket::bucket_of(&values, &self.bucket_types, self.num_buckets)
                        .map_err(|e| Error::Data(format!("key of {}: {e}", self.table)))?,
                )
            }
            None => None,
        };
        Ok(ResolvedKey {
            partition,
            partition_bytes,
            trimmed: pick(&self.trimmed),
            bucket,
        })
    }
}
