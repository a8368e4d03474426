//! One `[[enrich.join]]` resolved against its table: the fact's join key, the lookup,
//! and the fields the join adds.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use smallvec::SmallVec;

use super::facts::FactError;
use crate::codec::{Fact, FactValueError, FieldName};
use crate::config::{JoinConfig, JoinKind};
use crate::error::{Error, Result};
use crate::lookup::{LookupTable, ProjectedRow, RowFields};
use crate::observe::LookupMetrics;
use crate::observe::PipelineMetrics;
use crate::pipeline::cdc_progress::CdcProgress;
use crate::table::binary_row::FieldValue;
use crate::table::datum::{Datum, datum_from_json};
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// A fact's join-key values (one or two columns kept inline).
pub(crate) type JoinKey = SmallVec<[Datum; 2]>;
/// The rows matching one key: at most one by primary key (inline), any number otherwise.
pub(crate) type Matches = SmallVec<[ProjectedRow; 1]>;
/// The forms of a fact so far: one per match of each join (nearly always one, inline).
pub(crate) type Facts<'a> = SmallVec<[Fact<'a>; 1]>;

/// How a join's key and output map onto its table, from `[[enrich.join]]`.
#[derive(Debug, Clone)]
pub(crate) struct JoinPlan {
    /// Fact field and column type of each join-key value, in `on` order.
    pub(crate) key_fields: Vec<(String, DataType)>,
    /// Table column of each join-key value, in the same order.
    pub(crate) key_columns: Vec<usize>,
    /// Table columns added to the fact.
    pub(crate) projection: Vec<usize>,
    /// Output field name and type of each projected column.
    pub(crate) outputs: Vec<(String, DataType)>,
}

impl JoinPlan {
    pub(crate) fn new(config: &JoinConfig, schema: &TableSchema) -> Result<Self> {
        let column = |name: &str| {
            schema.field_index(name).ok_or_else(|| {
                Error::Config(format!("join on {}: no column `{name}`", config.table))
            })
        };
        let mut key_fields = Vec::new();
        let mut key_columns = Vec::new();
        for (fact_field, name) in &config.on {
            let index = column(name)?;
            key_fields.push((fact_field.clone(), schema.fields[index].data_type));
            key_columns.push(index);
        }
        let selected: Vec<&String> = if config.select.is_empty() {
            schema
                .fields
                .iter()
                .map(|f| &f.name)
                .filter(|n| !config.on.values().any(|c| c == *n))
                .collect()
        } else {
            config.select.iter().collect()
        };
        let mut projection = Vec::new();
        let mut outputs = Vec::new();
        for name in selected {
            let index = column(name)?;
            let output = config
                .rename
                .get(name)
                .cloned()
                .unwrap_or_else(|| format!("{}{name}", config.prefix));
            projection.push(index);
            outputs.push((output, schema.fields[index].data_type));
        }
        Ok(JoinPlan {
            key_fields,
            key_columns,
            projection,
            outputs,
        })
    }
}

/// One configured join, resolved against its table.
pub(crate) struct Join {
    table_name: String,
    lookup: Arc<LookupTable>,
    kind: JoinKind,
    key_fields: Vec<(String, DataType)>,
    /// Output field names, borrowed by every fact they are added to.
    outputs: Vec<(FieldName, DataType)>,
    retry: Option<(Duration, u32)>,
    /// `wait_for_cdc`: the table's CDC progress and `max_wait`.
    wait: Option<(Arc<CdcProgress>, Duration)>,
}

impl Join {
    pub(crate) fn new(
        config: &JoinConfig,
        plan: JoinPlan,
        lookup: Arc<LookupTable>,
        progress: Option<Arc<CdcProgress>>,
    ) -> Self {
        Join {
            table_name: config.table.clone(),
            lookup,
            kind: config.kind,
            key_fields: plan.key_fields,
            outputs: plan
                .outputs
                .into_iter()
                .map(|(name, ty)| (FieldName::new(name), ty))
                .collect(),
            retry: config.retry.as_ref().map(|r| (r.delay, r.max_attempts)),
            wait: progress
                .filter(|_| config.wait_for_cdc)
                .map(|p| (p, config.max_wait)),
        }
    }

    pub(crate) fn lookup(&self) -> &Arc<LookupTable> {
        &self.lookup
    }

    /// How many columns the join adds to a fact.
    pub(crate) fn added_columns(&self) -> usize {
        self.outputs.len()
    }

    /// The lookup key of a fact: `Ok(None)` when a key field is missing or null; `Err`
    /// when present but not convertible (a bad record).
    pub(crate) fn key(&self, fact: &Fact<'_>) -> std::result::Result<Option<JoinKey>, FactError> {
        let mut key = JoinKey::with_capacity(self.key_fields.len());
        for (field, ty) in &self.key_fields {
            match fact
                .get(field)
                .map_err(|e| FactError::Bad(format!("join on {}: {e}", self.table_name)))?
                .as_deref()
            {
                None | Some(Value::Null) => return Ok(None),
                Some(v) => key.push(datum_from_json(v, ty).map_err(|e| {
                    FactError::Bad(format!("join on {}: field `{field}`: {e}", self.table_name))
                })?),
            }
        }
        Ok(Some(key))
    }

    /// Whether a fact with Kafka timestamp `timestamp_ms` must first wait for the
    /// table's CDC (`wait_for_cdc` and the CDC has not covered it yet).
    pub(crate) fn must_wait(&self, timestamp_ms: Option<i64>) -> bool {
        matches!((&self.wait, timestamp_ms), (Some((progress, _)), Some(ts)) if !progress.covers(ts))
    }

    /// Whether a miss is looked up again later (`retry`).
    pub(crate) fn retries(&self) -> bool {
        self.retry.is_some_and(|(_, attempts)| attempts > 1)
    }

    /// Joins `fact` on its own, waiting for CDC and retrying misses as configured, and
    /// pushes the result to `out` (see [`Join::emit`]). Returns whether a row matched
    /// (the caller records it, `PipelineMetrics::record_join`).
    /// `timestamp_ms` is the fact's Kafka timestamp, which `wait_for_cdc` compares with
    /// the CDC progress.
    pub(crate) async fn apply<'a>(
        &'a self,
        fact: Fact<'a>,
        timestamp_ms: Option<i64>,
        metrics: &PipelineMetrics,
        out: &mut Facts<'a>,
    ) -> std::result::Result<bool, FactError> {
        let join_metrics = self.lookup.metrics();
        let rows: Matches = match self.key(&fact)? {
            None => Matches::new(),
            Some(key) => {
                if let (Some((progress, max_wait)), Some(ts)) = (&self.wait, timestamp_ms)
                    && !progress.covers(ts)
                {
                    LookupMetrics::add(&join_metrics.waits, 1);
                    if !progress.wait_for(ts, *max_wait).await {
                        LookupMetrics::add(&join_metrics.wait_timeouts, 1);
                    }
                }
                let mut rows = self.find(&key).await.map_err(FactError::held)?;
                if let Some((delay, attempts)) = self.retry {
                    let mut attempt = 1;
                    while rows.is_empty() && attempt < attempts {
                        PipelineMetrics::add(&metrics.join_retries, 1);
                        LookupMetrics::add(&join_metrics.retries, 1);
                        // Refreshes run on commits and on the refresh interval; a retry
                        // only looks again.
                        tokio::time::sleep(delay).await;
                        rows = self.find(&key).await.map_err(FactError::held)?;
                        attempt += 1;
                    }
                }
                rows
            }
        };
        let rows: SmallVec<[RowFields<'_>; 1]> = rows.iter().map(ProjectedRow::fields).collect();
        self.emit(fact, &rows, out)
    }

    /// Pushes the joined facts to `out`: one per matching row (a join by primary key
    /// matches at most one; a join on other columns may match several, as in Flink), the
    /// fact with nulls when nothing matches and the join is LEFT, nothing when it is
    /// INNER. Returns whether a row matched; `Err` is a bad record.
    pub(crate) fn emit<'a>(
        &'a self,
        fact: Fact<'a>,
        rows: &[RowFields<'_>],
        out: &mut Facts<'a>,
    ) -> std::result::Result<bool, FactError> {
        let Some((last, others)) = rows.split_last() else {
            if self.kind == JoinKind::Left {
                out.push(self.with_columns(fact, None)?);
            }
            return Ok(false);
        };
        for row in others {
            out.push(self.with_columns(fact.clone(), Some(row))?);
        }
        out.push(self.with_columns(fact, Some(last))?);
        Ok(true)
    }

    /// Looks up each key and hands its matching rows to `visit` with the key's index, in
    /// the keys' order: at most one row by primary key, any number otherwise; none for a
    /// `None` key (a missing or null key field). The lookup of a join for a poll batch of
    /// facts; a `full` cache's rows are read in place, under its read locks (see
    /// [`LookupTable::visit_many`]). An error is the lookup's (the table's store, a local
    /// file) or `visit`'s.
    pub(crate) async fn visit_many(
        &self,
        keys: &[Option<&[Datum]>],
        mut visit: impl FnMut(usize, &[RowFields<'_>]) -> Result<()>,
    ) -> Result<()> {
        if !self.lookup.by_primary_key() {
            for (k, key) in keys.iter().enumerate() {
                let rows = match key {
                    Some(key) => self.lookup.get_all(key)?,
                    None => Vec::new(),
                };
                let fields: Vec<RowFields<'_>> = rows.iter().map(ProjectedRow::fields).collect();
                visit(k, &fields)?;
            }
            return Ok(());
        }
        let mut k = 0;
        self.lookup
            .visit_many(keys, |row| {
                let at = k;
                k += 1;
                match row {
                    Some(row) => visit(at, std::slice::from_ref(&row)),
                    None => visit(at, &[]),
                }
            })
            .await
    }

    /// The matching rows (projected) of a key, as [`Self::visit_many`] finds them, for a
    /// fact on its own.
    async fn find(&self, key: &[Datum]) -> Result<Matches> {
        if self.lookup.by_primary_key() {
            Ok(self.lookup.get(key).await?.into_iter().collect())
        } else {
            self.lookup.get_all(key).map(Matches::from_vec)
        }
    }

    /// The fact with the joined columns added (nulls without a row).
    fn with_columns<'a>(
        &'a self,
        mut fact: Fact<'a>,
        row: Option<&RowFields<'_>>,
    ) -> std::result::Result<Fact<'a>, FactError> {
        // Room for the columns' JSON: about the size of their BinaryRow (8 bytes a
        // column plus the strings that do not fit one).
        let json_bytes = row.map_or(self.outputs.len() * 4, RowFields::len_hint);
        fact.reserve(self.outputs.len(), json_bytes);
        for (i, (name, planned)) in self.outputs.iter().enumerate() {
            // The row's own type: the table may have widened the column since the plan.
            let (value, ty) = match row {
                // A stored row that does not read back is the table's fault, not the
                // fact's: the fact is held, as on a failed lookup.
                Some(row) => row.field(i).map_err(FactError::held)?,
                None => (FieldValue::Null, *planned),
            };
            fact.insert_field(name, value, &ty)
                .map_err(|e| insert_error(&self.table_name, e))?;
        }
        Ok(fact)
    }
}

/// What a joined column that cannot be added means for the fact: a stored string that is
/// not UTF-8 is the table's fault, like a row that does not read back (the fact is held);
/// anything else is the fact's own (a dead letter).
fn insert_error(table: &str, error: FactValueError) -> FactError {
    match error {
        FactValueError::StoredText { .. } => {
            FactError::held(Error::format(format!("join on {table}: {error}")))
        }
        error => FactError::Bad(format!("join on {table}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_string_that_is_not_utf8_holds_the_fact_other_faults_dead_letter_it() {
        let source = String::from_utf8(b"caf\xe9".to_vec())
            .unwrap_err()
            .utf8_error();
        let error = FactValueError::StoredText {
            path: "customer_name".into(),
            source,
        };
        match insert_error("shop.customers", error) {
            FactError::Held(reason) => assert!(
                reason.contains("join on shop.customers")
                    && reason.contains("customer_name")
                    && reason.contains("not UTF-8"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
        let source = serde_json::from_str::<Value>("1e400").unwrap_err();
        let field = FactValueError::Field {
            path: "id".into(),
            source,
        };
        assert!(matches!(
            insert_error("shop.customers", field),
            FactError::Bad(reason) if reason.contains("join on shop.customers")
        ));
    }
}
