//! CPU time of the processes a case runs on, read from `/proc/<pid>/stat` (user + system,
//! every thread). Records/s alone hides cost on a shared 2-core machine: a case can keep
//! its rate by burning more CPU, and the broker's share is not the case's. So each case
//! reports CPU-seconds per million records for its own process (lakejoin, or the harness
//! for its own loops), and separately for the broker and for redis-server.
//!
//! Of the case's own process it also reports the threads librdkafka runs (see
//! [`is_client_thread`]): how much of a case's CPU is the Kafka client's own work
//! (fetching, building and compressing batches, delivery reports), which no change to
//! lakejoin's code can remove. That is a floor, not the client's whole share: the calls
//! that consume and produce each record run on the caller's threads.

use std::collections::HashMap;
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};

/// Clock ticks per second of `/proc/<pid>/stat`'s times (`getconf CLK_TCK`; 100 on Linux
/// unless the kernel says otherwise).
fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// CPU seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    Ok(parse_stat(&stat)
        .with_context(|| format!("parsing {path}"))?
        .1)
}

/// The command name and CPU seconds (user + system) of a `/proc/…/stat` line.
pub fn parse_stat(stat: &str) -> Result<(&str, f64)> {
    // The command name may hold spaces and parentheses: it ends at the last ')'.
    let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
        bail!("no command name in {stat:?}");
    };
    let name = stat.get(open + 1..close).unwrap_or_default();
    // After the name: state (field 3), …, utime (14), stime (15).
    let fields: Vec<&str> = stat
        .get(close + 1..)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let tick = |i: usize| -> Result<f64> {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("field {} of {stat:?}", i + 3))
    };
    Ok((name, (tick(11)? + tick(12)?) / ticks_per_second()))
}

/// Whether a thread (by its kernel name, at most 15 bytes) is one librdkafka runs:
/// `rdk:main`, `rdk:broker…` (one per broker connection: fetches, produce batches and
/// their compression), and rust-rdkafka's `ThreadedProducer` thread ("producer polling
/// thread", cut to "producer pollin"), which serves delivery reports (lakejoin's callback
/// for each, a few instructions, runs there too).
pub fn is_client_thread(name: &str) -> bool {
    name.starts_with("rdk:") || name == "producer pollin"
}

/// CPU seconds so far of each of `pid`'s librdkafka threads, by thread id. A thread that
/// ends between two readings is missed (librdkafka's threads live as long as the client).
pub fn client_threads(pid: u32) -> Result<HashMap<u32, f64>> {
    let dir = format!("/proc/{pid}/task");
    let mut threads = HashMap::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {dir}"))? {
        let entry = entry.with_context(|| format!("listing {dir}"))?;
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        // A thread may end between the listing and the read.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (name, seconds) = parse_stat(&stat)?;
        if is_client_thread(name) {
            threads.insert(tid, seconds);
        }
    }
    Ok(threads)
}

/// The processes whose CPU a case counts, labelled (`"lakejoin"`, `"broker"`, …).
pub struct CpuMeter {
    started: Vec<(&'static str, u32, f64)>,
    /// The labelled process whose librdkafka threads are counted too, and their CPU
    /// seconds at the start.
    client: Option<(&'static str, u32, HashMap<u32, f64>)>,
}

/// CPU seconds each measured process used during a case.
#[derive(Debug, Clone, Default)]
pub struct CpuUse {
    pub by_process: Vec<(&'static str, f64)>,
}

impl CpuMeter {
    /// Starts counting for `processes` (label, pid).
    pub fn start(processes: &[(&'static str, u32)]) -> Result<Self> {
        let started = processes
            .iter()
            .map(|&(label, pid)| Ok((label, pid, cpu_seconds(pid)?)))
            .collect::<Result<_>>()?;
        Ok(CpuMeter {
            started,
            client: None,
        })
    }

    /// Also counts, under `label`, the librdkafka threads of process `pid` (one of
    /// those counted as a whole).
    pub fn with_client_threads(mut self, label: &'static str, pid: u32) -> Result<Self> {
        self.client = Some((label, pid, client_threads(pid)?));
        Ok(self)
    }

    /// The CPU seconds used since [`CpuMeter::start`].
    pub fn stop(self) -> Result<CpuUse> {
        let mut by_process: Vec<(&'static str, f64)> = self
            .started
            .into_iter()
            .map(|(label, pid, before)| Ok((label, cpu_seconds(pid)? - before)))
            .collect::<Result<_>>()?;
        if let Some((label, pid, before)) = self.client {
            // A thread started since counts from zero.
            let used = client_threads(pid)?
                .into_iter()
                .map(|(tid, now)| now - before.get(&tid).copied().unwrap_or(0.0))
                .sum();
            by_process.push((label, used));
        }
        Ok(CpuUse { by_process })
    }
}

impl CpuUse {
    /// CPU seconds of the processes labelled `label` (several for a job of two
    /// processes), or `None` when none was measured.
    pub fn of(&self, label: &str) -> Option<f64> {
        let mut seconds = self
            .by_process
            .iter()
            .filter(|(l, _)| *l == label)
            .map(|(_, s)| *s)
            .peekable();
        seconds.peek()?;
        Some(seconds.sum())
    }

    /// Every figure multiplied by `factor`.
    pub fn scaled(self, factor: f64) -> Self {
        CpuUse {
            by_process: self
                .by_process
                .into_iter()
                .map(|(label, s)| (label, s * factor))
                .collect(),
        }
    }
}
