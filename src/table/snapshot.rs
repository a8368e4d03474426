//! Snapshot files `snapshot/snapshot-<id>` (docs/format.md §3).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What a commit did, as recorded in its snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CommitKind {
    Append,
    Compact,
    Overwrite,
    Analyze,
}

/// `commitIdentifier` of batch (one-shot) commits, as Java and pypaimon write it.
pub(crate) const BATCH_COMMIT_IDENTIFIER: i64 = i64::MAX;

/// One snapshot of a table. Field names and meaning as in docs/format.md §3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub version: i32,
    pub id: i64,
    pub schema_id: i64,
    pub base_manifest_list: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_manifest_list_size: Option<i64>,
    pub delta_manifest_list: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_manifest_list_size: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog_manifest_list: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog_manifest_list_size: Option<i64>,
    /// Carried forward unchanged from the previous snapshot: dropping it would lose a
    /// Java writer's deletion vectors or dynamic-bucket index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_manifest: Option<String>,
    pub commit_user: String,
    pub commit_identifier: i64,
    pub commit_kind: CommitKind,
    pub time_millis: i64,
    pub total_record_count: i64,
    pub delta_record_count: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog_record_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistics: Option<String>,
    /// Free-form commit properties (lakejoin stores consumed Kafka offsets here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_row_id: Option<i64>,
}

impl Snapshot {
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| Error::json("snapshot file", e))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_pypaimon_snapshot() {
        let text = r#"{
          "version": 3, "id": 2, "schemaId": 0,
          "baseManifestList": "manifest-list-8d31c46b-0",
          "deltaManifestList": "manifest-list-8d31c46b-1",
          "totalRecordCount": 4, "deltaRecordCount": 2,
          "commitUser": "a8c7bfc1-adfb-4024-8d58-9e2d1909d586",
          "commitIdentifier": 9223372036854775807,
          "commitKind": "APPEND",
          "timeMillis": 1795969371513,
          "baseManifestListSize": 1338, "deltaManifestListSize": 1338,
          "uuid": "e9ba6bbd", "writerVersion": "python-2.1.0"
        }"#;
        let s = Snapshot::from_json(text).unwrap();
        assert_eq!(s.id, 2);
        assert_eq!(s.commit_identifier, BATCH_COMMIT_IDENTIFIER);
        assert_eq!(s.commit_kind, CommitKind::Append);
        assert_eq!(s.index_manifest, None);
        let again = Snapshot::from_json(&s.to_json()).unwrap();
        assert_eq!(again, s);
    }
}
