//! A warehouse: an object store plus the root path under which `<db>.db/<table>` live,
//! the same layout as Paimon's filesystem catalog.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use url::Url;

use crate::error::{Error, Result};
use crate::secret::{Redactor, redact_uri};

/// Where tables live.
#[derive(Debug, Clone)]
pub struct Warehouse {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) root: Path,
    /// The local directory behind `store` when it is a local filesystem: readers open
    /// files there directly, and orphan cleaning looks there for the staging files
    /// (`<name>#<n>`) that object_store hides.
    pub local_root: Option<PathBuf>,
}

impl Warehouse {
    pub fn new(store: Arc<dyn ObjectStore>, root: Path) -> Self {
        Warehouse {
            store,
            root,
            local_root: None,
        }
    }

    /// A warehouse in a fresh in-memory store (tests, `memory://`).
    pub fn in_memory() -> Self {
        Warehouse::new(Arc::new(InMemory::new()), Path::from("warehouse"))
    }

    /// Opens `file:///dir`, a plain absolute or relative directory, `memory://`, or
    /// `s3://bucket/prefix` (also `gs://`, `az://`, `http(s)://` where built in), with
    /// object_store options such as `aws_endpoint`, `aws_access_key_id`, `aws_allow_http`.
    pub fn from_uri(uri: &str, options: &BTreeMap<String, String>) -> Result<Self> {
        let trimmed = uri.trim();
        // Messages quote the URI with its credentials (`s3://key:secret@…`) masked.
        let shown = redact_uri(uri);
        if trimmed.is_empty() {
            return Err(Error::Config("warehouse URI is empty".into()));
        }
        if trimmed.starts_with("memory:") {
            return Ok(Warehouse::in_memory());
        }
        let url = if trimmed.contains("://") {
            Url::parse(trimmed)
                .map_err(|e| Error::Config(format!("warehouse URI `{shown}`: {e}")))?
        } else {
            // A local directory; it must exist for canonicalization, so create it.
            std::fs::create_dir_all(trimmed).map_err(|e| Error::Io {
                context: format!("creating warehouse directory {trimmed}"),
                source: e,
            })?;
            let absolute = std::fs::canonicalize(trimmed).map_err(|e| Error::Io {
                context: format!("resolving warehouse directory {trimmed}"),
                source: e,
            })?;
            Url::from_directory_path(&absolute)
                .map_err(|_| Error::Config(format!("warehouse path `{shown}` is not absolute")))?
        };
        if url.scheme() == "file" {
            let dir = url.to_file_path().map_err(|_| {
                Error::Config(format!("warehouse URI `{shown}` is not a local path"))
            })?;
            std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
                context: format!("creating warehouse directory {}", dir.display()),
                source: e,
            })?;
            // Rooting the store at the warehouse keeps every object path relative and
            // lets LocalFileSystem create directories as needed. With fsync, each put
            // returns once the file and its directory entry are on disk, as an object
            // store's put is durable when it returns; a commit writes its data files,
            // manifests and lists before its snapshot, so a snapshot (and the Kafka
            // offsets it carries) never survives a power loss that its files do not.
            let store = object_store::local::LocalFileSystem::new_with_prefix(&dir)
                .map_err(|e| Error::store(format!("opening {}", dir.display()), e))?
                .with_fsync(true);
            let mut warehouse = Warehouse::new(Arc::new(store), Path::default());
            warehouse.local_root = Some(dir);
            return Ok(warehouse);
        }
        let (store, root) = object_store::parse_url_opts(&url, options.iter()).map_err(|e| {
            let message = format!("warehouse URI `{shown}`: {e}");
            Error::Config(Redactor::from_pairs(options).redact(&message))
        })?;
        Ok(Warehouse::new(Arc::from(store), root))
    }

    /// Path of table `db.name`: `<root>/<db>.db/<name>`.
    pub(crate) fn table_path(&self, identifier: &TableIdentifier) -> Path {
        self.root
            .clone()
            .join(format!("{}.db", identifier.database))
            .join(identifier.name.as_str())
    }
}

/// `database.table`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableIdentifier {
    pub(crate) database: String,
    pub(crate) name: String,
}

impl TableIdentifier {
    pub fn parse(text: &str) -> Result<Self> {
        let (db, name) = text.split_once('.').ok_or_else(|| {
            Error::Config(format!(
                "table `{text}` must be written as <database>.<table>"
            ))
        })?;
        let valid = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !valid(db) || !valid(name) {
            return Err(Error::Config(format!(
                "table `{text}`: database and table names may use letters, digits, `_` and `-`"
            )));
        }
        Ok(TableIdentifier {
            database: db.to_string(),
            name: name.to_string(),
        })
    }
}

impl std::fmt::Display for TableIdentifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.database, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_warehouse_syncs_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_str().unwrap();
        let wh = Warehouse::from_uri(uri, &BTreeMap::new()).unwrap();
        // LocalFileSystem shows its settings only through Debug.
        let shown = format!("{:?}", wh.store);
        assert!(shown.contains("fsync: true"), "{shown}");
    }

    #[test]
    fn parses_identifiers() {
        let id = TableIdentifier::parse("shop.customers").unwrap();
        assert_eq!(id.to_string(), "shop.customers");
        assert!(TableIdentifier::parse("customers").is_err());
        assert!(TableIdentifier::parse("a.b/c").is_err());
        let wh = Warehouse::in_memory();
        assert_eq!(wh.table_path(&id).as_ref(), "warehouse/shop.db/customers");
    }
}

#[cfg(test)]
mod secret_tests {
    use super::*;

    #[test]
    fn uri_errors_mask_credentials() {
        let options = BTreeMap::new();
        let Err(err) = Warehouse::from_uri("s3://AKIAKEY:wJalrSecret@bucket:port/wh", &options)
        else {
            panic!("an invalid port is an error")
        };
        let message = err.to_string();
        assert!(!message.contains("wJalrSecret"), "{message}");
        assert!(message.contains("s3://AKIAKEY:***@bucket"), "{message}");
    }
}
