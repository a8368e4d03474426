//! A fault-injecting `ObjectStore` for tests: wraps a real store (InMemory,
//! LocalFileSystem) and, per operation and path pattern, on a schedule, fails a request
//! before it is applied, applies a write and loses its response, answers a create with
//! `AlreadyExists`, delays a request, cuts a read short, or fails a write with an OS error
//! (disk full, permission denied, read-only file system) as LocalFileSystem reports it.
//! A [`Pause`] holds one chosen request until the test releases it, to force an exact
//! interleaving of two writers.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The request a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A plain (overwriting) put: data files, manifests, the LATEST hint.
    Put,
    /// A create-if-absent put: snapshot files, schema files, writer epochs.
    Create,
    Get,
    Head,
    List,
}

/// What happens to a request a rule picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fails without touching the store.
    FailBefore,
    /// Applies the request, then fails as if the response was lost (outcome unknown).
    LoseResponse,
    /// Applies the create, then answers `AlreadyExists`, as a store-side retry of a
    /// create whose first attempt landed does.
    AppliedThenAlreadyExists,
    /// Answers `AlreadyExists` without applying the create.
    SpuriousAlreadyExists,
    /// Delays the request, then runs it.
    Latency(Duration),
    /// Returns only the first half of the object's bytes (reads only).
    TruncateRead,
    /// Fails a write without applying it, with this OS error (`libc` errno: 28 ENOSPC,
    /// 13 EACCES, 30 EROFS) wrapped as LocalFileSystem wraps it: object_store's `Generic`
    /// error whose source chain ends in the `std::io::Error`.
    Os(i32),
}

pub const ENOSPC: i32 = 28;
pub const EACCES: i32 = 13;
pub const EROFS: i32 = 30;

/// LocalFileSystem's error for a failed write: its message, then the OS error.
#[derive(Debug)]
struct LocalWriteError {
    message: String,
    source: std::io::Error,
}

impl fmt::Display for LocalWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.message, self.source)
    }
}

impl std::error::Error for LocalWriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The error LocalFileSystem returns when writing `location` fails with `errno`: a full
/// disk fails while copying the bytes into the staging file, a denied or read-only
/// directory already when opening it.
fn os_error(errno: i32, location: &Path) -> object_store::Error {
    let message = if errno == ENOSPC {
        "Unable to copy data to file".to_string()
    } else {
        format!("Unable to open file {location}#1")
    };
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: Box::new(LocalWriteError {
            message,
            source: std::io::Error::from_raw_os_error(errno),
        }),
    }
}

/// Which of the matching requests a rule picks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// The n-th matching request (1-based).
    Nth(u64),
    /// The first n matching requests.
    FirstN(u64),
    /// Every k-th matching request (k, 2k, …).
    EveryNth(u64),
    /// Each matching request with this probability (the store's seeded generator).
    Probability(f64),
}

/// One held request (see [`FaultyStore::pause`]).
#[derive(Debug)]
pub struct Pause {
    reached: tokio::sync::Semaphore,
    released: tokio::sync::Semaphore,
}

impl Pause {
    /// Waits until the request is being held; panics after `deadline`.
    pub async fn reached(&self, deadline: Duration) {
        tokio::time::timeout(deadline, self.reached.acquire())
            .await
            .expect("the paused request was not made in time")
            .expect("semaphore open")
            .forget();
    }

    /// Lets the held request go on.
    pub fn release(&self) {
        self.released.add_permits(1);
    }
}

/// A pause not yet picked.
#[derive(Debug)]
struct PendingPause {
    op: Op,
    path_contains: String,
    /// Matching requests still to let through.
    skip: u64,
    pause: Arc<Pause>,
}

#[derive(Debug)]
struct Rule {
    op: Op,
    path_contains: String,
    fault: Fault,
    schedule: Schedule,
    seen: u64,
    injected: u64,
}

/// The wrapper. Rules are checked in the order they were added; the first that picks a
/// request decides its fault.
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    rules: Mutex<Vec<Rule>>,
    pauses: Mutex<Vec<PendingPause>>,
    rng: Mutex<StdRng>,
    injected: AtomicU64,
}

impl fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn ObjectStore>, seed: u64) -> Arc<Self> {
        Arc::new(FaultyStore {
            inner,
            rules: Mutex::new(Vec::new()),
            pauses: Mutex::new(Vec::new()),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            injected: AtomicU64::new(0),
        })
    }

    /// The wrapped store (to check the table without faults).
    pub fn inner(&self) -> Arc<dyn ObjectStore> {
        self.inner.clone()
    }

    /// Adds a rule: `fault` on `op` requests whose path contains `path_contains`.
    pub fn inject(&self, op: Op, path_contains: &str, fault: Fault, schedule: Schedule) {
        self.rules.lock().unwrap().push(Rule {
            op,
            path_contains: path_contains.to_string(),
            fault,
            schedule,
            seen: 0,
            injected: 0,
        });
    }

    /// Holds the next `op` request whose path contains `path_contains` before it reaches
    /// the store, until [`Pause::release`]. One request only.
    pub fn pause(&self, op: Op, path_contains: &str) -> Arc<Pause> {
        self.pause_after(op, path_contains, 0)
    }

    /// [`FaultyStore::pause`] of the matching request after the next `skip` ones (a
    /// commit writes its delta manifest list, then its base list: `skip` 1 holds the
    /// second).
    pub fn pause_after(&self, op: Op, path_contains: &str, skip: u64) -> Arc<Pause> {
        let pause = Arc::new(Pause {
            reached: tokio::sync::Semaphore::new(0),
            released: tokio::sync::Semaphore::new(0),
        });
        self.pauses.lock().unwrap().push(PendingPause {
            op,
            path_contains: path_contains.to_string(),
            skip,
            pause: pause.clone(),
        });
        pause
    }

    /// Waits here if a pause picks this request.
    async fn hold(&self, op: Op, location: &Path) {
        let picked = {
            let mut pauses = self.pauses.lock().unwrap();
            let at = pauses
                .iter()
                .position(|p| p.op == op && location.as_ref().contains(&p.path_contains));
            match at {
                Some(i) if pauses[i].skip > 0 => {
                    pauses[i].skip -= 1;
                    None
                }
                Some(i) => Some(pauses.remove(i).pause),
                None => None,
            }
        };
        if let Some(pause) = picked {
            pause.reached.add_permits(1);
            let _ = pause.released.acquire().await.map(|p| p.forget());
        }
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }

    /// Faults injected so far (latency included).
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// The fault for a request, if a rule picks it.
    fn pick(&self, op: Op, location: &Path) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap();
        let path = location.as_ref();
        for rule in rules.iter_mut() {
            if rule.op != op || !path.contains(&rule.path_contains) {
                continue;
            }
            rule.seen += 1;
            let fire = match rule.schedule {
                Schedule::Nth(n) => rule.seen == n,
                Schedule::FirstN(n) => rule.seen <= n,
                Schedule::EveryNth(k) => k > 0 && rule.seen % k == 0,
                Schedule::Probability(p) => self.rng.lock().unwrap().random_bool(p.clamp(0.0, 1.0)),
            };
            if fire {
                rule.injected += 1;
                self.injected.fetch_add(1, Ordering::Relaxed);
                return Some(rule.fault);
            }
        }
        None
    }
}

fn injected(what: &str, location: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: format!("injected fault: {what} ({location})").into(),
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let op = if matches!(opts.mode, PutMode::Create) {
            Op::Create
        } else {
            Op::Put
        };
        self.hold(op, location).await;
        match self.pick(op, location) {
            None => self.inner.put_opts(location, payload, opts).await,
            Some(Fault::FailBefore) => Err(injected("failed before the write", location)),
            Some(Fault::LoseResponse) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(injected("write applied, response lost", location))
            }
            Some(Fault::AppliedThenAlreadyExists) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(object_store::Error::AlreadyExists {
                    path: location.to_string(),
                    source: "injected: retried create found its own write".into(),
                })
            }
            Some(Fault::SpuriousAlreadyExists) => Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "injected: spurious AlreadyExists".into(),
            }),
            Some(Fault::Latency(d)) => {
                tokio::time::sleep(d).await;
                self.inner.put_opts(location, payload, opts).await
            }
            Some(Fault::TruncateRead) => self.inner.put_opts(location, payload, opts).await,
            Some(Fault::Os(errno)) => Err(os_error(errno, location)),
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let op = if options.head { Op::Head } else { Op::Get };
        self.hold(op, location).await;
        match self.pick(op, location) {
            None
            | Some(Fault::AppliedThenAlreadyExists | Fault::SpuriousAlreadyExists | Fault::Os(_)) => {
                self.inner.get_opts(location, options).await
            }
            Some(Fault::FailBefore | Fault::LoseResponse) => Err(injected("read failed", location)),
            Some(Fault::Latency(d)) => {
                tokio::time::sleep(d).await;
                self.inner.get_opts(location, options).await
            }
            Some(Fault::TruncateRead) => {
                let result = self.inner.get_opts(location, options).await?;
                if matches!(op, Op::Head) {
                    return Ok(result);
                }
                let meta = result.meta.clone();
                let range = result.range.clone();
                let attributes = result.attributes.clone();
                let bytes = result.bytes().await?;
                let cut = bytes.slice(0..bytes.len() / 2);
                Ok(GetResult {
                    payload: GetResultPayload::Stream(stream::once(async move { Ok(cut) }).boxed()),
                    meta,
                    range,
                    attributes,
                    extensions: Default::default(),
                })
            }
        }
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        match self.pick(Op::Get, location) {
            Some(Fault::FailBefore | Fault::LoseResponse) => Err(injected("read failed", location)),
            _ => self.inner.get_ranges(location, ranges).await,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let at = prefix.cloned().unwrap_or_default();
        match self.pick(Op::List, &at) {
            Some(Fault::FailBefore | Fault::LoseResponse) => {
                stream::once(async move { Err(injected("listing failed", &at)) }).boxed()
            }
            _ => self.inner.list(prefix),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let at = prefix.cloned().unwrap_or_default();
        match self.pick(Op::List, &at) {
            Some(Fault::FailBefore | Fault::LoseResponse) => Err(injected("listing failed", &at)),
            Some(Fault::Latency(d)) => {
                tokio::time::sleep(d).await;
                self.inner.list_with_delimiter(prefix).await
            }
            _ => self.inner.list_with_delimiter(prefix).await,
        }
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
