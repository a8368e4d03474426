//! Compaction in the background: a [`Compactor`] on a tokio task, fed with requests
//! ("snapshot N touched these buckets") by a writer that keeps appending meanwhile.
//!
//! Requests that arrive while a round runs are coalesced into the next round; a request
//! for a full compaction (a writer's `full-compaction.delta-commits`) makes that round
//! fully compact every bucket, which covers the others. A failed
//! round is logged, its buckets stay queued and are retried with the next request (no
//! busy loop). Dropping the handle lets the task finish queued work and end.

use std::collections::{BTreeSet, HashMap};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::compact::{BucketId, CompactScope, Compactor};
use crate::error::{Error, Result};

/// Progress of a background compactor, as last published by its task.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompactionState {
    /// Every request for a snapshot id up to this one has been handled by a finished
    /// round (which planned on that snapshot or a newer one).
    pub(crate) completed_through: i64,
    /// Rounds run so far.
    pub(crate) rounds: u64,
    /// Sorted runs per bucket after the last round that looked at it, and the id of the
    /// snapshot that round planned on.
    pub(crate) sorted_runs: HashMap<BucketId, (usize, i64)>,
    /// Id of the last COMPACT snapshot committed.
    pub(crate) last_compaction: Option<i64>,
    /// Error of the last round, `None` if it succeeded.
    pub(crate) last_error: Option<String>,
}

#[derive(Debug)]
struct Request {
    snapshot_id: i64,
    buckets: Vec<BucketId>,
    /// A full compaction of every bucket, committed with this identifier.
    full: Option<i64>,
}

/// Handle on a compactor running on a tokio task.
#[derive(Debug)]
pub(crate) struct BackgroundCompactor {
    requests: mpsc::UnboundedSender<Request>,
    state: watch::Receiver<CompactionState>,
    task: JoinHandle<()>,
}

impl BackgroundCompactor {
    /// Starts `compactor` on a new tokio task (must be called inside a runtime).
    pub(crate) fn spawn(compactor: Compactor) -> Self {
        let (requests, receiver) = mpsc::unbounded_channel();
        let (publish, state) = watch::channel(CompactionState::default());
        let task = tokio::spawn(run(compactor, receiver, publish));
        BackgroundCompactor {
            requests,
            state,
            task,
        }
    }

    /// Asks for a round over `buckets`, which snapshot `snapshot_id` changed.
    pub(crate) fn request(
        &self,
        snapshot_id: i64,
        buckets: impl IntoIterator<Item = BucketId>,
    ) -> Result<()> {
        self.requests
            .send(Request {
                snapshot_id,
                buckets: buckets.into_iter().collect(),
                full: None,
            })
            .map_err(|_| stopped())
    }

    /// Asks for a full compaction of every bucket on snapshot `snapshot_id` or newer,
    /// committed with `identifier` (see `Compactor::compact_as`).
    pub(crate) fn request_full(&self, snapshot_id: i64, identifier: i64) -> Result<()> {
        self.requests
            .send(Request {
                snapshot_id,
                buckets: Vec::new(),
                full: Some(identifier),
            })
            .map_err(|_| stopped())
    }

    /// The latest published state.
    pub(crate) fn state(&self) -> CompactionState {
        self.state.borrow().clone()
    }

    /// Waits until the requests up to snapshot `snapshot_id` have been handled and returns
    /// the state then (check `last_error` for the outcome).
    pub(crate) async fn wait_for(&mut self, snapshot_id: i64) -> Result<CompactionState> {
        self.state
            .wait_for(|s| s.completed_through >= snapshot_id)
            .await
            .map(|s| s.clone())
            .map_err(|_| stopped())
    }

    /// Finishes the queued work, stops the task and returns the final state.
    pub(crate) async fn close(self) -> Result<CompactionState> {
        let BackgroundCompactor {
            requests,
            state,
            task,
        } = self;
        drop(requests);
        task.await.map_err(|e| Error::task("compaction task", e))?;
        let last = state.borrow().clone();
        Ok(last)
    }
}

fn stopped() -> Error {
    Error::format("the background compaction task has stopped")
}

/// The task: one round per batch of requests until the handle is dropped.
async fn run(
    mut compactor: Compactor,
    mut requests: mpsc::UnboundedReceiver<Request>,
    publish: watch::Sender<CompactionState>,
) {
    let mut pending: BTreeSet<BucketId> = BTreeSet::new();
    let mut full: Option<i64> = None;
    let mut state = CompactionState::default();
    while let Some(first) = requests.recv().await {
        let mut through = first.snapshot_id;
        // A full compaction that failed stays due, like the buckets of a failed round.
        full = full.max(first.full);
        pending.extend(first.buckets);
        // Coalesce what queued up while the previous round ran.
        while let Ok(more) = requests.try_recv() {
            through = through.max(more.snapshot_id);
            full = full.max(more.full);
            pending.extend(more.buckets);
        }
        state.rounds += 1;
        let round = match full {
            Some(identifier) => {
                compactor
                    .compact_as(&CompactScope::full(), identifier)
                    .await
            }
            None => {
                compactor
                    .compact(&CompactScope::buckets(pending.iter().cloned()))
                    .await
            }
        };
        match round {
            Ok(report) => {
                let based_on = report.based_on.unwrap_or(0);
                for (id, runs) in report.sorted_runs {
                    state.sorted_runs.insert(id, (runs, based_on));
                }
                if let Some(s) = &report.snapshot {
                    state.last_compaction = Some(s.id);
                }
                state.last_error = None;
                pending.clear();
                full = None;
            }
            Err(e) => {
                tracing::warn!(
                    table = %compactor.table().identifier(),
                    error = %e,
                    "background compaction failed; it is retried after the next commit"
                );
                state.last_error = Some(e.to_string());
            }
        }
        state.completed_through = state.completed_through.max(through);
        publish.send_replace(state.clone());
    }
}
