//! What a table accepts, checked once per change: arity, nullability and each value's
//! type, timestamps its Parquet unit can hold, the `rowkind.field` column, and the merge
//! engine's admission of retractions.
//!
//! The check happens where a change enters: a CDC pipeline checks each decoded change
//! before it is queued, so that a bad record is dead-lettered by its pipeline instead of
//! failing the table's writer, and the writer takes only [`CheckedChange`]s, which nothing
//! but [`RowCheck::check`] makes. Callers holding plain rows (`lakejoin table write`,
//! tests) go through [`TableWriter::write`](super::writer::TableWriter::write), which
//! checks with the same code.

use std::sync::Arc;

use super::merge::{Admission, MergeEngine, RetractionRefused};
use crate::error::{Error, Result};
use crate::table::Table;
use crate::table::binary_row;
use crate::table::datum::{Datum, Row, TimestampOutOfRange, format_timestamp};
use crate::table::row_kind::RowKind;
use crate::table::schema::TableSchema;
use crate::table::schema_change::widen_datum;
use crate::table::types::DataType;

/// Why a table does not take a change: the dead-letter reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RowRejected {
    #[error("row has {values} values, table {columns} columns")]
    Arity { values: usize, columns: usize },
    /// Every column that does not take its value, so one dead letter says all.
    #[error("{}", join(.0))]
    Columns(Vec<ColumnRejected>),
    /// The `rowkind.field` column holds something other than a row kind.
    #[error("column `{column}` (rowkind.field) must be +I, -U, +U or -D, got {value:?}")]
    NotARowKind { column: String, value: String },
    /// The merge engine cannot take the retraction.
    #[error(transparent)]
    Retraction(#[from] RetractionRefused),
}

/// Why one column does not take its value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ColumnRejected {
    #[error("column `{0}` is NOT NULL but the value is null")]
    Null(String),
    #[error("column `{column}` of type {data_type} cannot hold {value:?}")]
    WrongType {
        column: String,
        data_type: DataType,
        value: Datum,
    },
    /// A timestamp the column's Parquet unit cannot hold (a millisecond value from a
    /// message beyond i64 microseconds or nanoseconds).
    #[error("column `{column}`: {source}")]
    Timestamp {
        column: String,
        #[source]
        source: TimestampOutOfRange,
    },
    /// A DECIMAL with more digits than the column's precision.
    #[error("column `{column}` of type {data_type}: {source}")]
    Decimal {
        column: String,
        data_type: DataType,
        #[source]
        source: binary_row::DecimalOverflow,
    },
}

fn join(problems: &[ColumnRejected]) -> String {
    let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
    problems.join("; ")
}

/// A rejected change given to a writer directly (not through a pipeline's dead letters)
/// fails that write only.
impl From<RowRejected> for Error {
    fn from(e: RowRejected) -> Self {
        Error::Data(e.to_string())
    }
}

/// A change the table takes, as the writer applies it: the kind resolved from
/// `rowkind.field` when the table sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedChange {
    kind: RowKind,
    row: Row,
    /// The schema the row is laid out in (see [`RowCheck::upgrade`]).
    schema_id: i64,
}

impl CheckedChange {
    pub fn kind(&self) -> RowKind {
        self.kind
    }

    pub fn row(&self) -> &Row {
        &self.row
    }

    /// Id of the schema the row was checked against.
    pub fn schema_id(&self) -> i64 {
        self.schema_id
    }

    pub(super) fn into_parts(self) -> (RowKind, Row) {
        (self.kind, self.row)
    }
}

/// The checks of one table's schema and merge engine.
#[derive(Debug, Clone)]
pub struct RowCheck {
    schema: Arc<TableSchema>,
    engine: MergeEngine,
    /// `rowkind.field`: the kind the writer applies comes from this column.
    row_kind_column: Option<usize>,
}

impl RowCheck {
    pub fn new(table: &Table) -> Result<Self> {
        Ok(RowCheck {
            schema: table.schema().clone(),
            engine: MergeEngine::new(table.schema(), table.options())?,
            row_kind_column: row_kind_column(table.schema()),
        })
    }

    /// The change as the writer applies it; `Ok(None)` when the table drops it (a
    /// retraction with `ignore-delete`); `Err` with the reason when the table rejects it.
    pub fn check(
        &self,
        kind: RowKind,
        row: Row,
    ) -> std::result::Result<Option<CheckedChange>, RowRejected> {
        check_row(&self.schema, &row)?;
        let kind = row_kind_of(&self.schema, self.row_kind_column, kind, &row)?;
        match self.engine.admit(kind)? {
            Admission::Keep => Ok(Some(CheckedChange {
                kind,
                row,
                schema_id: self.schema.id,
            })),
            Admission::Drop => Ok(None),
        }
    }

    /// Id of the schema this checks against.
    pub fn schema_id(&self) -> i64 {
        self.schema.id
    }

    /// A change checked against `from`, an older schema of the table, laid out in this
    /// check's schema and checked again: values move by field id, a column added since
    /// is null, a widened one is cast up (`schema_change::widen_datum`). A change
    /// decoded just before the table evolved is applied after it this way, so nothing
    /// a pipeline sent is lost in the switch.
    pub fn upgrade(
        &self,
        change: CheckedChange,
        from: &TableSchema,
    ) -> std::result::Result<Option<CheckedChange>, RowRejected> {
        if change.schema_id == self.schema.id {
            return Ok(Some(change));
        }
        let CheckedChange { kind, mut row, .. } = change;
        let moved: Row = self
            .schema
            .fields
            .iter()
            .map(|field| {
                from.fields
                    .iter()
                    .position(|old| old.id == field.id)
                    .and_then(|i| row.get_mut(i))
                    .map_or(Datum::Null, |d| {
                        widen_datum(std::mem::replace(d, Datum::Null), field.data_type)
                    })
            })
            .collect();
        self.check(kind, moved)
    }
}

/// The column `rowkind.field` names, if the table sets it.
fn row_kind_column(schema: &TableSchema) -> Option<usize> {
    schema
        .options
        .get("rowkind.field")
        .and_then(|f| schema.field_index(f.trim()))
}

/// The kind a change is applied as: with `rowkind.field`, the kind its column holds
/// (Paimon's writers take it from there); the decoder's `kind` otherwise, or when the
/// column is null. `Err` for a value that is no row kind.
fn row_kind_of(
    schema: &TableSchema,
    row_kind_column: Option<usize>,
    kind: RowKind,
    row: &[Datum],
) -> std::result::Result<RowKind, RowRejected> {
    match row_kind_column.and_then(|i| Some((i, row.get(i)?))) {
        Some((i, Datum::String(s))) => RowKind::parse(s).ok_or_else(|| RowRejected::NotARowKind {
            column: schema.fields[i].name.clone(),
            value: s.to_string(),
        }),
        _ => Ok(kind),
    }
}

/// Checks arity, nullability and that each datum has its column's type.
fn check_row(schema: &TableSchema, row: &Row) -> std::result::Result<(), RowRejected> {
    if row.len() != schema.fields.len() {
        return Err(RowRejected::Arity {
            values: row.len(),
            columns: schema.fields.len(),
        });
    }
    let mut problems = Vec::new();
    for (field, value) in schema.fields.iter().zip(row) {
        if let (Datum::Timestamp(ts), DataType::Timestamp(p) | DataType::TimestampLtz(p)) =
            (value, field.data_type)
            && !ts.fits_precision(p)
        {
            problems.push(ColumnRejected::Timestamp {
                column: field.name.clone(),
                source: TimestampOutOfRange::new(format_timestamp(*ts), &field.data_type),
            });
            continue;
        }
        let ok = match (value, field.data_type) {
            (Datum::Null, _) => {
                if !field.nullable {
                    problems.push(ColumnRejected::Null(field.name.clone()));
                }
                true
            }
            // Past its precision a decimal has no BinaryRow or Parquet image: rejected
            // here, where the pipeline can dead-letter it, not by the writer.
            (Datum::Decimal(unscaled), DataType::Decimal { precision, .. }) => {
                if let Err(source) = binary_row::check_decimal_precision(*unscaled, precision) {
                    problems.push(ColumnRejected::Decimal {
                        column: field.name.clone(),
                        data_type: field.data_type,
                        source,
                    });
                }
                true
            }
            (Datum::Boolean(_), DataType::Boolean)
            | (Datum::TinyInt(_), DataType::TinyInt)
            | (Datum::SmallInt(_), DataType::SmallInt)
            | (Datum::Int(_), DataType::Int)
            | (Datum::BigInt(_), DataType::BigInt)
            | (Datum::Float(_), DataType::Float)
            | (Datum::Double(_), DataType::Double)
            | (Datum::String(_), DataType::Char(_) | DataType::Varchar(_))
            | (Datum::Bytes(_), DataType::Binary(_) | DataType::Varbinary(_))
            | (Datum::Date(_), DataType::Date)
            | (Datum::Timestamp(_), DataType::Timestamp(_) | DataType::TimestampLtz(_)) => true,
            _ => false,
        };
        if !ok {
            problems.push(ColumnRejected::WrongType {
                column: field.name.clone(),
                data_type: field.data_type,
                value: value.clone(),
            });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(RowRejected::Columns(problems))
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::table::datum::Timestamp;
    use crate::table::testkit::keyed_schema;

    fn table_with(ty: &str) -> TableSchema {
        let (data_type, _) = DataType::parse(ty).unwrap();
        keyed_schema(&[("id", DataType::Int), ("t", data_type)], &["id"], &[])
    }

    fn ts_row(millis: i64, nanos_of_milli: u32) -> Row {
        vec![
            Datum::Int(1),
            Datum::Timestamp(Timestamp {
                millis,
                nanos_of_milli,
            }),
        ]
    }

    #[test]
    fn a_timestamp_its_column_cannot_store_is_rejected() {
        // i64 microseconds for precisions 4..=6, i64 nanoseconds for 7..=9; milliseconds
        // (0..=3) hold any i64.
        let micros = table_with("TIMESTAMP(6)");
        assert!(check_row(&micros, &ts_row(i64::MAX / 1000, 807_999)).is_ok());
        let err = check_row(&micros, &ts_row(i64::MAX / 1000, 808_000))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("column `t`") && err.contains("out of range"),
            "{err}"
        );
        assert!(check_row(&micros, &ts_row(i64::MIN / 1000 - 1, 0)).is_err());
        let nanos = table_with("TIMESTAMP(9)");
        assert!(check_row(&nanos, &ts_row(i64::MAX / 1_000_000, 0)).is_ok());
        assert!(check_row(&nanos, &ts_row(i64::MAX / 1_000_000 + 1, 0)).is_err());
        let millis = table_with("TIMESTAMP_LTZ(3)");
        assert!(check_row(&millis, &ts_row(i64::MAX, 0)).is_ok());
        assert!(check_row(&millis, &ts_row(i64::MIN, 0)).is_ok());
    }

    #[test]
    fn a_decimal_past_its_precision_is_rejected_before_the_writer() {
        let table = table_with("DECIMAL(5, 2)");
        let row = |unscaled| vec![Datum::Int(1), Datum::Decimal(unscaled)];
        assert!(check_row(&table, &row(99_999)).is_ok());
        assert!(check_row(&table, &row(-99_999)).is_ok());
        let err = check_row(&table, &row(100_000)).unwrap_err().to_string();
        assert!(
            err.contains("column `t`")
                && err.contains("DECIMAL(5, 2)")
                && err.contains("more than 5 digits"),
            "{err}"
        );
        // What the check lets through, the writer's BinaryRow encoding takes.
        assert!(
            binary_row::serialize(&row(-99_999), &[DataType::Int, table.fields[1].data_type])
                .is_ok()
        );
    }

    /// A change checked against schema 0 reaching a writer at schema 1 (`age` widened,
    /// `city` added): laid out by field id, widened, the new column null, checked again.
    #[tokio::test]
    async fn a_change_of_an_older_schema_is_laid_out_in_the_new_one() {
        use crate::table::{TableIdentifier, Warehouse};
        let warehouse = Warehouse::in_memory();
        let id = TableIdentifier::parse("db.t").unwrap();
        let schema = keyed_schema(
            &[("id", DataType::Int), ("age", DataType::Int)],
            &["id"],
            &[("bucket", "1")],
        );
        let old = Table::create(&warehouse, &id, schema).await.unwrap();
        let change = RowCheck::new(&old)
            .unwrap()
            .check(RowKind::Insert, vec![Datum::Int(1), Datum::Int(30)])
            .unwrap()
            .unwrap();
        assert_eq!(change.schema_id(), 0);
        let new =
            crate::lsm::evolve_table(&old, |_| Ok(crate::table::testkit::widen_age_add_city()))
                .await
                .unwrap();
        let check = RowCheck::new(&new).unwrap();
        let upgraded = check.upgrade(change, old.schema()).unwrap().unwrap();
        assert_eq!(upgraded.schema_id(), 1);
        assert_eq!(
            upgraded.row(),
            &vec![Datum::Int(1), Datum::BigInt(30), Datum::Null]
        );
        assert_eq!(upgraded.kind(), RowKind::Insert);
        // A change of the current schema passes through unchanged.
        let same = check
            .check(
                RowKind::Delete,
                vec![Datum::Int(2), Datum::Null, Datum::Null],
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            check.upgrade(same.clone(), new.schema()).unwrap(),
            Some(same)
        );
    }
}
