//! `lakejoin run -c <generated config>` as a child process: its metrics/health endpoint,
//! its tables' snapshots, its memory, and a graceful stop.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

use crate::callgrind;
use crate::util::{tail, wait_for};

/// The binary under test: `LAKEJOIN_BIN`, or the one cargo built for this bench (release).
pub fn binary() -> PathBuf {
    std::env::var_os("LAKEJOIN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_lakejoin")))
}

/// A lakejoin under test: its binary and the librdkafka properties its clients get
/// (`key=value,key=value`). Every lakejoin process of a run is the one of
/// [`Variant::from_env`], except in a comparison (benches/throughput/compare.rs), where the
/// measured cases alternate between two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub binary: PathBuf,
    pub kafka_properties: String,
    /// The valgrind that counts the instructions of the measured processes
    /// (callgrind.rs), with `INSTRUCTIONS=1`.
    pub callgrind: Option<PathBuf>,
}

impl Variant {
    /// [`binary`] with `LAKEJOIN_KAFKA_PROPERTIES`; under callgrind with `INSTRUCTIONS=1`
    /// (`VALGRIND`, or `valgrind` on the PATH).
    pub fn from_env() -> Self {
        let counting = std::env::var("INSTRUCTIONS").is_ok_and(|v| !v.is_empty() && v != "0");
        Variant {
            binary: binary(),
            kafka_properties: std::env::var("LAKEJOIN_KAFKA_PROPERTIES").unwrap_or_default(),
            callgrind: counting.then(|| {
                std::env::var_os("VALGRIND")
                    .map_or_else(|| PathBuf::from("valgrind"), PathBuf::from)
            }),
        }
    }
}

/// The `[[table]]` definitions, by name.
pub fn table(name: &str) -> &'static str {
    match name {
        "shop.customers" => {
            r#"
[[table]]
name = "shop.customers"
columns = [
  { name = "id", type = "BIGINT" },
  { name = "name", type = "STRING" },
  { name = "email", type = "STRING" },
  { name = "country", type = "STRING" },
  { name = "region", type = "STRING" },
  { name = "segment", type = "STRING" },
  { name = "signup_date", type = "STRING" },
  { name = "credit_limit", type = "DOUBLE" },
  { name = "active", type = "BOOLEAN" },
  { name = "updated_at", type = "BIGINT" },
]
primary_key = ["id"]
buckets = 4
"#
        }
        "shop.customer_profile" => {
            r#"
[[table]]
name = "shop.customer_profile"
columns = [
  { name = "customer_id", type = "BIGINT" },
  { name = "tier", type = "STRING" },
  { name = "lifetime_value", type = "DOUBLE" },
  { name = "orders_count", type = "INT" },
  { name = "preferred_channel", type = "STRING" },
  { name = "last_seen", type = "BIGINT" },
]
primary_key = ["customer_id"]
buckets = 4
"#
        }
        "shop.regions" => {
            r#"
[[table]]
name = "shop.regions"
columns = [
  { name = "code", type = "STRING" },
  { name = "name", type = "STRING" },
  { name = "timezone", type = "STRING" },
  { name = "currency", type = "STRING" },
  { name = "tax_rate", type = "DOUBLE" },
]
primary_key = ["code"]
buckets = 1
"#
        }
        "shop.orders" => {
            r#"
[[table]]
name = "shop.orders"
columns = [
  { name = "order_id", type = "BIGINT" },
  { name = "customer_id", type = "BIGINT" },
  { name = "sku", type = "STRING" },
  { name = "quantity", type = "INT" },
  { name = "unit_price", type = "DOUBLE" },
  { name = "currency", type = "STRING" },
  { name = "channel", type = "STRING" },
  { name = "status", type = "STRING" },
  { name = "shipping_city", type = "STRING" },
  { name = "created_at", type = "BIGINT" },
]
primary_key = ["order_id"]
buckets = 4
"#
        }
        other => panic!("no table definition for {other}"),
    }
}

/// The head of every config: broker, warehouse, endpoint on a free port, and the
/// librdkafka `properties` (`key=value,key=value`), to measure client settings against
/// lakejoin's defaults (the harness's own loops keep theirs).
pub fn config_head(bootstrap: &str, group: &str, warehouse: &Path, properties: &str) -> String {
    let properties: String = properties
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| format!("{k:?} = {v:?}\n"))
        .collect();
    format!(
        r#"[kafka]
bootstrap_servers = "{bootstrap}"
group_id = "{group}"

[kafka.properties]
{properties}
[warehouse]
uri = "file://{}"

[observe]
listen = "127.0.0.1:0"
"#,
        warehouse.display()
    )
}

/// A running `lakejoin run`; killed when dropped.
pub struct Lakejoin {
    child: Option<Child>,
    log: PathBuf,
    pub endpoint: SocketAddr,
    /// Where callgrind writes its counts, when the process runs under it.
    callgrind_out: Option<PathBuf>,
}

impl Lakejoin {
    /// Writes `config` to `<dir>/<name>.toml`, starts `bin run` on it (log in
    /// `<dir>/<name>.log`) and waits for its endpoint.
    pub fn start(dir: &Path, name: &str, config: &str, bin: &Path) -> Result<Self> {
        Self::spawn(dir, name, config, bin, None)
    }

    /// [`Lakejoin::start`] of a variant under test: under callgrind when it counts
    /// instructions (into `<dir>/<name>.callgrind`).
    pub fn start_variant(dir: &Path, name: &str, config: &str, variant: &Variant) -> Result<Self> {
        Self::spawn(
            dir,
            name,
            config,
            &variant.binary,
            variant.callgrind.as_deref(),
        )
    }

    /// How many times longer than natively a step of this process may take.
    fn slowdown(&self) -> u32 {
        if self.callgrind_out.is_some() {
            callgrind::SLOWDOWN
        } else {
            1
        }
    }

    fn spawn(
        dir: &Path,
        name: &str,
        config: &str,
        bin: &Path,
        valgrind: Option<&Path>,
    ) -> Result<Self> {
        let config_path = dir.join(format!("{name}.toml"));
        std::fs::write(&config_path, config)
            .with_context(|| format!("writing {}", config_path.display()))?;
        let log = dir.join(format!("{name}.log"));
        let log_file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let callgrind_out = valgrind.map(|_| dir.join(format!("{name}.callgrind")));
        let mut command = match (valgrind, &callgrind_out) {
            (Some(valgrind), Some(out)) => callgrind::command(valgrind, out, bin),
            _ => Command::new(bin),
        };
        let child = command
            .args(["run", "-c"])
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut process = Lakejoin {
            child: Some(child),
            log,
            endpoint: SocketAddr::from(([127, 0, 0, 1], 0)),
            callgrind_out,
        };
        let mut line = String::new();
        let needle = "metrics on http://";
        wait_for(
            &format!("{name}: the endpoint's log line"),
            Duration::from_secs(60) * process.slowdown(),
            || {
                process.check_alive()?;
                if let Some(l) = process.log_text().lines().find(|l| l.contains(needle)) {
                    line = l.to_owned();
                    return Ok(true);
                }
                Ok(false)
            },
        )?;
        let rest = &line[line.find(needle).unwrap_or(0) + needle.len()..];
        let address = &rest[..rest.find('/').unwrap_or(rest.len())];
        process.endpoint = address
            .parse()
            .with_context(|| format!("endpoint address in {line:?}"))?;
        Ok(process)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An error with the log's tail when the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        let child = self.child.as_mut().context("process already stopped")?;
        if let Some(status) = child.try_wait()? {
            bail!(
                "lakejoin run exited with {status}; log {}:\n{}",
                self.log.display(),
                tail(&self.log_text(), 30)
            );
        }
        Ok(())
    }

    /// `/metrics`, the whole exposition.
    pub fn metrics(&self) -> Result<String> {
        match http_get(self.endpoint, "/metrics", self.slowdown())? {
            (200, body) => Ok(body),
            (status, body) => bail!("/metrics answered {status}: {body}"),
        }
    }

    /// Waits until `/health/ready` answers 200.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let endpoint = self.endpoint;
        let slowdown = self.slowdown();
        wait_for("/health/ready to answer 200", timeout, || {
            self.check_alive()?;
            Ok(matches!(
                http_get(endpoint, "/health/ready", slowdown),
                Ok((200, _))
            ))
        })
    }

    /// [`Lakejoin::stop`], then the instructions callgrind counted (`None`: the process
    /// did not run under it).
    pub fn stop_counting(self) -> Result<Option<u64>> {
        let out = self.callgrind_out.clone();
        self.stop()?;
        let Some(out) = out else { return Ok(None) };
        let text = std::fs::read_to_string(&out)
            .with_context(|| format!("reading callgrind's counts {}", out.display()))?;
        callgrind::total_instructions(&text)
            .map(Some)
            .with_context(|| format!("no total in {}", out.display()))
    }

    /// SIGTERM and a clean exit (a graceful stop commits tables and offsets).
    pub fn stop(mut self) -> Result<()> {
        let stop_within = Duration::from_secs(90) * self.slowdown();
        let mut child = self.child.take().context("process already stopped")?;
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .context("kill -TERM")?;
        if !status.success() {
            bail!("kill -TERM {} failed", child.id());
        }
        let deadline = Instant::now() + stop_within;
        loop {
            if let Some(status) = child.try_wait()? {
                if !status.success() {
                    bail!(
                        "lakejoin run exited with {status} after SIGTERM:\n{}",
                        tail(&self.log_text(), 30)
                    );
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("lakejoin run did not stop within {stop_within:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Lakejoin {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `GET path`: status and body; a process under callgrind gets `slowdown` times longer to
/// answer.
pub fn http_get(address: SocketAddr, path: &str, slowdown: u32) -> Result<(u16, String)> {
    let within = Duration::from_secs(10) * slowdown;
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5) * slowdown)
        .with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(within))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .with_context(|| format!("GET {path} from {address}: no whole answer within {within:?}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("malformed HTTP response from {address}{path}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// The value of `series` (name with labels, exactly as exposed) in an exposition.
pub fn metric(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        line.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|value| value.parse().ok())
    })
}

/// One snapshot of a table: id, commit time, and the Kafka records it covers for a
/// pipeline (the sum of the next offsets in `lakejoin.offsets.<pipeline>`).
#[derive(Debug, Clone)]
pub struct SnapshotInfo {
    pub id: u64,
    pub time_millis: i64,
    pub covered: Option<u64>,
}

/// Every snapshot of `<warehouse>/<db>.db/<table>`, by id.
pub fn snapshots(warehouse: &Path, table: &str, pipeline: &str) -> Result<Vec<SnapshotInfo>> {
    let (db, name) = table.split_once('.').context("db.table")?;
    let dir = warehouse
        .join(format!("{db}.db"))
        .join(name)
        .join("snapshot");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = file_name
            .strip_prefix("snapshot-")
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        let text = match std::fs::read_to_string(entry.path()) {
            Ok(text) => text,
            // Expiry may remove a snapshot between listing and reading it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {file_name}")),
        };
        let snapshot: Value = serde_json::from_str(&text)
            .with_context(|| format!("parsing {}", entry.path().display()))?;
        let time_millis = snapshot["timeMillis"]
            .as_i64()
            .with_context(|| format!("{file_name} has no timeMillis"))?;
        let covered = match snapshot["properties"][format!("lakejoin.offsets.{pipeline}")].as_str()
        {
            None => None,
            Some(text) => {
                let parsed: Value = serde_json::from_str(text)
                    .with_context(|| format!("offsets property of {file_name}"))?;
                // {"topic": {"partition": next offset, …}, …}
                let sum = parsed
                    .as_object()
                    .into_iter()
                    .flat_map(|topics| topics.values())
                    .filter_map(Value::as_object)
                    .flat_map(|partitions| partitions.values())
                    .map(|next| next.as_i64().unwrap_or(0).max(0) as u64)
                    .sum();
                Some(sum)
            }
        };
        out.push(SnapshotInfo {
            id,
            time_millis,
            covered,
        });
    }
    out.sort_by_key(|s| s.id);
    Ok(out)
}

/// Whether the newest snapshot of `table` that records `pipeline`'s offsets covers
/// `records` Kafka records (the sum of its next offsets: the topics start at offset 0 and
/// their offsets are dense).
pub fn covers(warehouse: &Path, table: &str, pipeline: &str, records: u64) -> Result<bool> {
    Ok(snapshots(warehouse, table, pipeline)?
        .iter()
        .rev()
        .find_map(|s| s.covered)
        .is_some_and(|covered| covered >= records))
}
