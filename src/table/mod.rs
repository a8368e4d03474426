//! The Apache Paimon table format (pure encode/decode of its files) and the object-store
//! [`Table`] handle that reads snapshots and commits new ones.

pub mod binary_row;
pub mod bucket;
pub mod changelog_options;
pub mod check;
pub(crate) mod column_batch;
pub mod commit;
pub(crate) mod consumer;
pub mod data_file;
mod data_file_read;
pub mod datum;
pub(crate) mod deletion_vector;
pub(crate) mod dictionary_choice;
pub mod fence;
mod long_lived_changelog;
pub mod manifest;
pub mod options;
mod page_headers;
mod parquet_writer;
pub mod path;
pub mod row_kind;
pub mod schema;
pub mod schema_change;
pub mod snapshot;
#[cfg(test)]
pub(crate) mod testkit;
pub mod types;
pub(crate) mod warehouse;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use data_file::{DataFileRows, KeyValue};
use datum::Row;
use deletion_vector::DeletionFile;
use manifest::{FileKind, ManifestEntry, ManifestFileMeta};
use options::TableOptions;
use schema::TableSchema;
use snapshot::Snapshot;
pub use warehouse::{TableIdentifier, Warehouse};

/// How many object-store requests one table operation keeps in flight.
pub(crate) const IO_CONCURRENCY: usize = 16;

/// A handle on one Paimon table: its store, location and current schema.
#[derive(Debug)]
pub struct Table {
    store: Arc<dyn ObjectStore>,
    identifier: TableIdentifier,
    path: Path,
    local_root: Option<std::path::PathBuf>,
    schema: Arc<TableSchema>,
    options: TableOptions,
    /// Older schema versions referenced by data files, loaded on demand.
    schemas: Mutex<HashMap<i64, Arc<TableSchema>>>,
    /// The table's directory on the local filesystem, when the store is local.
    local_dir: Option<std::path::PathBuf>,
    /// Names of the manifests and manifest lists this handle writes.
    manifest_names: commit::ManifestNames,
}

impl Table {
    /// Creates the table by publishing `schema/schema-0` create-if-absent. The merge
    /// options are not checked here (the table format knows no merge engines): create
    /// tables through `crate::lsm::create_table`, which checks them first.
    pub async fn create(
        warehouse: &Warehouse,
        identifier: &TableIdentifier,
        schema: TableSchema,
    ) -> Result<Table> {
        let options = TableOptions::from_map(&schema.options)?;
        if options.bucket < 1 {
            return Err(Error::Config(format!(
                "table {identifier}: option `bucket` must be set to a fixed bucket count ≥ 1 \
                 (lakejoin writes fixed-bucket tables only)"
            )));
        }
        schema.validate()?;
        let path = warehouse.table_path(identifier);
        let location = path.clone().join("schema").join("schema-0");
        let put = create_object(
            &*warehouse.store,
            &location,
            PutPayload::from(schema.to_json().into_bytes()),
        )
        .await;
        match put {
            Ok(_) => {}
            Err(object_store::Error::AlreadyExists { .. }) => {
                return Err(Error::TableExists(identifier.to_string()));
            }
            Err(e) => return Err(Error::store(format!("writing {location}"), e)),
        }
        Table::from_parts(warehouse, identifier, path, schema, options)
    }

    /// Opens an existing table at its newest schema.
    pub async fn open(warehouse: &Warehouse, identifier: &TableIdentifier) -> Result<Table> {
        let path = warehouse.table_path(identifier);
        let schema = newest_schema(&*warehouse.store, &path, identifier).await?;
        let options = TableOptions::from_map(&schema.options)?;
        Table::from_parts(warehouse, identifier, path, schema, options)
    }

    /// The id of the table's newest schema, listed now (another process may have
    /// evolved it since this handle was opened).
    pub async fn newest_schema_id(&self) -> Result<i64> {
        let ids = list_numbered(&*self.store, &self.path.clone().join("schema"), "schema-").await?;
        Ok(ids.into_iter().max().unwrap_or(self.schema.id))
    }

    /// A handle on this table at its newest schema (this one's when that is newest).
    /// Older schema versions this handle loaded are kept.
    pub async fn at_newest_schema(&self) -> Result<Table> {
        let schema = newest_schema(&*self.store, &self.path, &self.identifier).await?;
        self.with_schema(schema)
    }

    /// Publishes the next schema version (Java's `SchemaManager.commitChanges`): `plan`
    /// says what changes on the newest schema, `check` vets the result (the merge
    /// options, which this layer does not know), and `schema-<n+1>` is written
    /// create-if-absent. When another writer published `schema-<n+1>` first, the plan is
    /// made again on its schema, so a change is never written over another. An empty plan
    /// writes nothing. Returns a handle at the newest schema.
    pub async fn evolve_schema(
        &self,
        plan: impl Fn(&TableSchema) -> Result<Vec<schema_change::SchemaChange>>,
        check: impl Fn(&TableSchema) -> Result<()>,
    ) -> Result<Table> {
        loop {
            let current = newest_schema(&*self.store, &self.path, &self.identifier).await?;
            let changes = plan(&current)?;
            if changes.is_empty() {
                return self.with_schema(current);
            }
            let next = current.evolve(&changes)?;
            TableOptions::from_map(&next.options)?;
            check(&next)?;
            let location = self.path_of(&format!("schema/schema-{}", next.id));
            let payload = PutPayload::from(next.to_json().into_bytes());
            match create_object(&*self.store, &location, payload).await {
                Ok(()) => {
                    tracing::info!(table = %self.identifier, schema = next.id,
                        changes = %changes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                        "schema evolved");
                    return self.with_schema(next);
                }
                Err(object_store::Error::AlreadyExists { .. }) => continue,
                Err(e) => return Err(Error::store(format!("writing {location}"), e)),
            }
        }
    }

    /// This table at `schema`, sharing the store and the schema versions loaded so far.
    fn with_schema(&self, schema: TableSchema) -> Result<Table> {
        let options = TableOptions::from_map(&schema.options)?;
        let schema = Arc::new(schema);
        let mut schemas = self.schemas.lock().map(|m| m.clone()).unwrap_or_default();
        schemas.insert(schema.id, schema.clone());
        Ok(Table {
            store: self.store.clone(),
            identifier: self.identifier.clone(),
            path: self.path.clone(),
            local_root: self.local_root.clone(),
            schema,
            options,
            schemas: Mutex::new(schemas),
            local_dir: self.local_dir.clone(),
            manifest_names: commit::ManifestNames::new(),
        })
    }

    fn from_parts(
        warehouse: &Warehouse,
        identifier: &TableIdentifier,
        path: Path,
        schema: TableSchema,
        options: TableOptions,
    ) -> Result<Table> {
        let schema = Arc::new(schema);
        let schemas = HashMap::from([(schema.id, schema.clone())]);
        let local_dir = warehouse.local_root.as_ref().map(|root| {
            path.parts()
                .fold(root.clone(), |dir, part| dir.join(part.as_ref()))
        });
        Ok(Table {
            local_dir,
            store: warehouse.store.clone(),
            identifier: identifier.clone(),
            path,
            local_root: warehouse.local_root.clone(),
            schema,
            options,
            schemas: Mutex::new(schemas),
            manifest_names: commit::ManifestNames::new(),
        })
    }

    pub(crate) fn identifier(&self) -> &TableIdentifier {
        &self.identifier
    }

    pub fn schema(&self) -> &Arc<TableSchema> {
        &self.schema
    }

    pub fn options(&self) -> &TableOptions {
        &self.options
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The local file behind an object path, when the warehouse is a local directory.
    pub fn local_file(&self, location: &Path) -> Option<std::path::PathBuf> {
        let root = self.local_root.as_ref()?;
        let mut path = root.clone();
        for part in location.parts() {
            path.push(part.as_ref());
        }
        Some(path)
    }

    /// The table's directory on the local filesystem, when its store is local.
    pub fn local_dir(&self) -> Option<&std::path::Path> {
        self.local_dir.as_deref()
    }

    /// `<table>/<relative>`.
    pub fn path_of(&self, relative: &str) -> Path {
        let mut p = self.path.clone();
        for part in relative.split('/').filter(|s| !s.is_empty()) {
            p = p.join(raw_part(part));
        }
        p
    }

    pub(crate) fn snapshot_dir(&self) -> Path {
        self.path.clone().join("snapshot")
    }

    pub(crate) fn manifest_path(&self, name: &str) -> Path {
        self.path.clone().join("manifest").join(name)
    }

    /// Schema with id `id` (the current one, or an older version a data file names).
    pub(crate) async fn schema_by_id(&self, id: i64) -> Result<Arc<TableSchema>> {
        if let Some(s) = self.schemas.lock().ok().and_then(|m| m.get(&id).cloned()) {
            return Ok(s);
        }
        let location = self.path_of(&format!("schema/schema-{id}"));
        let text = read_text(&*self.store, &location).await?;
        let schema = Arc::new(TableSchema::from_json(&text).map_err(|e| e.in_file(&location))?);
        if let Ok(mut m) = self.schemas.lock() {
            m.insert(id, schema.clone());
        }
        Ok(schema)
    }

    /// Id of the newest snapshot, found as Paimon does: trust `LATEST` only if
    /// `snapshot-<h>` exists and `snapshot-<h+1>` does not, else list the directory.
    pub async fn latest_snapshot_id(&self) -> Result<Option<i64>> {
        let dir = self.snapshot_dir();
        if let Ok(text) = read_text(&*self.store, &dir.clone().join("LATEST")).await
            && let Ok(hint) = text.trim().parse::<i64>()
            && self.snapshot_exists(hint).await?
            && !self.snapshot_exists(hint + 1).await?
        {
            return Ok(Some(hint));
        }
        Ok(self.snapshot_ids().await?.into_iter().max())
    }

    /// Ids of all snapshot files present, ascending.
    pub async fn snapshot_ids(&self) -> Result<Vec<i64>> {
        let mut ids = list_numbered(&*self.store, &self.snapshot_dir(), "snapshot-").await?;
        ids.sort_unstable();
        Ok(ids)
    }

    async fn snapshot_exists(&self, id: i64) -> Result<bool> {
        let location = self.snapshot_dir().join(format!("snapshot-{id}"));
        match self.store.head(&location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(Error::store(format!("checking {location}"), e)),
        }
    }

    pub async fn snapshot(&self, id: i64) -> Result<Snapshot> {
        let location = self.snapshot_dir().join(format!("snapshot-{id}"));
        match read_bytes(&*self.store, &location).await {
            Ok(bytes) => Snapshot::from_json(&String::from_utf8_lossy(&bytes))
                .map_err(|e| e.in_file(&location)),
            Err(Error::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }) => Err(Error::SnapshotNotFound {
                table: self.identifier.to_string(),
                id,
            }),
            Err(e) => Err(e),
        }
    }

    pub async fn latest_snapshot(&self) -> Result<Option<Snapshot>> {
        match self.latest_snapshot_id().await? {
            Some(id) => Ok(Some(self.snapshot(id).await?)),
            None => Ok(None),
        }
    }

    /// The newest snapshot committed by `commit_user` (a writer resumes from it: its
    /// properties hold the input offsets it covered, its identifier the last one used).
    pub async fn latest_snapshot_of_user(&self, commit_user: &str) -> Result<Option<Snapshot>> {
        Ok(self.resume_point(commit_user).await?.0)
    }

    /// [`Self::latest_snapshot_of_user`], and the newest snapshot id the search saw
    /// (0 for none): a snapshot of that user with a higher id was published after the
    /// search listed the table, so a writer resuming from the first must not commit
    /// over it (see `TableWriter::resumed_from`).
    pub(crate) async fn resume_point(&self, commit_user: &str) -> Result<(Option<Snapshot>, i64)> {
        let ids = self.snapshot_ids().await?;
        let seen = ids.last().copied().unwrap_or(0);
        for id in ids.into_iter().rev() {
            match self.snapshot(id).await {
                Ok(s) if s.commit_user == commit_user => return Ok((Some(s), seen)),
                Ok(_) => {}
                // Expired concurrently: everything older is gone too.
                Err(Error::SnapshotNotFound { .. }) => return Ok((None, seen)),
                Err(e) => return Err(e),
            }
        }
        Ok((None, seen))
    }

    pub async fn read_manifest_list(&self, name: &str) -> Result<Vec<ManifestFileMeta>> {
        let location = self.manifest_path(name);
        let bytes = read_bytes(&*self.store, &location).await?;
        manifest::decode_manifest_list(&bytes).map_err(|e| e.in_file(&location))
    }

    pub async fn read_manifest(&self, name: &str) -> Result<Vec<ManifestEntry>> {
        let location = self.manifest_path(name);
        let bytes = read_bytes(&*self.store, &location).await?;
        manifest::decode_manifest(&bytes).map_err(|e| e.in_file(&location))
    }

    /// Every manifest named by the snapshot's base and delta lists, in order.
    pub async fn snapshot_manifests(&self, snapshot: &Snapshot) -> Result<Vec<ManifestFileMeta>> {
        let mut metas = self
            .read_manifest_list(&snapshot.base_manifest_list)
            .await?;
        metas.extend(
            self.read_manifest_list(&snapshot.delta_manifest_list)
                .await?,
        );
        Ok(metas)
    }

    /// The live data files of a snapshot: all ADD entries not cancelled by a DELETE.
    pub async fn live_files(&self, snapshot: &Snapshot) -> Result<Vec<ManifestEntry>> {
        let metas = self.snapshot_manifests(snapshot).await?;
        let entries = self.read_manifests(&metas).await?;
        Ok(live_entries(entries))
    }

    /// Reads manifests concurrently, returning their entries in manifest order.
    pub async fn read_manifests(&self, metas: &[ManifestFileMeta]) -> Result<Vec<ManifestEntry>> {
        // Futures are built up front: a closure inside the stream type would make the
        // caller's future fail the `Send` check of `tokio::spawn`.
        let reads: Vec<_> = metas
            .iter()
            .map(|m| self.read_manifest(&m.file_name))
            .collect();
        let lists: Vec<Vec<ManifestEntry>> = futures::stream::iter(reads)
            .buffered(IO_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(lists.into_iter().flatten().collect())
    }

    /// Partition values of a serialized partition row.
    pub(crate) fn partition_values(&self, partition: &[u8]) -> Result<Row> {
        let types = self.schema.types_of(&self.schema.partition_indices());
        binary_row::deserialize(partition, &types)
    }

    /// Directory of a bucket: `<table>/<k=v/...>/bucket-<n>`.
    pub(crate) fn bucket_path(&self, partition: &Row, bucket: i32) -> Path {
        let indices = self.schema.partition_indices();
        let relative = path::partition_path(
            &self.schema.partition_keys,
            partition,
            &self.schema.types_of(&indices),
            &self.options.partition_default_name,
        );
        self.path_of(&format!("{relative}{}", path::bucket_dir(bucket)))
    }

    /// Location of data file `file_name` in a bucket directory.
    pub(crate) fn data_file_location(&self, partition: &Row, bucket: i32, file_name: &str) -> Path {
        self.bucket_path(partition, bucket)
            .join(raw_part(file_name))
    }

    /// Location of the data file an entry names.
    pub fn data_file_path(&self, entry: &ManifestEntry) -> Result<Path> {
        if let Some(external) = &entry.file.external_path {
            return Err(Error::format(format!(
                "data file {} lives at the external path {external}, which lakejoin does not read",
                entry.file.file_name
            )));
        }
        let partition = self.partition_values(&entry.partition).map_err(|e| {
            Error::format(format!(
                "partition of data file {}: {e}",
                entry.file.file_name
            ))
        })?;
        Ok(self.data_file_location(&partition, entry.bucket, &entry.file.file_name))
    }

    /// Reads a data file into rows of the current schema, without the rows its deletion
    /// vector (when it has one in the snapshot read) marks deleted.
    pub(crate) async fn read_data_file(
        &self,
        entry: &ManifestEntry,
        deletion: Option<&DeletionFile>,
    ) -> Result<Vec<KeyValue>> {
        self.open_data_file(entry, deletion).await?.collect()
    }

    /// A data file's rows in the current schema, less those `deletion` marks deleted, to
    /// be decoded a batch at a time. The file's (compressed) bytes are read now.
    pub(crate) async fn open_data_file(
        &self,
        entry: &ManifestEntry,
        deletion: Option<&DeletionFile>,
    ) -> Result<DataFileRows> {
        let location = self.data_file_path(entry)?;
        if entry.file.schema_id > self.schema.id {
            // Read in this older schema, its new columns would be dropped and widened
            // values cut; a compaction would then write that loss back.
            return Err(Error::format(format!(
                "data file {} is in schema {}, newer than schema {} this handle reads in; \
                 open the table again (another writer evolved it)",
                entry.file.file_name, entry.file.schema_id, self.schema.id
            )));
        }
        let bytes = read_bytes(&*self.store, &location).await?;
        let file_schema = self.schema_by_id(entry.file.schema_id).await?;
        let format = entry
            .file
            .file_name
            .rsplit('.')
            .find(|ext| !matches!(*ext, "gz" | "zst" | "zstd" | "lz4" | "snappy"))
            .unwrap_or("");
        if format != "parquet" {
            return Err(Error::format(format!(
                "data file {} is not Parquet; lakejoin reads Parquet data files only",
                entry.file.file_name
            )));
        }
        let deleted = match deletion {
            Some(file) => Some(self.read_deletion_vector(file).await?),
            None => None,
        };
        DataFileRows::open(bytes, &file_schema, &self.schema, deleted)
            .map(|rows| rows.in_file(location.to_string()))
            .map_err(|e| e.in_file(&location))
    }
}

/// A path segment taken literally. Partition directories are already escaped the Paimon
/// way (`a%2Fb`); object_store's own encoding would escape the `%` a second time and put
/// files where no other Paimon reader looks.
fn raw_part(segment: &str) -> object_store::path::PathPart<'_> {
    // Only `.`, `..` or control characters fail to parse; encoding them is the safe choice.
    object_store::path::PathPart::parse(segment)
        .unwrap_or_else(|_| object_store::path::PathPart::from(segment))
}

/// Applies ADD/DELETE cancellation (docs/format.md §4.1): the ADD entries whose identity no
/// DELETE entry names, in their original order.
pub(crate) fn live_entries(entries: Vec<ManifestEntry>) -> Vec<ManifestEntry> {
    let deleted: HashSet<_> = entries
        .iter()
        .filter(|e| e.kind == FileKind::Delete)
        .map(|e| e.identifier())
        .collect();
    entries
        .into_iter()
        .filter(|e| e.kind == FileKind::Add && !deleted.contains(&e.identifier()))
        .collect()
}

/// The objects directly under `dir`; a directory that does not exist holds none.
pub(crate) async fn list_dir(store: &dyn ObjectStore, dir: &Path) -> Result<Vec<ObjectMeta>> {
    match store.list_with_delimiter(Some(dir)).await {
        Ok(listing) => Ok(listing.objects),
        Err(object_store::Error::NotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(Error::store(format!("listing {dir}"), e)),
    }
}

/// Writes `payload` to `location` only if no object is there yet: the store's atomic
/// create, which is how schema, snapshot and epoch files are claimed. The caller decides
/// what `AlreadyExists` means.
pub(crate) async fn create_object(
    store: &dyn ObjectStore,
    location: &Path,
    payload: PutPayload,
) -> object_store::Result<()> {
    store
        .put_opts(location, payload, PutOptions::from(PutMode::Create))
        .await
        .map(|_| ())
}

/// The newest schema of the table at `path`, by listing `schema/` (Paimon's
/// `SchemaManager.latest`).
async fn newest_schema(
    store: &dyn ObjectStore,
    path: &Path,
    identifier: &TableIdentifier,
) -> Result<TableSchema> {
    let schema_dir = path.clone().join("schema");
    let ids = list_numbered(store, &schema_dir, "schema-").await?;
    let Some(&latest) = ids.iter().max() else {
        return Err(Error::TableNotFound(format!(
            "{identifier} (no schema under {schema_dir})"
        )));
    };
    let location = schema_dir.join(format!("schema-{latest}"));
    let text = read_text(store, &location).await?;
    TableSchema::from_json(&text).map_err(|e| e.in_file(&location))
}

/// The numbers `N` of the objects named `<prefix>N` directly under `dir`.
async fn list_numbered(store: &dyn ObjectStore, dir: &Path, prefix: &str) -> Result<Vec<i64>> {
    Ok(list_dir(store, dir)
        .await?
        .iter()
        .filter_map(|o| o.location.filename())
        .filter_map(|name| name.strip_prefix(prefix))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse::<i64>().ok())
        .collect())
}

/// Reads a whole object. A body shorter than the range the store announced (a response
/// cut off mid-way) is an error rather than a short file that would decode wrongly.
pub(crate) async fn read_bytes(store: &dyn ObjectStore, location: &Path) -> Result<Bytes> {
    let result = store
        .get(location)
        .await
        .map_err(|e| Error::store(format!("reading {location}"), e))?;
    let expected = result.range.end.saturating_sub(result.range.start);
    let bytes = result
        .bytes()
        .await
        .map_err(|e| Error::store(format!("reading {location}"), e))?;
    if bytes.len() as u64 != expected {
        return Err(Error::TruncatedRead {
            location: location.to_string(),
            expected,
            actual: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

pub(crate) async fn read_text(store: &dyn ObjectStore, location: &Path) -> Result<String> {
    let bytes = read_bytes(store, location).await?;
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Error::format(format!("{location} is not UTF-8 text")))
}
