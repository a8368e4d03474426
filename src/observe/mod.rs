//! Observability of `lakejoin run`: pipeline metrics and their Prometheus exposition
//! (`metrics`), the HTTP endpoint with `/metrics` and health checks (`http`), log
//! setup ([`logging`]) and periodic progress lines (`progress_log`).

pub(crate) mod http;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod progress_log;

pub(crate) use metrics::{FaultSource, JoinMetrics, LookupMetrics, PartitionLag};
pub use metrics::{PipelineKind, PipelineMetrics, Registry};

/// Aborts a spawned task (a sampler, a reporter, a batch being decoded) when its owner
/// goes away; awaiting it awaits the task. A plain `JoinHandle` detaches its task when
/// dropped, so work a stopped pipeline has given up on would run on.
#[derive(Debug)]
pub(crate) struct AbortOnDrop<T = ()>(pub(crate) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::AbortOnDrop;

    #[tokio::test]
    async fn awaiting_gives_the_result_and_dropping_aborts() {
        assert_eq!(AbortOnDrop(tokio::spawn(async { 7 })).await.ok(), Some(7));
        // A task that would hold its sender forever: dropping its handle ends it, and
        // with it the sender.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
        let task = AbortOnDrop(tokio::spawn(async move {
            let _tx = tx;
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
        }));
        started.await.expect("the task started");
        drop(task);
        let closed = tokio::time::timeout(std::time::Duration::from_secs(10), rx).await;
        assert!(
            matches!(closed, Ok(Err(_))),
            "the aborted task dropped its sender"
        );
    }
}
