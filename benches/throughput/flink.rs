//! The users' alternative: Flink + Paimon running the same one-join enrich
//! (`flink_enrich.py`, PyFlink with Paimon's Flink connector, installed once by
//! `scripts/flink.sh` into ~/.cache/lakejoin) on the same orders topic and the same table
//! lakejoin wrote. The job is a Python process and the JVM it starts (PyFlink's local mini
//! cluster), in a process group of its own: CPU and peak memory are those of the whole group,
//! and dropping the job kills the group.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::util::{proc_status_kib, tail};

/// How long the job may take to run: the JVM, the planner and the deployment take about
/// 40 s on an idle 2-core machine.
const START_DEADLINE: Duration = Duration::from_secs(240);

/// The Flink install directory (`venv/bin/python` has PyFlink and the connectors),
/// installing it first when missing.
pub fn install() -> Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/flink.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "{} could not install PyFlink:\n{}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}

/// What the job joins.
pub struct FlinkEnrich<'a> {
    pub bootstrap: &'a str,
    pub warehouse: &'a Path,
    pub orders: &'a str,
    pub output: &'a str,
    /// `full` (`lookup.cache` FULL) or `default` (Paimon's default, AUTO).
    pub cache: &'a str,
    /// `parallelism.default` of the job.
    pub parallelism: u32,
    /// Paimon's `lookup.async` for the join.
    pub async_lookup: bool,
    pub group: &'a str,
}

/// A running `flink_enrich.py`; killed with its JVM when dropped.
pub struct FlinkJob {
    child: Child,
    dir: PathBuf,
}

impl Drop for FlinkJob {
    fn drop(&mut self) {
        // The whole group: the Python process and PyFlink's JVM.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

impl FlinkJob {
    /// Starts the job (logs in `dir`) and waits until it prints `READY`.
    pub fn start(install: &Path, dir: &Path, job: &FlinkEnrich<'_>) -> Result<Self> {
        let log_dir = dir.join("log");
        let tmp_dir = dir.join("tmp");
        std::fs::create_dir_all(&log_dir)?;
        std::fs::create_dir_all(&tmp_dir)?;
        let stderr = std::fs::File::create(dir.join("stderr.txt"))?;
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/throughput/flink_enrich.py");
        let mut child = Command::new(install.join("venv/bin/python"))
            .arg(&script)
            .args(["--bootstrap", job.bootstrap])
            .arg("--warehouse")
            .arg(job.warehouse)
            .args(["--orders", job.orders])
            .args(["--output", job.output])
            .args(["--cache", job.cache])
            .args(["--group", job.group])
            .args(["--parallelism", &job.parallelism.to_string()])
            .args(job.async_lookup.then_some("--async-lookup"))
            .arg("--tmp-dir")
            .arg(&tmp_dir)
            .env("FLINK_LOG_DIR", &log_dir)
            .env(
                "JAVA_TOOL_OPTIONS",
                format!("-Djava.io.tmpdir={}", tmp_dir.display()),
            )
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", script.display()))?;
        let stdout = child.stdout.take().context("stdout is piped")?;
        let mut job = FlinkJob {
            child,
            dir: dir.to_owned(),
        };
        job.wait_ready(lines_of(stdout))?;
        Ok(job)
    }

    fn wait_ready(&mut self, stdout: Receiver<String>) -> Result<()> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            match stdout.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line.starts_with("READY") => return Ok(()),
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(200))
                }
            }
            self.check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "the Flink job did not print READY within {START_DEADLINE:?}\n{}",
                    self.diagnostics()
                );
            }
        }
    }

    /// An error (with the job's logs) when the job has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the Flink job exited with {status}\n{}", self.diagnostics());
        }
        Ok(())
    }

    fn diagnostics(&self) -> String {
        let stderr = std::fs::read_to_string(self.dir.join("stderr.txt")).unwrap_or_default();
        format!(
            "stderr (last lines):\n{}\nFlink's logs: {}",
            tail(&stderr, 40),
            self.dir.join("log").display()
        )
    }

    /// The processes of the job's group (the Python process and its JVM).
    pub fn pids(&self) -> Vec<u32> {
        let group = self.child.id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return vec![group];
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| process_group(*pid) == Some(group))
            .collect()
    }

    /// Peak resident memory of the group's processes, summed, in MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        self.pids()
            .iter()
            .filter_map(|pid| proc_status_kib(*pid, "VmHWM").ok())
            .sum::<u64>() as f64
            / 1024.0
    }
}

/// The process group of `pid` (field 5 of `/proc/<pid>/stat`).
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, fields) = stat.rsplit_once(')')?;
    fields.split_whitespace().nth(2)?.parse().ok()
}

/// The lines of a child's stdout, read on a thread of their own.
fn lines_of(stdout: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (lines, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}
