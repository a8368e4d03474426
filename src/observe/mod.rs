//! Observability of `lakejoin run`: pipeline metrics and their Prometheus exposition
//! (`metrics`), the HTTP endpoint with `/metrics` and health checks (`http`), log
//! setup ([`logging`]) and periodic progress lines (`progress_log`).

pub(crate) mod http;
pub mod logging;
pub(crate) mod metrics;
pub(crate) mod progress_log;

pub(crate) use metrics::{FaultSource, JoinMetrics, LookupMetrics, PartitionLag};
pub use metrics::{PipelineKind, PipelineMetrics, Registry};

/// Aborts a spawned helper task (a sampler, a reporter) when its owner goes away.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
