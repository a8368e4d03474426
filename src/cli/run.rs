//! `lakejoin run` and `lakejoin validate`.

use std::path::Path;

use super::Outcome;
use crate::error::Result;

/// Checks a config file: every problem on stderr (exit 1), or a one-line summary.
pub fn validate(path: &Path) -> Result<Outcome> {
    let config = crate::config::load(path)?;
    println!("{}: {}", path.display(), config.summary());
    Ok(Outcome::Success)
}

/// Runs the pipelines of a config file until Ctrl-C or SIGTERM, then stops gracefully.
pub async fn run(path: &Path) -> Result<Outcome> {
    let config = crate::config::load(path)?;
    tracing::info!(config = %path.display(), summary = %config.summary(), "starting");
    let mut running = crate::pipeline::start(config).await?;
    let stop = async {
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => {
                tracing::info!("stopping");
                break;
            }
            exit = running.next_exit() => match exit {
                Some((name, Err(e))) => {
                    tracing::error!(pipeline = %name, error = %e, "pipeline failed; stopping the others");
                    let _ = running.shutdown().await;
                    return Err(e);
                }
                // A task that is done (e.g. a full cache finished loading).
                Some((_, Ok(()))) => {}
                None => break,
            }
        }
    }
    running.shutdown().await?;
    Ok(Outcome::Success)
}
