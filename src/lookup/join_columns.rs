//! The columns a join reads, held by field id.
//!
//! The pipeline plans a join against the table's schema at start, as column positions.
//! Another writer (Flink or Spark `ALTER TABLE`, Java Paimon's `SchemaChange`) may later
//! add a column before the others, move one, rename one or drop one, and the lookups then
//! read the table in its new schema (see `PointLookup::refresh`). Positions planned
//! against the old schema would then name other columns, and the join would silently put
//! one column's values under another's name. Paimon's readers map a data file's columns by
//! field id, stable across schema versions; a join does the same: it keeps the field ids
//! it was planned with and finds their positions again in each schema it reads.
//!
//! A column the join reads that a newer schema dropped is an error naming it, not a null:
//! the join cannot give what the user asked for. The error sticks: from then on every
//! lookup of the join fails with it (a `full` cache does not go on answering from the
//! snapshot before the drop), so its facts are held and the error logged on each retry
//! until the pipeline restarts with a configuration that no longer reads the column. An
//! ordered pipeline stops there.

use std::sync::{Arc, OnceLock, RwLock};

use super::projected::projected_types;
use crate::error::{Error, Result};
use crate::table::schema::TableSchema;
use crate::table::types::DataType;

/// A column the join reads: its field id and its name when the join was planned.
#[derive(Debug, Clone)]
struct PlannedColumn {
    id: i32,
    name: String,
}

/// The join's columns in one schema version.
#[derive(Debug)]
pub(super) struct ColumnsInSchema {
    pub(super) schema_id: i64,
    /// Positions of the returned columns, in output order.
    pub(super) projection: Vec<usize>,
    /// Their types in this schema (a column may have been widened).
    pub(super) types: Arc<[DataType]>,
    /// Positions of the join key's columns, in join-key order.
    pub(super) key_columns: Vec<usize>,
}

/// What a join reads of its table, by field id, and where that was in the newest schema
/// asked about.
#[derive(Debug)]
pub(super) struct JoinColumns {
    table: String,
    projection: Vec<PlannedColumn>,
    key_columns: Vec<PlannedColumn>,
    /// The newest resolution: nearly every lookup reads the schema the previous one did.
    last: RwLock<Arc<ColumnsInSchema>>,
    /// Set once a schema dropped a column the join reads: the error every lookup gives.
    dropped: OnceLock<String>,
}

impl JoinColumns {
    /// The columns at `key_columns` and `projection` of `schema`, the schema the join was
    /// planned against; a position out of range is `Error::Config`.
    pub(super) fn new(
        table: &str,
        schema: &TableSchema,
        key_columns: &[usize],
        projection: &[usize],
    ) -> Result<Self> {
        let planned = |positions: &[usize]| -> Result<Vec<PlannedColumn>> {
            positions
                .iter()
                .map(|&p| {
                    schema
                        .fields
                        .get(p)
                        .map(|f| PlannedColumn {
                            id: f.id,
                            name: f.name.clone(),
                        })
                        .ok_or_else(|| {
                            Error::Config(format!(
                                "join on {table}: column {p} is out of range (the table has {} columns)",
                                schema.fields.len()
                            ))
                        })
                })
                .collect()
        };
        let projection = planned(projection)?;
        let key_columns = planned(key_columns)?;
        let resolved = resolve(table, schema, &projection, &key_columns)?;
        Ok(JoinColumns {
            table: table.to_owned(),
            projection,
            key_columns,
            last: RwLock::new(Arc::new(resolved)),
            dropped: OnceLock::new(),
        })
    }

    /// The error of a schema that dropped a column the join reads, once one did.
    pub(super) fn check(&self) -> Result<()> {
        match self.dropped.get() {
            Some(message) => Err(Error::Config(message.clone())),
            None => Ok(()),
        }
    }

    /// Where the join's columns are in `schema`.
    pub(super) fn in_schema(&self, schema: &TableSchema) -> Result<Arc<ColumnsInSchema>> {
        self.check()?;
        let last = self.last.read().unwrap_or_else(|p| p.into_inner()).clone();
        if last.schema_id == schema.id {
            return Ok(last);
        }
        let resolved = match resolve(&self.table, schema, &self.projection, &self.key_columns) {
            Ok(resolved) => Arc::new(resolved),
            Err(e) => {
                let message = e.to_string();
                if self.dropped.set(message.clone()).is_ok() {
                    tracing::error!(error = %message, "a lookup join can no longer read its table");
                }
                return Err(Error::Config(message));
            }
        };
        let mut last = self.last.write().unwrap_or_else(|p| p.into_inner());
        // A lookup still pinned to an older schema does not move the newest back.
        if resolved.schema_id > last.schema_id {
            *last = resolved.clone();
        }
        Ok(resolved)
    }
}

/// Where the `projection` and `key_columns` of a join on `table` are in `schema`; a
/// column `schema` lacks (dropped) is an error naming each such column once.
fn resolve(
    table: &str,
    schema: &TableSchema,
    projection: &[PlannedColumn],
    key_columns: &[PlannedColumn],
) -> Result<ColumnsInSchema> {
    let mut dropped: Vec<PlannedColumn> = Vec::new();
    let mut positions = |planned: &[PlannedColumn]| -> Vec<usize> {
        planned
            .iter()
            .filter_map(|c| {
                let position = schema.fields.iter().position(|f| f.id == c.id);
                if position.is_none() && !dropped.iter().any(|d| d.id == c.id) {
                    dropped.push(c.clone());
                }
                position
            })
            .collect()
    };
    let projection_at = positions(projection);
    let key_columns_at = positions(key_columns);
    if !dropped.is_empty() {
        let names: Vec<String> = dropped
            .iter()
            .map(|c| format!("`{}` (field id {})", c.name, c.id))
            .collect();
        return Err(Error::Config(format!(
            "join on {table}: schema {} of the table dropped column(s) the join reads: {}; \
             restart the pipeline with a configuration that does not read them",
            schema.id,
            names.join(", ")
        )));
    }
    let types: Vec<DataType> = schema.fields.iter().map(|f| f.data_type).collect();
    Ok(ColumnsInSchema {
        schema_id: schema.id,
        types: projected_types(&types, &projection_at)?,
        projection: projection_at,
        key_columns: key_columns_at,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::table::types::MAX_LENGTH;

    fn planned_schema() -> TableSchema {
        TableSchema::new(
            vec![
                ("id".into(), DataType::Int, false),
                ("name".into(), DataType::Varchar(MAX_LENGTH), true),
                ("n".into(), DataType::Int, true),
                ("city".into(), DataType::Varchar(MAX_LENGTH), true),
            ],
            vec![],
            vec!["id".into()],
            BTreeMap::new(),
        )
        .unwrap()
    }

    /// `planned` after Java-style changes: `zip` (id 4) added first, `n` widened and
    /// moved before `name`, `city` renamed to `town`.
    fn evolved_schema() -> TableSchema {
        let mut schema = planned_schema();
        let mut fields = schema.fields.clone();
        let mut zip = fields[3].clone();
        zip.id = 4;
        zip.name = "zip".into();
        fields[2].data_type = DataType::BigInt;
        fields[3].name = "town".into();
        schema.fields = vec![
            zip,
            fields[0].clone(),
            fields[2].clone(),
            fields[1].clone(),
            fields[3].clone(),
        ];
        schema.id = 1;
        schema.highest_field_id = 4;
        schema
    }

    #[test]
    fn columns_follow_their_field_ids_through_adds_moves_renames_and_widening() {
        let columns = JoinColumns::new("db.t", &planned_schema(), &[0], &[1, 2, 3]).unwrap();
        let planned = columns.in_schema(&planned_schema()).unwrap();
        assert_eq!(planned.projection, vec![1, 2, 3]);
        assert_eq!(planned.key_columns, vec![0]);

        let evolved = columns.in_schema(&evolved_schema()).unwrap();
        assert_eq!(evolved.schema_id, 1);
        assert_eq!(evolved.projection, vec![3, 2, 4], "name, n, city/town");
        assert_eq!(evolved.key_columns, vec![1]);
        assert_eq!(
            &*evolved.types,
            &[
                DataType::Varchar(MAX_LENGTH),
                DataType::BigInt,
                DataType::Varchar(MAX_LENGTH)
            ]
        );
        // Asked again, the same resolution is handed out, not recomputed.
        assert!(Arc::ptr_eq(
            &evolved,
            &columns.in_schema(&evolved_schema()).unwrap()
        ));
        // A lookup still pinned to the planned schema is answered, and does not move the
        // newest resolution back.
        assert_eq!(
            columns.in_schema(&planned_schema()).unwrap().projection,
            vec![1, 2, 3]
        );
        assert!(Arc::ptr_eq(
            &evolved,
            &columns.in_schema(&evolved_schema()).unwrap()
        ));
    }

    #[test]
    fn a_dropped_column_the_join_reads_is_an_error_naming_it() {
        // `city` is both a key column and a returned one: named once.
        let columns = JoinColumns::new("db.t", &planned_schema(), &[3], &[1, 3]).unwrap();
        assert!(columns.check().is_ok());
        let mut dropped = evolved_schema();
        dropped.id = 2;
        dropped.fields.retain(|f| f.name != "town" && f.name != "n");
        let error = columns.in_schema(&dropped).unwrap_err().to_string();
        assert!(error.contains("join on db.t"), "{error}");
        assert!(error.contains("schema 2"), "{error}");
        assert_eq!(error.matches("`city` (field id 3)").count(), 1, "{error}");
        // A dropped column the join does not read (`n`) is no concern.
        assert!(!error.contains("`n`"), "{error}");
        // The error sticks, also for the schema it could read: the join cannot go on.
        assert!(columns.check().is_err());
        let again = columns
            .in_schema(&planned_schema())
            .unwrap_err()
            .to_string();
        assert!(again.contains("`city` (field id 3)"), "{again}");
    }

    #[test]
    fn a_planned_position_out_of_range_is_a_config_error() {
        let error = JoinColumns::new("db.t", &planned_schema(), &[0], &[4]).unwrap_err();
        assert!(matches!(error, Error::Config(_)), "{error}");
    }
}
