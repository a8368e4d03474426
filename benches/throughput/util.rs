//! Small helpers: free ports, waiting for a condition with a deadline, process memory.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A loopback port nobody listens on (free when this returns).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("finding a free port")?
        .port())
}

/// Polls `condition` every 50 ms until it holds; an error after `timeout`, or as soon as
/// `condition` fails.
pub fn wait_for(
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !condition().with_context(|| format!("waiting for {what}"))? {
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
pub fn proc_status_kib(pid: u32, field: &str) -> Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

/// RSS of process `pid` once it stops falling: sampled every half second until no sample
/// for `quiet` has been a MiB below the lowest before it, or `limit` has passed. Returns
/// (MiB, seconds it took). A process frees its start-up's transient memory some seconds
/// after it is ready (allocator purges, a cache load's buffers), so the moment of
/// readiness alone depends on how fast it got there.
pub fn settled_rss_mib(pid: u32, quiet: Duration, limit: Duration) -> Result<(f64, f64)> {
    let start = Instant::now();
    let mut lowest = proc_status_kib(pid, "VmRSS")? as f64 / 1024.0;
    let mut since = Instant::now();
    while since.elapsed() < quiet && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(500));
        let now = proc_status_kib(pid, "VmRSS")? as f64 / 1024.0;
        if now < lowest - 1.0 {
            since = Instant::now();
        }
        lowest = lowest.min(now);
    }
    Ok((lowest, start.elapsed().as_secs_f64()))
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
