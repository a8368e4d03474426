//! `lakejoin validate`: checks a config file, and shows what its whole-database syncs
//! would do with the topics that match them now.
//!
//! The check of the file is offline and decides the exit code. The preview of a sync
//! needs the broker and the warehouse; when either cannot be reached it says so and
//! the file still counts as valid, since a sync picks its topics up once they appear.

use std::path::Path;
use std::time::Duration;

use super::Outcome;
use crate::error::Result;
use crate::pipeline::database_sync::{Preview, preview};
use crate::table::Warehouse;
use crate::table::schema::TableSchema;

/// How long the preview waits for a topic's first record.
const FIRST_RECORD_WAIT: Duration = Duration::from_secs(10);

/// Checks a config file: every problem on stderr (exit 1), or a one-line summary.
pub(crate) fn validate(path: &Path) -> Result<crate::config::Config> {
    let config = crate::config::load(path)?;
    println!("{}: {}", path.display(), config.summary());
    Ok(config)
}

/// [`validate`], then the preview of each whole-database sync.
pub(crate) async fn run(path: &Path) -> Result<Outcome> {
    let config = validate(path)?;
    for sync in &config.database_sync {
        println!("{}", sync.describe());
        let warehouse = match Warehouse::from_uri(&config.warehouse.uri, &config.warehouse.options)
        {
            Ok(w) => w,
            Err(e) => {
                println!("  (cannot open the warehouse to show its tables: {e})");
                continue;
            }
        };
        match preview(sync, &config, &warehouse, FIRST_RECORD_WAIT).await {
            Ok(tables) if tables.is_empty() => {
                println!("  no topic matches yet; tables are created as their topics appear")
            }
            Ok(tables) => {
                for (topic, table, what) in tables {
                    println!("  {topic} → {table}: {}", describe(&what));
                }
            }
            Err(e) => println!("  (cannot list the matching topics: {e})"),
        }
    }
    Ok(Outcome::Success)
}

fn describe(preview: &Preview) -> String {
    match preview {
        Preview::Exists(schema) => format!("exists, written as is ({})", columns(schema)),
        Preview::Declared => "defined by its [[table]]".into(),
        Preview::Claimed => "read by a single-table [[cdc]], not by this sync".into(),
        Preview::Create(schema) => format!("would be created: {}", columns(schema)),
        Preview::NoRecordYet => "no record yet; created from the first one that arrives".into(),
        Preview::Refused(why) => format!("cannot be created: {why}"),
    }
}

/// `id BIGINT NOT NULL, name STRING; primary key (id); bucket = 1, …`.
fn columns(schema: &TableSchema) -> String {
    let columns: Vec<String> = schema
        .fields
        .iter()
        .map(|f| format!("{} {}", f.name, f.type_string()))
        .collect();
    let options: Vec<String> = schema
        .options
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    format!(
        "{}; primary key ({}); {}",
        columns.join(", "),
        schema.primary_keys.join(", "),
        options.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_never_prints_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("connectors.toml");
        let text = "[kafka]\nbootstrap_servers = \"k:9092\"\n[kafka.properties]\n\
                    \"ssl.key.password\" = 55550123\n\
                    [warehouse]\nuri = \"s3://AKIAKEY:wJalrSecret@bucket/wh\"\n\
                    [warehouse.options]\naws_secret_access_key = 99990123\n";
        std::fs::write(&path, text).unwrap();
        let err = validate(&path).unwrap_err().to_string();
        assert!(err.contains("ssl.key.password"), "{err}");
        for secret in ["55550123", "99990123", "wJalrSecret"] {
            assert!(!err.contains(secret), "{secret} in {err}");
        }
    }
}
