//! Writer fencing: one writer per table at a time, in the spirit of slatedb's writer
//! epoch.
//!
//! A writer claims the table by creating `<table>/_lakejoin/writer/epoch-<E+1>`
//! create-if-absent, where `E` is the newest epoch there. Epochs are therefore contiguous,
//! and a writer at epoch `E` has been superseded exactly when `epoch-<E+1>` exists: that
//! one HEAD request is checked right before every snapshot is published
//! ([`WriterFence::check`]), so a fenced writer stops publishing.
//!
//! The holder keeps its claim alive by rewriting its epoch file every heartbeat interval.
//! A claim whose file was last written longer ago than the lease timeout (by the store's
//! clock, compared with this host's: they must agree to well within the lease), or that
//! its holder released on shutdown, may be taken over. A second writer either fails fast
//! naming the holder, or stands by and takes over once the lease has expired.
//!
//! The directory starts with `_`, which Paimon's readers and Java's partition listing
//! treat as hidden, and it is neither `snapshot/`, `manifest/` nor a bucket directory, so
//! Paimon readers and lakejoin's orphan cleaning leave it alone. Epoch files are never
//! deleted: `check` relies on `epoch-<E+1>` staying once created.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use super::{Table, create_object, list_dir, read_bytes};
use crate::error::{Error, Result};

/// Directory of the epoch files, relative to the table.
pub(crate) const FENCE_DIR: &str = "_lakejoin/writer";

/// What a writer does when another writer holds the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnConflict {
    /// Refuse to start, naming the holder.
    #[default]
    Fail,
    /// Wait, and take over once the holder's lease expires.
    Standby,
}

/// How a writer claims and keeps a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceOptions {
    pub on_conflict: OnConflict,
    /// A holder whose epoch file is older than this is taken to be dead.
    pub lease_timeout: Duration,
    /// How often the holder rewrites its epoch file (and a standby looks again).
    pub heartbeat_interval: Duration,
}

impl Default for FenceOptions {
    fn default() -> Self {
        FenceOptions {
            on_conflict: OnConflict::Fail,
            lease_timeout: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(5),
        }
    }
}

/// Content of an epoch file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EpochRecord {
    epoch: u64,
    /// Who holds it, for messages (process, host).
    holder: String,
    /// Unique per claim: tells our claim from another's with the same holder name.
    claim: String,
    /// Heartbeats written so far.
    beat: u64,
    /// Set by the holder on a clean shutdown: the next writer need not wait.
    #[serde(default)]
    released: bool,
    /// The deployment the holder belongs to (see [`WriterFence::acquire_as`]).
    #[serde(default)]
    instance: Option<String>,
}

/// The newest claim on a table.
#[derive(Debug)]
struct Newest {
    record: EpochRecord,
    age: Duration,
}

/// A claimed epoch of one table. Check it before publishing; keep it alive with
/// [`WriterFence::heartbeat`].
#[derive(Debug)]
pub struct WriterFence {
    store: Arc<dyn ObjectStore>,
    dir: Path,
    table: String,
    holder: String,
    instance: Option<String>,
    claim: String,
    epoch: u64,
    beat: AtomicU64,
    options: FenceOptions,
}

impl WriterFence {
    /// Claims `table` for `holder`: at once when nobody holds it (or the holder's lease
    /// expired or was released); otherwise fails with `Error::WriterFenced`
    /// (`OnConflict::Fail`) or waits for the lease to expire (`OnConflict::Standby`).
    pub async fn acquire(table: &Table, holder: &str, options: FenceOptions) -> Result<Self> {
        Self::claim(table, holder, None, options).await
    }

    /// [`acquire`](Self::acquire) for one `instance` of a deployment (its consumer group
    /// on its host): a claim held by the same instance is taken over at once, since it is
    /// an earlier run of this one that crashed or is still stopping. A restart after
    /// `kill -9` then resumes at once instead of waiting out the lease, and that earlier
    /// run, should it still be alive, is fenced like any superseded writer.
    pub(crate) async fn acquire_as(
        table: &Table,
        holder: &str,
        instance: &str,
        options: FenceOptions,
    ) -> Result<Self> {
        Self::claim(table, holder, Some(instance), options).await
    }

    async fn claim(
        table: &Table,
        holder: &str,
        instance: Option<&str>,
        options: FenceOptions,
    ) -> Result<Self> {
        let dir = table.path_of(FENCE_DIR);
        let store = table.store().clone();
        let claim = uuid::Uuid::new_v4().to_string();
        let mut waiting_on: Option<u64> = None;
        loop {
            let newest = newest_claim(&*store, &dir).await?;
            let next = match &newest {
                None => 1,
                Some(n) if n.record.released || n.age >= options.lease_timeout => {
                    n.record.epoch + 1
                }
                Some(n) if instance.is_some() && n.record.instance.as_deref() == instance => {
                    tracing::info!(table = %table.identifier(), holder = %n.record.holder,
                        epoch = n.record.epoch,
                        "taking the table over from an earlier run of this instance");
                    n.record.epoch + 1
                }
                Some(n) => {
                    if options.on_conflict == OnConflict::Fail {
                        return Err(Error::WriterFenced {
                            table: table.identifier().to_string(),
                            holder: n.record.holder.clone(),
                            epoch: n.record.epoch,
                            action: "refuses to start (writer on_conflict = \"fail\")",
                        });
                    }
                    if waiting_on != Some(n.record.epoch) {
                        tracing::info!(table = %table.identifier(), holder = %n.record.holder,
                            epoch = n.record.epoch, "table is held by another writer; standing by");
                        waiting_on = Some(n.record.epoch);
                    }
                    tokio::time::sleep(options.heartbeat_interval).await;
                    continue;
                }
            };
            let record = EpochRecord {
                epoch: next,
                holder: holder.to_string(),
                claim: claim.clone(),
                beat: 0,
                released: false,
                instance: instance.map(str::to_string),
            };
            let location = dir.clone().join(format!("epoch-{next}"));
            let put =
                create_object(&*store, &location, PutPayload::from(record_json(&record))).await;
            let claimed = match put {
                Ok(_) => true,
                Err(object_store::Error::AlreadyExists { .. }) => {
                    // Taken by someone else, unless an earlier write of ours was applied.
                    read_record(&*store, &location).await?.claim == claim
                }
                Err(e) => {
                    // Unknown outcome: ours if the file there carries our claim.
                    match read_record(&*store, &location).await {
                        Ok(there) => there.claim == claim,
                        Err(_) => return Err(Error::store(format!("claiming {location}"), e)),
                    }
                }
            };
            if claimed {
                tracing::info!(table = %table.identifier(), epoch = next, %holder, "claimed the table's writer epoch");
                return Ok(WriterFence {
                    store,
                    dir,
                    table: table.identifier().to_string(),
                    holder: holder.to_string(),
                    instance: instance.map(str::to_string),
                    claim,
                    epoch: next,
                    beat: AtomicU64::new(0),
                    options,
                });
            }
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    pub fn options(&self) -> FenceOptions {
        self.options
    }

    /// Fails with `Error::WriterFenced` if a newer epoch was claimed.
    pub async fn check(&self) -> Result<()> {
        let next = self.dir.clone().join(format!("epoch-{}", self.epoch + 1));
        match self.store.head(&next).await {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            Ok(_) => {
                let holder = match read_record(&*self.store, &next).await {
                    Ok(r) => r.holder,
                    Err(_) => "another writer".to_string(),
                };
                Err(Error::WriterFenced {
                    table: self.table.clone(),
                    holder,
                    epoch: self.epoch + 1,
                    action: "was fenced and publishes nothing more",
                })
            }
            Err(e) => Err(Error::store(format!("checking {next}"), e)),
        }
    }

    /// Renews the lease by rewriting the epoch file; fails with `Error::WriterFenced` once
    /// a newer epoch exists (the file is then left alone).
    pub async fn heartbeat(&self) -> Result<()> {
        self.check().await?;
        let beat = self.beat.fetch_add(1, Ordering::Relaxed) + 1;
        self.write(beat, false).await
    }

    /// Marks the claim released so the next writer takes over without waiting for the
    /// lease. Done on clean shutdown, after the last commit.
    pub async fn release(&self) -> Result<()> {
        self.check().await?;
        let beat = self.beat.fetch_add(1, Ordering::Relaxed) + 1;
        self.write(beat, true).await
    }

    /// Heartbeats every interval until `stop` fires (then releases the claim) or the
    /// fence is superseded (then returns `Error::WriterFenced`). A failed heartbeat is
    /// retried at the next interval: if the store stays unreachable past the lease,
    /// another writer may take over, and the check before publishing stops this one.
    pub async fn keep_alive(&self, mut stop: tokio::sync::watch::Receiver<bool>) -> Result<()> {
        let mut tick = tokio::time::interval(self.options.heartbeat_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return Ok(()),
            }
            match self.heartbeat().await {
                Ok(()) => {}
                Err(e @ Error::WriterFenced { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!(table = %self.table, error = %e, "writer heartbeat failed");
                }
            }
        }
    }

    async fn write(&self, beat: u64, released: bool) -> Result<()> {
        let record = EpochRecord {
            epoch: self.epoch,
            holder: self.holder.clone(),
            claim: self.claim.clone(),
            beat,
            released,
            instance: self.instance.clone(),
        };
        let location = self.dir.clone().join(format!("epoch-{}", self.epoch));
        self.store
            .put(&location, PutPayload::from(record_json(&record)))
            .await
            .map_err(|e| Error::store(format!("renewing {location}"), e))?;
        Ok(())
    }
}

fn record_json(record: &EpochRecord) -> Vec<u8> {
    serde_json::to_vec(record).unwrap_or_default()
}

async fn read_record(store: &dyn ObjectStore, location: &Path) -> Result<EpochRecord> {
    let bytes = read_bytes(store, location).await?;
    serde_json::from_slice(&bytes).map_err(|e| Error::json(format!("writer epoch {location}"), e))
}

/// The newest epoch file and how long ago it was last written.
async fn newest_claim(store: &dyn ObjectStore, dir: &Path) -> Result<Option<Newest>> {
    let newest = list_dir(store, dir)
        .await?
        .iter()
        .filter_map(|o| {
            let n = o.location.filename()?.strip_prefix("epoch-")?;
            n.parse::<u64>().ok().map(|n| (n, o.location.clone()))
        })
        .max_by_key(|(n, _)| *n);
    let Some((_, location)) = newest else {
        return Ok(None);
    };
    // Head after the read: the age must not predate the content.
    let record = read_record(store, &location).await?;
    let meta = store
        .head(&location)
        .await
        .map_err(|e| Error::store(format!("checking {location}"), e))?;
    let written: SystemTime = meta.last_modified.into();
    let age = SystemTime::now()
        .duration_since(written)
        .unwrap_or(Duration::ZERO);
    Ok(Some(Newest { record, age }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::testkit::keyed_schema;
    use crate::table::types::DataType;
    use crate::table::{TableIdentifier, Warehouse};

    async fn table() -> Table {
        let schema = keyed_schema(&[("id", DataType::Int)], &["id"], &[("bucket", "1")]);
        let id = TableIdentifier::parse("db.t").unwrap();
        Table::create(&Warehouse::in_memory(), &id, schema)
            .await
            .unwrap()
    }

    /// Claims the table, failing at once on a live claim.
    async fn fail_fast(table: &Table, holder: &str) -> Result<WriterFence> {
        WriterFence::acquire(table, holder, options(OnConflict::Fail)).await
    }

    /// `second` holds the table at epoch 2 and `first`, the earlier holder, finds itself
    /// fenced by `second_holder`.
    async fn assert_taken_over(first: &WriterFence, second: &WriterFence, second_holder: &str) {
        assert_eq!(second.epoch(), 2);
        second.check().await.unwrap();
        let fenced = first.check().await.unwrap_err();
        assert!(fenced.to_string().contains(second_holder), "{fenced}");
    }

    /// Claims the table as `instance`, failing at once on a live claim of another one.
    async fn fail_fast_as(table: &Table, holder: &str, instance: &str) -> Result<WriterFence> {
        WriterFence::acquire_as(table, holder, instance, options(OnConflict::Fail)).await
    }

    fn options(on_conflict: OnConflict) -> FenceOptions {
        FenceOptions {
            on_conflict,
            lease_timeout: Duration::from_secs(60),
            heartbeat_interval: Duration::from_millis(10),
        }
    }

    #[tokio::test]
    async fn a_second_writer_fails_naming_the_holder_until_the_first_releases() {
        let table = table().await;
        let first = fail_fast(&table, "writer-a").await.unwrap();
        assert_eq!(first.epoch(), 1);
        let err = fail_fast(&table, "writer-b").await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("db.t") && text.contains("writer-a"), "{text}");
        first.heartbeat().await.unwrap();
        first.release().await.unwrap();
        let second = fail_fast(&table, "writer-b").await.unwrap();
        assert_taken_over(&first, &second, "writer-b").await;
        assert!(matches!(
            first.heartbeat().await,
            Err(Error::WriterFenced { epoch: 2, .. })
        ));
    }

    #[tokio::test]
    async fn a_restart_of_the_same_instance_takes_over_at_once_and_fences_the_old_run() {
        let table = table().await;
        let first = fail_fast_as(&table, "run 1", "group g on host h")
            .await
            .unwrap();
        first.heartbeat().await.unwrap();
        // Another deployment still waits out the lease (here: fails fast)...
        let other = fail_fast_as(&table, "run x", "group g on host k")
            .await
            .unwrap_err();
        assert!(other.to_string().contains("run 1"), "{other}");
        // ...a plain writer too; the restarted instance does not.
        assert!(fail_fast(&table, "plain").await.is_err());
        let second = fail_fast_as(&table, "run 2", "group g on host h")
            .await
            .unwrap();
        assert_taken_over(&first, &second, "run 2").await;
    }
}
