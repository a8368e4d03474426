//! `lakejoin table alter`: schema evolution by hand, the same change a CDC pipeline makes
//! on its own (`table::schema_change`): `--add-column 'city STRING'` appends a nullable
//! column with a new field id, `--widen 'age BIGINT'` widens a column's type. All the
//! changes of one call land in one new schema file, `schema/schema-<n+1>`, or none do.

use std::io::Write;

use super::Outcome;
use super::table::{TableLocation, stdout_error};
use crate::error::{Error, Result};
use crate::table::schema_change::SchemaChange;
use crate::table::types::DataType;

/// `NAME TYPE` (or `NAME:TYPE`, as `table create --column` takes it).
fn parse_column(text: &str, flag: &str) -> std::result::Result<(String, DataType), String> {
    let trimmed = text.trim();
    let split = trimmed
        .split_once(':')
        .or_else(|| trimmed.split_once(char::is_whitespace));
    let Some((name, ty)) = split.filter(|(n, t)| !n.trim().is_empty() && !t.trim().is_empty())
    else {
        return Err(format!(
            "{flag} `{text}` must be 'NAME TYPE', e.g. 'city STRING'"
        ));
    };
    match DataType::parse(ty) {
        Ok((_, false)) => Err(format!(
            "{flag} `{text}`: a column cannot be made NOT NULL (Paimon adds and widens \
             columns nullable or as they are)"
        )),
        Ok((data_type, true)) => Ok((name.trim().to_string(), data_type)),
        Err(e) => Err(format!("{flag} `{text}`: {e}")),
    }
}

/// Parses every flag (all problems at once) and publishes the next schema; prints it.
pub(super) async fn alter(
    location: &TableLocation,
    add_columns: &[String],
    widen: &[String],
) -> Result<Outcome> {
    let mut problems = Vec::new();
    let mut changes = Vec::new();
    for (flags, flag) in [(add_columns, "--add-column"), (widen, "--widen")] {
        for text in flags {
            match parse_column(text, flag) {
                Ok((name, data_type)) if flag == "--widen" => {
                    changes.push(SchemaChange::WidenColumn { name, data_type })
                }
                Ok((name, data_type)) => changes.push(SchemaChange::AddColumn { name, data_type }),
                Err(p) => problems.push(p),
            }
        }
    }
    if changes.is_empty() && problems.is_empty() {
        problems.push("nothing to change: give --add-column or --widen".into());
    }
    if !problems.is_empty() {
        return Err(Error::Config(problems.join("; ")));
    }
    let table = location.open().await?;
    let evolved = crate::lsm::evolve_table(&table, |_| Ok(changes.clone())).await?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{}", evolved.schema().to_json()).map_err(stdout_error)?;
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::types::MAX_LENGTH;

    #[test]
    fn columns_are_name_and_type() {
        assert_eq!(
            parse_column("city STRING", "--add-column"),
            Ok(("city".into(), DataType::Varchar(MAX_LENGTH)))
        );
        assert_eq!(
            parse_column(" price:DECIMAL(12, 2)", "--widen"),
            Ok((
                "price".into(),
                DataType::Decimal {
                    precision: 12,
                    scale: 2
                }
            ))
        );
        assert!(
            parse_column("city", "--add-column")
                .unwrap_err()
                .contains("'NAME TYPE'")
        );
        assert!(
            parse_column("city STRING NOT NULL", "--add-column")
                .unwrap_err()
                .contains("NOT NULL")
        );
        assert!(parse_column("city TEXTY", "--add-column").is_err());
    }

    #[tokio::test]
    async fn alter_publishes_one_schema_with_every_change_or_none() {
        let dir = tempfile::tempdir().unwrap();
        let location = TableLocation {
            warehouse: dir.path().display().to_string(),
            table: "db.t".into(),
            store_options: Vec::new(),
        };
        let warehouse =
            crate::table::Warehouse::from_uri(&location.warehouse, &Default::default()).unwrap();
        let id = crate::table::TableIdentifier::parse("db.t").unwrap();
        let schema = crate::table::testkit::keyed_schema(
            &[("id", DataType::Int), ("n", DataType::Int)],
            &["id"],
            &[("bucket", "1")],
        );
        crate::lsm::create_table(&warehouse, &id, schema)
            .await
            .unwrap();
        let refused = alter(&location, &["zip STRING".into()], &["n SMALLINT".into()])
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("`n` from INT to SMALLINT"), "{refused}");
        let bad_flags = alter(&location, &["zip".into()], &["n".into()])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            bad_flags.contains("--add-column `zip`") && bad_flags.contains("--widen `n`"),
            "{bad_flags}"
        );
        let table = crate::table::Table::open(&warehouse, &id).await.unwrap();
        assert_eq!(table.schema().id, 0, "nothing was written");
        alter(&location, &["zip STRING".into()], &["n BIGINT".into()])
            .await
            .unwrap();
        let table = crate::table::Table::open(&warehouse, &id).await.unwrap();
        let schema = table.schema();
        assert_eq!(schema.id, 1);
        assert_eq!(schema.fields[1].data_type, DataType::BigInt);
        assert_eq!(
            (schema.fields[2].id, schema.fields[2].name.as_str()),
            (2, "zip")
        );
    }
}
