//! A table whose object store injects faults, next to the same table through the plain
//! store (for checking), shared by the commit fault tests.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lakejoin::lsm::orphan::{OrphanCleanConfig, clean_orphan_files};
use lakejoin::table::{Table, TableIdentifier, Warehouse};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;

use super::faulty_store::FaultyStore;

/// The store under a faulty table.
#[derive(Debug, Clone, Copy)]
pub enum Backing {
    Memory,
    Local,
}

pub const BACKINGS: [Backing; 2] = [Backing::Memory, Backing::Local];

/// A table whose store injects faults, and the same table through the plain store.
pub struct Setup {
    pub faulty: Arc<FaultyStore>,
    pub table: Arc<Table>,
    pub clean: Arc<Table>,
    _dir: Option<tempfile::TempDir>,
}

/// `db.t`, a summing table (`support::cdc::summing_schema`), on `backing` behind a
/// [`FaultyStore`] seeded with `seed`.
pub async fn setup(backing: Backing, seed: u64, max_retries: u32) -> Setup {
    setup_schema(backing, seed, super::cdc::summing_schema(max_retries)).await
}

/// [`setup`] of a table with `schema`.
pub async fn setup_schema(
    backing: Backing,
    seed: u64,
    schema: lakejoin::table::schema::TableSchema,
) -> Setup {
    let (inner, dir): (Arc<dyn ObjectStore>, _) = match backing {
        Backing::Memory => (Arc::new(InMemory::new()), None),
        Backing::Local => {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
            (Arc::new(store), Some(dir))
        }
    };
    let faulty = FaultyStore::new(inner.clone(), seed);
    let id = TableIdentifier::parse("db.t").unwrap();
    let wh = Warehouse::new(faulty.clone(), Path::from("wh"));
    let table = Arc::new(Table::create(&wh, &id, schema).await.unwrap());
    let clean_wh = Warehouse::new(inner, Path::from("wh"));
    let clean = Arc::new(Table::open(&clean_wh, &id).await.unwrap());
    Setup {
        faulty,
        table,
        clean,
        _dir: dir,
    }
}

/// The properties of commit round `round`.
pub fn round_properties(round: usize) -> BTreeMap<String, String> {
    BTreeMap::from([("test.round".to_string(), round.to_string())])
}

/// Orphan cleaning of everything nothing references, whatever its age; what it removed.
pub async fn clean_every_orphan(table: &Table) -> Vec<lakejoin::lsm::orphan::OrphanFile> {
    let config = OrphanCleanConfig {
        older_than: Duration::ZERO,
        dry_run: false,
    };
    clean_orphan_files(table, &config).await.unwrap().removed
}
