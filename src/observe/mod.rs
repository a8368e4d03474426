//! Observability of `lakejoin run`: pipeline metrics and their Prometheus exposition
//! ([`metrics`]), the HTTP endpoint with `/metrics` and health checks ([`http`]), log
//! setup ([`logging`]) and periodic progress lines (`progress_log`).

pub mod http;
pub mod logging;
pub mod metrics;
pub(crate) mod progress_log;

pub use metrics::{
    FaultSource, Histogram, JoinMetrics, LookupMetrics, PartitionLag, PipelineEntry, PipelineKind,
    PipelineMetrics, Registry,
};

/// Aborts a spawned helper task (a sampler, a reporter) when its owner goes away.
#[derive(Debug)]
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
