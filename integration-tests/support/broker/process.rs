//! `lakejoin run` as the tests deploy it: a temporary warehouse with its config, the
//! child process (started, signalled, killed, its log read and printed when a test
//! fails), the tables it writes as `lakejoin table scan` and pypaimon read them, and its
//! metrics and health endpoint.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

// The `support` module, for running the binary and reading tables with pypaimon.
use super::super as support;
use super::{bootstrap, tail};

/// A temporary warehouse plus a config file written into it.
pub struct Deployment {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl Deployment {
    /// Writes `config` (with `{bootstrap}` and `{warehouse}` filled in) to a file. Without
    /// an `[observe]` section the endpoint listens on a free port (tests run in parallel).
    pub fn new(config: &str) -> Self {
        Self::on(&bootstrap(), config)
    }

    /// [`Deployment::new`] against the broker at `bootstrap`.
    pub fn on(bootstrap: &str, config: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut text = config
            .replace("{bootstrap}", bootstrap)
            .replace("{warehouse}", &dir.path().join("wh").display().to_string());
        if !text.contains("[observe]") {
            text.push_str("\n[observe]\nlisten = \"127.0.0.1:0\"\n");
        }
        let path = dir.path().join("connectors.toml");
        std::fs::write(&path, text).expect("write config");
        Deployment { dir, config: path }
    }

    pub fn warehouse(&self) -> String {
        format!("file://{}", self.dir.path().join("wh").display())
    }

    pub fn start(&self) -> LakejoinProcess {
        self.start_with_env(&[])
    }

    pub fn start_with_env(&self, env: &[(&str, &str)]) -> LakejoinProcess {
        LakejoinProcess::start_with_env(&self.config, &self.dir.path().join("lakejoin.log"), env)
    }

    /// The rows of `table` as `lakejoin table scan` prints them; `None` while the table does
    /// not exist yet.
    pub fn scan(&self, table: &str) -> Option<Vec<Value>> {
        let mut command = Command::new(support::lakejoin_bin());
        command.args([
            "table",
            "scan",
            "--warehouse",
            &self.warehouse(),
            "--table",
            table,
        ]);
        let output = support::run(command, "");
        output.status.success().then(|| {
            support::parse_jsonl(
                "lakejoin table scan",
                &String::from_utf8_lossy(&output.stdout),
            )
        })
    }

    /// Waits until `lakejoin table scan` prints exactly `expected` (in key order).
    pub fn wait_for_table(&self, table: &str, expected: &[Value]) {
        let mut last = None;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let rows = self.scan(table);
            if rows.as_deref() == Some(expected) {
                return;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.path().join("lakejoin.log"))
                    .unwrap_or_default();
                panic!(
                    "{table} never held the expected rows.\nexpected: {expected:#?}\nlast scan: {:#?}\nlog tail:\n{}",
                    rows.or(last),
                    tail(&log, 60)
                );
            }
            last = rows;
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Snapshot files of `table` (0 before it exists).
    pub fn snapshot_count(&self, table: &str) -> usize {
        let (db, name) = table.split_once('.').expect("db.table");
        let dir = self
            .dir
            .path()
            .join("wh")
            .join(format!("{db}.db"))
            .join(name)
            .join("snapshot");
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with("snapshot-"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// pypaimon's view of `table`, sorted by primary key.
    pub fn pypaimon(&self, table: &str) -> Vec<Value> {
        support::oracle_read(&self.warehouse(), table)
    }
}

/// `lakejoin run -c <config>` as a child process; its output goes to a log file that is
/// printed when a test fails while it is alive.
pub struct LakejoinProcess {
    child: Option<Child>,
    log: PathBuf,
    /// Length of the log file when this process started (restarts append to it).
    log_start: usize,
}

impl LakejoinProcess {
    pub fn start(config: &Path, log: &Path) -> Self {
        Self::start_with_env(config, log, &[])
    }

    /// [`LakejoinProcess::start`] with extra environment variables (config overrides).
    pub fn start_with_env(config: &Path, log: &Path, env: &[(&str, &str)]) -> Self {
        let log_file = File::options()
            .create(true)
            .append(true)
            .open(log)
            .expect("log file");
        let log_start = std::fs::metadata(log).map_or(0, |m| m.len() as usize);
        let child = Command::new(support::lakejoin_bin())
            .args(["run", "-c"])
            .arg(config)
            .env("RUST_LOG", "lakejoin=debug,info")
            .env("RUST_BACKTRACE", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log file"))
            .stderr(log_file)
            .spawn()
            .expect("start lakejoin run");
        LakejoinProcess {
            child: Some(child),
            log: log.to_owned(),
            log_start,
        }
    }

    /// What this process logged (not the runs before it in the same file).
    pub fn log_text(&self) -> String {
        let all = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(all.get(self.log_start..).unwrap_or_default()).into_owned()
    }

    /// Waits until the log has a line containing `needle` (panics with the log after
    /// 90 s, or when the process exits first); returns that line.
    pub fn wait_for_log(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(line) = self.log_text().lines().find(|l| l.contains(needle)) {
                return line.to_owned();
            }
            self.assert_alive();
            assert!(
                Instant::now() < deadline,
                "no log line with {needle:?} within 90 s:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The address of the metrics and health endpoint, from the start-up log line (the
    /// test configs listen on port 0).
    pub fn endpoint(&mut self) -> SocketAddr {
        let line = self.wait_for_log("metrics on http://");
        let start = line.find("metrics on http://").expect("found") + "metrics on http://".len();
        let rest = &line[start..];
        let end = rest.find('/').expect("a path after the address");
        rest[..end]
            .parse()
            .unwrap_or_else(|e| panic!("endpoint address in {line:?}: {e}"))
    }

    /// Panics (with the log) when the process has exited.
    pub fn assert_alive(&mut self) {
        let child = self.child.as_mut().expect("running");
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("lakejoin run exited with {status}:\n{}", self.log_text());
        }
    }

    /// SIGKILL: no flush, no commit, no goodbye.
    pub fn kill_9(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("kill -9");
        child.wait().expect("wait");
    }

    /// Sends `signal` (`TERM`, `INT`) without waiting.
    pub fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("running");
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits up to `timeout` for the process to exit; its exit status, `None` if it runs on.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then waits for a clean exit; returns the log.
    pub fn terminate(mut self) -> String {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let log = self.log_text();
                assert!(
                    status.success(),
                    "lakejoin run exited with {status} after SIGTERM:\n{log}"
                );
                return log;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "lakejoin run did not exit within 60 s of SIGTERM:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LakejoinProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                eprintln!("--- lakejoin run log ---\n{}", self.log_text());
            }
        }
    }
}

/// `GET path` on `address`: the status code and body; `None` when nothing answers.
pub fn http_get(address: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The value of the sample `series` (name and labels, exactly as exposed) in a
/// Prometheus text exposition.
pub fn metric(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        line.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|value| value.parse().ok())
    })
}
