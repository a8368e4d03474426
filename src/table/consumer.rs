//! Paimon consumers (`consumer/consumer-<id>`): where a streaming reader of the table
//! goes on, as Java's `ConsumerManager` stores it (`{"nextSnapshot" : N}`). Snapshot and
//! changelog expiry keep every snapshot from the smallest `nextSnapshot` on, so a reader
//! that records its position here never finds what it has not read yet expired.
//!
//! Why in the table layer: the file is part of the table format, read by expiry
//! (`lsm::expire`) and written by `[[changelog]]` pipelines; Java readers (Flink's
//! `consumer-id`) share the directory.

use object_store::{ObjectStoreExt, PutPayload};

use super::{Table, list_dir, read_text};
use crate::error::{Error, Result};

/// The file-name prefix Java's `ConsumerManager` uses.
pub(crate) const CONSUMER_PREFIX: &str = "consumer-";

/// Whether `id` can name a consumer file: 1 to 200 of `[A-Za-z0-9._-]`, not starting
/// with a dot (object-store keys and Java's path handling both take these as they are).
pub(crate) fn valid_consumer_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A consumer file's text, as Java's `JsonSerdeUtil.toJson` (Jackson's default pretty
/// printer) writes it.
pub(crate) fn consumer_json(next_snapshot: i64) -> String {
    format!("{{\n  \"nextSnapshot\" : {next_snapshot}\n}}")
}

/// The `nextSnapshot` of a consumer file's text (other fields are ignored, as Java's
/// `@JsonIgnoreProperties(ignoreUnknown = true)` does).
pub(crate) fn parse_consumer(text: &str) -> Option<i64> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()?
        .get("nextSnapshot")?
        .as_i64()
}

impl Table {
    fn consumer_path(&self, id: &str) -> object_store::path::Path {
        self.path_of("consumer")
            .join(format!("{CONSUMER_PREFIX}{id}"))
    }

    /// The `nextSnapshot` of consumer `id`, or `None` when it has no file.
    pub(crate) async fn consumer(&self, id: &str) -> Result<Option<i64>> {
        let path = self.consumer_path(id);
        match read_text(&**self.store(), &path).await {
            Ok(text) => parse_consumer(&text).map(Some).ok_or_else(|| {
                Error::format(format!(
                    "consumer file {path} has no numeric `nextSnapshot`: {text}"
                ))
            }),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Records that consumer `id` reads snapshot `next_snapshot` next (Java's
    /// `resetConsumer`: the file is overwritten).
    pub(crate) async fn write_consumer(&self, id: &str, next_snapshot: i64) -> Result<()> {
        let path = self.consumer_path(id);
        self.store()
            .put(&path, PutPayload::from(consumer_json(next_snapshot)))
            .await
            .map(|_| ())
            .map_err(|e| Error::store(format!("writing {path}"), e))
    }

    /// The `nextSnapshot` of every consumer file, each with its location.
    pub(crate) async fn consumers(&self) -> Result<Vec<(String, i64)>> {
        let mut consumers = Vec::new();
        for object in list_dir(&**self.store(), &self.path_of("consumer")).await? {
            let path = object.location;
            if !path
                .filename()
                .is_some_and(|n| n.starts_with(CONSUMER_PREFIX))
            {
                continue;
            }
            let text = read_text(&**self.store(), &path).await?;
            let next = parse_consumer(&text).ok_or_else(|| {
                Error::format(format!(
                    "consumer file {path} has no numeric `nextSnapshot`; \
                     refusing to expire snapshots a consumer may need"
                ))
            })?;
            consumers.push((path.to_string(), next));
        }
        Ok(consumers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;
    use crate::table::{TableIdentifier, Warehouse};

    async fn memory_table() -> Table {
        let schema = keyed_schema(&[("id", DataType::Int)], &["id"], &[("bucket", "1")]);
        let id = TableIdentifier::parse("db.t").unwrap();
        Table::create(&Warehouse::in_memory(), &id, schema)
            .await
            .unwrap()
    }

    #[test]
    fn the_file_is_written_as_java_writes_it_and_read_as_java_reads_it() {
        assert_eq!(consumer_json(7), "{\n  \"nextSnapshot\" : 7\n}");
        assert_eq!(parse_consumer(&consumer_json(7)), Some(7));
        // Java's own files, and fields it may add later, read the same.
        assert_eq!(
            parse_consumer(r#"{"nextSnapshot":12,"other":true}"#),
            Some(12)
        );
        assert_eq!(parse_consumer(r#"{"nextSnapshot":"12"}"#), None);
        assert_eq!(parse_consumer("not json"), None);
    }

    #[test]
    fn consumer_ids_are_safe_file_names() {
        for ok in ["wide-out", "a.b_c-1", "X"] {
            assert!(valid_consumer_id(ok), "{ok}");
        }
        for bad in ["", ".hidden", "a/b", "a b", "ü", &"x".repeat(201)] {
            assert!(!valid_consumer_id(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_written_consumer_is_read_back_and_listed() {
        let table = memory_table().await;
        assert_eq!(table.consumer("out").await.unwrap(), None);
        table.write_consumer("out", 3).await.unwrap();
        table.write_consumer("out", 5).await.unwrap();
        table.write_consumer("other", 9).await.unwrap();
        assert_eq!(table.consumer("out").await.unwrap(), Some(5));
        let mut listed: Vec<i64> = table
            .consumers()
            .await
            .unwrap()
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        listed.sort_unstable();
        assert_eq!(listed, vec![5, 9]);
    }
}
