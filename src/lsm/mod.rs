//! The log-structured merge tree on top of the table format: write buffer, merge engines,
//! flush, merge-on-read scan, compaction, snapshot expiry and orphan-file cleaning.

mod auto_compact;
mod changelog;
mod changelog_flush;
pub mod changes;
pub mod compact;
mod compact_changelog;
mod compact_steps;
pub(crate) mod compact_task;
pub mod expire;
mod expire_changelog;
mod flush;
pub mod levels;
pub mod merge;
pub mod orphan;
pub mod point_lookup;
pub mod reader;
pub mod row_check;
pub(crate) mod universal;
pub mod writer;

use crate::error::Result;
use crate::table::options::TableOptions;
use crate::table::schema::TableSchema;
use crate::table::{Table, TableIdentifier, Warehouse};

/// Creates a table, refusing merge options no reader could merge
/// ([`merge::validate`]) before its schema is published.
pub(crate) async fn create_table(
    warehouse: &Warehouse,
    identifier: &TableIdentifier,
    schema: TableSchema,
) -> Result<Table> {
    merge::validate(&schema, &TableOptions::from_map(&schema.options)?)?;
    Table::create(warehouse, identifier, schema).await
}

/// Publishes the next schema version ([`Table::evolve_schema`]), refusing one no reader
/// could merge (an added column an aggregation option names wrongly, …) before it is
/// written. Returns the table at its newest schema.
pub async fn evolve_table(
    table: &Table,
    plan: impl Fn(&TableSchema) -> Result<Vec<crate::table::schema_change::SchemaChange>>,
) -> Result<Table> {
    table
        .evolve_schema(plan, |next| {
            merge::validate(next, &TableOptions::from_map(&next.options)?)
        })
        .await
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::error::Error;
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;

    #[tokio::test]
    async fn a_table_no_reader_could_merge_is_not_created() {
        let warehouse = Warehouse::in_memory();
        let id = TableIdentifier::parse("db.t").unwrap();
        let schema = keyed_schema(
            &[("id", DataType::Int), ("name", DataType::Varchar(100))],
            &["id"],
            &[
                ("bucket", "1"),
                ("merge-engine", "aggregation"),
                ("fields.name.aggregate-function", "sum"),
            ],
        );
        let err = create_table(&warehouse, &id, schema).await.unwrap_err();
        assert!(err.to_string().contains("name"), "{err}");
        assert!(matches!(
            Table::open(&warehouse, &id).await,
            Err(Error::TableNotFound(_))
        ));
    }
}
