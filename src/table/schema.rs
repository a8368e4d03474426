//! Schema files `schema/schema-<id>` (docs/format.md §2).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::types::{DataType, Field};
use crate::error::{Error, Result};

/// Field ids at or above this are reserved for system columns.
pub(crate) const SYSTEM_FIELD_ID_START: i32 = i32::MAX / 2;
/// Java's field id of `_KEY_<f>` is this plus the id of `f`.
pub(crate) const KEY_FIELD_ID_START: i32 = SYSTEM_FIELD_ID_START;
pub(crate) const SEQUENCE_NUMBER_FIELD_ID: i32 = i32::MAX - 1;
pub(crate) const VALUE_KIND_FIELD_ID: i32 = i32::MAX - 2;

/// One version of a table's schema.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    pub id: i64,
    pub fields: Vec<Field>,
    pub highest_field_id: i32,
    pub partition_keys: Vec<String>,
    pub primary_keys: Vec<String>,
    pub options: BTreeMap<String, String>,
    pub comment: Option<String>,
    pub time_millis: Option<i64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaFile {
    #[serde(default)]
    version: Option<i32>,
    id: i64,
    fields: Vec<FieldFile>,
    highest_field_id: i32,
    partition_keys: Vec<String>,
    primary_keys: Vec<String>,
    options: BTreeMap<String, String>,
    /// Left out when there is none, as Java writes it: Java's `SchemaSerializer` reads
    /// an explicit `null` (pypaimon writes one) as the comment text "null".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    comment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time_millis: Option<i64>,
}

#[derive(Serialize, Deserialize)]
struct FieldFile {
    id: i32,
    name: String,
    #[serde(rename = "type")]
    data_type: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

impl TableSchema {
    /// Builds schema 0 of a new table. Primary-key columns become NOT NULL, as Paimon does.
    pub fn new(
        columns: Vec<(String, DataType, bool)>,
        partition_keys: Vec<String>,
        primary_keys: Vec<String>,
        options: BTreeMap<String, String>,
    ) -> Result<Self> {
        let fields: Vec<Field> = columns
            .into_iter()
            .enumerate()
            .map(|(i, (name, data_type, nullable))| Field {
                id: i as i32,
                nullable: nullable && !primary_keys.contains(&name),
                name,
                data_type,
                description: None,
            })
            .collect();
        let schema = TableSchema {
            id: 0,
            highest_field_id: fields.len() as i32 - 1,
            fields,
            partition_keys,
            primary_keys,
            options,
            comment: None,
            time_millis: Some(chrono::Utc::now().timestamp_millis()),
        };
        schema.validate()?;
        Ok(schema)
    }

    /// Checks the rules Paimon puts on primary-key tables; reports every problem at once.
    pub fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for f in &self.fields {
            if !seen.insert(f.name.as_str()) {
                problems.push(format!("column `{}` is defined twice", f.name));
            }
        }
        if self.primary_keys.is_empty() {
            problems.push("a primary key is required".to_string());
        }
        for key in self.primary_keys.iter().chain(&self.partition_keys) {
            if self.field(key).is_none() {
                problems.push(format!("key column `{key}` is not a column of the table"));
            }
        }
        for p in &self.partition_keys {
            if !self.primary_keys.contains(p) {
                problems.push(format!(
                    "partition column `{p}` must be part of the primary key (fixed-bucket tables)"
                ));
            }
        }
        if !self.primary_keys.is_empty() && self.trimmed_primary_keys().is_empty() {
            problems.push(
                "the primary key must have at least one column that is not a partition column"
                    .to_string(),
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Config(problems.join("; ")))
        }
    }

    pub fn from_json(text: &str) -> Result<Self> {
        let file: SchemaFile =
            serde_json::from_str(text).map_err(|e| Error::json("schema file", e))?;
        let mut fields = Vec::with_capacity(file.fields.len());
        for f in file.fields {
            let type_text = match &f.data_type {
                serde_json::Value::String(s) => s.clone(),
                other => {
                    return Err(Error::format(format!(
                        "column `{}` has a nested type {other}, which lakejoin does not support",
                        f.name
                    )));
                }
            };
            let (data_type, nullable) = DataType::parse(&type_text)
                .map_err(|e| Error::format(format!("column `{}`: {e}", f.name)))?;
            fields.push(Field {
                id: f.id,
                name: f.name,
                data_type,
                nullable,
                description: f.description,
            });
        }
        let mut options = file.options;
        // Schema versions <= 1 without `bucket` imply one bucket (docs/format.md §2).
        if file.version.unwrap_or(1) <= 1 && !options.contains_key("bucket") {
            options.insert("bucket".into(), "1".into());
        }
        if file.version.unwrap_or(1) <= 2 && !options.contains_key("file.format") {
            options.insert("file.format".into(), "orc".into());
        }
        Ok(TableSchema {
            id: file.id,
            fields,
            highest_field_id: file.highest_field_id,
            partition_keys: file.partition_keys,
            primary_keys: file.primary_keys,
            options,
            comment: file.comment,
            time_millis: file.time_millis,
        })
    }

    pub fn to_json(&self) -> String {
        let file = SchemaFile {
            version: Some(3),
            id: self.id,
            fields: self
                .fields
                .iter()
                .map(|f| FieldFile {
                    id: f.id,
                    name: f.name.clone(),
                    data_type: serde_json::Value::String(f.type_string()),
                    description: f.description.clone(),
                })
                .collect(),
            highest_field_id: self.highest_field_id,
            partition_keys: self.partition_keys.clone(),
            primary_keys: self.primary_keys.clone(),
            options: self.options.clone(),
            comment: self.comment.clone(),
            time_millis: self.time_millis,
        };
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    pub(crate) fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// Index of each named column; panics never: unknown names were rejected by `validate`.
    fn indices(&self, names: &[String]) -> Vec<usize> {
        names.iter().filter_map(|n| self.field_index(n)).collect()
    }

    /// Index of each primary-key column, in primary-key order.
    pub fn primary_key_indices(&self) -> Vec<usize> {
        self.indices(&self.primary_keys)
    }

    /// Primary key minus partition keys, in primary-key order.
    pub(crate) fn trimmed_primary_keys(&self) -> Vec<String> {
        self.primary_keys
            .iter()
            .filter(|k| !self.partition_keys.contains(k))
            .cloned()
            .collect()
    }

    pub fn trimmed_key_indices(&self) -> Vec<usize> {
        self.indices(&self.trimmed_primary_keys())
    }

    pub fn partition_indices(&self) -> Vec<usize> {
        self.indices(&self.partition_keys)
    }

    /// Columns hashed to pick a bucket: option `bucket-key`, else the trimmed primary key.
    pub fn bucket_key_indices(&self) -> Vec<usize> {
        match self.options.get("bucket-key") {
            Some(keys) if !keys.trim().is_empty() => {
                let names: Vec<String> = keys.split(',').map(|s| s.trim().to_string()).collect();
                self.indices(&names)
            }
            _ => self.trimmed_key_indices(),
        }
    }

    pub fn types_of(&self, indices: &[usize]) -> Vec<DataType> {
        indices.iter().map(|&i| self.fields[i].data_type).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PYPAIMON_SCHEMA: &str = r#"{
      "version": 3, "id": 0,
      "fields": [
        {"id": 0, "name": "id", "type": "INT NOT NULL"},
        {"id": 1, "name": "name", "type": "STRING"},
        {"id": 2, "name": "country", "type": "STRING"},
        {"id": 3, "name": "seq", "type": "BIGINT"}
      ],
      "highestFieldId": 3, "partitionKeys": [], "primaryKeys": ["id"],
      "options": {"bucket": "2", "merge-engine": "partial-update", "sequence.field": "seq"},
      "comment": null, "timeMillis": 1795969371488
    }"#;

    #[test]
    fn reads_a_pypaimon_schema_and_writes_it_back_equal() {
        let schema = TableSchema::from_json(PYPAIMON_SCHEMA).unwrap();
        assert_eq!(schema.fields.len(), 4);
        assert!(!schema.fields[0].nullable);
        assert_eq!(
            schema.fields[1].data_type,
            DataType::Varchar(super::super::types::MAX_LENGTH)
        );
        assert_eq!(schema.trimmed_primary_keys(), vec!["id".to_string()]);
        let again = TableSchema::from_json(&schema.to_json()).unwrap();
        assert_eq!(again, schema);
        // Written back equal, but without pypaimon's `"comment": null`, as Java writes
        // no comment.
        let mut original: serde_json::Value = serde_json::from_str(PYPAIMON_SCHEMA).unwrap();
        original.as_object_mut().unwrap().shift_remove("comment");
        let written: serde_json::Value = serde_json::from_str(&schema.to_json()).unwrap();
        assert_eq!(original, written);
    }

    /// Column comments as Java writes them (`description`, left out when there is none).
    const COMMENTED_SCHEMA: &str = r#"{
      "version": 3, "id": 0,
      "fields": [
        {"id": 0, "name": "id", "type": "INT NOT NULL", "description": "customer id"},
        {"id": 1, "name": "name", "type": "STRING"},
        {"id": 2, "name": "note", "type": "STRING", "description": "free text, \"quoted\""}
      ],
      "highestFieldId": 2, "partitionKeys": [], "primaryKeys": ["id"],
      "options": {"bucket": "1"}, "timeMillis": 1795969371488
    }"#;

    #[test]
    fn column_descriptions_are_read_and_written_back() {
        let schema = TableSchema::from_json(COMMENTED_SCHEMA).unwrap();
        let descriptions: Vec<Option<&str>> = schema
            .fields
            .iter()
            .map(|f| f.description.as_deref())
            .collect();
        assert_eq!(
            descriptions,
            [Some("customer id"), None, Some("free text, \"quoted\"")]
        );
        let original: serde_json::Value = serde_json::from_str(COMMENTED_SCHEMA).unwrap();
        let written: serde_json::Value = serde_json::from_str(&schema.to_json()).unwrap();
        assert_eq!(original, written);
    }

    #[test]
    fn validate_lists_every_problem() {
        let err = TableSchema::new(
            vec![
                ("dt".into(), DataType::Date, true),
                ("dt".into(), DataType::Int, true),
            ],
            vec!["dt".into(), "zz".into()],
            vec!["dt".into()],
            BTreeMap::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("defined twice"), "{err}");
        assert!(err.contains("`zz` is not a column"), "{err}");
        assert!(err.contains("partition column `zz`"), "{err}");
        assert!(err.contains("at least one column"), "{err}");
    }
}
