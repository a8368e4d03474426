//! The real change-data-capture chain for `debezium_mariadb.rs`: a MariaDB server, a Kafka
//! Connect standalone worker running Debezium's MariaDB connector, and for the Avro run
//! Apicurio Registry as the schema registry, all as child processes of the test.
//!
//! Why a module of its own: the parts are installed once by `scripts/debezium/install.sh`
//! (Debian's MariaDB unpacked into ~/.cache/lakejoin; Debezium, the worker, Apicurio
//! Registry and its Avro converter from Maven Central), and the processes need care a
//! plain `Command` does not give: MariaDB gets a temporary datadir and a free loopback port
//! that a restart keeps, the worker gets its own REST port and offsets file, the registry
//! its own HTTP and management ports (Quarkus would bind 0.0.0.0:9000 for the latter, and
//! parallel tests would collide), and all are stopped when the test ends however it ends.
//! The README's Debezium quick start is read from here too ([`readme_block`]), so the test
//! runs the blocks the README shows.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::broker::{free_port, tail};

/// Runs `scripts/debezium/install.sh <part>` once per test process; the directory it prints.
fn install(part: &'static str, cell: &'static OnceLock<PathBuf>) -> &'static Path {
    cell.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/debezium/install.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg(part)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "{} {part} failed (needs apt-get for MariaDB, mvn for Debezium):\n{}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
}

fn mariadb_home() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    install("mariadb", &DIR)
}

fn connect_home() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    install("connect", &DIR)
}

/// Apicurio Registry (`registry/`) and its Avro converter (`plugin/apicurio-converter`).
fn avro_home() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    install("avro", &DIR)
}

/// The directory to add to a worker's plugin path for Apicurio's Avro converter.
pub fn avro_plugin_dir() -> PathBuf {
    avro_home().join("plugin")
}

/// Polls `condition` every 200 ms until it holds or `timeout` passes; whether it held.
fn poll(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A MariaDB server on a free loopback port with its datadir in `dir`, the binlog in ROW
/// format with full row images (what Debezium needs). Stopped when dropped.
pub struct MariaDb {
    dir: PathBuf,
    pub port: u16,
    child: Option<Child>,
}

impl MariaDb {
    /// Initializes a datadir in `dir` (root without a password, loopback only) and starts
    /// the server.
    pub fn start(dir: &Path) -> Self {
        let home = mariadb_home();
        std::fs::create_dir_all(dir).expect("mariadb dir");
        let output = Command::new(home.join("usr/bin/mariadb-install-db"))
            .arg("--no-defaults")
            .arg(format!("--basedir={}", home.join("usr").display()))
            .arg(format!("--datadir={}", dir.join("data").display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
            ])
            .env("LD_LIBRARY_PATH", home.join("usr/lib/x86_64-linux-gnu"))
            .stdin(Stdio::null())
            .output()
            .expect("run mariadb-install-db");
        assert!(
            output.status.success(),
            "mariadb-install-db failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let mut db = MariaDb {
            dir: dir.to_owned(),
            port: free_port(),
            child: None,
        };
        db.start_server();
        db
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("mariadb.log")
    }

    /// Starts `mariadbd` on the datadir and port and waits until it answers a query.
    pub fn start_server(&mut self) {
        assert!(self.child.is_none(), "MariaDB already runs");
        let home = mariadb_home();
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("mariadb log");
        let child = Command::new(home.join("usr/sbin/mariadbd"))
            .arg("--no-defaults")
            .arg(format!("--basedir={}", home.join("usr").display()))
            .arg(format!("--datadir={}", self.dir.join("data").display()))
            .arg(format!(
                "--lc-messages-dir={}",
                home.join("usr/share/mysql").display()
            ))
            .arg(format!(
                "--socket={}",
                self.dir.join("mariadb.sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.dir.join("mariadb.pid").display()
            ))
            .arg(format!("--port={}", self.port))
            .args([
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-name-resolve",
                "--server-id=1",
                "--log-bin=binlog",
                "--binlog-format=ROW",
                "--binlog-row-image=FULL",
                "--innodb-buffer-pool-size=32M",
                "--performance-schema=OFF",
                // What Debian's packaged configuration sets; the server's own default is latin1.
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci",
            ])
            .env("LD_LIBRARY_PATH", home.join("usr/lib/x86_64-linux-gnu"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start mariadbd");
        self.child = Some(child);
        let ready = poll(Duration::from_secs(60), || {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("mariadbd exited with {status}:\n{}", self.log_tail());
            }
            self.try_sql("SELECT 1").is_ok()
        });
        assert!(
            ready,
            "MariaDB did not answer within 60 s:\n{}",
            self.log_tail()
        );
    }

    /// Stops the server as an orderly shutdown does (SIGTERM) and waits for it to exit.
    pub fn stop_server(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let exited = poll(Duration::from_secs(60), || {
            child.try_wait().ok().flatten().is_some()
        });
        if !exited {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mariadbd did not stop within 60 s:\n{}", self.log_tail());
        }
    }

    pub fn log_tail(&self) -> String {
        tail(
            &std::fs::read_to_string(self.log_path()).unwrap_or_default(),
            40,
        )
    }

    fn try_sql(&self, sql: &str) -> Result<String, String> {
        let home = mariadb_home();
        let output = Command::new(home.join("usr/bin/mariadb"))
            .arg("--no-defaults")
            .args([
                "-h",
                "127.0.0.1",
                "-P",
                &self.port.to_string(),
                "-u",
                "root",
            ])
            .args(["--batch", "--skip-column-names", "-e", sql])
            .env("LD_LIBRARY_PATH", home.join("usr/lib/x86_64-linux-gnu"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// Runs SQL statements as root; their output (tab-separated, no header).
    pub fn sql(&self, sql: &str) -> String {
        self.try_sql(sql)
            .unwrap_or_else(|e| panic!("SQL failed: {sql}\n{e}"))
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `key=value` lines of a Java properties text, in order (comments and blanks skipped).
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("not a key=value line: {l}"));
            (k.trim().to_owned(), v.trim().to_owned())
        })
        .collect()
}

/// Sets `key` in `properties` (in place when present, appended otherwise).
pub fn set_property(properties: &mut Vec<(String, String)>, key: &str, value: &str) {
    match properties.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value.to_owned(),
        None => properties.push((key.to_owned(), value.to_owned())),
    }
}

fn render_properties(properties: &[(String, String)]) -> String {
    properties
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

/// A Kafka Connect standalone worker (Kafka's `ConnectStandalone`) with Debezium's MariaDB
/// connector on its plugin path, running one connector. Killed when dropped.
pub struct ConnectWorker {
    dir: PathBuf,
    child: Option<Child>,
}

impl ConnectWorker {
    /// Starts a worker in `dir` with `worker` and `connector` properties as given, except
    /// `plugin.path` (Debezium's directory, then `more_plugins`),
    /// `offset.storage.file.filename` and `listeners` (a free REST port), which are this
    /// machine's.
    pub fn start(
        dir: &Path,
        mut worker: Vec<(String, String)>,
        connector: &[(String, String)],
        more_plugins: &[PathBuf],
    ) -> Self {
        let home = connect_home();
        std::fs::create_dir_all(dir).expect("connect dir");
        let plugin_path: Vec<String> = std::iter::once(home.join("plugin"))
            .chain(more_plugins.iter().cloned())
            .map(|p| p.display().to_string())
            .collect();
        set_property(&mut worker, "plugin.path", &plugin_path.join(","));
        set_property(
            &mut worker,
            "offset.storage.file.filename",
            &dir.join("connect.offsets").display().to_string(),
        );
        set_property(
            &mut worker,
            "listeners",
            &format!("http://127.0.0.1:{}", free_port()),
        );
        let worker_file = dir.join("connect-standalone.properties");
        let connector_file = dir.join("mariadb-source.properties");
        std::fs::write(&worker_file, render_properties(&worker)).expect("worker properties");
        std::fs::write(&connector_file, render_properties(connector)).expect("connector");
        let log4j = dir.join("log4j2.properties");
        std::fs::write(
            &log4j,
            "rootLogger.level = INFO\nrootLogger.appenderRef.stdout.ref = STDOUT\n\
             appender.stdout.type = Console\nappender.stdout.name = STDOUT\n\
             appender.stdout.layout.type = PatternLayout\n\
             appender.stdout.layout.pattern = [%d] %p %m (%c)%n\n",
        )
        .expect("log4j2.properties");
        let log = File::create(dir.join("connect.log")).expect("connect log");
        let child = Command::new("java")
            .args([
                "-Xms64m",
                "-Xmx512m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Djava.awt.headless=true",
            ])
            .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
            .arg("-cp")
            .arg(format!("{}/*", home.join("worker").display()))
            .arg("org.apache.kafka.connect.cli.ConnectStandalone")
            .arg(&worker_file)
            .arg(&connector_file)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start the Kafka Connect worker (java)");
        ConnectWorker {
            dir: dir.to_owned(),
            child: Some(child),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("connect.log")).unwrap_or_default()
    }

    /// How many lines of the log contain `needle`.
    pub fn count_in_log(&self, needle: &str) -> usize {
        self.log_text()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Waits (up to `timeout`) until the log has more than `before` lines containing
    /// `needle`; panics with the log's tail otherwise, or when the worker exits.
    pub fn wait_for_log(&mut self, needle: &str, before: usize, timeout: Duration) {
        let found = poll(timeout, || {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "the Connect worker exited with {status}:\n{}",
                    tail(&self.log_text(), 60)
                );
            }
            self.count_in_log(needle) > before
        });
        assert!(
            found,
            "the Connect worker logged no {needle:?} within {timeout:?}:\n{}",
            tail(&self.log_text(), 60)
        );
    }
}

impl Drop for ConnectWorker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Apicurio Registry with its in-memory storage on a free loopback port, answering the
/// Confluent API under `/apis/ccompat/v7` (what lakejoin reads) and its own under
/// `/apis/registry/v2` (what Apicurio's converter writes to). Killed when dropped.
pub struct SchemaRegistry {
    dir: PathBuf,
    pub port: u16,
    child: Option<Child>,
}

impl SchemaRegistry {
    /// Starts the registry in `dir` (its log and working directory) and waits until its
    /// Confluent API answers.
    pub fn start(dir: &Path) -> Self {
        let home = avro_home().join("registry");
        let runner = std::fs::read_dir(&home)
            .expect("the registry's directory")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with("-runner.jar"))
            })
            .unwrap_or_else(|| panic!("no *-runner.jar in {}", home.display()));
        std::fs::create_dir_all(dir).expect("registry dir");
        let port = free_port();
        let log = File::create(dir.join("registry.log")).expect("registry log");
        let child = Command::new("java")
            .args([
                "-Xms64m",
                "-Xmx384m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
            ])
            .arg(format!("-Dquarkus.http.port={port}"))
            .arg("-Dquarkus.http.host=127.0.0.1")
            .arg(format!("-Dquarkus.management.port={}", free_port()))
            .arg("-Dquarkus.management.host=127.0.0.1")
            .arg("-jar")
            .arg(&runner)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start Apicurio Registry (java)");
        let mut registry = SchemaRegistry {
            dir: dir.to_owned(),
            port,
            child: Some(child),
        };
        let timeout = Duration::from_secs(120);
        let ready = poll(timeout, || {
            if let Some(status) = registry
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "the registry exited with {status}:\n{}",
                    registry.log_tail()
                );
            }
            registry
                .get("/apis/ccompat/v7/subjects")
                .is_some_and(|(status, _)| status == 200)
        });
        assert!(
            ready,
            "the registry did not answer within {timeout:?}:\n{}",
            registry.log_tail()
        );
        registry
    }

    /// The base URL of the Confluent-compatible API (lakejoin's `schema_registry`).
    pub fn confluent_url(&self) -> String {
        format!("http://127.0.0.1:{}/apis/ccompat/v7", self.port)
    }

    /// The base URL of Apicurio's own v2 API (the converter's `apicurio.registry.url`).
    pub fn apicurio_url(&self) -> String {
        format!("http://127.0.0.1:{}/apis/registry/v2", self.port)
    }

    /// The Avro schema of a Confluent schema id, as the Confluent API gives it to lakejoin.
    pub fn schema(&self, id: u32) -> apache_avro::Schema {
        let (status, body) = self
            .get(&format!("/apis/ccompat/v7/schemas/ids/{id}"))
            .unwrap_or_else(|| panic!("the registry does not answer:\n{}", self.log_tail()));
        assert_eq!(status, 200, "schema id {id}: {body}");
        let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON answer");
        let text = answer["schema"].as_str().expect("a schema string");
        apache_avro::Schema::parse_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// The subjects the registry has (Confluent API).
    pub fn subjects(&self) -> Vec<String> {
        let (status, body) = self
            .get("/apis/ccompat/v7/subjects")
            .unwrap_or_else(|| panic!("the registry does not answer:\n{}", self.log_tail()));
        assert_eq!(status, 200, "subjects: {body}");
        serde_json::from_str(&body).expect("a JSON list of subjects")
    }

    /// The versions of `subject` (Confluent API).
    pub fn versions(&self, subject: &str) -> Vec<u32> {
        let (status, body) = self
            .get(&format!("/apis/ccompat/v7/subjects/{subject}/versions"))
            .unwrap_or_else(|| panic!("the registry does not answer:\n{}", self.log_tail()));
        assert_eq!(status, 200, "versions of {subject}: {body}");
        serde_json::from_str(&body).expect("a JSON list of versions")
    }

    /// `GET path`: the status and body; `None` when nothing answers. HTTP/1.0, so the
    /// answer is never chunked.
    fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        let status = head.split(' ').nth(1)?.parse().ok()?;
        Some((status, body.to_owned()))
    }

    pub fn log_tail(&self) -> String {
        tail(
            &std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default(),
            40,
        )
    }
}

impl Drop for SchemaRegistry {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The Avro datum of a Confluent-framed record (magic 0, 4-byte schema id, Avro binary),
/// decoded with its writer schema from `registry` by apache-avro, independently of
/// lakejoin's decoder.
pub fn confluent_avro(registry: &SchemaRegistry, bytes: &[u8]) -> apache_avro::types::Value {
    let [0, a, b, c, d, body @ ..] = bytes else {
        panic!("not a Confluent frame: {bytes:?}");
    };
    let schema = registry.schema(u32::from_be_bytes([*a, *b, *c, *d]));
    let mut body = body;
    let value = apache_avro::reader::datum::GenericDatumReader::builder(&schema)
        .build()
        .and_then(|reader| reader.read_value(&mut body))
        .unwrap_or_else(|e| panic!("the record does not decode with its schema: {e}"));
    assert!(body.is_empty(), "{} bytes after the datum", body.len());
    value
}

/// A field of a decoded Avro record (a union's branch unwrapped).
pub fn avro_field<'a>(
    value: &'a apache_avro::types::Value,
    name: &str,
) -> &'a apache_avro::types::Value {
    let apache_avro::types::Value::Record(fields) = value else {
        panic!("not a record: {value:?}");
    };
    let field = fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no field {name} in {value:?}"));
    match field {
        apache_avro::types::Value::Union(_, inner) => inner,
        other => other,
    }
}

/// The README's fenced code block of language `lang` whose first line is `first_line`
/// (the quick start labels each block with a comment naming its file).
pub fn readme_block(lang: &str, first_line: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let fence = format!("```{lang}\n");
    readme
        .split(fence.as_str())
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
        .find(|block| block.lines().next() == Some(first_line))
        .unwrap_or_else(|| panic!("the README has no ```{lang} block starting {first_line:?}"))
        .to_owned()
}

/// The properties of the README's block starting with `first_line`.
pub fn readme_properties(first_line: &str) -> Vec<(String, String)> {
    parse_properties(&readme_block("properties", first_line))
}
