//! Log setup: human-readable lines by default, one JSON object per line with
//! `[observe] log_format = "json"`; always on stderr. `LAKEJOIN_LOG` sets the filter
//! (`info`, `lakejoin=debug,warn`, …).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// The environment variable holding the log filter.
pub(crate) const FILTER_ENV: &str = "LAKEJOIN_LOG";

/// Installs the process's log subscriber; `default_filter` applies when `LAKEJOIN_LOG`
/// is unset or invalid. A second call (tests) leaves the first subscriber in place.
pub fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_env(FILTER_ENV).unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: not in files, `docker logs` or log collectors.
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
    // Already installed (a test harness, or a second init): keep the first one.
    drop(installed);
}
