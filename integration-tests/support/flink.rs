//! Apache Flink jobs as child processes (PyFlink with Paimon 1.4.2's Flink connector and
//! Flink's Avro formats): its own lookup join (`integration-tests/flink/lookup_join.py`), for
//! `flink_lookup.rs` to compare with lakejoin's enriched output, and its Avro readers
//! (`read_avro_changes.py`) for `flink_avro_changelog.rs`.
//!
//! Why a module of its own: the install (a PyFlink venv and the connector jars, about
//! 1 GB) is made by `scripts/flink.sh` once into ~/.cache/lakejoin and found once per test
//! process; the job is a Python process with a JVM child (PyFlink's gateway, which runs the
//! mini cluster), so it is started in a process group of its own and the whole group is
//! killed when the job is dropped; and the job only says it runs by printing `READY`, so
//! starting it waits for that line with a deadline and shows Flink's logs when it fails.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::broker::tail;

/// The Flink install: `venv/bin/python` has PyFlink, whose `lib/` has the connectors.
static INSTALL: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The install directory (installing it first if needed); panics saying why there is
/// none. Tests call it before they start anything else, so a missing install fails fast.
pub fn install() -> &'static Path {
    match INSTALL.get_or_init(find_install) {
        Ok(dir) => dir,
        Err(message) => panic!("{message}"),
    }
}

/// Runs `scripts/flink.sh` (a quick check once installed; the install itself otherwise).
fn find_install() -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/flink.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "no Flink install: {} could not install PyFlink and its connector jars (it needs \
             python3.11, Java 17 and mvn, and PyPI and Maven Central once; `scripts/test.sh` \
             runs it before the tests):\n{}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let python = dir.join("venv/bin/python");
    if !python.is_file() {
        return Err(format!(
            "{} printed {}, which has no venv/bin/python: delete that directory and run the \
             script again",
            script.display(),
            dir.display()
        ));
    }
    Ok(dir)
}

/// What the job joins: the arguments of `lookup_join.py`.
pub struct LookupJoin<'a> {
    pub bootstrap: &'a str,
    /// The warehouse URI lakejoin writes (`file:///…`).
    pub warehouse: &'a str,
    pub database: &'a str,
    pub table: &'a str,
    pub orders: &'a str,
    pub output: &'a str,
    /// `full` or `partial`.
    pub cache: &'a str,
    pub group: &'a str,
}

/// A running `lookup_join.py`; killed (with its JVM) when dropped.
pub struct FlinkJob {
    child: Option<Child>,
    /// Flink's logs (`log/`), its `io.tmp.dirs` (`tmp/`, Paimon's local lookup files) and
    /// the Python process's stderr.
    dir: tempfile::TempDir,
    /// Lines of the job's stdout after `READY`.
    stdout: Receiver<String>,
}

/// How long the job may take to be running: the JVM start, the planner and the job's
/// deployment take about 35 s on an idle 2-core machine, 45 s with two jobs at once.
const START_DEADLINE: Duration = Duration::from_secs(240);

impl FlinkJob {
    /// Starts the job and waits until it prints `READY` (the job runs).
    pub fn start(join: &LookupJoin<'_>) -> FlinkJob {
        let args = [
            ("--bootstrap", join.bootstrap),
            ("--warehouse", join.warehouse),
            ("--database", join.database),
            ("--table", join.table),
            ("--orders", join.orders),
            ("--output", join.output),
            ("--cache", join.cache),
            ("--group", join.group),
        ];
        let args: Vec<String> = args
            .iter()
            .flat_map(|(flag, value)| [flag.to_string(), value.to_string()])
            .collect();
        Self::start_script("lookup_join.py", &args)
    }

    /// Starts `integration-tests/flink/<script>` with `args` (and `--tmp-dir`), and
    /// waits until it prints `READY`.
    pub fn start_script(script: &str, args: &[String]) -> FlinkJob {
        let dir = tempfile::tempdir().expect("temp dir");
        let log_dir = dir.path().join("log");
        let tmp_dir = dir.path().join("tmp");
        std::fs::create_dir_all(&log_dir).expect("log dir");
        std::fs::create_dir_all(&tmp_dir).expect("tmp dir");
        let stderr = std::fs::File::create(dir.path().join("stderr.txt")).expect("stderr file");
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("integration-tests/flink")
            .join(script);
        let mut child = Command::new(install().join("venv/bin/python"))
            .arg(&script)
            .args(args)
            .arg("--tmp-dir")
            .arg(&tmp_dir)
            .env("FLINK_LOG_DIR", &log_dir)
            // The JVM's own temporary files (the planner jar it unpacks, RocksDB's native
            // library, upload dirs) are left behind by a SIGKILL: keep them in `dir` too.
            // (FLINK_ENV_JAVA_OPTS would replace PyFlink's --add-opens flags for Java 17.)
            .env(
                "JAVA_TOOL_OPTIONS",
                format!("-Djava.io.tmpdir={}", tmp_dir.display()),
            )
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            // Its own group: the drop kills the Python process and PyFlink's JVM together.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", script.display()));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (lines, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut job = FlinkJob {
            child: Some(child),
            dir,
            stdout: receiver,
        };
        job.wait_ready();
        job
    }

    /// The lines the job prints after `READY` up to `end` (not included); panics with
    /// the job's diagnostics when it exits or `timeout` passes first.
    pub fn lines_until(&mut self, end: &str, timeout: Duration) -> Vec<String> {
        self.read_until(|line| line == end, end, timeout).0
    }

    fn wait_ready(&mut self) {
        let started = Instant::now();
        let (_, line) = self.read_until(|line| line.starts_with("READY"), "READY", START_DEADLINE);
        eprintln!("Flink job running after {:?}: {line}", started.elapsed());
    }

    /// Reads stdout lines until one is `done`: the lines before it, and it.
    fn read_until(
        &mut self,
        done: impl Fn(&str) -> bool,
        what: &str,
        timeout: Duration,
    ) -> (Vec<String>, String) {
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            match self.stdout.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if done(&line) => return (lines, line),
                Ok(line) => lines.push(line),
                Err(RecvTimeoutError::Timeout) => {}
                // stdout closed: the process is exiting; the liveness check says how.
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(200))
                }
            }
            self.assert_alive();
            assert!(
                Instant::now() < deadline,
                "the Flink job did not print {what} within {timeout:?}; it printed {lines:?}\n{}",
                self.diagnostics()
            );
        }
    }

    /// Panics (with the job's stderr and Flink's log) when the job has exited.
    pub fn assert_alive(&mut self) {
        let child = self.child.as_mut().expect("running");
        if let Some(status) = child.try_wait().expect("try_wait") {
            // PyFlink's JVM may outlive the Python process for a moment.
            kill_group(child.id());
            self.child = None;
            panic!("the Flink job exited with {status}\n{}", self.diagnostics());
        }
    }

    /// Everything Flink logged so far (its log4j file in `FLINK_LOG_DIR`).
    pub fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path().join("log")) {
            let mut paths: Vec<PathBuf> =
                entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
            paths.sort();
            for path in paths {
                text.push_str(&String::from_utf8_lossy(
                    &std::fs::read(&path).unwrap_or_default(),
                ));
            }
        }
        text
    }

    /// The lines of Flink's log that contain `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log_text()
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }

    fn diagnostics(&self) -> String {
        let stderr =
            std::fs::read_to_string(self.dir.path().join("stderr.txt")).unwrap_or_default();
        let log = self.log_text();
        let errors: Vec<&str> = log
            .lines()
            .filter(|line| line.contains(" ERROR ") || line.contains("Exception"))
            .collect();
        format!(
            "--- the job's stderr (tail) ---\n{}\n--- Flink log: ERROR and exception lines (last 20) ---\n{}\n--- Flink log (tail) ---\n{}",
            tail(&stderr, 60),
            errors[errors.len().saturating_sub(20)..].join("\n"),
            tail(&log, 40)
        )
    }
}

impl Drop for FlinkJob {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(child.id());
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                eprintln!("--- Flink job ---\n{}", self.diagnostics());
            }
        }
    }
}

/// SIGKILL to the job's process group: its id is the Python process's pid
/// (`process_group(0)`), and only the job and PyFlink's JVM are in it.
fn kill_group(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
