//! Table maintenance by lakejoin (automatic and full compaction, snapshot expiry, orphan
//! cleaning) on tables that pypaimon 2.1.0 reads and writes too.
//!
//! Every test drives the real `lakejoin` binary and pypaimon (through
//! `integration-tests/py/maintenance_oracle.py`) on one table directory and checks both
//! readers against each other and against an in-test model.
//!
//! Needs the Python environment of `scripts/test.sh`: `LAKEJOIN_PYTHON`, else
//! `<crate>/.venv/bin/python`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const TABLE: &str = "db.t";

fn python() -> PathBuf {
    let python = std::env::var_os("LAKEJOIN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    assert!(
        python.exists(),
        "no Python with pypaimon at {}: run scripts/test.sh (it creates .venv) or set \
         LAKEJOIN_PYTHON to a Python that has pypaimon 2.1.0",
        python.display()
    );
    python
}

fn oracle() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("integration-tests/py/maintenance_oracle.py")
}

/// Longest one lakejoin or pypaimon run may take before the test fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(300);

/// Runs `command`, feeding `stdin`; panics with both outputs unless it succeeds within
/// [`DEADLINE`].
fn run(mut command: Command, stdin: Option<&str>, what: &str) -> (String, String) {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("starting {what}: {e}"));
    {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        if let Some(text) = stdin {
            pipe.write_all(text.as_bytes()).expect("writing stdin");
        }
    }
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait().expect("polling the child") {
            Some(status) => break status,
            None if started.elapsed() > DEADLINE => {
                let _ = child.kill();
                panic!("{what} did not finish within {DEADLINE:?}");
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let stdout = stdout.join().expect("stdout reader");
    let stderr = stderr.join().expect("stderr reader");
    assert!(
        status.success(),
        "{what} failed ({status}):\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// A warehouse in a temporary directory holding the table `db.t`.
struct Fixture {
    _dir: tempfile::TempDir,
    warehouse: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let warehouse = dir.path().join("warehouse");
        std::fs::create_dir_all(&warehouse).expect("warehouse dir");
        Fixture {
            _dir: dir,
            warehouse,
        }
    }

    fn table_dir(&self) -> PathBuf {
        self.warehouse.join("db.db/t")
    }

    fn lakejoin(&self, args: &[&str], stdin: Option<&str>) -> (String, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_lakejoin"));
        command.arg("table").arg(args[0]);
        command
            .arg("--warehouse")
            .arg(&self.warehouse)
            .arg("--table")
            .arg(TABLE);
        command.args(&args[1..]);
        run(
            command,
            stdin,
            &format!("lakejoin table {}", args.join(" ")),
        )
    }

    fn py(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut command = Command::new(python());
        command.arg(oracle()).arg(args[0]);
        command
            .arg("--warehouse")
            .arg(&self.warehouse)
            .arg("--table")
            .arg(TABLE);
        command.args(&args[1..]);
        run(command, stdin, &format!("pypaimon {}", args.join(" "))).0
    }

    /// Creates the table with lakejoin: k INT (primary key), v BIGINT, s STRING.
    fn lj_create(&self, options: &[&str]) {
        let mut args = vec![
            "create",
            "--column",
            "k:INT",
            "--column",
            "v:BIGINT",
            "--column",
            "s:STRING",
            "--primary-key",
            "k",
            "--buckets",
            "2",
        ];
        for option in options {
            args.push("--option");
            args.push(option);
        }
        self.lakejoin(&args, None);
    }

    fn py_create(&self) {
        self.py(&["create", "--buckets", "2"], None);
    }

    /// One lakejoin commit; rows carry their kind in `op`.
    fn lj_write(&self, rows: &[Value]) {
        let lines: String = rows.iter().map(|r| format!("{r}\n")).collect();
        self.lakejoin(&["write", "--row-kind-field", "op"], Some(&lines));
    }

    /// One pypaimon commit of upserts.
    fn py_write(&self, rows: &[Value]) {
        let lines: String = rows.iter().map(|r| format!("{r}\n")).collect();
        self.py(&["write"], Some(&lines));
    }

    fn lj_rows(&self, snapshot: Option<i64>) -> Vec<Value> {
        let id = snapshot.map(|s| s.to_string());
        let mut args = vec!["scan"];
        if let Some(id) = &id {
            args.extend(["--snapshot", id.as_str()]);
        }
        let (out, _) = self.lakejoin(&args, None);
        out.lines()
            .map(|l| serde_json::from_str(l).expect("scan prints JSON lines"))
            .collect()
    }

    fn py_rows(&self, snapshot: Option<i64>) -> Vec<Value> {
        let id = snapshot.map(|s| s.to_string());
        let mut args = vec!["read"];
        if let Some(id) = &id {
            args.extend(["--snapshot", id.as_str()]);
        }
        let out = self.py(&args, None);
        serde_json::from_str(&out).expect("oracle prints a JSON list")
    }

    fn py_files(&self) -> Vec<Value> {
        serde_json::from_str(&self.py(&["files"], None)).expect("oracle prints a JSON list")
    }

    fn py_snapshot_ids(&self) -> Vec<i64> {
        serde_json::from_str(&self.py(&["snapshots"], None)).expect("oracle prints a JSON list")
    }

    /// (id, commitKind) of lakejoin's view of the snapshots.
    fn snapshots(&self) -> Vec<(i64, String)> {
        let (out, _) = self.lakejoin(&["snapshots"], None);
        out.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("snapshots prints JSON lines");
                (
                    v["id"].as_i64().expect("id"),
                    v["commitKind"].as_str().expect("commitKind").to_string(),
                )
            })
            .collect()
    }

    /// pypaimon and lakejoin both read exactly `expected` (at `snapshot`, or the latest).
    fn assert_both_read(&self, snapshot: Option<i64>, expected: &[Value], context: &str) {
        let py = self.py_rows(snapshot);
        assert_eq!(py, expected, "{context}: pypaimon's rows");
        let lj = self.lj_rows(snapshot);
        assert_eq!(lj, expected, "{context}: lakejoin's rows");
    }

    /// Sorted runs per bucket as pypaimon sees the latest snapshot's files.
    fn sorted_runs(&self) -> BTreeMap<i64, usize> {
        let mut level0: BTreeMap<i64, usize> = BTreeMap::new();
        let mut upper: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
        for f in self.py_files() {
            let bucket = f["bucket"].as_i64().expect("bucket");
            match f["level"].as_i64().expect("level") {
                0 => *level0.entry(bucket).or_default() += 1,
                level => {
                    upper.entry(bucket).or_default().insert(level);
                }
            }
        }
        let mut runs = level0;
        for (bucket, levels) in upper {
            *runs.entry(bucket).or_default() += levels.len();
        }
        runs
    }
}

/// Key → row, the rows a deduplicate table must hold.
#[derive(Debug, Default)]
struct Model(BTreeMap<i64, Value>);

impl Model {
    fn apply(&mut self, change: &Value) {
        let k = change["k"].as_i64().expect("k");
        match change["op"].as_str() {
            Some("-D") => {
                self.0.remove(&k);
            }
            _ => {
                self.0
                    .insert(k, json!({"k": k, "v": change["v"], "s": change["s"]}));
            }
        }
    }

    fn rows(&self) -> Vec<Value> {
        self.0.values().cloned().collect()
    }
}

/// `n` random changes over keys `0..keys`: upserts, and deletes when `deletes`.
fn changes(rng: &mut StdRng, n: usize, keys: i64, deletes: bool) -> Vec<Value> {
    (0..n)
        .map(|_| {
            let k = rng.random_range(0..keys);
            if deletes && rng.random_bool(0.2) {
                json!({"k": k, "v": null, "s": null, "op": "-D"})
            } else {
                let s = if rng.random_bool(0.2) {
                    Value::Null
                } else {
                    json!(format!("text-{}", rng.random_range(0..1000)))
                };
                json!({"k": k, "v": rng.random_range(-1_000_000i64..1_000_000), "s": s, "op": "+I"})
            }
        })
        .collect()
}

/// The same changes without `op`, for pypaimon (which writes upserts only).
fn upserts(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .map(|r| json!({"k": r["k"], "v": r["v"], "s": r["s"]}))
        .collect()
}

fn backdate(path: &Path, age: Duration) {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open for mtime");
    file.set_modified(SystemTime::now() - age)
        .expect("set mtime");
}

#[test]
fn pypaimon_reads_lakejoin_tables_through_auto_and_full_compaction() {
    let f = Fixture::new();
    f.lj_create(&[]);
    let mut rng = StdRng::seed_from_u64(21);
    let mut model = Model::default();
    for commit in 1..=14 {
        let rows = changes(&mut rng, 12, 30, true);
        f.lj_write(&rows);
        rows.iter().for_each(|r| model.apply(r));
        f.assert_both_read(None, &model.rows(), &format!("after commit {commit}"));
        let runs = f.sorted_runs();
        assert!(
            runs.values().all(|&r| r <= 5),
            "commit {commit}: sorted runs {runs:?} above the trigger"
        );
    }
    let snapshots = f.snapshots();
    assert!(
        snapshots.iter().any(|(_, kind)| kind == "COMPACT"),
        "automatic compaction never ran: {snapshots:?}"
    );
    // Every snapshot, COMPACT ones included, reads the same in both.
    for (id, kind) in &snapshots {
        let py = f.py_rows(Some(*id));
        assert_eq!(py, f.lj_rows(Some(*id)), "snapshot {id} ({kind})");
    }
    f.lakejoin(&["compact"], None);
    f.assert_both_read(None, &model.rows(), "after `table compact`");
    let (_, stderr) = f.lakejoin(&["compact", "--full"], None);
    assert!(stderr.contains("COMPACT"), "{stderr}");
    f.assert_both_read(None, &model.rows(), "after `table compact --full`");
    for file in f.py_files() {
        assert_eq!(file["level"], 5, "{file}");
        assert_eq!(file["deleteRows"], 0, "{file}");
    }
}

#[test]
fn pypaimon_appends_on_top_of_a_compacted_table_and_both_readers_agree() {
    let f = Fixture::new();
    f.lj_create(&[]);
    let mut rng = StdRng::seed_from_u64(22);
    let mut model = Model::default();
    for _ in 0..7 {
        let rows = changes(&mut rng, 10, 25, true);
        f.lj_write(&rows);
        rows.iter().for_each(|r| model.apply(r));
    }
    f.lakejoin(&["compact", "--full"], None);
    f.assert_both_read(None, &model.rows(), "compacted");
    for round in 0..3 {
        let rows = changes(&mut rng, 8, 25, false);
        f.py_write(&upserts(&rows));
        rows.iter().for_each(|r| model.apply(r));
        f.assert_both_read(None, &model.rows(), &format!("pypaimon append {round}"));
    }
    // lakejoin deletes on top of pypaimon's level-0 files and compacts them with its own.
    let rows = changes(&mut rng, 15, 25, true);
    f.lj_write(&rows);
    rows.iter().for_each(|r| model.apply(r));
    f.assert_both_read(None, &model.rows(), "lakejoin after pypaimon");
    f.lakejoin(&["compact"], None);
    f.assert_both_read(
        None,
        &model.rows(),
        "universal compaction over both writers",
    );
    let rows = changes(&mut rng, 8, 25, false);
    f.py_write(&upserts(&rows));
    rows.iter().for_each(|r| model.apply(r));
    f.lakejoin(&["compact", "--full"], None);
    f.assert_both_read(None, &model.rows(), "full compaction over both writers");
}

#[test]
fn lakejoin_compacts_a_table_pypaimon_grew() {
    let f = Fixture::new();
    f.py_create();
    let mut rng = StdRng::seed_from_u64(23);
    let mut model = Model::default();
    for _ in 0..20 {
        let rows = changes(&mut rng, 5, 16, false);
        f.py_write(&upserts(&rows));
        rows.iter().for_each(|r| model.apply(r));
    }
    let files = f.py_files();
    assert!(files.len() >= 20, "pypaimon wrote {} files", files.len());
    assert!(files.iter().all(|file| file["level"] == 0));
    f.assert_both_read(None, &model.rows(), "pypaimon's 20 commits");

    let (_, stderr) = f.lakejoin(&["compact"], None);
    assert!(stderr.contains("committed COMPACT snapshot"), "{stderr}");
    let runs = f.sorted_runs();
    assert!(runs.values().all(|&r| r <= 5), "{runs:?}");
    f.assert_both_read(None, &model.rows(), "after lakejoin's universal compaction");

    // pypaimon keeps writing on top (sequence numbers continue past the compacted files).
    for _ in 0..2 {
        let rows = changes(&mut rng, 6, 16, false);
        f.py_write(&upserts(&rows));
        rows.iter().for_each(|r| model.apply(r));
    }
    f.assert_both_read(None, &model.rows(), "pypaimon after compaction");
    f.lakejoin(&["compact", "--full"], None);
    f.assert_both_read(None, &model.rows(), "full compaction");
    assert!(f.py_files().iter().all(|file| file["level"] == 5));

    // Expiry on the pypaimon-grown table; pypaimon still reads and writes it.
    f.lakejoin(&["expire", "--retain-max", "3"], None);
    let ids = f.py_snapshot_ids();
    assert_eq!(ids.len(), 3, "{ids:?}");
    f.assert_both_read(None, &model.rows(), "after expiry");
    let rows = changes(&mut rng, 6, 16, false);
    f.py_write(&upserts(&rows));
    rows.iter().for_each(|r| model.apply(r));
    f.assert_both_read(None, &model.rows(), "pypaimon append after expiry");
}

#[test]
fn pypaimon_reads_after_expiry_and_orphan_cleaning() {
    let f = Fixture::new();
    f.lj_create(&[]);
    let mut rng = StdRng::seed_from_u64(24);
    let mut model = Model::default();
    let mut at: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    for _ in 0..12 {
        let rows = changes(&mut rng, 10, 20, true);
        f.lj_write(&rows);
        rows.iter().for_each(|r| model.apply(r));
        for (id, _) in f.snapshots() {
            at.entry(id).or_insert_with(|| model.rows());
        }
    }
    let all: Vec<i64> = f.snapshots().into_iter().map(|(id, _)| id).collect();
    let latest = *all.last().expect("snapshots");
    // Young snapshots are protected by the default time retention and minimum count.
    let (_, stderr) = f.lakejoin(&["expire"], None);
    assert!(stderr.contains("no snapshot to expire"), "{stderr}");

    let (_, stderr) = f.lakejoin(&["expire", "--retain-max", "4"], None);
    assert!(stderr.contains("expired snapshots 1..="), "{stderr}");
    let kept: Vec<i64> = (latest - 3..=latest).collect();
    assert_eq!(f.py_snapshot_ids(), kept);
    let earliest =
        std::fs::read_to_string(f.table_dir().join("snapshot/EARLIEST")).expect("EARLIEST");
    assert_eq!(earliest.trim(), (latest - 3).to_string());
    for id in &kept {
        f.assert_both_read(Some(*id), &at[id], &format!("time travel to {id}"));
    }

    // Leftovers of a failed write, old enough to be orphans, and a fresh one.
    let junk = f.table_dir().join("bucket-0/data-left-behind.parquet");
    std::fs::write(&junk, b"not parquet").expect("junk");
    let tmp = f.table_dir().join("snapshot/.snapshot-99.3c1d.tmp");
    std::fs::write(&tmp, b"{}").expect("tmp");
    let fresh = f.table_dir().join("bucket-1/data-in-flight.parquet");
    let mut stack = vec![f.table_dir()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                backdate(&path, Duration::from_secs(2 * 86_400));
            }
        }
    }
    std::fs::write(&fresh, b"being written").expect("fresh");

    let (dry, _) = f.lakejoin(&["clean-orphans", "--dry-run"], None);
    assert_eq!(
        dry.lines().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            "bucket-0/data-left-behind.parquet",
            "snapshot/.snapshot-99.3c1d.tmp"
        ])
    );
    assert!(junk.exists() && tmp.exists());
    let (removed, stderr) = f.lakejoin(&["clean-orphans", "--older-than", "1d"], None);
    assert_eq!(removed, dry, "{stderr}");
    assert!(!junk.exists() && !tmp.exists() && fresh.exists());
    for id in &kept {
        f.assert_both_read(
            Some(*id),
            &at[id],
            &format!("after cleaning, snapshot {id}"),
        );
    }
    // Both keep writing.
    let rows = changes(&mut rng, 10, 20, false);
    f.py_write(&upserts(&rows));
    rows.iter().for_each(|r| model.apply(r));
    let rows = changes(&mut rng, 10, 20, true);
    f.lj_write(&rows);
    rows.iter().for_each(|r| model.apply(r));
    f.assert_both_read(None, &model.rows(), "writes after expiry and cleaning");
}

/// pypaimon (like Java) skips level 0 of deletion-vector tables and concatenates the
/// higher levels; lakejoin's writes must still be visible to it, exactly once.
#[test]
fn deletion_vector_table_written_by_lakejoin_is_visible_to_pypaimon() {
    let f = Fixture::new();
    f.lj_create(&["deletion-vectors.enabled=true"]);
    let mut rng = StdRng::seed_from_u64(25);
    let mut model = Model::default();
    // A large first commit, then small updates of the same keys: compacting the small
    // ones alone would put a second version of their keys on another level.
    for commit in 1..=6 {
        let n = if commit == 1 { 300 } else { 6 };
        let rows = changes(&mut rng, n, 100, commit > 1);
        f.lj_write(&rows);
        rows.iter().for_each(|r| model.apply(r));
        assert!(f.py_files().iter().all(|file| file["level"] != 0));
        f.assert_both_read(None, &model.rows(), &format!("commit {commit}"));
    }
}
