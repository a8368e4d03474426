//! CPU time of the processes a case runs on, read from `/proc/<pid>/stat` (user + system,
//! every thread). Records/s alone hides cost on a shared 2-core machine: a case can keep
//! its rate by burning more CPU, and the broker's share is not the case's. So each case
//! reports CPU-seconds per million records for its own process (lakejoin, or the harness
//! for its own loops), and separately for the broker and for redis-server.

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
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let Some((_, fields)) = stat.rsplit_once(')') else {
        bail!("/proc/{pid}/stat has no command name: {stat}");
    };
    // After the name: state (field 3), …, utime (14), stime (15).
    let fields: Vec<&str> = fields.split_whitespace().collect();
    let tick = |i: usize| -> Result<f64> {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("/proc/{pid}/stat field {}", i + 3))
    };
    Ok((tick(11)? + tick(12)?) / ticks_per_second())
}

/// The processes whose CPU a case counts, labelled (`"lakejoin"`, `"broker"`, …).
pub struct CpuMeter {
    started: Vec<(&'static str, u32, f64)>,
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
        Ok(CpuMeter { started })
    }

    /// The CPU seconds used since [`CpuMeter::start`].
    pub fn stop(self) -> Result<CpuUse> {
        let by_process = self
            .started
            .into_iter()
            .map(|(label, pid, before)| Ok((label, cpu_seconds(pid)? - before)))
            .collect::<Result<_>>()?;
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
