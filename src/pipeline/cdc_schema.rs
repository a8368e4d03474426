//! Schema evolution of a CDC pipeline's table while it runs (issue 20, docs/architecture.md
//! §1): a record whose row does not fit the table (a field the table lacks, a type its
//! schema gives wider) is not decoded into a partial row. Its consumer asks the table's
//! sink to evolve the table ([`EvolveRequest`]), as the pipeline's `schema_evolution`
//! allows ([`plan`]); the sink commits what it buffered, publishes `schema-<n+1>` and
//! moves its writer to it, and answers with the table at the new schema; the consumer
//! rebuilds its decoder and row check on it and decodes the record again. Changes other
//! consumers decoded in the old schema are laid out anew by the sink
//! (`RowCheck::upgrade`). What the policy refuses stops the pipeline with the reason, and
//! the record's offset is not committed, so nothing is skipped.
//!
//! Why through the sink: it is the table's only writer, so the schema file is published
//! between two of its commits, before any data file written in the new schema.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use crate::codec::SourceColumn;
use crate::config::SchemaEvolutionConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::observe::PipelineMetrics;
use crate::table::Table;
use crate::table::schema::TableSchema;
use crate::table::schema_change::SchemaChange;

/// Longest wait between attempts of an evolution that failed transiently.
const MAX_EVOLVE_BACKOFF: Duration = Duration::from_secs(30);

/// A consumer's request that the table take the columns of a record.
#[derive(Debug)]
pub(crate) struct EvolveRequest {
    pub(crate) pipeline: String,
    pub(crate) columns: Vec<SourceColumn>,
    pub(crate) policy: SchemaEvolutionConfig,
    /// The table at its newest schema, or why it cannot take the columns.
    pub(crate) reply: oneshot::Sender<Result<Arc<Table>>>,
}

/// The changes `columns` ask of `schema`, as `policy` allows them. Everything refused is
/// named at once, with the `[[cdc]]` key that would allow it and the way to do it by hand.
pub(crate) fn plan(
    schema: &TableSchema,
    columns: &[SourceColumn],
    policy: SchemaEvolutionConfig,
    pipeline: &str,
) -> Result<Vec<SchemaChange>> {
    let mut problems = Vec::new();
    let mut wanted = Vec::new();
    for c in columns {
        match c.source_type {
            Some(t) => wanted.push((c.name.clone(), t)),
            None => problems.push(format!(
                "field `{}` has the type {}, which lakejoin cannot map to a table type; add \
                 the column by hand (`lakejoin table alter --add-column '{} <TYPE>'`)",
                c.name, c.described, c.name
            )),
        }
    }
    let changes = match schema.changes_to_fit(&wanted) {
        Ok(changes) => changes,
        Err(e) => {
            problems.push(e.to_string());
            Vec::new()
        }
    };
    for change in &changes {
        match change {
            SchemaChange::AddColumn { name, data_type } if !policy.add_columns => {
                problems.push(format!(
                    "the record has field `{name}` ({data_type}), which the table lacks, and \
                     schema_evolution.add_columns is false in [[cdc]] {pipeline}; add it with \
                     `lakejoin table alter --add-column '{name} {data_type}'`, set add_columns \
                     = true, or drop such fields with ignore_unknown_fields = true"
                ))
            }
            SchemaChange::WidenColumn { name, data_type } if !policy.widen_types => {
                let have = schema
                    .field_index(name)
                    .map(|i| schema.fields[i].data_type.to_string())
                    .unwrap_or_default();
                problems.push(format!(
                    "column `{name}` is {have} in the table and {data_type} in the record, and \
                     schema_evolution.widen_types is false in [[cdc]] {pipeline}; widen it with \
                     `lakejoin table alter --widen '{name} {data_type}'` or set widen_types = true"
                ))
            }
            _ => {}
        }
    }
    if problems.is_empty() {
        Ok(changes)
    } else {
        Err(Error::Config(format!(
            "pipeline {pipeline}: a record does not fit the table's schema and is not \
             written (its offset is not committed): {}",
            problems.join("; ")
        )))
    }
}

/// Asks the sink to evolve the table for `columns` and waits for the table at its new
/// schema. A transient failure (the store) is tried again with backoff, the pipeline
/// unready meanwhile; a refusal is the error that stops the pipeline. `None` when
/// `shutdown` fires first or the sink is gone.
pub(crate) async fn evolve(
    requests: &mpsc::Sender<EvolveRequest>,
    pipeline: &str,
    columns: Vec<SourceColumn>,
    policy: SchemaEvolutionConfig,
    metrics: &PipelineMetrics,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Option<Arc<Table>>> {
    let mut wait = Duration::from_millis(100);
    loop {
        let (reply, answer) = oneshot::channel();
        let request = EvolveRequest {
            pipeline: pipeline.to_string(),
            columns: columns.clone(),
            policy,
            reply,
        };
        if requests.send(request).await.is_err() {
            return Ok(None);
        }
        let answer = tokio::select! {
            answer = answer => answer,
            _ = shutdown.changed() => return Ok(None),
        };
        let error = match answer {
            Err(_) => return Ok(None),
            Ok(Ok(table)) => {
                metrics.set_hold_fault(None);
                return Ok(Some(table));
            }
            Ok(Err(e)) if e.kind() == ErrorKind::Transient => e,
            Ok(Err(e)) => return Err(e),
        };
        tracing::warn!(pipeline, error = %error, "evolving the table's schema failed; trying again");
        metrics.set_hold_fault(Some(format!(
            "changes held, evolving the table's schema failed, trying again: {error}"
        )));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return Ok(None),
        }
        wait = (wait * 2).min(MAX_EVOLVE_BACKOFF);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::table::types::{DataType, MAX_LENGTH};

    fn schema() -> TableSchema {
        TableSchema::new(
            vec![
                ("user_id".into(), DataType::Int, false),
                ("age".into(), DataType::Int, true),
            ],
            vec![],
            vec!["user_id".into()],
            BTreeMap::from([("bucket".to_string(), "1".to_string())]),
        )
        .unwrap()
    }

    fn column(name: &str, source: Option<DataType>, table: Option<DataType>) -> SourceColumn {
        SourceColumn {
            name: name.into(),
            source_type: source,
            table_type: table,
            described: "int64".into(),
        }
    }

    const ON: SchemaEvolutionConfig = SchemaEvolutionConfig {
        add_columns: true,
        widen_types: true,
        ignore_unknown_fields: false,
    };

    #[test]
    fn the_policy_allows_or_names_each_change() {
        let columns = [
            column("city", Some(DataType::Varchar(MAX_LENGTH)), None),
            column("age", Some(DataType::BigInt), Some(DataType::Int)),
        ];
        assert_eq!(plan(&schema(), &columns, ON, "p").unwrap().len(), 2);
        let off = SchemaEvolutionConfig {
            add_columns: false,
            widen_types: false,
            ..ON
        };
        let err = plan(&schema(), &columns, off, "p").unwrap_err().to_string();
        assert!(
            err.contains("field `city` (STRING)")
                && err.contains("add_columns is false in [[cdc]] p"),
            "{err}"
        );
        assert!(
            err.contains("`age` is INT in the table and BIGINT")
                && err.contains("widen_types is false"),
            "{err}"
        );
        assert!(
            err.contains("--add-column 'city STRING'") && err.contains("--widen 'age BIGINT'"),
            "{err}"
        );
    }

    #[test]
    fn unmappable_and_incompatible_types_are_refused_whatever_the_policy() {
        let err = plan(
            &schema(),
            &[
                column("t", None, None),
                column("age", Some(DataType::Varchar(4)), Some(DataType::Int)),
            ],
            ON,
            "p",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`t` has the type int64, which lakejoin cannot map"),
            "{err}"
        );
        assert!(
            err.contains("`age` is INT in the table and VARCHAR(4)"),
            "{err}"
        );
    }
}
