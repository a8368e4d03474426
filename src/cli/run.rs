//! `lakejoin run` and `lakejoin health`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Outcome;
use crate::error::{Error, Result};
use crate::observe::{AbortOnDrop, Registry};

/// SIGTERM and SIGINT (Ctrl-C), as one stream.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let io = |source| Error::Io {
                context: "installing signal handlers".into(),
                source,
            };
            Ok(Signals {
                term: signal(SignalKind::terminate()).map_err(io)?,
                int: signal(SignalKind::interrupt()).map_err(io)?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    /// Waits for the next signal; returns its name.
    async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// Runs the pipelines of a config file until SIGTERM or SIGINT, then stops gracefully
/// within `[run] shutdown_timeout`; a second signal exits at once.
pub(crate) async fn run(path: &Path) -> Result<Outcome> {
    let config = crate::config::load(path)?;
    crate::observe::logging::init(config.observe.log_format, "info");
    // Handlers first: from here on a signal is ours to handle, at any stage.
    let mut signals = Signals::install()?;
    let listen = config
        .observe
        .listen_address()
        .map_err(|e| Error::Config(format!("{}: observe.listen: {e}", path.display())))?;
    let listener = crate::observe::http::bind(listen).await?;
    let address = listener.local_addr().map_err(|source| Error::Io {
        context: "reading the HTTP endpoint's address".into(),
        source,
    })?;
    tracing::info!(config = %path.display(), summary = %config.summary(), "starting");
    tracing::info!(%address, "metrics on http://{address}/metrics, health on /health/live and /health/ready");

    let registry = Arc::new(Registry::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let _server = AbortOnDrop(tokio::spawn(crate::observe::http::serve(
        listener,
        registry.clone(),
        stop_rx.clone(),
    )));
    let shutdown_timeout = config.run.shutdown_timeout;
    let progress_interval = config.observe.progress_interval;

    let mut running = tokio::select! {
        started = crate::pipeline::start_with(config, registry.clone()) => started?,
        signal = signals.recv() => {
            // Nothing was consumed or committed yet: stopping here loses nothing.
            tracing::info!(signal, "stopped while starting");
            return Ok(Outcome::Success);
        }
    };
    tracing::info!("pipelines running");
    let _progress = AbortOnDrop(tokio::spawn(crate::observe::progress_log::report(
        registry.clone(),
        progress_interval,
        stop_rx,
    )));

    // A pipeline that cannot continue stops alone and says why on /health/ready; the
    // process exits (2) only when none is left, or on a signal.
    let failure = loop {
        tokio::select! {
            signal = signals.recv() => {
                tracing::info!(
                    signal,
                    timeout = ?shutdown_timeout,
                    "stopping: consumers stop, in-flight lookups and deliveries finish, tables and offsets are committed (a second signal exits at once)"
                );
                break None;
            }
            exit = running.next_exit() => {
                let Some((name, result)) = exit else {
                    break None;
                };
                let reason = match &result {
                    Err(e) => e.to_string(),
                    Ok(()) => "its task ended on its own".to_string(),
                };
                if let Some(metrics) = running.metrics().get(&name) {
                    metrics.set_stopped(reason.clone());
                }
                let left = running.pipelines_left();
                tracing::error!(pipeline = %name, error = %reason, pipelines_left = left, "pipeline stopped; the others keep running");
                if left == 0 {
                    break result.err();
                }
            }
        }
    };

    let outcome = tokio::select! {
        finished = tokio::time::timeout(shutdown_timeout, running.shutdown()) => match finished {
            Ok(Ok(())) => {
                tracing::info!("stopped cleanly");
                Ok(Outcome::Success)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => {
                // Safe for the tables (see below); uncommitted work is redone on restart.
                tracing::error!(timeout = ?shutdown_timeout, "shutdown did not finish within run.shutdown_timeout; exiting anyway");
                Err(Error::Io {
                    context: "stopping".into(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("did not finish within run.shutdown_timeout ({shutdown_timeout:?})"),
                    ),
                })
            }
        },
        signal = signals.recv() => {
            // Exiting part-way is safe: a table commit publishes its snapshot (with the
            // consumed offsets) atomically or not at all, so a restart resumes from the
            // last committed snapshot; enriched facts whose offsets were not committed are
            // produced again (at least once).
            tracing::warn!(signal, "second signal: exiting at once");
            Ok(Outcome::Interrupted)
        }
    };
    stop_tx.send_replace(true);
    match failure {
        Some(e) => Err(e),
        None => outcome,
    }
}

/// `lakejoin health`: GETs `/health/live` (or `/health/ready`) of a running
/// `lakejoin run` and exits 0 on 200, 1 otherwise: a container health check that needs
/// no curl.
pub(crate) async fn health(
    path: &Path,
    address: Option<&str>,
    ready: bool,
    timeout: Duration,
) -> Result<Outcome> {
    let address: SocketAddr = match address {
        Some(text) => text
            .parse()
            .map_err(|_| Error::Config(format!("--address: `{text}` is not host:port")))?,
        None => crate::config::load(path)?
            .observe
            .listen_address()
            .map_err(|e| Error::Config(format!("{}: observe.listen: {e}", path.display())))?,
    };
    let address = reachable(address);
    let endpoint = if ready {
        "/health/ready"
    } else {
        "/health/live"
    };
    match crate::observe::http::get(address, endpoint, timeout).await {
        Ok((200, body)) => {
            print!("{body}");
            Ok(Outcome::Success)
        }
        Ok((status, body)) => {
            println!("http://{address}{endpoint}: {status}\n{body}");
            Ok(Outcome::Unhealthy)
        }
        Err(e) => {
            println!("{e}");
            Ok(Outcome::Unhealthy)
        }
    }
}

/// A wildcard listen address (`0.0.0.0`, `::`) is reached through loopback.
fn reachable(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), address.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), address.port())
        }
        _ => address,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_addresses_are_checked_through_loopback() {
        assert_eq!(
            reachable("0.0.0.0:9464".parse().unwrap()),
            "127.0.0.1:9464".parse().unwrap()
        );
        assert_eq!(
            reachable("[::]:9464".parse().unwrap()),
            "[::1]:9464".parse().unwrap()
        );
        assert_eq!(
            reachable("10.1.2.3:9464".parse().unwrap()),
            "10.1.2.3:9464".parse().unwrap()
        );
    }

    #[tokio::test]
    async fn health_reports_live_and_ready_from_a_running_endpoint() {
        let registry = Arc::new(Registry::default());
        let listener = crate::observe::http::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (_stop, stopped) = watch::channel(false);
        let _server = AbortOnDrop(tokio::spawn(crate::observe::http::serve(
            listener,
            registry.clone(),
            stopped,
        )));
        let none = Path::new("unused.toml");
        let timeout = Duration::from_secs(10);
        let live = health(none, Some(&address), false, timeout).await.unwrap();
        assert_eq!(live, Outcome::Success);
        let ready = health(none, Some(&address), true, timeout).await.unwrap();
        assert_eq!(ready, Outcome::Unhealthy, "not started yet");
        registry.set_started();
        let ready = health(none, Some(&address), true, timeout).await.unwrap();
        assert_eq!(ready, Outcome::Success, "no pipelines to wait for");
        drop(_server);
        // Nobody listening (the port was just freed): unhealthy, not an error.
        let free = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let down = health(none, Some(&free), false, timeout).await.unwrap();
        assert_eq!(down, Outcome::Unhealthy);
        assert!(
            health(none, Some("nowhere"), false, timeout)
                .await
                .unwrap_err()
                .to_string()
                .contains("--address")
        );
    }
}
